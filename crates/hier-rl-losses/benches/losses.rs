//! Criterion benches at realistic sizes: the exact KL anchor over a 32k vocabulary and the
//! sequence-level losses on large batches. `HIER_BENCH_ROWS` (default 32) sets the number of
//! sequences of 256 tokens for the KL bench (32 × 256 × 32000 logits = 1 GiB per tensor).

use criterion::{Criterion, criterion_group, criterion_main};
use hier_rl_losses::burn::tensor::{Device, Distribution, Tensor};
use hier_rl_losses::{
    KlAnchor, OfflineActorConfig, Reduction, action_logprobs, expectile_loss, offline_actor_loss,
    td_loss,
};

fn benches(c: &mut Criterion) {
    let d = Device::flex();
    let rows: usize = std::env::var("HIER_BENCH_ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let (t, v) = (256, 32_000);
    let mut g = c.benchmark_group("losses");
    g.sample_size(10);
    let on = Tensor::<3>::random([rows, t, v], Distribution::Normal(0.0, 1.0), &d);
    let off = Tensor::<3>::random([rows, t, v], Distribution::Normal(0.0, 1.0), &d);
    let mask = Tensor::<2>::ones([rows, t], &d);
    g.bench_function(format!("exact KL {rows}x{t}x{v}"), |b| {
        b.iter(|| {
            KlAnchor::Exact {
                logits_on: on.clone(),
                logits_off: off.clone(),
                mask: mask.clone(),
            }
            .value()
            .unwrap()
            .0
            .into_scalar::<f32>()
        })
    });
    let lp = Tensor::<2>::random([4096, 256], Distribution::Normal(-2.0, 1.0), &d);
    let m = Tensor::<2>::ones([4096, 256], &d);
    g.bench_function("action logprobs 4096x256", |b| {
        b.iter(|| {
            action_logprobs(lp.clone(), m.clone(), Reduction::Mean)
                .unwrap()
                .0
                .into_data()
        })
    });
    let n = 65_536;
    let x = || Tensor::<1>::random([n], Distribution::Normal(0.0, 1.0), &d);
    let (q, r, done, vn, ones) = (
        x(),
        x(),
        Tensor::<1>::zeros([n], &d),
        x(),
        Tensor::<1>::ones([n], &d),
    );
    g.bench_function("td + expectile + offline actor, 65536 transitions", |b| {
        b.iter(|| {
            let a = td_loss(
                q.clone(),
                r.clone(),
                done.clone(),
                vn.clone(),
                ones.clone(),
                0.99,
            )
            .unwrap()
            .loss;
            let e = expectile_loss(q.clone(), vn.clone(), ones.clone(), 0.7)
                .unwrap()
                .loss;
            let o = offline_actor_loss(
                r.clone(),
                q.clone(),
                ones.clone(),
                Some((r.clone(), q.clone(), ones.clone())),
                &OfflineActorConfig::default(),
            )
            .unwrap()
            .loss;
            (a + e + o).into_scalar::<f32>()
        })
    });
    g.finish();
}

criterion_group!(losses, benches);
criterion_main!(losses);
