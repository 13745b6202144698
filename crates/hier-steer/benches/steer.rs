//! Criterion bench of the token-level PPO-clip loss (forward + backward) at a realistic size:
//! 32 sequences × 256 tokens, with the k3 KL to a reference.

use criterion::{Criterion, criterion_group, criterion_main};
use hier_steer::burn::tensor::{Device, Distribution, Tensor};
use hier_steer::{LossNormalisation, PpoConfig, ppo_clip_loss};

fn benches(c: &mut Criterion) {
    let d = Device::flex().autodiff();
    let (b, t) = (32, 256);
    let lp = Tensor::<2>::random([b, t], Distribution::Normal(-2.0, 0.5), &d);
    let old = Tensor::<2>::random([b, t], Distribution::Normal(-2.0, 0.5), &d);
    let reference = Tensor::<2>::random([b, t], Distribution::Normal(-2.0, 0.5), &d);
    let adv = Tensor::<1>::random([b], Distribution::Normal(0.0, 1.0), &d);
    let mask = Tensor::<2>::ones([b, t], &d);
    let cfg = PpoConfig {
        beta: 0.04,
        normalisation: LossNormalisation::Bnpo,
        ..Default::default()
    };
    c.bench_function("ppo-clip + k3, 32x256, forward+backward", |bch| {
        bch.iter(|| {
            let x = lp.clone().require_grad();
            let out = ppo_clip_loss(
                x.clone(),
                old.clone(),
                adv.clone(),
                mask.clone(),
                Some(reference.clone()),
                &cfg,
            )
            .unwrap();
            x.grad(&out.loss.backward()).unwrap().into_data()
        })
    });
}

criterion_group!(steer, benches);
criterion_main!(steer);
