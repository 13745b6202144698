//! How a trained or prompted method acts ([`Agent`]) and how it is evaluated: every
//! evaluation task once per seed, environments played side by side.

use hier_backbone::burn::module::Module;
use hier_backbone::{CausalLm, PrefillStats, SamplingConfig, Tokenizer};
use hier_envs::{Env, Split, Task};
use hier_train::eval::EpisodeResult;
use hier_train::policy::BackbonePolicy;
use serde::Serialize;

use crate::adapt::rollout_adapt;
use crate::agent::rollout;
use crate::envs::EnvKind;
use crate::error::Result;
use crate::flat::rollout_flat;
use crate::react::{PromptedSpec, Prompter, rollout_react};
use crate::reflexion::run_reflexion;
use crate::table1::data::EnvData;
use crate::table1::profile::EvalSpec;

/// How a trained (or prompted) method acts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Agent {
    /// Two LoRA roles (the same name twice for one shared adapter).
    Hierarchy {
        planner: String,
        executor: String,
    },
    Flat {
        policy: String,
    },
    /// The base model prompted: ReAct, Reflexion over ReAct, ADaPT.
    React,
    Reflexion,
    Adapt,
}

/// One split's evaluation tasks and their experts' path lengths.
pub(crate) type SplitTasks = (Split, Vec<Task>, Vec<Option<usize>>);

/// `n` instances of an environment, to play episodes side by side.
pub(crate) fn open_envs(kind: EnvKind, n: usize) -> Result<Vec<Box<dyn Env>>> {
    (0..n).map(|_| kind.open()).collect()
}

/// The results of `tasks` among `results`.
pub(crate) fn of_tasks(results: &[EpisodeResult], tasks: &[Task]) -> Vec<EpisodeResult> {
    results
        .iter()
        .filter(|r| tasks.contains(&r.task))
        .cloned()
        .collect()
}

/// What an evaluation played and what its prompts cost.
pub(crate) struct Evaluated {
    pub results: Vec<EpisodeResult>,
    pub traces: Vec<hier_train::policy::Trace>,
    /// Prompt tokens of every role's calls, and how many of them were prefilled (the rest
    /// came from the roles' prefix caches).
    pub prefill: PrefillStats,
}

/// Plays every evaluation task once per seed; every role keeps `prefix_cache_mib` MiB of
/// context across its calls.
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate(
    lm: &CausalLm,
    tok: &Tokenizer,
    env_name: EnvKind,
    d: &EnvData,
    agent: &Agent,
    eval_tasks: &[SplitTasks],
    spec: &EvalSpec,
    prompted: &PromptedSpec,
    max_len: usize,
    progress: bool,
    prefix_cache_mib: usize,
) -> Result<Evaluated> {
    let inference = lm.valid();
    let id = |name: &str| inference.adapter_id(name);
    let all: Vec<(Task, Option<usize>)> = eval_tasks
        .iter()
        .flat_map(|(_, t, l)| t.iter().cloned().zip(l.iter().copied()))
        .collect();
    let mut envs = open_envs(env_name, spec.parallel.min(all.len()))?;
    let seeds = match agent {
        Agent::Reflexion => &prompted.reflexion_seeds,
        _ => &spec.seeds,
    };
    let what = match agent {
        Agent::Hierarchy { executor, .. } => executor.clone(),
        Agent::Flat { policy } => policy.clone(),
        other => format!("{other:?}").to_lowercase(),
    };
    let bar = hier_train::runlog::progress_bar(
        progress,
        all.len() * seeds.len(),
        &format!("eval {what}"),
    );
    // Demonstrations of every kind of task the environment tells apart (ALFWorld's types),
    // read by one of the evaluation's own environments (none: nothing to play).
    let demos = match envs.first() {
        Some(env) => crate::react::demos(&d.flat, &d.sys2, prompted.demos, &|t| env.task_kind(t)),
        None => Vec::new(),
    };
    let prompter = Prompter {
        tokenizer: tok,
        demos,
        spec: prompted,
    };
    let (mut out, mut played) = (Vec::new(), Vec::new());
    let mut prefill = PrefillStats::default();
    for &seed in seeds {
        let sampling = |max_new_tokens| SamplingConfig {
            max_new_tokens,
            temperature: spec.temperature,
            top_k: Some(spec.top_k),
            top_p: Some(spec.top_p),
            seed,
            use_cache: true,
        };
        let role = |adapter, sampling, max_prompt| {
            let mut p = BackbonePolicy::new(&inference, tok, adapter, sampling)
                .with_prefix_cache_mib(prefix_cache_mib);
            p.max_prompt = Some(max_prompt);
            p
        };
        let fit = |budget: usize| max_len.saturating_sub(budget).max(1);
        let (mut exec, mut plan) = match agent {
            Agent::Hierarchy { planner, executor } => (
                role(
                    Some(id(executor)?),
                    sampling(spec.executor_max_tokens),
                    fit(spec.executor_max_tokens),
                ),
                Some(role(
                    Some(id(planner)?),
                    SamplingConfig::greedy(spec.planner_max_tokens),
                    fit(spec.planner_max_tokens),
                )),
            ),
            Agent::Flat { policy } => (
                role(
                    Some(id(policy)?),
                    sampling(spec.executor_max_tokens),
                    fit(spec.executor_max_tokens),
                ),
                None,
            ),
            _ => {
                let s = SamplingConfig {
                    max_new_tokens: prompted.max_tokens,
                    temperature: prompted.temperature,
                    top_k: Some(prompted.top_k),
                    top_p: Some(prompted.top_p),
                    seed,
                    use_cache: true,
                };
                let mut r = role(None, s, prompted.max_prompt);
                // Prompted agents speak through the chat template (`Prompter::chat`): a reply is
                // one assistant turn, and ends at the template's end-of-turn token too (an
                // instruct model otherwise writes on into turns it invents).
                r.stop_tokens
                    .push(tok.end_of_turn().map_err(hier_train::Error::from)?);
                (r, None)
            }
        };
        for chunk in all.chunks(envs.len()) {
            let tasks: Vec<Task> = chunk.iter().map(|(t, _)| t.clone()).collect();
            let envs = &mut envs[..tasks.len()];
            let steps = spec.rollout.max_steps;
            if let Agent::Reflexion = agent {
                let runs = run_reflexion(envs, &tasks, &mut exec, &prompter, steps, "eval")?;
                for (run, (task, len)) in runs.into_iter().zip(chunk) {
                    let last = run.trials.last().expect("at least one trial");
                    let mut r = EpisodeResult::of(last, task, seed, *len);
                    r.success = run.pass_at(prompter.spec.reflexion_trials);
                    r.pass1 = Some(run.pass_at(1));
                    r.tokens = run.tokens();
                    r.steps = run.trials.iter().map(|t| t.episode.actions.len()).sum();
                    out.push(r);
                    played.extend(run.trials);
                }
                bar.inc(tasks.len() as u64);
                continue;
            }
            let traces = match (agent, plan.as_mut()) {
                (Agent::Hierarchy { .. }, Some(p)) => {
                    rollout(envs, &tasks, p, &mut exec, &spec.rollout, "eval")?
                }
                (Agent::Flat { .. }, _) => {
                    rollout_flat(envs, &tasks, &mut exec, &spec.rollout, "eval")?
                }
                (Agent::React, _) => {
                    rollout_react(envs, &tasks, &mut exec, &prompter, &[], steps, "eval")?
                        .into_iter()
                        .map(|e| e.trace)
                        .collect()
                }
                (Agent::Adapt, _) => {
                    rollout_adapt(envs, &tasks, &mut exec, &prompter, steps, "eval")?
                }
                _ => unreachable!("every agent is handled"),
            };
            for (tr, (task, len)) in traces.iter().zip(chunk) {
                out.push(EpisodeResult::of(tr, task, seed, *len));
            }
            played.extend(traces);
            bar.inc(tasks.len() as u64);
        }
        for role in std::iter::once(&exec).chain(plan.as_ref()) {
            prefill.add(role.prefill_stats());
        }
    }
    bar.finish_and_clear();
    Ok(Evaluated {
        results: out,
        traces: played,
        prefill,
    })
}
