//! The fast path: a yes/no question answered by one forward pass.
//!
//! ```text
//! z   = log p(yes) − log p(no) = logit_yes − logit_no        (the softmax normaliser cancels)
//! v   = σ(z)                                                 priority
//! p_t = σ(logit v − logit τ) = σ(z − logit τ)                trigger probability
//! ```
//!
//! `p_t` is computed from `z` directly with a sigmoid that never overflows, so a saturated `v`
//! (z = ±80) still gives an exact trigger probability. τ is a deployment knob: raising it makes
//! interventions rarer without retraining.

use burn::tensor::{Int, Tensor, TensorData};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::error::{Result, SteerError};

/// `z = logits[:, yes] − logits[:, no]` for next-token logits `[B, V]`.
pub fn yes_no_log_odds(logits: Tensor<2>, yes_id: usize, no_id: usize) -> Result<Tensor<1>> {
    let [b, v] = logits.dims();
    if yes_id >= v || no_id >= v {
        return Err(SteerError::Invalid(format!(
            "token ids yes={yes_id}, no={no_id} outside the vocabulary of {v}"
        )));
    }
    let idx = Tensor::<2, Int>::from_data(
        TensorData::new([yes_id as i64, no_id as i64].repeat(b), [b, 2]),
        &logits.device(),
    );
    let pair = logits.gather(1, idx);
    let [yes, no] = [pair.clone().narrow(1, 0, 1), pair.narrow(1, 1, 1)];
    Ok((yes - no).reshape([b]))
}

/// `σ(x)` without overflow: `exp(−softplus(−x))`, `softplus(y) = max(y, 0) + log1p(exp(−|y|))`.
pub fn stable_sigmoid(x: Tensor<1>) -> Tensor<1> {
    softplus(x.neg()).neg().exp()
}

/// `log(1 + eˣ)` without overflow.
pub fn softplus(x: Tensor<1>) -> Tensor<1> {
    x.clone().clamp_min(0.0) + x.abs().neg().exp().log1p()
}

/// Priority `v = σ(z)`.
pub fn priority(z: Tensor<1>) -> Tensor<1> {
    stable_sigmoid(z)
}

/// `logit τ = ln(τ / (1 − τ))` for τ ∈ (0, 1).
pub fn logit(tau: f64) -> Result<f64> {
    if !(tau > 0.0 && tau < 1.0) {
        return Err(SteerError::Invalid(format!(
            "threshold tau {tau} is outside (0, 1)"
        )));
    }
    Ok((tau / (1.0 - tau)).ln())
}

/// Trigger probabilities `σ(z − logit τ)`, `[B]`.
pub fn trigger_probability(z: Tensor<1>, tau: f64) -> Result<Tensor<1>> {
    Ok(stable_sigmoid(z - logit(tau)? as f32))
}

/// Host form of the trigger probability, in f64.
pub fn trigger_probability_f64(z: f64, tau: f64) -> Result<f64> {
    let x = z - logit(tau)?;
    Ok(if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    })
}

/// The seeded Bernoulli gate: decides, per state, whether the slow path runs.
#[derive(Debug, Clone)]
pub struct Gate {
    rng: StdRng,
}

impl Gate {
    /// A gate whose decisions are fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// `true` with probability `p` (clamped to [0, 1]; NaN never triggers).
    pub fn decide(&mut self, p: f64) -> bool {
        let u: f64 = self.rng.random();
        p.is_finite() && u < p.clamp(0.0, 1.0)
    }
}
