//! The two-system rollout against the datasets: roles that answer each prompt with the
//! dataset's target for exactly that prompt must replay the expert — which checks that the
//! prompts the agent builds while acting are the prompts the roles are trained on, that the
//! planner is called exactly at segment boundaries, and that batching keeps episodes apart.

use std::collections::HashMap;

use hier_data::batch::{sys1_prompt, sys2_prompt};
use hier_envs::alfworld::AlfWorld;
use hier_envs::assets::Assets;
use hier_envs::textcraft::TextCraft;
use hier_envs::{Env, Split, Task};
use hier_multi2::agent::{RolloutConfig, rollout};
use hier_multi2::demos::{Segmenter, build_episode, episode_rng, play};
use hier_train::policy::{Reply, TextPolicy};

/// Answers from a table; unknown prompts get `look; False` and are counted.
struct Table {
    answers: HashMap<String, String>,
    misses: usize,
}

impl TextPolicy for Table {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|p| {
                let text = self.answers.get(p).cloned().unwrap_or_else(|| {
                    self.misses += 1;
                    "look; False".into()
                });
                Reply {
                    prompt_tokens: p.split_whitespace().count(),
                    generated_tokens: text.split_whitespace().count(),
                    text,
                }
            })
            .collect())
    }
}

fn replay_expert(mut make: impl FnMut() -> Box<dyn Env>, tasks: &[Task], segmenter: Segmenter) {
    let mut env = make();
    let (mut planner, mut executor) = (
        Table {
            answers: HashMap::new(),
            misses: 0,
        },
        Table {
            answers: HashMap::new(),
            misses: 0,
        },
    );
    let mut expert = Vec::new();
    for (k, t) in tasks.iter().enumerate() {
        let ep = play(
            env.as_mut(),
            t,
            0.0,
            0.0,
            &mut episode_rng(0, k as u64),
            100,
        )
        .unwrap();
        let built = build_episode(&ep, segmenter).unwrap();
        for r in &built.sys1 {
            planner.answers.insert(sys1_prompt(r), r.subgoal.clone());
        }
        for tr in &built.sys2 {
            executor.answers.insert(sys2_prompt(tr), tr.target());
        }
        expert.push((ep, built.sys1.len()));
    }
    let mut envs: Vec<Box<dyn Env>> = tasks.iter().map(|_| make()).collect();
    let cfg = RolloutConfig {
        max_steps: 100,
        subgoal_budget: 100,
        ..RolloutConfig::default()
    };
    let traces = rollout(&mut envs, tasks, &mut planner, &mut executor, &cfg, "table").unwrap();
    assert_eq!((planner.misses, executor.misses), (0, 0));
    for (tr, (ep, segments)) in traces.iter().zip(&expert) {
        assert_eq!(tr.episode.actions, ep.actions, "{}", ep.source);
        assert_eq!(tr.episode.observations, ep.observations, "{}", ep.source);
        assert!(tr.episode.success && tr.episode.done, "{}", ep.source);
        assert_eq!(tr.sys1_calls, *segments);
        assert_eq!(tr.sys2_calls, ep.actions.len());
        assert_eq!(tr.flags.iter().filter(|&&f| f).count(), *segments);
        assert!(tr.prompt_tokens > tr.generated_tokens && tr.generated_tokens > 0);
    }
}

#[test]
fn alfworld_roles_answering_from_the_data_replay_the_expert() {
    let assets = Assets::locate().unwrap();
    let tasks: Vec<Task> = AlfWorld::generated(&assets)
        .unwrap()
        .tasks(Split::Train)
        .unwrap()
        .into_iter()
        .take(12)
        .collect();
    replay_expert(
        || Box::new(AlfWorld::generated(&Assets::locate().unwrap()).unwrap()),
        &tasks,
        Segmenter::Alfworld,
    );
}

#[test]
fn textcraft_roles_answering_from_the_data_replay_the_expert() {
    let tasks: Vec<Task> = TextCraft::from_assets()
        .unwrap()
        .tasks(Split::Train)
        .unwrap()
        .into_iter()
        .take(8)
        .collect();
    replay_expert(
        || Box::new(TextCraft::from_assets().unwrap()),
        &tasks,
        Segmenter::Textcraft,
    );
}

#[test]
fn the_subgoal_budget_calls_the_planner_again() {
    let assets = Assets::locate().unwrap();
    let task = Task::new("gen-train", 0);
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(AlfWorld::generated(&assets).unwrap())];
    let mut planner = Table {
        answers: HashMap::new(),
        misses: 0,
    };
    let mut executor = Table {
        answers: HashMap::new(),
        misses: 0,
    };
    let cfg = RolloutConfig {
        max_steps: 7,
        subgoal_budget: 3,
        ..RolloutConfig::default()
    };
    let traces = rollout(&mut envs, &[task], &mut planner, &mut executor, &cfg, "t").unwrap();
    let t = &traces[0];
    // `look; False` every step: 7 steps, a new subgoal every 3, never done.
    assert_eq!(t.episode.actions.len(), 7);
    assert_eq!(
        t.subgoals.iter().map(|s| s.0).collect::<Vec<_>>(),
        [0, 3, 6]
    );
    assert!(!t.episode.done && !t.episode.success);
}
