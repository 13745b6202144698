//! Training examples of each role, tokenised: the planner (System 1), the executor (System 2,
//! with what offline RL needs: reward, next state, terminal flag) and the flat policy of the
//! baselines. Every target ends with [`STOP`], the newline at which a role's reply ends when
//! it acts ([`crate::multi2::BackbonePolicy`] stops there), so a model trained on these
//! examples learns to stop.

use hier_backbone::Tokenizer;
use hier_data::batch::{executor_prompt, flat_prompt, planner_prompt};
use hier_data::schema::{FlatTrajectory, Sys1Record, Sys2Transition};

use crate::sft::SftExample;

/// Where every role's reply ends.
pub const STOP: &str = "\n";

/// Tokens kept from the start of a prompt that is too long: the role's instruction and the
/// task or subgoal line live there.
pub const PROMPT_HEAD: usize = 96;

/// Cuts `ids` to `budget` tokens by dropping from the middle: the first
/// `min(PROMPT_HEAD, budget / 2)` tokens (instruction, task, subgoal) and the last ones (the
/// current observation and the answer cue) stay. Cutting from the left would drop the task.
pub fn fit_prompt(ids: &mut Vec<u32>, budget: usize) {
    if ids.len() <= budget {
        return;
    }
    let head = PROMPT_HEAD.min(budget / 2);
    let cut = ids.len() - budget;
    ids.drain(head..head + cut);
}

/// Prompt and target ids, the prompt cut by [`fit_prompt`] to fit `max_len` tokens together.
pub fn encode_pair(
    tok: &Tokenizer,
    prompt: &str,
    target: &str,
    max_len: usize,
    what: &str,
) -> Result<SftExample, String> {
    let mut p = tok
        .encode(prompt, false)
        .map_err(|e| format!("{what}: prompt: {e}"))?;
    let t = tok
        .encode(&format!("{target}{STOP}"), false)
        .map_err(|e| format!("{what}: target: {e}"))?;
    if t.len() >= max_len {
        return Err(format!(
            "{what}: the target alone has {} tokens; max_len is {max_len}",
            t.len()
        ));
    }
    fit_prompt(&mut p, max_len - t.len());
    if p.is_empty() {
        return Err(format!("{what}: empty prompt"));
    }
    Ok(SftExample {
        prompt: p,
        target: t,
    })
}

/// Prompt ids alone, cut by [`fit_prompt`] to `max_len`.
pub fn encode_prompt(
    tok: &Tokenizer,
    prompt: &str,
    max_len: usize,
    what: &str,
) -> Result<Vec<u32>, String> {
    let mut p = tok
        .encode(prompt, false)
        .map_err(|e| format!("{what}: prompt: {e}"))?;
    fit_prompt(&mut p, max_len);
    if p.is_empty() {
        return Err(format!("{what}: empty prompt"));
    }
    Ok(p)
}

/// System 1: `planner_prompt(K, group action, o) → g`.
pub fn planner_examples(
    tok: &Tokenizer,
    records: &[Sys1Record],
    max_len: usize,
) -> Result<Vec<SftExample>, String> {
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
        })
        .collect()
}

/// System 2 as plain SFT pairs: `executor_prompt(g, o) → "<action>; True|False"`.
pub fn executor_examples(
    tok: &Tokenizer,
    transitions: &[Sys2Transition],
    max_len: usize,
) -> Result<Vec<SftExample>, String> {
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
}

/// System 2 transitions with rewards and next states.
pub fn executor_rl_examples(
    tok: &Tokenizer,
    transitions: &[Sys2Transition],
    max_len: usize,
) -> Result<Vec<RlExample>, String> {
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
            })
        })
        .collect()
}

/// System 1 as RL transitions (the paradigm-swap and only-RL ablations, the shared adapter):
/// state `planner_prompt(K, group action, o)`, action the subgoal, reward the environment reward
/// of its segment, next state the next planner call of the same episode (records of one
/// episode are consecutive), terminal at the episode's end.
pub fn planner_rl_examples(
    tok: &Tokenizer,
    records: &[Sys1Record],
    max_len: usize,
) -> Result<Vec<RlExample>, String> {
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
            })
        })
        .collect()
}

/// The flat policy: `flat_prompt(K, latest actions, o_t) → a_t` for every step.
pub fn flat_examples(
    tok: &Tokenizer,
    trajectories: &[FlatTrajectory],
    max_len: usize,
) -> Result<Vec<SftExample>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_prompts_lose_their_middle_not_their_task() {
        let mut ids: Vec<u32> = (0..300).collect();
        fit_prompt(&mut ids, 200);
        assert_eq!(ids.len(), 200);
        assert_eq!(
            &ids[..PROMPT_HEAD],
            &(0..PROMPT_HEAD as u32).collect::<Vec<_>>()[..]
        );
        assert_eq!(*ids.last().unwrap(), 299);
        assert_eq!(ids[PROMPT_HEAD], 300 - (200 - PROMPT_HEAD as u32));
        let mut short: Vec<u32> = (0..10).collect();
        fit_prompt(&mut short, 6);
        // head = min(96, 6 / 2) = 3; the 4 tokens after it go.
        assert_eq!(short, vec![0, 1, 2, 7, 8, 9]);
        let mut same: Vec<u32> = (0..5).collect();
        fit_prompt(&mut same, 5);
        assert_eq!(same, vec![0, 1, 2, 3, 4]);
    }
}
