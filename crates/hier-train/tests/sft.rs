//! LoRA fine-tuning learns a mapping, leaves the base untouched, and resumes after an
//! interruption to exactly the adapter of an uninterrupted run.

use std::path::Path;

use hier_backbone::burn::module::Param;
use hier_backbone::burn::tensor::Device;
use hier_backbone::weights::read_safetensors;
use hier_backbone::{Batch, CausalLm, Forward, LoraConfig, TargetModule};
use hier_train::RunOptions;
use hier_train::optim::OptimConfig;
use hier_train::pretrain::TinyModelConfig;
use hier_train::sft::{SftConfig, SftExample, train_adapter};

fn tiny(device: &Device) -> CausalLm {
    let cfg = TinyModelConfig {
        vocab_size: 96,
        hidden_size: 32,
        intermediate_size: 64,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        max_position_embeddings: 64,
        rope_theta: 10000.0,
        rms_norm_eps: 1e-5,
        tie_word_embeddings: false,
    };
    let mut lm = CausalLm::random(cfg.model_config().unwrap(), 11, device).unwrap();
    // A random output layer gives near-uniform logits that no adapter inside the network can
    // sharpen (the final RMSNorm fixes the hidden scale); scale it up like a trained one's.
    let head = lm.lm_head.take().unwrap();
    lm.lm_head = Some(Param::initialized(head.id, head.val() * 30.0).set_require_grad(false));
    lm
}

fn config(steps: usize) -> SftConfig {
    SftConfig {
        adapter: "sys1".into(),
        lora: LoraConfig::new(
            8,
            16.0,
            &[
                TargetModule::Q,
                TargetModule::K,
                TargetModule::V,
                TargetModule::O,
                TargetModule::Up,
                TargetModule::Down,
            ],
        ),
        steps,
        batch_size: 8,
        optim: OptimConfig {
            lr: 2e-2,
            min_lr: Some(2e-3),
            warmup_steps: 2,
            weight_decay: 0.0,
            grad_clip: Some(1.0),
        },
        seed: 3,
        checkpoint_every: 3,
        log_every: 1,
    }
}

/// "Subgoal" k for "state" k: a mapping the random base does not know.
fn examples() -> Vec<SftExample> {
    (0..8)
        .map(|k| SftExample {
            prompt: vec![5, 6, 7, 10 + k],
            target: vec![50 + k, 60 + (k * 3) % 8],
        })
        .collect()
}

fn base_logits(lm: &CausalLm) -> Vec<f32> {
    lm.forward(&Batch::single(&[5, 6, 7, 12]), Forward::with(None), None)
        .unwrap()
        .into_data()
        .try_to_vec::<f32>()
        .unwrap()
}

#[test]
fn learns_the_targets_and_leaves_the_base_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let device = Device::flex().autodiff();
    let lm = tiny(&device);
    let before = base_logits(&lm);
    let (lm, report) = train_adapter(
        lm,
        &examples(),
        &config(40),
        tmp.path(),
        &RunOptions::default(),
    )
    .unwrap();
    assert_eq!(report.steps_done, 40);
    assert!(
        report.last_loss < 0.3 * report.first_loss,
        "{}",
        std::fs::read_to_string(tmp.path().join("metrics.jsonl")).unwrap()
    );
    assert!(
        report.last_loss < 0.3 * report.first_loss,
        "loss {} → {}",
        report.first_loss,
        report.last_loss
    );
    assert_eq!(base_logits(&lm), before, "the base weights moved");
    assert!(
        tmp.path()
            .join("adapter/adapter_model.safetensors")
            .exists()
    );
    let lines = std::fs::read_to_string(tmp.path().join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 40);
}

fn adapter(dir: &Path) -> Vec<(String, Vec<f32>)> {
    read_safetensors(&dir.join("adapter/adapter_model.safetensors"))
        .unwrap()
        .into_iter()
        .map(|(k, t)| (k, t.data))
        .collect()
}

#[test]
fn interrupted_run_resumes_to_the_same_adapter() {
    let tmp = tempfile::tempdir().unwrap();
    let device = Device::flex().autodiff();
    let full = tmp.path().join("full");
    train_adapter(
        tiny(&device),
        &examples(),
        &config(8),
        &full,
        &RunOptions::default(),
    )
    .unwrap();
    let cut = tmp.path().join("cut");
    let stop = RunOptions {
        stop_after: Some(4),
        ..Default::default()
    };
    let (_, r) = train_adapter(tiny(&device), &examples(), &config(8), &cut, &stop).unwrap();
    assert_eq!(r.steps_done, 4);
    assert!(
        !cut.join("adapter").exists(),
        "no final adapter before the end"
    );
    let (_, r) = train_adapter(
        tiny(&device),
        &examples(),
        &config(8),
        &cut,
        &RunOptions::default(),
    )
    .unwrap();
    assert_eq!((r.resumed_from, r.steps_done), (4, 8));
    let (a, b) = (adapter(&full), adapter(&cut));
    assert_eq!(a.len(), b.len());
    for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
        assert_eq!(ka, kb);
        let diff = va
            .iter()
            .zip(vb)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(diff <= 1e-6, "{ka}: max difference {diff}");
    }
    let lines = std::fs::read_to_string(cut.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 8);

    // Another config in the same directory is refused; a bad module name is named.
    let mut other = config(8);
    other.seed = 4;
    let err = train_adapter(
        tiny(&device),
        &examples(),
        &other,
        &cut,
        &RunOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("different config"), "{err}");
    // A misspelt module is refused where the config is read, by name.
    let mut json = serde_json::to_value(config(8)).unwrap();
    json["lora"]["target_modules"] = serde_json::json!(["q_proj", "qq_proj"]);
    let err = serde_json::from_value::<SftConfig>(json)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`qq_proj`") && err.contains("down_proj"),
        "{err}"
    );
    // So is an adapter that adapts nothing.
    let mut bad = config(8);
    bad.lora.target_modules.clear();
    let err = train_adapter(
        tiny(&device),
        &examples(),
        &bad,
        &tmp.path().join("bad"),
        &RunOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("target_modules is empty"), "{err}");
}
