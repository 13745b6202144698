//! Evaluation of a trained agent on an environment split: every task played once per seed
//! (batched, `parallel` environments at a time), one [`EpisodeResult`] per episode, and the
//! summaries the tables need — success over seeds with a 95 % interval, success by difficulty
//! (terciles of the expert's path length), tokens per episode.

use std::collections::BTreeMap;

use hier_envs::{Env, Task};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metrics::{Difficulty, Estimate, Terciles, estimate, success_percent};
use crate::policy::Trace;

/// One evaluated episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeResult {
    pub task: Task,
    pub seed: u64,
    pub success: bool,
    pub score: f64,
    pub steps: usize,
    pub tokens: usize,
    pub sys1_calls: usize,
    /// Length of the environment expert's solution (difficulty).
    pub expert_steps: Option<usize>,
    /// Reflexion: success of the first trial (`success` is then pass@trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass1: Option<bool>,
}

impl EpisodeResult {
    pub fn of(trace: &Trace, task: &Task, seed: u64, expert_steps: Option<usize>) -> Self {
        let ep = &trace.episode;
        Self {
            task: task.clone(),
            seed,
            success: ep.success,
            score: ep.scores.last().copied().unwrap_or(0.0),
            steps: ep.actions.len(),
            tokens: trace.tokens(),
            sys1_calls: trace.sys1_calls,
            expert_steps,
            pass1: None,
        }
    }
}

/// Spreads `n` picks evenly over `tasks` (all of them when `n ≥ len`), so a small evaluation
/// still covers every task family of a split ordered by family.
pub fn spread(tasks: &[Task], n: usize) -> Vec<Task> {
    if n >= tasks.len() {
        return tasks.to_vec();
    }
    (0..n).map(|k| tasks[k * tasks.len() / n].clone()).collect()
}

/// Length of the expert's solution of each task (`None` where the environment has no expert).
pub fn expert_lengths(env: &mut dyn Env, tasks: &[Task]) -> Result<Vec<Option<usize>>> {
    tasks
        .iter()
        .map(|t| {
            env.reset(t)
                .map_err(|e| Error::env(format!("reset {t}"), e))?;
            Ok(env
                .gold_actions()
                .map_err(|e| Error::env(format!("gold {t}"), e))?
                .map(|g| g.len()))
        })
        .collect()
}

/// Success, interval and tokens of one method on one split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Success in percent: mean over seeds of each seed's success rate, 95 % t-interval.
    pub success: Estimate,
    pub episodes: usize,
    /// Mean final score (task progress in `[0, 1]`, negative on ScienceWorld's failures):
    /// the signal that is left when no episode succeeds.
    pub mean_score: f64,
    pub mean_tokens: f64,
    pub mean_steps: f64,
    /// Success (%) by difficulty, over all seeds.
    pub by_difficulty: BTreeMap<String, f64>,
    /// Reflexion: first-trial success % (pass@1) beside `success` (pass@trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass1: Option<f64>,
}

/// Summarises episodes (any number of seeds).
pub fn summarise(results: &[EpisodeResult]) -> Summary {
    let mut per_seed: BTreeMap<u64, Vec<bool>> = BTreeMap::new();
    for r in results {
        per_seed.entry(r.seed).or_default().push(r.success);
    }
    let rates: Vec<f64> = per_seed.values().map(|s| success_percent(s)).collect();
    let lengths: Vec<usize> = results.iter().filter_map(|r| r.expert_steps).collect();
    let mut by_difficulty = BTreeMap::new();
    if let Some(t) = Terciles::of(&lengths) {
        for d in [Difficulty::Easy, Difficulty::Medium, Difficulty::Hard] {
            let s: Vec<bool> = results
                .iter()
                .filter(|r| r.expert_steps.is_some_and(|l| t.classify(l) == d))
                .map(|r| r.success)
                .collect();
            if !s.is_empty() {
                by_difficulty.insert(format!("{d:?}"), success_percent(&s));
            }
        }
    }
    let n = results.len().max(1) as f64;
    let first: Vec<bool> = results.iter().filter_map(|r| r.pass1).collect();
    Summary {
        pass1: (!first.is_empty()).then(|| success_percent(&first)),
        success: estimate(&rates),
        episodes: results.len(),
        mean_score: results.iter().map(|r| r.score).sum::<f64>() / n,
        mean_tokens: results.iter().map(|r| r.tokens as f64).sum::<f64>() / n,
        mean_steps: results.iter().map(|r| r.steps as f64).sum::<f64>() / n,
        by_difficulty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(seed: u64, success: bool, expert: usize) -> EpisodeResult {
        EpisodeResult {
            task: Task::new("t", expert as u64),
            seed,
            success,
            score: f64::from(u8::from(success)),
            steps: 4,
            tokens: 100,
            sys1_calls: 1,
            expert_steps: Some(expert),
            pass1: None,
        }
    }

    #[test]
    fn summaries_average_seeds_and_split_by_difficulty() {
        let results = vec![r(0, true, 2), r(0, false, 9), r(1, true, 2), r(1, true, 9)];
        let s = summarise(&results);
        // Seed 0: 50 %, seed 1: 100 % → mean 75, t(1) = 12.706, s = 35.355, half = 317.6.
        assert_eq!(s.success.mean, 75.0);
        assert!((s.success.half_width.unwrap() - 12.706 * 35.355_339 / 2f64.sqrt()).abs() < 1e-3);
        assert_eq!(s.episodes, 4);
        assert_eq!(s.mean_tokens, 100.0);
        assert_eq!(s.mean_score, 0.75);
        let tasks: Vec<Task> = (0..10).map(|i| Task::new("x", i)).collect();
        assert_eq!(
            spread(&tasks, 3)
                .iter()
                .map(|t| t.index)
                .collect::<Vec<_>>(),
            vec![0, 3, 6]
        );
    }
}
