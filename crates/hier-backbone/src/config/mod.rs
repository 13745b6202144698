//! Model configuration read from a Hugging Face `config.json`.
//!
//! Five families share one decoder: Llama (2/3.x, including `rope_scaling` of type `llama3`),
//! Qwen2/Qwen2.5 (bias on q/k/v, usually tied embeddings), Qwen3 (q/k RMSNorm per head, explicit
//! `head_dim`), Mistral (v0.3; no sliding window) and Phi-3/Phi-4 (fused projections, partial
//! rotary, LongRoPE).
//! Both spellings transformers has written are read: `rope_theta` + `rope_scaling` (4.x) and
//! `rope_parameters` (5.x). Fields known to change the computation in ways this crate does
//! not implement (soft-capping, partial rotary, experts, q/k norms, μP multipliers, an
//! unsupported RoPE type, ...) are errors naming the field, so a checkpoint that needs a
//! feature we lack fails loudly instead of computing something else; other unknown fields —
//! transformers' bookkeeping, which grows with every release — are ignored with one warning
//! that lists them.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::error::{BackboneError, Result, read_json};
use crate::lora::TargetModule;

mod rope_scaling;
use rope_scaling::parse_rope_object;
pub use rope_scaling::{Llama3RopeScaling, LongRopeScaling, RopeScaling};

/// The model family, from `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `model_type: "llama"` (`LlamaForCausalLM`).
    Llama,
    /// `model_type: "qwen2"` (`Qwen2ForCausalLM`).
    Qwen2,
    /// `model_type: "mistral"` (`MistralForCausalLM`).
    Mistral,
    /// `model_type: "qwen3"` (`Qwen3ForCausalLM`): q/k RMSNorm per head, explicit `head_dim`.
    Qwen3,
    /// `model_type: "phi3"` (`Phi3ForCausalLM`, also Phi-4): fused `qkv_proj` and
    /// `gate_up_proj`, partial rotary, LongRoPE.
    Phi3,
}

impl Family {
    /// The `model_type` string.
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Mistral => "mistral",
            Family::Qwen3 => "qwen3",
            Family::Phi3 => "phi3",
        }
    }
    /// The `architectures[0]` string.
    pub fn architecture(self) -> &'static str {
        match self {
            Family::Llama => "LlamaForCausalLM",
            Family::Qwen2 => "Qwen2ForCausalLM",
            Family::Mistral => "MistralForCausalLM",
            Family::Qwen3 => "Qwen3ForCausalLM",
            Family::Phi3 => "Phi3ForCausalLM",
        }
    }
}

/// A decoder-only Llama-family configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Which family (decides the tensor names that exist and the biases).
    pub family: Family,
    /// Vocabulary size (rows of `embed_tokens`).
    pub vocab_size: usize,
    /// Model width H.
    pub hidden_size: usize,
    /// SwiGLU inner width.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (GQA when fewer than query heads).
    pub num_key_value_heads: usize,
    /// Per-head width (`head_dim` if given, else `hidden_size / num_attention_heads`).
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE base θ.
    pub rope_theta: f64,
    /// Optional RoPE scaling.
    pub rope_scaling: Option<RopeScaling>,
    /// The fraction of each head's dimensions that RoPE rotates (Phi-3; 1 elsewhere).
    pub partial_rotary_factor: f64,
    /// Qwen3's RMSNorm of each query and key head before RoPE.
    pub qk_norm: bool,
    /// Phi-3's fused `qkv_proj` and `gate_up_proj`.
    pub fused_projections: bool,
    /// Longest supported position.
    pub max_position_embeddings: usize,
    /// `lm_head` shares `embed_tokens`' weight.
    pub tie_word_embeddings: bool,
    /// Bias on q/k/v projections (Qwen2 always; Llama when `attention_bias`).
    pub qkv_bias: bool,
    /// Bias on o_proj (Llama when `attention_bias`).
    pub o_bias: bool,
    /// Bias on gate/up/down (Llama `mlp_bias`).
    pub mlp_bias: bool,
    /// Mistral's sliding window; sequences longer than it are refused (not implemented).
    pub sliding_window: Option<usize>,
    /// Beginning-of-sequence token.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence token(s).
    pub eos_token_ids: Vec<u32>,
    /// Padding token, if any.
    pub pad_token_id: Option<u32>,
}

/// Fields transformers writes that carry no meaning for the forward pass.
const METADATA_FIELDS: &[&str] = &[
    "_name_or_path",
    "architectures",
    "model_type",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "use_cache",
    "initializer_range",
    "attention_dropout",
    "pretraining_tp",
    "return_dict",
    "output_hidden_states",
    "output_attentions",
    "torchscript",
    "use_bfloat16",
    "tf_legacy_loss",
    "pruned_heads",
    "chunk_size_feed_forward",
    "is_encoder_decoder",
    "is_decoder",
    "add_cross_attention",
    "cross_attention_hidden_size",
    "tie_encoder_decoder",
    "finetuning_task",
    "id2label",
    "label2id",
    "problem_type",
    "tokenizer_class",
    "prefix",
    "sep_token_id",
    "decoder_start_token_id",
    "task_specific_params",
    "max_length",
    "min_length",
    "do_sample",
    "early_stopping",
    "num_beams",
    "num_beam_groups",
    "diversity_penalty",
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size",
    "bad_words_ids",
    "num_return_sequences",
    "output_scores",
    "return_dict_in_generate",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "remove_invalid_values",
    "exponential_decay_length_penalty",
    "suppress_tokens",
    "begin_suppress_tokens",
    "max_window_layers",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "unk_token_id",
    "output_router_logits",
    "_commit_hash",
    "_attn_implementation_autoset",
    "mlp_dropout",
    "embd_pdrop",
    "resid_pdrop",
    "rope_interleaved",
];

/// Fields that change the computation in ways this crate does not implement: refused (naming
/// the field) unless they hold their neutral value (`null`, `false`, `0`, or the value below).
const UNSUPPORTED_FIELDS: &[(&str, Option<f64>)] = &[
    ("partial_rotary_factor", Some(1.0)),
    ("attn_logit_softcapping", None),
    ("final_logit_softcapping", None),
    ("query_pre_attn_scalar", None),
    ("num_experts", None),
    ("num_local_experts", None),
    ("n_routed_experts", None),
    ("use_qk_norm", None),
    ("qk_layernorm", None),
    ("embedding_multiplier", Some(1.0)),
    ("residual_multiplier", Some(1.0)),
    ("attention_multiplier", None),
    ("logits_scaling", Some(1.0)),
    ("no_rope_layers", None),
    ("attention_chunk_size", None),
    ("hidden_activation", None),
    ("use_parallel_residual", None),
    ("quantization_config", None),
];

/// Whether a value is neutral for an unsupported field.
fn is_neutral(v: &Value, neutral: Option<f64>) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Number(n) => n.as_f64() == Some(0.0) || n.as_f64() == neutral,
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn as_usize(path: &Path, m: &Map<String, Value>, key: &str) -> Result<usize> {
    m.get(key)
        .and_then(Value::as_u64)
        .map(|v| v as usize)
        .ok_or_else(|| BackboneError::config(path, key, "missing or not a non-negative integer"))
}

fn opt_usize(path: &Path, m: &Map<String, Value>, key: &str) -> Result<Option<usize>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(|v| Some(v as usize)).ok_or_else(|| {
            BackboneError::config(path, key, format!("expected an integer, got {v}"))
        }),
    }
}

fn opt_f64(path: &Path, m: &Map<String, Value>, key: &str) -> Result<Option<f64>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| BackboneError::config(path, key, format!("expected a number, got {v}"))),
    }
}

fn opt_bool(path: &Path, m: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or_else(|| {
            BackboneError::config(path, key, format!("expected a boolean, got {v}"))
        }),
    }
}

fn token_ids(path: &Path, m: &Map<String, Value>, key: &str) -> Result<Vec<u32>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Number(n)) => Ok(vec![
            n.as_u64()
                .ok_or_else(|| BackboneError::config(path, key, "not a token id"))?
                as u32,
        ]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_u64()
                    .map(|x| x as u32)
                    .ok_or_else(|| BackboneError::config(path, key, "not a token id"))
            })
            .collect(),
        Some(v) => Err(BackboneError::config(
            path,
            key,
            format!("expected a token id or a list, got {v}"),
        )),
    }
}

/// Says once per process and file which `config.json` fields were ignored: transformers writes
/// bookkeeping fields of its own (and of newer versions) that do not change the computation.
fn warn_ignored(path: &Path, keys: &[String]) {
    use std::sync::Mutex;
    static WARNED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    if keys.is_empty() {
        return;
    }
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.iter().any(|p| p == path) {
        return;
    }
    warned.push(path.to_path_buf());
    tracing::warn!(
        "{}: ignoring field(s) {} (not known to change the computation)",
        path.display(),
        keys.join(", ")
    );
}

impl ModelConfig {
    /// The bench config of docs/PERFORMANCE.md: a Llama-style decoder with vocabulary 2048,
    /// width 256, 4 layers of 4 heads (head dim 64), SwiGLU 688, RMSNorm ε 1e-5, RoPE θ 1e4,
    /// untied head — 4.21 M parameters. What the criterion benches, the `bench` example and
    /// `cargo xtask bench-gate` time.
    pub fn bench() -> Self {
        let v = serde_json::json!({"model_type": "llama", "vocab_size": 2048, "hidden_size": 256,
            "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 4, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "max_position_embeddings": 512, "tie_word_embeddings": false});
        Self::from_json(Path::new("<bench config>"), &v).expect("the bench config is valid")
    }

    /// Reads `<dir>/config.json` (or the file itself when `path` is a file).
    pub fn from_file(path: &Path) -> Result<Self> {
        let file: PathBuf = if path.is_dir() {
            path.join("config.json")
        } else {
            path.to_path_buf()
        };
        let value = read_json(&file)?;
        Self::from_json(&file, &value)
    }

    /// Parses a config object; `path` only labels errors.
    pub fn from_json(path: &Path, value: &Value) -> Result<Self> {
        let m = value
            .as_object()
            .ok_or_else(|| BackboneError::config(path, "<root>", "not a JSON object"))?;
        let model_type = m
            .get("model_type")
            .and_then(Value::as_str)
            .ok_or_else(|| BackboneError::config(path, "model_type", "missing"))?;
        let family = match model_type {
            "llama" => Family::Llama,
            "qwen2" => Family::Qwen2,
            "mistral" => Family::Mistral,
            "qwen3" => Family::Qwen3,
            "phi3" => Family::Phi3,
            other => {
                return Err(BackboneError::config(
                    path,
                    "model_type",
                    format!(
                        "unsupported architecture `{other}` (supported: llama, qwen2, qwen3, mistral, phi3)"
                    ),
                ));
            }
        };
        if let Some(archs) = m.get("architectures").and_then(Value::as_array) {
            for a in archs {
                if a.as_str() != Some(family.architecture()) {
                    return Err(BackboneError::config(
                        path,
                        "architectures",
                        format!(
                            "{a} is not supported for model_type {model_type} (expected {})",
                            family.architecture()
                        ),
                    ));
                }
            }
        }
        let family_fields: &[&str] = match family {
            Family::Llama => &["attention_bias", "mlp_bias", "head_dim"],
            Family::Qwen2 => &[
                "use_sliding_window",
                "sliding_window",
                "layer_types",
                "head_dim",
            ],
            Family::Mistral => &["sliding_window", "head_dim"],
            Family::Qwen3 => &[
                "use_sliding_window",
                "sliding_window",
                "layer_types",
                "head_dim",
                "attention_bias",
                "max_window_layers",
            ],
            Family::Phi3 => &[
                "original_max_position_embeddings",
                "partial_rotary_factor",
                "sliding_window",
                "head_dim",
                "attention_bias",
                "resid_pdrop",
                "embd_pdrop",
            ],
        };
        let model_fields = [
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "hidden_act",
            "rms_norm_eps",
            "rope_theta",
            "rope_scaling",
            "rope_parameters",
            "max_position_embeddings",
            "tie_word_embeddings",
        ];
        let mut ignored = Vec::new();
        for (key, value) in m {
            let k = key.as_str();
            if METADATA_FIELDS.contains(&k)
                || model_fields.contains(&k)
                || family_fields.contains(&k)
            {
                continue;
            }
            if let Some((_, neutral)) = UNSUPPORTED_FIELDS.iter().find(|(f, _)| *f == k) {
                if is_neutral(value, *neutral) {
                    continue;
                }
                return Err(BackboneError::config(
                    path,
                    k,
                    format!("{value} changes the model in a way this crate does not implement"),
                ));
            }
            ignored.push(k.to_string());
        }
        warn_ignored(path, &ignored);
        if let Some(act) = m.get("hidden_act")
            && act.as_str() != Some("silu")
        {
            return Err(BackboneError::config(
                path,
                "hidden_act",
                format!("{act} is not supported (only silu)"),
            ));
        }
        let hidden_size = as_usize(path, m, "hidden_size")?;
        let num_attention_heads = as_usize(path, m, "num_attention_heads")?;
        let num_key_value_heads =
            opt_usize(path, m, "num_key_value_heads")?.unwrap_or(num_attention_heads);
        if num_attention_heads == 0
            || num_key_value_heads == 0
            || num_attention_heads % num_key_value_heads != 0
        {
            return Err(BackboneError::config(
                path,
                "num_key_value_heads",
                format!(
                    "{num_key_value_heads} must divide num_attention_heads = {num_attention_heads}"
                ),
            ));
        }
        let head_dim = opt_usize(path, m, "head_dim")?.unwrap_or(hidden_size / num_attention_heads);
        if head_dim % 2 != 0 {
            return Err(BackboneError::config(
                path,
                "head_dim",
                "must be even for rotary embeddings",
            ));
        }

        // RoPE: 4.x writes rope_theta + rope_scaling; 5.x writes rope_parameters.
        let mut rope_theta = opt_f64(path, m, "rope_theta")?;
        let mut partial_rotary_factor = opt_f64(path, m, "partial_rotary_factor")?;
        let original = opt_usize(path, m, "original_max_position_embeddings")?;
        let mut rope_scaling = None;
        for field in ["rope_scaling", "rope_parameters"] {
            match m.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Object(obj)) => {
                    if let Some(t) = obj.get("rope_theta").and_then(Value::as_f64) {
                        rope_theta = Some(t);
                    }
                    if let Some(f) = obj.get("partial_rotary_factor").and_then(Value::as_f64) {
                        partial_rotary_factor = Some(f);
                    }
                    if let Some(s) = parse_rope_object(path, field, obj, original)? {
                        rope_scaling = Some(s);
                    }
                }
                Some(v) => {
                    return Err(BackboneError::config(
                        path,
                        field,
                        format!("expected an object, got {v}"),
                    ));
                }
            }
        }

        let partial_rotary_factor = partial_rotary_factor.unwrap_or(1.0);
        if family != Family::Phi3 && partial_rotary_factor != 1.0 {
            return Err(BackboneError::config(
                path,
                "partial_rotary_factor",
                format!("{partial_rotary_factor} is supported for phi3 only"),
            ));
        }
        let rotary_dim = (head_dim as f64 * partial_rotary_factor) as usize;
        if !(partial_rotary_factor > 0.0 && partial_rotary_factor <= 1.0)
            || rotary_dim == 0
            || !rotary_dim.is_multiple_of(2)
        {
            return Err(BackboneError::config(
                path,
                "partial_rotary_factor",
                format!(
                    "{partial_rotary_factor} of head_dim {head_dim} is not an even number of dimensions"
                ),
            ));
        }
        if let Some(RopeScaling::LongRope(l)) = &rope_scaling {
            for (k, f) in [
                ("short_factor", &l.short_factor),
                ("long_factor", &l.long_factor),
            ] {
                if f.len() != rotary_dim / 2 {
                    return Err(BackboneError::config(
                        path,
                        format!("rope_scaling.{k}"),
                        format!("{} factors for {} rotated pairs", f.len(), rotary_dim / 2),
                    ));
                }
            }
        }
        let (qkv_bias, o_bias, mlp_bias) = match family {
            Family::Qwen2 => (true, false, false),
            Family::Llama | Family::Qwen3 => {
                let ab = opt_bool(path, m, "attention_bias")?.unwrap_or(false);
                let mlp = if family == Family::Llama {
                    opt_bool(path, m, "mlp_bias")?.unwrap_or(false)
                } else {
                    false
                };
                (ab, ab, mlp)
            }
            Family::Mistral => (false, false, false),
            Family::Phi3 => {
                if opt_bool(path, m, "attention_bias")?.unwrap_or(false) {
                    return Err(BackboneError::config(
                        path,
                        "attention_bias",
                        "phi3 projections have no biases in transformers; true is not supported",
                    ));
                }
                (false, false, false)
            }
        };
        let sliding_window = match family {
            Family::Qwen2 | Family::Qwen3 => {
                if opt_bool(path, m, "use_sliding_window")?.unwrap_or(false) {
                    return Err(BackboneError::config(
                        path,
                        "use_sliding_window",
                        "sliding-window attention is not supported",
                    ));
                }
                if let Some(Value::Array(types)) = m.get("layer_types")
                    && let Some(t) = types.iter().find(|t| t.as_str() != Some("full_attention"))
                {
                    return Err(BackboneError::config(
                        path,
                        "layer_types",
                        format!("layer type {t} is not supported (only full_attention)"),
                    ));
                }
                None
            }
            Family::Mistral | Family::Phi3 => opt_usize(path, m, "sliding_window")?,
            Family::Llama => None,
        };
        Ok(Self {
            family,
            vocab_size: as_usize(path, m, "vocab_size")?,
            hidden_size,
            intermediate_size: as_usize(path, m, "intermediate_size")?,
            num_hidden_layers: as_usize(path, m, "num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            rms_norm_eps: opt_f64(path, m, "rms_norm_eps")?.unwrap_or(1e-6),
            rope_theta: rope_theta.unwrap_or(10_000.0),
            rope_scaling,
            partial_rotary_factor,
            qk_norm: family == Family::Qwen3,
            fused_projections: family == Family::Phi3,
            max_position_embeddings: opt_usize(path, m, "max_position_embeddings")?.unwrap_or(2048),
            tie_word_embeddings: opt_bool(path, m, "tie_word_embeddings")?.unwrap_or(false), /* transformers' default for all three families */
            qkv_bias,
            o_bias,
            mlp_bias,
            sliding_window,
            bos_token_id: token_ids(path, m, "bos_token_id")?.first().copied(),
            eos_token_ids: token_ids(path, m, "eos_token_id")?,
            pad_token_id: token_ids(path, m, "pad_token_id")?.first().copied(),
        })
    }

    /// The config as transformers (4.x spelling, which 5.x also reads) expects it.
    pub fn to_json(&self) -> Value {
        let mut m = json!({
            "architectures": [self.family.architecture()],
            "model_type": self.family.model_type(),
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "torch_dtype": "float32",
        });
        let o = m.as_object_mut().expect("object literal");
        o.insert(
            "rope_scaling".into(),
            match &self.rope_scaling {
                None => Value::Null,
                Some(RopeScaling::Llama3(s)) => json!({
                    "rope_type": "llama3", "factor": s.factor, "low_freq_factor": s.low_freq_factor,
                    "high_freq_factor": s.high_freq_factor,
                    "original_max_position_embeddings": s.original_max_position_embeddings,
                }),
                Some(RopeScaling::LongRope(s)) => {
                    let mut r = json!({
                        "type": "longrope", "short_factor": s.short_factor, "long_factor": s.long_factor,
                    });
                    if let Some(f) = s.factor {
                        r["factor"] = json!(f);
                    }
                    if let Some(a) = s.attention_factor {
                        r["attention_factor"] = json!(a);
                    }
                    r
                }
            },
        );
        match self.family {
            Family::Llama => {
                o.insert("attention_bias".into(), json!(self.qkv_bias));
                o.insert("mlp_bias".into(), json!(self.mlp_bias));
            }
            Family::Qwen2 => {
                o.insert("use_sliding_window".into(), json!(false));
            }
            Family::Qwen3 => {
                o.insert("attention_bias".into(), json!(self.qkv_bias));
                o.insert("use_sliding_window".into(), json!(false));
            }
            Family::Mistral => {
                o.insert("sliding_window".into(), json!(self.sliding_window));
            }
            Family::Phi3 => {
                o.insert("sliding_window".into(), json!(self.sliding_window));
                o.insert(
                    "partial_rotary_factor".into(),
                    json!(self.partial_rotary_factor),
                );
                if let Some(RopeScaling::LongRope(s)) = &self.rope_scaling {
                    o.insert(
                        "original_max_position_embeddings".into(),
                        json!(s.original_max_position_embeddings),
                    );
                }
            }
        }
        if let Some(b) = self.bos_token_id {
            o.insert("bos_token_id".into(), json!(b));
        }
        match self.eos_token_ids.as_slice() {
            [] => {}
            [one] => {
                o.insert("eos_token_id".into(), json!(one));
            }
            many => {
                o.insert("eos_token_id".into(), json!(many));
            }
        }
        if let Some(p) = self.pad_token_id {
            o.insert("pad_token_id".into(), json!(p));
        }
        m
    }

    /// The leading dimensions of each head that RoPE rotates.
    pub fn rotary_dim(&self) -> usize {
        (self.head_dim as f64 * self.partial_rotary_factor) as usize
    }

    /// The linear modules of every decoder layer (what an adapter may target), in PEFT's
    /// "all-linear" order.
    pub fn linear_targets(&self) -> &'static [TargetModule] {
        const FUSED: [TargetModule; 4] = [
            TargetModule::Qkv,
            TargetModule::O,
            TargetModule::GateUp,
            TargetModule::Down,
        ];
        if self.fused_projections {
            &FUSED
        } else {
            &TargetModule::ALL
        }
    }

    /// Query heads per key/value head.
    pub fn gqa_groups(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// Number of parameters of the base model.
    pub fn num_params(&self) -> usize {
        let h = self.hidden_size;
        let q = self.num_attention_heads * self.head_dim;
        let kv = self.num_key_value_heads * self.head_dim;
        let attn = h * q
            + 2 * h * kv
            + q * h
            + if self.qkv_bias { q + 2 * kv } else { 0 }
            + if self.o_bias { h } else { 0 };
        let mlp = 3 * h * self.intermediate_size
            + if self.mlp_bias {
                2 * self.intermediate_size + h
            } else {
                0
            };
        let layer = attn + mlp + 2 * h + if self.qk_norm { 2 * self.head_dim } else { 0 };
        let emb = self.vocab_size * h;
        emb + self.num_hidden_layers * layer + h + if self.tie_word_embeddings { 0 } else { emb }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Value {
        json!({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32, "hidden_size": 16,
               "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
               "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 64})
    }

    #[test]
    fn unsupported_field_is_named_and_bookkeeping_is_ignored() {
        let mut v = base();
        v["final_logit_softcapping"] = json!(30.0);
        let e = ModelConfig::from_json(Path::new("c.json"), &v)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("final_logit_softcapping") && e.contains("c.json"),
            "{e}"
        );
        let mut v = base();
        v["partial_rotary_factor"] = json!(0.5);
        assert!(ModelConfig::from_json(Path::new("c"), &v).is_err());
        // What transformers writes for its own bookkeeping loads, and neutral values pass.
        let mut v = base();
        v["unk_token_id"] = json!(0);
        v["_model_name_or_path"] = json!("x");
        v["transformers_version"] = json!("5.24.0");
        v["partial_rotary_factor"] = json!(1.0);
        v["final_logit_softcapping"] = Value::Null;
        assert_eq!(
            ModelConfig::from_json(Path::new("c"), &v).unwrap(),
            ModelConfig::from_json(Path::new("c"), &base()).unwrap()
        );
    }

    #[test]
    fn unsupported_architecture_and_rope() {
        let mut v = base();
        v["model_type"] = json!("gpt2");
        assert!(
            ModelConfig::from_json(Path::new("c"), &v)
                .unwrap_err()
                .to_string()
                .contains("gpt2")
        );
        let mut v = base();
        v["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
        assert!(
            ModelConfig::from_json(Path::new("c"), &v)
                .unwrap_err()
                .to_string()
                .contains("yarn")
        );
    }

    #[test]
    fn both_rope_spellings_agree() {
        let mut a = base();
        a["rope_scaling"] = json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16});
        let mut b = base();
        b.as_object_mut().unwrap().remove("rope_theta");
        b["rope_parameters"] = json!({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16});
        let ca = ModelConfig::from_json(Path::new("a"), &a).unwrap();
        let cb = ModelConfig::from_json(Path::new("b"), &b).unwrap();
        assert_eq!(ca, cb);
        assert_eq!(
            ModelConfig::from_json(Path::new("r"), &ca.to_json()).unwrap(),
            ca
        );
    }
}
