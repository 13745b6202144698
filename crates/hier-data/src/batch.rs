//! Batches for the model: records become prompt + target token sequences with an action mask
//! (true on target tokens), the position of the action's last token (where the critics read
//! `Q`) and of the state's last token (where `V` reads), then length-bucketed batches under a
//! token budget. The tokenizer is anything implementing [`Tokenize`] — the tiny backbone's BPE
//! and HF `tokenizer.json` go through the same path.

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::replay::SplitMix64;
use crate::schema::{Sys1Record, Sys2Transition};

/// Text → token ids.
pub trait Tokenize {
    /// The ids of `text` (no special tokens added); a tokenizer's failure is
    /// [`DataError::Encode`].
    fn encode(&self, text: &str) -> Result<Vec<u32>>;
    /// Id used to pad batches (masked out).
    fn pad_id(&self) -> u32;
}

/// The planner's prompt from its parts: task, the previous subgoal's actions, the current
/// observation. Training ([`sys1_prompt`]) and acting use this one function.
pub fn planner_prompt(task: &str, group_action: &[String], observation: &str) -> String {
    format!(
        "You are the planner. Given the task and the state, name the next subgoal.\nTask: {task}\n{}\nSubgoal: ",
        crate::schema::planner_context(group_action, observation)
    )
}

/// The executor's prompt from its parts: subgoal and observation.
pub fn executor_prompt(subgoal: &str, observation: &str) -> String {
    format!(
        "You are the executor. Give one action for the subgoal and whether it completes it \
         (`<action>; True|False`).\nSubtask: {subgoal}\nObs: {observation}\nAction: "
    )
}

/// How many of the latest actions a flat policy's prompt shows.
pub const FLAT_HISTORY: usize = 5;

/// A flat (one-level) policy's prompt: the task, its latest [`FLAT_HISTORY`] actions and the
/// current observation. The flat baselines train and act with this one function.
pub fn flat_prompt(task: &str, actions: &[String], observation: &str) -> String {
    let recent = &actions[actions.len().saturating_sub(FLAT_HISTORY)..];
    format!(
        "You are the agent. Give the next action for the task.\nTask: {task}\nPrevious actions: [{}]\nObs: {observation}\nAction: ",
        recent.join("; ")
    )
}

/// The planner's prompt of a System-1 record.
pub fn sys1_prompt(r: &Sys1Record) -> String {
    planner_prompt(&r.task, &r.group_action, &r.observation)
}

/// The executor's prompt of a System-2 transition.
pub fn sys2_prompt(t: &Sys2Transition) -> String {
    executor_prompt(&t.subgoal, &t.observation)
}

/// One tokenised example.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tokenized {
    pub ids: Vec<u32>,
    /// True on the target's tokens (the loss positions).
    pub action_mask: Vec<bool>,
    /// Index of the prompt's last token (the state's end).
    pub state_end: usize,
    /// Index of the target's last token (the action's end).
    pub action_end: usize,
}

/// Tokenises `prompt + target`, dropping prompt tokens from the left if the whole is longer
/// than `max_len`. Prompt and target are encoded separately, so the boundary is exact.
pub fn tokenize(
    tok: &dyn Tokenize,
    prompt: &str,
    target: &str,
    max_len: usize,
    what: &str,
) -> Result<Tokenized> {
    let mut p = tok
        .encode(prompt)
        .map_err(|e| DataError::Invalid(format!("{what}: prompt: {e}")))?;
    let t = tok
        .encode(target)
        .map_err(|e| DataError::Invalid(format!("{what}: target: {e}")))?;
    if t.is_empty() {
        return Err(DataError::Invalid(format!("{what}: empty target")));
    }
    if t.len() + 1 > max_len {
        return Err(DataError::Invalid(format!(
            "{what}: the target alone has {} tokens; max_len is {max_len}",
            t.len()
        )));
    }
    if p.is_empty() {
        return Err(DataError::Invalid(format!("{what}: empty prompt")));
    }
    if p.len() + t.len() > max_len {
        p.drain(..p.len() + t.len() - max_len);
    }
    let state_end = p.len() - 1;
    let mut ids = p;
    ids.extend_from_slice(&t);
    let mut action_mask = vec![false; state_end + 1];
    action_mask.resize(ids.len(), true);
    Ok(Tokenized {
        action_end: ids.len() - 1,
        ids,
        action_mask,
        state_end,
    })
}

/// A padded batch (right padding).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// Which examples, by index into the input.
    pub index: Vec<usize>,
    pub ids: Vec<Vec<u32>>,
    pub attention: Vec<Vec<bool>>,
    pub action_mask: Vec<Vec<bool>>,
    pub state_end: Vec<usize>,
    pub action_end: Vec<usize>,
}

impl Batch {
    /// Rows × padded length.
    pub fn padded_tokens(&self) -> usize {
        self.ids.len() * self.ids.first().map_or(0, Vec::len)
    }
}

/// Length-bucketed batches: examples sorted by length (ties by a seeded shuffle), cut into
/// batches whose padded size `rows × longest` stays within `max_tokens` (and `max_rows`),
/// then the batch order shuffled with the same seed. Every example lands in exactly one
/// batch; one longer than `max_tokens` gets a batch of its own.
pub fn bucket_batches(
    examples: &[Tokenized],
    max_tokens: usize,
    max_rows: usize,
    pad_id: u32,
    seed: u64,
) -> Vec<Batch> {
    let mut rng = SplitMix64::new(seed);
    let mut order: Vec<usize> = (0..examples.len()).collect();
    // Fisher–Yates, then a stable sort by length: equal lengths stay shuffled.
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order.sort_by_key(|&i| examples[i].ids.len());
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    for i in order {
        let len = examples[i].ids.len();
        // Sorted ascending, so `len` is the longest if `i` joins.
        if !cur.is_empty() && ((cur.len() + 1) * len > max_tokens || cur.len() >= max_rows) {
            groups.push(std::mem::take(&mut cur));
        }
        cur.push(i);
    }
    if !cur.is_empty() {
        groups.push(cur);
    }
    for i in (1..groups.len()).rev() {
        groups.swap(i, rng.below(i + 1));
    }
    groups
        .into_iter()
        .map(|g| {
            let width = g.iter().map(|&i| examples[i].ids.len()).max().unwrap_or(0);
            let pad = |v: &[u32]| {
                let mut v = v.to_vec();
                v.resize(width, pad_id);
                v
            };
            let padb = |v: &[bool]| {
                let mut v = v.to_vec();
                v.resize(width, false);
                v
            };
            Batch {
                ids: g.iter().map(|&i| pad(&examples[i].ids)).collect(),
                attention: g
                    .iter()
                    .map(|&i| padb(&vec![true; examples[i].ids.len()]))
                    .collect(),
                action_mask: g.iter().map(|&i| padb(&examples[i].action_mask)).collect(),
                state_end: g.iter().map(|&i| examples[i].state_end).collect(),
                action_end: g.iter().map(|&i| examples[i].action_end).collect(),
                index: g,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per byte: easy to count by hand.
    struct Bytes;
    impl Tokenize for Bytes {
        fn encode(&self, text: &str) -> Result<Vec<u32>> {
            Ok(text.bytes().map(u32::from).collect())
        }
        fn pad_id(&self) -> u32 {
            0
        }
    }

    #[test]
    fn masks_and_ends_mark_the_target() {
        let t = tokenize(&Bytes, "abc", "xy", 16, "ex").unwrap();
        assert_eq!(t.ids, [97, 98, 99, 120, 121]);
        assert_eq!(t.action_mask, [false, false, false, true, true]);
        assert_eq!((t.state_end, t.action_end), (2, 4));
        // Too long: the prompt loses its oldest tokens, the target stays whole.
        let t = tokenize(&Bytes, "abcdef", "xy", 5, "ex").unwrap();
        assert_eq!(t.ids, [100, 101, 102, 120, 121]);
        assert_eq!(t.state_end, 2);
        let err = tokenize(&Bytes, "a", "xyz", 3, "sys2 record 7")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sys2 record 7") && err.contains("max_len"),
            "{err}"
        );
    }

    #[test]
    fn batches_cover_every_example_within_budget() {
        let ex: Vec<Tokenized> = (1..=20)
            .map(|n| tokenize(&Bytes, &"p".repeat(n), "a", 64, "ex").unwrap())
            .collect();
        let batches = bucket_batches(&ex, 40, 8, 0, 3);
        let mut seen: Vec<usize> = batches.iter().flat_map(|b| b.index.clone()).collect();
        seen.sort();
        assert_eq!(seen, (0..20).collect::<Vec<_>>());
        for b in &batches {
            assert!(
                b.padded_tokens() <= 40 || b.ids.len() == 1,
                "{}",
                b.padded_tokens()
            );
            assert!(b.ids.len() <= 8);
            for (row, &i) in b.index.iter().enumerate() {
                assert_eq!(b.ids[row][..ex[i].ids.len()], ex[i].ids[..]);
                assert_eq!(
                    b.attention[row].iter().filter(|&&a| a).count(),
                    ex[i].ids.len()
                );
                assert!(b.action_mask[row][b.action_end[row]]);
            }
        }
        // Seeded: same seed, same batches; another seed, another order.
        assert_eq!(batches, bucket_batches(&ex, 40, 8, 0, 3));
        assert_ne!(batches, bucket_batches(&ex, 40, 8, 0, 4));
    }
}
