//! `cargo xtask bench-gate`: a short, fixed set of benchmarks compared with a committed
//! baseline (`xtask/bench-gate.json`), so that CI fails on a speed regression.
//!
//! Machine speed cancels out: every round first times a calibration workload of the same kind
//! (`gemm`: Burn matmuls; `scalar`: sorting and hashing in plain Rust), then each workload, and
//! records `workload time / calibration time`. The gate takes the median ratio over the rounds
//! and fails when it exceeds the baseline's by more than the tolerance:
//!
//! `regressed ⇔ median_r(t_w / t_cal) > (1 + tolerance) · baseline_w`
//!
//! (tolerance doubled on a machine of another vector class than the baseline's: AVX-512
//! speeds the matmul calibration up more than memory-bound workloads).
//!
//! | workload | calibrated by | one timed run |
//! |---|---|---|
//! | `train-step` | gemm | LoRA step (r 16 on q, k, v, o) on the bench config, 8 × 128 |
//! | `decode` | gemm | greedy generation with the KV cache, bench config, 8 prompts of 16 + 16 new tokens |
//! | `loss-kernels` | gemm | 4 × (exact KL 4 × 128 × 2048, TD + expectile + offline actor over 65,536 transitions, PPO-clip + k3 forward + backward 32 × 256) |
//! | `textcraft-reset` | scalar | 2,000 TextCraft resets of one environment |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use hier_backbone::burn::tensor::{Device, Distribution, Tensor};
use hier_backbone::{CausalLm, GenerationRequest, ModelConfig, SamplingConfig, TargetModule};
use serde::{Deserialize, Serialize};

use crate::bench_cmd::{LoraTrainer, median, random_tokens};

#[derive(Args)]
pub struct GateArgs {
    /// The baseline to compare with.
    #[arg(long, default_value = "xtask/bench-gate.json")]
    baseline: PathBuf,
    /// Measure and write the baseline instead of comparing (after a deliberate change of speed).
    #[arg(long)]
    write_baseline: bool,
    /// Rounds (the median ratio is compared).
    #[arg(long, default_value_t = 15)]
    rounds: usize,
}

/// The committed baseline.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Baseline {
    /// Fail when a ratio exceeds its baseline by more than this fraction.
    tolerance: f64,
    /// Where and when it was measured (for the reader).
    measured_on: String,
    /// The widest vector instructions of the machine it was measured on (`avx512`, `avx2`,
    /// `other`): matmuls gain more from AVX-512 than memory-bound work does, so ratios move
    /// between the classes; on another class the gate doubles the tolerance and says so.
    cpu_class: String,
    /// Median `t_workload / t_calibration` per workload.
    ratios: BTreeMap<String, f64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Calibration {
    Gemm,
    Scalar,
}

/// Sixteen 512 × 512 matmuls through Burn's CPU backend (≈ 4.3 GFLOP).
fn calibrate_gemm(device: &Device) -> f64 {
    let a = Tensor::<2>::random([512, 512], Distribution::Normal(0.0, 1.0), device);
    let t = Instant::now();
    let mut acc = a.clone();
    for _ in 0..16 {
        acc = acc.matmul(a.clone()) * 0.05;
    }
    let _ = acc.sum().into_scalar::<f32>();
    t.elapsed().as_secs_f64()
}

/// Sorting 1,000,000 pseudo-random integers and counting 250,000 of them in a hash map.
fn calibrate_scalar() -> f64 {
    let t = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut v: Vec<u64> = (0..1_000_000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 20
        })
        .collect();
    v.sort_unstable();
    let mut counts = std::collections::HashMap::new();
    for k in v.iter().step_by(4) {
        *counts.entry(k % 50_000).or_insert(0u32) += 1;
    }
    std::hint::black_box((v, counts));
    t.elapsed().as_secs_f64()
}

/// A workload: its calibration and a closure timing one run of it.
struct Workload {
    name: &'static str,
    calibration: Calibration,
    run: Box<dyn FnMut() -> Result<f64>>,
}

fn timed(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64())
}

fn workloads() -> Result<Vec<Workload>> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let config = ModelConfig::bench();
    let vocab = config.vocab_size;

    let ad = Device::flex().autodiff();
    let mut trainer = LoraTrainer::new(
        CausalLm::random(config.clone(), 0, &ad)?,
        &[
            TargetModule::Q,
            TargetModule::K,
            TargetModule::V,
            TargetModule::O,
        ],
    )?;
    let windows: Vec<Vec<u32>> = (0..8)
        .map(|_| random_tokens(&mut rng, vocab, 129))
        .collect();

    let device = Device::flex();
    let lm = CausalLm::random(config, 0, &device)?;
    let requests: Vec<GenerationRequest> = (0..8)
        .map(|_| GenerationRequest {
            prompt: random_tokens(&mut rng, vocab, 16),
            ..Default::default()
        })
        .collect();

    let losses = loss_inputs(&device);
    let recipes = hier_envs::assets::Assets::locate()?.textcraft_recipes()?;
    let mut textcraft = hier_envs::textcraft::TextCraft::load(&recipes)?;

    Ok(vec![
        Workload {
            name: "train-step",
            calibration: Calibration::Gemm,
            run: Box::new(move || timed(|| trainer.step(&windows))),
        },
        Workload {
            name: "decode",
            calibration: Calibration::Gemm,
            run: Box::new(move || {
                timed(|| {
                    lm.generate(&requests, &SamplingConfig::greedy(16), None, None)?;
                    Ok(())
                })
            }),
        },
        Workload {
            name: "loss-kernels",
            calibration: Calibration::Gemm,
            run: Box::new(move || {
                timed(|| {
                    for _ in 0..4 {
                        losses.run()?;
                    }
                    Ok(())
                })
            }),
        },
        Workload {
            name: "textcraft-reset",
            calibration: Calibration::Scalar,
            run: Box::new(move || {
                use hier_envs::{Env, Task};
                timed(|| {
                    for s in 0..2000u64 {
                        textcraft.reset(&Task::new("craft", s))?;
                    }
                    Ok(())
                })
            }),
        },
    ])
}

/// The loss kernels' inputs, made once.
struct LossInputs {
    kl: (Tensor<3>, Tensor<3>, Tensor<2>),
    transitions: [Tensor<1>; 5],
    ppo: [Tensor<2>; 4],
    advantages: Tensor<1>,
}

fn loss_inputs(device: &Device) -> LossInputs {
    let n = |shape: [usize; 3]| Tensor::<3>::random(shape, Distribution::Normal(0.0, 1.0), device);
    let t = || Tensor::<1>::random([65_536], Distribution::Normal(0.0, 1.0), device);
    let ad = device.clone().autodiff();
    let lp = || Tensor::<2>::random([32, 256], Distribution::Normal(-2.0, 0.5), &ad);
    LossInputs {
        kl: (
            n([4, 128, 2048]),
            n([4, 128, 2048]),
            Tensor::ones([4, 128], device),
        ),
        transitions: [
            t(),
            t(),
            Tensor::zeros([65_536], device),
            t(),
            Tensor::ones([65_536], device),
        ],
        ppo: [lp(), lp(), lp(), Tensor::ones([32, 256], &ad)],
        advantages: Tensor::random([32], Distribution::Normal(0.0, 1.0), &ad),
    }
}

impl LossInputs {
    fn run(&self) -> Result<()> {
        use hier_rl_losses::{
            KlAnchor, OfflineActorConfig, expectile_loss, offline_actor_loss, td_loss,
        };
        let (on, off, mask) = self.kl.clone();
        let kl = KlAnchor::Exact {
            logits_on: on,
            logits_off: off,
            mask,
        }
        .value()?
        .0;
        let [q, r, done, vn, ones] = self.transitions.clone();
        let td = td_loss(q.clone(), r.clone(), done, vn.clone(), ones.clone(), 0.99)?.loss;
        let e = expectile_loss(q.clone(), vn, ones.clone(), 0.7)?.loss;
        let o = offline_actor_loss(
            r.clone(),
            q.clone(),
            ones.clone(),
            Some((r, q, ones)),
            &OfflineActorConfig::default(),
        )?
        .loss;
        let _ = (kl + td + e + o).into_scalar::<f32>();
        let [lp, old, reference, mask] = self.ppo.clone();
        let x = lp.require_grad();
        let cfg = hier_steer::PpoConfig {
            beta: 0.04,
            normalisation: hier_steer::LossNormalisation::Bnpo,
            ..Default::default()
        };
        let out = hier_steer::ppo_clip_loss(
            x.clone(),
            old,
            self.advantages.clone(),
            mask,
            Some(reference),
            &cfg,
        )?;
        let _ = x
            .grad(&out.loss.backward())
            .context("PPO gradient")?
            .into_data();
        Ok(())
    }
}

/// Median `t_workload / t_calibration` per workload over `rounds` rounds (after one warm-up).
fn measure(rounds: usize) -> Result<BTreeMap<String, f64>> {
    let device = Device::flex();
    let mut ws = workloads()?;
    let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for round in 0..=rounds {
        for w in &mut ws {
            let cal = match w.calibration {
                Calibration::Gemm => calibrate_gemm(&device),
                Calibration::Scalar => calibrate_scalar(),
            };
            let t = (w.run)().with_context(|| format!("bench-gate workload {}", w.name))?;
            if round > 0 {
                ratios.entry(w.name.to_string()).or_default().push(t / cal);
            }
        }
        eprintln!("bench-gate: round {round}/{rounds} done");
    }
    Ok(ratios.into_iter().map(|(k, v)| (k, median(v))).collect())
}

/// This machine's vector class (see [`Baseline::cpu_class`]).
fn cpu_class() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "other"
}

fn read_baseline(path: &Path) -> Result<Baseline> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

pub fn gate(a: &GateArgs) -> Result<()> {
    if a.rounds == 0 {
        bail!("--rounds must be positive");
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = if a.baseline.is_absolute() {
        a.baseline.clone()
    } else {
        root.join(&a.baseline)
    };
    // Read the baseline first: a missing or broken one fails before minutes of measuring.
    let baseline = if a.write_baseline {
        None
    } else {
        Some(read_baseline(&path)?)
    };
    let t = Instant::now();
    let measured = measure(a.rounds)?;
    let Some(baseline) = baseline else {
        let b = Baseline {
            tolerance: 0.5,
            measured_on: format!(
                "{} rounds, {}",
                a.rounds,
                std::fs::read_to_string("/proc/cpuinfo")
                    .ok()
                    .and_then(
                        |c| c.lines().find(|l| l.starts_with("model name")).map(|l| l
                            .split(':')
                            .nth(1)
                            .unwrap_or("")
                            .trim()
                            .to_string())
                    )
                    .unwrap_or_else(|| "unknown CPU".into())
            ),
            cpu_class: cpu_class().to_string(),
            ratios: measured,
        };
        let text = serde_json::to_string_pretty(&b)? + "\n";
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "wrote {} ({:.0} s)",
            path.display(),
            t.elapsed().as_secs_f64()
        );
        return Ok(());
    };
    let tolerance = if baseline.cpu_class == cpu_class() {
        baseline.tolerance
    } else {
        eprintln!(
            "bench-gate: the baseline was measured on an {} machine and this one is {}: \
             tolerance doubled to +{:.0} %",
            baseline.cpu_class,
            cpu_class(),
            baseline.tolerance * 200.0
        );
        baseline.tolerance * 2.0
    };
    let mut failed = vec![];
    for (name, base) in &baseline.ratios {
        let Some(&now) = measured.get(name) else {
            bail!(
                "{}: workload `{name}` is not measured any more",
                path.display()
            );
        };
        let change = now / base - 1.0;
        let verdict = if change > tolerance {
            failed.push(format!("{name} {:+.0} %", change * 100.0));
            "REGRESSED"
        } else {
            "ok"
        };
        println!(
            "{name:<16} ratio {now:>9.3} (baseline {base:>9.3}, {:+5.0} %)  {verdict}",
            change * 100.0
        );
    }
    if let Some(new) = measured.keys().find(|k| !baseline.ratios.contains_key(*k)) {
        bail!(
            "{}: no baseline for workload `{new}` (run with --write-baseline)",
            path.display()
        );
    }
    eprintln!(
        "bench-gate: {} workloads, tolerance +{:.0} %, {:.0} s",
        measured.len(),
        tolerance * 100.0,
        t.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!(
            "speed regression beyond +{:.0} % of the baseline: {}",
            tolerance * 100.0,
            failed.join(", ")
        );
    }
    Ok(())
}
