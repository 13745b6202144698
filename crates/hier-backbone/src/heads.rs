//! Scalar heads on the backbone's hidden states: the Q and V critics of Multi²'s System 2.
//!
//! `head(h) = W₂·relu(W₁·h + b₁) + b₂`, with `W₁: H×H`, `W₂: H×1`, read at given positions
//! (typically the last token of the observation or of the action).

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::error::{BackboneError, Result};
use crate::param::named_param;
use crate::weights::{HostTensor, read_safetensors, write_safetensors};

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

    /// Width `H` the head reads.
    pub fn hidden_size(&self) -> usize {
        self.l1.weight.dims()[0]
    }

    /// The head's tensors under PyTorch's names for `nn.Sequential(Linear(H,H), ReLU(),
    /// Linear(H,1))` — `{prefix}.0.weight [H,H]`, `{prefix}.0.bias`, `{prefix}.2.weight [1,H]`,
    /// `{prefix}.2.bias` — with weights in PyTorch's `[out, in]` layout.
    pub fn host_tensors(&self, prefix: &str) -> BTreeMap<String, HostTensor> {
        let mut out = BTreeMap::new();
        for (k, lin) in [(0, &self.l1), (2, &self.l2)] {
            let w = HostTensor::from_tensor(lin.weight.val()).transposed();
            out.insert(format!("{prefix}.{k}.weight"), w);
            if let Some(b) = &lin.bias {
                out.insert(
                    format!("{prefix}.{k}.bias"),
                    HostTensor::from_tensor(b.val()),
                );
            }
        }
        out
    }

    /// Rebuilds a head from [`ValueHead::host_tensors`]'s names; `path` only names the source
    /// in errors. Every tensor must be present with the shape width `hidden` implies.
    pub fn from_host_tensors(
        tensors: &BTreeMap<String, HostTensor>,
        prefix: &str,
        hidden: usize,
        path: &Path,
        device: &Device,
    ) -> Result<Self> {
        let take = |name: String, expected: Vec<usize>| -> Result<HostTensor> {
            let t = tensors
                .get(&name)
                .ok_or_else(|| BackboneError::MissingTensor {
                    path: path.to_owned(),
                    name: name.clone(),
                })?;
            if t.shape != expected {
                return Err(BackboneError::ShapeMismatch {
                    path: path.to_owned(),
                    name,
                    got: t.shape.clone(),
                    expected,
                });
            }
            Ok(t.clone())
        };
        let linear = |k: usize, dout: usize| -> Result<Linear> {
            let w = take(format!("{prefix}.{k}.weight"), vec![dout, hidden])?.transposed();
            let b = take(format!("{prefix}.{k}.bias"), vec![dout])?;
            let mut lin = LinearConfig::new(hidden, dout).init(device);
            // Named ids: a head reloaded from a checkpoint keeps its optimizer state.
            lin.weight = named_param(
                &format!("{prefix}.{k}.weight"),
                Tensor::from_data(TensorData::new(w.data, [hidden, dout]), device),
                true,
            );
            lin.bias = Some(named_param(
                &format!("{prefix}.{k}.bias"),
                Tensor::from_data(TensorData::new(b.data, [dout]), device),
                true,
            ));
            Ok(lin)
        };
        Ok(Self {
            l1: linear(0, hidden)?,
            l2: linear(2, 1)?,
        })
    }

    /// Writes named heads to one safetensors file (atomically).
    pub fn save_all(heads: &[(&str, &ValueHead)], path: &Path) -> Result<()> {
        let mut all = BTreeMap::new();
        for (prefix, head) in heads {
            all.extend(head.host_tensors(prefix));
        }
        write_safetensors(path, &all)
    }

    /// Reads the heads named `prefixes` from a file written by [`ValueHead::save_all`].
    pub fn load_all(
        prefixes: &[&str],
        hidden: usize,
        path: &Path,
        device: &Device,
    ) -> Result<Vec<ValueHead>> {
        let tensors = read_safetensors(path)?;
        prefixes
            .iter()
            .map(|p| Self::from_host_tensors(&tensors, p, hidden, path, device))
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_round_trip_through_safetensors_in_pytorch_layout() {
        let device = Device::flex();
        let q = ValueHead::new(6, &device);
        let v = ValueHead::new(6, &device);
        let dir = std::env::temp_dir().join(format!("hier-heads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("heads.safetensors");
        ValueHead::save_all(&[("q", &q), ("v", &v)], &path).unwrap();
        let stored = read_safetensors(&path).unwrap();
        // PyTorch layout: the second layer's weight is [out = 1, in = H].
        assert_eq!(stored["q.2.weight"].shape, vec![1, 6]);
        assert_eq!(stored["v.0.bias"].shape, vec![6]);
        let back = ValueHead::load_all(&["q", "v"], 6, &path, &device).unwrap();
        let h = Tensor::<2>::from_data(
            TensorData::new((0..18).map(|i| i as f32 / 7.0 - 1.0).collect(), [3, 6]),
            &device,
        );
        for (a, b) in [(&q, &back[0]), (&v, &back[1])] {
            let x = HostTensor::from_tensor(a.forward(h.clone())).data;
            let y = HostTensor::from_tensor(b.forward(h.clone())).data;
            assert_eq!(x, y);
        }
        let err = ValueHead::load_all(&["q"], 5, &path, &device).unwrap_err();
        assert!(err.to_string().contains("q.0.weight"), "{err}");
        let err = ValueHead::load_all(&["critic"], 6, &path, &device).unwrap_err();
        assert!(
            err.to_string().contains("missing tensor `critic.0.weight`"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
