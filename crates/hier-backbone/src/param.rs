//! Parameters whose identity is their name.
//!
//! Burn keys optimizer state and gradients by `ParamId`, which is random by default. Deriving
//! the id from the tensor's Hugging Face name (FNV-1a) makes a model reloaded from safetensors
//! carry the same ids as the one that was saved, so a training run resumes with its optimizer
//! state instead of silently restarting the moments.

use burn::module::{Param, ParamId};
use burn::tensor::Tensor;

/// FNV-1a 64-bit hash of a name.
pub fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A parameter named `name`, trainable or frozen.
pub fn named_param<const D: usize>(
    name: &str,
    tensor: Tensor<D>,
    trainable: bool,
) -> Param<Tensor<D>> {
    Param::initialized(ParamId::from(name_hash(name)), tensor).set_require_grad(trainable)
}
