//! What steering training steers: the host a steering agent acts in
//! ([`SteeredProcess`]: its bank of states, what the agent observes at each, how the host
//! reads an output and continues from a state), and the search executor as one — its bank
//! states ([`BankState`], [`collect_states`]) and continuations ([`SearchProcess`]). The
//! pipeline's handoffs are another ([`crate::mas::MasProcess`]); the training loop is
//! [`crate::steer_train::train_steering_on`].

use hier_envs::{Env, Task};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::search_agent::{ExecutorPrompting, SearchStart, SearchState, rollout_search_from};
use crate::steer_agent::{Protocol, SEARCH_PROTOCOL, SlowOutput, SteerConfig, observation};
use hier_train::SharedErrors as _;
use hier_train::policy::TextPolicy;

/// A state of the bank: a task and the executor's turns so far (no notes: the bank comes from
/// rollouts without intervention).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BankState {
    pub task: Task,
    /// Index of the task among the training tasks (ranking pairs are formed within a task).
    pub group: usize,
    pub question: String,
    pub turns: Vec<(String, String)>,
    /// The executor's next turn in the rollout the state came from.
    pub next: String,
}

impl BankState {
    /// The state before each turn of one episode of `task` (group `group`).
    pub fn before_each_turn(
        task: &Task,
        group: usize,
        question: &str,
        turns: &[(String, String)],
    ) -> Vec<BankState> {
        (0..turns.len())
            .map(|k| BankState {
                task: task.clone(),
                group,
                question: question.to_owned(),
                turns: turns[..k].to_vec(),
                next: turns[k].0.clone(),
            })
            .collect()
    }

    /// The observation `O(g, s)`.
    pub fn observation(&self, cfg: &SteerConfig) -> String {
        observation(
            &SearchState {
                question: &self.question,
                turns: &self.turns,
                guidance: &[],
            },
            cfg.history,
            cfg.info_chars,
        )
    }

    pub(crate) fn start(&self) -> SearchStart {
        SearchStart {
            task: self.task.clone(),
            turns: self.turns.clone(),
            guidance: Vec::new(),
            answer_now: false,
        }
    }
}

/// Plays every task once without intervention (`executor` reseeded from `seed`, `parallel`
/// episodes at a time) and returns every state before a turn.
pub fn collect_states(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    executor: &mut dyn TextPolicy,
    prompting: ExecutorPrompting<'_>,
    seed: u64,
) -> Result<Vec<BankState>> {
    if envs.is_empty() {
        return Err(Error::invalid("steering bank: no environments".into()));
    }
    executor.reseed(seed);
    let mut states = Vec::new();
    for (c, chunk) in tasks.chunks(envs.len()).enumerate() {
        let eps = crate::search_agent::rollout_search(
            &mut envs[..chunk.len()],
            chunk,
            executor,
            prompting,
            None,
            "steering-bank",
        )?;
        for (i, ep) in eps.into_iter().enumerate() {
            let group = c * envs.len() + i;
            let question = &ep.trace.episode.task;
            states.extend(BankState::before_each_turn(
                &chunk[i], group, question, &ep.turns,
            ));
        }
    }
    Ok(states)
}

/// What steering training steers (border's split: the algorithm in [`crate::steer_train`], the host here): a bank
/// of states, what the steering agent observes at each, and continuations from a state with
/// a slow-path output applied or with nothing applied.
pub trait SteeredProcess {
    /// Where a continuation starts.
    type Start: Clone;

    /// The fast path's question and the slow path's instruction of this host.
    fn protocol(&self) -> Protocol;

    /// States in the bank.
    fn states(&self) -> usize;

    /// `O(g, s)` of bank state `state`.
    fn observation(&self, state: usize) -> String;

    /// The task `state` belongs to (RankNet pairs states of one task).
    fn group(&self, state: usize) -> usize;

    /// How far into its episode `state` is (agent turns), for the records.
    fn turn(&self, state: usize) -> usize;

    /// A slow-path output as this host reads it: what it cannot execute becomes an error.
    fn read(&self, output: SlowOutput) -> SlowOutput;

    /// The start of a continuation from `state` with `output` applied (`None`: nothing, the
    /// baseline). Only readable outputs are applied.
    fn start(&self, state: usize, output: Option<&SlowOutput>) -> Self::Start;

    /// Plays every start to its end with the frozen executor, sampling from `seed`, and
    /// returns each final score (F1).
    fn play(&mut self, starts: &[Self::Start], seed: u64) -> Result<Vec<f64>>;
}

/// The search executor as a [`SteeredProcess`]: states before its turns, continuations
/// played `parallel` at a time on forks of one environment.
pub struct SearchProcess<'a> {
    pub envs: &'a mut [Box<dyn Env>],
    pub executor: &'a mut dyn TextPolicy,
    pub prompting: ExecutorPrompting<'a>,
    pub states: &'a [BankState],
    pub steer: SteerConfig,
    pub parallel: usize,
}

impl SteeredProcess for SearchProcess<'_> {
    type Start = SearchStart;

    fn protocol(&self) -> Protocol {
        SEARCH_PROTOCOL
    }

    fn states(&self) -> usize {
        self.states.len()
    }

    fn observation(&self, state: usize) -> String {
        self.states[state].observation(&self.steer)
    }

    fn group(&self, state: usize) -> usize {
        self.states[state].group
    }

    fn turn(&self, state: usize) -> usize {
        self.states[state].turns.len()
    }

    fn read(&self, output: SlowOutput) -> SlowOutput {
        // Training states are before a turn: a rejection cannot be executed there.
        output.before_a_turn()
    }

    fn start(&self, state: usize, output: Option<&SlowOutput>) -> SearchStart {
        self.states[state]
            .start()
            .with(output.and_then(|o| o.intervention.as_ref()))
    }

    fn play(&mut self, starts: &[SearchStart], seed: u64) -> Result<Vec<f64>> {
        self.executor.reseed(seed);
        let mut returns = Vec::with_capacity(starts.len());
        for chunk in starts.chunks(self.parallel) {
            let eps = rollout_search_from(
                self.envs,
                chunk,
                self.executor,
                self.prompting,
                None,
                "steering-train",
            )?;
            returns.extend(eps.iter().map(|e| e.score));
        }
        Ok(returns)
    }
}
