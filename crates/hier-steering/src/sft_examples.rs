//! The supervised data of the steering pipeline: the format-only ("zero-shot") agent's
//! protocol examples, filtered behaviour cloning from a training run's samples, and the
//! executors' SFT data from demonstrations.

use hier_backbone::Tokenizer;
use hier_train::prompt::encode_pair;
use hier_train::sft::SftExample;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{Error, Result};
use crate::steer_agent::{
    AnswerTokens, SteerConfig, answer_word, fast_prompt, plan_prompt, slow_prompt, verify_prompt,
};
use crate::steer_train::{BankState, SlowSample, StateRecord};
use hier_train::SharedErrors as _;

/// Notes the format-only agent writes: generic (it knows the protocol, not the task) and
/// short, with reasoning of a few words, so that a tiny backbone learns the protocol in a few
/// hundred steps.
const FORMAT_NOTES: [&str; 4] = [
    "answer now",
    "search the next name",
    "do not search again",
    "check the last result",
];

/// The "zero-shot" steering agent's data: the protocol with decisions drawn at random. At
/// every bank state: a fast-path answer (`yes`/`no`, even odds), a slow-path output
/// (`pass`/`stop`/`guide: note`, a third each, with a generic note), a plan at first states and
/// a verdict where the executor's next turn is an answer. An instruct model knows such a
/// protocol from its instructions; the tiny backbone learns it here, and nothing here says
/// *when* to intervene — that is what training adds.
pub fn format_examples(
    tok: &Tokenizer,
    states: &[BankState],
    cfg: &SteerConfig,
    max_len: usize,
    seed: u64,
) -> Result<Vec<SftExample>> {
    let answers = AnswerTokens::of(tok)?;
    format_pairs(states, cfg, answers.spaced, seed)
        .into_iter()
        .enumerate()
        .map(|(k, (p, t))| {
            encode_pair(
                tok,
                &p,
                &t,
                max_len,
                &format!("steering format example {k}"),
            )
            .map_err(Error::from)
        })
        .collect()
}

/// [`format_examples`] as text `(prompt, target)` pairs; `spaced` as in [`AnswerTokens`]
/// (the text is the same either way: `Answer: yes`).
pub fn format_pairs(
    states: &[BankState],
    cfg: &SteerConfig,
    spaced: bool,
    seed: u64,
) -> Vec<(String, String)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for s in states {
        let o = s.observation(cfg);
        let word = answer_word(rng.random_bool(0.5), spaced);
        out.push((fast_prompt(&o, spaced), word.to_owned()));
        let note = FORMAT_NOTES[rng.random_range(0..FORMAT_NOTES.len())];
        let action = match rng.random_range(0..3) {
            0 => "pass".to_owned(),
            1 => "stop".to_owned(),
            _ => format!("guide: {note}"),
        };
        let reply = format!(" the last turn </think><action>{action}</action>");
        out.push((slow_prompt(&o), reply));
        if s.turns.is_empty() {
            let plan = format!(" a plan </think><action>guide: {note}</action>");
            out.push((plan_prompt(&o), plan));
        }
        if matches!(
            hier_envs::qa::env::parse_call(&s.next),
            Some(hier_envs::qa::env::Call::Answer(_))
        ) {
            let verdict = if rng.random_bool(0.5) {
                "pass".to_owned()
            } else {
                format!("guide: {note}")
            };
            let reply = format!(" the answer </think><action>{verdict}</action>");
            out.push((verify_prompt(&o, &s.next), reply));
        }
    }
    out
}

/// The bank states of a demonstration: the state before each of its turns.
pub fn demo_states(demo: &crate::search_agent::SearchDemo, group: usize) -> Vec<BankState> {
    BankState::before_each_turn(&demo.task, group, &demo.question, &demo.turns)
}

/// Filtered behaviour cloning's data from a training run's `samples.jsonl` records: every
/// slow-path output that beat leaving the state alone (`R̄_{s,j} > b_s`), and fast-path labels
/// (`yes` where some output beat `b_s`, else `no`).
pub fn filtered_bc_examples(
    tok: &Tokenizer,
    states: &[BankState],
    records: &[StateRecord],
    cfg: &SteerConfig,
    max_len: usize,
) -> Result<Vec<SftExample>> {
    let answers = AnswerTokens::of(tok)?;
    let mut out = Vec::new();
    for (k, r) in records.iter().enumerate() {
        let s = states.get(r.state).ok_or_else(|| {
            Error::invalid(format!("samples record {k}: no bank state {}", r.state))
        })?;
        let o = s.observation(cfg);
        let what = format!("filtered BC record {k}");
        let good: Vec<&SlowSample> = r
            .samples
            .iter()
            .filter(|x| x.readable && x.mean_return.is_some_and(|m| m > r.baseline))
            .collect();
        let word = answer_word(!good.is_empty(), answers.spaced);
        out.push(encode_pair(
            tok,
            &fast_prompt(&o, answers.spaced),
            word,
            max_len,
            &what,
        )?);
        for x in good {
            out.push(encode_pair(
                tok,
                &slow_prompt(&o),
                &x.generated,
                max_len,
                &what,
            )?);
        }
    }
    Ok(out)
}

/// The executor's SFT data from demonstrations: every turn, plus answer-now pairs
/// ([`crate::search_agent::SearchDemo::answer_now_pairs`]).
pub fn executor_examples(
    tok: &Tokenizer,
    demos: &[crate::search_agent::SearchDemo],
    max_len: usize,
) -> Result<Vec<SftExample>> {
    let mut out = Vec::new();
    for (d, demo) in demos.iter().enumerate() {
        for (k, (p, t)) in demo
            .pairs()
            .into_iter()
            .chain(demo.answer_now_pairs())
            .enumerate()
        {
            out.push(encode_pair(
                tok,
                &p,
                &t,
                max_len,
                &format!("search demo {d} pair {k}"),
            )?);
        }
    }
    Ok(out)
}

/// Notes and reasons the format-only agent writes at handoffs: generic, as in
/// [`FORMAT_NOTES`].
const HANDOFF_NOTES: [&str; 4] = [
    "keep to the question",
    "name the entity asked for",
    "the answer is in the findings",
    "search the missing fact",
];

/// The "zero-shot" steering agent's data at pipeline handoffs
/// ([`crate::mas::HANDOFF_PROTOCOL`]): at every observation a fast-path answer (`yes`/`no`,
/// even odds) and a slow-path output (`pass`, `guide: note`, `reject: reason`, a third each),
/// plus the forced protocol's output (`guide:` or `reject:`, even odds). It teaches the
/// protocol, not when to intervene.
pub fn handoff_format_pairs(
    observations: &[String],
    spaced: bool,
    seed: u64,
) -> Vec<(String, String)> {
    use crate::mas::{FORCED_PROTOCOL, HANDOFF_PROTOCOL};
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for o in observations {
        let word = answer_word(rng.random_bool(0.5), spaced);
        out.push((HANDOFF_PROTOCOL.fast_prompt(o, spaced), word.to_owned()));
        let note = HANDOFF_NOTES[rng.random_range(0..HANDOFF_NOTES.len())];
        let action = match rng.random_range(0..3) {
            0 => "pass".to_owned(),
            1 => format!("guide: {note}"),
            _ => format!("reject: {note}"),
        };
        let reply = format!(" the message </think><action>{action}</action>");
        out.push((HANDOFF_PROTOCOL.slow_prompt(o), reply));
        let forced = match rng.random_bool(0.5) {
            true => format!("guide: {note}"),
            false => format!("reject: {note}"),
        };
        let reply = format!(" the message </think><action>{forced}</action>");
        out.push((FORCED_PROTOCOL.slow_prompt(o), reply));
    }
    out
}

/// [`handoff_format_pairs`] encoded for SFT.
pub fn handoff_format_examples(
    tok: &Tokenizer,
    observations: &[String],
    max_len: usize,
    seed: u64,
) -> Result<Vec<SftExample>> {
    let answers = AnswerTokens::of(tok)?;
    handoff_format_pairs(observations, answers.spaced, seed)
        .into_iter()
        .enumerate()
        .map(|(k, (p, t))| {
            encode_pair(tok, &p, &t, max_len, &format!("handoff format example {k}"))
                .map_err(Error::from)
        })
        .collect()
}
