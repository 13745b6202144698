//! The records, versioned. A dataset file holds records of one [`Schema`] kind; its header
//! names the kind and version, and readers refuse a file of another kind or a newer version.
//!
//! Notation of METHODS.md A: task `K`, observation `o_t`, subgoal `g_h`, action `a_t`.

use serde::{Deserialize, Serialize};

/// A record type stored in dataset files.
pub trait Schema:
    Serialize + for<'de> Deserialize<'de> + Clone + std::fmt::Debug + 'static
{
    /// Kind name written in file headers (`sys1`, `sys2`, …).
    const KIND: &'static str;
    /// Version of the record layout; bumped on any change of fields.
    const VERSION: u32;
}

/// One System-1 (planner) example: given the task and the context, emit the subgoal.
/// One per subgoal segment of a demonstration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sys1Record {
    /// Which environment and task this came from (`textcraft/craft#3`).
    pub source: String,
    /// The task description `K`.
    pub task: String,
    /// Actions of the previous segment (empty for the first subgoal).
    pub group_action: Vec<String>,
    /// The observation when the subgoal is chosen, `o_t` at the segment's start.
    pub observation: String,
    /// The subgoal `g_h`, the training target.
    pub subgoal: String,
    /// Environment reward collected while this subgoal was pursued.
    pub reward: f64,
    /// Environment score after the segment.
    pub score: f64,
    /// The episode ended with this segment.
    pub done: bool,
}

/// The planner context in the authors' wording:
/// `Group action: [a, b]. Current observation: <obs>`.
pub fn planner_context(group_action: &[String], observation: &str) -> String {
    format!(
        "Group action: [{}]. Current observation: {observation}",
        group_action.join(", ")
    )
}

impl Sys1Record {
    /// [`planner_context`] of this record.
    pub fn context(&self) -> String {
        planner_context(&self.group_action, &self.observation)
    }
}

impl Schema for Sys1Record {
    const KIND: &'static str = "sys1";
    const VERSION: u32 = 1;
}

/// One System-2 (executor) transition `(g, o, a, r, o', d)` inside a subgoal segment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sys2Transition {
    pub source: String,
    /// The subtask this action serves as System 2 is shown it: the subgoal `g_h`, with the
    /// crafting commands it needs on TextCraft ([`crate::subtask::executor_subtask`]).
    pub subgoal: String,
    /// `o_t`.
    pub observation: String,
    /// `a_t` (the environment command).
    pub action: String,
    /// The action completes the subgoal (the `True|False` of `"<action>; True"`).
    pub subgoal_done: bool,
    /// Intrinsic subgoal reward: 1 on the action that completes the subgoal, else 0.
    pub reward: f64,
    /// Environment reward of this step (used online).
    pub env_reward: f64,
    /// `o_{t+1}`.
    pub next_observation: String,
    /// `d`: the subgoal segment ends here (`subgoal_done`), or the episode does.
    pub terminal: bool,
    /// Index of the segment within its episode, and of the action within the segment.
    pub segment: u32,
    pub step: u32,
}

impl Sys2Transition {
    /// The executor target in the authors' wording: `"<action>; True|False"`.
    pub fn target(&self) -> String {
        format!(
            "{}; {}",
            self.action,
            if self.subgoal_done { "True" } else { "False" }
        )
    }
}

impl Schema for Sys2Transition {
    const KIND: &'static str = "sys2";
    const VERSION: u32 = 1;
}

/// A whole episode without hierarchy, for the flat baselines (ReAct-style SFT, GRPO).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlatTrajectory {
    pub source: String,
    pub task: String,
    /// `o_0 … o_T` (one more than `actions`).
    pub observations: Vec<String>,
    pub actions: Vec<String>,
    /// Environment reward of each action.
    pub rewards: Vec<f64>,
    /// Final score.
    pub score: f64,
    /// The episode reached its goal.
    pub success: bool,
    /// How it was made: `expert`, `noisy-expert(eps=0.2)`, `imported`, …
    pub origin: String,
}

impl FlatTrajectory {
    /// Checks the lengths agree; errors say which field.
    pub fn check(&self) -> crate::error::Result<()> {
        if self.observations.len() != self.actions.len() + 1 {
            return Err(crate::error::DataError::Invalid(format!(
                "observations has {} entries, expected actions + 1 = {}",
                self.observations.len(),
                self.actions.len() + 1
            )));
        }
        if self.rewards.len() != self.actions.len() {
            return Err(crate::error::DataError::Invalid(format!(
                "rewards has {} entries, expected one per action ({})",
                self.rewards.len(),
                self.actions.len()
            )));
        }
        Ok(())
    }

    /// Discounted return `Σ γ^t r_t` (γ per environment step).
    pub fn discounted_return(&self, gamma: f64) -> f64 {
        self.rewards
            .iter()
            .rev()
            .fold(0.0, |acc, r| r + gamma * acc)
    }
}

impl Schema for FlatTrajectory {
    const KIND: &'static str = "flat";
    const VERSION: u32 = 1;
}

/// One turn of an executor's trajectory as the steering agent sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// `think`, `search`, `observation`, `answer`, `intervention`, …
    pub role: String,
    pub text: String,
}

/// A steering state: the frozen executor's trajectory so far at a decision point, with what
/// intervening (or not) led to when it was tried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteeringState {
    pub source: String,
    /// The question or task.
    pub task: String,
    pub history: Vec<Turn>,
    /// Executor step index of the decision point.
    pub step: u32,
    /// Outcome (e.g. exact-match reward) of continuing without intervention, if measured.
    pub no_intervention_return: Option<f64>,
    /// Outcomes of tried interventions: `(intervention text, return)`.
    pub interventions: Vec<(String, f64)>,
}

impl Schema for SteeringState {
    const KIND: &'static str = "steer";
    const VERSION: u32 = 1;
}
