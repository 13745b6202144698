//! Named LoRA adapters over one frozen linear layer.
//!
//! A [`LoraLinear`] keeps the base weight `W` once and any number of adapter pairs `(A, B)`,
//! one slot per registered adapter. A forward call names its adapter (or none) and computes
//!
//! ```text
//! y = x·W + b + s·(dropout(x)·A)·B,   s = α/r  (or α/√r with rsLoRA)
//! ```
//!
//! without ever materialising `W + s·A·B` (that is what [`LoraLinear::merged`] is for). Only the
//! adapter tensors require gradients; the base is frozen when the model is loaded.
//! Initialisation follows PEFT: `A ~ U(−1/√in, 1/√in)` (Kaiming-uniform with a = √5), `B = 0`,
//! so a fresh adapter leaves the model's outputs unchanged.

use std::sync::Arc;

use burn::module::{Module, Param};

use crate::few_rows::Layout;
use crate::packed::PackedWeight;
use crate::param::named_param;
use burn::tensor::{Device, Distribution, Tensor, TensorData};

/// The linear modules of a Llama decoder layer an adapter can target (PEFT's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetModule {
    /// `self_attn.q_proj`
    Q,
    /// `self_attn.k_proj`
    K,
    /// `self_attn.v_proj`
    V,
    /// `self_attn.o_proj`
    O,
    /// `mlp.gate_proj`
    Gate,
    /// `mlp.up_proj`
    Up,
    /// `mlp.down_proj`
    Down,
    /// `self_attn.qkv_proj` (Phi-3's fused q/k/v)
    Qkv,
    /// `mlp.gate_up_proj` (Phi-3's fused gate/up)
    GateUp,
}

impl TargetModule {
    /// Every module any family has: a layer has either q/k/v or qkv, either gate/up or
    /// gate_up (see [`crate::ModelConfig::linear_targets`]).
    pub const EVERY: [TargetModule; 9] = [
        Self::Q,
        Self::K,
        Self::V,
        Self::Qkv,
        Self::O,
        Self::Gate,
        Self::Up,
        Self::GateUp,
        Self::Down,
    ];

    /// The seven linear modules of a layer with separate projections (Llama, Qwen, Mistral),
    /// in PEFT's "all-linear" order.
    pub const ALL: [TargetModule; 7] = [
        Self::Q,
        Self::K,
        Self::V,
        Self::O,
        Self::Gate,
        Self::Up,
        Self::Down,
    ];

    /// The HF/PEFT module name (`q_proj`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Q => "q_proj",
            Self::K => "k_proj",
            Self::V => "v_proj",
            Self::O => "o_proj",
            Self::Gate => "gate_proj",
            Self::Up => "up_proj",
            Self::Down => "down_proj",
            Self::Qkv => "qkv_proj",
            Self::GateUp => "gate_up_proj",
        }
    }

    /// Parses a PEFT module name; accepts the short forms `q`, `k`, … too.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "q_proj" | "q" => Self::Q,
            "k_proj" | "k" => Self::K,
            "v_proj" | "v" => Self::V,
            "o_proj" | "o" => Self::O,
            "gate_proj" | "gate" => Self::Gate,
            "up_proj" | "up" => Self::Up,
            "down_proj" | "down" => Self::Down,
            "qkv_proj" | "qkv" => Self::Qkv,
            "gate_up_proj" | "gate_up" => Self::GateUp,
            _ => return None,
        })
    }

    /// The module's path inside a decoder layer (`self_attn.q_proj`, `mlp.up_proj`, …).
    pub fn path(self) -> &'static str {
        match self {
            Self::Q => "self_attn.q_proj",
            Self::K => "self_attn.k_proj",
            Self::V => "self_attn.v_proj",
            Self::O => "self_attn.o_proj",
            Self::Gate => "mlp.gate_proj",
            Self::Up => "mlp.up_proj",
            Self::Down => "mlp.down_proj",
            Self::Qkv => "self_attn.qkv_proj",
            Self::GateUp => "mlp.gate_up_proj",
        }
    }
}

/// Serialised as the PEFT name (`q_proj`); read from it or a short form (`q`).
impl serde::Serialize for TargetModule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for TargetModule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown target module `{name}`: expected one of {:?}",
                Self::EVERY.map(Self::name)
            ))
        })
    }
}

/// Hyper-parameters of one adapter (the subset of PEFT's `LoraConfig` we implement). In
/// configs: `lora = { r = 16, alpha = 32.0, target_modules = ["q_proj", "v_proj"] }`, with
/// `dropout` (default 0) and `use_rslora` (default false) optional; unknown keys are errors.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoraConfig {
    /// Rank r.
    pub r: usize,
    /// Scale numerator α.
    pub alpha: f64,
    /// Dropout on the adapter's input during training (PEFT's `lora_dropout`).
    #[serde(default, skip_serializing_if = "crate::serde_skip::is_default")]
    pub dropout: f64,
    /// Which linear layers get an adapter.
    pub target_modules: Vec<TargetModule>,
    /// rsLoRA: scale α/√r instead of α/r.
    #[serde(default, skip_serializing_if = "crate::serde_skip::is_default")]
    pub use_rslora: bool,
}

impl LoraConfig {
    /// r, α, dropout and targets; rsLoRA off.
    pub fn new(r: usize, alpha: f64, target_modules: &[TargetModule]) -> Self {
        Self {
            r,
            alpha,
            dropout: 0.0,
            target_modules: target_modules.to_vec(),
            use_rslora: false,
        }
    }

    /// Fails unless `r > 0`, `α > 0`, `0 ≤ dropout < 1` and some module is targeted; `what`
    /// names the adapter or the config in the message.
    pub fn check(&self, what: &str) -> crate::Result<()> {
        let bad = |m: String| Err(crate::BackboneError::Invalid(format!("{what}: lora: {m}")));
        if self.r == 0 || self.alpha.is_nan() || self.alpha <= 0.0 {
            return bad(format!(
                "need r > 0 and alpha > 0 (r = {}, alpha = {})",
                self.r, self.alpha
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout = {} is outside [0, 1)", self.dropout));
        }
        if self.target_modules.is_empty() {
            return bad("target_modules is empty".into());
        }
        Ok(())
    }

    /// The factor `s` in `y = x·W + s·(x·A)·B`.
    pub fn scale(&self) -> f64 {
        if self.use_rslora {
            self.alpha / (self.r as f64).sqrt()
        } else {
            self.alpha / self.r as f64
        }
    }
}

/// One adapter's low-rank pair on one linear layer.
#[derive(Module, Debug)]
pub struct LoraPair {
    /// `A: [in, r]` (PEFT's `lora_A.weight` transposed).
    pub a: Param<Tensor<2>>,
    /// `B: [r, out]` (PEFT's `lora_B.weight` transposed).
    pub b: Param<Tensor<2>>,
    /// `s = α/r`.
    #[module(skip)]
    pub scale: f64,
    /// Dropout probability on the adapter input (training only).
    #[module(skip)]
    pub dropout: f64,
}

impl LoraPair {
    /// PEFT's initialisation: `A ~ U(−1/√in, 1/√in)`, `B = 0` (so a fresh adapter leaves the
    /// model's outputs unchanged), `A` drawn from `rng` — never from the backend's RNG, which a
    /// run cannot reproduce. `name` identifies the pair (`<adapter>/<module path>`), and with
    /// it the parameters' ids.
    pub fn init(
        name: &str,
        d_in: usize,
        d_out: usize,
        config: &LoraConfig,
        rng: &mut impl rand::Rng,
        device: &Device,
    ) -> Self {
        let bound = 1.0 / (d_in as f32).sqrt();
        let a: Vec<f32> = (0..d_in * config.r)
            .map(|_| rng.random_range(-bound..bound))
            .collect();
        let a = Tensor::from_data(TensorData::new(a, [d_in, config.r]), device);
        Self::from_tensors(name, a, Tensor::zeros([config.r, d_out], device), config)
    }

    /// A trainable pair from `A: [in, r]` and `B: [r, out]`.
    pub fn from_tensors(name: &str, a: Tensor<2>, b: Tensor<2>, config: &LoraConfig) -> Self {
        Self {
            a: named_param(&format!("{name}.lora_A"), a, true),
            b: named_param(&format!("{name}.lora_B"), b, true),
            scale: config.scale(),
            dropout: config.dropout,
        }
    }
}

/// A frozen linear layer `[in, out]` (bias optional) with per-adapter LoRA slots.
#[derive(Module, Debug)]
pub struct LoraLinear {
    /// `W: [in, out]` (HF's `weight` transposed).
    pub weight: Param<Tensor<2>>,
    /// Optional bias `[out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Slot `i` holds adapter `i`'s pair, or `None` if that adapter does not target this layer.
    pub lora: Vec<Option<LoraPair>>,
    /// `W` as the GGUF file it came from stores it (transposed: `[out, in]`), for the products
    /// of a decoding step ([`crate::packed`]). Invariant: it decodes to exactly `weight`, so
    /// anything that makes a new `W` ([`LoraLinear::merged`]) leaves it out.
    #[module(skip)]
    pub packed: Option<Arc<PackedWeight>>,
}

impl LoraLinear {
    /// A frozen layer without adapters; `name` is its HF path (`model.layers.0.self_attn.q_proj`).
    pub fn new(name: &str, weight: Tensor<2>, bias: Option<Tensor<1>>) -> Self {
        Self {
            weight: named_param(&format!("{name}.weight"), weight, false),
            bias: bias.map(|b| named_param(&format!("{name}.bias"), b, false)),
            lora: Vec::new(),
            packed: None,
        }
    }

    /// `[in, out]`.
    pub fn dims(&self) -> [usize; 2] {
        self.weight.val().dims()
    }

    /// `x·W + b + s·(dropout(x)·A)·B` with the adapter in slot `adapter` (if it has one here).
    /// Dropout is applied only when `train` is set.
    pub fn forward<const D: usize>(
        &self,
        x: Tensor<D>,
        adapter: Option<usize>,
        train: bool,
    ) -> Tensor<D> {
        let (weight, bias) = (self.weight.val(), self.bias.as_ref().map(|b| b.val()));
        // A decoding step's few rows read the weight once (few_rows), from the file's blocks
        // where they are kept; the rest go to the GEMM.
        let few = match &self.packed {
            Some(p) => crate::few_rows::linear_packed(&x, p, bias.as_ref()),
            None => crate::few_rows::linear(&x, &weight, bias.as_ref(), Layout::InOut),
        };
        let base = match few {
            Some(y) => y,
            None => burn::tensor::module::linear(x.clone(), weight, bias),
        };
        match adapter
            .and_then(|i| self.lora.get(i))
            .and_then(Option::as_ref)
        {
            None => base,
            Some(pair) => {
                let x = if train && pair.dropout > 0.0 {
                    let keep = Tensor::<D>::random(
                        x.shape(),
                        Distribution::Bernoulli(1.0 - pair.dropout),
                        &x.device(),
                    );
                    x * keep / (1.0 - pair.dropout)
                } else {
                    x
                };
                let low = burn::tensor::module::linear(x, pair.a.val(), None);
                base + burn::tensor::module::linear(low, pair.b.val(), None) * pair.scale
            }
        }
    }

    /// Sets slot `slot` to `pair` (growing the slot list with `None`s).
    pub fn set_adapter(&mut self, slot: usize, pair: Option<LoraPair>) {
        if self.lora.len() <= slot {
            self.lora.resize_with(slot + 1, || None);
        }
        self.lora[slot] = pair;
    }

    /// A plain layer with `W + s·A·B` of `adapter` folded in, for fast inference.
    pub fn merged(&self, adapter: usize) -> Self {
        let mut weight = self.weight.val();
        let mut packed = self.packed.clone();
        if let Some(Some(pair)) = self.lora.get(adapter) {
            weight = weight + pair.a.val().matmul(pair.b.val()) * pair.scale;
            // W changed: its blocks no longer decode to it.
            packed = None;
        }
        Self {
            weight: Param::initialized(self.weight.id, weight.detach()).set_require_grad(false),
            bias: self
                .bias
                .as_ref()
                .map(|b| Param::initialized(b.id, b.val().detach()).set_require_grad(false)),
            lora: Vec::new(),
            packed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_read_peft_names_default_the_optional_settings_and_refuse_unknown_keys() {
        let read = |s: &str| serde_json::from_str::<LoraConfig>(s);
        let c = read(r#"{"r": 4, "alpha": 8.0, "target_modules": ["q_proj", "v"]}"#).unwrap();
        assert_eq!(
            c,
            LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::V])
        );
        // Defaults are not written back, so older serialisations stay the same.
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"r":4,"alpha":8.0,"target_modules":["q_proj","v_proj"]}"#
        );
        let d = read(r#"{"r": 4, "alpha": 8.0, "dropout": 0.05, "target_modules": ["o_proj"]}"#)
            .unwrap();
        assert_eq!(d.dropout, 0.05);
        assert!(
            serde_json::to_string(&d)
                .unwrap()
                .contains(r#""dropout":0.05"#)
        );
        let err = read(r#"{"r": 4, "alpha": 8.0, "target_modules": ["w_proj"]}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown target module `w_proj`"),
            "{err}"
        );
        let err = read(r#"{"r": 4, "alpha": 8.0, "target_modules": [], "lora_dropout": 0.1}"#)
            .unwrap_err();
        assert!(err.to_string().contains("lora_dropout"), "{err}");
        let mut bad = c.clone();
        bad.dropout = 1.0;
        assert!(
            bad.check("sys1")
                .unwrap_err()
                .to_string()
                .contains("sys1: lora: dropout")
        );
        bad = c;
        bad.target_modules.clear();
        assert!(bad.check("x").is_err());
    }
}
