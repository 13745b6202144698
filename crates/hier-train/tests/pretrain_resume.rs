//! Pre-training learns, writes a loadable HF directory, and resumes after an interruption to
//! exactly the weights of an uninterrupted run.

use std::path::{Path, PathBuf};

use hier_backbone::burn::tensor::Device;
use hier_backbone::weights::read_safetensors;
use hier_backbone::{Batch, CausalLm, Forward, Tokenizer};
use hier_train::RunOptions;
use hier_train::optim::OptimConfig;
use hier_train::pretrain::{PretrainConfig, TinyModelConfig, TrainConfig, pretrain};

fn config(steps: usize) -> PretrainConfig {
    PretrainConfig {
        model: TinyModelConfig::for_tests(300, 64),
        train: TrainConfig {
            seq_len: 16,
            batch_size: 4,
            steps,
            optim: OptimConfig {
                lr: 3e-3,
                min_lr: Some(3e-4),
                warmup_steps: 2,
                weight_decay: 0.01,
                grad_clip: Some(1.0),
            },
            seed: 5,
            checkpoint_every: 2,
            log_every: 1,
        },
    }
}

fn corpus(dir: &Path) -> Vec<PathBuf> {
    let text: String = (0..60)
        .map(|i| {
            format!(
                "> craft {} oak planks using {} oak logs\nCrafted {} minecraft:oak_planks\n\n",
                i % 7,
                i % 3 + 1,
                i % 7
            )
        })
        .collect();
    let p = dir.join("corpus.txt");
    std::fs::write(&p, text).unwrap();
    vec![p]
}

#[test]
fn interrupted_run_resumes_to_identical_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus(tmp.path());
    let device = Device::flex().autodiff();
    let full = tmp.path().join("full");
    let r = pretrain(&config(6), &files, &full, &device, &RunOptions::default()).unwrap();
    assert_eq!((r.steps_done, r.resumed_from), (6, 0));

    let cut = tmp.path().join("cut");
    let r = pretrain(
        &config(6),
        &files,
        &cut,
        &device,
        &RunOptions {
            stop_after: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.steps_done, 3);
    assert!(
        !cut.join("model.safetensors").exists(),
        "an unfinished run must not publish a model"
    );
    let r = pretrain(&config(6), &files, &cut, &device, &RunOptions::default()).unwrap();
    assert_eq!((r.steps_done, r.resumed_from), (6, 3));

    let a = read_safetensors(&full.join("model.safetensors")).unwrap();
    let b = read_safetensors(&cut.join("model.safetensors")).unwrap();
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, ta) in &a {
        let diff = ta
            .data
            .iter()
            .zip(&b[k].data)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(diff <= 1e-6, "{k} differs by {diff} after resuming");
    }
    // Metrics of the resumed run hold each step once.
    let lines = std::fs::read_to_string(cut.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 6, "{lines}");

    // A different config must not reuse the directory.
    assert!(
        pretrain(&config(7), &files, &cut, &device, &RunOptions::default())
            .unwrap_err()
            .to_string()
            .contains("different config")
    );
}

#[test]
fn pretraining_lowers_the_loss_and_writes_a_loadable_model() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus(tmp.path());
    let out = tmp.path().join("m");
    let device = Device::flex().autodiff();
    let r = pretrain(&config(40), &files, &out, &device, &RunOptions::default()).unwrap();
    let metrics: Vec<f64> = std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let first = metrics[0];
    assert!(
        (r.last_loss as f64) < first * 0.6,
        "loss {first} -> {}",
        r.last_loss
    );

    let lm = CausalLm::load(&out, &Device::flex()).unwrap();
    let tok = Tokenizer::load(&out).unwrap();
    let ids = tok.encode("> craft 3 oak planks using", false).unwrap();
    let logits = lm
        .forward(&Batch::single(&ids), Forward::default(), None)
        .unwrap();
    assert_eq!(logits.dims(), [1, ids.len(), 300]);
    assert!(
        tok.apply_chat_template(&[hier_backbone::Message::new("user", "hi")], true)
            .is_ok()
    );
}
