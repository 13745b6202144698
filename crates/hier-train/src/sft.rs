//! Supervised fine-tuning of one named LoRA adapter over the frozen backbone — Multi²'s
//! System-1 phase, `L_φ = −E[log π_φ(g_h | K, o_t)]` (METHODS.md A.1), and the flat SFT
//! baseline. The loss is the mean negative log-likelihood of the target tokens of a batch
//! (padding masked); only the adapter's `A`/`B` receive gradients.
//!
//! Runs are seeded (batch `k` is drawn from its own stream, so a resumed run sees the batches
//! the uninterrupted one would), log `metrics.jsonl`, checkpoint `<out>/checkpoint` (adapter
//! in PEFT format, optimiser state, step, config) by whole-directory swap, refuse a directory
//! holding a different config, and write the final adapter to `<out>/adapter`.

use std::path::Path;

use hier_backbone::burn::optim::GradientsParams;
use hier_backbone::burn::tensor::{Tensor, TensorData};
use hier_backbone::{AdapterId, CausalLm, Forward, LoraConfig, ScoreRequest};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::optim::OptimConfig;
use crate::trainer::{LoopSpec, OPTIMIZER_FILE, TrainLoop, load_optimizer, save_optimizer};

use crate::error::{Error, Result};
use crate::runlog::RunOptions;

/// A fine-tuning run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftConfig {
    /// Adapter name (`sys1`, `flat`, …).
    pub adapter: String,
    /// The adapter's rank, α, dropout and target modules. Authors: r 16, α 32, dropout 0.05.
    pub lora: LoraConfig,
    pub steps: usize,
    /// Examples per step (drawn with replacement).
    pub batch_size: usize,
    /// AdamW, schedule and clipping of the adapter's weights.
    pub optim: OptimConfig,
    pub seed: u64,
    pub checkpoint_every: usize,
    pub log_every: usize,
}

impl SftConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::Invalid(format!("sft: {m}")));
        if self.steps == 0 || self.batch_size == 0 {
            return bad("steps and batch_size must be positive");
        }
        if self.checkpoint_every == 0 || self.log_every == 0 {
            return bad("checkpoint_every and log_every must be positive");
        }
        self.optim.check("sft.optim", self.steps)?;
        Ok(self.lora.check("sft")?)
    }
}

/// `(prompt, target)` pairs as requests to score the targets.
pub fn score_requests(rows: &[SftExample]) -> Vec<ScoreRequest> {
    rows.iter()
        .map(|e| ScoreRequest {
            prompt: e.prompt.clone(),
            continuation: e.target.clone(),
        })
        .collect()
}

/// One training pair, already tokenised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SftExample {
    pub prompt: Vec<u32>,
    pub target: Vec<u32>,
}

/// What a finished (or stopped) run reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SftReport {
    pub steps_done: usize,
    pub resumed_from: usize,
    /// Mean loss of the first and of the last logged window.
    pub first_loss: f32,
    pub last_loss: f32,
}

/// Registers adapter `name` as an exact copy of `from`, through its PEFT files written to
/// `dir` (so the copy is what a reader of `dir` gets); a name already registered is replaced.
pub fn copy_adapter(
    lm: &mut CausalLm,
    from: AdapterId,
    name: &str,
    dir: &Path,
) -> Result<AdapterId> {
    lm.save_adapter(from, dir, None)?;
    Ok(lm.load_adapter(name, dir)?)
}

/// Mean NLL of the targets under `adapter` (train mode).
pub fn sft_loss(
    lm: &CausalLm,
    adapter: AdapterId,
    batch: &[SftExample],
) -> Result<hier_backbone::burn::tensor::Tensor<1>> {
    let requests = score_requests(batch);
    let out = lm.score(
        &requests,
        Forward {
            adapter: Some(adapter),
            train: true,
        },
    )?;
    Ok(out.logprobs.sum().neg() / out.mask.sum())
}

/// Fine-tunes (or resumes) adapter `cfg.adapter` of `lm` on `examples`; `lm` must live on an
/// autodiff device. Returns the model with the trained adapter.
pub fn train_adapter(
    mut lm: CausalLm,
    examples: &[SftExample],
    cfg: &SftConfig,
    out: &Path,
    opts: &RunOptions,
) -> Result<(CausalLm, SftReport)> {
    cfg.validate()?;
    if examples.is_empty() {
        return Err(Error::Invalid("sft: no training examples".into()));
    }
    let spec = LoopSpec::json(
        format!("sft {}", cfg.adapter),
        "sft.json",
        cfg,
        cfg.steps,
        cfg.checkpoint_every,
    );
    let mut run: TrainLoop<SftConfig> =
        TrainLoop::open(out, spec, cfg, opts)?.seed_backend_per_step(lm.device(), cfg.seed);
    let mut optim = cfg.optim.adamw();
    let id = if run.take_resumed().is_some() {
        let ckpt = run.checkpoint_dir();
        optim = load_optimizer(optim, ckpt, OPTIMIZER_FILE)?;
        lm.load_adapter(&cfg.adapter, &ckpt.join("adapter"))?
    } else {
        lm.add_adapter(&cfg.adapter, cfg.lora.clone(), cfg.seed)?
    };
    let (mut first_loss, mut last_loss) = (f32::NAN, f32::NAN);
    let mut window = Vec::new();
    while let Some(step) = run.next_step() {
        let mut rng =
            StdRng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step as u64);
        let batch: Vec<SftExample> = (0..cfg.batch_size)
            .map(|_| examples[rng.random_range(0..examples.len())].clone())
            .collect();
        let loss = sft_loss(&lm, id, &batch)?;
        let value = loss.clone().into_scalar::<f32>();
        if !value.is_finite() {
            return Err(Error::Invalid(format!(
                "sft {}: loss became {value} at step {step}; lower lr",
                cfg.adapter
            )));
        }
        let mut grads = GradientsParams::from_grads(loss.backward(), &lm);
        let grad_norm = cfg.optim.clip(&lm, &mut grads);
        let lr = cfg.optim.lr_at(step, cfg.steps);
        lm = optim.step(lr, lm, grads);
        window.push(value);
        if run.logs_at(step, cfg.log_every) {
            last_loss = window.iter().sum::<f32>() / window.len() as f32;
            if first_loss.is_nan() {
                first_loss = last_loss;
            }
            window.clear();
            run.log(serde_json::json!({"loss": last_loss, "lr": lr, "grad_norm": grad_norm}))?;
            run.message(format!("loss {last_loss:.3}"));
        }
        run.end_step(
            || (),
            |dir| -> Result<()> {
                lm.save_adapter(id, &dir.join("adapter"), None)?;
                save_optimizer(&optim, dir, OPTIMIZER_FILE)
            },
        )?;
    }
    let (steps_done, resumed_from) = (run.steps_done(), run.start());
    if run.finish() {
        lm.save_adapter(id, &out.join("adapter"), None)?;
    }
    Ok((
        lm,
        SftReport {
            steps_done,
            resumed_from,
            first_loss,
            last_loss,
        },
    ))
}

/// LoRA SFT settings shared by System 1, flat SFT and Glider's SFT phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftSpec {
    pub lora: LoraConfig,
    pub steps: usize,
    pub batch_size: usize,
    pub optim: OptimConfig,
}

/// The SFT run of `spec` for adapter `adapter` with `seed` (four checkpoints and twenty log lines
/// per run).
pub fn sft_config(spec: &SftSpec, adapter: &str, seed: u64) -> SftConfig {
    SftConfig {
        adapter: adapter.into(),
        lora: spec.lora.clone(),
        steps: spec.steps,
        batch_size: spec.batch_size,
        optim: spec.optim.clone(),
        seed,
        checkpoint_every: spec.steps.div_ceil(4).max(1),
        log_every: (spec.steps / 20).max(1),
    }
}

/// Per-token log-probabilities of each row's target under `adapter` at `temperature`
/// ([`CausalLm::score_at`]; no gradient), in batches of `batch`.
pub fn scores_of(
    lm: &CausalLm,
    adapter: hier_backbone::AdapterId,
    rows: &[SftExample],
    batch: usize,
    temperature: f32,
) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(batch.max(1)) {
        let s = lm.score_at(
            &score_requests(chunk),
            Forward {
                adapter: Some(adapter),
                train: false,
            },
            temperature,
        )?;
        let [b, c] = s.logprobs.dims();
        let v: Vec<f32> = s
            .logprobs
            .into_data()
            .try_to_vec::<f32>()
            .map_err(|e| Error::Invalid(format!("scores: {e:?}")))?;
        for i in 0..b {
            out.push(v[i * c..(i + 1) * c].to_vec());
        }
    }
    Ok(out)
}

/// Rows of per-token values as a `[rows, width]` tensor, zero-padded (or cut) to `width`.
pub fn padded(
    rows: &[&Vec<f32>],
    width: usize,
    device: &hier_backbone::burn::tensor::Device,
) -> Tensor<2> {
    let mut v = vec![0.0f32; rows.len() * width];
    for (i, r) in rows.iter().enumerate() {
        let n = r.len().min(width);
        v[i * width..i * width + n].copy_from_slice(&r[..n]);
    }
    Tensor::from_data(TensorData::new(v, [rows.len(), width]), device)
}
