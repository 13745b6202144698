//! Causal-LM pre-training of a tiny backbone from scratch on environment text.
//!
//! The paper fine-tunes adapters on a pretrained 3–8B checkpoint; none is reachable here, so the
//! default pipeline first pretrains a small Llama-style model (with its own byte-level BPE
//! tokenizer) on the text the environments print, then trains adapters on it exactly as the
//! paper does on a big one. The result is an ordinary Hugging Face directory
//! (`config.json`, `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`) that
//! `hier-backbone` and `transformers` both load.
//!
//! Objective: `L = −(1/N)·Σ_t log p(x_{t+1} | x_≤t)` over random windows of `seq_len + 1` tokens
//! of the concatenated corpus (documents separated by `<|eos|>`), AdamW with linear warm-up and
//! cosine decay to `min_lr`, global-norm gradient clipping. Every `checkpoint_every` steps the
//! model, the optimiser state and the step are written atomically to `<out>/checkpoint`; a run
//! started again with the same config resumes there and produces the same weights as an
//! uninterrupted run (the batch of step `s` depends only on `(seed, s)`).

use std::path::{Path, PathBuf};

use hier_backbone::burn::module::Module;
use hier_backbone::burn::optim::{AdamWConfig, GradientsParams};
use hier_backbone::burn::tensor::activation::log_softmax;
use hier_backbone::burn::tensor::{Device, Int, Tensor, TensorData};
use hier_backbone::{
    BackboneError, Batch, CausalLm, Forward, ModelConfig, Tokenizer, train_bpe, write_atomic,
};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};

use crate::optim::clip_global_norm;

use crate::error::{Error, Result};
use crate::runlog::RunOptions;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Shape of the model to pretrain (a Llama-style decoder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TinyModelConfig {
    /// Vocabulary size of the BPE tokenizer and of the model.
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// SwiGLU width.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    pub num_key_value_heads: usize,
    /// Longest position.
    pub max_position_embeddings: usize,
    /// RoPE θ.
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    /// RMSNorm ε.
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    /// Share embedding and output matrices.
    #[serde(default)]
    pub tie_word_embeddings: bool,
}

fn default_theta() -> f64 {
    10_000.0
}
fn default_eps() -> f64 {
    1e-5
}

impl TinyModelConfig {
    /// The HF-style (Llama) model configuration of these sizes.
    pub fn model_config(&self) -> Result<ModelConfig> {
        let m = self;
        let v = serde_json::json!({
            "model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "vocab_size": m.vocab_size, "hidden_size": m.hidden_size, "intermediate_size": m.intermediate_size,
            "num_hidden_layers": m.num_hidden_layers, "num_attention_heads": m.num_attention_heads,
            "num_key_value_heads": m.num_key_value_heads, "max_position_embeddings": m.max_position_embeddings,
            "rope_theta": m.rope_theta, "rms_norm_eps": m.rms_norm_eps, "tie_word_embeddings": m.tie_word_embeddings,
            "hidden_act": "silu", "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
        });
        Ok(ModelConfig::from_json(Path::new("<pretrain config>"), &v)?)
    }
}

/// Optimisation settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Tokens per training window.
    pub seq_len: usize,
    /// Windows per step.
    pub batch_size: usize,
    /// Optimiser steps.
    pub steps: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Final learning rate of the cosine schedule.
    pub min_lr: f64,
    /// Linear warm-up steps.
    pub warmup_steps: usize,
    /// AdamW decoupled weight decay.
    pub weight_decay: f32,
    /// Global gradient-norm bound.
    pub grad_clip: f32,
    /// Seed of weights, tokenizer-independent batch sampling.
    pub seed: u64,
    /// Steps between checkpoints.
    pub checkpoint_every: usize,
    /// Steps between metric lines.
    pub log_every: usize,
}

/// A pre-training run: `configs/backbone/<name>.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PretrainConfig {
    /// The model.
    pub model: TinyModelConfig,
    /// The optimisation.
    pub train: TrainConfig,
}

impl PretrainConfig {
    /// Reads a TOML file (unknown keys are errors).
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        toml::from_str(&text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })
    }

    /// The backbone configuration (ids 0/1/2 are pad/bos/eos of the tiny tokenizer).
    pub fn model_config(&self) -> Result<ModelConfig> {
        self.model.model_config()
    }

    fn validate(&self) -> Result<()> {
        let t = &self.train;
        let bad = |msg: &str| {
            Err(Error::Config {
                path: PathBuf::from("<pretrain config>"),
                msg: msg.into(),
            })
        };
        if t.seq_len == 0 || t.batch_size == 0 || t.steps == 0 {
            return bad("train.seq_len, train.batch_size and train.steps must be positive");
        }
        if t.seq_len > self.model.max_position_embeddings {
            return bad("train.seq_len exceeds model.max_position_embeddings");
        }
        if t.checkpoint_every == 0 || t.log_every == 0 {
            return bad("train.checkpoint_every and train.log_every must be positive");
        }
        if t.warmup_steps > t.steps {
            return bad("train.warmup_steps exceeds train.steps");
        }
        if !(t.lr > 0.0 && t.min_lr >= 0.0 && t.min_lr <= t.lr) {
            return bad("need 0 <= train.min_lr <= train.lr and train.lr > 0");
        }
        Ok(())
    }
}

/// Learning rate at `step`: linear warm-up to `lr`, then cosine decay to `min_lr`.
pub fn learning_rate(t: &TrainConfig, step: usize) -> f64 {
    crate::runlog::cosine_lr(t.lr, t.min_lr, t.warmup_steps, t.steps, step)
}

/// Documents of the corpus: each file split at blank lines.
pub fn read_documents(files: &[PathBuf]) -> Result<Vec<String>> {
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(io(f))?;
        docs.extend(
            text.split("\n\n")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string),
        );
    }
    if docs.is_empty() {
        return Err(Error::Corpus(format!("no text in {files:?}")));
    }
    Ok(docs)
}

/// What a finished (or stopped) run reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PretrainReport {
    /// Steps completed in total.
    pub steps_done: usize,
    /// Step the run resumed from (0 for a fresh run).
    pub resumed_from: usize,
    /// Mean loss of the last logged window.
    pub last_loss: f32,
    /// Tokens in the corpus stream.
    pub corpus_tokens: usize,
}

#[derive(Debug, Serialize, Deserialize)]
struct CheckpointState {
    step: usize,
    config: PretrainConfig,
}

/// Mean next-token cross-entropy of `lm` on windows `[b, t+1]`.
pub fn causal_lm_loss(
    lm: &CausalLm,
    windows: &[Vec<u32>],
) -> std::result::Result<Tensor<1>, BackboneError> {
    let inputs: Vec<Vec<u32>> = windows.iter().map(|w| w[..w.len() - 1].to_vec()).collect();
    let targets: Vec<i64> = windows
        .iter()
        .flat_map(|w| w[1..].iter().map(|&x| x as i64))
        .collect();
    let (b, t) = (windows.len(), inputs[0].len());
    let logits = lm.forward(
        &Batch::right_padded(&inputs, 0),
        Forward {
            adapter: None,
            train: true,
        },
        None,
    )?;
    let logp = log_softmax(logits, 2);
    let idx = Tensor::<3, Int>::from_data(TensorData::new(targets, [b, t, 1]), &lm.device());
    Ok(logp.gather(2, idx).mean().neg())
}

/// Pretrains (or resumes) into `out`.
pub fn pretrain(
    cfg: &PretrainConfig,
    corpus: &[PathBuf],
    out: &Path,
    device: &Device,
    opts: &RunOptions,
) -> Result<PretrainReport> {
    cfg.validate()?;
    std::fs::create_dir_all(out).map_err(io(out))?;
    let resolved = toml::to_string_pretty(cfg).expect("serialisable config");
    let resolved_path = out.join("pretrain.toml");
    if resolved_path.exists() {
        let old = std::fs::read_to_string(&resolved_path).map_err(io(&resolved_path))?;
        if old != resolved {
            return Err(Error::Checkpoint { path: resolved_path, msg: "this directory holds a run with a different config; use another --out or delete it".into() });
        }
    } else {
        write_atomic(&resolved_path, resolved.as_bytes())?;
    }

    let docs = read_documents(corpus)?;
    let tok_path = out.join("tokenizer.json");
    let tokenizer = if tok_path.exists() {
        Tokenizer::load(out)?
    } else {
        let t = train_bpe(docs.iter(), cfg.model.vocab_size)?;
        t.save(out)?;
        t
    };
    if tokenizer.vocab_size() > cfg.model.vocab_size {
        return Err(Error::Corpus(format!(
            "tokenizer has {} tokens, model.vocab_size is {}",
            tokenizer.vocab_size(),
            cfg.model.vocab_size
        )));
    }
    let eos = tokenizer
        .token_id("<|eos|>")
        .ok_or_else(|| Error::Corpus("tokenizer lacks <|eos|>".into()))?;
    let mut stream = Vec::new();
    for d in &docs {
        stream.extend(tokenizer.encode(d, false)?);
        stream.push(eos);
    }
    let t = &cfg.train;
    if stream.len() < t.seq_len + 2 {
        return Err(Error::Corpus(format!(
            "{} tokens cannot fill one window of {}",
            stream.len(),
            t.seq_len + 1
        )));
    }

    let ckpt = out.join("checkpoint");
    let state_path = ckpt.join("state.json");
    let mut optim = AdamWConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.95)
        .with_epsilon(1e-8)
        .with_weight_decay(t.weight_decay)
        .init();
    let resumed = crate::runlog::resume_state(&state_path, cfg, |s: &CheckpointState| &s.config)?;
    let (mut lm, start) = if let Some(state) = resumed {
        let lm = CausalLm::load(&ckpt, device)?;
        let opt_path = ckpt.join("optimizer.bpk");
        optim = optim.load(&opt_path).map_err(|e| Error::Checkpoint {
            path: opt_path.clone(),
            msg: format!("{e:?}"),
        })?;
        (lm, state.step)
    } else {
        (CausalLm::random(cfg.model_config()?, t.seed, device)?, 0)
    };
    lm = lm.set_require_grad(true);

    let metrics_path = out.join("metrics.jsonl");
    crate::runlog::keep_metrics_up_to(&metrics_path, start).map_err(io(&metrics_path))?;
    let bar = if opts.progress {
        indicatif::ProgressBar::new(t.steps as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "pretrain {bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}",
        )
        .expect("template"),
    );
    bar.set_position(start as u64);
    let mut last_loss = f32::NAN;
    let mut window_losses = Vec::new();
    let started = std::time::Instant::now();
    let mut step = start;
    while step < t.steps {
        let mut rng =
            StdRng::seed_from_u64(t.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step as u64);
        let windows: Vec<Vec<u32>> = (0..t.batch_size)
            .map(|_| {
                let s = rng.random_range(0..stream.len() - t.seq_len - 1);
                stream[s..s + t.seq_len + 1].to_vec()
            })
            .collect();
        let loss = causal_lm_loss(&lm, &windows)?;
        let loss_value = loss.clone().into_scalar::<f32>();
        if !loss_value.is_finite() {
            return Err(Error::Checkpoint {
                path: out.to_path_buf(),
                msg: format!("loss became {loss_value} at step {step}; lower train.lr"),
            });
        }
        let mut grads = GradientsParams::from_grads(loss.backward(), &lm);
        let grad_norm = clip_global_norm(&lm, &mut grads, t.grad_clip);
        let lr = learning_rate(t, step);
        lm = optim.step(lr, lm, grads);
        step += 1;
        window_losses.push(loss_value);
        bar.inc(1);
        if step % t.log_every == 0 || step == t.steps {
            last_loss = window_losses.iter().sum::<f32>() / window_losses.len() as f32;
            window_losses.clear();
            let line = serde_json::json!({"step": step, "loss": last_loss, "lr": lr, "grad_norm": grad_norm,
                "tokens_per_s": ((step - start) * t.batch_size * t.seq_len) as f64 / started.elapsed().as_secs_f64()});
            crate::runlog::append_line(&metrics_path, &line.to_string())
                .map_err(io(&metrics_path))?;
            bar.set_message(format!("loss {last_loss:.3}"));
        }
        let stop_here = opts.stop_after.is_some_and(|s| step >= s);
        if step % t.checkpoint_every == 0 || step == t.steps || stop_here {
            save_checkpoint(&lm, &optim, cfg, step, &ckpt)?;
        }
        if stop_here {
            break;
        }
    }
    bar.finish_and_clear();
    if step == t.steps {
        lm.save(out)?;
    }
    Ok(PretrainReport {
        steps_done: step,
        resumed_from: start,
        last_loss,
        corpus_tokens: stream.len(),
    })
}

/// Writes the checkpoint into a fresh directory, then swaps it in, so a crash at any point
/// leaves either the old or the new checkpoint whole.
fn save_checkpoint(
    lm: &CausalLm,
    optim: &hier_backbone::burn::optim::ModuleOptimizer,
    cfg: &PretrainConfig,
    step: usize,
    ckpt: &Path,
) -> Result<()> {
    let tmp = ckpt.with_extension("tmp");
    let old = ckpt.with_extension("old");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    lm.save(&tmp)?;
    let opt_path = tmp.join("optimizer.bpk");
    optim.save(&opt_path).map_err(|e| Error::Checkpoint {
        path: opt_path.clone(),
        msg: format!("{e:?}"),
    })?;
    let state = serde_json::to_string_pretty(&CheckpointState {
        step,
        config: cfg.clone(),
    })
    .expect("json");
    write_atomic(&tmp.join("state.json"), state.as_bytes())?;
    if ckpt.exists() {
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(ckpt, &old).map_err(io(ckpt))?;
    }
    std::fs::rename(&tmp, ckpt).map_err(io(ckpt))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> TrainConfig {
        TrainConfig {
            seq_len: 8,
            batch_size: 2,
            steps: 100,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup_steps: 10,
            weight_decay: 0.0,
            grad_clip: 1.0,
            seed: 0,
            checkpoint_every: 10,
            log_every: 10,
        }
    }

    #[test]
    fn schedule_warms_up_then_decays() {
        let t = cfg();
        assert!((learning_rate(&t, 0) - 1e-4).abs() < 1e-12);
        assert!((learning_rate(&t, 9) - 1e-3).abs() < 1e-12);
        assert!((learning_rate(&t, 10) - 1e-3).abs() < 1e-12);
        assert!((learning_rate(&t, 55) - 5.5e-4).abs() < 1e-9);
        assert!((learning_rate(&t, 100) - 1e-4).abs() < 1e-12);
    }
}
