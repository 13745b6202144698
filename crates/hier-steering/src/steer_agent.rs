//! The steering agent of METHODS.md B over the search executor: it renders the observation
//! `O(g, s_t)` (the question and the executor's turns so far), answers the fast path's fixed
//! yes/no question in one forward pass, `z = log p(yes) − log p(no)`, triggers the slow path
//! with probability `p_t = σ(z − logit τ)`, and on a trigger generates
//! `<think> r </think><action> pass | stop | guide: note </action>` — parsed by
//! `hier_steer::parse` and applied as an [`Intervention`] (a guidance note, or stop-and-answer).
//!
//! The agent runs on its own adapter over a backbone that may differ from the executor's.

use hier_backbone::burn::tensor::{Tensor, TensorData};
use hier_backbone::{
    AdapterId, CausalLm, Forward, GenerationRequest, PrefixCache, SamplingConfig, Tokenizer,
};
use hier_steer::gate::{Gate, trigger_probability_f64};
use hier_steer::parse::{Intervention as Decision, parse_slow_path};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::search_agent::{Intervention, SearchState, Supervisor};
use hier_train::SharedErrors as _;

/// The fast path's question.
pub const FAST_QUESTION: &str = "Is the executor drifting, so that a supervisor should step in \
now? Answer yes or no.\nAnswer:";

/// The slow path's instruction.
pub const SLOW_INSTRUCTION: &str = "Decide how to steer the executor. Reply with \
<think> your reasoning </think> then <action>pass</action>, <action>stop</action> (it has \
enough to answer: answer now) or <action>guide: a short note</action>.\n";

/// The steering agent's two texts in one host: the fast path's yes/no question and the slow
/// path's instruction, which names the actions the host can execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol {
    pub fast_question: &'static str,
    pub slow_instruction: &'static str,
}

/// Steering the search executor before its turns: `pass`, `stop` or `guide:`.
pub const SEARCH_PROTOCOL: Protocol = Protocol {
    fast_question: FAST_QUESTION,
    slow_instruction: SLOW_INSTRUCTION,
};

impl Protocol {
    /// The fast path's prompt for an observation; `spaced` when the answer tokens are read
    /// after a space (see [`AnswerTokens`]).
    pub fn fast_prompt(&self, observation: &str, spaced: bool) -> String {
        format!(
            "{observation}{}{}",
            self.fast_question,
            if spaced { " " } else { "" }
        )
    }

    /// The slow path's prompt for an observation.
    pub fn slow_prompt(&self, observation: &str) -> String {
        format!("{observation}{}<think>", self.slow_instruction)
    }
}

/// The planning supervisor's instruction (a comparison of METHODS.md B: the same backbone,
/// asked once for a plan before the executor starts).
pub const PLAN_INSTRUCTION: &str = "Before the executor starts, write it a plan. Reply with \
<think> your reasoning </think> then <action>guide: the plan</action>.\n";

/// The verification supervisor's instruction, shown with the proposed answer.
pub const VERIFY_INSTRUCTION: &str = "Check the proposed answer against the goal and the \
results. Reply with <think> your reasoning </think> then <action>pass</action> to accept it or \
<action>guide: what is wrong</action> to reject it.\n";

/// The planning supervisor's prompt.
pub fn plan_prompt(observation: &str) -> String {
    format!("{observation}{PLAN_INSTRUCTION}<think>")
}

/// The verification supervisor's prompt for a proposed answer turn.
pub fn verify_prompt(observation: &str, answer_turn: &str) -> String {
    format!("{observation}Proposed answer: {answer_turn}\n{VERIFY_INSTRUCTION}<think>")
}

/// When the agent's slow path runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// The steering agent: the fast path's gate decides before every turn.
    Gated,
    /// A planning supervisor: once, before the first turn, a plan given as a note.
    PlanFirst,
    /// A verification supervisor: at every proposed answer; `guide: note` rejects it.
    Verify,
    /// Forced intervention: the slow path at every state, without the gate.
    Every,
}

/// Settings of the steering agent at deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerConfig {
    /// The threshold τ ∈ (0, 1): higher means fewer interventions (no retraining needed).
    pub tau: f64,
    /// Executor turns shown in the observation (the latest ones).
    pub history: usize,
    /// Characters kept of each retrieved-information block in the observation.
    pub info_chars: usize,
    /// Prompt tokens at most (longer observations lose their middle: `roles::fit_prompt`).
    pub max_prompt: usize,
    /// Slow-path sampling.
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
    pub seed: u64,
}

/// `O(g, s_t)`: the goal, the supervisor's earlier notes, and the executor's latest turns.
pub fn observation(state: &SearchState<'_>, history: usize, info_chars: usize) -> String {
    let mut o = format!("Goal: answer the question: {}\n", state.question.trim());
    for g in state.guidance {
        o.push_str(&format!("Earlier note: {g}\n"));
    }
    let skip = state.turns.len().saturating_sub(history);
    o.push_str(&format!(
        "The executor has taken {} turns{}:\n",
        state.turns.len(),
        if skip > 0 {
            format!(" ({skip} not shown)")
        } else {
            String::new()
        }
    ));
    for (turn, info) in &state.turns[skip..] {
        let info: String = info.chars().take(info_chars).collect();
        o.push_str(&format!("{turn}\n{info}\n"));
    }
    o
}

/// The search host's fast-path prompt ([`SEARCH_PROTOCOL`]).
pub fn fast_prompt(observation: &str, spaced: bool) -> String {
    SEARCH_PROTOCOL.fast_prompt(observation, spaced)
}

/// The search host's slow-path prompt ([`SEARCH_PROTOCOL`]).
pub fn slow_prompt(observation: &str) -> String {
    SEARCH_PROTOCOL.slow_prompt(observation)
}

/// The tokens whose logits the fast path compares. Where ` yes` and ` no` are single, distinct
/// tokens (instruct checkpoints' vocabularies), they follow `Answer:` directly; otherwise the
/// prompt ends with the space and the first tokens of `yes` and `no` are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerTokens {
    pub yes: u32,
    pub no: u32,
    pub spaced: bool,
}

/// The fast path's answer as a training target after its prompt (`spaced`: the prompt ends
/// with the space, see [`AnswerTokens`]).
pub fn answer_word(yes: bool, spaced: bool) -> &'static str {
    match (yes, spaced) {
        (true, true) => "yes",
        (true, false) => " yes",
        (false, true) => "no",
        (false, false) => " no",
    }
}

impl AnswerTokens {
    pub fn of(tok: &Tokenizer) -> Result<Self> {
        let enc = |w: &str| {
            tok.encode(w, false)
                .map_err(|source| hier_train::Error::Tokenize {
                    what: format!("steering: {w:?}"),
                    source,
                })
        };
        let (y, n) = (enc(" yes")?, enc(" no")?);
        if y.len() == 1 && n.len() == 1 && y != n {
            return Ok(Self {
                yes: y[0],
                no: n[0],
                spaced: false,
            });
        }
        let (y, n) = (enc("yes")?, enc("no")?);
        match (y.first(), n.first()) {
            (Some(&yes), Some(&no)) if yes != no => Ok(Self {
                yes,
                no,
                spaced: true,
            }),
            _ => Err(Error::invalid(
                "steering: the tokenizer cannot tell `yes` from `no` by one token".into(),
            )),
        }
    }
}

/// The fast path's log-odds `z` of each prompt, from one forward pass each (batched): the
/// logits predicting the token after the prompt, `z = logit_yes − logit_no`.
pub fn log_odds(
    lm: &CausalLm,
    adapter: Option<AdapterId>,
    prompts: &[Vec<u32>],
    yes: u32,
    no: u32,
    train: bool,
) -> Result<hier_backbone::burn::tensor::Tensor<1>> {
    if yes == no {
        return Err(Error::invalid(
            "steering: `yes` and `no` start with the same token".into(),
        ));
    }
    // Scoring `yes` as a one-token continuation returns the logits at the prediction position.
    let requests: Vec<hier_backbone::ScoreRequest> = prompts
        .iter()
        .map(|p| hier_backbone::ScoreRequest {
            prompt: p.clone(),
            continuation: vec![yes],
        })
        .collect();
    let out = lm
        .score(&requests, Forward { adapter, train })
        .map_err(|e| Error::invalid(format!("steering fast path: {e}")))?;
    let [b, _, v] = out.logits.dims();
    let logits = out.logits.narrow(1, 0, 1).reshape([b, v]);
    Ok(hier_steer::gate::yes_no_log_odds(
        logits,
        yes as usize,
        no as usize,
    )?)
}

/// What the agent did at one state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteerRecord {
    /// The fast path's log-odds (`None`: the slow path was run without the gate).
    pub z: Option<f32>,
    pub trigger_probability: f64,
    pub triggered: bool,
    /// The slow path's raw output and what it was read as (`None`: not triggered, or
    /// unreadable — then nothing is applied).
    pub output: Option<String>,
    pub intervention: Option<Intervention>,
    /// A rejection the host executed or refused (pipeline handoffs, verification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject: Option<String>,
    pub parse_error: Option<String>,
}

/// The steering agent as a [`Supervisor`] of the search executor.
pub struct SteeringAgent<'a> {
    pub lm: &'a CausalLm,
    pub tokenizer: &'a Tokenizer,
    pub adapter: Option<AdapterId>,
    pub config: SteerConfig,
    /// [`Schedule::Gated`] unless set otherwise.
    pub schedule: Schedule,
    /// [`SEARCH_PROTOCOL`] unless set otherwise.
    pub protocol: Protocol,
    gate: Gate,
    answers: AnswerTokens,
    calls: u64,
    /// Keys and values of the observations the fast path read, so that the slow path, whose
    /// prompt starts with the same observation, prefills only its instruction (`None`: every
    /// prompt is computed whole).
    prefixes: Option<PrefixCache>,
    /// Every decision, in order.
    pub log: Vec<SteerRecord>,
}

impl<'a> SteeringAgent<'a> {
    pub fn new(
        lm: &'a CausalLm,
        tokenizer: &'a Tokenizer,
        adapter: Option<AdapterId>,
        config: SteerConfig,
    ) -> Result<Self> {
        hier_steer::gate::logit(config.tau)?;
        Ok(Self {
            lm,
            tokenizer,
            adapter,
            schedule: Schedule::Gated,
            protocol: SEARCH_PROTOCOL,
            gate: Gate::new(config.seed),
            config,
            answers: AnswerTokens::of(tokenizer)?,
            calls: 0,
            prefixes: None,
            log: Vec::new(),
        })
    }

    /// The same agent keeping `mib` MiB of keys and values across its calls (0: none): the
    /// slow path reuses the observation its fast path has just read. Decisions equal those
    /// computed without it up to float rounding of the logits.
    pub fn with_prefix_cache_mib(mut self, mib: usize) -> Self {
        self.prefixes = (mib > 0).then(|| PrefixCache::with_mib(self.lm, mib));
        self
    }

    /// What the agent's prompts cost: prompt tokens and how many were prefilled (zero when it
    /// keeps no cache).
    pub fn prefill_stats(&self) -> hier_backbone::PrefillStats {
        self.prefixes
            .as_ref()
            .map(PrefixCache::stats)
            .unwrap_or_default()
    }

    /// The fast path's log-odds of each prompt, over the cache where the agent keeps one.
    fn gate_log_odds(&mut self, prompts: &[Vec<u32>]) -> Result<Vec<f32>> {
        if prompts.is_empty() {
            return Ok(Vec::new());
        }
        let a = self.answers;
        let z = match self.prefixes.as_mut() {
            None => log_odds(self.lm, self.adapter, prompts, a.yes, a.no, false)?,
            Some(cache) => {
                let rows = self
                    .lm
                    .next_logits_cached(prompts, self.adapter, cache)
                    .map_err(|e| Error::invalid(format!("steering fast path: {e}")))?;
                let vocab = rows.first().map_or(0, Vec::len);
                let logits = Tensor::<2>::from_data(
                    TensorData::new(rows.concat(), [rows.len(), vocab]),
                    &self.lm.device(),
                );
                hier_steer::gate::yes_no_log_odds(logits, a.yes as usize, a.no as usize)?
            }
        };
        z.into_data()
            .try_to_vec::<f32>()
            .map_err(|e| Error::invalid(format!("steering: {e:?}")))
    }

    /// The same agent run on another schedule (a planning or verification supervisor).
    pub fn with_schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// The same agent in another host ([`crate::mas::HANDOFF_PROTOCOL`]).
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        encode_prompt(self.tokenizer, text, self.config.max_prompt)
    }

    /// Samples the slow path for each prompt (one batched call) and reads each output.
    fn slow(&mut self, prompts: &[String]) -> Result<Vec<SlowOutput>> {
        let seed = self.config.seed.wrapping_add(self.calls);
        self.calls += 1;
        sample_slow(
            self.lm,
            self.tokenizer,
            self.adapter,
            prompts,
            &self.config,
            seed,
            self.prefixes.as_mut(),
        )
    }
}

/// Samples the slow path once per prompt (one batched generation from `seed`, over `cache`
/// where given) and reads each output.
pub fn sample_slow(
    lm: &CausalLm,
    tok: &Tokenizer,
    adapter: Option<AdapterId>,
    prompts: &[String],
    cfg: &SteerConfig,
    seed: u64,
    cache: Option<&mut PrefixCache>,
) -> Result<Vec<SlowOutput>> {
    let requests = prompts
        .iter()
        .map(|p| {
            Ok(GenerationRequest {
                prompt: encode_prompt(tok, p, cfg.max_prompt)?,
                stop_tokens: Vec::new(),
                stop_strings: vec!["</action>".into()],
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let sampling = SamplingConfig {
        max_new_tokens: cfg.max_tokens,
        temperature: cfg.temperature,
        top_k: Some(cfg.top_k),
        top_p: Some(cfg.top_p),
        seed,
        use_cache: true,
    };
    // Only to watch for the stop string while generating: ids that do not decode there cannot
    // hold it, and the final decode below reports them.
    let watch = |ids: &[u32]| tok.decode(ids, true).unwrap_or_default();
    let outs = match cache {
        Some(c) => lm.generate_cached(&requests, &sampling, adapter, Some(&watch), c),
        None => lm.generate(&requests, &sampling, adapter, Some(&watch)),
    }
    .map_err(|e| Error::invalid(format!("steering slow path: {e}")))?;
    outs.into_iter()
        .map(|g| {
            let text = tok
                .decode(&g.tokens, true)
                .map_err(|e| Error::invalid(format!("steering slow path: {e}")))?;
            Ok(read_slow_path(&text))
        })
        .collect()
}

/// A prompt's ids, cut to `max_prompt` tokens by [`hier_train::prompt::fit_prompt`].
pub fn encode_prompt(tok: &Tokenizer, text: &str, max_prompt: usize) -> Result<Vec<u32>> {
    let mut ids = tok
        .encode(text, false)
        .map_err(|e| Error::invalid(format!("steering: {e}")))?;
    hier_train::prompt::fit_prompt(&mut ids, max_prompt.max(1));
    Ok(ids)
}

/// A slow-path output as generated (after the prompt's `<think>`) and what it was read as.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowOutput {
    /// The generated text, from the prompt's `<think>` on.
    pub text: String,
    /// `None`: `pass`, a rejection, or unreadable (then nothing is applied).
    pub intervention: Option<Intervention>,
    pub parse_error: Option<String>,
    /// `reject: <reason>`: the message under review should be sent back. Only a host with such
    /// a message (a proposed answer under verification, a pipeline handoff) can do it;
    /// elsewhere [`SlowOutput::before_a_turn`] makes it an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject: Option<String>,
}

/// Why a rejection before a turn is not applied.
pub const NOTHING_TO_REJECT: &str = "reject: nothing to reject before a turn (only a proposed answer or a handoff can be sent back)";

/// Why a `stop` at a handoff is not applied.
pub const NOTHING_TO_STOP: &str =
    "stop: nothing to stop at a handoff (pass, guide: or reject: the message)";

impl SlowOutput {
    /// As a verifier's verdict on a proposed answer: the answer is sent back with the note
    /// (`guide:`) or the reason (`reject:`) — the executor carries on instead of answering —
    /// or accepted (`pass`, `stop`, unreadable).
    pub fn sends_answer_back(&self) -> Option<String> {
        match (&self.intervention, &self.reject, &self.parse_error) {
            (Some(Intervention::Guidance(n)), _, _) => Some(n.clone()),
            (None, Some(reason), None) => Some(reason.clone()),
            _ => None,
        }
    }

    /// The output as read at a pipeline handoff, where `pass`, `guide:` (a note added to the
    /// message) and `reject:` (the sender redoes its work) can be executed; `stop` cannot
    /// (there is no search to stop): an error there (unreadable, counted, no advantage).
    pub fn at_a_handoff(mut self) -> Self {
        if self.intervention == Some(Intervention::StopAndAnswer) {
            self.intervention = None;
            self.parse_error = Some(NOTHING_TO_STOP.into());
        }
        self
    }

    /// The output as read by a host that acts before the executor's turn, where there is no
    /// message to send back: a `reject` is an error there (unreadable: not applied, counted,
    /// no training advantage), never quietly turned into a note.
    pub fn before_a_turn(mut self) -> Self {
        if self.reject.is_some() && self.parse_error.is_none() {
            self.parse_error = Some(NOTHING_TO_REJECT.into());
        }
        self
    }
}

/// Reads a generated slow-path continuation (the prompt ended with `<think>`).
pub fn read_slow_path(generated: &str) -> SlowOutput {
    let text = format!("<think>{generated}");
    if !text.contains("</action>") {
        // Generation stops at `</action>`, so without it the output was cut at `max_tokens`:
        // unreadable (counted as such), never completed by hand into something it did not say.
        return SlowOutput {
            text,
            intervention: None,
            parse_error: Some("cut at max_tokens before </action>".into()),
            reject: None,
        };
    }
    let (intervention, parse_error, reject) = match parse_slow_path(&text) {
        Ok(p) => match p.intervention {
            Decision::Pass => (None, None, None),
            Decision::Stop => (Some(Intervention::StopAndAnswer), None, None),
            Decision::Guide(note) => (Some(Intervention::Guidance(note)), None, None),
            Decision::Reject(reason) => (None, None, Some(reason)),
        },
        Err(e) => (None, Some(e.to_string()), None),
    };
    SlowOutput {
        text,
        intervention,
        parse_error,
        reject,
    }
}

impl Supervisor for SteeringAgent<'_> {
    fn decide(&mut self, states: &[SearchState<'_>]) -> Result<Vec<Option<Intervention>>> {
        match self.schedule {
            Schedule::Gated | Schedule::Every => self.decide_gated(states),
            Schedule::Verify => Ok(vec![None; states.len()]),
            Schedule::PlanFirst => {
                let first: Vec<usize> = (0..states.len())
                    .filter(|&i| states[i].turns.is_empty() && states[i].guidance.is_empty())
                    .collect();
                let mut out = vec![None; states.len()];
                if first.is_empty() {
                    return Ok(out);
                }
                let prompts: Vec<String> = first
                    .iter()
                    .map(|&i| plan_prompt(&self.observe(&states[i])))
                    .collect();
                for (&i, o) in first.iter().zip(self.slow(&prompts)?) {
                    let o = o.before_a_turn();
                    // A plan is a note; `stop` before the first turn means nothing.
                    let plan = match &o.intervention {
                        Some(Intervention::Guidance(_)) => o.intervention.clone(),
                        _ => None,
                    };
                    self.log.push(SteerRecord::forced(o, plan.clone()));
                    out[i] = plan;
                }
                Ok(out)
            }
        }
    }

    fn review(
        &mut self,
        states: &[SearchState<'_>],
        answers: &[&str],
    ) -> Result<Vec<Option<String>>> {
        if self.schedule != Schedule::Verify {
            return Ok(vec![None; answers.len()]);
        }
        let prompts: Vec<String> = states
            .iter()
            .zip(answers)
            .map(|(s, a)| verify_prompt(&self.observe(s), a))
            .collect();
        let mut out = Vec::with_capacity(answers.len());
        for o in self.slow(&prompts)? {
            let note = o.sends_answer_back();
            self.log.push(SteerRecord::forced(
                o,
                note.clone().map(Intervention::Guidance),
            ));
            out.push(note);
        }
        Ok(out)
    }
}

impl SteerRecord {
    /// A slow path run without the gate (planning, verification).
    fn forced(o: SlowOutput, applied: Option<Intervention>) -> Self {
        Self {
            z: None,
            trigger_probability: 1.0,
            triggered: true,
            output: Some(o.text),
            intervention: applied,
            reject: o.reject,
            parse_error: o.parse_error,
        }
    }
}

impl SteeringAgent<'_> {
    fn observe(&self, state: &SearchState<'_>) -> String {
        observation(state, self.config.history, self.config.info_chars)
    }

    fn decide_gated(&mut self, states: &[SearchState<'_>]) -> Result<Vec<Option<Intervention>>> {
        let (history, chars) = (self.config.history, self.config.info_chars);
        let obs: Vec<String> = states
            .iter()
            .map(|s| observation(s, history, chars))
            .collect();
        Ok(self
            .steer(&obs, SlowOutput::before_a_turn)?
            .into_iter()
            .map(|o| o.and_then(|o| o.intervention))
            .collect())
    }

    /// The agent at each observation: the fast path's gate (or none: [`Schedule::Every`]),
    /// then the slow path, in one batched call, where it triggered — its output as the host
    /// reads it (`read`). Every decision goes to the log.
    pub fn steer(
        &mut self,
        observations: &[String],
        read: fn(SlowOutput) -> SlowOutput,
    ) -> Result<Vec<Option<SlowOutput>>> {
        let protocol = self.protocol;
        let mut records: Vec<SteerRecord> = Vec::with_capacity(observations.len());
        if self.schedule == Schedule::Every {
            records.extend(observations.iter().map(|_| SteerRecord {
                z: None,
                trigger_probability: 1.0,
                triggered: true,
                output: None,
                intervention: None,
                reject: None,
                parse_error: None,
            }));
        } else {
            let prompts = observations
                .iter()
                .map(|o| self.encode(&protocol.fast_prompt(o, self.answers.spaced)))
                .collect::<Result<Vec<_>>>()?;
            let z = self.gate_log_odds(&prompts)?;
            for &zi in &z {
                let p = trigger_probability_f64(f64::from(zi), self.config.tau)?;
                records.push(SteerRecord {
                    z: Some(zi),
                    trigger_probability: p,
                    triggered: self.gate.decide(p),
                    output: None,
                    intervention: None,
                    reject: None,
                    parse_error: None,
                });
            }
        }
        let slow: Vec<usize> = (0..observations.len())
            .filter(|&i| records[i].triggered)
            .collect();
        let mut out: Vec<Option<SlowOutput>> = vec![None; observations.len()];
        if !slow.is_empty() {
            let prompts: Vec<String> = slow
                .iter()
                .map(|&i| protocol.slow_prompt(&observations[i]))
                .collect();
            for (&i, o) in slow.iter().zip(self.slow(&prompts)?) {
                let o = read(o);
                let r = &mut records[i];
                r.intervention = o.intervention.clone();
                r.reject = o.reject.clone();
                r.parse_error = o.parse_error.clone();
                r.output = Some(o.text.clone());
                out[i] = Some(o);
            }
        }
        self.log.extend(records);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_show_the_goal_notes_and_the_latest_turns() {
        let turns: Vec<(String, String)> = (0..4)
            .map(|k| {
                (
                    format!("<search> q{k} </search>"),
                    format!("<information>doc {k} text</information>"),
                )
            })
            .collect();
        let notes = vec!["stop soon".to_owned()];
        let s = SearchState {
            question: "Who founded X?",
            turns: &turns,
            guidance: &notes,
        };
        let o = observation(&s, 2, 18);
        assert!(
            o.starts_with("Goal: answer the question: Who founded X?\nEarlier note: stop soon\n")
        );
        assert!(o.contains("taken 4 turns (2 not shown)"));
        assert!(!o.contains("q1") && o.contains("<search> q2 </search>\n<information>doc 2\n"));
        assert!(fast_prompt(&o, false).ends_with("Answer:"));
        assert!(fast_prompt(&o, true).ends_with("Answer: "));
        assert!(slow_prompt(&o).ends_with("<think>"));
    }

    #[test]
    fn a_slow_path_output_cut_before_its_closing_tag_is_unreadable_not_completed() {
        let whole =
            read_slow_path(" the last turn repeats </think><action>guide: search X</action>");
        assert_eq!(
            (whole.intervention, whole.parse_error),
            (Some(Intervention::Guidance("search X".into())), None)
        );
        // A rejection is read as one; before a turn it is an error, not a note.
        let reject = read_slow_path(" off topic </think><action>reject: wrong entity</action>");
        assert_eq!(
            (&reject.intervention, &reject.reject, &reject.parse_error),
            (&None, &Some("wrong entity".into()), &None)
        );
        // A verifier executes it: the answer goes back with the reason.
        assert_eq!(reject.sends_answer_back().as_deref(), Some("wrong entity"));
        let pass = read_slow_path(" fine </think><action>pass</action>");
        assert_eq!(pass.sends_answer_back(), None);
        let before = reject.before_a_turn();
        assert_eq!(before.sends_answer_back(), None, "an error is not executed");
        assert_eq!(before.parse_error.as_deref(), Some(NOTHING_TO_REJECT));
        assert_eq!(before.intervention, None);
        let cut = read_slow_path(" the last turn repeats </think><action>guide: sea");
        assert_eq!(cut.intervention, None);
        assert_eq!(
            cut.parse_error.as_deref(),
            Some("cut at max_tokens before </action>")
        );
        assert_eq!(
            cut.text, "<think> the last turn repeats </think><action>guide: sea",
            "the text is what was generated, nothing added"
        );
    }
}
