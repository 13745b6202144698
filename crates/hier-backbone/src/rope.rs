//! Rotary position embeddings exactly as Hugging Face computes them ("rotate half").
//!
//! `inv_freq_i = θ^(−2i/d)` for `i < d/2` (optionally rescaled by Llama-3's rule), the angle of
//! position `p` is `p·inv_freq` repeated twice along the head dimension, and
//! `rope(x) = x·cos + rotate_half(x)·sin` with `rotate_half([x1, x2]) = [−x2, x1]`.
//! Burn's own `RotaryEncoding` pairs interleaved dimensions instead, which is a different model.

use burn::tensor::{Device, Tensor, TensorData};

use crate::config::{Llama3RopeScaling, ModelConfig};

/// Per-dimension inverse frequencies of one head.
#[derive(Debug, Clone)]
pub struct Rope {
    inv_freq: Vec<f32>,
    head_dim: usize,
}

/// Applies Llama-3's wavelength-dependent scaling to `inv_freq` (as `transformers`'
/// `_compute_llama3_parameters`): long wavelengths are divided by `factor`, short ones kept, and
/// the band between is interpolated.
pub(crate) fn llama3_scale(inv_freq: &mut [f32], s: &Llama3RopeScaling) {
    let low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
    let high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
    for f in inv_freq.iter_mut() {
        let freq = *f as f64;
        let wavelen = 2.0 * std::f64::consts::PI / freq;
        let scaled = if wavelen > low_wavelen {
            freq / s.factor
        } else {
            freq
        };
        // transformers: neither shorter than the high-frequency nor longer than the low-frequency bound.
        let medium = (high_wavelen..=low_wavelen).contains(&wavelen);
        *f = if medium {
            let smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor)
                / (s.high_freq_factor - s.low_freq_factor);
            ((1.0 - smooth) * scaled / s.factor + smooth * scaled) as f32
        } else {
            scaled as f32
        };
    }
}

impl Rope {
    /// Builds the frequencies of a config.
    pub fn new(config: &ModelConfig) -> Self {
        let d = config.head_dim;
        let mut inv_freq = Self::base_inv_freq(d, config.rope_theta);
        if let Some(s) = &config.rope_scaling {
            llama3_scale(&mut inv_freq, s);
        }
        Self {
            inv_freq,
            head_dim: d,
        }
    }

    /// Unscaled `inv_freq_i = θ^(−2i/d)`, `i < d/2`.
    pub fn base_inv_freq(head_dim: usize, theta: f64) -> Vec<f32> {
        (0..head_dim / 2)
            .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / head_dim as f32))
            .collect()
    }

    /// `cos` and `sin` tables for the given positions, each `[positions.len(), head_dim]`.
    pub fn cos_sin(&self, positions: &[u32], device: &Device) -> (Tensor<2>, Tensor<2>) {
        let d = self.head_dim;
        let half = d / 2;
        let mut cos = vec![0f32; positions.len() * d];
        let mut sin = vec![0f32; positions.len() * d];
        for (row, &p) in positions.iter().enumerate() {
            for (i, &f) in self.inv_freq.iter().enumerate() {
                // f32 product like transformers' float32 matmul of inv_freq and position ids.
                let angle = p as f32 * f;
                let (s, c) = angle.sin_cos();
                cos[row * d + i] = c;
                cos[row * d + i + half] = c;
                sin[row * d + i] = s;
                sin[row * d + i + half] = s;
            }
        }
        let shape = [positions.len(), d];
        (
            Tensor::from_data(TensorData::new(cos, shape), device),
            Tensor::from_data(TensorData::new(sin, shape), device),
        )
    }
}

/// `x·cos + rotate_half(x)·sin` for `x: [b, heads, t, d]` and `cos, sin: [b, 1, t, d]`.
pub fn apply_rotary(x: Tensor<4>, cos: Tensor<4>, sin: Tensor<4>) -> Tensor<4> {
    let [b, h, t, d] = x.dims();
    let x1 = x.clone().slice([0..b, 0..h, 0..t, 0..d / 2]);
    let x2 = x.clone().slice([0..b, 0..h, 0..t, d / 2..d]);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    x * cos + rotated * sin
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_scaling_matches_hand_values() {
        // Three frequencies: one short wavelength (kept), one long (divided by factor), one between.
        let s = Llama3RopeScaling {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        };
        let two_pi = 2.0 * std::f64::consts::PI;
        let mut f = vec![
            (two_pi / 100.0) as f32,
            (two_pi / 20000.0) as f32,
            (two_pi / 4096.0) as f32,
        ];
        llama3_scale(&mut f, &s);
        assert!((f[0] as f64 - two_pi / 100.0).abs() < 1e-7);
        assert!((f[1] as f64 - two_pi / 20000.0 / 8.0).abs() < 1e-9);
        // wavelen 4096: smooth = (8192/4096 - 1)/(4 - 1) = 1/3
        let freq = two_pi / 4096.0;
        let want = (1.0 - 1.0 / 3.0) * freq / 8.0 + (1.0 / 3.0) * freq;
        assert!((f[2] as f64 - want).abs() < 1e-9, "{} vs {want}", f[2]);
    }
}
