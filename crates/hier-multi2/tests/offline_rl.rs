//! System-2 offline RL: the critic learns the TD targets, the policy-anchored term runs and
//! changes the result, and an interrupted run resumes to exactly the uninterrupted result.

use hier_backbone::CausalLm;
use hier_backbone::burn::tensor::Device;
use hier_backbone::weights::{HostTensor, read_safetensors};
use hier_multi2::offline_rl::{OfflineRlConfig, train_offline};
use hier_multi2::roles::RlExample;
use hier_multi2::sys2::{forward_actions, next_state_values};
use hier_rl_losses::Reduction;
use hier_train::RunOptions;
use hier_train::pretrain::TinyModelConfig;
use hier_train::sft::SftExample;

fn tiny(device: &Device) -> CausalLm {
    let cfg = TinyModelConfig {
        vocab_size: 64,
        hidden_size: 16,
        intermediate_size: 32,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        max_position_embeddings: 64,
        rope_theta: 10000.0,
        rms_norm_eps: 1e-5,
        tie_word_embeddings: false,
    };
    CausalLm::random(cfg.model_config().unwrap(), 5, device).unwrap()
}

/// Token 3 ends every target (the stop token). Rows 0/1 complete their subgoal (r = 1, d = 1);
/// rows 2/3 do not and lead on to rows 0/1's states.
fn data() -> Vec<RlExample> {
    let ex = |s: u32, a: u32, r: f32, next: Option<u32>| RlExample {
        pair: SftExample {
            prompt: vec![1, 2, s],
            target: vec![a, a + 1, 3],
        },
        next_prompt: next.map(|n| vec![1, 2, n]),
        reward: r,
        terminal: next.is_none(),
        next_target: None,
        trajectory: 0,
    };
    vec![
        ex(10, 30, 1.0, None),
        ex(11, 33, 1.0, None),
        ex(12, 36, 0.0, Some(10)),
        ex(13, 39, 0.0, Some(11)),
    ]
}

fn config(steps: usize, lambda: f32) -> OfflineRlConfig {
    let mut c = OfflineRlConfig::paper(steps, 4);
    c.lora.r = 4;
    c.lora.alpha = 8.0;
    c.actor_optim.lr = 1e-3;
    c.critic_optim.lr = 3e-3;
    c.lambda = lambda;
    c.sample_max_tokens = 4;
    c.checkpoint_every = 3;
    c.log_every = 1;
    c.seed = 7;
    c
}

fn file(path: &std::path::Path) -> Vec<(String, Vec<f32>)> {
    read_safetensors(path)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.data))
        .collect()
}

#[test]
fn critic_learns_td_targets_and_anchor_term_runs() {
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let (lm, heads, report) = train_offline(
        tiny(&device),
        &data(),
        &config(150, 7.0),
        dir.path(),
        &RunOptions::default(),
    )
    .unwrap();
    assert_eq!(report.steps_done, 150);
    assert!(report.last.td < report.first.td, "{report:?}");
    // Q(o,a) → r + γ(1−d)V̄(o'): ≈1 on the completing rows, ≈0.99·V(o') on the others, and
    // V(o') itself is an expectile of Q̄ on the completing states (≈1).
    let d = data();
    let id = lm.adapter_id("sys2").unwrap();
    let rows: Vec<SftExample> = d.iter().map(|e| e.pair.clone()).collect();
    let fwd = forward_actions(&lm, id, &rows, Reduction::Mean, false).unwrap();
    let q = HostTensor::from_tensor(heads.q.forward(fwd.h_action.clone())).data;
    for (i, &qi) in q.iter().enumerate() {
        assert!(
            (qi - 1.0).abs() < 0.25,
            "Q of row {i} = {qi}, expected ≈ 1 ({q:?})"
        );
    }
    let next: Vec<Option<Vec<u32>>> = d.iter().map(|e| e.next_prompt.clone()).collect();
    let v_next =
        HostTensor::from_tensor(next_state_values(&lm, id, &heads.v_target, &next).unwrap()).data;
    assert_eq!(
        &v_next[..2],
        &[0.0, 0.0],
        "terminal rows have no next value"
    );
    // The policy-anchored term was computed from policy samples every step.
    let metrics = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    let anchors: Vec<f64> = metrics
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["actor_anchor"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(anchors.len(), 150);
    assert!(anchors.iter().any(|a| *a != 0.0));

    // The anchor term moves the update by its weight λ, not by anything else: runs with
    // λ ≠ 0 draw the same policy samples (same seed, same random draws), so λ = 1e-30 and
    // 2e-30 (anchor ≈ 0) end with the same adapter, while λ = 7 ends elsewhere. (Against
    // λ = 0 alone, any difference would pass: that run draws no samples at all.)
    let adapter_after = |lambda: f32| {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(6, lambda);
        train_offline(
            tiny(&device),
            &data(),
            &cfg,
            dir.path(),
            &RunOptions::default(),
        )
        .unwrap();
        let a = file(&dir.path().join("adapter/adapter_model.safetensors"));
        (a, dir)
    };
    let max_diff = |a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)]| {
        a.iter()
            .zip(b)
            .flat_map(|((ka, va), (kb, vb))| {
                assert_eq!(ka, kb);
                va.iter().zip(vb).map(|(x, y)| (x - y).abs())
            })
            .fold(0f32, f32::max)
    };
    let (tiny_a, _) = adapter_after(1e-30);
    let (tiny_b, _) = adapter_after(2e-30);
    let (a7, _) = adapter_after(7.0);
    assert!(max_diff(&tiny_a, &tiny_b) < 1e-6, "λ ≈ 0 runs differ");
    let moved = max_diff(&tiny_a, &a7);
    assert!(moved > 1e-4, "λ = 7 moved the adapter by only {moved}");
    let (_, dir0) = adapter_after(0.0);
    let m0 = std::fs::read_to_string(dir0.path().join("metrics.jsonl")).unwrap();
    assert!(m0.contains("\"actor_anchor\":0.0"));
}

#[test]
fn interrupted_run_resumes_to_the_uninterrupted_result() {
    let device = Device::flex().autodiff();
    let cfg = config(7, 7.0);
    let whole = tempfile::tempdir().unwrap();
    train_offline(
        tiny(&device),
        &data(),
        &cfg,
        whole.path(),
        &RunOptions::default(),
    )
    .unwrap();
    let parts = tempfile::tempdir().unwrap();
    let (_, _, r) = train_offline(
        tiny(&device),
        &data(),
        &cfg,
        parts.path(),
        &RunOptions {
            stop_after: Some(4),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.steps_done, 4);
    assert!(!parts.path().join("adapter").exists());
    let (_, _, r) = train_offline(
        tiny(&device),
        &data(),
        &cfg,
        parts.path(),
        &RunOptions::default(),
    )
    .unwrap();
    assert_eq!((r.resumed_from, r.steps_done), (4, 7));
    for f in ["adapter/adapter_model.safetensors", "heads.safetensors"] {
        assert_eq!(
            file(&whole.path().join(f)),
            file(&parts.path().join(f)),
            "{f}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(whole.path().join("metrics.jsonl")).unwrap(),
        std::fs::read_to_string(parts.path().join("metrics.jsonl")).unwrap()
    );
    // A different config in the same directory is refused, naming the file.
    let mut other = cfg.clone();
    other.lambda = 1.0;
    let err = train_offline(
        tiny(&device),
        &data(),
        &other,
        parts.path(),
        &RunOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("offline_rl.json"), "{err}");
}

#[test]
fn a_non_finite_reward_is_counted_and_stops_the_run_past_its_allowance() {
    let device = Device::flex().autodiff();
    // Every reward is NaN: every TD target is not a number, so the TD loss drops every row
    // (4 a step), while the actor and the value loss, which read no reward, drop nothing.
    let mut d = data();
    for row in &mut d {
        row.reward = f32::NAN;
    }
    let dir = tempfile::tempdir().unwrap();
    let err = train_offline(
        tiny(&device),
        &d,
        &config(4, 0.0),
        dir.path(),
        &RunOptions::default(),
    )
    .unwrap_err();
    match err {
        hier_multi2::Error::Train(hier_train::Error::NonFinite {
            step,
            quantity,
            limit,
            ..
        }) => assert_eq!((step, quantity.as_str(), limit), (1, "td", 0)),
        other => panic!("expected a non-finite stop at step 1, got {other}"),
    }
    assert!(
        !dir.path().join("checkpoint").exists(),
        "the suspect step is not checkpointed"
    );

    // Allowed: the run finishes, and every metric line says how many were dropped.
    let dir = tempfile::tempdir().unwrap();
    let lenient = RunOptions {
        max_nonfinite: u64::MAX,
        ..Default::default()
    };
    train_offline(tiny(&device), &d, &config(4, 0.0), dir.path(), &lenient).unwrap();
    let lines = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(
            v["nonfinite"],
            serde_json::json!({"actor": 0, "td": 4, "value": 0}),
            "{l}"
        );
    }
    assert_eq!(lines.lines().count(), 4);
}
