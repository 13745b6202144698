//! `cargo xtask bench <workload>`: whole-process throughput of the backbone on a real model,
//! one JSON line per run, in the shape of the Python peer (`benches/peers/hf_smollm.py`) so
//! that `crates/hier-backbone/benches/side_by_side_smollm.sh` can alternate the two.
//!
//! | workload | what one timed step is | tokens counted |
//! |---|---|---|
//! | `train-lora` | forward + cross-entropy + backward + AdamW over a LoRA adapter (r 16, α 32, all seven projections) on the frozen base, `batch × seq` | `batch × seq` |
//! | `forward` | a forward pass without gradients over `batch × seq`, full-vocabulary logits | `batch × seq` |
//! | `generate` | greedy generation with the KV cache, `batch` prompts of `seq` tokens, `new_tokens` new tokens each, no stop tokens | `batch × new_tokens` |
//! | `kl` | the exact per-token KL `Σ_v p(v)(log p(v) − log q(v))` between two `batch × seq × vocab` logit tensors, masked mean | `batch × seq` |
//!
//! Inputs are uniform random token ids (and standard-normal logits for `kl`) from a fixed
//! seed. The first `warmup` steps are not timed; the median of the `steps` timed ones is
//! reported, with the peak resident set and the cores busy (process CPU time / wall time over
//! the timed steps).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use hier_backbone::burn::optim::GradientsParams;
use hier_backbone::burn::tensor::activation::log_softmax;
use hier_backbone::burn::tensor::{Distribution, Int, Tensor, TensorData};
use hier_backbone::gguf::{GgufFile, is_gguf};
use hier_backbone::{
    Batch, CausalLm, Forward, GenerationRequest, LoraConfig, SamplingConfig, TargetModule,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    TrainLora,
    Forward,
    Generate,
    Kl,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Self::TrainLora => "train-lora",
            Self::Forward => "forward",
            Self::Generate => "generate",
            Self::Kl => "kl",
        }
    }

    /// The default `(batch, seq)`: the shapes of docs/PERFORMANCE.md.
    fn default_shape(self) -> (usize, usize) {
        match self {
            Self::TrainLora | Self::Forward => (4, 256),
            Self::Generate => (8, 64),
            Self::Kl => (8, 256),
        }
    }
}

#[derive(Args)]
pub struct BenchArgs {
    workload: Workload,
    /// HF model directory or `.gguf` file (default: the SmolLM2-135M-Instruct GGUF that
    /// `cargo xtask setup` fetched).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Rows (default: 4 for train-lora and forward, 8 for generate and kl).
    #[arg(long)]
    batch: Option<usize>,
    /// Tokens per row; the prompt length for generate (default: 256, generate 64).
    #[arg(long)]
    seq: Option<usize>,
    /// New tokens per row (generate).
    #[arg(long, default_value_t = 64)]
    new_tokens: usize,
    /// Timed steps (the median is reported).
    #[arg(long, default_value_t = 5)]
    steps: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// cpu | cuda[:N] | wgpu[:N]
    #[arg(long, default_value = "cpu")]
    device: String,
    /// generate: every row continues the same prompt (GRPO's G samples of one prompt,
    /// steering's N continuations of one state), whose prefix is then prefilled once.
    #[arg(long)]
    same_prompt: bool,
    /// forward, generate: multiply the dense f32 weights even where the GGUF file's blocks are
    /// kept for decoding (the other side of `hier_backbone::packed`'s comparison).
    #[arg(long)]
    dense_weights: bool,
}

/// User + system CPU seconds of this process so far (Linux; NaN elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) — utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok());
    // USER_HZ, the unit of these fields, is 100 on every Linux this runs on.
    match (ticks(11), ticks(12)) {
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn random_tokens(rng: &mut rand::rngs::StdRng, vocab: usize, len: usize) -> Vec<u32> {
    use rand::Rng;
    (0..len)
        .map(|_| rng.random_range(0..vocab as u32))
        .collect()
}

/// One LoRA training step after another over a frozen base: forward, next-token
/// cross-entropy, backward, AdamW (lr 1e-4, weight decay 0.01) on an r 16, α 32 adapter.
pub struct LoraTrainer {
    lm: Option<CausalLm>,
    adapter: hier_backbone::AdapterId,
    optim: hier_backbone::burn::optim::ModuleOptimizer,
}

impl LoraTrainer {
    /// `lm` on an autodiff device.
    pub fn new(mut lm: CausalLm, targets: &[TargetModule]) -> Result<Self> {
        let adapter = lm.add_adapter("bench", LoraConfig::new(16, 32.0, targets), 0)?;
        Ok(Self {
            lm: Some(lm),
            adapter,
            // PyTorch's AdamW defaults, as the peer's.
            optim: hier_train::optim::adamw(0.01),
        })
    }

    /// One step on `windows` (rows of `seq + 1` tokens: inputs and shifted targets).
    pub fn step(&mut self, windows: &[Vec<u32>]) -> Result<()> {
        let model = self.lm.take().context("a previous step failed")?;
        let (batch, seq) = (windows.len(), windows[0].len() - 1);
        let inputs: Vec<Vec<u32>> = windows.iter().map(|w| w[..seq].to_vec()).collect();
        let targets: Vec<i64> = windows
            .iter()
            .flat_map(|w| w[1..].iter().map(|&x| i64::from(x)))
            .collect();
        let logits = model.forward(
            &Batch::right_padded(&inputs, 0),
            Forward {
                adapter: Some(self.adapter),
                train: true,
            },
            None,
        )?;
        let idx = Tensor::<3, Int>::from_data(
            TensorData::new(targets, [batch, seq, 1]),
            &logits.device(),
        );
        let loss = log_softmax(logits, 2).gather(2, idx).mean().neg();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.lm = Some(self.optim.step(1e-4, model, grads));
        let _ = loss.into_scalar::<f32>();
        Ok(())
    }
}

/// Times `step` `warmup + steps` times; returns the median seconds of the timed ones and the
/// cores busy over them.
pub fn time_steps(
    warmup: usize,
    steps: usize,
    mut step: impl FnMut() -> Result<()>,
) -> Result<(f64, f64)> {
    for _ in 0..warmup {
        step()?;
    }
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let t = Instant::now();
        step()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let cores = (cpu_seconds() - cpu) / wall.elapsed().as_secs_f64();
    Ok((median(times), cores))
}

pub fn bench(a: &BenchArgs) -> Result<()> {
    use rand::SeedableRng;
    if a.steps == 0 {
        bail!("--steps must be positive");
    }
    let (batch, seq) = {
        let (b, s) = a.workload.default_shape();
        (a.batch.unwrap_or(b), a.seq.unwrap_or(s))
    };
    if batch == 0 || seq == 0 || (a.workload == Workload::Generate && a.new_tokens == 0) {
        bail!("--batch, --seq and --new-tokens must be positive");
    }
    let model = match &a.model {
        Some(m) => m.clone(),
        None => hier_envs::assets::Assets::locate()?.smollm2_gguf()?,
    };
    let device = hier_backbone::parse_device(&a.device)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1234);
    let (median_s, cores, tokens) = match a.workload {
        Workload::TrainLora => {
            let device = device.autodiff();
            let lm = crate::model_cmd::load_model(&model, &device)?.1;
            let vocab = lm.config.vocab_size;
            let mut trainer = LoraTrainer::new(lm, &TargetModule::ALL)?;
            let windows: Vec<Vec<Vec<u32>>> = (0..4)
                .map(|_| {
                    (0..batch)
                        .map(|_| random_tokens(&mut rng, vocab, seq + 1))
                        .collect()
                })
                .collect();
            let mut k = 0;
            let (m, c) = time_steps(a.warmup, a.steps, || {
                k += 1;
                trainer.step(&windows[k % windows.len()])
            })?;
            (m, c, batch * seq)
        }
        Workload::Forward => {
            let mut lm = crate::model_cmd::load_model(&model, &device)?.1;
            if a.dense_weights {
                lm.drop_packed_weights();
            }
            let rows: Vec<Vec<u32>> = (0..batch)
                .map(|_| random_tokens(&mut rng, lm.config.vocab_size, seq))
                .collect();
            let input = Batch::right_padded(&rows, 0);
            let (m, c) = time_steps(a.warmup, a.steps, || {
                let logits = lm.forward(&input, Forward::default(), None)?;
                let _ = logits.sum().into_scalar::<f32>();
                Ok(())
            })?;
            (m, c, batch * seq)
        }
        Workload::Generate => {
            let mut lm = crate::model_cmd::load_model(&model, &device)?.1;
            if a.dense_weights {
                lm.drop_packed_weights();
            }
            let one = random_tokens(&mut rng, lm.config.vocab_size, seq);
            let reqs: Vec<GenerationRequest> = (0..batch)
                .map(|_| GenerationRequest {
                    prompt: if a.same_prompt {
                        one.clone()
                    } else {
                        random_tokens(&mut rng, lm.config.vocab_size, seq)
                    },
                    ..Default::default()
                })
                .collect();
            let cfg = SamplingConfig::greedy(a.new_tokens);
            let (m, c) = time_steps(a.warmup, a.steps, || {
                let out = lm.generate(&reqs, &cfg, None, None)?;
                if let Some(g) = out.iter().find(|g| g.tokens.len() != a.new_tokens) {
                    bail!(
                        "a row stopped after {} of {} tokens",
                        g.tokens.len(),
                        a.new_tokens
                    );
                }
                Ok(())
            })?;
            (m, c, batch * a.new_tokens)
        }
        Workload::Kl => {
            // The vocabulary of the model, without loading its weights.
            let vocab = if is_gguf(&model) {
                GgufFile::open(&model)?.model_config()?.vocab_size
            } else {
                hier_backbone::ModelConfig::from_file(&model.join("config.json"))?.vocab_size
            };
            let on =
                Tensor::<3>::random([batch, seq, vocab], Distribution::Normal(0.0, 1.0), &device);
            let off =
                Tensor::<3>::random([batch, seq, vocab], Distribution::Normal(0.0, 1.0), &device);
            let (m, c) = time_steps(a.warmup, a.steps, || {
                let kl = hier_rl_losses::kl::exact_kl_per_token(on.clone(), off.clone());
                let _ = kl.mean().into_scalar::<f32>();
                Ok(())
            })?;
            (m, c, batch * seq)
        }
    };
    println!(
        "{}",
        serde_json::json!({
            "fw": "hier",
            "workload": a.workload.name(),
            "model": model.display().to_string(),
            "device": a.device,
            "batch": batch,
            "seq": seq,
            "new_tokens": if a.workload == Workload::Generate { Some(a.new_tokens) } else { None },
            "same_prompt": a.same_prompt,
            "dense_weights": a.dense_weights,
            "steps": a.steps,
            "median_s": median_s,
            "tokens_per_s": tokens as f64 / median_s,
            "cores_busy": cores,
            "peak_rss_mb": hier_train::memory::peak_resident_mib(),
        })
    );
    Ok(())
}
