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
use hier_backbone::{BackboneError, Batch, CausalLm, Forward, ModelConfig, Tokenizer, train_bpe};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};

use crate::optim::OptimConfig;

use crate::error::{Error, Result};
use crate::runlog::RunOptions;
use crate::trainer::{LoopSpec, OPTIMIZER_FILE, TrainLoop, load_optimizer, save_optimizer};

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
    /// The 2-layer, 32-wide model of the tests (SwiGLU 64, 4 heads sharing 2 key/value heads,
    /// RoPE θ 1e4, RMSNorm ε 1e-5, untied head) over `vocab_size` tokens and `max_positions`
    /// positions.
    pub fn for_tests(vocab_size: usize, max_positions: usize) -> Self {
        Self {
            vocab_size,
            hidden_size: 32,
            intermediate_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: max_positions,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-5,
            tie_word_embeddings: false,
        }
    }

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
    /// Learning rate and its schedule, weight decay, clipping (β₂ is pre-training's 0.95).
    pub optim: OptimConfig,
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
        t.optim.check("train.optim", t.steps)
    }
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
    let t = &cfg.train;
    let spec = LoopSpec {
        what: "pretrain".into(),
        pin_file: "pretrain.toml",
        pinned: toml::to_string_pretty(cfg).expect("serialisable config"),
        total: t.steps,
        checkpoint_every: t.checkpoint_every,
    };
    let mut run: TrainLoop<PretrainConfig> = TrainLoop::open(out, spec, cfg, opts)?;

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
    if stream.len() < t.seq_len + 2 {
        return Err(Error::Corpus(format!(
            "{} tokens cannot fill one window of {}",
            stream.len(),
            t.seq_len + 1
        )));
    }

    // β₂ 0.95, the usual pre-training setting (the adapter trainers use PyTorch's 0.999).
    let mut optim = AdamWConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.95)
        .with_epsilon(1e-8)
        .with_weight_decay(t.optim.weight_decay)
        .init();
    let mut lm = if run.take_resumed().is_some() {
        let ckpt = run.checkpoint_dir();
        optim = load_optimizer(optim, ckpt, OPTIMIZER_FILE)?;
        CausalLm::load(ckpt, device)?
    } else {
        CausalLm::random(cfg.model_config()?, t.seed, device)?
    };
    lm = lm.set_require_grad(true);

    let start = run.start();
    let mut last_loss = f32::NAN;
    let mut window_losses = Vec::new();
    let started = std::time::Instant::now();
    while let Some(step) = run.next_step() {
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
                msg: format!("loss became {loss_value} at step {step}; lower train.optim.lr"),
            });
        }
        let mut grads = GradientsParams::from_grads(loss.backward(), &lm);
        let grad_norm = t.optim.clip(&lm, &mut grads);
        let lr = t.optim.lr_at(step, t.steps);
        lm = optim.step(lr, lm, grads);
        window_losses.push(loss_value);
        if run.logs_at(step, t.log_every) {
            last_loss = window_losses.iter().sum::<f32>() / window_losses.len() as f32;
            window_losses.clear();
            let tokens = (step + 1 - start) * t.batch_size * t.seq_len;
            run.log(
                serde_json::json!({"loss": last_loss, "lr": lr, "grad_norm": grad_norm,
                "tokens_per_s": tokens as f64 / started.elapsed().as_secs_f64()}),
            )?;
            run.message(format!("loss {last_loss:.3}"));
        }
        run.end_step(
            || (),
            |dir| -> Result<()> {
                lm.save(dir)?;
                save_optimizer(&optim, dir, OPTIMIZER_FILE)
            },
        )?;
    }
    let (steps_done, resumed_from) = (run.steps_done(), run.start());
    if run.finish() {
        lm.save(out)?;
    }
    Ok(PretrainReport {
        steps_done,
        resumed_from,
        last_loss,
        corpus_tokens: stream.len(),
    })
}
