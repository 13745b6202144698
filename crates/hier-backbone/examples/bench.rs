//! Whole-process benchmark on the bench config of `docs/PERFORMANCE.md`, printing one JSON line
//! in the same shape as the Python peers (`benches/peers/hf_peft.py`, the shared `torch_ref.py`).
//!
//! `cargo run --release -p hier-backbone --example bench -- <train-lora|train-full|gen-kv|gen-nocache> [--steps N] [--runs N]`

use std::time::Instant;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::optim::{AdamWConfig, GradientsParams};
use hier_backbone::burn::tensor::activation::log_softmax;
use hier_backbone::burn::tensor::{Device, Int, Tensor, TensorData};
use hier_backbone::{
    Batch, CausalLm, Forward, GenerationRequest, LoraConfig, ModelConfig, SamplingConfig,
    TargetModule,
};

const B: usize = 8;
const T: usize = 128;
const P: usize = 16;

/// Peak resident set size of this process, from /proc (Linux).
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn lcg(state: &mut u64) -> u32 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 33) % 2048) as u32
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_else(|| "train-lora".into());
    let flag = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(default)
    };
    let (steps, runs) = (flag("--steps", 10), flag("--runs", 3));
    let mut seed = 1234u64;
    match mode.as_str() {
        "train-lora" | "train-full" => {
            let device = Device::flex().autodiff();
            let mut lm = CausalLm::random(ModelConfig::bench(), 42, &device).expect("model");
            let adapter = if mode == "train-lora" {
                Some(
                    lm.add_adapter(
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
                    .expect("adapter"),
                )
            } else {
                lm = lm.set_require_grad(true);
                None
            };
            let mut optim = AdamWConfig::new()
                .with_weight_decay(0.01)
                .with_epsilon(1e-5)
                .init();
            let data: Vec<Vec<Vec<u32>>> = (0..4)
                .map(|_| {
                    (0..B)
                        .map(|_| (0..=T).map(|_| lcg(&mut seed)).collect())
                        .collect()
                })
                .collect();
            let mut times = vec![];
            for s in 0..3 + steps {
                let t0 = Instant::now();
                let batch = &data[s % 4];
                let inputs: Vec<Vec<u32>> = batch.iter().map(|w| w[..T].to_vec()).collect();
                let targets: Vec<i64> = batch
                    .iter()
                    .flat_map(|w| w[1..].iter().map(|&x| x as i64))
                    .collect();
                let logits = lm
                    .forward(
                        &Batch::right_padded(&inputs, 0),
                        Forward {
                            adapter,
                            train: true,
                        },
                        None,
                    )
                    .expect("forward");
                let idx = Tensor::<3, Int>::from_data(TensorData::new(targets, [B, T, 1]), &device);
                let loss = log_softmax(logits, 2).gather(2, idx).mean().neg();
                let grads = GradientsParams::from_grads(loss.backward(), &lm);
                lm = optim.step(1e-3, lm, grads);
                let _ = loss.into_scalar::<f32>();
                if s >= 3 {
                    times.push(t0.elapsed().as_secs_f64());
                }
            }
            let med = median(times);
            println!(
                "{}",
                serde_json::json!({"fw": "hier", "mode": mode, "median_s": med, "tokens_per_s": (B * T) as f64 / med, "peak_rss_mb": peak_rss_mb()})
            );
        }
        "gen-kv" | "gen-nocache" => {
            let device = Device::flex();
            let lm = CausalLm::random(ModelConfig::bench(), 42, &device).expect("model");
            let reqs: Vec<GenerationRequest> = (0..B)
                .map(|_| GenerationRequest {
                    prompt: (0..P).map(|_| lcg(&mut seed)).collect(),
                    ..Default::default()
                })
                .collect();
            let mut cfg = SamplingConfig::greedy(T - P);
            cfg.use_cache = mode == "gen-kv";
            let mut times = vec![];
            for r in 0..=runs {
                let t0 = Instant::now();
                let out = lm.generate(&reqs, &cfg, None, None).expect("generate");
                assert!(out.iter().all(|g| g.tokens.len() == T - P));
                if r > 0 {
                    times.push(t0.elapsed().as_secs_f64());
                }
            }
            let med = median(times);
            println!(
                "{}",
                serde_json::json!({"fw": "hier", "mode": mode, "median_s": med, "tokens_per_s": (B * (T - P)) as f64 / med, "peak_rss_mb": peak_rss_mb()})
            );
        }
        other => {
            eprintln!(
                "unknown mode {other}: expected train-lora, train-full, gen-kv or gen-nocache"
            );
            std::process::exit(2);
        }
    }
}
