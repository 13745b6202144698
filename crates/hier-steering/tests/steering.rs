//! Steering's pieces: episodes resume from bank states, a verifier's rejections reach the
//! executor, and training follows METHODS.md B's advantages and targets (checked by hand here)
//! and resumes exactly.

use std::path::Path;

use hier_backbone::{CausalLm, Tokenizer};
use hier_backbone::{LoraConfig, TargetModule};
use hier_envs::qa::env::{QaEnv, QaEnvConfig};
use hier_envs::qa::world::{World, WorldConfig};
use hier_envs::{Env, Split};
use hier_steering::search_agent::{
    ExecutorPrompting, Intervention, MAX_REJECTIONS, SearchStart, SearchState, Supervisor,
    rejection_observation, rollout_search_from,
};

/// The SFT executors' prompts (the scripted executor reads them).
const PLAIN: ExecutorPrompting<'static> = ExecutorPrompting::PLAIN;
use hier_steering::steer_agent::SteerConfig;
use hier_steering::steer_train::{BankState, StateRecord, SteerTrainConfig, train_steering_with};
use hier_train::optim::OptimConfig;
use hier_train::policy::{Reply, TextPolicy};
use hier_train::pretrain::TinyModelConfig;
use hier_train::runlog::RunOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn world() -> World {
    World::generate(&WorldConfig {
        seed: 5,
        people: 30,
        cities: 10,
        countries: 4,
        organizations: 8,
        works: 8,
        questions_per_hop: [8, 8, 8, 8],
        ..WorldConfig::default()
    })
    .unwrap()
}

fn env(w: &World, max_turns: usize) -> QaEnv {
    QaEnv::synthetic(w, QaEnvConfig { topk: 3, max_turns }).unwrap()
}

/// An executor that answers the gold answer with probability `p` (always when told to
/// answer now) and otherwise repeats a search — seeded, so its runs repeat.
struct Coin {
    gold: Vec<(String, String)>,
    p: f64,
    rng: StdRng,
}

impl Coin {
    fn answer(&self, prompt: &str) -> String {
        self.gold
            .iter()
            .find(|(q, _)| prompt.contains(&format!("Question: {q}\n")))
            .map(|(_, a)| a.clone())
            .unwrap_or_default()
    }
}

impl TextPolicy for Coin {
    fn reply(&mut self, prompts: &[String]) -> hier_train::Result<Vec<Reply>> {
        Ok(prompts
            .iter()
            .map(|p| {
                let text = if p.ends_with("Give your final answer now.\n<think>") {
                    format!("ok</think> <answer> {} </answer>", self.answer(p))
                } else if self.rng.random_bool(self.p) {
                    format!("<think>done</think> <answer> {} </answer>", self.answer(p))
                } else {
                    "<think>again</think> <search> something </search>".to_owned()
                };
                Reply {
                    text,
                    prompt_tokens: 1,
                    generated_tokens: 1,
                }
            })
            .collect())
    }

    fn reseed(&mut self, seed: u64) {
        self.rng = StdRng::seed_from_u64(seed);
    }
}

fn coin(e: &QaEnv, p: f64) -> Coin {
    let gold = e
        .tasks(Split::Train)
        .unwrap()
        .iter()
        .map(|t| {
            let q = e.task(t).unwrap();
            (q.question.clone(), q.answers[0].clone())
        })
        .collect();
    Coin {
        gold,
        p,
        rng: StdRng::seed_from_u64(0),
    }
}

/// Rejects every answer with a note.
struct Nitpicker;

impl Supervisor for Nitpicker {
    fn decide(
        &mut self,
        states: &[SearchState<'_>],
    ) -> hier_steering::Result<Vec<Option<Intervention>>> {
        Ok(vec![None; states.len()])
    }

    fn review(
        &mut self,
        _states: &[SearchState<'_>],
        answers: &[&str],
    ) -> hier_steering::Result<Vec<Option<String>>> {
        Ok(answers.iter().map(|_| Some("look again".into())).collect())
    }
}

#[test]
fn episodes_resume_from_states_and_a_verifier_rejects_a_bounded_number_of_answers() {
    let w = world();
    let e = env(&w, 6);
    let task = e.tasks(Split::Train).unwrap()[0].clone();
    let mut exec = coin(&e, 1.0);
    let mut envs: Vec<Box<dyn Env>> = vec![Box::new(e.fork()), Box::new(e.fork())];
    // A state reached by one search, resumed with stop-and-answer: one new turn, the answer.
    let mut probe = e.fork();
    probe.reset(&task).unwrap();
    let search = "<think>x</think> <search> something </search>".to_owned();
    let obs = probe.step(&search).unwrap().observation;
    let start = SearchStart {
        turns: vec![(search.clone(), obs)],
        ..SearchStart::fresh(&task)
    }
    .with(Some(&Intervention::StopAndAnswer));
    let eps = rollout_search_from(
        &mut envs,
        std::slice::from_ref(&start),
        &mut exec,
        PLAIN,
        None,
        "t",
    )
    .unwrap();
    assert_eq!(eps[0].turns.len(), 2);
    assert_eq!(eps[0].turns[0], start.turns[0]);
    assert!(eps[0].answered && eps[0].score == 1.0);
    // A start whose recorded observation the environment does not reproduce is refused.
    let mut bad = start.clone();
    bad.turns[0].1 = "<information>something else</information>".into();
    let err = rollout_search_from(&mut envs, &[bad], &mut exec, PLAIN, None, "t")
        .unwrap_err()
        .to_string();
    assert!(err.contains("replaying turn 0"), "{err}");
    // A verifier rejecting every answer: MAX_REJECTIONS rejected turns, then the answer stands.
    let eps = rollout_search_from(
        &mut envs,
        &[SearchStart::fresh(&task)],
        &mut exec,
        PLAIN,
        Some(&mut Nitpicker),
        "t",
    )
    .unwrap();
    let ep = &eps[0];
    assert_eq!(ep.interventions.len(), MAX_REJECTIONS);
    assert_eq!(ep.turns.len(), MAX_REJECTIONS + 1);
    assert_eq!(ep.turns[0].1, rejection_observation("look again"));
    assert!(ep.answered && ep.score == 1.0);
    // A rejected turn in a start is not replayed into the environment.
    let resumed = SearchStart {
        turns: ep.turns[..1].to_vec(),
        ..SearchStart::fresh(&task)
    };
    let again = rollout_search_from(&mut envs, &[resumed], &mut exec, PLAIN, None, "t").unwrap();
    assert!(again[0].answered && again[0].turns.len() == 2);
}

fn tiny() -> (CausalLm, Tokenizer) {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../hier-backbone/tests/fixtures/tokenizer");
    let tok = Tokenizer::load(&dir).unwrap();
    let cfg = TinyModelConfig::for_tests(tok.vocab_size(), 512);
    let device = hier_backbone::burn::tensor::Device::flex().autodiff();
    let mut lm = CausalLm::random(cfg.model_config().unwrap(), 9, &device).unwrap();
    lm.add_adapter(
        "steer-zero",
        LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::V]),
        1,
    )
    .unwrap();
    (lm, tok)
}

fn train_config() -> SteerTrainConfig {
    SteerTrainConfig {
        adapter: "steer-rl".into(),
        reference: "steer-zero".into(),
        rounds: 2,
        states_per_round: 4,
        epsilon: 0.5,
        samples: 3,
        continuations: 2,
        epochs: 2,
        optim: OptimConfig {
            grad_clip: Some(1.0),
            ..OptimConfig::constant(1e-2)
        },
        clip_eps: 0.2,
        beta: 0.05,
        rank_weight: 1.0,
        scale_std: true,
        rescore_every: 1,
        parallel: 8,
        steer: SteerConfig {
            tau: 0.5,
            history: 2,
            info_chars: 40,
            max_prompt: 200,
            max_tokens: 6,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 50,
            seed: 2,
        },
        max_len: 256,
        seed: 3,
    }
}

/// Bank states: every prefix of a two-search episode of the first three training questions.
fn bank(e: &QaEnv) -> Vec<BankState> {
    let mut out = Vec::new();
    for (g, task) in e
        .tasks(Split::Train)
        .unwrap()
        .into_iter()
        .take(3)
        .enumerate()
    {
        let mut probe = e.fork();
        let question = probe.reset(&task).unwrap().description;
        let mut turns = Vec::new();
        for k in 0..3 {
            let next = format!("<think>{k}</think> <search> s{k} </search>");
            out.push(BankState {
                task: task.clone(),
                group: g,
                question: question.clone(),
                turns: turns.clone(),
                next: next.clone(),
            });
            let obs = probe.step(&next).unwrap().observation;
            turns.push((next, obs));
        }
    }
    out
}

fn train(dir: &Path, stop_after: Option<usize>) -> Vec<StateRecord> {
    let w = world();
    let e = env(&w, 5);
    let (lm, tok) = tiny();
    let mut envs: Vec<Box<dyn Env>> = (0..8).map(|_| Box::new(e.fork()) as Box<dyn Env>).collect();
    let mut exec = coin(&e, 0.4);
    let opts = RunOptions {
        stop_after,
        ..Default::default()
    };
    // The slow path's outputs, scripted from the round's seed (a random model never closes an
    // `<action>`): every kind, two of them unreadable before a turn.
    let mut write = |prompts: &[String], seed: u64| -> hier_steering::Result<Vec<String>> {
        const OUTPUTS: [&str; 5] = [
            " the executor has enough </think><action>stop</action>",
            " on track </think><action>pass</action>",
            " it searches in circles </think><action>guide: search the city first</action>",
            " off topic </think><action>reject: wrong entity</action>",
            " it searches </think><action>gui",
        ];
        let mut rng = StdRng::seed_from_u64(seed);
        Ok(prompts
            .iter()
            .map(|_| OUTPUTS[rng.random_range(0..OUTPUTS.len())].to_owned())
            .collect())
    };
    train_steering_with(
        lm,
        &tok,
        &mut envs,
        &mut exec,
        PLAIN,
        &bank(&e),
        &train_config(),
        dir,
        &opts,
        Some(&mut write),
    )
    .unwrap();
    std::fs::read_to_string(dir.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn training_uses_baseline_in_group_advantages_and_q_and_resumes_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let records = train(&a, None);
    let cfg = train_config();
    assert_eq!(records.len(), cfg.rounds * cfg.states_per_round);
    let mut signal = 0;
    let mut unreadable = 0;
    for r in &records {
        assert_eq!(r.samples.len(), cfg.samples);
        // Unreadable samples were not played and get no advantage.
        for s in r.samples.iter().filter(|s| !s.readable) {
            assert_eq!((s.mean_return, s.advantage), (None, 0.0));
            unreadable += 1;
        }
        let rbar: Vec<f64> = r.samples.iter().filter_map(|s| s.mean_return).collect();
        if rbar.is_empty() {
            assert_eq!(r.q, None, "no readable sample, no q(s)");
            continue;
        }
        // q(s) = mean_j |R̄_j − b| over the readable samples.
        let q = rbar.iter().map(|x| (x - r.baseline).abs()).sum::<f64>() / rbar.len() as f64;
        let got = r.q.expect("q(s) of a state with readable samples");
        assert!((got - q).abs() < 1e-6, "{got} vs {q}");
        // Advantages over {R̄_1..G, b}: unbiased std, ε = 1e-4; zero when all equal.
        let all: Vec<f64> = rbar.iter().copied().chain([r.baseline]).collect();
        let mu = all.iter().sum::<f64>() / all.len() as f64;
        let sd =
            (all.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (all.len() - 1) as f64).sqrt();
        for s in r.samples.iter().filter(|s| s.readable) {
            let m = s.mean_return.expect("a readable sample was played");
            let want = if sd == 0.0 {
                0.0
            } else {
                (m - mu) / (sd + 1e-4)
            };
            assert!(
                (s.advantage as f64 - want).abs() < 1e-4,
                "{} vs {want}",
                s.advantage
            );
        }
        signal += usize::from(sd > 0.0);
    }
    assert!(signal > 0, "the coin executor gives returns that differ");
    assert!(unreadable > 0, "some scripted outputs are unreadable");
    // The trained adapter moved away from where it started.
    let init = std::fs::read(a.join("init_adapter/adapter_model.safetensors")).unwrap();
    let done = std::fs::read(a.join("adapter/adapter_model.safetensors")).unwrap();
    assert_ne!(init, done);
    // Interrupted after one round and resumed: the same records and the same adapter.
    train(&b, Some(1));
    let resumed = train(&b, None);
    assert_eq!(resumed, records);
    assert_eq!(
        std::fs::read(b.join("adapter/adapter_model.safetensors")).unwrap(),
        done
    );
}
