//! How a trained or prompted method acts ([`Agent`]) and how it is evaluated: every
//! evaluation task once per seed, environments played side by side, each finished batch kept
//! in a journal so that a killed evaluation resumes after it.

use std::path::Path;

use hier_backbone::burn::module::Module;
use hier_backbone::{CausalLm, PrefillStats, PrefixCache, SamplingConfig, Tokenizer};
use hier_envs::{Env, Split, Task};
use hier_train::eval::EpisodeResult;
use hier_train::journal::Journal;
use hier_train::policy::{BackbonePolicy, Trace};
use serde::{Deserialize, Serialize};

use crate::adapt::rollout_adapt;
use crate::agent::rollout;
use crate::envs::EnvKind;
use crate::error::{Error, Result};
use crate::flat::rollout_flat;
use crate::react::{PromptedSpec, Prompter, Trial, rollout_react};
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
    pub traces: Vec<Trace>,
    /// Prompt tokens of every role's calls, and how many of them were prefilled (the rest
    /// came from the roles' prefix caches).
    pub prefill: PrefillStats,
    /// Seconds that earlier, interrupted invocations spent on the batches read back from the
    /// journal (0 for an evaluation played in one go).
    pub earlier_seconds: f64,
}

/// One batch of episodes played side by side under one seed: a record of the evaluation's
/// journal ([`Journal`]), so that an evaluation killed half-way resumes after its last whole
/// batch.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    seed: u64,
    /// Calls each role had answered when the batch ended (the executor, then the planner):
    /// call `k` of a role samples with seed `seed + k`, so a resumed evaluation restores the
    /// counts and samples as an uninterrupted one.
    calls: Vec<u64>,
    /// What the batch's prompts cost.
    prefill: PrefillStats,
    seconds: f64,
    results: Vec<EpisodeResult>,
    traces: Vec<Trace>,
}

/// Plays every evaluation task once per seed, `spec.parallel` environments side by side;
/// every role keeps `prefix_cache_mib` MiB of context across the calls of a batch.
///
/// Each finished batch is appended to the journal at `journal` and a rerun resumes after the
/// last one it holds: the same episodes as an uninterrupted run, since every batch starts
/// from an empty prefix cache (a cache warmed by earlier batches would change the logits'
/// rounding) and the roles' call counts are restored from the journal.
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
    journal: &Path,
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
    let (mut journal, kept) = Journal::open::<Batch>(journal)?;
    let batches = seeds.len() * all.len().div_ceil(envs.len().max(1));
    if kept.len() > batches {
        return Err(hier_train::Error::checkpoint(
            journal.path(),
            format!(
                "holds {} batches, the evaluation plays {batches}: it was written by another \
                 evaluation (delete it to start over)",
                kept.len()
            ),
        )
        .into());
    }
    // The journal's episodes are replayed, not played: the bar starts past them.
    let bar = hier_train::runlog::progress_bar(
        progress,
        kept.iter().map(|b| b.results.len()).sum(),
        all.len() * seeds.len(),
        &format!("eval {what}"),
    );
    let mut kept = kept.into_iter();
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
    let mut done = Evaluated {
        results: Vec::new(),
        traces: Vec::new(),
        prefill: PrefillStats::default(),
        earlier_seconds: 0.0,
    };
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
            let mut p = BackbonePolicy::new(&inference, tok, adapter, sampling);
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
            if let Some(batch) = kept.next() {
                check_batch(&batch, journal.path(), done.results.len(), seed, &tasks)?;
                for (role, calls) in std::iter::once(&mut exec)
                    .chain(plan.as_mut())
                    .zip(&batch.calls)
                {
                    role.calls = *calls;
                }
                done.prefill.add(batch.prefill);
                done.earlier_seconds += batch.seconds;
                done.results.extend(batch.results);
                done.traces.extend(batch.traces);
                continue;
            }
            let started = std::time::Instant::now();
            let envs = &mut envs[..tasks.len()];
            let calls: Vec<u64> = std::iter::once(&exec)
                .chain(plan.as_ref())
                .map(|r| r.calls)
                .collect();
            let first = done.results.len() + 1;
            let (results, traces) = retrying(
                BATCH_RETRIES,
                || {
                    // Each attempt starts from the same state (call counts seed the sampling),
                    // so a replayed batch is the batch a run without the failure plays.
                    for (role, &n) in std::iter::once(&mut exec).chain(plan.as_mut()).zip(&calls) {
                        role.calls = n;
                        role.prefix_cache = PrefixCache::with_mib(&inference, prefix_cache_mib);
                    }
                    play_batch(
                        agent,
                        envs,
                        &tasks,
                        chunk,
                        seed,
                        &mut exec,
                        plan.as_mut(),
                        &prompter,
                        spec,
                    )
                },
                |e, retry| {
                    eprintln!(
                        "warning: {e}; playing episodes {first}–{} again (retry {retry} of \
                         {BATCH_RETRIES})",
                        first + tasks.len() - 1
                    )
                },
            )?;
            let mut prefill = PrefillStats::default();
            for role in std::iter::once(&exec).chain(plan.as_ref()) {
                prefill.add(role.prefill_stats());
            }
            let batch = Batch {
                seed,
                calls: std::iter::once(&exec)
                    .chain(plan.as_ref())
                    .map(|r| r.calls)
                    .collect(),
                prefill,
                seconds: started.elapsed().as_secs_f64(),
                results,
                traces,
            };
            journal.append(&batch)?;
            done.prefill.add(batch.prefill);
            done.results.extend(batch.results);
            done.traces.extend(batch.traces);
            bar.inc(tasks.len() as u64);
        }
    }
    bar.finish_and_clear();
    Ok(done)
}

/// Times a batch is played again after its environment's process died or stopped answering
/// (the environment restarts it; e.g. a JVM starved of memory by another process) before the
/// evaluation stops with the error; its finished batches stay in the journal either way.
const BATCH_RETRIES: usize = 2;

/// `play()`, played again up to `retries` times while it fails because an environment's
/// process died or stopped answering ([`Error::is_transient_env`]); `warn(error, retry)` before
/// each retry. Any other error, or the last, is returned.
fn retrying<T>(
    retries: usize,
    mut play: impl FnMut() -> Result<T>,
    mut warn: impl FnMut(&Error, usize),
) -> Result<T> {
    let mut retry = 0;
    loop {
        match play() {
            Err(e) if e.is_transient_env() && retry < retries => {
                retry += 1;
                warn(&e, retry);
            }
            played => return played,
        }
    }
}

/// Plays one batch of `tasks` (their experts' path lengths in `chunk`) under `seed`: one
/// result per task and every played trace (Reflexion: every trial).
#[allow(clippy::too_many_arguments)]
fn play_batch(
    agent: &Agent,
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    chunk: &[(Task, Option<usize>)],
    seed: u64,
    exec: &mut BackbonePolicy<'_>,
    plan: Option<&mut BackbonePolicy<'_>>,
    prompter: &Prompter<'_>,
    spec: &EvalSpec,
) -> Result<(Vec<EpisodeResult>, Vec<Trace>)> {
    let steps = &spec.rollout;
    if let Agent::Reflexion = agent {
        let runs = run_reflexion(envs, tasks, exec, prompter, steps, "eval")?;
        let mut results = Vec::new();
        let mut played = Vec::new();
        for (run, (task, len)) in runs.into_iter().zip(chunk) {
            let last = run.trials.last().expect("at least one trial");
            let mut r = EpisodeResult::of(last, task, seed, *len);
            r.success = run.pass_at(prompter.spec.reflexion_trials);
            r.pass1 = Some(run.pass_at(1));
            r.tokens = run.tokens();
            r.steps = run.trials.iter().map(|t| t.episode.actions.len()).sum();
            results.push(r);
            played.extend(run.trials);
        }
        return Ok((results, played));
    }
    let traces = match (agent, plan) {
        (Agent::Hierarchy { .. }, Some(p)) => rollout(envs, tasks, p, exec, &spec.rollout, "eval")?,
        (Agent::Flat { .. }, _) => rollout_flat(envs, tasks, exec, &spec.rollout, "eval")?,
        (Agent::React, _) => rollout_react(
            envs,
            tasks,
            exec,
            prompter,
            &Trial::default(),
            steps,
            "eval",
        )?
        .into_iter()
        .map(|e| e.trace)
        .collect(),
        (Agent::Adapt, _) => rollout_adapt(envs, tasks, exec, prompter, steps, "eval")?,
        _ => unreachable!("every agent is handled"),
    };
    let results = traces
        .iter()
        .zip(chunk)
        .map(|(tr, (task, len))| EpisodeResult::of(tr, task, seed, *len))
        .collect();
    Ok((results, traces))
}

/// Refuses a journal record that is not the batch the evaluation plays at this point (seed
/// `seed`, `tasks` in order), `first` episodes in.
fn check_batch(
    batch: &Batch,
    journal: &Path,
    first: usize,
    seed: u64,
    tasks: &[Task],
) -> Result<()> {
    let played: Vec<&Task> = batch.results.iter().map(|r| &r.task).collect();
    if batch.seed == seed && played.iter().copied().eq(tasks.iter()) {
        return Ok(());
    }
    let names = |ts: Vec<&Task>| {
        ts.iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(hier_train::Error::checkpoint(
        journal,
        format!(
            "the batch after episode {first} holds seed {} on [{}], the evaluation plays seed \
             {seed} on [{}]: it was written by another evaluation (delete it to start over)",
            batch.seed,
            names(played),
            names(tasks.iter().collect())
        ),
    )
    .into())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use hier_envs::textcraft::TextCraft;

    use super::*;
    use crate::table1::profile::Profile;
    use crate::table1::test_common as common;

    /// A batch whose environment died is played again, at most `retries` times; an error
    /// that would recur is returned at once.
    #[test]
    fn only_a_lost_environment_replays_a_batch_and_only_so_often() {
        use hier_envs::EnvError;
        let lost = || -> Error {
            hier_train::Error::env(
                "reset boil#0",
                EnvError::Timeout {
                    call: "reset([])".into(),
                    seconds: 95.0,
                },
            )
            .into()
        };
        let mut plays = 0;
        let mut warned = Vec::new();
        let got = retrying(
            2,
            || {
                plays += 1;
                if plays < 3 { Err(lost()) } else { Ok(plays) }
            },
            |e, k| warned.push((e.to_string(), k)),
        );
        assert_eq!(got.unwrap(), 3);
        assert_eq!(warned.iter().map(|w| w.1).collect::<Vec<_>>(), [1, 2]);
        assert!(warned[0].0.contains("reset boil#0"), "{warned:?}");
        // Out of retries: the third loss is the error.
        let mut plays = 0;
        let err = retrying(
            2,
            || -> Result<()> {
                plays += 1;
                Err(lost())
            },
            |_, _| {},
        )
        .unwrap_err();
        assert_eq!(plays, 3);
        assert!(err.is_transient_env());
        // In a stage's context too; an error that would recur is not replayed.
        let staged = Error::Stage {
            stage: "eval-flat-sft".into(),
            source: Box::new(lost()),
        };
        assert!(staged.is_transient_env());
        let mut plays = 0;
        let err = retrying(
            2,
            || -> Result<()> {
                plays += 1;
                Err(hier_train::Error::env(
                    "reset boil#99999",
                    EnvError::InvalidArgument("out of range".into()),
                )
                .into())
            },
            |_, _| {},
        )
        .unwrap_err();
        assert_eq!(plays, 1);
        assert!(!err.is_transient_env());
        let crashed: Error = hier_train::Error::from(EnvError::Crashed("JVM exited".into())).into();
        assert!(crashed.is_transient_env());
    }

    /// An evaluation killed after some batches — its journal cut back to them, with half a
    /// record behind — resumes to exactly the episodes and traces of one played in one go.
    #[test]
    fn a_killed_evaluation_resumes_from_its_journal_to_the_same_episodes() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/table1");
        let profile = Profile::from_file(&root.join("smoke.toml")).unwrap();
        let spec = EvalSpec {
            seeds: vec![0, 1],
            parallel: 2,
            ..profile.eval.clone()
        };
        let (lm, tok) = common::tiny();
        let tasks = TextCraft::from_assets()
            .unwrap()
            .tasks(Split::Train)
            .unwrap()[..3]
            .to_vec();
        let eval_tasks = vec![(Split::Train, tasks.clone(), vec![None; tasks.len()])];
        let d = EnvData {
            sys1: Vec::new(),
            sys2: Vec::new(),
            flat: Vec::new(),
        };
        let agent = Agent::Hierarchy {
            planner: "sys1".into(),
            executor: "sys2".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let evaluate_into = |journal: &Path| {
            evaluate(
                &lm,
                &tok,
                EnvKind::Textcraft,
                &d,
                &agent,
                &eval_tasks,
                &spec,
                &profile.prompted,
                256,
                false,
                hier_train::policy::DEFAULT_PREFIX_CACHE_MIB,
                journal,
            )
        };
        let play = |journal: &Path| evaluate_into(journal).unwrap();
        let whole = dir.path().join("whole.jsonl");
        let once = play(&whole);
        assert_eq!(once.results.len(), 6, "3 tasks × 2 seeds");
        assert_eq!(once.earlier_seconds, 0.0);
        let lines: Vec<String> = std::fs::read_to_string(&whole)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(lines.len(), 4, "batches of 2 and 1 tasks, per seed");

        // Killed while writing the second batch (the last of seed 0, whose roles have answered
        // the first batch's calls): one whole batch and part of the second.
        let cut = dir.path().join("cut.jsonl");
        let torn = &lines[1][..lines[1].len() / 2];
        std::fs::write(&cut, format!("{}\n{torn}", lines[0])).unwrap();
        let resumed = play(&cut);
        assert_eq!(resumed.results, once.results);
        assert_eq!(resumed.traces, once.traces);
        assert_eq!(resumed.prefill, once.prefill);
        assert!(resumed.earlier_seconds > 0.0);
        let after: Vec<String> = std::fs::read_to_string(&cut)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(after.len(), 4);
        // A journal of another evaluation (here: seeds in the other order) is refused, named.
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, format!("{}\n", lines[2])).unwrap();
        let err = evaluate_into(&other)
            .err()
            .expect("a journal of another evaluation")
            .to_string();
        assert!(
            err.contains("other.jsonl") && err.contains("holds seed 1"),
            "{err}"
        );
    }
}
