//! Reflexion (Shinn et al., 2023) over the ReAct agent: a task is tried up to `trials` times;
//! after each failed trial the model writes a one-line self-reflection on its attempt, and the
//! latest `memory` reflections are shown in the next trial's prompt. A task counts as solved
//! at pass@k when any of its first k trials succeeds; the paper's Table 1 reports pass@6.
//! A trial stuck in a loop — more than `reflexion_loop_cycles` turns in a row with the same line
//! and the same observation — ends there, failed, and is reflected on (the Reflexion paper's own
//! heuristic for ALFWorld, §4.1; its second, "more than 30 actions", is left to each
//! environment's step limit, which ETO sets per ScienceWorld task).
//!
//! Trials of different tasks run together: every trial is one batched ReAct rollout over the
//! tasks still unsolved.

use hier_envs::{Env, Task};

use crate::agent::RolloutConfig;
use crate::error::{Error, Result};
use crate::react::{Prompter, Trial, rollout_react};
use hier_train::SharedErrors as _;
use hier_train::policy::{TextPolicy, Trace};

/// The trials of one task, in order (the last is the first success, or the `trials`-th).
#[derive(Clone, Debug, PartialEq)]
pub struct ReflexionRun {
    pub trials: Vec<Trace>,
    pub reflections: Vec<String>,
}

impl ReflexionRun {
    /// Solved within the first `k` trials.
    pub fn pass_at(&self, k: usize) -> bool {
        self.trials.iter().take(k).any(|t| t.episode.success)
    }

    /// Every token spent on the task: all trials and all reflections.
    pub fn tokens(&self) -> usize {
        self.trials.iter().map(Trace::tokens).sum()
    }
}

/// Plays `tasks` (at most `envs.len()` at a time) with Reflexion.
pub fn run_reflexion(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    policy: &mut dyn TextPolicy,
    prompter: &Prompter<'_>,
    rollout: &RolloutConfig,
    origin: &str,
) -> Result<Vec<ReflexionRun>> {
    let (trials, keep) = (
        prompter.spec.reflexion_trials,
        prompter.spec.reflexion_memory,
    );
    if trials == 0 || envs.is_empty() {
        return Err(Error::invalid(
            "reflexion: needs at least one trial and one environment".into(),
        ));
    }
    let mut runs: Vec<ReflexionRun> = tasks
        .iter()
        .map(|_| ReflexionRun {
            trials: Vec::new(),
            reflections: Vec::new(),
        })
        .collect();
    for _ in 0..trials {
        let open: Vec<usize> = (0..tasks.len())
            .filter(|&i| !runs[i].pass_at(trials))
            .collect();
        for chunk in open.chunks(envs.len()) {
            let ts: Vec<Task> = chunk.iter().map(|&i| tasks[i].clone()).collect();
            let memory: Vec<Vec<String>> = chunk
                .iter()
                .map(|&i| {
                    let r = &runs[i].reflections;
                    r[r.len().saturating_sub(keep)..].to_vec()
                })
                .collect();
            let mut eps = rollout_react(
                &mut envs[..ts.len()],
                &ts,
                policy,
                prompter,
                &Trial {
                    memory: &memory,
                    loop_cycles: prompter.spec.reflexion_loop_cycles,
                },
                rollout,
                origin,
            )?;
            // Reflect on the failures, in one batched call.
            let failed: Vec<usize> = (0..eps.len())
                .filter(|&k| !eps[k].trace.episode.success)
                .collect();
            let prompts = failed
                .iter()
                .map(|&k| {
                    let e = &eps[k];
                    prompter.reflect_prompt(&e.trace.episode.task, e.first_obs(), &e.steps)
                })
                .collect::<Result<Vec<_>>>()?;
            let replies = if prompts.is_empty() {
                Vec::new()
            } else {
                policy.reply(&prompts)?
            };
            for (&k, r) in failed.iter().zip(&replies) {
                let e = &mut eps[k];
                e.charge(r);
                let text = r.text.lines().next().unwrap_or("").trim().to_owned();
                let at = e.trace.episode.actions.len();
                e.trace.notes.push((at, format!("reflection: {text}")));
                runs[chunk[k]].reflections.push(text);
            }
            for (e, &i) in eps.into_iter().zip(chunk) {
                runs[i].trials.push(e.trace);
            }
        }
    }
    Ok(runs)
}
