//! Properties of the gate, the state bank, the targets and the parser.

use hier_steer::burn::tensor::{Device, Tensor, TensorData};
use hier_steer::*;

/// Central differences (f32, h = 1e-2) against the autodiff gradient.
fn fd_check(name: &str, x: &[f32], f: impl Fn(Tensor<1>) -> Tensor<1>) {
    let v =
        |x: &[f32], d: &Device| Tensor::<1>::from_data(TensorData::new(x.to_vec(), [x.len()]), d);
    let ad = Device::flex().autodiff();
    let leaf = v(x, &ad).require_grad();
    let grad = leaf
        .grad(&f(leaf.clone()).backward())
        .unwrap()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap();
    let plain = Device::flex();
    for i in 0..x.len() {
        let (mut up, mut down) = (x.to_vec(), x.to_vec());
        up[i] += 1e-2;
        down[i] -= 1e-2;
        let fd = (f(v(&up, &plain)).into_scalar::<f32>()
            - f(v(&down, &plain)).into_scalar::<f32>())
            / 2e-2;
        assert!(
            (fd - grad[i]).abs() <= 2e-2 * (1.0 + fd.abs()),
            "{name}: d/dx[{i}] autodiff {} vs finite difference {fd}",
            grad[i]
        );
    }
}

#[test]
fn finite_difference_gradients() {
    // Ratios kept away from the clip boundaries, where the loss has a kink.
    for normalisation in [
        LossNormalisation::Grpo,
        LossNormalisation::Bnpo,
        LossNormalisation::DrGrpo { max_len: Some(4) },
        LossNormalisation::Dapo {
            global_tokens: Some(5.0),
        },
    ] {
        fd_check(
            "ppo-clip + k3",
            &[-1.0, -1.3, -0.5, -2.0, -0.9, -1.1],
            |lp| {
                let d = lp.device();
                let m = |x: Vec<f32>| {
                    Tensor::<1>::from_data(TensorData::new(x, [6]), &d).reshape([2, 3])
                };
                let cfg = PpoConfig {
                    beta: 0.1,
                    normalisation,
                    ..Default::default()
                };
                let old = m(vec![-1.05, -1.0, -0.8, -2.02, -0.5, -1.12]);
                let reference = m(vec![-1.2, -1.0, -0.7, -1.8, -1.0, -1.0]);
                let mask = m(vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
                let adv = Tensor::<1>::from_data(TensorData::new(vec![0.7f32, -1.2], [2]), &d);
                ppo_clip_loss(lp.reshape([2, 3]), old, adv, mask, Some(reference), &cfg)
                    .unwrap()
                    .loss
            },
        );
    }
    fd_check("ranknet", &[0.3, -1.0, 2.0, 0.5], |z| {
        ranknet_loss(z, &[0.5, 0.1, 0.2, 0.9], &[0, 0, 1, 1])
            .unwrap()
            .loss
    });
    fd_check("trigger probability", &[-3.0, 0.2, 4.0], |z| {
        trigger_probability(z, 0.3).unwrap().sum()
    });
}

#[test]
fn log_odds_are_the_logit_difference_and_trigger_is_monotone_in_tau() {
    let d = Device::flex();
    let logits = Tensor::<2>::from_data(
        TensorData::new(vec![0.0f32, 2.0, -1.0, 5.0, 1.0, 1.0], [2, 3]),
        &d,
    );
    let z = yes_no_log_odds(logits, 1, 2)
        .unwrap()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap();
    assert_eq!(z, vec![3.0, 0.0]);
    let mut last = f64::INFINITY;
    for k in 1..100 {
        let p = trigger_probability_f64(0.7, k as f64 / 100.0).unwrap();
        assert!(p <= last, "trigger probability must fall as tau rises");
        last = p;
    }
    assert!((trigger_probability_f64(0.0, 0.5).unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(trigger_probability_f64(-1e6, 0.5).unwrap(), 0.0);
    assert_eq!(trigger_probability_f64(1e6, 0.5).unwrap(), 1.0);
    assert!(trigger_probability_f64(0.0, 1.0).is_err());
    assert!(yes_no_log_odds(Tensor::zeros([1, 3], &d), 5, 0).is_err());
    let p = priority(Tensor::from_data(
        TensorData::new(vec![-200.0f32, 200.0], [2]),
        &d,
    ))
    .into_data()
    .convert::<f32>()
    .try_to_vec::<f32>()
    .unwrap();
    assert_eq!(p, vec![0.0, 1.0]);
}

#[test]
fn gate_is_seeded_and_respects_its_probability() {
    let draws = |seed| {
        (0..1000)
            .map(|_| ())
            .scan(Gate::new(seed), |g, _| Some(g.decide(0.3)))
            .collect::<Vec<_>>()
    };
    assert_eq!(draws(4), draws(4));
    let rate = draws(4).iter().filter(|&&x| x).count() as f64 / 1000.0;
    assert!((rate - 0.3).abs() < 0.05, "{rate}");
    let mut g = Gate::new(0);
    assert!(!g.decide(0.0) && g.decide(1.0) && !g.decide(f64::NAN));
}

#[test]
fn bank_selects_top_k_without_replacement() {
    let mut bank = StateBank::new();
    for (i, p) in [0.1f32, 0.9, 0.5, 0.9, 0.2].iter().enumerate() {
        bank.push(i, *p).unwrap();
    }
    assert_eq!(bank.select_seeded(3, 0.0, 1).unwrap(), vec![1, 3, 2]);
    let all = bank.select_seeded(10, 0.5, 9).unwrap();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 1, 2, 3, 4], "every state once, none twice");
    assert_eq!(
        bank.select_seeded(3, 0.5, 9).unwrap(),
        bank.select_seeded(3, 0.5, 9).unwrap()
    );
    assert!(bank.push(9, f32::NAN).is_err());
    assert!(bank.select_seeded(1, 1.5, 0).is_err());
}

#[test]
fn q_targets_and_pairs() {
    assert!((q_target(&[0.8, 0.4, 0.0, 1.0], 0.4).unwrap() - 0.35).abs() < 1e-6);
    assert_eq!(
        ranking_pairs(&[0.2, 0.2, 0.5], &[0, 0, 0]).unwrap(),
        vec![(2, 0), (2, 1)]
    );
    let d = Device::flex();
    let out = ranknet_loss(Tensor::zeros([2], &d), &[0.1, 0.1], &[0, 0]).unwrap();
    assert_eq!(out.loss.into_scalar::<f32>(), 0.0);
    // Stable for huge log-odds differences in either direction.
    let z = Tensor::<1>::from_data(TensorData::new(vec![-500.0f32, 500.0], [2]), &d);
    let l = ranknet_loss(z, &[1.0, 0.0], &[0, 0])
        .unwrap()
        .loss
        .into_scalar::<f32>();
    assert!((l - 1000.0).abs() < 1e-2, "{l}");
}

#[test]
fn slow_path_outputs_parse_or_fail_clearly() {
    let p = parse_slow_path(
        "<think>It already found the answer.</think><action>guide: answer now with Paris</action>",
    )
    .unwrap();
    assert_eq!(p.reasoning, "It already found the answer.");
    assert_eq!(
        p.intervention,
        Intervention::Guide("answer now with Paris".into())
    );
    assert_eq!(
        parse_slow_path("<action> PASS </action>")
            .unwrap()
            .intervention,
        Intervention::Pass
    );
    assert_eq!(
        parse_slow_path("<action>reject: the answer ignores the date</action>")
            .unwrap()
            .intervention,
        Intervention::Reject("the answer ignores the date".into())
    );
    assert_eq!(
        parse_slow_path("<think>it has the answer</think><action> Stop </action>")
            .unwrap()
            .intervention,
        Intervention::Stop
    );
    for (bad, why) in [
        ("<think>x</think>", "no <action>"),
        ("<action>guide:</action>", "empty"),
        ("<action>shout: hey</action>", "unknown action"),
        ("<action>pass", "never closed"),
        (
            "<action>pass</action><action>pass</action>",
            "more than one",
        ),
    ] {
        let e = parse_slow_path(bad).unwrap_err().to_string();
        assert!(e.contains(why), "{bad:?}: {e}");
    }
}

#[test]
fn ppo_loss_drops_non_finite_tokens_and_checks_shapes() {
    let d = Device::flex().autodiff();
    let logp =
        Tensor::<2>::from_data(TensorData::new(vec![-1.0f32, f32::NAN], [1, 2]), &d).require_grad();
    let old = Tensor::<2>::from_data(TensorData::new(vec![-1.0f32, -1.0], [1, 2]), &d);
    let out = ppo_clip_loss(
        logp.clone(),
        old.clone(),
        Tensor::ones([1], &d),
        Tensor::ones([1, 2], &d),
        None,
        &PpoConfig::default(),
    )
    .unwrap();
    assert_eq!(out.component("nonfinite"), Some(1.0));
    assert!((out.loss.clone().into_scalar::<f32>() + 1.0).abs() < 1e-6);
    let g = logp
        .grad(&out.loss.backward())
        .unwrap()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap();
    assert!(g.iter().all(|x| x.is_finite()), "{g:?}");
    let e = ppo_clip_loss(
        Tensor::zeros([1, 2], &d),
        old,
        Tensor::ones([2], &d),
        Tensor::ones([1, 2], &d),
        None,
        &PpoConfig::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("advantages"));
}

/// PPO keeps the sampling policy, the advantages and the reference out of the gradient: each
/// is passed as a tensor that requires one and gets none, while `logp` does.
#[test]
fn ppo_targets_are_detached() {
    use hier_steer::burn::tensor::{Device, Tensor, TensorData};
    use hier_steer::grpo::{PpoConfig, ppo_clip_loss};
    let dev = Device::flex().autodiff();
    let leaf =
        |v: Vec<f32>| Tensor::<2>::from_data(TensorData::new(v, [2, 3]), &dev).require_grad();
    let logp = leaf(vec![-1.0, -0.5, -2.0, -0.3, -1.2, -0.8]);
    let old = leaf(vec![-1.1, -0.4, -2.2, -0.2, -1.0, -0.9]);
    let reference = leaf(vec![-0.9, -0.6, -1.8, -0.4, -1.1, -0.7]);
    let adv = Tensor::<1>::from_data(TensorData::new(vec![0.8, -0.5], [2]), &dev).require_grad();
    let mask = Tensor::<2>::ones([2, 3], &dev);
    let cfg = PpoConfig {
        beta: 0.1,
        ..Default::default()
    };
    let out = ppo_clip_loss(
        logp.clone(),
        old.clone(),
        adv.clone(),
        mask,
        Some(reference.clone()),
        &cfg,
    )
    .unwrap();
    let g = out.loss.backward();
    let norm = |t: Tensor<2>| t.abs().sum().into_scalar::<f32>();
    assert!(norm(logp.grad(&g).expect("logp is trained")) > 0.0);
    for (name, t) in [("logp_old", &old), ("logp_ref", &reference)] {
        assert!(
            t.grad(&g).is_none_or(|x| norm(x) == 0.0),
            "{name} received a gradient"
        );
    }
    assert!(
        adv.grad(&g)
            .is_none_or(|x| x.abs().sum().into_scalar::<f32>() == 0.0),
        "the advantages received a gradient"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        failure_persistence: None,
        ..Default::default()
    })]

    /// Model output is outside input: the slow-path parser reads anything without panicking,
    /// and whatever it accepts has an action it names.
    #[test]
    fn the_slow_path_parser_survives_any_model_output(
        text in "(<think>|</think>|<action>|</action>|pass|stop|guide:|reject:|Guide :|[ a-zé\\n:]{0,6}){0,12}"
    ) {
        if let Ok(out) = hier_steer::parse::parse_slow_path(&text) {
            proptest::prop_assert!(text.contains("<action>") && text.contains("</action>"));
            let _ = out.intervention;
        }
    }
}
