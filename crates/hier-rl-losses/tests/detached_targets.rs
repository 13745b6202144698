//! Every loss keeps its targets out of the gradient: each target is passed as a tensor that
//! *requires* a gradient (as a careless caller might pass it), and after `backward` it has none,
//! while the input the loss trains does get one — so a loss that forgot a `detach` fails here,
//! and a check that could not see a gradient at all fails too.

use hier_rl_losses::burn::tensor::{Device, Tensor, TensorData};
use hier_rl_losses::*;

fn dev() -> Device {
    Device::flex().autodiff()
}

fn leaf<const D: usize>(data: Vec<f32>, shape: [usize; D]) -> Tensor<D> {
    Tensor::from_data(TensorData::new(data, shape), &dev()).require_grad()
}

fn ones1(n: usize) -> Tensor<1> {
    Tensor::ones([n], &dev())
}

/// `trained` has a non-zero gradient; each of `targets` has none (or an all-zero one).
fn assert_only_trained<const D: usize>(
    grads: &hier_rl_losses::burn::tensor::Gradients,
    trained: &[(&str, &Tensor<D>)],
    targets: &[(&str, &Tensor<D>)],
) {
    for (name, t) in trained {
        let g = t
            .grad(grads)
            .unwrap_or_else(|| panic!("{name} got no gradient"));
        let norm: f32 = g.abs().sum().into_scalar();
        assert!(norm > 0.0, "{name}'s gradient is zero");
    }
    for (name, t) in targets {
        if let Some(g) = t.grad(grads) {
            let norm: f32 = g.abs().sum().into_scalar();
            assert_eq!(norm, 0.0, "the target {name} received a gradient");
        }
    }
}

#[test]
fn td_and_sarsa_targets_are_detached() {
    for sarsa in [false, true] {
        let q = leaf(vec![0.3, -0.2, 0.5], [3]);
        let next = leaf(vec![1.0, 0.4, -0.7], [3]);
        let reward = leaf(vec![1.0, 0.0, 0.5], [3]);
        let done = Tensor::from_data(TensorData::new(vec![0.0, 1.0, 0.0], [3]), &dev());
        let out = if sarsa {
            sarsa_loss(q.clone(), reward.clone(), done, next.clone(), ones1(3), 0.9)
        } else {
            td_loss(q.clone(), reward.clone(), done, next.clone(), ones1(3), 0.9)
        }
        .unwrap();
        let g = out.loss.backward();
        assert_only_trained(
            &g,
            &[("q", &q)],
            &[("next-state target", &next), ("reward", &reward)],
        );
    }
}

#[test]
fn the_expectile_target_is_detached() {
    let q_target = leaf(vec![0.3, -0.2, 0.5], [3]);
    let v = leaf(vec![0.1, 0.1, 0.1], [3]);
    let out = expectile_loss(q_target.clone(), v.clone(), ones1(3), 0.7).unwrap();
    let g = out.loss.backward();
    assert_only_trained(&g, &[("v", &v)], &[("q_target", &q_target)]);
}

#[test]
fn actor_advantages_are_detached() {
    let logp = leaf(vec![-1.0, -2.0, -0.5], [3]);
    let adv = leaf(vec![0.5, -0.3, 0.2], [3]);
    let logp_pi = leaf(vec![-0.7, -1.5], [2]);
    let adv_pi = leaf(vec![0.4, -0.6], [2]);
    let cfg = OfflineActorConfig {
        lambda: 2.0,
        ..Default::default()
    };
    let out = offline_actor_loss(
        logp.clone(),
        adv.clone(),
        ones1(3),
        Some((logp_pi.clone(), adv_pi.clone(), ones1(2))),
        &cfg,
    )
    .unwrap();
    let g = out.loss.backward();
    assert_only_trained(&g, &[("logp_data", &logp)], &[("adv_data", &adv)]);
    assert_only_trained(&g, &[("logp_policy", &logp_pi)], &[("adv_policy", &adv_pi)]);

    let logp = leaf(vec![-1.0, -2.0, -0.5], [3]);
    let adv = leaf(vec![0.5, -0.3, 0.2], [3]);
    let out = online_actor_loss(
        logp.clone(),
        adv.clone(),
        ones1(3),
        None,
        &OnlineActorConfig::default(),
    )
    .unwrap();
    let g = out.loss.backward();
    assert_only_trained(&g, &[("logp", &logp)], &[("adv", &adv)]);
}

#[test]
fn kl_anchors_keep_the_frozen_policy_out_of_the_gradient() {
    let logits = |seed: f32| {
        leaf(
            (0..2 * 3 * 5)
                .map(|i| ((i as f32 + seed) * 0.37).sin())
                .collect(),
            [2, 3, 5],
        )
    };
    let mask = || Tensor::<2>::ones([2, 3], &dev());
    let logps = |seed: f32| {
        leaf(
            (0..6)
                .map(|i| -0.3 - ((i as f32 + seed) * 0.5).cos().abs())
                .collect(),
            [2, 3],
        )
    };
    let cfg = OnlineActorConfig {
        eta: 1.0,
        ..Default::default()
    };
    let actor = |kl: KlAnchor| {
        online_actor_loss(
            leaf(vec![-1.0, -2.0], [2]),
            Tensor::<1>::zeros([2], &dev()),
            ones1(2),
            Some(kl),
            &cfg,
        )
        .unwrap()
        .loss
        .backward()
    };
    let (on, off) = (logits(0.0), logits(3.0));
    let g = actor(KlAnchor::Exact {
        logits_on: on.clone(),
        logits_off: off.clone(),
        mask: mask(),
    });
    assert_only_trained(&g, &[("logits_on", &on)], &[("logits_off", &off)]);
    for k3 in [false, true] {
        let (on, off) = (logps(0.0), logps(1.0));
        let kl = if k3 {
            KlAnchor::K3 {
                logp_on: on.clone(),
                logp_off: off.clone(),
                mask: mask(),
            }
        } else {
            KlAnchor::K1 {
                logp_on: on.clone(),
                logp_off: off.clone(),
                mask: mask(),
            }
        };
        let g = actor(kl);
        assert_only_trained(&g, &[("logp_on", &on)], &[("logp_off", &off)]);
    }
}
