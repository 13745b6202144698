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

/// The backend's random source (where LoRA dropout draws its masks) is one per process: the
/// tests of this file take turns, so that one's draws do not land between another's.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn tiny(device: &Device) -> CausalLm {
    let cfg = TinyModelConfig::for_tests(96, 64);
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
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
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

fn max_difference(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|((ka, va), (kb, vb))| {
            assert_eq!(ka, kb);
            va.iter().zip(vb).map(|(x, y)| (x - y).abs())
        })
        .fold(0.0f32, f32::max)
}

/// LoRA dropout draws its masks from the backend's random source, which the trainer seeds
/// before every step from the run's seed and the step: two runs agree, a run resumed half-way
/// agrees with an uninterrupted one, and the masks do act (the adapter differs from one trained
/// without dropout).
#[test]
fn lora_dropout_is_deterministic_and_survives_a_resume() {
    let _serial = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let device = Device::flex().autodiff();
    let with_dropout = |p: f64| {
        let mut c = config(6);
        c.lora.dropout = p;
        c
    };
    let run = |name: &str, p: f64, opts: &RunOptions| {
        // A draw from the backend's random source before the run must not matter.
        let _ = hier_backbone::burn::tensor::Tensor::<1>::random(
            [16],
            hier_backbone::burn::tensor::Distribution::Default,
            &device,
        );
        let dir = tmp.path().join(name);
        train_adapter(tiny(&device), &examples(), &with_dropout(p), &dir, opts).unwrap();
        dir
    };
    let all = RunOptions::default();
    let a = adapter(&run("a", 0.2, &all));
    let b = adapter(&run("b", 0.2, &all));
    assert_eq!(max_difference(&a, &b), 0.0, "two runs with dropout agree");
    let none = adapter(&run("none", 0.0, &all));
    assert!(
        max_difference(&a, &none) > 1e-4,
        "dropout 0.2 changes what is learnt"
    );
    let stop = RunOptions {
        stop_after: Some(3),
        ..Default::default()
    };
    run("cut", 0.2, &stop);
    let resumed = adapter(&run("cut", 0.2, &all));
    assert!(
        max_difference(&a, &resumed) <= 1e-6,
        "a resumed run with dropout agrees with an uninterrupted one"
    );
}
