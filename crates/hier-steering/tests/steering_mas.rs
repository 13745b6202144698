//! The five-role pipeline over the real retrieval environment with a scripted team: a
//! supervisor's rejection is executed (the sender redoes its work, counted and bounded), the
//! verifier's send-backs are bounded, and an episode resumed from a bank state at a handoff
//! ends as the uninterrupted one did — with a slow-path output applied as the host reads it.

use hier_envs::qa::env::{QaEnv, QaEnvConfig};
use hier_envs::qa::world::{World, WorldConfig};
use hier_envs::{Env, Split, Task};
use hier_steering::mas::{
    HandoffAction, HandoffRecorder, HandoffSupervisor, MasConfig, MasProcess, MasState, Render,
    Role, run_mas, score,
};
use hier_steering::steer_agent::{NOTHING_TO_STOP, read_slow_path};
use hier_steering::steer_train::SteeredProcess;
use hier_train::policy::{Reply, TextPolicy};

fn env() -> QaEnv {
    let w = World::generate(&WorldConfig {
        seed: 5,
        people: 30,
        cities: 10,
        countries: 4,
        organizations: 8,
        works: 8,
        questions_per_hop: [8, 8, 8, 8],
        ..WorldConfig::default()
    })
    .unwrap();
    QaEnv::synthetic(
        &w,
        QaEnvConfig {
            topk: 3,
            max_turns: 6,
        },
    )
    .unwrap()
}

fn cfg() -> MasConfig {
    MasConfig {
        search_turns: 3,
        max_sendbacks: 1,
        max_retries: 1,
        message_chars: 400,
        info_chars: 60,
    }
}

/// A team that knows the gold answers: the searcher searches once, then proposes the answer;
/// the verifier accepts (or, `nitpick`, always sends back).
struct Team {
    gold: Vec<(String, String)>,
    nitpick: bool,
    calls: Vec<String>,
}

impl Team {
    fn new(e: &QaEnv, nitpick: bool) -> Self {
        let gold = e
            .tasks(Split::Train)
            .unwrap()
            .iter()
            .map(|t| {
                let q = e.task(t).unwrap();
                (q.question.trim().to_owned(), q.answers[0].clone())
            })
            .collect();
        Self {
            gold,
            nitpick,
            calls: Vec::new(),
        }
    }

    fn answer(&self, prompt: &str) -> String {
        self.gold
            .iter()
            .find(|(q, _)| prompt.contains(&format!("Question: {q}\n")))
            .map(|(_, a)| a.clone())
            .expect("a known question")
    }
}

impl TextPolicy for Team {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|p| {
                let (role, text) = if p.starts_with("You are the planner") {
                    ("planner", "look up the first name".to_owned())
                } else if p.starts_with("You are the researcher") {
                    (
                        "researcher",
                        format!("Candidate answer: {}", self.answer(p)),
                    )
                } else if p.starts_with("You are the verifier") {
                    let v = if self.nitpick {
                        "send back: look further"
                    } else {
                        "accept"
                    };
                    ("verifier", v.to_owned())
                } else if p.starts_with("You are the summariser") {
                    (
                        "summariser",
                        format!("<answer> {} </answer>", self.answer(p)),
                    )
                } else if p
                    .rsplit("End of example.")
                    .next()
                    .unwrap()
                    .contains("</information>\n")
                {
                    // Something came back already: propose the answer.
                    (
                        "searcher",
                        format!("<think>found</think> <answer> {} </answer>", self.answer(p)),
                    )
                } else {
                    (
                        "searcher",
                        "<think>start</think> <search> the first name </search>".to_owned(),
                    )
                };
                self.calls.push(role.to_owned());
                Reply {
                    text,
                    prompt_tokens: 2,
                    generated_tokens: 1,
                }
            })
            .collect())
    }
}

/// Rejects the searcher's first findings.
struct RejectFindings;

impl HandoffSupervisor for RejectFindings {
    fn at_handoffs(
        &mut self,
        states: &[&MasState],
    ) -> hier_steering::Result<Vec<Option<HandoffAction>>> {
        Ok(states
            .iter()
            .map(|s| {
                let h = s.pending.as_ref().unwrap();
                (h.from == Role::Searcher && s.rejects_executed == 0)
                    .then(|| HandoffAction::Reject("search again".into()))
            })
            .collect())
    }
}

fn fresh(e: &QaEnv, n: usize) -> (Vec<Task>, Vec<MasState>) {
    let tasks: Vec<Task> = e.tasks(Split::Train).unwrap()[..n].to_vec();
    let states = tasks
        .iter()
        .map(|t| MasState::fresh(t, &e.task(t).unwrap().question))
        .collect();
    (tasks, states)
}

#[test]
fn a_rejected_handoff_is_redone_by_its_sender_and_counted() {
    let e = env();
    let (_, starts) = fresh(&e, 2);
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(e.fork()), Box::new(e.fork())];
    let mut team = Team::new(&e, false);
    let done = run_mas(
        &mut envs,
        starts,
        &mut team,
        Render::Raw,
        Some(&mut RejectFindings),
        &cfg(),
    )
    .unwrap();
    for s in &done {
        // planner, searcher ×2 (search, propose), rejected → searcher proposes again,
        // researcher, verifier, summariser.
        assert_eq!(s.agent_turns, 7, "{s:?}");
        assert_eq!((s.rejects_executed, s.rejects_refused), (1, 0));
        assert_eq!(s.interventions.len(), 1);
        assert_eq!(
            (s.interventions[0].from, s.interventions[0].to),
            (Role::Searcher, Role::Researcher)
        );
        assert_eq!(
            s.interventions[0].action,
            HandoffAction::Reject("search again".into())
        );
        assert_eq!(
            s.search_turns.len(),
            1,
            "the proposal never reaches the environment"
        );
        assert!(
            s.redo
                .iter()
                .any(|(r, why)| *r == Role::Searcher && why.contains("search again"))
        );
        assert_eq!(score(s, &e).unwrap(), (1.0, 1.0));
    }
    let searcher = team.calls.iter().filter(|c| *c == "searcher").count();
    assert_eq!(
        searcher,
        2 * 3,
        "the searcher redid its work once per episode"
    );
}

#[test]
fn the_verifier_sends_back_a_bounded_number_of_times() {
    let e = env();
    let (_, starts) = fresh(&e, 1);
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(e.fork())];
    let mut team = Team::new(&e, true);
    let done = run_mas(&mut envs, starts, &mut team, Render::Raw, None, &cfg()).unwrap();
    let s = &done[0];
    assert_eq!((s.sendbacks, s.sendbacks_refused), (1, 1));
    // planner, searcher ×2, researcher, verifier (sends back), searcher (proposes: a result
    // is in its prompt), researcher, verifier (taken as acceptance), summariser.
    assert_eq!(s.agent_turns, 9);
    assert!(s.done && score(s, &e).unwrap().0 == 1.0);
}

#[test]
fn episodes_resume_from_bank_states_with_the_slow_paths_output_as_a_handoff_reads_it() {
    let e = env();
    let (_, starts) = fresh(&e, 2);
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(e.fork()), Box::new(e.fork())];
    let mut team = Team::new(&e, false);
    let mut recorder = HandoffRecorder::default();
    let whole = run_mas(
        &mut envs,
        starts,
        &mut team,
        Render::Raw,
        Some(&mut recorder),
        &cfg(),
    )
    .unwrap();
    // Four handoffs per episode: planner, searcher, researcher, verifier.
    assert_eq!(recorder.states.len(), 8);
    let bank = recorder.states;
    let mut process = MasProcess {
        states: &bank,
        envs: &mut envs,
        agents: &mut team,
        render: Render::Raw,
        golds: &e,
        mas: cfg(),
        parallel: 2,
    };
    // The searcher's handoff of the first episode, resumed (its search replayed).
    let k = bank
        .iter()
        .position(|s| s.pending.as_ref().unwrap().from == Role::Searcher)
        .unwrap();
    assert!(
        process
            .observation(k)
            .contains("Handoff from the searcher to the researcher:\nProposed answer:")
    );
    let pass = process.start(k, None);
    let reject =
        read_slow_path(" wrong </think><action>reject: check the dates</action>").at_a_handoff();
    let rejected = process.start(k, Some(&reject));
    assert_eq!(
        (rejected.next, rejected.rejects_executed),
        (Role::Searcher, 1)
    );
    let stop = process.read(read_slow_path(" done </think><action>stop</action>"));
    assert_eq!(stop.parse_error.as_deref(), Some(NOTHING_TO_STOP));
    let resumed = run_mas(
        process.envs,
        vec![pass.clone(), rejected],
        process.agents,
        Render::Raw,
        None,
        &cfg(),
    )
    .unwrap();
    let first = whole.iter().find(|s| s.task == bank[k].task).unwrap();
    assert_eq!(
        &resumed[0], first,
        "resumed without intervention: the same episode"
    );
    assert_eq!(resumed[1].agent_turns, first.agent_turns + 1);
    assert_eq!(process.play(&[pass], 0).unwrap(), vec![1.0]);
}

/// Steering training over the pipeline's handoff bank (`train_steering_on` with
/// [`MasProcess`]): a `reject:` is read as an executable intervention there (played,
/// counted in the curve's `reject` share), a `stop` is unreadable (not played, no advantage).
#[test]
fn training_over_handoffs_plays_rejections_and_refuses_stops() {
    use hier_backbone::{CausalLm, LoraConfig, TargetModule, Tokenizer};
    use hier_steering::steer_agent::SteerConfig;
    use hier_steering::steer_train::{
        RoundPoint, StateRecord, SteerTrainConfig, train_steering_on,
    };
    use hier_train::optim::OptimConfig;
    use hier_train::runlog::RunOptions;

    let e = env();
    let (_, starts) = fresh(&e, 3);
    let mut envs: Vec<Box<dyn Env>> = (0..4).map(|_| Box::new(e.fork()) as Box<dyn Env>).collect();
    let mut team = Team::new(&e, false);
    let mut recorder = HandoffRecorder::default();
    run_mas(
        &mut envs[..3],
        starts,
        &mut team,
        Render::Raw,
        Some(&mut recorder),
        &cfg(),
    )
    .unwrap();
    let bank = recorder.states;

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hier-backbone/tests/fixtures/tokenizer");
    let tok = Tokenizer::load(&dir).unwrap();
    let model = hier_train::pretrain::TinyModelConfig::for_tests(tok.vocab_size(), 512);
    let device = hier_backbone::burn::tensor::Device::flex().autodiff();
    let mut lm = CausalLm::random(model.model_config().unwrap(), 9, &device).unwrap();
    lm.add_adapter(
        "steer-zero",
        LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::V]),
        1,
    )
    .unwrap();
    let train = SteerTrainConfig {
        adapter: "steer-rl".into(),
        reference: "steer-zero".into(),
        rounds: 2,
        states_per_round: 3,
        epsilon: 0.5,
        samples: 4,
        continuations: 1,
        epochs: 1,
        optim: OptimConfig::constant(1e-3),
        clip_eps: 0.2,
        beta: 0.0,
        rank_weight: 1.0,
        scale_std: true,
        rescore_every: 1,
        parallel: 4,
        steer: SteerConfig {
            tau: 0.5,
            history: 2,
            info_chars: 40,
            max_prompt: 300,
            max_tokens: 6,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 50,
            seed: 2,
        },
        max_len: 320,
        seed: 3,
    };
    // One output of each kind per state, in order.
    let mut write = |prompts: &[String], _seed: u64| -> hier_steering::Result<Vec<String>> {
        const OUTPUTS: [&str; 4] = [
            " fine </think><action>pass</action>",
            " vague </think><action>guide: name the entity</action>",
            " wrong </think><action>reject: check the dates</action>",
            " done </think><action>stop</action>",
        ];
        Ok((0..prompts.len())
            .map(|k| OUTPUTS[k % 4].to_owned())
            .collect())
    };
    let mut process = MasProcess {
        states: &bank,
        envs: &mut envs,
        agents: &mut team,
        render: Render::Raw,
        golds: &e,
        mas: cfg(),
        parallel: 4,
    };
    let tmp = tempfile::tempdir().unwrap();
    let (_, curve): (_, Vec<RoundPoint>) = train_steering_on(
        lm,
        &tok,
        &mut process,
        &train,
        tmp.path(),
        &RunOptions::default(),
        Some(&mut write),
    )
    .unwrap();
    for c in &curve {
        assert_eq!(
            (c.pass, c.guide, c.reject, c.unreadable, c.stop),
            (0.25, 0.25, 0.25, 0.25, 0.0),
            "{c:?}"
        );
    }
    let records: Vec<StateRecord> = std::fs::read_to_string(tmp.path().join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 6);
    for r in &records {
        let s = &r.samples;
        assert_eq!(s[2].reject.as_deref(), Some("check the dates"));
        assert!(
            s[2].readable && s[2].mean_return.is_some(),
            "a rejection is played"
        );
        assert!(
            !s[3].readable && s[3].mean_return.is_none() && s[3].advantage == 0.0,
            "a stop is not"
        );
        // The scripted team answers right whatever happens: every branch returns F1 1.
        assert_eq!((r.baseline, r.q), (1.0, Some(0.0)));
    }
}
