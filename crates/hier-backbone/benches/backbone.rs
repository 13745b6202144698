//! Criterion benches on the bench config (docs/PERFORMANCE.md): a forward pass, a LoRA
//! train step (forward, cross-entropy, backward, AdamW on r=16 q/k/v/o adapters), and one
//! KV-cache decode step. Whole-process comparisons with PyTorch and transformers live in
//! `examples/bench.rs` and `benches/peers/`.

use criterion::{Criterion, criterion_group, criterion_main};
use hier_backbone::burn::optim::{AdamWConfig, GradientsParams};
use hier_backbone::burn::tensor::activation::log_softmax;
use hier_backbone::burn::tensor::{Device, Int, Tensor, TensorData};
use hier_backbone::{Batch, CausalLm, Forward, LoraConfig, ModelConfig, TargetModule};

fn rows(b: usize, t: usize) -> Vec<Vec<u32>> {
    (0..b)
        .map(|r| (0..t).map(|i| ((r * 131 + i * 31) % 2048) as u32).collect())
        .collect()
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("bench-config");
    g.sample_size(10);
    let lm = CausalLm::random(ModelConfig::bench(), 0, &Device::flex()).unwrap();
    let batch = Batch::right_padded(&rows(8, 128), 0);
    g.bench_function("forward 8x128", |b| {
        b.iter(|| {
            lm.forward(&batch, Forward::default(), None)
                .unwrap()
                .into_data()
        })
    });

    let device = Device::flex().autodiff();
    let mut train = CausalLm::random(ModelConfig::bench(), 0, &device).unwrap();
    let id = train
        .add_adapter(
            "bench",
            LoraConfig::new(
                16,
                32.0,
                &[
                    TargetModule::Q,
                    TargetModule::K,
                    TargetModule::V,
                    TargetModule::O,
                ],
            ),
            0,
        )
        .unwrap();
    let windows = rows(8, 129);
    let inputs: Vec<Vec<u32>> = windows.iter().map(|w| w[..128].to_vec()).collect();
    let targets: Vec<i64> = windows
        .iter()
        .flat_map(|w| w[1..].iter().map(|&x| x as i64))
        .collect();
    let tb = Batch::right_padded(&inputs, 0);
    let mut optim = AdamWConfig::new().with_weight_decay(0.0).init();
    let mut slot = Some(train);
    g.bench_function("lora train step 8x128", |b| {
        b.iter(|| {
            let lm = slot.take().unwrap();
            let logits = lm
                .forward(
                    &tb,
                    Forward {
                        adapter: Some(id),
                        train: true,
                    },
                    None,
                )
                .unwrap();
            let idx =
                Tensor::<3, Int>::from_data(TensorData::new(targets.clone(), [8, 128, 1]), &device);
            let loss = log_softmax(logits, 2).gather(2, idx).mean().neg();
            let grads = GradientsParams::from_grads(loss.backward(), &lm);
            slot = Some(optim.step(1e-3, lm, grads));
        })
    });

    let prompt = Batch::right_padded(&rows(8, 64), 0);
    let mut cache = lm.new_cache(8);
    lm.forward(&prompt, Forward::default(), Some(&mut cache))
        .unwrap();
    let step = Batch {
        ids: vec![7; 8],
        batch: 8,
        len: 1,
        positions: vec![64; 8],
        valid: vec![true; 8],
    };
    g.bench_function("decode step 8 rows, 64 cached", |b| {
        b.iter(|| {
            let mut c = cache.clone();
            lm.forward(&step, Forward::default(), Some(&mut c))
                .unwrap()
                .into_data()
        })
    });
    g.finish();
}

criterion_group!(backbone, benches);
criterion_main!(backbone);
