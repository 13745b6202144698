//! GRPO advantages and the token-level PPO-clip loss, with TRL's conventions.
//!
//! Group advantages (TRL): `A_i = (r_i − mean(r)) / (std(r) + ε)` with the **unbiased** std and
//! ε = 1e-4, or `A_i = r_i − mean(r)` without scaling. Rewards `[1, 0, 0, 1, 1]` give
//! `[0.730163, −1.095245, …]`.
//!
//! Baseline in the group (the steering paper): for a state `s` with G intervention returns
//! `R̄_{s,1..G}` and the no-intervention return `b_s`, the statistics are taken over
//! `{R̄_{s,1..G}, b_s}` but only the G samples receive an advantage:
//! `A_j = (R̄_{s,j} − μ)/(σ + ε)`. An intervention gains only when it beats the mean of
//! interventions *and* of not intervening. Worked example: `R̄ = [0.8, 0.4, 0.0, 1.0]`,
//! `b = 0.4` → `μ = 0.52`, `σ = 0.3899`, `A = [0.718, −0.308, −1.334, 1.231]`.
//!
//! A group whose values are all equal has zero advantage (and is flagged so callers can drop it).

use burn::tensor::Tensor;

use crate::error::{Result, SteerError};
use crate::output::LossOutput;

/// TRL's ε in `(r − μ)/(σ + ε)`.
pub const GRPO_EPS: f64 = 1e-4;

/// Whether advantages are divided by the group's standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdScaling {
    /// `(r − μ)/(σ + ε)`, σ unbiased (TRL's default).
    #[default]
    Group,
    /// `r − μ` (Dr. GRPO's "no std").
    None,
}

/// Advantages of one group and whether it was degenerate (zero variance).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupAdvantages {
    /// One per sample.
    pub advantages: Vec<f32>,
    /// All values equal: every advantage is 0 and the group carries no signal.
    pub zero_variance: bool,
}

fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 {
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

fn normalise(samples: &[f32], stats_over: &[f64], scaling: StdScaling) -> Result<GroupAdvantages> {
    if samples.is_empty() {
        return Err(SteerError::Invalid(
            "an empty group has no advantages".into(),
        ));
    }
    if let Some(x) = stats_over.iter().find(|x| !x.is_finite()) {
        return Err(SteerError::Invalid(format!(
            "group contains a non-finite reward {x}"
        )));
    }
    let (mean, std) = mean_std(stats_over);
    let zero_variance = stats_over.iter().all(|&v| v == stats_over[0]);
    let advantages = samples
        .iter()
        .map(|&r| {
            if zero_variance {
                0.0
            } else {
                let centred = r as f64 - mean;
                (match scaling {
                    StdScaling::Group => centred / (std + GRPO_EPS),
                    StdScaling::None => centred,
                }) as f32
            }
        })
        .collect();
    Ok(GroupAdvantages {
        advantages,
        zero_variance,
    })
}

/// Standard GRPO group advantages (TRL conventions).
pub fn group_advantages(rewards: &[f32], scaling: StdScaling) -> Result<GroupAdvantages> {
    let all: Vec<f64> = rewards.iter().map(|&r| r as f64).collect();
    normalise(rewards, &all, scaling)
}

/// The paper's baseline-in-group advantages: statistics over `{returns…, baseline}`,
/// advantages for `returns` only.
pub fn baseline_in_group_advantages(
    returns: &[f32],
    baseline: f32,
    scaling: StdScaling,
) -> Result<GroupAdvantages> {
    let all: Vec<f64> = returns
        .iter()
        .map(|&r| r as f64)
        .chain(std::iter::once(baseline as f64))
        .collect();
    normalise(returns, &all, scaling)
}

/// How per-token losses are reduced to a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LossNormalisation {
    /// Mean over each sequence's tokens, then over sequences (TRL `grpo`).
    #[default]
    Grpo,
    /// Mean over all tokens of the batch (TRL `bnpo`).
    Bnpo,
    /// Sum over tokens / (B · max_len) (TRL `dr_grpo`); `max_len` defaults to `T`.
    DrGrpo {
        /// The generation length budget; `None` uses the batch's width `T`.
        max_len: Option<usize>,
    },
    /// Sum over tokens / the global number of tokens (TRL `dapo`; across processes), given or
    /// this batch's count.
    Dapo {
        /// Tokens in the global batch; `None` uses this batch's.
        global_tokens: Option<f32>,
    },
}

/// Settings of the PPO-clip token loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PpoConfig {
    /// Lower clip ε_low: ratios below `1 − ε_low` are clipped.
    pub eps_low: f32,
    /// Upper clip ε_high (DAPO's clip-higher when > ε_low).
    pub eps_high: f32,
    /// Weight β of the k3 KL to a reference policy (0: no reference needed).
    pub beta: f32,
    /// Reduction to a scalar.
    pub normalisation: LossNormalisation,
}

impl Default for PpoConfig {
    /// TRL's defaults: ε = 0.2 both sides, β = 0, `grpo` normalisation.
    fn default() -> Self {
        Self {
            eps_low: 0.2,
            eps_high: 0.2,
            beta: 0.0,
            normalisation: LossNormalisation::Grpo,
        }
    }
}

/// Token-level PPO-clip loss,
///
/// ```text
/// ρ_t = exp(log π(y_t) − log π_old(y_t))
/// ℓ_t = −min(ρ_t·A, clip(ρ_t, 1 − ε_low, 1 + ε_high)·A) + β·(exp(ref_t − logπ_t) − (ref_t − logπ_t) − 1)
/// ```
///
/// reduced by [`LossNormalisation`]. `logp [B, T]` carries the gradient; `logp_old [B, T]`
/// (detached), `advantages [B]` (one per sequence), `mask [B, T]`, and `logp_ref [B, T]` when
/// β > 0. Non-finite tokens under the mask are dropped and counted (`nonfinite`).
/// Components: `clip_frac`, `ratio_mean`, `kl`, `nonfinite`.
pub fn ppo_clip_loss(
    logp: Tensor<2>,
    logp_old: Tensor<2>,
    advantages: Tensor<1>,
    mask: Tensor<2>,
    logp_ref: Option<Tensor<2>>,
    cfg: &PpoConfig,
) -> Result<LossOutput> {
    let [b, t] = logp.dims();
    for (name, x) in [("logp_old", &logp_old), ("mask", &mask)] {
        if x.dims() != [b, t] {
            return Err(SteerError::Shape {
                name,
                expected: vec![b, t],
                got: x.dims().to_vec(),
            });
        }
    }
    if advantages.dims() != [b] {
        return Err(SteerError::Shape {
            name: "advantages",
            expected: vec![b],
            got: advantages.dims().to_vec(),
        });
    }
    if cfg.beta != 0.0 && logp_ref.is_none() {
        return Err(SteerError::Invalid(
            "beta > 0 needs reference log-probabilities".into(),
        ));
    }
    let mut ok = logp
        .clone()
        .is_finite()
        .bool_and(logp_old.clone().is_finite())
        .bool_and(
            advantages
                .clone()
                .is_finite()
                .unsqueeze_dim::<2>(1)
                .expand([b, t]),
        );
    if let Some(r) = &logp_ref {
        if r.dims() != [b, t] {
            return Err(SteerError::Shape {
                name: "logp_ref",
                expected: vec![b, t],
                got: r.dims().to_vec(),
            });
        }
        ok = ok.bool_and(r.clone().is_finite());
    }
    let bad = ok.clone().bool_not();
    let mask_bad = mask.clone().is_finite().bool_not();
    let mask = mask.mask_fill(mask_bad, 0.0);
    let m = mask.clone() * ok.float();
    let dropped = (mask - m.clone()).sum();
    let logp = logp.mask_fill(bad.clone(), 0.0);
    let old = logp_old.mask_fill(bad.clone(), 0.0).detach();
    let adv_ok = advantages.clone().is_finite().bool_not();
    let adv = advantages
        .mask_fill(adv_ok, 0.0)
        .detach()
        .unsqueeze_dim::<2>(1)
        .expand([b, t]);
    let ratio = (logp.clone() - old).exp();
    let clipped = ratio.clone().clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high);
    let unclipped_term = ratio.clone() * adv.clone();
    let clipped_term = clipped * adv;
    let mut per_token = unclipped_term.clone().min_pair(clipped_term.clone()).neg();
    let clip_frac = masked_mean(unclipped_term.not_equal(clipped_term).float(), m.clone());
    let mut kl_value = Tensor::<1>::zeros([1], &per_token.device());
    if let (Some(r), true) = (logp_ref, cfg.beta != 0.0) {
        let d = r.mask_fill(bad, 0.0).detach() - logp;
        let kl = d.clone().exp() - d - 1.0;
        kl_value = masked_mean(kl.clone(), m.clone()).detach();
        per_token = per_token + kl * cfg.beta;
    }
    let summed = per_token * m.clone();
    let loss = match cfg.normalisation {
        LossNormalisation::Grpo => (summed.sum_dim(1).reshape([b])
            / m.clone().sum_dim(1).reshape([b]).clamp_min(1.0))
        .mean(),
        LossNormalisation::Bnpo => summed.sum() / m.clone().sum().clamp_min(1.0),
        LossNormalisation::DrGrpo { max_len } => {
            summed.sum() / (b * max_len.unwrap_or(t)).max(1) as f32
        }
        LossNormalisation::Dapo { global_tokens } => match global_tokens {
            Some(n) => summed.sum() / n.max(1.0),
            None => summed.sum() / m.clone().sum().clamp_min(1.0),
        },
    };
    Ok(LossOutput {
        loss,
        components: vec![
            ("clip_frac", clip_frac.detach()),
            ("ratio_mean", masked_mean(ratio, m).detach()),
            ("kl", kl_value),
            ("nonfinite", dropped),
        ],
    })
}

fn masked_mean(x: Tensor<2>, m: Tensor<2>) -> Tensor<1> {
    (x * m.clone()).sum() / m.sum().clamp_min(1.0)
}
