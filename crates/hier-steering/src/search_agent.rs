//! The search executor of the steering setting (METHODS.md B.1): ASearcher's tag protocol
//! over [`hier_envs::qa::env::QaEnv`], its prompt, demonstrations that include realistic
//! drift, and a batched rollout that a supervisor can steer.
//!
//! A turn is `<think> … </think>` followed by one tool call — `<search> q </search>`,
//! `<access> url </access>` or `<answer> a </answer>`; the environment's reply follows it in
//! `<information> … </information>`. A model that stops at the closing tag of its call (real
//! instruct models, stop strings) gets the tag back ([`complete_call`]).
//!
//! Interventions a supervisor can apply between turns: a **guidance note** shown in the
//! executor's next prompts, and **stop-and-answer**, which asks the executor for its final
//! answer now.

use hier_data::build::Episode;
use hier_envs::qa::env::{Call, parse_call};
use hier_envs::{Env, Task, step_all};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::prompting::{Render, RolePrompt};
use hier_train::SharedErrors as _;
use hier_train::policy::{TextPolicy, Trace};

/// The instruction of every executor prompt.
pub const INSTRUCTION: &str = "Answer the question by searching. Each turn, think inside \
<think> </think>, then make one call: <search> query </search> to search, <access> url \
</access> to read a page, or <answer> answer </answer> to answer. Results come back inside \
<information> </information>.";

/// An intervention of a supervisor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "text")]
pub enum Intervention {
    /// A note shown in every later prompt of the episode.
    Guidance(String),
    /// Answer now: the next prompt asks for the final answer only.
    StopAndAnswer,
}

/// The executor's prompt: the instruction, the question, guidance notes, the turns so far
/// with their results, and the cue for the next turn.
pub fn executor_prompt(
    question: &str,
    turns: &[(String, String)],
    guidance: &[String],
    answer_now: bool,
) -> String {
    let mut p = format!("{INSTRUCTION}\nQuestion: {}\n", question.trim());
    push_notes_and_turns(&mut p, guidance, turns);
    if answer_now {
        p.push_str("Give your final answer now.\n<think>");
    }
    p
}

/// The supervisor's notes, then every turn with what came back, a line each.
fn push_notes_and_turns(p: &mut String, guidance: &[String], turns: &[(String, String)]) {
    for g in guidance {
        p.push_str(&format!("Note from a supervisor: {g}\n"));
    }
    for (turn, obs) in turns {
        p.push_str(turn);
        p.push('\n');
        if !obs.is_empty() {
            p.push_str(obs);
            p.push('\n');
        }
    }
}

/// The worked example an instruct executor is shown (our own invented question and pages, not
/// from any data set): SmolLM2-135M-Instruct given only [`INSTRUCTION`] writes prose, or copies
/// the tags without a query.
pub const WORKED_EXAMPLE: &str = "Example:\nQuestion: Who founded the studio that made Blue \
Lantern?\n<think>I need the studio of Blue Lantern.</think> <search> Blue Lantern </search>\n\
<information>[Doc 1](blue-lantern):\nBlue Lantern is a game made by Oravo Works.</information>\n\
<think>Now who founded Oravo Works.</think> <search> Oravo Works </search>\n\
<information>[Doc 1](oravo-works):\nOravo Works was founded by Tal Meren.</information>\n\
<think>Tal Meren founded it.</think> <answer> Tal Meren </answer>\nEnd of example.";

/// How the executor's prompts are written and reach its model.
///
/// - `worked_example = false` ([`ExecutorPrompting::PLAIN`]): [`executor_prompt`], the text
///   SFT executors learned, continued as it is.
/// - `worked_example = true`, for an instruct model playing as it is: the instruction,
///   [`WORKED_EXAMPLE`], the question, notes, the turns so far, and the question again (a
///   135M model otherwise answers the last thing it read); the reply starts at `<search>`
///   until the first search, at `<answer>` when told to answer now, and at `<` (one of the
///   calls) otherwise. Measured on SmolLM2-135M-Instruct over 12–24 one- and two-hop
///   questions: with only the instruction (or a reply started at `<think>`) under half its
///   turns held a call; with the example and these starts every turn did.
#[derive(Clone, Copy)]
pub struct ExecutorPrompting<'a> {
    pub worked_example: bool,
    pub render: Render<'a>,
}

impl ExecutorPrompting<'_> {
    /// The SFT executors' prompts, as raw text.
    pub const PLAIN: ExecutorPrompting<'static> = ExecutorPrompting {
        worked_example: false,
        render: Render::Raw,
    };

    /// The prompt of the executor's next turn, and how its reply starts.
    pub fn prompt(
        &self,
        question: &str,
        turns: &[(String, String)],
        guidance: &[String],
        answer_now: bool,
    ) -> RolePrompt {
        if !self.worked_example {
            return RolePrompt {
                text: executor_prompt(question, turns, guidance, answer_now),
                reply_prefix: "",
            };
        }
        let q = question.trim();
        let mut p = format!("{INSTRUCTION}\n{WORKED_EXAMPLE}\nQuestion: {q}\n");
        push_notes_and_turns(&mut p, guidance, turns);
        if answer_now {
            p.push_str("Give your final answer now.\n");
        }
        p.push_str(&format!("Question: {q}"));
        let searched = turns
            .iter()
            .any(|(t, _)| matches!(parse_call(t), Some(Call::Search(_))));
        let reply_prefix = match (answer_now, searched) {
            (true, _) => "<answer>",
            (false, false) => "<search>",
            (false, true) => "<",
        };
        RolePrompt {
            text: p,
            reply_prefix,
        }
    }
}

/// The tags of the executor's tool calls.
pub const CALL_TAGS: [&str; 3] = ["search", "access", "answer"];

/// Appends the closing tag of a call that a stop string cut off, keeps the first line of a
/// one-line turn, and trims.
pub fn complete_call(reply: &str) -> String {
    let mut t = reply.trim().to_owned();
    for name in CALL_TAGS {
        let (open, close) = (format!("<{name}>"), format!("</{name}>"));
        if let Some(i) = t.rfind(&open)
            && !t[i..].contains(&close)
        {
            t.push_str(&format!(" {close}"));
        }
    }
    t
}

/// The kinds of drift written into demonstrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drift {
    /// Keeps searching after the answer is in hand.
    OverSearch,
    /// Answers with an intermediate entity before the last hop.
    EarlyAnswer,
    /// Repeats the same search several times before answering.
    Loop,
}

/// Shares of drifted demonstrations (the rest follow the expert).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriftConfig {
    pub over_search: f64,
    pub early_answer: f64,
    pub looping: f64,
    /// Extra turns of an over-search or a loop, at most.
    pub max_extra: usize,
    pub seed: u64,
}

/// One demonstration: every turn with what came back, how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchDemo {
    pub task: Task,
    pub question: String,
    /// `(turn, observation)`.
    pub turns: Vec<(String, String)>,
    pub score: f64,
    pub drift: Option<Drift>,
}

impl SearchDemo {
    /// `(prompt, turn)` pairs for SFT.
    pub fn pairs(&self) -> Vec<(String, String)> {
        (0..self.turns.len())
            .map(|k| {
                (
                    executor_prompt(&self.question, &self.turns[..k], &[], false),
                    self.turns[k].0.clone(),
                )
            })
            .collect()
    }
}

/// The reply the executor learns for an answer-now prompt (which ends with `<think>`).
pub fn answer_now_reply(answer: &str) -> String {
    format!("I have found the answer.</think> <answer> {answer} </answer>")
}

impl SearchDemo {
    /// `(prompt, reply)` pairs for stop-and-answer: every state of a solved demonstration at
    /// which the answer is already among the results, asked to answer now. Teaches the
    /// executor to obey a stop (an instruct model does so untaught).
    pub fn answer_now_pairs(&self) -> Vec<(String, String)> {
        let Some(Call::Answer(answer)) = self.turns.last().and_then(|(t, _)| parse_call(t)) else {
            return Vec::new();
        };
        if self.score < 1.0 {
            return Vec::new();
        }
        let needle = answer.to_lowercase();
        let found = self
            .turns
            .iter()
            .position(|(_, obs)| obs.to_lowercase().contains(&needle));
        let Some(first) = found else {
            return Vec::new();
        };
        (first + 1..self.turns.len())
            .map(|k| {
                (
                    executor_prompt(&self.question, &self.turns[..k], &[], true),
                    answer_now_reply(&answer),
                )
            })
            .collect()
    }
}

fn search_turn(q: &str, why: &str) -> String {
    format!("<think>{why}</think> <search> {q} </search>")
}

/// Plays the expert on `task` (its `<search>` per hop, then the answer), bending it by one
/// drift with the configured shares. The environment scores every ending.
pub fn demonstrate(
    env: &mut dyn Env,
    task: &Task,
    drift: &DriftConfig,
    rng: &mut StdRng,
) -> Result<SearchDemo> {
    let reset = env
        .reset(task)
        .map_err(|e| hier_train::Error::env(format!("{task}"), e))?;
    let gold = env
        .gold_actions()
        .map_err(|e| hier_train::Error::env(format!("{task}"), e))?
        .ok_or_else(|| Error::invalid(format!("{task}: no expert (not a synthetic question)")))?;
    let hops = gold.len() - 1;
    let answer = match parse_call(&gold[hops]) {
        Some(Call::Answer(a)) => a,
        _ => {
            return Err(Error::invalid(format!(
                "{task}: the expert's last call is not an answer"
            )));
        }
    };
    let queries: Vec<String> = gold[..hops]
        .iter()
        .filter_map(|a| match parse_call(a) {
            Some(Call::Search(q)) => Some(q),
            _ => None,
        })
        .collect();
    let u: f64 = rng.random();
    let kind = if u < drift.over_search {
        Some(Drift::OverSearch)
    } else if u < drift.over_search + drift.early_answer && hops > 1 {
        Some(Drift::EarlyAnswer)
    } else if u < drift.over_search + drift.early_answer + drift.looping {
        Some(Drift::Loop)
    } else {
        None
    };
    let extra = rng.random_range(1..=drift.max_extra.max(1));
    let mut plan: Vec<String> = Vec::new();
    for (k, q) in queries.iter().enumerate() {
        if kind == Some(Drift::EarlyAnswer) && k + 1 == hops {
            // Answers with the entity found so far instead of taking the last hop.
            plan.push(format!(
                "<think>That should be it.</think> <answer> {q} </answer>"
            ));
            break;
        }
        let why = if k == 0 {
            "I should look up what the question names first.".to_owned()
        } else {
            format!("Next I need the facts about {q}.")
        };
        plan.push(search_turn(q, &why));
        if kind == Some(Drift::Loop) && k + 1 == hops {
            for _ in 0..extra {
                plan.push(search_turn(q, "Let me check that again."));
            }
        }
    }
    if kind == Some(Drift::OverSearch) {
        for i in 0..extra {
            let q = if i % 2 == 0 {
                answer.clone()
            } else {
                format!("more about {answer}")
            };
            plan.push(search_turn(&q, "Maybe there is more to find."));
        }
    }
    if kind != Some(Drift::EarlyAnswer) {
        plan.push(format!(
            "<think>I have found the answer.</think> <answer> {answer} </answer>"
        ));
    }
    let mut turns = Vec::new();
    let mut score = 0.0;
    for turn in plan {
        let s = env
            .step(&turn)
            .map_err(|e| hier_train::Error::env(format!("{task}"), e))?;
        score = s.score;
        turns.push((turn, s.observation));
        if s.done {
            break;
        }
    }
    Ok(SearchDemo {
        task: task.clone(),
        question: reset.description,
        turns,
        score,
        drift: kind,
    })
}

/// Demonstrations of `tasks`, seeded per task (the same task always drifts the same way).
pub fn demonstrations(
    env: &mut dyn Env,
    tasks: &[Task],
    drift: &DriftConfig,
) -> Result<Vec<SearchDemo>> {
    tasks
        .iter()
        .map(|t| {
            let mut rng = StdRng::seed_from_u64(drift.seed ^ t.index.wrapping_mul(0x9E37_79B9));
            demonstrate(env, t, drift, &mut rng)
        })
        .collect()
}

/// A supervisor consulted before every executor turn.
pub trait Supervisor {
    /// One decision per live episode (`None`: let it be).
    fn decide(&mut self, states: &[SearchState<'_>]) -> Result<Vec<Option<Intervention>>>;

    /// Reviews proposed answers before the environment sees them: `Some(note)` rejects one
    /// (the executor reads the note and goes on). The default accepts every answer.
    fn review(
        &mut self,
        states: &[SearchState<'_>],
        answers: &[&str],
    ) -> Result<Vec<Option<String>>> {
        let _ = states;
        Ok(vec![None; answers.len()])
    }
}

/// Answers a reviewing supervisor may reject per episode; later answers are accepted, so an
/// over-rejecting verifier costs turns but cannot loop forever.
pub const MAX_REJECTIONS: usize = 2;

/// The observation recorded for a rejected answer.
pub fn rejection_observation(note: &str) -> String {
    format!("<information>A supervisor rejected this answer: {note}</information>")
}

/// What a supervisor sees of one episode.
#[derive(Clone, Debug)]
pub struct SearchState<'a> {
    pub question: &'a str,
    pub turns: &'a [(String, String)],
    pub guidance: &'a [String],
}

/// Where an episode starts: a task, and optionally a state reached before (its turns are
/// replayed in the environment, which must give back the same observations) with notes
/// already given and whether the executor was told to answer now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchStart {
    pub task: Task,
    pub turns: Vec<(String, String)>,
    pub guidance: Vec<String>,
    pub answer_now: bool,
}

impl SearchStart {
    /// A fresh episode of `task`.
    pub fn fresh(task: &Task) -> Self {
        Self {
            task: task.clone(),
            turns: Vec::new(),
            guidance: Vec::new(),
            answer_now: false,
        }
    }

    /// This state with `intervention` applied.
    pub fn with(mut self, intervention: Option<&Intervention>) -> Self {
        match intervention {
            Some(Intervention::Guidance(g)) => self.guidance.push(g.clone()),
            Some(Intervention::StopAndAnswer) => self.answer_now = true,
            None => {}
        }
        self
    }
}

/// One played episode with its interventions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchEpisode {
    pub trace: Trace,
    /// Every turn, the replayed start included.
    pub turns: Vec<(String, String)>,
    /// `(turn index, intervention)`; rejected answers are guidance at their turn.
    pub interventions: Vec<(usize, Intervention)>,
    pub score: f64,
    pub answered: bool,
}

/// Plays `tasks[i]` on `envs[i]` with `executor` in lock step; `supervisor` (if any) decides
/// before every turn. Ends at an answer or the environment's turn limit.
pub fn rollout_search(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    executor: &mut dyn TextPolicy,
    prompting: ExecutorPrompting<'_>,
    supervisor: Option<&mut dyn Supervisor>,
    origin: &str,
) -> Result<Vec<SearchEpisode>> {
    let starts: Vec<SearchStart> = tasks.iter().map(SearchStart::fresh).collect();
    rollout_search_from(envs, &starts, executor, prompting, supervisor, origin)
}

/// [`rollout_search`] from given starts: each start's turns are replayed first (and checked:
/// a retriever that answers differently the second time is an error, not a silent change of
/// state); tokens and turn counts of the trace cover the new turns only.
pub fn rollout_search_from(
    envs: &mut [Box<dyn Env>],
    starts: &[SearchStart],
    executor: &mut dyn TextPolicy,
    prompting: ExecutorPrompting<'_>,
    mut supervisor: Option<&mut dyn Supervisor>,
    origin: &str,
) -> Result<Vec<SearchEpisode>> {
    if envs.len() < starts.len() {
        return Err(Error::invalid(format!(
            "{} environments for {} episodes",
            envs.len(),
            starts.len()
        )));
    }
    struct Live {
        ep: SearchEpisode,
        guidance: Vec<String>,
        answer_now: bool,
        rejections: usize,
        done: bool,
    }
    let mut live: Vec<Live> = Vec::new();
    for (env, start) in envs.iter_mut().zip(starts) {
        let task = &start.task;
        let r = replay(env.as_mut(), task, &start.turns)?;
        live.push(Live {
            ep: SearchEpisode {
                trace: Trace::start(env.name(), task, r, origin),
                turns: start.turns.clone(),
                interventions: Vec::new(),
                score: 0.0,
                answered: false,
            },
            guidance: start.guidance.clone(),
            answer_now: start.answer_now,
            rejections: 0,
            done: false,
        });
    }
    loop {
        let active: Vec<usize> = (0..live.len()).filter(|&i| !live[i].done).collect();
        if active.is_empty() {
            break;
        }
        if let Some(sup) = supervisor.as_deref_mut() {
            let states: Vec<SearchState<'_>> = active
                .iter()
                .map(|&i| state_of(&live[i].ep, &live[i].guidance))
                .collect();
            let decisions = sup.decide(&states)?;
            if decisions.len() != active.len() {
                return Err(Error::invalid(format!(
                    "the supervisor made {} decisions for {} episodes",
                    decisions.len(),
                    active.len()
                )));
            }
            for (&i, d) in active.iter().zip(decisions) {
                let Some(d) = d else { continue };
                let l = &mut live[i];
                match &d {
                    Intervention::Guidance(g) => l.guidance.push(g.clone()),
                    Intervention::StopAndAnswer => l.answer_now = true,
                }
                l.ep.interventions.push((l.ep.turns.len(), d));
            }
        }
        let prompts: Vec<RolePrompt> = active
            .iter()
            .map(|&i| {
                let l = &live[i];
                prompting.prompt(
                    &l.ep.trace.episode.task,
                    &l.ep.turns,
                    &l.guidance,
                    l.answer_now,
                )
            })
            .collect();
        let rendered = prompts
            .iter()
            .map(|p| prompting.render.render(p))
            .collect::<Result<Vec<String>>>()?;
        let replies = executor.reply(&rendered)?;
        if replies.len() != prompts.len() {
            return Err(Error::invalid(format!(
                "the executor gave {} replies for {} prompts",
                replies.len(),
                prompts.len()
            )));
        }
        let mut actions: Vec<Option<String>> = vec![None; live.len()];
        for ((&i, r), p) in active.iter().zip(&replies).zip(&prompts) {
            let l = &mut live[i];
            l.ep.trace.prompt_tokens += r.prompt_tokens;
            l.ep.trace.generated_tokens += r.generated_tokens;
            l.ep.trace.sys2_calls += 1;
            let mut turn = complete_call(&format!("{}{}", p.reply_prefix, r.text));
            if l.answer_now && !turn.starts_with("<think>") && turn.contains("</think>") {
                // The answer-now prompt opened the thought.
                turn = format!("<think>{turn}");
            }
            if l.answer_now && !turn.contains("<answer>") {
                // Asked to answer, the executor's text is taken as its answer.
                turn = format!(
                    "<answer> {} </answer>",
                    turn.replace("</think>", " ").trim()
                );
            }
            actions[i] = Some(turn);
        }
        if let Some(sup) = supervisor.as_deref_mut() {
            // Answers a reviewer may still reject (not those it was asked for).
            let under_review: Vec<usize> = active
                .iter()
                .copied()
                .filter(|&i| {
                    let l = &live[i];
                    !l.answer_now
                        && l.rejections < MAX_REJECTIONS
                        && matches!(
                            actions[i].as_deref().and_then(parse_call),
                            Some(Call::Answer(_))
                        )
                })
                .collect();
            if !under_review.is_empty() {
                let states: Vec<SearchState<'_>> = under_review
                    .iter()
                    .map(|&i| state_of(&live[i].ep, &live[i].guidance))
                    .collect();
                let answers: Vec<&str> = under_review
                    .iter()
                    .map(|&i| actions[i].as_deref().expect("an answer"))
                    .collect();
                let verdicts = sup.review(&states, &answers)?;
                drop(states);
                for (&i, v) in under_review.iter().zip(verdicts) {
                    let Some(note) = v else { continue };
                    let l = &mut live[i];
                    let turn = actions[i].take().expect("an answer");
                    l.rejections += 1;
                    l.ep.interventions
                        .push((l.ep.turns.len(), Intervention::Guidance(note.clone())));
                    l.ep.turns.push((turn, rejection_observation(&note)));
                    l.guidance.push(note);
                }
            }
        }
        let refs: Vec<Option<&str>> = actions.iter().map(|a| a.as_deref()).collect();
        for (i, s) in step_all(&mut envs[..live.len()], &refs)
            .into_iter()
            .enumerate()
        {
            let Some(s) = s else { continue };
            let l = &mut live[i];
            let s = s.map_err(|e| {
                hier_train::Error::env(format!("{}: step", l.ep.trace.episode.source), e)
            })?;
            let turn = actions[i].take().expect("stepped");
            let ep: &mut Episode = &mut l.ep.trace.episode;
            ep.actions.push(turn.clone());
            ep.observations.push(s.observation.clone());
            ep.rewards.push(s.reward);
            ep.scores.push(s.score);
            l.ep.turns.push((turn.clone(), s.observation));
            if s.done {
                l.done = true;
                l.ep.score = s.score;
                l.ep.answered = matches!(parse_call(&turn), Some(Call::Answer(_)));
                ep.done = true;
                ep.success = s.score >= 1.0;
            }
        }
    }
    Ok(live.into_iter().map(|l| l.ep).collect())
}

/// Resets `env` to `task` and replays `turns` (rejected answers, which the environment never
/// saw, are skipped), checking that every observation comes back the same: a retriever that
/// answers differently the second time is an error, not a silent change of state. A start
/// that ends the episode is an error too.
pub fn replay(
    env: &mut dyn Env,
    task: &Task,
    turns: &[(String, String)],
) -> Result<hier_envs::Reset> {
    let r = env
        .reset(task)
        .map_err(|e| hier_train::Error::env(format!("reset {task}"), e))?;
    let mut done = false;
    for (k, (turn, obs)) in turns.iter().enumerate() {
        if done {
            return Err(Error::invalid(format!(
                "{task}: the start goes on after its episode ended"
            )));
        }
        if obs.starts_with("<information>A supervisor rejected") {
            continue;
        }
        let s = env
            .step(turn)
            .map_err(|e| hier_train::Error::env(format!("{task}: replaying turn {k}"), e))?;
        if &s.observation != obs {
            return Err(Error::invalid(format!(
                "{task}: replaying turn {k} gave another observation (is the retriever \
                 deterministic?)"
            )));
        }
        done = s.done;
    }
    if done {
        return Err(Error::invalid(format!(
            "{task}: the start is a finished episode"
        )));
    }
    Ok(r)
}

fn state_of<'a>(ep: &'a SearchEpisode, guidance: &'a [String]) -> SearchState<'a> {
    SearchState {
        question: &ep.trace.episode.task,
        turns: &ep.turns,
        guidance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_cut_at_their_closing_tag_are_completed() {
        assert_eq!(
            complete_call("<think>x</think> <search> capital of Elmaria"),
            "<think>x</think> <search> capital of Elmaria </search>"
        );
        assert_eq!(
            complete_call(" <answer> Drunis </answer> "),
            "<answer> Drunis </answer>"
        );
        assert_eq!(complete_call("<think>hmm</think>"), "<think>hmm</think>");
    }

    #[test]
    fn prompts_show_notes_turns_and_the_answer_cue() {
        let turns = vec![(
            "<think>a</think> <search> X </search>".to_owned(),
            "<information>[Doc 1](u):\nX is Y.</information>".to_owned(),
        )];
        let p = executor_prompt("Who is X?", &turns, &["You have the answer.".into()], true);
        assert!(p.starts_with(INSTRUCTION));
        assert!(p.contains("Question: Who is X?\nNote from a supervisor: You have the answer.\n"));
        assert!(p.contains("<search> X </search>\n<information>"));
        assert!(p.ends_with("Give your final answer now.\n<think>"));
    }
}
