//! Demonstrations → hierarchical datasets: plays an environment's expert (optionally with
//! noise, for the "medium" data of offline RL), cuts each episode into subgoal segments with
//! `hier-data`'s rules, and writes System-1, System-2 and flat datasets.
//!
//! Determinism: tasks are played in the environment's task order, and episode `k` draws its
//! noise from its own stream `SplitMix64(seed ⊕ k·φ)`, so the same seed gives byte-identical
//! files (ScienceWorld included, with its deterministic JVM mode, the default).
//!
//! Noise (ε > 0): before each expert action, with probability ε the player deviates — a
//! uniformly drawn valid action where the environment lists them, else it skips the expert's
//! next action. After a deviation an expert that can re-plan (ALFWorld's) does so with
//! probability `recover` (drawn from the same stream); otherwise the rest of the original plan
//! is played, which may now fail. Both successes and failures are kept and labelled. (GLIDER's medium data are rollouts of a behaviour-cloned policy; that policy is
//! trained by the Multi² pipeline, which can feed its rollouts through [`build_episode`].)

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use hier_data::build::{Built, Episode, build};
use hier_data::replay::SplitMix64;
use hier_envs::{Env, Task};
use hier_train::SharedErrors as _;
use serde::{Deserialize, Serialize};

pub use crate::envs::Segmenter;

/// The noise stream of episode `k`.
pub fn episode_rng(seed: u64, k: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Plays one episode of `task` with the environment's expert, deviating with probability
/// `noise` before each action (and re-planning after a deviation with probability `recover`
/// where the expert can), for at most `max_steps` actions.
pub fn play(
    env: &mut dyn Env,
    task: &Task,
    noise: f64,
    recover: f64,
    rng: &mut SplitMix64,
    max_steps: usize,
) -> Result<Episode> {
    let reset = env.reset(task)?;
    let name = env.name();
    let replans = crate::envs::EnvKind::parse(name).is_ok_and(|k| k.spec().replans);
    let mut plan: VecDeque<String> = env
        .gold_actions()?
        .ok_or_else(|| Error::invalid(format!("{name} has no expert for {task}")))?
        .into();
    let mut ep = Episode {
        source: format!("{name}/{task}"),
        task: reset.description,
        observations: vec![reset.observation],
        actions: Vec::new(),
        rewards: Vec::new(),
        scores: Vec::new(),
        done: false,
        success: false,
        origin: if noise > 0.0 {
            format!("noisy-expert(eps={noise})")
        } else {
            "expert".into()
        },
    };
    while ep.actions.len() < max_steps {
        let mut deviated = false;
        let action = if noise > 0.0 && rng.unit() < noise {
            deviated = true;
            match env.valid_actions()? {
                Some(valid) if !valid.is_empty() => valid[rng.below(valid.len())].clone(),
                _ => {
                    // No listing: the deviation is forgetting the next expert step.
                    plan.pop_front();
                    match plan.pop_front() {
                        Some(a) => a,
                        None => break,
                    }
                }
            }
        } else {
            match plan.pop_front() {
                Some(a) => a,
                None => break,
            }
        };
        let step = env.step(&action)?;
        ep.actions.push(action);
        ep.observations.push(step.observation);
        ep.rewards.push(step.reward);
        ep.scores.push(step.score);
        if step.done {
            ep.done = true;
            break;
        }
        if deviated && replans && rng.unit() < recover {
            match env.gold_actions() {
                Ok(Some(p)) => plan = p.into(),
                // The expert sees no way on: the episode ends as a failure.
                _ => break,
            }
        }
    }
    ep.success = ep.final_score() >= 1.0 && ep.done;
    Ok(ep)
}

/// Segments and builds one episode's records.
pub fn build_episode(ep: &Episode, segmenter: Segmenter) -> Result<Built> {
    Ok(build(ep, &segmenter.segment(ep))?)
}

/// What `data build` writes next to the datasets.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub env: String,
    pub split: String,
    pub seed: u64,
    pub noise: f64,
    pub recover: f64,
    pub segmenter: Segmenter,
    pub episodes: u64,
    pub successes: u64,
    /// Expert episodes that failed and were left out.
    pub dropped: Vec<String>,
    pub sys1: u64,
    pub sys2: u64,
    pub flat: u64,
}

/// Options of [`build_dataset`].
#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub seed: u64,
    /// Deviation probability per step; 0 = the expert.
    pub noise: f64,
    /// Probability of re-planning after a deviation (experts that can).
    pub recover: f64,
    pub limit: Option<usize>,
    pub max_steps: usize,
    pub segmenter: Option<Segmenter>,
    pub progress: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            seed: 0,
            noise: 0.0,
            recover: 0.5,
            limit: None,
            max_steps: 100,
            segmenter: None,
            progress: false,
        }
    }
}

/// Plays the expert on every task of `tasks` (or the first `limit`) and writes
/// `<out>/{sys1,sys2,flat}.{jsonl,pcd}` and `<out>/manifest.json`. Every file is written
/// atomically; nothing is written if any episode fails to play.
pub fn build_dataset(
    env: &mut dyn Env,
    tasks: &[Task],
    split: &str,
    out: &Path,
    opts: &BuildOptions,
) -> Result<Manifest> {
    for (name, p) in [("noise", opts.noise), ("recover", opts.recover)] {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::invalid(format!("{name} = {p} is outside [0, 1]")));
        }
    }
    let segmenter = match opts.segmenter {
        Some(s) => s,
        None => crate::envs::EnvKind::parse(env.name())?.spec().segmenter,
    };
    let tasks = &tasks[..opts.limit.unwrap_or(tasks.len()).min(tasks.len())];
    let bar = hier_train::runlog::progress_bar(opts.progress, 0, tasks.len(), "data build");
    let mut all = Built::default();
    let (mut successes, mut dropped) = (0, Vec::new());
    for (k, task) in tasks.iter().enumerate() {
        let mut rng = episode_rng(opts.seed, k as u64);
        let ep = play(
            env,
            task,
            opts.noise,
            opts.recover,
            &mut rng,
            opts.max_steps,
        )?;
        successes += u64::from(ep.success);
        // Expert data holds demonstrations of success only; a failed expert episode is
        // dropped and named in the manifest. Noisy data keeps both, labelled.
        if opts.noise == 0.0 && !ep.success {
            dropped.push(task.to_string());
        } else {
            all.extend(build_episode(&ep, segmenter)?);
        }
        bar.inc(1);
        bar.set_message(format!("{successes} solved"));
    }
    bar.finish_and_clear();
    if !dropped.is_empty() {
        tracing::warn!(
            "the {} expert failed {} of {} tasks; dropped: {}",
            env.name(),
            dropped.len(),
            tasks.len(),
            dropped.join(", ")
        );
    }
    let stem = |name: &str| -> PathBuf { out.join(name) };
    let sys1 = hier_data::io::write_both(&stem("sys1"), &all.sys1)?;
    let sys2 = hier_data::io::write_both(&stem("sys2"), &all.sys2)?;
    let flat = hier_data::io::write_both(&stem("flat"), &all.flat)?;
    let manifest = Manifest {
        env: env.name().into(),
        split: split.into(),
        seed: opts.seed,
        noise: opts.noise,
        recover: opts.recover,
        segmenter,
        episodes: tasks.len() as u64,
        successes,
        dropped,
        sys1,
        sys2,
        flat,
    };
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serialises") + "\n";
    hier_backbone::write_atomic(&out.join("manifest.json"), text.as_bytes())?;
    Ok(manifest)
}
