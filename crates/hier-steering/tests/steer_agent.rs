//! The steering agent's fast path against an independent forward pass, and its gate: τ trades
//! interventions for none without retraining.

use hier_backbone::{Batch, CausalLm, Forward, Tokenizer};
use hier_steering::search_agent::{SearchState, Supervisor};
use hier_steering::steer_agent::{
    AnswerTokens, SEARCH_PROTOCOL, SteerConfig, SteeringAgent, fast_prompt, log_odds,
};
use hier_train::pretrain::TinyModelConfig;

fn model() -> (CausalLm, Tokenizer) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hier-backbone/tests/fixtures/tokenizer");
    let tok = Tokenizer::load(&dir).unwrap();
    let cfg = TinyModelConfig::for_tests(tok.vocab_size(), 512);
    let device = hier_backbone::burn::tensor::Device::flex();
    (
        CausalLm::random(cfg.model_config().unwrap(), 5, &device).unwrap(),
        tok,
    )
}

fn config(tau: f64) -> SteerConfig {
    SteerConfig {
        tau,
        history: 4,
        info_chars: 100,
        max_prompt: 400,
        max_tokens: 12,
        temperature: 1.0,
        top_p: 1.0,
        top_k: 50,
        seed: 3,
    }
}

#[test]
fn the_fast_path_is_the_yes_no_logit_difference_of_one_forward_pass() {
    let (lm, tok) = model();
    let a = AnswerTokens::of(&tok).unwrap();
    let (yes, no) = (a.yes, a.no);
    let prompts: Vec<Vec<u32>> = ["Goal: x\n", "Goal: a longer question here\n"]
        .iter()
        .map(|o| tok.encode(&fast_prompt(o, a.spaced), false).unwrap())
        .collect();
    let z: Vec<f32> = log_odds(&lm, None, &prompts, yes, no, false)
        .unwrap()
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    for (p, zi) in prompts.iter().zip(&z) {
        let logits = lm
            .forward(&Batch::single(p), Forward::default(), None)
            .unwrap();
        let [_, t, v] = logits.dims();
        let last: Vec<f32> = logits
            .narrow(1, t - 1, 1)
            .reshape([v])
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        let want = last[yes as usize] - last[no as usize];
        assert!((zi - want).abs() < 1e-4, "{zi} vs {want}");
    }
    assert!(log_odds(&lm, None, &prompts, yes, yes, false).is_err());
}

#[test]
fn tau_sets_how_often_the_slow_path_runs_and_runs_are_seeded() {
    let (lm, tok) = model();
    let turns: Vec<(String, String)> = vec![(
        "<think>x</think> <search> capital </search>".into(),
        "<information>[Doc 1](u):\nA capital.</information>".into(),
    )];
    let notes: Vec<String> = Vec::new();
    let states: Vec<SearchState<'_>> = (0..6)
        .map(|_| SearchState {
            question: "What is the capital?",
            turns: &turns,
            guidance: &notes,
        })
        .collect();
    let mut eager = SteeringAgent::new(&lm, &tok, None, config(1e-9)).unwrap();
    eager.decide(&states).unwrap();
    assert!(eager.log.iter().all(|r| r.triggered && r.output.is_some()));
    // Whatever the untrained model writes is either applied or reported, never guessed.
    for r in &eager.log {
        assert!(
            r.intervention.is_some()
                || r.parse_error.is_some()
                || r.output.as_deref().is_some_and(|o| o.contains("pass"))
        );
    }
    let mut shy = SteeringAgent::new(&lm, &tok, None, config(1.0 - 1e-9)).unwrap();
    let none = shy.decide(&states).unwrap();
    assert!(none.iter().all(Option::is_none));
    assert!(
        shy.log
            .iter()
            .all(|r| !r.triggered && r.trigger_probability < 1e-3)
    );
    // The same seed gives the same decisions and outputs.
    let mut again = SteeringAgent::new(&lm, &tok, None, config(1e-9)).unwrap();
    again.decide(&states).unwrap();
    assert_eq!(again.log, eager.log);
    assert!(SteeringAgent::new(&lm, &tok, None, config(1.5)).is_err());
}

/// With a prefix cache the agent decides as it does without one (the same gate values to
/// 1e-4, the same triggers and slow-path outputs), and its slow path prefills only the
/// instruction after the observation its fast path has read.
#[test]
fn the_slow_path_reuses_the_observation_the_fast_path_read() {
    let (lm, tok) = model();
    let turns: Vec<(String, String)> = vec![(
        "<think>x</think> <search> capital </search>".into(),
        "<information>[Doc 1](u):\nA capital city of a country.</information>".into(),
    )];
    let notes: Vec<String> = Vec::new();
    let questions = ["What is the capital?", "Who founded the city?", "When?"];
    let states: Vec<SearchState<'_>> = questions
        .iter()
        .map(|q| SearchState {
            question: q,
            turns: &turns,
            guidance: &notes,
        })
        .collect();
    let mut plain = SteeringAgent::new(&lm, &tok, None, config(1e-9)).unwrap();
    plain.decide(&states).unwrap();
    let mut cached = SteeringAgent::new(&lm, &tok, None, config(1e-9))
        .unwrap()
        .with_prefix_cache_mib(64);
    cached.decide(&states).unwrap();
    assert_eq!(plain.log.len(), cached.log.len());
    for (a, b) in plain.log.iter().zip(&cached.log) {
        let (za, zb) = (a.z.unwrap(), b.z.unwrap());
        assert!((za - zb).abs() < 1e-4, "{za} vs {zb}");
        assert_eq!(a.triggered, b.triggered);
        assert_eq!(a.output, b.output);
    }
    assert!(cached.log.iter().all(|r| r.triggered));
    // Every observation was prefilled once, by the fast path (whose batch computes the
    // opening its three prompts share once); the slow path read from the cache exactly what
    // its prompt shares with the fast path's (the observation) and prefilled only its
    // instruction.
    let a = AnswerTokens::of(&tok).unwrap();
    let common = |x: &[u32], y: &[u32]| x.iter().zip(y).take_while(|(a, b)| a == b).count();
    let (fast, slow): (Vec<Vec<u32>>, Vec<Vec<u32>>) = states
        .iter()
        .map(|s| {
            let o = hier_steering::steer_agent::observation(s, 4, 100);
            (
                tok.encode(&fast_prompt(&o, a.spaced), false).unwrap(),
                tok.encode(&SEARCH_PROTOCOL.slow_prompt(&o), false).unwrap(),
            )
        })
        .unzip();
    let per_observation: usize = fast.iter().zip(&slow).map(|(f, s)| common(f, s)).sum();
    let opening = common(&fast[0], &fast[1]).min(common(&fast[0], &fast[2]));
    assert!(
        opening >= 16,
        "the fast batch shares its opening ({opening} tokens)"
    );
    assert!(
        per_observation > 3 * opening,
        "the observations go on after the opening"
    );
    let stats = cached.prefill_stats();
    assert_eq!(
        stats.reused_tokens() as usize,
        per_observation + 2 * opening,
        "{stats:?}"
    );
    assert_eq!(
        plain.prefill_stats().prompt_tokens,
        0,
        "no cache, nothing counted"
    );
}
