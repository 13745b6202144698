//! The steering agent's fast path against an independent forward pass, and its gate: τ trades
//! interventions for none without retraining.

use hier_backbone::{Batch, CausalLm, Forward, Tokenizer};
use hier_steering::search_agent::{SearchState, Supervisor};
use hier_steering::steer_agent::{AnswerTokens, SteerConfig, SteeringAgent, fast_prompt, log_odds};
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
