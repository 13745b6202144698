//! The Multi² agent (METHODS.md A) and its batched rollout: System 1 names a subgoal at the
//! start and whenever System 2 flags the current one done or its step budget runs out; System
//! 2 answers `<action>; True|False` each step. Many environments run together: every round,
//! the planners that are due are asked in one batched call, then every live executor in one
//! batched call, then the environments step in parallel.
//!
//! The roles are [`TextPolicy`]s — text in, text out, with token counts — so the same loop runs
//! the LoRA roles over one backbone ([`BackbonePolicy`]), scripted policies in tests, or any
//! other model. Every call's prompt and generated tokens are counted per episode.

use crate::error::{Error, Result};
use hier_data::batch::{executor_prompt, planner_prompt};
use hier_data::subtask::executor_subtask;
use hier_envs::{Env, Task, step_all};
use hier_train::SharedErrors as _;
use hier_train::policy::{Reply, TextPolicy, Trace};
use serde::{Deserialize, Serialize};

/// Parses System 2's `<action>; True|False` (the flag is case-insensitive; without one, the
/// subgoal is not done). Only the first line counts.
pub fn parse_action(reply: &str) -> (String, bool) {
    let line = reply.lines().next().unwrap_or("").trim();
    match line.rsplit_once(';') {
        Some((a, flag)) if flag.trim().eq_ignore_ascii_case("true") => (a.trim().to_owned(), true),
        Some((a, flag)) if flag.trim().eq_ignore_ascii_case("false") => {
            (a.trim().to_owned(), false)
        }
        _ => (line.to_owned(), false),
    }
}

/// Settings of a rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutConfig {
    /// Environment steps per episode at most (the authors: 50).
    pub max_steps: usize,
    /// Steps one subgoal may take before System 1 is asked again.
    pub subgoal_budget: usize,
    /// End each episode at the environment's per-task limit on actions as well
    /// ([`Env::turn_limit`]; ScienceWorld: ETO's 15–120, every action counted). Off by default,
    /// and then left out of serialised configs (stage keys).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub task_turn_limits: bool,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            max_steps: 50,
            subgoal_budget: 10,
            task_turn_limits: false,
        }
    }
}

impl RolloutConfig {
    /// The default settings with at most `max_steps` actions per episode.
    pub fn with_max_steps(max_steps: usize) -> Self {
        Self {
            max_steps,
            ..Self::default()
        }
    }

    /// Actions an episode of `task` on `env` may take: `max_steps`, or the environment's
    /// per-task limit where that is lower and [`task_turn_limits`](Self::task_turn_limits) is on.
    pub fn episode_limit(&self, env: &dyn Env, task: &Task) -> usize {
        match env.turn_limit(task).filter(|_| self.task_turn_limits) {
            Some(limit) => limit.min(self.max_steps),
            None => self.max_steps,
        }
    }
}

struct Live {
    trace: Trace,
    /// The current subgoal as System 2 is shown it (`executor_subtask`, made once when System 1
    /// names the subgoal); `None` when System 1 is due.
    subtask: Option<String>,
    /// Actions under the current subgoal, and under the previous one (the planner's context).
    current: Vec<String>,
    previous: Vec<String>,
    finished: bool,
    /// Actions this episode may take ([`RolloutConfig::episode_limit`]).
    limit: usize,
}

/// The rollouts play `tasks[i]` on `envs[i]`: a length mismatch is the caller's bug, said
/// before any environment is reset.
pub(crate) fn one_task_per_env(envs: &[Box<dyn Env>], tasks: &[Task]) -> Result<()> {
    if envs.len() != tasks.len() {
        return Err(Error::invalid(format!(
            "{} environments for {} tasks",
            envs.len(),
            tasks.len()
        )));
    }
    Ok(())
}

/// Plays `tasks[i]` on `envs[i]` with the two roles, all episodes in lock step.
pub fn rollout(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    planner: &mut dyn TextPolicy,
    executor: &mut dyn TextPolicy,
    cfg: &RolloutConfig,
    origin: &str,
) -> Result<Vec<Trace>> {
    one_task_per_env(envs, tasks)?;
    let mut live: Vec<Live> = Vec::with_capacity(envs.len());
    for (env, task) in envs.iter_mut().zip(tasks) {
        let r = env
            .reset(task)
            .map_err(|e| hier_train::Error::env(format!("reset {task}"), e))?;
        live.push(Live {
            limit: cfg.episode_limit(env.as_ref(), task),
            trace: Trace::start(env.name(), task, r, origin),
            subtask: None,
            current: Vec::new(),
            previous: Vec::new(),
            finished: false,
        });
    }
    let charge = |t: &mut Trace, r: &Reply| {
        t.prompt_tokens += r.prompt_tokens;
        t.generated_tokens += r.generated_tokens;
    };
    loop {
        // Planners that are due: no subgoal yet, or the last one ended.
        let due: Vec<usize> = (0..live.len())
            .filter(|&i| !live[i].finished && live[i].subtask.is_none())
            .collect();
        if !due.is_empty() {
            let prompts: Vec<String> = due
                .iter()
                .map(|&i| {
                    let l = &live[i];
                    let obs = l
                        .trace
                        .episode
                        .observations
                        .last()
                        .expect("reset observation");
                    planner_prompt(&l.trace.episode.task, &l.previous, obs)
                })
                .collect();
            let replies = planner.reply(&prompts)?;
            for (&i, r) in due.iter().zip(&replies) {
                let l = &mut live[i];
                let g = r.text.lines().next().unwrap_or("").trim().to_owned();
                l.trace
                    .subgoals
                    .push((l.trace.episode.actions.len(), g.clone()));
                l.trace.sys1_calls += 1;
                charge(&mut l.trace, r);
                l.subtask = Some(executor_subtask(&l.trace.episode.task, &g));
            }
        }
        let active: Vec<usize> = (0..live.len()).filter(|&i| !live[i].finished).collect();
        if active.is_empty() {
            break;
        }
        let prompts: Vec<String> = active
            .iter()
            .map(|&i| {
                let l = &live[i];
                let obs = l.trace.episode.observations.last().expect("observation");
                executor_prompt(l.subtask.as_deref().expect("planned above"), obs)
            })
            .collect();
        let replies = executor.reply(&prompts)?;
        let mut actions: Vec<Option<String>> = vec![None; live.len()];
        let mut flags = vec![false; live.len()];
        for (&i, r) in active.iter().zip(&replies) {
            let (a, done) = parse_action(&r.text);
            let l = &mut live[i];
            l.trace.sys2_calls += 1;
            charge(&mut l.trace, r);
            actions[i] = Some(a);
            flags[i] = done;
        }
        let refs: Vec<Option<&str>> = actions.iter().map(|a| a.as_deref()).collect();
        let steps = step_all(envs, &refs);
        for (i, s) in steps.into_iter().enumerate() {
            let Some(s) = s else { continue };
            let s = s.map_err(|e| {
                hier_train::Error::env(format!("{}: step", live[i].trace.episode.source), e)
            })?;
            let l = &mut live[i];
            let a = actions[i].take().expect("stepped");
            l.trace.episode.actions.push(a.clone());
            l.trace.episode.observations.push(s.observation);
            l.trace.episode.rewards.push(s.reward);
            l.trace.episode.scores.push(s.score);
            l.trace.flags.push(flags[i]);
            l.current.push(a);
            let n = l.trace.episode.actions.len();
            if s.done || n >= l.limit {
                l.finished = true;
                l.trace.episode.done = s.done;
                l.trace.episode.success = s.done && s.score >= 1.0;
            } else if flags[i] || l.current.len() >= cfg.subgoal_budget {
                l.previous = std::mem::take(&mut l.current);
                l.subtask = None;
            }
        }
    }
    Ok(live.into_iter().map(|l| l.trace).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executor_replies_parse() {
        assert_eq!(
            parse_action("go to desk 1; True"),
            ("go to desk 1".into(), true)
        );
        assert_eq!(
            parse_action(" open drawer 2 ; false\nmore"),
            ("open drawer 2".into(), false)
        );
        assert_eq!(parse_action("look"), ("look".into(), false));
        assert_eq!(
            parse_action("craft 1 x using 1 a; 1 b; TRUE"),
            ("craft 1 x using 1 a; 1 b".into(), true)
        );
    }
}
