//! Prompts as token ids: where a role's reply ends ([`STOP`]), and how a prompt too long for
//! the context is cut ([`fit_prompt`]) so that the instruction and the current observation
//! both stay.

use hier_backbone::Tokenizer;

use crate::error::{Error, Result};
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
) -> Result<SftExample> {
    let tokenize = |text: &str, part: &str| {
        tok.encode(text, false).map_err(|source| Error::Tokenize {
            what: format!("{what}: {part}"),
            source,
        })
    };
    let mut p = tokenize(prompt, "prompt")?;
    let t = tokenize(&format!("{target}{STOP}"), "target")?;
    if t.len() >= max_len {
        return Err(Error::Invalid(format!(
            "{what}: the target alone has {} tokens; max_len is {max_len}",
            t.len()
        )));
    }
    fit_prompt(&mut p, max_len - t.len());
    if p.is_empty() {
        return Err(Error::Invalid(format!("{what}: empty prompt")));
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
) -> Result<Vec<u32>> {
    let mut p = tok
        .encode(prompt, false)
        .map_err(|source| Error::Tokenize {
            what: format!("{what}: prompt"),
            source,
        })?;
    fit_prompt(&mut p, max_len);
    if p.is_empty() {
        return Err(Error::Invalid(format!("{what}: empty prompt")));
    }
    Ok(p)
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
