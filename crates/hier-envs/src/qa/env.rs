//! Retrieval QA as an [`Env`]: ASearcher's tag protocol over any [`Retriever`].
//!
//! Each step is one agent turn. Its text is read for the first tool call:
//! `<answer> a </answer>` ends the episode (score = ASearcher's F1 against the gold answers,
//! reward = the score), `<search> q </search>` returns the top-k passages as
//! `<information>[Doc 1](url):\ntext …</information>`, `<access> url </access>` returns the
//! page. A turn with none of these is flagged invalid. Reaching `max_turns` ends the episode
//! with the score of a missing answer (0). `<think>` text is the agent's own and is ignored.
//!
//! Tasks: `Split::Train` and `Split::Id` are the world's (or files') train and test questions;
//! `Split::Ood` holds extra question sets (e.g. the seven benchmarks) when given.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::index::Retriever;
use super::score::score;
use crate::{Env, EnvError, Reset, Result, Split, Step, StepInfo, Task};

/// One question of the environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaTask {
    pub id: String,
    pub question: String,
    pub answers: Vec<String>,
    /// Hops (difficulty), where known.
    pub hops: Option<usize>,
    /// Titles of the passages stating each hop's fact, in order (synthetic questions).
    pub support: Vec<String>,
}

impl From<&super::world::Question> for QaTask {
    fn from(q: &super::world::Question) -> Self {
        Self {
            id: q.id.clone(),
            question: q.question.clone(),
            answers: q.answer.clone(),
            hops: Some(q.hops),
            support: q.support.clone(),
        }
    }
}

impl From<super::corpus::QaItem> for QaTask {
    fn from(q: super::corpus::QaItem) -> Self {
        Self {
            id: q.id,
            question: q.question,
            answers: q.answers,
            hops: None,
            support: Vec::new(),
        }
    }
}

/// A tool call found in a turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Search(String),
    Access(String),
    Answer(String),
}

fn tag<'a>(text: &'a str, name: &str) -> Option<(usize, &'a str)> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)?;
    let body = &text[start + open.len()..];
    let end = body.find(&close)?;
    Some((start, body[..end].trim()))
}

/// The first complete tool call of a turn (text inside `<think>` does not count).
pub fn parse_call(turn: &str) -> Option<Call> {
    let visible = match (turn.find("<think>"), turn.find("</think>")) {
        (Some(a), Some(b)) if b > a => format!("{}{}", &turn[..a], &turn[b + "</think>".len()..]),
        _ => turn.to_owned(),
    };
    let mut found: Vec<(usize, Call)> = Vec::new();
    if let Some((i, q)) = tag(&visible, "search") {
        found.push((i, Call::Search(q.to_owned())));
    }
    if let Some((i, u)) = tag(&visible, "access") {
        found.push((i, Call::Access(u.to_owned())));
    }
    if let Some((i, a)) = tag(&visible, "answer") {
        found.push((i, Call::Answer(a.to_owned())));
    }
    found.into_iter().min_by_key(|(i, _)| *i).map(|(_, c)| c)
}

/// Renders passages as ASearcher shows them to the agent.
pub fn render_information(passages: &[(String, String)]) -> String {
    let docs: Vec<String> = passages
        .iter()
        .enumerate()
        .map(|(k, (url, text))| format!("[Doc {}]({url}):\n{text}", k + 1))
        .collect();
    format!("<information>{}</information>", docs.join("\n\n"))
}

/// Settings of the environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaEnvConfig {
    /// Passages per search (ASearcher: 5).
    pub topk: usize,
    /// Turns per episode (ASearcher: 32 in training, 64 in evaluation).
    pub max_turns: usize,
}

impl Default for QaEnvConfig {
    fn default() -> Self {
        Self {
            topk: 5,
            max_turns: 32,
        }
    }
}

struct Episode {
    task: QaTask,
    turns: u64,
    done: bool,
}

/// The environment.
pub struct QaEnv {
    retriever: Arc<dyn Retriever>,
    train: Vec<QaTask>,
    test: Vec<QaTask>,
    ood: Vec<QaTask>,
    pub config: QaEnvConfig,
    episode: Option<Episode>,
}

impl QaEnv {
    pub fn new(
        retriever: Arc<dyn Retriever>,
        train: Vec<QaTask>,
        test: Vec<QaTask>,
        ood: Vec<QaTask>,
        config: QaEnvConfig,
    ) -> Self {
        Self {
            retriever,
            train,
            test,
            ood,
            config,
            episode: None,
        }
    }

    /// A synthetic world's questions (train / test) over an in-memory BM25 index of its corpus.
    pub fn synthetic(world: &super::world::World, config: QaEnvConfig) -> Result<Self> {
        let index = super::index::Bm25Index::in_memory(&world.documents)?;
        let split = |s: &str| {
            world
                .questions
                .iter()
                .filter(|q| q.split == s)
                .map(QaTask::from)
                .collect()
        };
        Ok(Self::new(
            Arc::new(index),
            split("train"),
            split("test"),
            Vec::new(),
            config,
        ))
    }

    /// Another environment over the same retriever and questions, with no episode — for
    /// stepping many episodes of one world in parallel without rebuilding its index.
    pub fn fork(&self) -> Self {
        Self::new(
            self.retriever.clone(),
            self.train.clone(),
            self.test.clone(),
            self.ood.clone(),
            self.config.clone(),
        )
    }

    fn split(&self, split: Split) -> &[QaTask] {
        match split {
            Split::Train => &self.train,
            Split::Id => &self.test,
            Split::Ood => &self.ood,
        }
    }

    /// The question behind a task.
    pub fn task(&self, task: &Task) -> Result<&QaTask> {
        let split: Split = task.name.parse()?;
        self.split(split)
            .get(task.index as usize)
            .ok_or_else(|| EnvError::InvalidArgument(format!("no QA task {task}")))
    }

    fn current(&mut self) -> Result<&mut Episode> {
        self.episode
            .as_mut()
            .ok_or_else(|| EnvError::InvalidArgument("step before reset".into()))
    }
}

impl Env for QaEnv {
    fn name(&self) -> &'static str {
        "qa"
    }

    fn tasks(&self, split: Split) -> Result<Vec<Task>> {
        let name = match split {
            Split::Train => "train",
            Split::Id => "id",
            Split::Ood => "ood",
        };
        Ok((0..self.split(split).len() as u64)
            .map(|i| Task::new(name, i))
            .collect())
    }

    fn reset(&mut self, task: &Task) -> Result<Reset> {
        let t = self.task(task)?.clone();
        let reset = Reset {
            observation: format!("Question: {}", t.question),
            description: t.question.clone(),
        };
        self.episode = Some(Episode {
            task: t,
            turns: 0,
            done: false,
        });
        Ok(reset)
    }

    fn step(&mut self, action: &str) -> Result<Step> {
        let (topk, max_turns) = (self.config.topk, self.config.max_turns as u64);
        let retriever = self.retriever.clone();
        let ep = self.current()?;
        if ep.done {
            return Err(EnvError::InvalidArgument(
                "the episode is over; reset".into(),
            ));
        }
        ep.turns += 1;
        let mut info = StepInfo {
            moves: ep.turns,
            ..StepInfo::default()
        };
        let (observation, done, score) = match parse_call(action) {
            Some(Call::Answer(a)) => {
                let (f1, _) = score(Some(&a), &ep.task.answers);
                (String::new(), true, f1)
            }
            Some(Call::Search(q)) => {
                let hits = retriever.retrieve(std::slice::from_ref(&q), topk)?;
                let passages: Vec<(String, String)> = hits
                    .into_iter()
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(p, _)| (p.url, p.contents))
                    .collect();
                (render_information(&passages), false, 0.0)
            }
            Some(Call::Access(u)) => {
                let page = retriever
                    .access(std::slice::from_ref(&u))?
                    .into_iter()
                    .next()
                    .flatten();
                let text = match page {
                    Some(p) => render_information(&[(p.url, p.contents)]),
                    None => format!("<information>No page at {u}.</information>"),
                };
                (text, false, 0.0)
            }
            None => {
                info.invalid = true;
                (
                    "No tool call found: use <search> query </search>, <access> url </access> \
                     or <answer> answer </answer>."
                        .to_owned(),
                    false,
                    0.0,
                )
            }
        };
        let truncated = !done && ep.turns >= max_turns;
        info.truncated = truncated;
        ep.done = done || truncated;
        Ok(Step {
            observation,
            reward: score,
            done: ep.done,
            score,
            info,
        })
    }

    fn valid_actions(&mut self) -> Result<Option<Vec<String>>> {
        Ok(None)
    }

    /// For synthetic questions: search each hop's passage by its title, then answer.
    fn gold_actions(&mut self) -> Result<Option<Vec<String>>> {
        let ep = self.current()?;
        if ep.task.support.is_empty() {
            return Ok(None);
        }
        let mut actions: Vec<String> = ep
            .task
            .support
            .iter()
            .map(|t| format!("<search> {t} </search>"))
            .collect();
        actions.push(format!("<answer> {} </answer>", ep.task.answers[0]));
        Ok(Some(actions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qa::world::{World, WorldConfig};

    #[test]
    fn tool_calls_parse_outside_thoughts() {
        assert_eq!(
            parse_call(
                "<think>maybe <answer>x</answer></think> <search> capital of Elmaria </search>"
            ),
            Some(Call::Search("capital of Elmaria".into()))
        );
        assert_eq!(
            parse_call("<answer>Drunis</answer><search>q</search>"),
            Some(Call::Answer("Drunis".into()))
        );
        assert_eq!(
            parse_call("<access> https://x </access>"),
            Some(Call::Access("https://x".into()))
        );
        assert_eq!(parse_call("<search>unclosed"), None);
        assert_eq!(parse_call("just text"), None);
    }

    #[test]
    fn the_expert_answers_every_synthetic_question_through_the_index() {
        let w = World::generate(&WorldConfig {
            seed: 5,
            people: 30,
            cities: 10,
            countries: 4,
            organizations: 8,
            works: 10,
            questions_per_hop: [10, 10, 10, 10],
            ..WorldConfig::default()
        })
        .unwrap();
        let mut env = QaEnv::synthetic(&w, QaEnvConfig::default()).unwrap();
        let mut found = 0;
        let tasks = env.tasks(Split::Train).unwrap();
        assert!(!tasks.is_empty());
        for t in &tasks {
            env.reset(t).unwrap();
            let gold = env.gold_actions().unwrap().unwrap();
            let hops = env.task(t).unwrap().hops.unwrap();
            assert_eq!(gold.len(), hops + 1);
            for (k, a) in gold.iter().enumerate() {
                let s = env.step(a).unwrap();
                if k < hops {
                    assert!(
                        s.observation.starts_with("<information>[Doc 1]("),
                        "{}",
                        s.observation
                    );
                    // The hop's passage is among the top 5 for its title.
                    let title = &env.task(t).unwrap().support[k];
                    if s.observation.contains(&format!("\"{title}\"\n")) {
                        found += 1;
                    }
                    assert!(!s.done);
                } else {
                    assert!(s.done && s.score == 1.0 && s.reward == 1.0);
                }
            }
        }
        let hops: usize = tasks
            .iter()
            .map(|t| env.task(t).unwrap().hops.unwrap())
            .sum();
        assert_eq!(found, hops, "every hop's passage is retrieved by its title");
        // A wrong answer scores its F1; no tool call is invalid; the turn limit ends it.
        env.reset(&tasks[0]).unwrap();
        let s = env.step("<answer> nothing like it </answer>").unwrap();
        assert!(s.done && s.score < 1.0);
        env.config.max_turns = 2;
        env.reset(&tasks[0]).unwrap();
        assert!(env.step("hmm").unwrap().info.invalid);
        let s = env.step("<think>still</think>").unwrap();
        assert!(s.done && s.info.truncated && s.score == 0.0);
        assert!(env.step("<answer>late</answer>").is_err());
        assert!(env.reset(&Task::new("id", 99_999)).is_err());
    }
}
