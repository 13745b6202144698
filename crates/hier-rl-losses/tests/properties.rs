//! Finite-difference gradient checks, properties of the objectives, the non-finite policy and
//! the named variants.

use hier_rl_losses::burn::module::Module;
use hier_rl_losses::burn::nn::{Linear, LinearConfig};
use hier_rl_losses::burn::tensor::{Device, Tensor, TensorData};
use hier_rl_losses::*;

fn v1(x: &[f32], d: &Device) -> Tensor<1> {
    Tensor::from_data(TensorData::new(x.to_vec(), [x.len()]), d)
}

fn host<const D: usize>(x: Tensor<D>) -> Vec<f32> {
    x.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

/// Central differences of `f` at `x` against the autodiff gradient, in f32 with h = 1e-2.
fn fd_check(name: &str, x: &[f32], f: impl Fn(Tensor<1>) -> Tensor<1>) {
    let ad = Device::flex().autodiff();
    let leaf = v1(x, &ad).require_grad();
    let g = f(leaf.clone()).backward();
    let grad = host(leaf.grad(&g).unwrap());
    let plain = Device::flex();
    let h = 1e-2f32;
    for i in 0..x.len() {
        let mut up = x.to_vec();
        up[i] += h;
        let mut down = x.to_vec();
        down[i] -= h;
        let fd = (f(v1(&up, &plain)).into_scalar::<f32>()
            - f(v1(&down, &plain)).into_scalar::<f32>())
            / (2.0 * h);
        assert!(
            (fd - grad[i]).abs() <= 2e-2 * (1.0 + fd.abs()),
            "{name}: d/dx[{i}] autodiff {} vs finite difference {fd}",
            grad[i]
        );
    }
}

#[test]
fn finite_difference_gradients() {
    let q = [0.3f32, -1.2, 0.8, 0.1, 2.0];
    fd_check("td", &q, |q| {
        let d = q.device();
        td_loss(
            q,
            v1(&[1.0, 0.0, 0.5, 0.0, 1.0], &d),
            v1(&[0.0, 1.0, 0.0, 0.0, 1.0], &d),
            v1(&[0.2, 0.4, -0.3, 1.0, 0.0], &d),
            v1(&[1.0; 5], &d),
            0.9,
        )
        .unwrap()
        .loss
    });
    fd_check("expectile", &q, |v| {
        let d = v.device();
        expectile_loss(
            v1(&[1.0, -1.0, 0.0, 0.5, 1.5], &d),
            v,
            v1(&[1.0; 5], &d),
            0.7,
        )
        .unwrap()
        .loss
    });
    fd_check(
        "offline actor (data term)",
        &[-1.0, -2.0, -0.5, -3.0],
        |lp| {
            let d = lp.device();
            let cfg = OfflineActorConfig {
                normalise: true,
                ..Default::default()
            };
            offline_actor_loss(
                lp,
                v1(&[0.1, -0.2, 0.4, 0.0], &d),
                v1(&[1.0; 4], &d),
                None,
                &cfg,
            )
            .unwrap()
            .loss
        },
    );
    fd_check(
        "offline actor (anchor term)",
        &[-1.0, -2.0, -0.5],
        |lp_pi| {
            let d = lp_pi.device();
            let pi = Some((lp_pi, v1(&[0.3, -0.6, 0.2], &d), v1(&[1.0; 3], &d)));
            offline_actor_loss(
                v1(&[-1.0, -1.0], &d),
                v1(&[0.0, 0.1], &d),
                v1(&[1.0; 2], &d),
                pi,
                &OfflineActorConfig::default(),
            )
            .unwrap()
            .loss
        },
    );
    fd_check("exact kl", &[0.5, -1.0, 2.0, 0.0, 0.3, -0.7], |on| {
        let d = on.device();
        let on = on.reshape([1, 2, 3]);
        let off = Tensor::<1>::from_data(
            TensorData::new(vec![0.1f32, 0.2, 0.3, -0.5, 0.0, 0.5], [6]),
            &d,
        )
        .reshape([1, 2, 3]);
        KlAnchor::Exact {
            logits_on: on,
            logits_off: off,
            mask: Tensor::ones([1, 2], &d),
        }
        .value()
        .unwrap()
        .0
    });
    fd_check(
        "online actor with exact KL",
        &[0.5, -1.0, 2.0, 0.0, 0.3, -0.7],
        |on| {
            let d = on.device();
            let off = Tensor::<1>::from_data(
                TensorData::new(vec![0.1f32, 0.2, 0.3, -0.5, 0.0, 0.5], [6]),
                &d,
            )
            .reshape([1, 2, 3]);
            let logp = hier_rl_losses::burn::tensor::activation::log_softmax(
                on.clone().reshape([1, 2, 3]),
                2,
            )
            .slice([0..1, 1..2, 0..1])
            .reshape([1]);
            let kl = KlAnchor::Exact {
                logits_on: on.reshape([1, 2, 3]),
                logits_off: off,
                mask: Tensor::ones([1, 2], &d),
            };
            let cfg = OnlineActorConfig {
                eta: 0.5,
                ..Default::default()
            };
            online_actor_loss(logp, v1(&[0.4], &d), v1(&[1.0], &d), Some(kl), &cfg)
                .unwrap()
                .loss
        },
    );
    fd_check("k1", &[-1.0, -0.2, -2.5], |on| {
        let d = on.device();
        let off = v1(&[-1.5, -0.1, -2.0], &d).reshape([1, 3]);
        KlAnchor::K1 {
            logp_on: on.reshape([1, 3]),
            logp_off: off,
            mask: Tensor::ones([1, 3], &d),
        }
        .value()
        .unwrap()
        .0
    });
    fd_check("k3", &[-1.0, -0.2, -2.5], |on| {
        let d = on.device();
        let off = v1(&[-1.5, -0.1, -2.0], &d).reshape([1, 3]);
        KlAnchor::K3 {
            logp_on: on.reshape([1, 3]),
            logp_off: off,
            mask: Tensor::ones([1, 3], &d),
        }
        .value()
        .unwrap()
        .0
    });
}

#[test]
fn exact_kl_is_nonnegative_and_zero_for_identical_policies() {
    let d = Device::flex();
    let mut seed = 7u64;
    let mut rnd = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 6.0
    };
    for _ in 0..20 {
        let a: Vec<f32> = (0..2 * 3 * 11).map(|_| rnd()).collect();
        let b: Vec<f32> = (0..2 * 3 * 11).map(|_| rnd()).collect();
        let on = Tensor::<1>::from_data(TensorData::new(a.clone(), [66]), &d).reshape([2, 3, 11]);
        let off = Tensor::<1>::from_data(TensorData::new(b, [66]), &d).reshape([2, 3, 11]);
        let per = host(exact_kl_per_token(on.clone(), off));
        assert!(per.iter().all(|&k| k >= -1e-6), "{per:?}");
        let same = host(exact_kl_per_token(on.clone(), on));
        assert!(same.iter().all(|&k| k.abs() < 1e-6), "{same:?}");
    }
}

#[test]
fn anchor_gradient_raises_positive_advantage_samples() {
    let d = Device::flex().autodiff();
    let lp_pi = v1(&[-2.0, -2.0, -2.0], &d).require_grad();
    let adv = v1(&[0.5, -0.5, 0.0], &d);
    let out = offline_actor_loss(
        v1(&[-1.0], &d),
        v1(&[0.0], &d),
        v1(&[1.0], &d),
        Some((lp_pi.clone(), adv, v1(&[1.0; 3], &d))),
        &OfflineActorConfig::default(),
    )
    .unwrap();
    let g = host(lp_pi.grad(&out.loss.backward()).unwrap());
    // Gradient descent moves log π against the gradient: up for A > 0, down for A < 0.
    assert!(g[0] < 0.0 && g[1] > 0.0 && g[2] == 0.0, "{g:?}");
    // λ = 0 (vanilla-iql) removes the term's gradient.
    let lp_pi = v1(&[-2.0, -2.0, -2.0], &d).require_grad();
    let cfg = Variant::VanillaIql.objectives().offline;
    let out = offline_actor_loss(
        v1(&[-1.0], &d),
        v1(&[0.0], &d),
        v1(&[1.0], &d),
        Some((lp_pi.clone(), v1(&[0.5, -0.5, 0.0], &d), v1(&[1.0; 3], &d))),
        &cfg,
    )
    .unwrap();
    assert!(
        host(lp_pi.grad(&out.loss.backward()).unwrap())
            .iter()
            .all(|&x| x == 0.0)
    );
}

/// `∂L/∂log π(a'_i) = −λ·m_i·(A_i − b_i) / Σm` with `b_i` the mean of the other samples'
/// advantages, computed by hand for each case.
#[test]
fn leave_one_out_baseline_centres_the_anchor_estimator() {
    let d = Device::flex().autodiff();
    let cfg = OfflineActorConfig {
        anchor_baseline: AnchorBaseline::LeaveOneOut,
        ..Default::default()
    };
    let grad = |adv: &[f32], mask: &[f32]| {
        let lp_pi = v1(&vec![-2.0; adv.len()], &d).require_grad();
        let out = offline_actor_loss(
            v1(&[-1.0], &d),
            v1(&[0.0], &d),
            v1(&[1.0], &d),
            Some((lp_pi.clone(), v1(adv, &d), v1(mask, &d))),
            &cfg,
        )
        .unwrap();
        host(lp_pi.grad(&out.loss.backward()).unwrap())
    };
    let close = |got: Vec<f32>, want: &[f32]| {
        assert!(
            got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-5),
            "{got:?} != {want:?}"
        );
    };
    // b = [−0.4, 0.1, 0.0]: A − b = [0.9, −0.6, −0.3]; × −7/3.
    close(grad(&[0.5, -0.5, -0.3], &[1.0; 3]), &[-2.1, 1.4, 0.7]);
    // All advantages negative (the critic's view of the policy's own samples): the plain
    // estimator pushes every sample down, the baseline raises the best and lowers the worst.
    // b = [−0.95, −0.9, −0.85]: A − b = [0.15, 0, −0.15].
    close(grad(&[-0.8, -0.9, -1.0], &[1.0; 3]), &[-0.35, 0.0, 0.35]);
    // A masked-out sample neither gets a gradient nor enters the others' baseline:
    // b = [−0.5, 0.5]: A − b = [1, −1]; × −7/2.
    close(grad(&[0.5, -0.5, 9.0], &[1.0, 1.0, 0.0]), &[-3.5, 3.5, 0.0]);
    // A non-finite advantage is dropped the same way.
    close(grad(&[0.5, -0.5, f32::NAN], &[1.0; 3]), &[-3.5, 3.5, 0.0]);
    // One sample: no others, b = 0, the plain estimator's −λ·A.
    close(grad(&[-0.5], &[1.0]), &[3.5]);
    // The default is the plain estimator: −7/3·A.
    let lp_pi = v1(&[-2.0; 3], &d).require_grad();
    let out = offline_actor_loss(
        v1(&[-1.0], &d),
        v1(&[0.0], &d),
        v1(&[1.0], &d),
        Some((
            lp_pi.clone(),
            v1(&[-0.3, -0.6, -0.9], &d),
            v1(&[1.0; 3], &d),
        )),
        &OfflineActorConfig::default(),
    )
    .unwrap();
    close(
        host(lp_pi.grad(&out.loss.backward()).unwrap()),
        &[0.7, 1.4, 2.1],
    );
}

#[test]
fn expectile_weights_asymmetrically() {
    let d = Device::flex();
    // u = q − v: +1 weighs τ, −1 weighs 1 − τ.
    let up = expectile_loss(v1(&[1.0], &d), v1(&[0.0], &d), v1(&[1.0], &d), 0.7)
        .unwrap()
        .loss
        .into_scalar::<f32>();
    let down = expectile_loss(v1(&[0.0], &d), v1(&[1.0], &d), v1(&[1.0], &d), 0.7)
        .unwrap()
        .loss
        .into_scalar::<f32>();
    assert!(
        (up - 0.7).abs() < 1e-6 && (down - 0.3).abs() < 1e-6,
        "{up} {down}"
    );
    assert!(expectile_loss(v1(&[0.0], &d), v1(&[0.0], &d), v1(&[1.0], &d), 1.0).is_err());
}

#[test]
fn non_finite_inputs_are_dropped_and_counted() {
    let d = Device::flex().autodiff();
    let q = v1(&[1.0, f32::NAN, 0.5], &d).require_grad();
    let out = td_loss(
        q.clone(),
        v1(&[1.0, 1.0, f32::INFINITY], &d),
        v1(&[1.0; 3], &d),
        v1(&[0.0; 3], &d),
        v1(&[1.0; 3], &d),
        0.99,
    )
    .unwrap();
    let loss = out.loss.clone().into_scalar::<f32>();
    assert_eq!(out.component("nonfinite"), Some(2.0));
    assert!(
        (loss - 0.0).abs() < 1e-7,
        "only the first row remains: (1 − 1)² = 0, got {loss}"
    );
    let g = host(q.grad(&out.loss.backward()).unwrap());
    assert!(g.iter().all(|x| x.is_finite()), "{g:?}");
    // Everything dropped: loss 0, not NaN.
    let out = expectile_loss(v1(&[f32::NAN], &d), v1(&[0.0], &d), v1(&[1.0], &d), 0.7).unwrap();
    assert_eq!(out.loss.into_scalar::<f32>(), 0.0);
}

#[test]
fn action_logprob_reductions_and_gather() {
    let d = Device::flex();
    let lp = Tensor::<1>::from_data(
        TensorData::new(vec![-1.0f32, -2.0, -3.0, -4.0, -5.0, -6.0], [6]),
        &d,
    )
    .reshape([2, 3]);
    let m = Tensor::<1>::from_data(
        TensorData::new(vec![1.0f32, 1.0, 0.0, 0.0, 0.0, 0.0], [6]),
        &d,
    )
    .reshape([2, 3]);
    let (mean, _) = action_logprobs(lp.clone(), m.clone(), Reduction::Mean).unwrap();
    let (sum, _) = action_logprobs(lp.clone(), m, Reduction::Sum).unwrap();
    assert_eq!(host(mean), vec![-1.5, 0.0]);
    assert_eq!(host(sum), vec![-3.0, 0.0]);
    let e = action_logprobs(lp.clone(), Tensor::ones([2, 2], &d), Reduction::Mean)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mask") && e.contains("[2, 3]"), "{e}");
    let x = lp.reshape([2, 3, 1]);
    assert_eq!(host(gather_at(x, &[2, 0]).unwrap()), vec![-3.0, -4.0]);
    assert_eq!(
        action::last_positions(&[vec![0.0, 1.0, 1.0, 0.0]]).unwrap(),
        vec![2]
    );
}

#[test]
fn polyak_moves_targets_by_rate() {
    let d = Device::flex();
    let source: Linear = LinearConfig::new(3, 2).init(&d);
    let target: Linear = LinearConfig::new(3, 2).init(&d);
    let (s, t0) = (host(source.weight.val()), host(target.weight.val()));
    let t1 = polyak_update(target, &source, 0.2).unwrap();
    let t1w = host(t1.weight.val());
    for i in 0..s.len() {
        assert!((t1w[i] - (0.8 * t0[i] + 0.2 * s[i])).abs() < 1e-6);
    }
    let other: Linear = LinearConfig::new(4, 2).init(&d);
    assert!(
        polyak_update(other, &source, 0.2)
            .unwrap_err()
            .to_string()
            .contains("shape")
    );
    assert_eq!(t1.num_params(), source.num_params());
}

#[test]
fn variants_have_their_documented_settings() {
    let p = Variant::Multi2.objectives();
    assert_eq!(
        (p.tau, p.offline.lambda, p.online.eta, p.kl),
        (0.7, 7.0, 0.02, KlKind::Exact)
    );
    assert_eq!(Variant::VanillaIql.objectives().offline.lambda, 0.0);
    assert_eq!(Variant::VanillaAwac.objectives().online.eta, 0.0);
    let r = Variant::ReleasedCode.objectives();
    assert_eq!(
        (r.tau, r.offline.lambda, r.online_critic),
        (0.5, 0.0, OnlineCritic::SarsaTrajectoryMean)
    );
    for v in [
        Variant::Multi2,
        Variant::VanillaIql,
        Variant::VanillaAwac,
        Variant::ReleasedCode,
    ] {
        assert_eq!(Variant::parse(v.name()), Some(v));
    }
    let d = Device::flex();
    let a = trajectory_mean_advantage(v1(&[1.0, 3.0, 5.0], &d), &[0, 0, 1]).unwrap();
    assert_eq!(host(a), vec![-1.0, 1.0, 0.0]);
}

#[test]
fn a_variant_changes_only_what_defines_it() {
    // A run's own Multi² settings (scaled down, as a profile would): every variant keeps what
    // it does not name.
    let mut base = Variant::Multi2.objectives();
    base.tau = 0.6;
    base.gamma = 0.9;
    base.offline.lambda = 3.0;
    base.offline.beta = 2.0;
    base.online.eta = 0.05;
    base.polyak = 0.1;
    assert_eq!(Variant::Multi2.apply(base), base);
    let iql = Variant::VanillaIql.apply(base);
    assert_eq!(iql.offline.lambda, 0.0);
    assert_eq!(
        (iql.tau, iql.offline.beta, iql.online),
        (0.6, 2.0, base.online)
    );
    let awac = Variant::VanillaAwac.apply(base);
    assert_eq!(
        (awac.online.eta, awac.offline, awac.tau),
        (0.0, base.offline, 0.6)
    );
    let released = Variant::ReleasedCode.apply(base);
    assert_eq!(
        (
            released.tau,
            released.offline.lambda,
            released.kl,
            released.online_critic
        ),
        (0.5, 0.0, KlKind::K1, OnlineCritic::SarsaTrajectoryMean)
    );
    assert_eq!(
        (
            released.gamma,
            released.polyak,
            released.offline.beta,
            released.online.eta
        ),
        (0.9, 0.1, 2.0, 0.05)
    );
}
