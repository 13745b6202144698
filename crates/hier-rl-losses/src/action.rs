//! From token log-probabilities to action log-probabilities.
//!
//! System 2 emits an action as several tokens; its log-likelihood is
//!
//! ```text
//! mean:  log π(a) = Σ_t m_t·ℓ_t / Σ_t m_t        (default: length-normalised, as Multi²)
//! sum:   log π(a) = Σ_t m_t·ℓ_t
//! ```
//!
//! with `ℓ_t` the per-token log-probabilities `[B, T]` and `m_t ∈ {0,1}` the action mask.
//! Non-finite `ℓ_t` under the mask are dropped (see [`crate::finite`]); a row with an empty
//! mask has log-probability 0.

use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{LossError, Result};
use crate::finite::{all_finite, effective_mask, zero_where_bad};

/// How token log-probabilities combine into one action log-probability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reduction {
    /// Mean over the action's tokens (Multi²'s length normalisation).
    #[default]
    Mean,
    /// Sum over the action's tokens (the exact sequence log-likelihood).
    Sum,
}

/// `[B]` action log-probabilities, plus the number of dropped non-finite tokens.
pub fn action_logprobs(
    token_logprobs: Tensor<2>,
    mask: Tensor<2>,
    reduction: Reduction,
) -> Result<(Tensor<1>, Tensor<1>)> {
    let [b, t] = token_logprobs.dims();
    if mask.dims() != [b, t] {
        return Err(LossError::shape("mask", &[b, t], &mask.dims()));
    }
    let ok = all_finite(&[&token_logprobs]);
    let (m, dropped) = effective_mask(mask, &ok);
    let lp = zero_where_bad(token_logprobs, &ok);
    let total = (lp * m.clone()).sum_dim(1).reshape([b]);
    Ok(match reduction {
        Reduction::Sum => (total, dropped),
        Reduction::Mean => (total / m.sum_dim(1).reshape([b]).clamp_min(1.0), dropped),
    })
}

/// Rows `x[i, positions[i], ..]`: e.g. the hidden state at each action's last token, `[B, H]`
/// from `[B, T, H]`.
pub fn gather_at(x: Tensor<3>, positions: &[usize]) -> Result<Tensor<2>> {
    let [b, t, h] = x.dims();
    if positions.len() != b {
        return Err(LossError::Invalid(format!(
            "{} positions for a batch of {b}",
            positions.len()
        )));
    }
    if let Some(&p) = positions.iter().find(|&&p| p >= t) {
        return Err(LossError::Invalid(format!(
            "position {p} is outside the sequence length {t}"
        )));
    }
    let idx: Vec<i64> = positions
        .iter()
        .flat_map(|&p| std::iter::repeat_n(p as i64, h))
        .collect();
    let idx = Tensor::<3, Int>::from_data(TensorData::new(idx, [b, 1, h]), &x.device());
    Ok(x.gather(1, idx).reshape([b, h]))
}

/// The last position where each row's mask is 1 (the action's end), or an error for an empty row.
pub fn last_positions(mask: &[Vec<f32>]) -> Result<Vec<usize>> {
    mask.iter()
        .enumerate()
        .map(|(i, row)| {
            row.iter()
                .rposition(|&m| m > 0.0)
                .ok_or_else(|| LossError::Invalid(format!("row {i} has an empty action mask")))
        })
        .collect()
}
