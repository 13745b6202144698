//! What Table 1 holds: one cell per method and column, one ablation cell per variant, seed
//! and split, and the ablations summarised per variant; how methods are named.

use std::collections::BTreeMap;

use hier_envs::Split;
use hier_train::eval::{EpisodeResult, Summary};
use hier_train::metrics::{Estimate, success_over_seeds};
use serde::{Deserialize, Serialize};

use crate::envs::EnvKind;
use crate::table1::profile::{Ablation, Method, Profile};

/// One ablation result: a variant trained with one seed, on one split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AblationCell {
    pub variant: Ablation,
    pub seed: u64,
    pub env: EnvKind,
    pub split: Split,
    pub summary: Summary,
    /// Every episode (the paired comparison with Multi² matches them by training seed, task
    /// and evaluation seed).
    #[serde(default)]
    pub results: Vec<EpisodeResult>,
}

impl AblationCell {
    /// The cell of `results`, summarised.
    pub fn new(
        variant: Ablation,
        seed: u64,
        env: EnvKind,
        split: Split,
        results: Vec<EpisodeResult>,
    ) -> Self {
        Self {
            variant,
            seed,
            env,
            split,
            summary: hier_train::eval::summarise(&results),
            results,
        }
    }

    /// `f` of every episode, keyed by (training seed, task, evaluation seed).
    pub fn keyed(&self, f: impl Fn(&EpisodeResult) -> f64) -> BTreeMap<(u64, (String, u64)), f64> {
        by_task_and_seed(&self.results, f)
            .map(|(k, v)| ((self.seed, k), v))
            .collect()
    }
}

/// One cell of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub method: Method,
    pub env: EnvKind,
    pub split: Split,
    pub summary: Summary,
    /// Every episode (the paired comparisons match them by task and seed).
    #[serde(default)]
    pub results: Vec<EpisodeResult>,
}

impl Cell {
    /// The cell of `results`, summarised.
    pub fn new(method: Method, env: EnvKind, split: Split, results: Vec<EpisodeResult>) -> Self {
        Self {
            method,
            env,
            split,
            summary: hier_train::eval::summarise(&results),
            results,
        }
    }

    /// Success % with its 95 % t-interval, and whether that interval is over episodes
    /// ([`success_over_seeds`]: over evaluation seeds, or over the episodes of a single seed).
    pub fn success_interval(&self) -> (Estimate, bool) {
        let mut per_seed: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
        for r in &self.results {
            let e = per_seed.entry(r.seed).or_default();
            e.0 += usize::from(r.success);
            e.1 += 1;
        }
        success_over_seeds(&per_seed.into_values().collect::<Vec<_>>())
    }

    /// `f` of every episode, keyed by (task, seed).
    pub fn keyed(&self, f: impl Fn(&EpisodeResult) -> f64) -> BTreeMap<(String, u64), f64> {
        by_task_and_seed(&self.results, f).collect()
    }
}

/// An episode's success in percentage points (100 or 0): what Table 1's cells average and
/// its paired comparisons subtract.
pub(crate) fn success_points(r: &EpisodeResult) -> f64 {
    if r.success { 100.0 } else { 0.0 }
}

/// `f` of every episode with the key that pairs it across methods: (task, evaluation seed).
fn by_task_and_seed<'a>(
    results: &'a [EpisodeResult],
    f: impl Fn(&EpisodeResult) -> f64 + 'a,
) -> impl Iterator<Item = ((String, u64), f64)> + 'a {
    results
        .iter()
        .map(move |r| ((r.task.to_string(), r.seed), f(r)))
}

/// One variant's ablation results on one split: success % and mean final score per seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AblationRow {
    pub variant: Ablation,
    pub split: Split,
    pub seeds: Vec<u64>,
    pub success: Vec<f64>,
    pub mean_score: Vec<f64>,
}

/// Groups ablation cells by (variant, split), in the profile's variant order.
pub fn ablation_rows(profile: &Profile, cells: &[AblationCell]) -> Vec<AblationRow> {
    let Some(ab) = &profile.ablations else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for &v in &ab.variants {
        for split in [Split::Id, Split::Ood] {
            let xs: Vec<&AblationCell> = cells
                .iter()
                .filter(|c| c.variant == v && c.split == split)
                .collect();
            if xs.is_empty() {
                continue;
            }
            rows.push(AblationRow {
                variant: v,
                split,
                seeds: xs.iter().map(|c| c.seed).collect(),
                success: xs.iter().map(|c| c.summary.success.mean).collect(),
                mean_score: xs.iter().map(|c| c.summary.mean_score).collect(),
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use hier_envs::Task;

    fn episode(index: u64, seed: u64, success: bool) -> EpisodeResult {
        EpisodeResult {
            task: Task::new("craft", index),
            seed,
            success,
            score: f64::from(u8::from(success)),
            steps: 3,
            tokens: 10,
            sys1_calls: 1,
            expert_steps: Some(3),
            pass1: None,
        }
    }

    /// By hand: 5 successes in 100 episodes of one seed. Over seeds there is no interval; over
    /// the episodes (values 0 or 100) the variance is 100/99 · 0.05 · 0.95 · 100² = 479.80, so
    /// the half-width is t₀.₉₇₅(99) · √479.80 / √100 = 1.984217 · 2.19043 = 4.3463 (t from
    /// `scipy.stats.t.ppf`).
    /// With two seeds the cell keeps the interval over seeds: rates 10 and 0 → 5 ± 12.706 · 5.
    #[test]
    fn one_seed_takes_the_interval_over_episodes_and_says_so() {
        let one: Vec<EpisodeResult> = (0..100).map(|i| episode(i, 0, i < 5)).collect();
        let cell = Cell::new(Method::Multi2, EnvKind::Textcraft, Split::Id, one);
        assert_eq!(cell.summary.success.half_width, None);
        let (e, over_episodes) = cell.success_interval();
        assert!(over_episodes);
        assert!((e.mean - 5.0).abs() < 1e-12);
        assert!((e.half_width.unwrap() - 4.3463).abs() < 1e-3, "{e:?}");

        let two: Vec<EpisodeResult> = (0..20).map(|i| episode(i % 10, i / 10, i < 1)).collect();
        let cell = Cell::new(Method::Multi2, EnvKind::Textcraft, Split::Id, two);
        let (e, over_episodes) = cell.success_interval();
        assert!(!over_episodes);
        assert!((e.mean - 5.0).abs() < 1e-12);
        assert!((e.half_width.unwrap() - 12.706 * 5.0).abs() < 1e-9, "{e:?}");
    }
}
