//! RoPE scaling as `config.json` states it (`rope_scaling`, or `rope_parameters` in
//! transformers 5.x): Llama 3.1's frequency-dependent rule and Phi-3's LongRoPE. Any other
//! `rope_type`, or a parameter these do not have, is an error naming the field.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{BackboneError, Result};

/// Llama-3 frequency-dependent RoPE scaling (`rope_type: "llama3"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3RopeScaling {
    /// Divides the low frequencies.
    pub factor: f64,
    /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are scaled fully.
    pub low_freq_factor: f64,
    /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are kept.
    pub high_freq_factor: f64,
    /// The context length of pre-training.
    pub original_max_position_embeddings: f64,
}

/// LongRoPE (Phi-3, `rope_type: "longrope"`): per-frequency divisors for short and long
/// contexts (see [`crate::rope`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LongRopeScaling {
    /// Divisors used while a call stays within the original context (one per rotated pair).
    pub short_factor: Vec<f64>,
    /// Divisors used once a call's positions reach past it.
    pub long_factor: Vec<f64>,
    /// The context length of pre-training.
    pub original_max_position_embeddings: usize,
    /// The context extension factor, if given (else `max_position_embeddings / original`).
    pub factor: Option<f64>,
    /// The factor on cos and sin, if given (else `√(1 + ln factor / ln original)`).
    pub attention_factor: Option<f64>,
}

impl LongRopeScaling {
    /// The factor on cos and sin, as transformers derives it.
    pub fn attention_factor(&self, max_position_embeddings: usize) -> f64 {
        if let Some(a) = self.attention_factor {
            return a;
        }
        let original = self.original_max_position_embeddings as f64;
        let factor = self
            .factor
            .unwrap_or(max_position_embeddings as f64 / original);
        if factor <= 1.0 {
            1.0
        } else {
            (1.0 + factor.ln() / original.ln()).sqrt()
        }
    }
}

/// A RoPE scaling rule.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// Llama 3.1's frequency-dependent scaling.
    Llama3(Llama3RopeScaling),
    /// Phi-3's LongRoPE.
    LongRope(LongRopeScaling),
}

/// Reads the rope type and its parameters from a `rope_scaling`/`rope_parameters` object;
/// `original` is the top-level `original_max_position_embeddings` (Phi-3 in transformers 4.x).
pub(super) fn parse_rope_object(
    path: &Path,
    field: &str,
    obj: &Map<String, Value>,
    original: Option<usize>,
) -> Result<Option<RopeScaling>> {
    let ty = obj
        .get("rope_type")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let known = [
        "rope_type",
        "type",
        "rope_theta",
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
        "short_factor",
        "long_factor",
        "attention_factor",
        "partial_rotary_factor",
    ];
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(BackboneError::config(
            path,
            format!("{field}.{k}"),
            "unsupported RoPE parameter",
        ));
    }
    let need = |k: &str| -> Result<f64> {
        obj.get(k).and_then(Value::as_f64).ok_or_else(|| {
            BackboneError::config(
                path,
                format!("{field}.{k}"),
                format!("missing for rope_type {ty}"),
            )
        })
    };
    match ty {
        "default" => Ok(None),
        "llama3" => Ok(Some(RopeScaling::Llama3(Llama3RopeScaling {
            factor: need("factor")?,
            low_freq_factor: need("low_freq_factor")?,
            high_freq_factor: need("high_freq_factor")?,
            original_max_position_embeddings: need("original_max_position_embeddings")?,
        }))),
        // `su` is what Phi-3's first checkpoints called it.
        "longrope" | "su" => {
            let factors = |k: &str| -> Result<Vec<f64>> {
                obj.get(k)
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().map(Value::as_f64).collect::<Option<Vec<_>>>())
                    .ok_or_else(|| {
                        BackboneError::config(
                            path,
                            format!("{field}.{k}"),
                            "missing or not a list of numbers",
                        )
                    })
            };
            let original = match obj.get("original_max_position_embeddings") {
                Some(v) => v.as_u64().map(|v| v as usize),
                None => original,
            }
            .ok_or_else(|| {
                BackboneError::config(
                    path,
                    "original_max_position_embeddings",
                    "missing for rope_type longrope",
                )
            })?;
            Ok(Some(RopeScaling::LongRope(LongRopeScaling {
                short_factor: factors("short_factor")?,
                long_factor: factors("long_factor")?,
                original_max_position_embeddings: original,
                factor: obj.get("factor").and_then(Value::as_f64),
                attention_factor: obj.get("attention_factor").and_then(Value::as_f64),
            })))
        }
        other => Err(BackboneError::config(
            path,
            format!("{field}.rope_type"),
            format!("`{other}` is not supported (only default, llama3 and longrope)"),
        )),
    }
}
