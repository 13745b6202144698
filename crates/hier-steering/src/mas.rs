//! The multi-agent pipeline of METHODS.md B (TacoMAS-style, five fixed roles): planner →
//! searcher → researcher → verifier → summariser, each the same frozen model with its own role
//! prompt, each passing a **handoff message** to the next. The searcher plays the search
//! protocol over the retrieval environment ([`crate::search_agent`]); the verifier may send
//! the work back to the searcher (bounded); the summariser answers, and its answer is scored.
//!
//! A supervisor sees the goal and the message at every handoff ([`HandoffSupervisor`]) and may
//! pass it, add a guidance note to it, or reject it so that the sender redoes its work —
//! executed, bounded per episode ([`MasConfig::max_retries`]), counted. The steering agent is
//! one ([`HANDOFF_PROTOCOL`]; forced intervention: [`FORCED_PROTOCOL`] at every handoff); for
//! its training the pipeline is a [`SteeredProcess`] ([`MasProcess`]) whose bank holds the
//! states at the handoffs of unsteered episodes.
//!
//! Episodes of a batch play in lock step: whatever role each acts as, one batched call of the
//! model per step. A state at a handoff ([`MasState`]) is plain data: an episode resumes from
//! it, its searcher's turns replayed in the environment.

use hier_envs::qa::env::{Call, QaEnv, parse_call};
use hier_envs::{Env, Task, step_all};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use crate::prompting::{Render, RolePrompt};
use crate::search_agent::Intervention;
use crate::search_agent::{CALL_TAGS, complete_call, replay};
use crate::steer_agent::{Protocol, SlowOutput, SteeringAgent};
use crate::steer_train::SteeredProcess;
use hier_train::SharedErrors as _;
use hier_train::policy::TextPolicy;

/// The fast path's question at a handoff.
pub const HANDOFF_QUESTION: &str = "Is this handoff drifting from the goal, so that a \
supervisor should step in now? Answer yes or no.\nAnswer:";

/// Steering a pipeline at its handoffs: `pass`, `guide:` (a note added to the message) or
/// `reject:` (the sender redoes its work).
pub const HANDOFF_PROTOCOL: Protocol = Protocol {
    fast_question: HANDOFF_QUESTION,
    slow_instruction: "Decide how to steer this handoff. Reply with <think> your reasoning \
</think> then <action>pass</action>, <action>guide: a short note</action> (added to the \
message) or <action>reject: the reason</action> (the sender redoes its work).\n",
};

/// Forced intervention at every handoff: the same agent, no gate, and no `pass` offered.
pub const FORCED_PROTOCOL: Protocol = Protocol {
    fast_question: HANDOFF_QUESTION,
    slow_instruction: "You must intervene at this handoff. Reply with <think> your reasoning \
</think> then <action>guide: a short note</action> (added to the message) or <action>reject: \
the reason</action> (the sender redoes its work).\n",
};

/// The searcher's worked example (our own invented question and pages, not from any data
/// set): a 135M-parameter instruct model given only the instruction writes prose.
pub const SEARCHER_EXAMPLE: &str = "Example:\nQuestion: Who founded the studio that made Blue \
Lantern?\n<search> Blue Lantern </search>\n<information>[Doc 1](blue-lantern):\nBlue Lantern \
is a game made by Oravo Works.</information>\n<search> Oravo Works </search>\n\
<information>[Doc 1](oravo-works):\nOravo Works was founded by Tal Meren.</information>\n\
End of example.";

/// The five roles, in pipeline order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Planner,
    Searcher,
    Researcher,
    Verifier,
    Summariser,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Searcher => "searcher",
            Role::Researcher => "researcher",
            Role::Verifier => "verifier",
            Role::Summariser => "summariser",
        }
    }
}

/// The pipeline's settings (`[mas]` of a `reproduce steering-mas` profile).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MasConfig {
    /// Searcher turns per visit (the environment's turn limit bounds all visits together).
    pub search_turns: usize,
    /// Times the verifier may send the work back to the searcher per episode; a later
    /// send-back is taken as acceptance (counted), so an over-rejecting verifier costs turns
    /// but cannot loop forever.
    pub max_sendbacks: usize,
    /// Rejections of a supervisor executed per episode; later ones are refused (the message
    /// passes as it is) and counted.
    pub max_retries: usize,
    /// Characters of a handoff message at most (what the next role and the supervisor read).
    pub message_chars: usize,
    /// Characters of each retrieved block in the searcher's findings.
    pub info_chars: usize,
}

impl MasConfig {
    pub fn check(&self) -> Result<()> {
        if self.search_turns == 0 || self.message_chars == 0 || self.info_chars == 0 {
            return Err(Error::invalid(
                "mas: search_turns, message_chars and info_chars must be positive".into(),
            ));
        }
        Ok(())
    }
}

/// A message from one role to the next, waiting for the supervisor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    pub from: Role,
    pub to: Role,
    pub message: String,
}

/// What a supervisor does at a handoff (`None` in its place: pass).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "text")]
pub enum HandoffAction {
    /// A note added to the message.
    Guide(String),
    /// The message goes back to its sender, who redoes its work with the reason.
    Reject(String),
}

/// An intervention applied at a handoff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HandoffIntervention {
    /// Agent turns taken when it was applied.
    pub at_turn: usize,
    pub from: Role,
    pub to: Role,
    pub action: HandoffAction,
}

/// One episode of the pipeline: everything the roles have said so far. At a handoff
/// (`pending`) it is a state of the steering bank, and an episode resumes from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasState {
    pub task: Task,
    pub question: String,
    /// The messages each role received: the plan, the findings, the research, the verdict.
    pub plan: String,
    pub findings: String,
    pub research: String,
    pub verdict: String,
    /// The searcher's turns with their results (replayed on resume), over all its visits.
    pub search_turns: Vec<(String, String)>,
    /// Its turns in the current visit, and whether the environment has ended its search.
    pub visit_turns: usize,
    pub search_over: bool,
    /// The answer the searcher proposed, if any.
    pub proposed: Option<String>,
    /// Why a role redoes its work (send-backs, rejections), shown in its later prompts.
    pub redo: Vec<(Role, String)>,
    /// Who acts next, and the message waiting at a handoff.
    pub next: Role,
    pub pending: Option<Handoff>,
    pub agent_turns: usize,
    pub sendbacks: usize,
    /// Send-backs past `max_sendbacks`, taken as acceptance.
    pub sendbacks_refused: usize,
    pub interventions: Vec<HandoffIntervention>,
    pub rejects_executed: usize,
    pub rejects_refused: usize,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// The summariser's answer, once given.
    pub answer: Option<String>,
    pub done: bool,
}

/// The first `n` characters of a message (with `…` when cut).
fn clip(text: &str, n: usize) -> String {
    let t = text.trim();
    if t.chars().count() <= n {
        return t.to_owned();
    }
    let mut s: String = t.chars().take(n).collect();
    s.push('…');
    s
}

impl MasState {
    /// A fresh episode of `task` with its question.
    pub fn fresh(task: &Task, question: &str) -> Self {
        Self {
            task: task.clone(),
            question: question.trim().to_owned(),
            plan: String::new(),
            findings: String::new(),
            research: String::new(),
            verdict: String::new(),
            search_turns: Vec::new(),
            visit_turns: 0,
            search_over: false,
            proposed: None,
            redo: Vec::new(),
            next: Role::Planner,
            pending: None,
            agent_turns: 0,
            sendbacks: 0,
            sendbacks_refused: 0,
            interventions: Vec::new(),
            rejects_executed: 0,
            rejects_refused: 0,
            prompt_tokens: 0,
            generated_tokens: 0,
            answer: None,
            done: false,
        }
    }

    fn redo_lines(&self, role: Role) -> Vec<String> {
        self.redo
            .iter()
            .filter(|(r, _)| *r == role)
            .map(|(_, why)| format!("Sent back to you: {why}"))
            .collect()
    }

    /// The prompt of the role that acts next.
    pub fn prompt(&self) -> RolePrompt {
        let q = &self.question;
        let redo = self.redo_lines(self.next).join("\n");
        let redo = if redo.is_empty() {
            String::new()
        } else {
            format!("{redo}\n")
        };
        let (text, reply_prefix) = match self.next {
            Role::Planner => (
                format!(
                    "You are the planner of a team that answers a question by searching a \
                     library. Write a short plan: the facts to look up, in order.\nQuestion: \
                     {q}\n{redo}Plan:"
                ),
                "",
            ),
            Role::Searcher => {
                let mut t = format!(
                    "You are the searcher of a team that answers a question by searching a \
                     library of pages. Search for one name or short phrase at a time.\n\
                     {SEARCHER_EXAMPLE}\nQuestion: {q}\nPlan from the planner: {}\n{redo}",
                    self.plan
                );
                for (turn, info) in &self.search_turns {
                    t.push_str(turn);
                    t.push('\n');
                    t.push_str(info);
                    t.push('\n');
                }
                (t, "<search>")
            }
            Role::Researcher => (
                format!(
                    "You are the researcher of a team that answers a question. Read the plan \
                     and the searcher's findings, work out the answer step by step and end \
                     with `Candidate answer: <answer>`.\nPlan: {}\nFindings:\n{}\n{redo}\
                     Question: {q}\nResearch:",
                    self.plan, self.findings
                ),
                "",
            ),
            Role::Verifier => (
                format!(
                    "You are the verifier of a team that answers a question. Check the \
                     researcher's candidate answer against the findings. Reply `accept` if the \
                     findings support it, or `send back: what to search for` if they do not.\n\
                     Question: {q}\nFindings:\n{}\nResearch: {}\n{redo}Verdict:",
                    self.findings, self.research
                ),
                "",
            ),
            // The question comes last: a 135M model asked first and shown the pages after
            // copies the question back or writes about the pages.
            Role::Summariser => (
                format!(
                    "You are the summariser of a team that answers a question. Read the \
                     findings and answer the question with a name or a year from them, nothing \
                     else.\nFindings:\n{}\nResearch: {}\nVerdict: {}\n{redo}Question: {q}\n\
                     Answer:",
                    self.findings, self.research, self.verdict
                ),
                "<answer>",
            ),
        };
        RolePrompt { text, reply_prefix }
    }

    /// The searcher's findings: its calls and what came back (each block cut to
    /// `info_chars`), newest first, and its proposed answer.
    fn render_findings(&self, cfg: &MasConfig) -> String {
        let mut m = String::new();
        if let Some(a) = &self.proposed {
            m.push_str(&format!("Proposed answer: {a}\n"));
        }
        for (turn, info) in self.search_turns.iter().rev() {
            let call = match parse_call(turn) {
                Some(Call::Search(q)) => format!("search: {q}"),
                Some(Call::Access(u)) => format!("access: {u}"),
                _ => format!("unreadable call: {}", clip(turn, 40)),
            };
            let info = info
                .trim()
                .trim_start_matches("<information>")
                .trim_end_matches("</information>");
            m.push_str(&format!("- {call} → {}\n", clip(info, cfg.info_chars)));
        }
        if m.is_empty() {
            m.push_str("(nothing found)");
        }
        clip(&m, cfg.message_chars)
    }

    /// Ends the searcher's visit: its findings go to the researcher.
    fn end_visit(&mut self, cfg: &MasConfig) {
        self.pending = Some(Handoff {
            from: Role::Searcher,
            to: Role::Researcher,
            message: self.render_findings(cfg),
        });
    }

    /// Applies the supervisor's decision to the waiting handoff (`None`: pass).
    pub fn decide(&mut self, action: Option<HandoffAction>, cfg: &MasConfig) -> Result<()> {
        let Some(mut h) = self.pending.take() else {
            return Err(Error::invalid(format!(
                "{}: a decision without a handoff",
                self.task
            )));
        };
        let applied = |s: &mut Self, action: HandoffAction, h: &Handoff| {
            s.interventions.push(HandoffIntervention {
                at_turn: s.agent_turns,
                from: h.from,
                to: h.to,
                action,
            });
        };
        match action {
            None => self.deliver(h),
            Some(HandoffAction::Guide(note)) => {
                h.message
                    .push_str(&format!("\nNote from a supervisor: {}", note.trim()));
                applied(self, HandoffAction::Guide(note), &h);
                self.deliver(h);
            }
            Some(HandoffAction::Reject(reason)) if self.rejects_executed < cfg.max_retries => {
                self.rejects_executed += 1;
                self.redo.push((
                    h.from,
                    format!("a supervisor rejected your message: {}", reason.trim()),
                ));
                self.next = h.from;
                if h.from == Role::Searcher {
                    self.visit_turns = 0;
                }
                applied(self, HandoffAction::Reject(reason), &h);
            }
            Some(HandoffAction::Reject(_)) => {
                self.rejects_refused += 1;
                self.deliver(h);
            }
        }
        Ok(())
    }

    fn deliver(&mut self, h: Handoff) {
        match (h.from, h.to) {
            (Role::Planner, _) => self.plan = h.message,
            (Role::Searcher, _) => self.findings = h.message,
            (Role::Researcher, _) => self.research = h.message,
            (Role::Verifier, Role::Searcher) => {
                self.redo.push((Role::Searcher, h.message));
                self.visit_turns = 0;
            }
            (Role::Verifier, _) => self.verdict = h.message,
            (Role::Summariser, _) => {}
        }
        self.next = h.to;
    }

    /// Takes the next role's reply (the searcher's calls go to the environment: returned
    /// here, completed with its closing tag, to be stepped).
    fn take_reply(&mut self, reply: &str, cfg: &MasConfig) -> Option<String> {
        let text = reply.trim();
        match self.next {
            Role::Planner => {
                self.pending = Some(Handoff {
                    from: Role::Planner,
                    to: Role::Searcher,
                    message: clip(text, cfg.message_chars),
                });
            }
            Role::Searcher => {
                // The reply continues its prefix, `<search>`; a model that writes a whole
                // call of its own (an answer, say) is read as it wrote it.
                let own_call = CALL_TAGS.iter().any(|t| text.contains(&format!("<{t}>")));
                let turn = match own_call {
                    true => complete_call(text),
                    false => complete_call(&format!("<search> {text}")),
                };
                if let Some(Call::Answer(a)) = parse_call(&turn) {
                    // Proposed to the team, not to the environment (only the summariser's
                    // answer is scored).
                    self.proposed = Some(a);
                    self.end_visit(cfg);
                } else {
                    return Some(turn);
                }
            }
            Role::Researcher => {
                self.pending = Some(Handoff {
                    from: Role::Researcher,
                    to: Role::Verifier,
                    message: clip(text, cfg.message_chars),
                });
            }
            Role::Verifier => {
                let lower = text.to_lowercase();
                let sends_back = lower.contains("send back");
                let refused = sends_back && self.sendbacks >= cfg.max_sendbacks;
                if refused {
                    self.sendbacks_refused += 1;
                }
                let to = if sends_back && !refused {
                    self.sendbacks += 1;
                    Role::Searcher
                } else {
                    Role::Summariser
                };
                self.pending = Some(Handoff {
                    from: Role::Verifier,
                    to,
                    message: clip(text, cfg.message_chars),
                });
            }
            Role::Summariser => {
                // The reply continues its prefix, `<answer>`.
                let text = match text.contains("<answer>") {
                    true => complete_call(text),
                    false => complete_call(&format!("<answer> {text}")),
                };
                let answer = hier_envs::qa::score::extract_answer(&text).unwrap_or_else(|| {
                    text.lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("")
                        .trim()
                        .to_owned()
                });
                self.answer = Some(answer);
                self.done = true;
            }
        }
        None
    }

    /// `O(g, s)` at the waiting handoff: the goal, the pipeline's progress, the notes and
    /// rejections given so far, and the message.
    pub fn observation(&self) -> String {
        let mut o = format!("Goal: answer the question: {}\n", self.question);
        o.push_str(&format!(
            "A team (planner, searcher, researcher, verifier, summariser) has taken {} turns.\n",
            self.agent_turns
        ));
        for i in &self.interventions {
            let (kind, text) = match &i.action {
                HandoffAction::Guide(n) => ("note", n),
                HandoffAction::Reject(r) => ("rejection", r),
            };
            o.push_str(&format!(
                "Earlier {kind} ({} to {}): {text}\n",
                i.from.name(),
                i.to.name()
            ));
        }
        if let Some(h) = &self.pending {
            o.push_str(&format!(
                "Handoff from the {} to the {}:\n{}\n",
                h.from.name(),
                h.to.name(),
                h.message
            ));
        }
        o
    }
}

/// A supervisor consulted at every handoff.
pub trait HandoffSupervisor {
    /// One decision per state, each at a handoff (`None`: pass).
    fn at_handoffs(&mut self, states: &[&MasState]) -> Result<Vec<Option<HandoffAction>>>;
}

/// What the steering agent's output does at a handoff (read by
/// [`SlowOutput::at_a_handoff`] first).
pub fn handoff_action(o: &SlowOutput) -> Option<HandoffAction> {
    if o.parse_error.is_some() {
        return None;
    }
    match (&o.intervention, &o.reject) {
        (Some(Intervention::Guidance(n)), _) => Some(HandoffAction::Guide(n.clone())),
        (None, Some(r)) => Some(HandoffAction::Reject(r.clone())),
        _ => None,
    }
}

impl HandoffSupervisor for SteeringAgent<'_> {
    fn at_handoffs(&mut self, states: &[&MasState]) -> Result<Vec<Option<HandoffAction>>> {
        let obs: Vec<String> = states.iter().map(|s| s.observation()).collect();
        Ok(self
            .steer(&obs, SlowOutput::at_a_handoff)?
            .iter()
            .map(|o| o.as_ref().and_then(handoff_action))
            .collect())
    }
}

/// Keeps every state at a handoff and passes (the steering bank's collector).
#[derive(Default)]
pub struct HandoffRecorder {
    pub states: Vec<MasState>,
}

impl HandoffSupervisor for HandoffRecorder {
    fn at_handoffs(&mut self, states: &[&MasState]) -> Result<Vec<Option<HandoffAction>>> {
        self.states.extend(states.iter().map(|s| (*s).clone()));
        Ok(vec![None; states.len()])
    }
}

/// Plays every start to its end in lock step (`envs[i]` for `starts[i]`): at each step the
/// supervisor (if any) decides at every waiting handoff, then every live episode's next role
/// replies in one batched call of `agents`; the searcher's calls go to the environment. A
/// start's searcher turns are replayed first (checked against what came back then).
pub fn run_mas(
    envs: &mut [Box<dyn Env>],
    starts: Vec<MasState>,
    agents: &mut dyn TextPolicy,
    render: Render<'_>,
    mut supervisor: Option<&mut dyn HandoffSupervisor>,
    cfg: &MasConfig,
) -> Result<Vec<MasState>> {
    if envs.len() < starts.len() {
        return Err(Error::invalid(format!(
            "{} environments for {} pipeline episodes",
            envs.len(),
            starts.len()
        )));
    }
    let mut live = starts;
    for (env, s) in envs.iter_mut().zip(&live) {
        if s.done {
            return Err(Error::invalid(format!(
                "{}: the start is a finished episode",
                s.task
            )));
        }
        if s.search_over {
            // Its environment ended the search: reset only (nothing more is stepped).
            env.reset(&s.task)
                .map_err(|e| hier_train::Error::env(format!("reset {}", s.task), e))?;
        } else {
            replay(env.as_mut(), &s.task, &s.search_turns)?;
        }
    }
    loop {
        // 1. Decisions at the waiting handoffs.
        let waiting: Vec<usize> = (0..live.len())
            .filter(|&i| !live[i].done && live[i].pending.is_some())
            .collect();
        if !waiting.is_empty() {
            let decisions = match supervisor.as_deref_mut() {
                Some(s) => {
                    let states: Vec<&MasState> = waiting.iter().map(|&i| &live[i]).collect();
                    s.at_handoffs(&states)?
                }
                None => vec![None; waiting.len()],
            };
            if decisions.len() != waiting.len() {
                return Err(Error::invalid(format!(
                    "the supervisor made {} decisions for {} handoffs",
                    decisions.len(),
                    waiting.len()
                )));
            }
            for (&i, d) in waiting.iter().zip(decisions) {
                live[i].decide(d, cfg)?;
            }
        }
        // A searcher whose search the environment ended hands over what it has.
        for s in live.iter_mut().filter(|s| !s.done) {
            if s.next == Role::Searcher && s.search_over {
                s.end_visit(cfg);
            }
        }
        // 2. Every live episode's next role, in one call.
        let acting: Vec<usize> = (0..live.len())
            .filter(|&i| !live[i].done && live[i].pending.is_none())
            .collect();
        if acting.is_empty() {
            if live.iter().all(|s| s.done) {
                break;
            }
            continue;
        }
        let prompts = acting
            .iter()
            .map(|&i| render.render(&live[i].prompt()))
            .collect::<Result<Vec<String>>>()?;
        let replies = agents.reply(&prompts)?;
        if replies.len() != prompts.len() {
            return Err(Error::invalid(format!(
                "the agents gave {} replies for {} prompts",
                replies.len(),
                prompts.len()
            )));
        }
        let mut calls: Vec<Option<String>> = vec![None; live.len()];
        for (&i, r) in acting.iter().zip(&replies) {
            let s = &mut live[i];
            s.agent_turns += 1;
            s.prompt_tokens += r.prompt_tokens;
            s.generated_tokens += r.generated_tokens;
            calls[i] = s.take_reply(&r.text, cfg);
        }
        // 3. The searchers' calls.
        let refs: Vec<Option<&str>> = calls.iter().map(|c| c.as_deref()).collect();
        for (i, step) in step_all(&mut envs[..live.len()], &refs)
            .into_iter()
            .enumerate()
        {
            let Some(step) = step else { continue };
            let s = &mut live[i];
            let step =
                step.map_err(|e| hier_train::Error::env(format!("{}: search", s.task), e))?;
            let turn = calls[i].take().expect("stepped");
            s.search_turns.push((turn, step.observation));
            s.visit_turns += 1;
            s.search_over = step.done;
            if step.done || s.visit_turns >= cfg.search_turns {
                s.end_visit(cfg);
            }
        }
    }
    Ok(live)
}

/// F1 and EM of an episode's answer against the gold answers of its question.
pub fn score(state: &MasState, golds: &QaEnv) -> Result<(f64, f64)> {
    let q = golds.task(&state.task)?;
    Ok(hier_envs::qa::score::score(
        state.answer.as_deref(),
        &q.answers,
    ))
}

/// The pipeline as a [`SteeredProcess`]: the bank holds states at handoffs of unsteered
/// episodes; a continuation applies the decision to the waiting handoff and plays the
/// pipeline unsteered to its answer, scored by F1.
pub struct MasProcess<'a> {
    pub states: &'a [MasState],
    pub envs: &'a mut [Box<dyn Env>],
    pub agents: &'a mut dyn TextPolicy,
    pub render: Render<'a>,
    pub golds: &'a QaEnv,
    pub mas: MasConfig,
    pub parallel: usize,
}

impl SteeredProcess for MasProcess<'_> {
    type Start = MasState;

    fn protocol(&self) -> Protocol {
        HANDOFF_PROTOCOL
    }

    fn states(&self) -> usize {
        self.states.len()
    }

    fn observation(&self, state: usize) -> String {
        self.states[state].observation()
    }

    fn group(&self, state: usize) -> usize {
        self.states[state].task.index as usize
    }

    fn turn(&self, state: usize) -> usize {
        self.states[state].agent_turns
    }

    fn read(&self, output: SlowOutput) -> SlowOutput {
        output.at_a_handoff()
    }

    fn start(&self, state: usize, output: Option<&SlowOutput>) -> MasState {
        let mut s = self.states[state].clone();
        s.decide(output.and_then(handoff_action), &self.mas)
            .expect("bank states wait at a handoff");
        s
    }

    fn play(&mut self, starts: &[MasState], seed: u64) -> Result<Vec<f64>> {
        self.agents.reseed(seed);
        let mut out = Vec::with_capacity(starts.len());
        for chunk in starts.chunks(self.parallel.max(1)) {
            let done = run_mas(
                self.envs,
                chunk.to_vec(),
                self.agents,
                self.render,
                None,
                &self.mas,
            )?;
            for s in &done {
                out.push(score(s, self.golds)?.0);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> MasConfig {
        MasConfig {
            search_turns: 2,
            max_sendbacks: 1,
            max_retries: 1,
            message_chars: 200,
            info_chars: 30,
        }
    }

    #[test]
    fn a_guide_is_added_to_the_message_and_a_reject_goes_back_to_the_sender_once() {
        let task = Task::new("qa-train", 3);
        let mut s = MasState::fresh(&task, "Who founded X?");
        assert!(s.prompt().text.contains("You are the planner"));
        s.take_reply("find X, then its founder", &cfg());
        let h = s.pending.clone().unwrap();
        assert_eq!((h.from, h.to), (Role::Planner, Role::Searcher));
        assert!(
            s.observation()
                .ends_with("Handoff from the planner to the searcher:\nfind X, then its founder\n")
        );
        // A rejection: the planner redoes its plan, reading why.
        s.decide(Some(HandoffAction::Reject("too vague".into())), &cfg())
            .unwrap();
        assert_eq!(
            (s.next, s.rejects_executed, s.pending.is_none()),
            (Role::Planner, 1, true)
        );
        assert!(
            s.prompt()
                .text
                .contains("Sent back to you: a supervisor rejected your message: too vague")
        );
        s.take_reply("search X", &cfg());
        // The second rejection is past max_retries: refused, the message passes.
        s.decide(Some(HandoffAction::Reject("still vague".into())), &cfg())
            .unwrap();
        assert_eq!(
            (s.next, s.rejects_refused, s.plan.as_str()),
            (Role::Searcher, 1, "search X")
        );
        assert_eq!(
            s.interventions.len(),
            1,
            "only the executed rejection is an intervention"
        );
        // The searcher's proposed answer ends its visit; a note reaches the researcher.
        assert_eq!(
            s.take_reply("<think>t</think> <answer> Y </answer>", &cfg()),
            None
        );
        s.decide(Some(HandoffAction::Guide("check Y".into())), &cfg())
            .unwrap();
        assert_eq!(s.next, Role::Researcher);
        assert!(
            s.findings.starts_with("Proposed answer: Y\n")
                && s.findings.ends_with("Note from a supervisor: check Y")
        );
        // The verifier sends back once; the second send-back is taken as acceptance.
        s.take_reply("Candidate answer: Y", &cfg());
        s.decide(None, &cfg()).unwrap();
        s.take_reply("send back: look up X's founder", &cfg());
        assert_eq!(s.pending.as_ref().unwrap().to, Role::Searcher);
        s.decide(None, &cfg()).unwrap();
        assert!(
            s.prompt()
                .text
                .contains("Sent back to you: send back: look up X's founder")
        );
        assert_eq!(s.prompt().reply_prefix, "<search>");
        // The searcher continues `<search>`: its reply is the query.
        assert_eq!(
            s.take_reply(" X founder", &cfg()).as_deref(),
            Some("<search> X founder </search>")
        );
        s.take_reply("<answer> Y </answer>", &cfg());
        s.decide(None, &cfg()).unwrap();
        s.take_reply("Candidate answer: Y", &cfg());
        s.decide(None, &cfg()).unwrap();
        s.take_reply("send back: again", &cfg());
        assert_eq!(
            (
                s.pending.as_ref().unwrap().to,
                s.sendbacks,
                s.sendbacks_refused
            ),
            (Role::Summariser, 1, 1)
        );
        s.decide(None, &cfg()).unwrap();
        s.take_reply(" Y", &cfg());
        assert_eq!((s.done, s.answer.as_deref()), (true, Some("Y")));
    }
}
