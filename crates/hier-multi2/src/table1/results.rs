//! What Table 1 holds: one cell per method and column, one ablation cell per variant, seed
//! and split, and the ablations summarised per variant; how methods are named.

use std::collections::BTreeMap;

use hier_envs::Split;
use hier_train::eval::{EpisodeResult, Summary};
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

    /// `f` of every episode, keyed by (task, seed).
    pub fn keyed(&self, f: impl Fn(&EpisodeResult) -> f64) -> BTreeMap<(String, u64), f64> {
        self.results
            .iter()
            .map(|r| ((r.task.to_string(), r.seed), f(r)))
            .collect()
    }
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
