//! Training examples of each role, tokenised: the planner (System 1), the executor (System 2,
//! with what offline RL needs: reward, next state, terminal flag) and the flat policy of the
//! baselines. Every target ends with [`STOP`], the newline at which a role's reply ends when
//! it acts ([`hier_train::policy::BackbonePolicy`] stops there), so a model trained on these
//! examples learns to stop.

use hier_backbone::Tokenizer;
use hier_data::batch::{executor_prompt, flat_prompt, planner_prompt};
use hier_data::schema::{FlatTrajectory, Sys1Record, Sys2Transition};

use crate::error::{Error, Result};
use hier_train::prompt::{encode_pair, encode_prompt};
use hier_train::sft::SftExample;

/// System 1: `planner_prompt(K, group action, o) → g`.
pub fn planner_examples(
    tok: &Tokenizer,
    records: &[Sys1Record],
    max_len: usize,
) -> Result<Vec<SftExample>> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let prompt = planner_prompt(&r.task, &r.group_action, &r.observation);
            encode_pair(
                tok,
                &prompt,
                &r.subgoal,
                max_len,
                &format!("sys1 record {i}"),
            )
            .map_err(Error::from)
        })
        .collect()
}

/// System 2 as plain SFT pairs: `executor_prompt(g, o) → "<action>; True|False"`.
pub fn executor_examples(
    tok: &Tokenizer,
    transitions: &[Sys2Transition],
    max_len: usize,
) -> Result<Vec<SftExample>> {
    Ok(executor_rl_examples(tok, transitions, max_len)?
        .into_iter()
        .map(|e| e.pair)
        .collect())
}

/// One System-2 transition `(g, o, a, r, o', d)` ready for the critic and the actor.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RlExample {
    /// `executor_prompt(g, o)` and `"<action>; True|False\n"`.
    pub pair: SftExample,
    /// `executor_prompt(g, o')`, absent when `d` (its value is never used then).
    pub next_prompt: Option<Vec<u32>>,
    pub reward: f32,
    pub terminal: bool,
    /// The action taken at `o'` (its target tokens), for the SARSA critic's `Q̄(o', a')`;
    /// absent when `d` or when the data does not hold the next step.
    #[serde(default)]
    pub next_target: Option<Vec<u32>>,
    /// Which trajectory (subgoal segment) this transition belongs to, for the released code's
    /// trajectory-mean baseline; unique within one call of the builders below.
    #[serde(default)]
    pub trajectory: u64,
}

/// Links each example to the next one of its trajectory (`continues(i)`: example `i + 1`
/// continues example `i`): sets `next_target` and numbers the trajectories in order.
fn link_trajectories(examples: &mut [RlExample], continues: impl Fn(usize) -> bool) {
    let mut trajectory = 0;
    for i in 0..examples.len() {
        examples[i].trajectory = trajectory;
        let next = i + 1 < examples.len() && continues(i);
        examples[i].next_target =
            (next && !examples[i].terminal).then(|| examples[i + 1].pair.target.clone());
        if !next {
            trajectory += 1;
        }
    }
}

/// System 2 transitions with rewards and next states.
pub fn executor_rl_examples(
    tok: &Tokenizer,
    transitions: &[Sys2Transition],
    max_len: usize,
) -> Result<Vec<RlExample>> {
    transitions
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let what = format!("sys2 transition {i} ({})", t.source);
            let pair = encode_pair(
                tok,
                &executor_prompt(&t.subgoal, &t.observation),
                &t.target(),
                max_len,
                &what,
            )?;
            let next_prompt = if t.terminal {
                None
            } else {
                Some(encode_prompt(
                    tok,
                    &executor_prompt(&t.subgoal, &t.next_observation),
                    max_len,
                    &what,
                )?)
            };
            Ok(RlExample {
                pair,
                next_prompt,
                reward: t.reward as f32,
                terminal: t.terminal,
                next_target: None,
                trajectory: 0,
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(|mut examples| {
            link_trajectories(&mut examples, |i| {
                let (t, n) = (&transitions[i], &transitions[i + 1]);
                !t.terminal
                    && n.source == t.source
                    && n.segment == t.segment
                    && n.step == t.step + 1
            });
            examples
        })
}

/// System 1 as RL transitions (the paradigm-swap and only-RL ablations, the shared adapter):
/// state `planner_prompt(K, group action, o)`, action the subgoal, reward the environment reward
/// of its segment, next state the next planner call of the same episode (records of one
/// episode are consecutive), terminal at the episode's end.
pub fn planner_rl_examples(
    tok: &Tokenizer,
    records: &[Sys1Record],
    max_len: usize,
) -> Result<Vec<RlExample>> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let what = format!("sys1 record {i} ({})", r.source);
            let prompt = planner_prompt(&r.task, &r.group_action, &r.observation);
            let pair = encode_pair(tok, &prompt, &r.subgoal, max_len, &what)?;
            let next = records
                .get(i + 1)
                .filter(|n| !r.done && n.source == r.source);
            let next_prompt = next
                .map(|n| {
                    encode_prompt(
                        tok,
                        &planner_prompt(&n.task, &n.group_action, &n.observation),
                        max_len,
                        &what,
                    )
                })
                .transpose()?;
            Ok(RlExample {
                terminal: next_prompt.is_none(),
                pair,
                next_prompt,
                reward: r.reward as f32,
                next_target: None,
                trajectory: 0,
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(|mut examples| {
            link_trajectories(&mut examples, |i| {
                !records[i].done && records[i + 1].source == records[i].source
            });
            examples
        })
}

/// The flat policy: `flat_prompt(K, latest actions, o_t) → a_t` for every step.
pub fn flat_examples(
    tok: &Tokenizer,
    trajectories: &[FlatTrajectory],
    max_len: usize,
) -> Result<Vec<SftExample>> {
    let mut out = Vec::new();
    for (i, tr) in trajectories.iter().enumerate() {
        for (t, a) in tr.actions.iter().enumerate() {
            let prompt = flat_prompt(&tr.task, &tr.actions[..t], &tr.observations[t]);
            out.push(encode_pair(
                tok,
                &prompt,
                a,
                max_len,
                &format!("flat trajectory {i} step {t}"),
            )?);
        }
    }
    Ok(out)
}
