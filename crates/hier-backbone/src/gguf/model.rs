//! A GGUF file as a model: its hyper-parameters as a [`ModelConfig`] and its tensors under
//! their Hugging Face names and in HF layout (a [`TensorSource`]).
//!
//! Architectures: `llama` (Llama 1–3, Mistral, SmolLM), `qwen2` and `qwen3` (per-head q/k
//! norms `attn_q_norm`/`attn_k_norm`, head width from `attention.key_length`). llama.cpp's converter
//! permutes the rows of a `llama` model's q and k projections so that its interleaved RoPE
//! matches HF's rotate-half RoPE; [`unpermute_rows`] undoes that. `qwen2`/`qwen3` files are
//! stored as HF has them (llama.cpp runs them with NeoX-style RoPE). Llama-3.1-style RoPE scaling is
//! stored as per-frequency divisors in `rope_freqs.weight`; they are matched against
//! Llama-3's rule to recover its parameters, and refused when they match none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::file::GgufFile;
use crate::config::{Family, Llama3RopeScaling, ModelConfig, RopeScaling};
use crate::error::{BackboneError, Result};
use crate::packed::PackedWeight;
use crate::weights::{HostTensor, InitKind, TensorSource};

/// Architectures this crate reads from GGUF.
pub const ARCHITECTURES: &str = "llama, qwen2, qwen3";

/// Per-architecture metadata keys (after `<arch>.`) that we read or that are harmless.
const KNOWN_ARCH_KEYS: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.key_length",
    "attention.value_length",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.original_context_length",
    "rope.scaling.finetuned",
    "vocab_size",
    "expert_count",
    "expert_used_count",
];

impl GgufFile {
    pub(crate) fn meta_err(&self, key: &str, msg: impl std::fmt::Display) -> BackboneError {
        BackboneError::Gguf {
            path: self.path.clone(),
            msg: format!("metadata `{key}`: {msg}"),
        }
    }

    /// A required string.
    pub(crate) fn str_key(&self, key: &str) -> Result<&str> {
        self.get(key)
            .ok_or_else(|| self.meta_err(key, "missing"))?
            .as_str()
            .ok_or_else(|| self.meta_err(key, "not a string"))
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .and_then(|i| usize::try_from(i).ok())
                .map(Some)
                .ok_or_else(|| {
                    self.meta_err(
                        key,
                        format!("expected a non-negative integer, got {}", v.describe()),
                    )
                }),
        }
    }

    fn usize_key(&self, key: &str) -> Result<usize> {
        self.opt_usize(key)?
            .ok_or_else(|| self.meta_err(key, "missing"))
    }

    fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                self.meta_err(key, format!("expected a number, got {}", v.describe()))
            }),
        }
    }

    /// `general.architecture`, checked to be one we read.
    pub fn architecture(&self) -> Result<Family> {
        let key = "general.architecture";
        match self.str_key(key)? {
            "llama" => Ok(Family::Llama),
            "qwen2" => Ok(Family::Qwen2),
            "qwen3" => Ok(Family::Qwen3),
            other => Err(self.meta_err(
                key,
                format!("architecture `{other}` is not supported (supported: {ARCHITECTURES})"),
            )),
        }
    }

    /// The model's hyper-parameters from metadata (and from which tensors exist: biases, a
    /// separate output head).
    pub fn model_config(&self) -> Result<ModelConfig> {
        let family = self.architecture()?;
        let arch = family.model_type();
        let k = |s: &str| format!("{arch}.{s}");
        for key in self.metadata.keys() {
            if let Some(rest) = key.strip_prefix(&format!("{arch}."))
                && !KNOWN_ARCH_KEYS.contains(&rest)
            {
                return Err(self.meta_err(
                    key,
                    "unknown hyper-parameter for this architecture; refusing to guess its meaning",
                ));
            }
        }
        for key in ["expert_count", "expert_used_count"] {
            if self.opt_usize(&k(key))?.unwrap_or(0) > 0 {
                return Err(self.meta_err(&k(key), "mixture-of-experts models are not supported"));
            }
        }
        let hidden_size = self.usize_key(&k("embedding_length"))?;
        let heads = self.usize_key(&k("attention.head_count"))?;
        let kv_key = k("attention.head_count_kv");
        if self.get(&kv_key).is_some_and(|v| v.as_array().is_some()) {
            return Err(self.meta_err(&kv_key, "per-layer head counts are not supported"));
        }
        let kv_heads = self.opt_usize(&kv_key)?.unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(self.meta_err(
                &kv_key,
                format!("{kv_heads} must divide the {heads} attention heads"),
            ));
        }
        let head_dim = match self.opt_usize(&k("attention.key_length"))? {
            Some(d) => d,
            None => hidden_size / heads,
        };
        if let Some(v) = self.opt_usize(&k("attention.value_length"))?
            && v != head_dim
        {
            return Err(self.meta_err(
                &k("attention.value_length"),
                format!("{v} differs from the key length {head_dim}; not supported"),
            ));
        }
        if let Some(r) = self.opt_usize(&k("rope.dimension_count"))?
            && r != head_dim
        {
            return Err(self.meta_err(
                &k("rope.dimension_count"),
                format!(
                    "RoPE on {r} of {head_dim} head dimensions (partial rotary) is not supported"
                ),
            ));
        }
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(self.meta_err(
                &k("attention.key_length"),
                format!("head dimension {head_dim} must be even and positive"),
            ));
        }
        if let Some(v) = self.get(&k("rope.scaling.type")) {
            let t = v.as_str().unwrap_or("");
            if t != "none" {
                return Err(self.meta_err(
                    &k("rope.scaling.type"),
                    format!("RoPE scaling `{}` is not supported", v.describe()),
                ));
            }
        }
        let embed = self
            .tensor("token_embd.weight")
            .ok_or_else(|| self.missing("token_embd.weight"))?;
        let vocab_size = embed.dims.get(1).copied().unwrap_or(0);
        if let Some(v) = self.opt_usize(&k("vocab_size"))?
            && v != vocab_size
        {
            return Err(self.meta_err(
                &k("vocab_size"),
                format!("{v} disagrees with token_embd.weight's {vocab_size} rows"),
            ));
        }
        let has = |name: &str| self.tensor(name).is_some();
        let qkv_bias = has("blk.0.attn_q.bias");
        let o_bias = has("blk.0.attn_output.bias");
        let mlp_bias = has("blk.0.ffn_gate.bias");
        match family {
            Family::Qwen2 if !qkv_bias || o_bias || mlp_bias => {
                return Err(self.meta_err(
                    "general.architecture",
                    "a qwen2 model has q/k/v biases and no others; this file's biases differ",
                ));
            }
            Family::Qwen3 if qkv_bias != o_bias || mlp_bias => {
                return Err(self.meta_err(
                    "general.architecture",
                    "a qwen3 model has biases on all of q/k/v/o or none, and none in its MLP",
                ));
            }
            Family::Qwen3 if !has("blk.0.attn_q_norm.weight") => {
                return Err(self.missing("blk.0.attn_q_norm.weight"));
            }
            Family::Llama if qkv_bias != o_bias => {
                return Err(self.meta_err(
                    "general.architecture",
                    "a llama model has biases on all of q/k/v/o or none (attention_bias)",
                ));
            }
            _ => {}
        }
        let rope_theta = self.opt_f64(&k("rope.freq_base"))?.unwrap_or(10_000.0);
        let tok = |s: &str| -> Result<Option<u32>> {
            Ok(self
                .opt_usize(&format!("tokenizer.ggml.{s}"))?
                .map(|v| v as u32))
        };
        let mut config = ModelConfig {
            family,
            vocab_size,
            hidden_size,
            intermediate_size: self.usize_key(&k("feed_forward_length"))?,
            num_hidden_layers: self.usize_key(&k("block_count"))?,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            head_dim,
            rms_norm_eps: self
                .opt_f64(&k("attention.layer_norm_rms_epsilon"))?
                .ok_or_else(|| self.meta_err(&k("attention.layer_norm_rms_epsilon"), "missing"))?,
            rope_theta,
            rope_scaling: None,
            partial_rotary_factor: 1.0,
            qk_norm: family == Family::Qwen3,
            fused_projections: false,
            max_position_embeddings: self.opt_usize(&k("context_length"))?.unwrap_or(2048),
            tie_word_embeddings: !has("output.weight"),
            qkv_bias,
            o_bias,
            mlp_bias,
            sliding_window: None,
            bos_token_id: tok("bos_token_id")?,
            eos_token_ids: tok("eos_token_id")?.into_iter().collect(),
            pad_token_id: tok("padding_token_id")?,
        };
        if let Some(t) = self.tensor("rope_freqs.weight") {
            let factors = self.dequantize(t)?;
            config.rope_scaling = Some(RopeScaling::Llama3(
                self.llama3_scaling_from(&config, &factors)?,
            ));
        }
        Ok(config)
    }

    fn missing(&self, name: &str) -> BackboneError {
        BackboneError::MissingTensor {
            path: self.path.clone(),
            name: name.into(),
        }
    }

    /// Finds the Llama-3 RoPE scaling whose per-frequency divisors are `factors`.
    fn llama3_scaling_from(
        &self,
        config: &ModelConfig,
        factors: &[f32],
    ) -> Result<Llama3RopeScaling> {
        let arch = config.family.model_type();
        let original = self
            .opt_usize(&format!("{arch}.rope.scaling.original_context_length"))?
            .map_or(8192.0, |v| v as f64);
        let stated = self.opt_f64(&format!("{arch}.rope.scaling.factor"))?;
        let base = crate::rope::Rope::base_inv_freq(config.head_dim, config.rope_theta);
        if factors.len() != base.len() {
            return Err(self.meta_err(
                "rope_freqs.weight",
                format!("{} factors for {} frequencies", factors.len(), base.len()),
            ));
        }
        let candidates: Vec<f64> = match stated {
            Some(f) => vec![f],
            None => vec![8.0, 32.0, 16.0, 4.0, 2.0],
        };
        for factor in candidates {
            let s = Llama3RopeScaling {
                factor,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: original,
            };
            let mut scaled = base.clone();
            crate::rope::llama3_scale(&mut scaled, &s);
            let fits = base
                .iter()
                .zip(&scaled)
                .zip(factors)
                .all(|((b, s), f)| ((b / s) - f).abs() <= 1e-3 * f.abs());
            if fits {
                return Ok(s);
            }
        }
        Err(BackboneError::Gguf {
            path: self.path.clone(),
            msg: "tensor `rope_freqs.weight`: its RoPE frequency factors match no Llama-3 scaling \
                  (low/high frequency factors 1/4); other scalings are not supported"
                .into(),
        })
    }
}

/// Whole-model tensors: `(llama.cpp stem, HF stem)`; each is followed by `.weight`.
const MODEL_TENSORS: [(&str, &str); 3] = [
    ("token_embd", "model.embed_tokens"),
    ("output_norm", "model.norm"),
    ("output", "lm_head"),
];

/// Per-layer modules: `(blk.N.<llama.cpp>, model.layers.N.<HF>)`.
const LAYER_MODULES: [(&str, &str); 11] = [
    ("attn_norm", "input_layernorm"),
    ("ffn_norm", "post_attention_layernorm"),
    ("attn_q_norm", "self_attn.q_norm"),
    ("attn_k_norm", "self_attn.k_norm"),
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
];

/// Renames a tensor between llama.cpp's and HF's names (`to_hf` picks the direction), by the
/// two tables above; `None` for a tensor the decoder does not have.
fn rename(name: &str, to_hf: bool) -> Option<String> {
    let pick = |&(g, h): &(&'static str, &'static str)| if to_hf { (g, h) } else { (h, g) };
    let (layers_from, layers_to) = if to_hf {
        ("blk.", "model.layers.")
    } else {
        ("model.layers.", "blk.")
    };
    let (stem, kind) = name.rsplit_once('.')?;
    if let Some((_, to)) = MODEL_TENSORS
        .iter()
        .map(pick)
        .find(|(from, _)| *from == stem)
    {
        return Some(format!("{to}.{kind}"));
    }
    let (layer, module) = stem.strip_prefix(layers_from)?.split_once('.')?;
    let (_, to) = LAYER_MODULES
        .iter()
        .map(pick)
        .find(|(from, _)| *from == module)?;
    Some(format!("{layers_to}{layer}.{to}.{kind}"))
}

/// The GGUF name of an HF tensor name.
fn gguf_name(hf: &str) -> Option<String> {
    rename(hf, false)
}

/// The HF name of a GGUF tensor name.
fn hf_name(g: &str) -> Option<String> {
    rename(g, true)
}

/// Undoes llama.cpp's q/k row permutation: within each head of `head_dim` rows, llama.cpp
/// stores row `2i + j` where HF has row `j·head_dim/2 + i` (`j ∈ {0, 1}`, `i < head_dim/2`).
/// `data` is row-major with rows of `cols` values (1 for a bias; a row's bytes for a weight
/// kept in its blocks).
pub fn unpermute_rows<T: Copy + Default>(
    data: &[T],
    heads: usize,
    head_dim: usize,
    cols: usize,
) -> Vec<T> {
    let half = head_dim / 2;
    let mut out = vec![T::default(); data.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = (h * head_dim + 2 * i + j) * cols;
                let dst = (h * head_dim + j * half + i) * cols;
                out[dst..dst + cols].copy_from_slice(&data[src..src + cols]);
            }
        }
    }
    out
}

/// The tensors of a GGUF file, served under HF names and dequantised on demand.
pub struct GgufSource<'a> {
    file: &'a GgufFile,
    config: ModelConfig,
    taken: BTreeSet<String>,
}

impl<'a> GgufSource<'a> {
    /// Serves `file`'s tensors for a model of `config` (from [`GgufFile::model_config`]).
    pub fn new(file: &'a GgufFile, config: ModelConfig) -> Self {
        Self {
            file,
            config,
            taken: BTreeSet::new(),
        }
    }

    /// Every tensor under its HF name (what `convert` writes).
    pub fn all_hf(mut self) -> Result<BTreeMap<String, HostTensor>> {
        let mut out = BTreeMap::new();
        let names: Vec<String> = self.file.tensors.iter().map(|t| t.name.clone()).collect();
        for g in names {
            if g == "rope_freqs.weight" {
                continue;
            }
            let hf = hf_name(&g).ok_or_else(|| BackboneError::UnexpectedTensors {
                path: self.file.path.clone(),
                names: vec![g.clone()],
            })?;
            let shape = self.file.tensor(&g).expect("listed").shape();
            let t = self.take(&hf, &shape, InitKind::Normal)?;
            out.insert(hf, t);
        }
        self.finish()?;
        Ok(out)
    }
}

impl GgufSource<'_> {
    /// The heads of a tensor whose rows llama.cpp permuted — a llama model's q and k
    /// (weights and biases) — or `None`.
    fn permuted_heads(&self, gguf_name: &str) -> Option<usize> {
        if self.config.family != Family::Llama {
            return None;
        }
        if gguf_name.contains(".attn_q.") {
            Some(self.config.num_attention_heads)
        } else if gguf_name.contains(".attn_k.") {
            Some(self.config.num_key_value_heads)
        } else {
            None
        }
    }
}

impl TensorSource for GgufSource<'_> {
    fn take(&mut self, name: &str, shape: &[usize], _kind: InitKind) -> Result<HostTensor> {
        let path: PathBuf = self.file.path.clone();
        let g = gguf_name(name).ok_or_else(|| BackboneError::MissingTensor {
            path: path.clone(),
            name: name.into(),
        })?;
        let info = self
            .file
            .tensor(&g)
            .ok_or_else(|| BackboneError::MissingTensor {
                path: path.clone(),
                name: format!("{g} (HF {name})"),
            })?;
        let got = info.shape();
        if got != shape {
            return Err(BackboneError::ShapeMismatch {
                path,
                name: format!("{g} (HF {name})"),
                got,
                expected: shape.to_vec(),
            });
        }
        let mut data = self.file.dequantize(info)?;
        if let Some(heads) = self.permuted_heads(&g) {
            let cols = if shape.len() == 2 { shape[1] } else { 1 };
            data = unpermute_rows(&data, heads, self.config.head_dim, cols);
        }
        self.taken.insert(g);
        Ok(HostTensor {
            shape: shape.to_vec(),
            data,
        })
    }

    fn packed(&mut self, name: &str) -> Result<Option<PackedWeight>> {
        let Some(info) = gguf_name(name).and_then(|g| self.file.tensor(&g)) else {
            return Ok(None);
        };
        if !PackedWeight::supports(info.ty) || info.dims.len() != 2 {
            return Ok(None);
        }
        let mut bytes = self.file.tensor_bytes(info)?.to_vec();
        let (cols, rows) = (info.dims[0], info.dims[1]);
        if let Some(heads) = self.permuted_heads(&info.name) {
            let row_bytes = bytes.len() / rows.max(1);
            bytes = unpermute_rows(&bytes, heads, self.config.head_dim, row_bytes);
        }
        let what = format!("{} (HF {name}) in {}", info.name, self.file.path.display());
        PackedWeight::new(info.ty, rows, cols, bytes, &what).map(Some)
    }

    fn finish(self) -> Result<()> {
        let names: Vec<String> = self
            .file
            .tensors
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| !self.taken.contains(n) && n != "rope_freqs.weight")
            .collect();
        if names.is_empty() {
            Ok(())
        } else {
            Err(BackboneError::UnexpectedTensors {
                path: self.file.path.clone(),
                names,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for hf in [
            "model.embed_tokens.weight",
            "lm_head.weight",
            "model.norm.weight",
            "model.layers.3.self_attn.q_proj.bias",
            "model.layers.12.mlp.down_proj.weight",
            "model.layers.0.post_attention_layernorm.weight",
        ] {
            let g = gguf_name(hf).unwrap();
            assert_eq!(hf_name(&g).as_deref(), Some(hf), "{g}");
        }
        assert_eq!(
            gguf_name("model.layers.0.mlp.gate_proj.weight").unwrap(),
            "blk.0.ffn_gate.weight"
        );
    }

    /// llama.cpp's permutation, written as its converter defines it:
    /// `w.reshape(heads, 2, hd/2, cols).swapaxes(1, 2).reshape(rows, cols)`.
    #[test]
    fn unpermute_inverts_llama_cpp_permute() {
        let (heads, hd, cols) = (3, 8, 5);
        let w: Vec<f32> = (0..heads * hd * cols).map(|x| x as f32).collect();
        let mut permuted = vec![0f32; w.len()];
        for h in 0..heads {
            for two in 0..2 {
                for i in 0..hd / 2 {
                    let src = (h * hd + two * (hd / 2) + i) * cols;
                    let dst = (h * hd + i * 2 + two) * cols;
                    permuted[dst..dst + cols].copy_from_slice(&w[src..src + cols]);
                }
            }
        }
        assert_ne!(permuted, w);
        assert_eq!(unpermute_rows(&permuted, heads, hd, cols), w);
    }
}
