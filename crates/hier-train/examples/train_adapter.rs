//! Trains a LoRA adapter for a few steps on a model directory and saves it in PEFT format —
//! the Rust side of the PEFT round trip (`crates/hier-backbone/scripts/peft_check.py` is the
//! Python side).
//!
//! `cargo run --release -p hier-train --example train_adapter -- <model dir> <out dir> [steps]`

use hier_backbone::burn::optim::{AdamWConfig, GradientsParams};
use hier_backbone::burn::tensor::Device;
use hier_backbone::{CausalLm, Forward, LoraConfig, ScoreRequest, TargetModule};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model, out) = match (args.get(1), args.get(2)) {
        (Some(m), Some(o)) => (m.clone(), o.clone()),
        _ => return Err("usage: train_adapter <model dir> <out dir> [steps]".into()),
    };
    let steps: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(20);
    let device = Device::flex().autodiff();
    let mut lm = CausalLm::load(std::path::Path::new(&model), &device)?;
    let cfg = LoraConfig::new(
        8,
        16.0,
        &[
            TargetModule::Q,
            TargetModule::K,
            TargetModule::V,
            TargetModule::O,
            TargetModule::Up,
        ],
    );
    let id = lm.add_adapter("trained", cfg, 0)?;
    let vocab = lm.config.vocab_size as u32;
    // Teach the adapter one arbitrary continuation so its weights move well away from init.
    let req = [ScoreRequest {
        prompt: vec![3 % vocab, 7 % vocab, 11 % vocab],
        continuation: vec![5 % vocab, 9 % vocab, 13 % vocab, 2 % vocab],
    }];
    let mut optim = AdamWConfig::new().with_weight_decay(0.0).init();
    for step in 0..steps {
        let out = lm.score(
            &req,
            Forward {
                adapter: Some(id),
                train: true,
            },
        )?;
        let loss = out.logprobs.sum().neg();
        let value = loss.clone().into_scalar::<f32>();
        let grads = GradientsParams::from_grads(loss.backward(), &lm);
        lm = optim.step(1e-2, lm, grads);
        if step % 5 == 0 || step + 1 == steps {
            eprintln!("step {step}: -log p = {value:.4}");
        }
    }
    lm.save_adapter(id, std::path::Path::new(&out), Some(&model))?;
    eprintln!("saved PEFT adapter to {out}");
    Ok(())
}
