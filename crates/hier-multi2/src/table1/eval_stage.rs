//! A method's evaluation as stages: one per evaluation seed ([`EvalPart`]), each resumable from
//! its journal ([`EVAL_JOURNAL`]), found done by a planning pass that trains nothing.

use std::path::PathBuf;

use hier_train::eval::EpisodeResult;
use hier_train::stages::read_jsonl;
use hier_train::upstream;

use super::evaluate::{self, Agent, SplitTasks, evaluate};
use super::{Ctx, Trained};
use crate::error::Result;
use crate::react::PromptedSpec;
use crate::table1::EvalSpec;

/// The journal of an evaluation stage in progress: its finished batches of episodes
/// ([`evaluate::evaluate`]), from which a killed evaluation resumes; removed when the stage is
/// done (`episodes.jsonl` and `traces.jsonl` then hold the same).
pub const EVAL_JOURNAL: &str = "batches.jsonl";

/// What one evaluation stage plays: its settings and the prompted agents' (which hold
/// Reflexion's seeds).
#[derive(Clone, Debug)]
pub(super) struct EvalPart {
    pub(super) spec: EvalSpec,
    pub(super) prompted: PromptedSpec,
}

impl EvalPart {
    /// The same evaluation as one part per seed that `agent` plays (Reflexion: the prompted
    /// agents' `reflexion_seeds`; every other agent: the evaluation's `seeds`), each keyed as
    /// an evaluation of that seed alone.
    pub(super) fn per_seed(&self, agent: &Agent) -> Vec<EvalPart> {
        match agent {
            Agent::Reflexion => (self.prompted.reflexion_seeds.iter())
                .map(|&s| EvalPart {
                    prompted: PromptedSpec {
                        reflexion_seeds: vec![s],
                        ..self.prompted.clone()
                    },
                    ..self.clone()
                })
                .collect(),
            _ => (self.spec.seeds.iter())
                .map(|&s| EvalPart {
                    spec: EvalSpec {
                        seeds: vec![s],
                        ..self.spec.clone()
                    },
                    ..self.clone()
                })
                .collect(),
        }
    }
}

/// An evaluation's stages ([`Ctx::eval_stages`]) and whether all of them are done.
pub(super) struct EvalStages {
    done: bool,
    parts: Vec<EvalPart>,
}

impl Ctx<'_, '_> {
    /// `train`'s method, trained only when its evaluation `<stage>-<env>` is not done: a
    /// planning pass ([`Stages::begin_planning`]: no training, no adapters) finds the
    /// evaluation's keys from its training stages' keys, so evaluations restored into
    /// `stages/` — e.g. committed by an earlier session whose `runs/` is gone — stand without
    /// the training stages that made them (the learning curve then needs the online stage's
    /// `curve.jsonl`). `None`: the evaluation is not done and the run is report-only
    /// ([`hier_train::stages::RunConfig::report_only`]), so the cell is left out.
    pub(super) fn for_evaluation(
        &mut self,
        stage: &str,
        method: &str,
        spec: &EvalSpec,
        train: impl Fn(&mut Self) -> Result<Trained>,
    ) -> Result<Option<Trained>> {
        self.st.begin_planning();
        let planned = train(self);
        let done = match &planned {
            Ok(p) => self.eval_stages(stage, method, p, spec)?.done,
            Err(_) => false,
        };
        self.st.end_planning(done);
        if done {
            return planned.map(Some);
        }
        if self.st.cfg.report_only {
            return Ok(None);
        }
        train(self).map(Some)
    }

    /// The evaluation stages of `trained` under `spec`: one per evaluation seed
    /// ([`EvalPart`]), so that a profile which adds seeds — or a run cut between seeds —
    /// reuses the seeds done; or one stage of every seed at once where such a stage is done
    /// (written before evaluations were split by seed; the two give the same episodes).
    /// A prompted agent's stages keyed as before [`prompted_settings`] are moved under their
    /// keys first ([`Stages::adopt`](hier_train::stages::Stages::adopt)).
    fn eval_stages(
        &self,
        stage: &str,
        method: &str,
        trained: &Trained,
        spec: &EvalSpec,
    ) -> Result<EvalStages> {
        let name = format!("{stage}-{}", self.env);
        let whole = EvalPart {
            spec: spec.clone(),
            prompted: self.profile.prompted.clone(),
        };
        let parts = whole.per_seed(&trained.agent);
        if is_prompted(&trained.agent) {
            for part in std::iter::once(&whole).chain(&parts) {
                let key = self.eval_key(method, trained, part);
                for legacy in legacy_prompted_keys(&self.base, method, &trained.agent, part) {
                    if self.st.adopt(&name, &legacy, &key)? {
                        break;
                    }
                }
            }
        }
        let is_done = |part: &EvalPart| {
            let key = self.eval_key(method, trained, part);
            self.st.dir(&name, &key).join("DONE").exists()
        };
        if parts.len() > 1 && is_done(&whole) {
            return Ok(EvalStages {
                done: true,
                parts: vec![whole],
            });
        }
        Ok(EvalStages {
            done: parts.iter().all(is_done),
            parts,
        })
    }

    /// The key of an evaluation stage.
    fn eval_key(&self, method: &str, trained: &Trained, part: &EvalPart) -> serde_json::Value {
        let spec = &part.spec;
        // The key of the Multi², flat and Glider evaluations predates the prompted agents.
        match &trained.agent {
            Agent::Hierarchy { planner, executor } => {
                serde_json::json!({"base": self.base, "method": method,
                "planner": planner, "executor": executor, "trained": trained.upstream, "eval": spec})
            }
            Agent::Flat { policy } => serde_json::json!({"base": self.base, "method": method,
                "planner": null, "executor": policy, "trained": trained.upstream, "eval": spec}),
            prompted => prompted_key(&self.base, method, prompted, part),
        }
    }

    /// Evaluates `trained` in the stages `<stage>-<env>` of [`Self::eval_stages`]; returns
    /// each stage's directory and episodes, seed by seed.
    pub(super) fn evaluate(
        &mut self,
        stage: &str,
        method: &str,
        trained: &Trained,
        tasks: &[SplitTasks],
        spec: &EvalSpec,
    ) -> Result<Vec<(PathBuf, Vec<EpisodeResult>)>> {
        (self.eval_stages(stage, method, trained, spec)?.parts.iter())
            .map(|part| self.evaluate_part(stage, method, trained, tasks, part))
            .collect()
    }

    /// One evaluation stage: `trained` under `part`.
    fn evaluate_part(
        &mut self,
        stage: &str,
        method: &str,
        trained: &Trained,
        tasks: &[SplitTasks],
        part: &EvalPart,
    ) -> Result<(PathBuf, Vec<EpisodeResult>)> {
        let key = self.eval_key(method, trained, part);
        let (spec, prompted) = (&part.spec, &part.prompted);
        let (lm, tok, env, d, max_len) = (&*self.lm, self.tok, self.env, self.d, self.max_len());
        let progress = self.cfg.progress;
        let cache_mib = self.cfg.prefix_cache_mib;
        // What the stage plays, by content: checked below against a done stage's record.
        let digests =
            upstream::adapter_digests(&self.st.cfg.out.join("stages"), &trained.upstream)?;
        let dir = self
            .st
            .run(&format!("{stage}-{}", self.env), key, |dir| -> Result<()> {
                let started = std::time::Instant::now();
                let journal = dir.join(EVAL_JOURNAL);
                // Refuses a journal begun over other adapters under these names.
                upstream::begin(dir, &digests, &journal)?;
                let evaluate::Evaluated {
                    results,
                    traces,
                    prefill,
                    earlier_seconds,
                } = evaluate(
                    lm,
                    tok,
                    env,
                    d,
                    &trained.agent,
                    tasks,
                    spec,
                    prompted,
                    max_len,
                    progress,
                    cache_mib,
                    &journal,
                )?;
                let seconds = earlier_seconds + started.elapsed().as_secs_f64();
                hier_train::policy::write_prefill_report(dir, cache_mib, prefill, seconds)?;
                hier_train::stages::write_earlier_seconds(dir, earlier_seconds)?;
                // Every played episode in full (subgoals, actions, observations), to look at.
                hier_train::runlog::write_jsonl(&dir.join("traces.jsonl"), &traces)?;
                hier_train::runlog::write_jsonl(&dir.join("episodes.jsonl"), &results)?;
                // The journal repeats both files; they are whole now.
                std::fs::remove_file(&journal).map_err(|e| hier_train::Error::io(&journal, e))?;
                Ok(())
            })?;
        if upstream::check(&dir, &digests)? == upstream::Checked::Unrecorded {
            self.warn_if_trained_since(&dir, trained);
        }
        let episodes = read_jsonl(&dir.join("episodes.jsonl"))?;
        Ok((dir, episodes))
    }

    /// A done evaluation written before stages recorded their adapters' digests cannot be
    /// checked; when one of the stages it played was trained by this invocation it most likely
    /// played an earlier adapter under the same name (as `docs/results/table1-smollm` found), so
    /// say so.
    fn warn_if_trained_since(&self, dir: &std::path::Path, trained: &Trained) {
        let again: Vec<&str> = (self.st.records().iter())
            .filter(|r| !r.cached)
            .filter_map(|r| {
                trained
                    .upstream
                    .iter()
                    .find(|u| r.dir.ends_with(u.as_str()))
            })
            .map(String::as_str)
            .collect();
        if !again.is_empty() {
            eprintln!(
                "warning: {} predates adapter digests and was made before {} trained in this \
                 run: its episodes may be another adapter's; remove it to evaluate these",
                dir.display(),
                again.join(", ")
            );
        }
    }
}

/// Whether `agent` is a prompted one (ReAct, Reflexion, ADaPT).
fn is_prompted(agent: &Agent) -> bool {
    matches!(agent, Agent::React | Agent::Reflexion | Agent::Adapt)
}

/// A prompted evaluation's key: the backbone, the agent, the prompted settings its key covers
/// and the evaluation's — one shape for today's keys and the legacy ones.
fn prompted_key_of(
    base: &serde_json::Value,
    method: &str,
    agent: &Agent,
    prompted: impl serde::Serialize,
    spec: &EvalSpec,
) -> serde_json::Value {
    serde_json::json!({"base": base, "method": method, "agent": agent,
        "prompted": prompted, "eval": spec})
}

/// The key of a prompted agent's evaluation: the backbone, the agent, its own settings
/// ([`prompted_settings`]) and the evaluation's.
pub(super) fn prompted_key(
    base: &serde_json::Value,
    method: &str,
    agent: &Agent,
    part: &EvalPart,
) -> serde_json::Value {
    let prompted = prompted_settings(agent, &part.prompted);
    prompted_key_of(base, method, agent, prompted, &part.spec)
}

/// The keys a prompted agent's evaluation may have had before it covered only the agent's own
/// settings: the whole `[prompted]` section, so that adding a Reflexion seed re-keyed ReAct's
/// evaluations. Stages under one of them are moved under [`prompted_key`] when next seen. The
/// section is today's, and today's with `reflexion_seeds = [0]` — what every profile run before
/// had — so that a profile which added Reflexion's second seed in the same step still finds
/// ReAct's and ADaPT's stages.
pub(super) fn legacy_prompted_keys(
    base: &serde_json::Value,
    method: &str,
    agent: &Agent,
    part: &EvalPart,
) -> Vec<serde_json::Value> {
    let key = |prompted: &PromptedSpec| prompted_key_of(base, method, agent, prompted, &part.spec);
    let before = PromptedSpec {
        reflexion_seeds: vec![0],
        ..part.prompted.clone()
    };
    let mut keys = vec![key(&part.prompted)];
    if before != part.prompted && *agent != Agent::Reflexion {
        keys.push(key(&before));
    }
    keys
}

/// Settings of the `[prompted]` section only Reflexion reads.
const REFLEXION_ONLY: [&str; 4] = [
    "reflexion_trials",
    "reflexion_memory",
    "reflexion_seeds",
    "reflexion_loop_cycles",
];
/// Settings of the `[prompted]` section only ADaPT reads.
const ADAPT_ONLY: [&str; 2] = ["adapt_max_depth", "adapt_executor_turns"];

/// The settings of `prompted` that `agent` plays by — what its evaluation's key covers: ReAct
/// reads neither Reflexion's nor ADaPT's, Reflexion (ReAct with memory) not ADaPT's, ADaPT not
/// Reflexion's. So a Reflexion seed added to a profile leaves ReAct's and ADaPT's evaluations
/// done.
pub(super) fn prompted_settings(agent: &Agent, prompted: &PromptedSpec) -> serde_json::Value {
    let mut v = serde_json::to_value(prompted).expect("serialises");
    let map = v.as_object_mut().expect("PromptedSpec serialises as a map");
    let dropped = match agent {
        Agent::Reflexion => ADAPT_ONLY.to_vec(),
        Agent::Adapt => REFLEXION_ONLY.to_vec(),
        _ => [REFLEXION_ONLY.as_slice(), &ADAPT_ONLY].concat(),
    };
    for field in dropped {
        map.shift_remove(field);
    }
    v
}
