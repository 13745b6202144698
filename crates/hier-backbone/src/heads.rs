//! Scalar heads on the backbone's hidden states: the Q and V critics of Multi²'s System 2.
//!
//! `head(h) = W₂·relu(W₁·h + b₁) + b₂`, with `W₁: H×H`, `W₂: H×1`, read at given positions
//! (typically the last token of the observation or of the action).

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::error::{BackboneError, Result};

/// A two-layer MLP mapping a hidden state to one scalar.
#[derive(Module, Debug)]
pub struct ValueHead {
    /// `H → H`.
    pub l1: Linear,
    /// `H → 1`.
    pub l2: Linear,
}

impl ValueHead {
    /// A freshly initialised head for width `hidden`.
    pub fn new(hidden: usize, device: &Device) -> Self {
        Self {
            l1: LinearConfig::new(hidden, hidden).init(device),
            l2: LinearConfig::new(hidden, 1).init(device),
        }
    }

    /// Values `[n]` of hidden states `[n, H]`.
    pub fn forward(&self, h: Tensor<2>) -> Tensor<1> {
        let n = h.dims()[0];
        self.l2.forward(relu(self.l1.forward(h))).reshape([n])
    }

    /// Values `[b]` read from `hidden: [b, t, H]` at `positions[row]`.
    pub fn forward_at(&self, hidden: Tensor<3>, positions: &[usize]) -> Result<Tensor<1>> {
        Ok(self.forward(gather_positions(hidden, positions)?))
    }
}

/// Rows `hidden[row, positions[row], :]`, `[b, H]`.
pub fn gather_positions(hidden: Tensor<3>, positions: &[usize]) -> Result<Tensor<2>> {
    let [b, t, h] = hidden.dims();
    if positions.len() != b {
        return Err(BackboneError::Invalid(format!(
            "{} positions for a batch of {b}",
            positions.len()
        )));
    }
    if let Some(&p) = positions.iter().find(|&&p| p >= t) {
        return Err(BackboneError::Invalid(format!(
            "position {p} is past the sequence length {t}"
        )));
    }
    let idx: Vec<i64> = positions
        .iter()
        .flat_map(|&p| std::iter::repeat_n(p as i64, h))
        .collect();
    let idx = Tensor::<3, Int>::from_data(TensorData::new(idx, [b, 1, h]), &hidden.device());
    Ok(hidden.gather(1, idx).reshape([b, h]))
}
