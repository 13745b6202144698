//! System-2 online RL as the released-code ablation runs it: the SARSA critic computes what its
//! equation says, and an online phase configured as the authors' ScienceWorld trainer never
//! draws an offline transition while the paper's configuration does.

mod common;
use common::{textcraft, tiny};

use std::path::Path;

use hier_backbone::Tokenizer;
use hier_backbone::burn::tensor::Tensor;
use hier_backbone::weights::HostTensor;
use hier_multi2::envs::EnvKind;
use hier_multi2::online_rl::{OnlineRlConfig, train_online};
use hier_multi2::roles::RlExample;
use hier_multi2::sys2::{CriticConfig, Heads, forward_actions, sarsa_critic_step};
use hier_multi2::table1::{Profile, online_config};
use hier_rl_losses::{OnlineCritic, Reduction, Variant};
use hier_train::RunOptions;
use hier_train::sft::SftExample;

/// Two trajectories: 0 → 1 (terminal), and 2 alone (terminal).
fn transitions(tok: &Tokenizer) -> Vec<RlExample> {
    let enc = |s: &str| tok.encode(s, false).unwrap();
    let row = |o: &str, a: &str, next: Option<(&str, &str)>, r: f32, traj: u64| RlExample {
        pair: SftExample {
            prompt: enc(o),
            target: enc(a),
        },
        next_prompt: next.map(|(o, _)| enc(o)),
        next_target: next.map(|(_, a)| enc(a)),
        reward: r,
        terminal: next.is_none(),
        trajectory: traj,
    };
    vec![
        row("obs one", "go north", Some(("obs two", "take key")), 0.0, 0),
        row("obs two", "take key", None, 1.0, 0),
        row("obs three", "open door", None, 0.5, 1),
    ]
}

fn host(t: Tensor<1>) -> Vec<f32> {
    HostTensor::from_tensor(t).data
}

#[test]
fn the_sarsa_critic_regresses_on_the_next_action_and_centres_on_the_trajectory() {
    let (lm, tok) = tiny();
    let id = lm.adapter_id("sys2").unwrap();
    let device = lm.device();
    let heads = Heads::seeded(32, 3, &device);
    let rows = transitions(&tok);
    let pairs: Vec<SftExample> = rows.iter().map(|r| r.pair.clone()).collect();
    let fwd = forward_actions(&lm, id, &pairs, Reduction::Mean, false).unwrap();
    let cfg = CriticConfig {
        gamma: 0.9,
        ..CriticConfig::default()
    };
    let step = sarsa_critic_step(&lm, id, &heads, &fwd, &rows, &cfg).unwrap();

    // By hand: Q of every row, Q̄ of row 0's next pair (= row 1's pair), the SARSA target.
    let q = host(heads.q.forward(fwd.h_action.clone()));
    let next = forward_actions(&lm, id, &pairs[1..2], Reduction::Mean, false).unwrap();
    let q_bar_next = host(heads.q_target.forward(next.h_action))[0];
    let targets = [0.0 + 0.9 * q_bar_next, 1.0, 0.5];
    let want: f32 = (0..3).map(|i| (targets[i] - q[i]).powi(2)).sum::<f32>() / 3.0;
    let got = step.td.loss.into_scalar::<f32>();
    assert!(
        (got - want).abs() < 1e-5 * want.max(1.0),
        "td {got} vs {want}"
    );
    // No value head: its loss is exactly 0.
    assert_eq!(step.value.loss.into_scalar::<f32>(), 0.0);
    // A = Q − mean of Q over the row's trajectory: rows 0 and 1 share one, row 2 is alone.
    let m = (q[0] + q[1]) / 2.0;
    let adv = host(step.advantage);
    for (a, w) in adv.iter().zip([q[0] - m, q[1] - m, 0.0]) {
        assert!((a - w).abs() < 1e-6, "{adv:?}");
    }

    // A non-terminal row without its next action cannot be regressed by SARSA.
    let mut broken = rows.clone();
    broken[0].next_target = None;
    let err = sarsa_critic_step(&lm, id, &heads, &fwd, &broken, &cfg).unwrap_err();
    assert!(err.to_string().contains("batch row 0"), "{err}");
}

/// Plays two iterations of online RL on TextCraft under `cfg`; returns the metric lines.
fn play_online(cfg: &OnlineRlConfig) -> Vec<serde_json::Value> {
    let (lm, tok) = tiny();
    let heads = Heads::seeded(32, 3, &lm.device());
    let (mut envs, tasks) = textcraft(cfg.episodes);
    let dir = tempfile::tempdir().unwrap();
    let offline = transitions(&tok);
    train_online(
        lm,
        heads,
        &tok,
        offline,
        &mut envs,
        &tasks,
        cfg,
        dir.path(),
        &RunOptions::default(),
    )
    .unwrap();
    std::fs::read_to_string(dir.path().join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_released_scienceworld_online_phase_draws_no_offline_transition() {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/table1/smoke.toml");
    let mut base = Profile::from_file(&profile).unwrap().online;
    base.updates = 2;
    base.batch_size = 4;
    // Keep every online segment, so the buffer has online data from the first iteration on.
    base.replay.keep_failures = 1.0;

    let released = online_config(&base, Variant::ReleasedCode, EnvKind::Scienceworld);
    let lines = play_online(&released);
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["critic"], "sarsa-trajectory-mean", "{l}");
        assert_eq!(l["drawn_offline"], 0, "{l}");
        assert_eq!(l["replay_offline"], 0, "{l}");
        assert!(l["td"].as_f64().unwrap().is_finite(), "{l}");
        assert_eq!(l["value"], 0.0, "the SARSA critic has no value loss: {l}");
    }
    let online: u64 = lines
        .iter()
        .map(|l| l["drawn_online"].as_u64().unwrap())
        .sum();
    assert_eq!(
        online,
        2 * 2 * 4,
        "every update drew a full batch of online transitions"
    );

    // The paper's configuration mixes the offline data in (the counter can fail).
    let paper = online_config(&base, Variant::Multi2, EnvKind::Scienceworld);
    assert_eq!(paper.critic_form, OnlineCritic::QAndV);
    let lines = play_online(&paper);
    let offline: u64 = lines
        .iter()
        .map(|l| l["drawn_offline"].as_u64().unwrap())
        .sum();
    assert!(offline > 0, "{lines:?}");
    assert!(lines.iter().all(|l| l["critic"] == "q-and-v"));
}
