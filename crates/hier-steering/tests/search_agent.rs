//! The search executor on a synthetic world over the real BM25 index: demonstrations with
//! drift are scored by the environment, and a supervisor's interventions reach the executor.

use std::collections::HashMap;

use hier_envs::qa::env::{QaEnv, QaEnvConfig};
use hier_envs::qa::world::{World, WorldConfig};
use hier_envs::{Env, Split};
use hier_steering::prompting::Render;
use hier_steering::search_agent::{
    Drift, DriftConfig, ExecutorPrompting, Intervention, SearchState, Supervisor, WORKED_EXAMPLE,
    demonstrations, rollout_search,
};
use hier_train::policy::{Reply, TextPolicy};

fn env() -> QaEnv {
    let w = World::generate(&WorldConfig {
        seed: 11,
        people: 40,
        cities: 12,
        countries: 4,
        organizations: 10,
        works: 12,
        questions_per_hop: [15, 15, 15, 15],
        ..WorldConfig::default()
    })
    .unwrap();
    QaEnv::synthetic(&w, QaEnvConfig::default()).unwrap()
}

fn drift() -> DriftConfig {
    DriftConfig {
        over_search: 0.2,
        early_answer: 0.2,
        looping: 0.2,
        max_extra: 3,
        seed: 4,
    }
}

#[test]
fn demonstrations_drift_as_configured_and_the_environment_scores_them() {
    let mut e = env();
    let tasks = e.tasks(Split::Train).unwrap();
    let demos = demonstrations(&mut e, &tasks, &drift()).unwrap();
    assert_eq!(
        demos,
        demonstrations(&mut e, &tasks, &drift()).unwrap(),
        "seeded"
    );
    let mut kinds: HashMap<Option<Drift>, usize> = HashMap::new();
    for d in &demos {
        *kinds.entry(d.drift).or_default() += 1;
        let hops = e.task(&d.task).unwrap().hops.unwrap();
        match d.drift {
            None => {
                assert_eq!(d.score, 1.0, "{:?}", d.turns);
                assert_eq!(d.turns.len(), hops + 1);
            }
            Some(Drift::EarlyAnswer) => {
                assert!(d.score < 1.0 && d.turns.len() == hops, "{:?}", d.turns);
            }
            Some(Drift::OverSearch | Drift::Loop) => {
                assert_eq!(d.score, 1.0);
                assert!(d.turns.len() > hops + 1);
            }
        }
        assert!(d.turns.last().unwrap().0.contains("<answer>"));
        // SFT pairs: one per turn, each prompt holding the turns before it.
        let pairs = d.pairs();
        assert_eq!(pairs.len(), d.turns.len());
        assert!(pairs[1].0.contains(&d.turns[0].1));
    }
    for k in [
        None,
        Some(Drift::OverSearch),
        Some(Drift::EarlyAnswer),
        Some(Drift::Loop),
    ] {
        assert!(
            kinds.get(&k).copied().unwrap_or(0) > 0,
            "no {k:?} in {kinds:?}"
        );
    }
}

/// Replays one demonstration's turns (by how many turns the prompt shows), or answers
/// `fallback` when asked to answer now.
struct Replay {
    turns: Vec<String>,
    fallback: String,
}

impl TextPolicy for Replay {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|p| {
                let text = if p.ends_with("Give your final answer now.\n<think>") {
                    format!("sure</think> <answer> {} </answer>", self.fallback)
                } else {
                    // Turns so far: the calls after the question (the instruction names them too).
                    let shown = p.split("Question:").nth(1).unwrap();
                    let k = shown.matches("</search>").count() + shown.matches("</answer>").count();
                    self.turns[k.min(self.turns.len() - 1)].clone()
                };
                Reply {
                    prompt_tokens: p.len(),
                    generated_tokens: text.len(),
                    text,
                }
            })
            .collect())
    }
}

/// Stops an episode that repeats a search.
struct NoRepeats;

impl Supervisor for NoRepeats {
    fn decide(
        &mut self,
        states: &[SearchState<'_>],
    ) -> hier_steering::Result<Vec<Option<Intervention>>> {
        Ok(states
            .iter()
            .map(|s| {
                let n = s.turns.len();
                (n >= 2
                    && s.turns[n - 1].0.split("</think>").nth(1)
                        == s.turns[n - 2].0.split("</think>").nth(1))
                .then_some(Intervention::StopAndAnswer)
            })
            .collect())
    }
}

#[test]
fn a_supervisor_stops_a_looping_executor_and_its_answer_is_scored() {
    let mut e = env();
    let tasks = e.tasks(Split::Train).unwrap();
    let demos = demonstrations(&mut e, &tasks, &drift()).unwrap();
    let looping = demos
        .iter()
        .find(|d| d.drift == Some(Drift::Loop) && d.turns.len() >= 4)
        .unwrap();
    let gold = e.task(&looping.task).unwrap().answers[0].clone();
    let mut exec = Replay {
        turns: looping.turns.iter().map(|(t, _)| t.clone()).collect(),
        fallback: gold,
    };
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(env())];
    let tasks = vec![looping.task.clone()];
    let alone = rollout_search(
        &mut envs,
        &tasks,
        &mut exec,
        ExecutorPrompting::PLAIN,
        None,
        "test",
    )
    .unwrap();
    assert_eq!(alone[0].turns.len(), looping.turns.len());
    assert!(alone[0].interventions.is_empty());
    let steered = rollout_search(
        &mut envs,
        &tasks,
        &mut exec,
        ExecutorPrompting::PLAIN,
        Some(&mut NoRepeats),
        "test",
    )
    .unwrap();
    let ep = &steered[0];
    assert_eq!(ep.interventions.len(), 1);
    assert_eq!(ep.interventions[0].1, Intervention::StopAndAnswer);
    assert!(ep.turns.len() < looping.turns.len(), "stopped early");
    assert!(ep.answered && ep.score == 1.0);
}

/// An instruct model's side of the worked-example prompts: it checks what it is shown and
/// continues the call its reply was started with, as a model does.
struct Continues {
    question: String,
    gold: String,
    seen: Vec<String>,
}

impl TextPolicy for Continues {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|p| {
                assert!(p.contains(WORKED_EXAMPLE), "{p}");
                let asked_last = format!("Question: {}", self.question);
                let text = if p.ends_with(&format!("{asked_last}<search>")) {
                    " some entity".to_owned()
                } else if p.ends_with(&format!(
                    "Give your final answer now.\n{asked_last}<answer>"
                )) {
                    format!(" {} ", self.gold)
                } else if p.ends_with(&format!("{asked_last}<")) {
                    format!("answer> {}", self.gold)
                } else {
                    panic!("an unexpected start: {p}")
                };
                self.seen
                    .push(p.rsplit(&asked_last).next().unwrap().to_owned());
                Reply {
                    prompt_tokens: p.len(),
                    generated_tokens: text.len(),
                    text,
                }
            })
            .collect())
    }
}

/// Asks for the answer after the first turn.
struct StopAfterOne;

impl Supervisor for StopAfterOne {
    fn decide(
        &mut self,
        states: &[SearchState<'_>],
    ) -> hier_steering::Result<Vec<Option<Intervention>>> {
        Ok(states
            .iter()
            .map(|s| (s.turns.len() == 1).then_some(Intervention::StopAndAnswer))
            .collect())
    }
}

#[test]
fn an_instruct_executor_is_shown_the_example_and_its_replies_continue_the_started_call() {
    let e = env();
    let task = e.tasks(Split::Id).unwrap()[0].clone();
    let q = e.task(&task).unwrap();
    let mut exec = Continues {
        question: q.question.trim().to_owned(),
        gold: q.answers[0].clone(),
        seen: Vec::new(),
    };
    let prompting = ExecutorPrompting {
        worked_example: true,
        render: Render::Raw,
    };
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(env())];
    let tasks = vec![task];
    // Alone: a search first (the only call before anything is known), then any call.
    let ep = &rollout_search(&mut envs, &tasks, &mut exec, prompting, None, "test").unwrap()[0];
    assert_eq!(ep.turns[0].0, "<search> some entity </search>");
    assert_eq!(ep.turns[1].0, format!("<answer> {} </answer>", exec.gold));
    assert!(ep.answered && ep.score == 1.0);
    assert_eq!(exec.seen, ["<search>", "<"]);
    // Told to answer now: the reply starts at `<answer>`.
    exec.seen.clear();
    let ep = &rollout_search(
        &mut envs,
        &tasks,
        &mut exec,
        prompting,
        Some(&mut StopAfterOne),
        "test",
    )
    .unwrap()[0];
    assert_eq!(ep.turns[1].0, format!("<answer> {} </answer>", exec.gold));
    assert_eq!(ep.interventions, [(1, Intervention::StopAndAnswer)]);
    assert!(ep.answered && ep.score == 1.0);
    assert_eq!(exec.seen, ["<search>", "<answer>"]);
}
