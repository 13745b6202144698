//! Rotary position embeddings exactly as Hugging Face computes them ("rotate half"), with
//! Llama-3 and LongRoPE (Phi-3) scaling and partial rotary dimensions.
//!
//! `inv_freq_i = θ^(−2i/d)` for `i < d/2` (optionally rescaled by Llama-3's rule), the angle of
//! position `p` is `p·inv_freq` repeated twice along the head dimension, and
//! `rope(x) = x·cos + rotate_half(x)·sin` with `rotate_half([x1, x2]) = [−x2, x1]`.
//! Burn's own `RotaryEncoding` pairs interleaved dimensions instead, which is a different model.

use burn::tensor::{Device, Tensor, TensorData};

use crate::config::{Llama3RopeScaling, LongRopeScaling, ModelConfig, RopeScaling};

/// Per-dimension inverse frequencies of one head's rotated part.
#[derive(Debug, Clone)]
pub struct Rope {
    inv_freq: Vec<f32>,
    /// LongRoPE: the frequencies used once a call reaches past the original context, and
    /// where that is.
    long: Option<(Vec<f32>, u32)>,
    /// Multiplies cos and sin (LongRoPE's attention factor; 1 otherwise).
    attention_factor: f32,
    rotary_dim: usize,
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

/// LongRoPE (`transformers`' `_compute_longrope_parameters`): `inv_freq_i = 1 / (e_i · θ^(2i/d))`
/// with `e` the short factors, or the long ones once a call's positions reach past
/// `original_max_position_embeddings`; cos and sin are multiplied by the attention factor,
/// `√(1 + ln f / ln original)` with `f = max_position_embeddings / original` unless given.
fn longrope(base: &[f32], s: &LongRopeScaling) -> (Vec<f32>, Vec<f32>) {
    let apply =
        |e: &[f64]| -> Vec<f32> { base.iter().zip(e).map(|(&f, &e)| f / e as f32).collect() };
    (apply(&s.short_factor), apply(&s.long_factor))
}

impl Rope {
    /// Builds the frequencies of a config.
    pub fn new(config: &ModelConfig) -> Self {
        let rd = config.rotary_dim();
        let mut inv_freq = Self::base_inv_freq(rd, config.rope_theta);
        let mut long = None;
        let mut attention_factor = 1.0;
        match &config.rope_scaling {
            None => {}
            Some(RopeScaling::Llama3(s)) => llama3_scale(&mut inv_freq, s),
            Some(RopeScaling::LongRope(s)) => {
                let (short, long_freq) = longrope(&inv_freq, s);
                inv_freq = short;
                long = Some((long_freq, s.original_max_position_embeddings as u32));
                attention_factor = s.attention_factor(config.max_position_embeddings) as f32;
            }
        }
        Self {
            inv_freq,
            long,
            attention_factor,
            rotary_dim: rd,
        }
    }

    /// Unscaled `inv_freq_i = θ^(−2i/d)`, `i < d/2`, computed as transformers does
    /// (`1 / θ^(arange(0, d, 2) / d)` in f32).
    pub fn base_inv_freq(dim: usize, theta: f64) -> Vec<f32> {
        (0..dim / 2)
            .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / dim as f32))
            .collect()
    }

    /// The number of leading head dimensions that are rotated.
    pub fn rotary_dim(&self) -> usize {
        self.rotary_dim
    }

    /// `cos` and `sin` tables for the given positions, each `[positions.len(), rotary_dim]`.
    /// With LongRoPE the long factors apply when `max(positions) + 1` exceeds the original
    /// context, per call, as transformers decides it.
    pub fn cos_sin(&self, positions: &[u32], device: &Device) -> (Tensor<2>, Tensor<2>) {
        let d = self.rotary_dim;
        let half = d / 2;
        let inv_freq = match &self.long {
            Some((long, original))
                if positions.iter().max().is_some_and(|&p| p + 1 > *original) =>
            {
                long
            }
            _ => &self.inv_freq,
        };
        let af = self.attention_factor;
        let mut cos = vec![0f32; positions.len() * d];
        let mut sin = vec![0f32; positions.len() * d];
        for (row, &p) in positions.iter().enumerate() {
            for (i, &f) in inv_freq.iter().enumerate() {
                // f32 product like transformers' float32 matmul of inv_freq and position ids.
                let angle = p as f32 * f;
                let (s, c) = angle.sin_cos();
                let (c, s) = (c * af, s * af);
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

/// `x·cos + rotate_half(x)·sin` for `x: [b, heads, t, d]` and `cos, sin: [b, 1, t, r]`; when
/// `r < d` (partial rotary) only the first `r` dimensions turn and the rest pass unchanged.
pub fn apply_rotary(x: Tensor<4>, cos: Tensor<4>, sin: Tensor<4>) -> Tensor<4> {
    let [b, h, t, d] = x.dims();
    let r = cos.dims()[3];
    let (rot, pass) = if r < d {
        (
            x.clone().slice([0..b, 0..h, 0..t, 0..r]),
            Some(x.slice([0..b, 0..h, 0..t, r..d])),
        )
    } else {
        (x, None)
    };
    let x1 = rot.clone().slice([0..b, 0..h, 0..t, 0..r / 2]);
    let x2 = rot.clone().slice([0..b, 0..h, 0..t, r / 2..r]);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    let out = rot * cos + rotated * sin;
    match pass {
        Some(p) => Tensor::cat(vec![out, p], 3),
        None => out,
    }
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
