//! The prompted baselines (ReAct, Reflexion, ADaPT) on real TextCraft games with scripted
//! models, and their prompts through real instruct checkpoints' chat templates (rendered by
//! transformers in `hier-backbone/tests/fixtures/chat/templates.json`).

use std::path::PathBuf;

use hier_backbone::{ChatTemplate, Message, Tokenizer};
use hier_envs::textcraft::TextCraft;
use hier_envs::{Env, Split, Task};
use hier_multi2::adapt::rollout_adapt;
use hier_multi2::agent::RolloutConfig;
use hier_multi2::react::{Demo, PromptedSpec, Prompter, Step, Trial, rollout_react};
use hier_multi2::reflexion::run_reflexion;
use hier_train::policy::{Reply, TextPolicy};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hier-backbone/tests/fixtures")
}

fn spec() -> PromptedSpec {
    PromptedSpec {
        demos: 1,
        demo_obs_chars: 60,
        history: 50,
        history_stride: 0,
        max_prompt: 100_000,
        reflexion_trials: 3,
        reflexion_memory: 2,
        reflexion_seeds: vec![0],
        reflexion_loop_cycles: 0,
        adapt_max_depth: 1,
        adapt_executor_turns: 30,
        max_tokens: 16,
        temperature: 0.7,
        top_p: 0.9,
        top_k: 50,
    }
}

fn demo() -> Demo {
    Demo {
        task: "craft stick".into(),
        first_obs: "Crafting commands: craft 4 stick using 2 planks".into(),
        steps: vec![
            Step {
                line: "think: get planks".into(),
                observation: "OK.".into(),
            },
            Step {
                line: "get 2 planks".into(),
                observation: "Got 2 planks".into(),
            },
        ],
        subgoals: vec!["get planks".into()],
        kind: None,
    }
}

/// Answers every prompt with the same text.
struct Says(&'static str);

impl TextPolicy for Says {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|_| Reply {
                text: self.0.into(),
                prompt_tokens: 1,
                generated_tokens: 1,
            })
            .collect())
    }
}

/// Answers like a model would, from what the prompt says: the expert's next action for the
/// task named at the prompt's end, or scripted failures.
struct Scripted {
    /// (task headline, expert actions).
    gold: Gold,
    /// Solve only once a reflection is in the prompt (Reflexion's second trial).
    needs_lesson: bool,
    /// ADaPT: the root attempt gives up; the planner answers this plan.
    plan: Option<String>,
    prompts: Vec<String>,
}

impl Scripted {
    fn new(gold: Gold, needs_lesson: bool, plan: Option<&str>) -> Self {
        Self {
            gold,
            needs_lesson,
            plan: plan.map(str::to_owned),
            prompts: Vec::new(),
        }
    }

    fn answer(&mut self, p: &str) -> String {
        if p.contains("Reflection:") {
            return "I never crafted; follow the recipe.".into();
        }
        if p.ends_with("Plan:<assistant>") {
            return self.plan.clone().expect("a planner was asked");
        }
        let task = p
            .rsplit("Your task: ")
            .next()
            .and_then(|t| t.split(". Your next line:").next())
            .unwrap()
            .to_owned();
        let episode = p.rsplit("Now your task.").next().unwrap();
        let done = episode
            .lines()
            .filter(|l| l.starts_with("> ") && !l.starts_with("> think:"))
            .count();
        if self.needs_lesson && !p.contains("follow the recipe") {
            return if done == 0 {
                "think: no idea".into()
            } else {
                "dance".into()
            };
        }
        // ADaPT's root attempt (the environment's own task) gives up at once.
        if self.plan.is_some() && self.gold.iter().any(|(t, _)| *t == task) {
            return "finish: failure".into();
        }
        let (_, gold) = self
            .gold
            .iter()
            .find(|(t, _)| task.contains(t.as_str()) || self.plan.is_some())
            .unwrap_or_else(|| panic!("unknown task {task:?}"));
        gold.get(done)
            .cloned()
            .unwrap_or_else(|| "finish: success".into())
    }
}

impl TextPolicy for Scripted {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|p| {
                self.prompts.push(p.clone());
                let text = self.answer(p);
                Reply {
                    prompt_tokens: p.len(),
                    generated_tokens: text.len(),
                    text,
                }
            })
            .collect())
    }
}

/// (task headline, expert actions) per task.
type Gold = Vec<(String, Vec<String>)>;

fn textcraft_with_gold(n: usize) -> (Vec<Box<dyn Env>>, Vec<Task>, Gold) {
    let mut env = TextCraft::from_assets().unwrap();
    let tasks: Vec<Task> = env.tasks(Split::Id).unwrap().into_iter().take(n).collect();
    let gold = tasks
        .iter()
        .map(|t| {
            let r = env.reset(t).unwrap();
            // Prompts restate a task by its headline (TextCraft's K also lists the commands).
            (
                hier_envs::headline(&r.description).to_owned(),
                env.gold_actions().unwrap().unwrap(),
            )
        })
        .collect();
    let envs = (0..n)
        .map(|_| Box::new(TextCraft::from_assets().unwrap()) as Box<dyn Env>)
        .collect();
    (envs, tasks, gold)
}

fn prompter<'a>(tok: &'a Tokenizer, spec: &'a PromptedSpec) -> Prompter<'a> {
    Prompter {
        tokenizer: tok,
        demos: vec![demo()],
        spec,
    }
}

fn plain_tokenizer() -> Tokenizer {
    let mut tok = Tokenizer::load(&fixtures().join("tokenizer")).unwrap();
    tok.chat_template = Some(
        ChatTemplate::new(
            "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
            vec![],
        )
        .unwrap(),
    );
    tok
}

#[test]
fn react_plays_the_expert_through_thoughts_and_actions() {
    let (mut envs, tasks, gold) = textcraft_with_gold(2);
    let tok = plain_tokenizer();
    let spec = spec();
    let prompter = prompter(&tok, &spec);
    let mut model = Scripted::new(gold.clone(), false, None);
    let eps = rollout_react(
        &mut envs,
        &tasks,
        &mut model,
        &prompter,
        &Trial::default(),
        &RolloutConfig::with_max_steps(40),
        "test",
    )
    .unwrap();
    for (e, (_, g)) in eps.iter().zip(&gold) {
        assert!(e.trace.episode.success, "{:?}", e.trace.episode.actions);
        assert_eq!(&e.trace.episode.actions, g);
        assert_eq!(e.trace.sys2_calls, g.len());
    }
    // The prompt: the rules, the demonstration, the episode so far, the task restated last.
    let p = &model.prompts[model.prompts.len() - 1];
    assert!(p.starts_with("<user>You are an agent"), "{p}");
    assert!(p.contains("Example 1:\nTask: craft stick\n"), "{p}");
    assert!(p.ends_with(". Your next line:<assistant>>"), "{p}");

    // A model that only thinks runs out of turns without stepping the environment.
    let eps = rollout_react(
        &mut envs,
        &tasks,
        &mut Says("think: hmm"),
        &prompter,
        &Trial::default(),
        &RolloutConfig::with_max_steps(5),
        "test",
    )
    .unwrap();
    for e in &eps {
        assert!(e.trace.episode.actions.is_empty() && !e.trace.episode.success);
        assert_eq!(e.turns, 5);
        assert_eq!(e.trace.notes.len(), 5);
    }
}

#[test]
fn reflexion_solves_on_the_trial_after_a_reflection() {
    let (mut envs, tasks, gold) = textcraft_with_gold(2);
    let tok = plain_tokenizer();
    let spec = spec();
    let prompter = prompter(&tok, &spec);
    let mut model = Scripted {
        gold,
        needs_lesson: true,
        plan: None,
        prompts: Vec::new(),
    };
    let runs = run_reflexion(
        &mut envs,
        &tasks,
        &mut model,
        &prompter,
        &RolloutConfig::with_max_steps(30),
        "test",
    )
    .unwrap();
    for r in &runs {
        assert_eq!(r.trials.len(), 2, "stops after the first success");
        assert!(!r.pass_at(1) && r.pass_at(2) && r.pass_at(3));
        assert_eq!(r.reflections, ["I never crafted; follow the recipe."]);
        assert_eq!(
            r.tokens(),
            r.trials[0].tokens() + r.trials[1].tokens(),
            "every trial and reflection is paid for"
        );
        assert!(
            r.trials[0]
                .notes
                .iter()
                .any(|(_, n)| n.starts_with("reflection: "))
        );
    }
    // The second trial's prompts carry the lesson.
    assert!(model.prompts.iter().any(|p| {
        p.contains("Lessons from your earlier attempts at this task:\n- I never crafted")
    }));
}

/// Reflexion's loop heuristic (the paper's §4.1, "the same action and the same response for more
/// than 3 cycles"): with `reflexion_loop_cycles = 3` a trial ends on its fourth turn in a row with
/// one line and one observation — an action the real game refuses each time alike, or a thought
/// (`OK.`) — failed, and is reflected on; ReAct's rollout plays the same model to its limit.
#[test]
fn reflexion_ends_a_looping_trial_and_reflects_on_it() {
    let (mut envs, tasks, _) = textcraft_with_gold(2);
    let tok = plain_tokenizer();
    let spec = PromptedSpec {
        reflexion_loop_cycles: 3,
        ..spec()
    };
    let prompter = prompter(&tok, &spec);
    let rollout = RolloutConfig::with_max_steps(30);
    for (says, actions) in [("get 1 nothing", 4), ("think: hmm", 0)] {
        let runs = run_reflexion(
            &mut envs,
            &tasks,
            &mut Says(says),
            &prompter,
            &rollout,
            "test",
        )
        .unwrap();
        for r in &runs {
            assert_eq!(r.trials.len(), spec.reflexion_trials, "{says}");
            assert_eq!(r.reflections.len(), spec.reflexion_trials, "{says}");
            for t in &r.trials {
                assert!(!t.episode.success);
                assert_eq!(t.episode.actions.len(), actions, "{says}");
                assert_eq!(t.sys2_calls, 4 + 1, "{says}: four turns and one reflection");
                let ended = (t.notes.iter()).filter(|(_, n)| {
                    n == "trial ended: the same line and observation 4 times in a row"
                });
                assert_eq!(ended.count(), 1, "{says}: {:?}", t.notes);
            }
        }
    }
    let eps = rollout_react(
        &mut envs,
        &tasks,
        &mut Says("get 1 nothing"),
        &prompter,
        &Trial::default(),
        &rollout,
        "test",
    )
    .unwrap();
    for e in &eps {
        assert_eq!(e.trace.episode.actions.len(), 30);
        assert!(e.trace.notes.is_empty(), "{:?}", e.trace.notes);
    }
}

#[test]
fn adapt_decomposes_only_after_the_executor_fails() {
    let (mut envs, tasks, gold) = textcraft_with_gold(1);
    let tok = plain_tokenizer();
    let spec = spec();
    let prompter = prompter(&tok, &spec);
    // The root gives up; the plan's one step is solved by the executor at depth 1.
    let mut model = Scripted::new(
        gold.clone(),
        false,
        Some("Step 1: follow the recipe step by step; Logic: AND"),
    );
    let traces = rollout_adapt(
        &mut envs,
        &tasks,
        &mut model,
        &prompter,
        &RolloutConfig::with_max_steps(40),
        "test",
    )
    .unwrap();
    let t = &traces[0];
    assert!(t.episode.success, "{:?}", t.notes);
    assert_eq!(t.episode.actions, gold[0].1);
    assert_eq!(t.sys1_calls, 1, "one plan");
    let notes: Vec<&str> = t.notes.iter().map(|(_, n)| n.as_str()).collect();
    assert!(notes[0].starts_with("plan: Step 1"), "{notes:?}");
    assert_eq!(
        notes[1],
        "subtask (depth 1): follow the recipe step by step"
    );

    // AND: a failed first step fails the task without trying the second; at depth 1 (the
    // limit here) a failed sub-task is not decomposed again.
    let mut model = Scripted {
        gold,
        needs_lesson: false,
        plan: Some("Step 1: give up; Step 2: never asked; Logic: AND".into()),
        prompts: Vec::new(),
    };
    struct GiveUp<'a>(&'a mut Scripted);
    impl TextPolicy for GiveUp<'_> {
        fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
            let mut out = self.0.reply(prompts)?;
            for (r, p) in out.iter_mut().zip(prompts) {
                if p.contains("Your task: give up.") {
                    r.text = "finish: failure".into();
                }
            }
            Ok(out)
        }
    }
    let traces = rollout_adapt(
        &mut envs,
        &tasks,
        &mut GiveUp(&mut model),
        &prompter,
        &RolloutConfig::with_max_steps(40),
        "test",
    )
    .unwrap();
    let t = &traces[0];
    assert!(!t.episode.success && t.episode.actions.is_empty());
    assert_eq!(t.sys1_calls, 1);
    assert!(
        !model
            .prompts
            .iter()
            .any(|p| p.contains("Your task: never asked."))
    );
}

#[test]
fn prompts_render_as_transformers_renders_real_chat_templates() {
    let text = std::fs::read_to_string(fixtures().join("chat/templates.json")).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let spec = spec();
    let mut checked = 0;
    for c in &cases {
        let special: Vec<(String, String)> = c["special_tokens"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let mut tok = Tokenizer::load(&fixtures().join("tokenizer")).unwrap();
        tok.chat_template =
            Some(ChatTemplate::new(c["template"].as_str().unwrap(), special).unwrap());
        let prompter = prompter(&tok, &spec);
        for case in c["cases"].as_array().unwrap() {
            let msgs = case["messages"].as_array().unwrap();
            let one_user = msgs.len() == 1 && msgs[0]["role"] == "user";
            if !one_user || case["add_generation_prompt"] != true || !case["error"].is_null() {
                continue;
            }
            let content = msgs[0]["content"].as_str().unwrap();
            assert_eq!(
                prompter.chat(content.to_owned()).unwrap(),
                case["rendered"].as_str().unwrap(),
                "{}",
                c["name"]
            );
            checked += 1;
        }
        // A whole acting prompt renders and ends with the template's assistant cue and the
        // reply's start.
        let p = prompter
            .act_prompt("craft stick", None, "o0", &[], &["lesson".into()], true)
            .unwrap();
        let p = p.strip_suffix(hier_multi2::react::REPLY_START).unwrap();
        let cue = tok
            .apply_chat_template(&[Message::new("user", "x")], true)
            .unwrap();
        let cue = cue.rsplit('x').next().unwrap();
        assert!(p.ends_with(cue), "{}: {p}", c["name"]);
    }
    assert!(checked >= 3, "only {checked} reference renderings");
}

/// ETO's protocol ends a ScienceWorld episode after its task's limit of actions, every action
/// counted: an agent repeating a command the simulator does not understand makes no move, so
/// the environment alone would let it run to `max_steps`. Every agent's rollout stops at the
/// limit when `task_turn_limits` is on (`find-plant`: 15), at `max_steps` where that is lower
/// (`boil`: 100), and at `max_steps` with it off — on the real jar.
#[test]
fn every_agent_stops_at_scienceworlds_per_task_action_limit() {
    use hier_multi2::agent::rollout;
    use hier_multi2::envs::EnvKind;
    use hier_multi2::flat::rollout_flat;

    // One command the simulator does not know, as action, subgoal and ReAct line.
    let babbler = || Says("fly to the moon");
    let mut envs: Vec<Box<dyn Env>> = (0..2)
        .map(|_| EnvKind::Scienceworld.open().unwrap())
        .collect();
    let id = envs[0].tasks(Split::Id).unwrap();
    let pick = |name: &str| id.iter().find(|t| t.name == name).unwrap().clone();
    let tasks = [pick("find-plant"), pick("boil")];
    assert_eq!(
        tasks
            .iter()
            .map(|t| envs[0].turn_limit(t))
            .collect::<Vec<_>>(),
        [Some(15), Some(100)],
        "ETO's limits"
    );
    let limited = RolloutConfig {
        task_turn_limits: true,
        ..RolloutConfig::with_max_steps(20)
    };
    let plain = RolloutConfig::with_max_steps(20);
    let tok = plain_tokenizer();
    let spec = spec();
    let prompter = prompter(&tok, &spec);
    for cfg in [&limited, &plain] {
        let want: &[usize] = if cfg.task_turn_limits {
            &[15, 20]
        } else {
            &[20, 20]
        };
        let runs = [
            (
                "flat",
                rollout_flat(&mut envs, &tasks, &mut babbler(), cfg, "t").unwrap(),
            ),
            (
                "multi2",
                rollout(&mut envs, &tasks, &mut babbler(), &mut babbler(), cfg, "t").unwrap(),
            ),
            (
                "react",
                rollout_react(
                    &mut envs,
                    &tasks,
                    &mut babbler(),
                    &prompter,
                    &Trial::default(),
                    cfg,
                    "t",
                )
                .unwrap()
                .into_iter()
                .map(|e| e.trace)
                .collect(),
            ),
            (
                "adapt",
                rollout_adapt(&mut envs, &tasks, &mut babbler(), &prompter, cfg, "t").unwrap(),
            ),
        ];
        for (agent, traces) in runs {
            let lens: Vec<usize> = traces.iter().map(|t| t.episode.actions.len()).collect();
            assert_eq!(
                lens, want,
                "{agent}, task_turn_limits {}",
                cfg.task_turn_limits
            );
            for t in &traces {
                assert!(!t.episode.done && !t.episode.success, "{agent}");
            }
        }
    }
}
