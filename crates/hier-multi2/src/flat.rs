//! The flat (one-level) agent of the baselines: one role answers an action each step from
//! `flat_prompt(task, latest actions, observation)`; many environments run in lock step with
//! one batched call per round, and every call's tokens are counted per episode, as in
//! [`crate::agent::rollout`].

use hier_data::batch::flat_prompt;
use hier_envs::{Env, Task, step_all};

use crate::agent::{RolloutConfig, one_task_per_env};
use crate::error::Result;
use hier_train::policy::{TextPolicy, Trace};

/// Plays `tasks[i]` on `envs[i]` with `policy`; the reply's first line is the action.
pub fn rollout_flat(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    policy: &mut dyn TextPolicy,
    cfg: &RolloutConfig,
    origin: &str,
) -> Result<Vec<Trace>> {
    one_task_per_env(envs, tasks)?;
    let mut traces = Vec::with_capacity(envs.len());
    let mut limits = Vec::with_capacity(envs.len());
    for (env, task) in envs.iter_mut().zip(tasks) {
        let r = env
            .reset(task)
            .map_err(|e| hier_train::Error::env(format!("reset {task}"), e))?;
        limits.push(cfg.episode_limit(env.as_ref(), task));
        traces.push(Trace::start(env.name(), task, r, origin));
    }
    let mut finished = vec![false; traces.len()];
    loop {
        let active: Vec<usize> = (0..traces.len()).filter(|&i| !finished[i]).collect();
        if active.is_empty() {
            break;
        }
        let prompts: Vec<String> = active
            .iter()
            .map(|&i| {
                let ep = &traces[i].episode;
                flat_prompt(
                    &ep.task,
                    &ep.actions,
                    ep.observations.last().expect("observation"),
                )
            })
            .collect();
        let replies = policy.reply(&prompts)?;
        let mut actions: Vec<Option<String>> = vec![None; traces.len()];
        for (&i, r) in active.iter().zip(&replies) {
            let t = &mut traces[i];
            t.sys2_calls += 1;
            t.prompt_tokens += r.prompt_tokens;
            t.generated_tokens += r.generated_tokens;
            actions[i] = Some(r.text.lines().next().unwrap_or("").trim().to_owned());
        }
        let refs: Vec<Option<&str>> = actions.iter().map(|a| a.as_deref()).collect();
        for (i, s) in step_all(envs, &refs).into_iter().enumerate() {
            let Some(s) = s else { continue };
            let t = &mut traces[i];
            let s =
                s.map_err(|e| hier_train::Error::env(format!("{}: step", t.episode.source), e))?;
            let ep = &mut t.episode;
            ep.actions.push(actions[i].take().expect("stepped"));
            ep.observations.push(s.observation);
            ep.rewards.push(s.reward);
            ep.scores.push(s.score);
            t.flags.push(false);
            if s.done || ep.actions.len() >= limits[i] {
                finished[i] = true;
                ep.done = s.done;
                ep.success = s.done && s.score >= 1.0;
            }
        }
    }
    Ok(traces)
}
