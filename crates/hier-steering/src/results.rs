//! What a `reproduce steering` run produces: per-question results, one evaluation per method
//! and setting, and the whole run (what the report writes).

use hier_envs::Task;
use serde::{Deserialize, Serialize};

/// One evaluated episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaResult {
    pub task: Task,
    pub seed: u64,
    pub hops: Option<usize>,
    /// The test set the question comes from (`[files]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_set: Option<String>,
    pub f1: f64,
    pub em: f64,
    pub answered: bool,
    /// Executor turns (rejected answers included), interventions applied.
    pub turns: usize,
    pub interventions: usize,
    pub executor_tokens: usize,
}

/// One evaluation: a method with an executor at a τ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub method: crate::profile::SteerMethod,
    /// `main` or `transfer`.
    pub executor: String,
    pub tau: Option<f64>,
    pub results: Vec<QaResult>,
    /// Slow-path runs of the supervisor over all episodes (planning, verification and every
    /// triggered gate).
    pub slow_path_runs: usize,
}

/// Everything a run measured (the report's input).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteeringRun {
    pub evaluations: Vec<Evaluation>,
    /// The steering training curve.
    pub curve: Vec<crate::steer_train::RoundPoint>,
    pub bank_states: usize,
    pub wall_seconds: f64,
}
