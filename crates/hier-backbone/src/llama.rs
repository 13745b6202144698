//! The Llama-family decoder (Llama 3.x, Qwen2/2.5, Qwen3, Mistral, Phi-3) with per-call LoRA
//! adapters.
//!
//! Field names mirror Hugging Face's module tree (`model.layers.{i}.self_attn.q_proj`, …), so the
//! mapping to checkpoint names in [`crate::weights`] is mechanical. One decoder layer computes
//!
//! ```text
//! h = x + o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = rms_norm(x)
//! y = h + down_proj(silu(gate_proj(n2)) ⊙ up_proj(n2)),                   n2 = rms_norm(h)
//! ```
//!
//! with grouped-query attention (`num_attention_heads / num_key_value_heads` query heads share
//! each key/value head, as `repeat_kv` does) and `rms_norm(x) = x / √(mean(x²) + ε) ⊙ w`.
//! Qwen3 normalises each head of q and k (`q_norm`, `k_norm`) before RoPE; Phi-3 computes q/k/v
//! with one fused `qkv_proj` and gate/up with one `gate_up_proj` (split in that order), and
//! rotates only the first `partial_rotary_factor · d` dimensions of each head.

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::activation::silu;
use burn::tensor::module::{attention, embedding, linear};
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::config::ModelConfig;
use crate::error::{BackboneError, Result};
use crate::few_rows::Layout;
use crate::grouped_attention::{self, KeyMask};
use crate::kv_cache::{KvCache, LayerKv, first_columns};
use crate::lora::{LoraConfig, LoraLinear, LoraPair, TargetModule};
use crate::packed::PackedWeight;
use crate::param::named_param;
use crate::rope::{Rope, apply_rotary};

/// Additive mask value for keys a query must not see. Finite, so that a row that sees no key
/// never turns into NaN (we also always let a query see itself).
const MASKED: f32 = -1e9;

/// How a forward call masks attention. Without padding the causal structure needs no tensor:
/// a prefill uses the kernel's own causal mode and a one-token decode step sees every cached
/// key. Only padded batches (or multi-token steps on top of a cache) build an additive bias.
#[derive(Debug, Clone)]
struct AttentionMask {
    bias: Option<Tensor<4>>,
    is_causal: bool,
    /// `bias` on the host, `[b, t, total]`, kept for decoding steps (`t ≤ MAX_ROWS`) only.
    host_bias: Option<Vec<f32>>,
}

impl AttentionMask {
    /// `key_valid[row]` covers the `past + t` keys; queries are the last `t` of them.
    fn new(key_valid: &[Vec<bool>], past: usize, t: usize, heads: usize, device: &Device) -> Self {
        let b = key_valid.len();
        let total = past + t;
        if key_valid.iter().all(|r| r.iter().all(|&v| v)) {
            if past == 0 {
                return Self {
                    bias: None,
                    is_causal: t > 1,
                    host_bias: None,
                };
            }
            if t == 1 {
                return Self {
                    bias: None,
                    is_causal: false,
                    host_bias: None,
                };
            }
        }
        // Additive bias [b, 1, t, total]: causal, padding keys hidden, the diagonal always open.
        let mut bias = vec![0f32; b * t * total];
        for (row, valid) in key_valid.iter().enumerate() {
            for i in 0..t {
                let qpos = past + i;
                for (j, &ok) in valid.iter().enumerate() {
                    if j != qpos && (j > qpos || !ok) {
                        bias[(row * t + i) * total + j] = MASKED;
                    }
                }
            }
        }
        let host_bias = (t <= crate::few_rows::MAX_ROWS).then(|| bias.clone());
        let bias = Tensor::<4>::from_data(TensorData::new(bias, [b, 1, t, total]), device)
            .expand([b, heads, t, total]);
        Self {
            bias: Some(bias),
            is_causal: false,
            host_bias,
        }
    }

    /// The mask as [`grouped_attention::decode`] takes it; `None` when the bias was not kept.
    fn key_mask(&self) -> Option<KeyMask<'_>> {
        match (&self.bias, &self.host_bias) {
            (None, _) if self.is_causal => Some(KeyMask::Causal),
            (None, _) => Some(KeyMask::None),
            (Some(_), Some(h)) => Some(KeyMask::Bias(h)),
            (Some(_), None) => None,
        }
    }
}

/// RMSNorm with a learned scale.
#[derive(Module, Debug)]
pub struct RmsNorm {
    /// Scale `[H]`.
    pub weight: Param<Tensor<1>>,
    /// ε.
    #[module(skip)]
    pub eps: f64,
}

impl RmsNorm {
    /// `x / √(mean(x²) + ε) ⊙ w` over the last dimension.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let var = x.clone().square().mean_dim(D - 1);
        let normed = x * (var + self.eps).sqrt().recip();
        normed * self.weight.val().unsqueeze()
    }
}

/// Separate query, key and value projections (Llama, Qwen, Mistral).
#[derive(Module, Debug)]
pub struct SeparateQkv {
    /// Query projection `[H, heads·d]`.
    pub q_proj: LoraLinear,
    /// Key projection `[H, kv_heads·d]`.
    pub k_proj: LoraLinear,
    /// Value projection `[H, kv_heads·d]`.
    pub v_proj: LoraLinear,
}

/// How a layer projects to queries, keys and values.
// One per layer: the size difference of the variants costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum QkvProj {
    /// `q_proj`, `k_proj`, `v_proj`.
    Separate(SeparateQkv),
    /// Phi-3's `qkv_proj` `[H, heads·d + 2·kv_heads·d]`: queries, then keys, then values.
    Fused(LoraLinear),
}

/// Multi-head self-attention with GQA and HF RoPE.
#[derive(Module, Debug)]
pub struct Attention {
    /// The q/k/v projections.
    pub qkv: QkvProj,
    /// Output projection `[heads·d, H]`.
    pub o_proj: LoraLinear,
    /// Qwen3's per-head RMSNorm of queries (`q_norm`, `[d]`), before RoPE.
    pub q_norm: Option<RmsNorm>,
    /// Qwen3's per-head RMSNorm of keys (`k_norm`, `[d]`), before RoPE.
    pub k_norm: Option<RmsNorm>,
}

/// Separate gate and up projections.
#[derive(Module, Debug)]
pub struct SeparateGateUp {
    /// Gate projection `[H, I]`.
    pub gate_proj: LoraLinear,
    /// Up projection `[H, I]`.
    pub up_proj: LoraLinear,
}

/// How a layer projects to the SwiGLU gate and up branches.
#[allow(clippy::large_enum_variant)] // one per layer, as for QkvProj
#[derive(Module, Debug)]
pub enum GateUpProj {
    /// `gate_proj`, `up_proj`.
    Separate(SeparateGateUp),
    /// Phi-3's `gate_up_proj` `[H, 2·I]`: the gate's I columns, then up's.
    Fused(LoraLinear),
}

/// The SwiGLU feed-forward block.
#[derive(Module, Debug)]
pub struct Mlp {
    /// The gate/up projections.
    pub gate_up: GateUpProj,
    /// Down projection `[I, H]`.
    pub down_proj: LoraLinear,
}

/// One pre-norm decoder layer.
#[derive(Module, Debug)]
pub struct DecoderLayer {
    /// Attention block.
    pub self_attn: Attention,
    /// Feed-forward block.
    pub mlp: Mlp,
    /// Norm before attention.
    pub input_layernorm: RmsNorm,
    /// Norm before the MLP.
    pub post_attention_layernorm: RmsNorm,
}

impl DecoderLayer {
    /// The linear layer an adapter target names, if this layer has it (a fused model has
    /// `qkv_proj` and `gate_up_proj` instead of their parts).
    pub fn target(&self, t: TargetModule) -> Option<&LoraLinear> {
        let (qkv, gate_up) = (&self.self_attn.qkv, &self.mlp.gate_up);
        match (t, qkv, gate_up) {
            (TargetModule::Q, QkvProj::Separate(s), _) => Some(&s.q_proj),
            (TargetModule::K, QkvProj::Separate(s), _) => Some(&s.k_proj),
            (TargetModule::V, QkvProj::Separate(s), _) => Some(&s.v_proj),
            (TargetModule::Qkv, QkvProj::Fused(l), _) => Some(l),
            (TargetModule::O, ..) => Some(&self.self_attn.o_proj),
            (TargetModule::Gate, _, GateUpProj::Separate(s)) => Some(&s.gate_proj),
            (TargetModule::Up, _, GateUpProj::Separate(s)) => Some(&s.up_proj),
            (TargetModule::GateUp, _, GateUpProj::Fused(l)) => Some(l),
            (TargetModule::Down, ..) => Some(&self.mlp.down_proj),
            _ => None,
        }
    }

    /// Mutable access to the linear layer an adapter target names, if this layer has it.
    pub fn target_mut(&mut self, t: TargetModule) -> Option<&mut LoraLinear> {
        let (qkv, gate_up) = (&mut self.self_attn.qkv, &mut self.mlp.gate_up);
        match (t, qkv, gate_up) {
            (TargetModule::Q, QkvProj::Separate(s), _) => Some(&mut s.q_proj),
            (TargetModule::K, QkvProj::Separate(s), _) => Some(&mut s.k_proj),
            (TargetModule::V, QkvProj::Separate(s), _) => Some(&mut s.v_proj),
            (TargetModule::Qkv, QkvProj::Fused(l), _) => Some(l),
            (TargetModule::O, ..) => Some(&mut self.self_attn.o_proj),
            (TargetModule::Gate, _, GateUpProj::Separate(s)) => Some(&mut s.gate_proj),
            (TargetModule::Up, _, GateUpProj::Separate(s)) => Some(&mut s.up_proj),
            (TargetModule::GateUp, _, GateUpProj::Fused(l)) => Some(l),
            (TargetModule::Down, ..) => Some(&mut self.mlp.down_proj),
            _ => None,
        }
    }

    /// The layer's linear modules, in PEFT's "all-linear" order.
    pub fn linears(&self) -> Vec<(TargetModule, &LoraLinear)> {
        TargetModule::EVERY
            .iter()
            .filter_map(|&t| self.target(t).map(|l| (t, l)))
            .collect()
    }
}

/// A registered adapter: its name, configuration, and a revision counter bumped whenever its
/// weights are replaced (so callers can tell two states of the same adapter apart).
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterSpec {
    /// Unique name (`sys1`, `sys2`, `steer`, …).
    pub name: String,
    /// Its hyper-parameters.
    pub config: LoraConfig,
    /// Bumped by every [`CausalLm::replace_adapter`].
    pub revision: u64,
}

/// A handle to a registered adapter, valid for the model that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdapterId(pub usize);

/// Per-call options of a forward pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct Forward {
    /// The adapter to apply, or the bare base model.
    pub adapter: Option<AdapterId>,
    /// Training mode (enables LoRA dropout).
    pub train: bool,
}

impl Forward {
    /// Inference with `adapter`.
    pub fn with(adapter: Option<AdapterId>) -> Self {
        Self {
            adapter,
            train: false,
        }
    }
}

/// A decoder-only causal LM: the frozen base plus its adapters.
#[derive(Module, Debug)]
pub struct CausalLm {
    /// `model.embed_tokens.weight`, `[vocab, H]`.
    pub embed_tokens: Param<Tensor<2>>,
    /// `model.layers.*`.
    pub layers: Vec<DecoderLayer>,
    /// `model.norm`.
    pub norm: RmsNorm,
    /// `lm_head.weight` transposed, `[H, vocab]`; `None` when tied to `embed_tokens`.
    pub lm_head: Option<Param<Tensor<2>>>,
    /// The output projection (`lm_head`, or the tied `embed_tokens`) as its GGUF file stores
    /// it, `[vocab, H]`, for the decoding step's logits ([`crate::packed`]); it decodes to
    /// exactly the dense weight.
    #[module(skip)]
    pub packed_output: Option<Arc<PackedWeight>>,
    /// The configuration.
    #[module(skip)]
    pub config: ModelConfig,
    #[module(skip)]
    rope: Rope,
    /// Registered adapters, slot `i` ↔ `AdapterId(i)`.
    #[module(skip)]
    adapters: Vec<AdapterSpec>,
}

/// The tokens of one forward call: ids `[b, t]`, their RoPE positions, and for every row which
/// of its `t` columns are real tokens (padding is invisible to attention).
#[derive(Debug, Clone)]
pub struct Batch {
    /// Token ids, row-major `[b, t]`.
    pub ids: Vec<u32>,
    /// Rows.
    pub batch: usize,
    /// Columns.
    pub len: usize,
    /// Position id of every token (HF: `cumsum(attention_mask) − 1`).
    pub positions: Vec<u32>,
    /// `true` where the token is real.
    pub valid: Vec<bool>,
}

impl Batch {
    /// Left-pads `rows` to one length (`pad` is the filler id), with positions counted from
    /// each row's first real token, as `transformers.generate` does.
    pub fn left_padded(rows: &[Vec<u32>], pad: u32) -> Self {
        let len = rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut b = Self {
            ids: vec![],
            batch: rows.len(),
            len,
            positions: vec![],
            valid: vec![],
        };
        for r in rows {
            let padn = len - r.len();
            b.ids
                .extend(std::iter::repeat_n(pad, padn).chain(r.iter().copied()));
            b.positions
                .extend(std::iter::repeat_n(0, padn).chain(0..r.len() as u32));
            b.valid
                .extend(std::iter::repeat_n(false, padn).chain(std::iter::repeat_n(true, r.len())));
        }
        b
    }

    /// Right-pads `rows` to one length.
    pub fn right_padded(rows: &[Vec<u32>], pad: u32) -> Self {
        let len = rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut b = Self {
            ids: vec![],
            batch: rows.len(),
            len,
            positions: vec![],
            valid: vec![],
        };
        for r in rows {
            let padn = len - r.len();
            b.ids
                .extend(r.iter().copied().chain(std::iter::repeat_n(pad, padn)));
            b.positions
                .extend((0..r.len() as u32).chain(std::iter::repeat_n(0, padn)));
            b.valid
                .extend(std::iter::repeat_n(true, r.len()).chain(std::iter::repeat_n(false, padn)));
        }
        b
    }

    /// One unpadded row.
    pub fn single(ids: &[u32]) -> Self {
        Self::right_padded(&[ids.to_vec()], 0)
    }
}

impl CausalLm {
    /// Assembles a model from its parts (used by the weight loaders).
    pub(crate) fn from_parts(
        config: ModelConfig,
        embed_tokens: Tensor<2>,
        layers: Vec<DecoderLayer>,
        norm: Tensor<1>,
        lm_head: Option<Tensor<2>>,
    ) -> Self {
        Self {
            embed_tokens: named_param("model.embed_tokens.weight", embed_tokens, false),
            layers,
            norm: RmsNorm {
                weight: named_param("model.norm.weight", norm, false),
                eps: config.rms_norm_eps,
            },
            lm_head: lm_head.map(|t| named_param("lm_head.weight", t, false)),
            packed_output: None,
            rope: Rope::new(&config),
            config,
            adapters: Vec::new(),
        }
    }

    /// How many weights are kept in their file's blocks for decoding ([`crate::packed`]),
    /// and the bytes those blocks take.
    pub fn packed_weights(&self) -> (usize, usize) {
        let packed = self
            .layers
            .iter()
            .flat_map(|l| l.linears())
            .filter_map(|(_, lin)| lin.packed.as_deref())
            .chain(self.packed_output.as_deref());
        packed.fold((0, 0), |(n, bytes), p| (n + 1, bytes + p.bytes()))
    }

    /// Drops the weights kept in their file's blocks: every product then multiplies the dense
    /// f32 weights (for comparisons of the two paths, or to give the memory back).
    pub fn drop_packed_weights(&mut self) {
        for layer in &mut self.layers {
            for t in TargetModule::EVERY {
                if let Some(lin) = layer.target_mut(t) {
                    lin.packed = None;
                }
            }
        }
        self.packed_output = None;
    }

    /// The device the weights live on.
    pub fn device(&self) -> Device {
        self.embed_tokens.val().device()
    }

    /// Registered adapters, in slot order.
    pub fn adapters(&self) -> &[AdapterSpec] {
        &self.adapters
    }

    /// The handle of adapter `name`.
    pub fn adapter_id(&self, name: &str) -> Result<AdapterId> {
        self.adapters
            .iter()
            .position(|a| a.name == name)
            .map(AdapterId)
            .ok_or_else(|| {
                BackboneError::adapter(
                    name,
                    format!("not registered (have: {:?})", self.adapter_names()),
                )
            })
    }

    /// Names of the registered adapters.
    pub fn adapter_names(&self) -> Vec<String> {
        self.adapters.iter().map(|a| a.name.clone()).collect()
    }

    /// Registers a fresh adapter with PEFT's initialisation (the model's outputs do not
    /// change): every `A` is drawn from one RNG seeded with `seed`, layer by layer, in the
    /// order of `config.target_modules` — the same seed gives the same adapter.
    pub fn add_adapter(&mut self, name: &str, config: LoraConfig, seed: u64) -> Result<AdapterId> {
        if self.adapters.iter().any(|a| a.name == name) {
            return Err(BackboneError::adapter(name, "already registered"));
        }
        if config.r == 0 {
            return Err(BackboneError::adapter(name, "rank r must be positive"));
        }
        if config.target_modules.is_empty() {
            return Err(BackboneError::adapter(name, "no target modules"));
        }
        self.check_targets(name, &config.target_modules)?;
        let slot = self.adapters.len();
        let device = self.device();
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
        for (l, layer) in self.layers.iter_mut().enumerate() {
            for &t in &config.target_modules {
                let lin = layer.target_mut(t).expect("check_targets");
                let [din, dout] = lin.dims();
                let pair_name = format!("{name}/model.layers.{l}.{}", t.path());
                lin.set_adapter(
                    slot,
                    Some(LoraPair::init(
                        &pair_name, din, dout, &config, &mut rng, &device,
                    )),
                );
            }
        }
        self.adapters.push(AdapterSpec {
            name: name.to_string(),
            config,
            revision: 0,
        });
        Ok(AdapterId(slot))
    }

    /// Refuses adapter targets this model's layers do not have (`q_proj` on a fused Phi-3, …),
    /// naming the ones it has.
    pub fn check_targets(&self, adapter: &str, targets: &[TargetModule]) -> Result<()> {
        let have = self.config.linear_targets();
        match targets.iter().find(|t| !have.contains(t)) {
            None => Ok(()),
            Some(t) => Err(BackboneError::adapter(
                adapter,
                format!(
                    "target `{}` does not exist in this {} model (its linear modules: {})",
                    t.name(),
                    self.config.family.model_type(),
                    have.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }

    /// `[in, out]` of the linear module `t` (which every layer has, or an error).
    pub fn target_dims(&self, t: TargetModule) -> Result<[usize; 2]> {
        self.check_targets("<any>", &[t])?;
        Ok(self.layers[0].target(t).expect("checked").dims())
    }

    /// Installs given adapter pairs (`pairs[layer][target]`) under `name`, replacing an adapter
    /// of that name if one exists (its revision is bumped).
    pub fn replace_adapter(
        &mut self,
        name: &str,
        config: LoraConfig,
        mut pairs: Vec<Vec<(TargetModule, LoraPair)>>,
    ) -> Result<AdapterId> {
        if pairs.len() != self.layers.len() {
            return Err(BackboneError::adapter(
                name,
                format!(
                    "{} layers given, model has {}",
                    pairs.len(),
                    self.layers.len()
                ),
            ));
        }
        let (slot, revision) = match self.adapters.iter().position(|a| a.name == name) {
            Some(i) => (i, self.adapters[i].revision + 1),
            None => (self.adapters.len(), 0),
        };
        for layer_pairs in &pairs {
            let targets: Vec<TargetModule> = layer_pairs.iter().map(|(t, _)| *t).collect();
            self.check_targets(name, &targets)?;
        }
        for (layer, layer_pairs) in self.layers.iter_mut().zip(pairs.iter_mut()) {
            for t in TargetModule::EVERY {
                if let Some(lin) = layer.target_mut(t) {
                    lin.set_adapter(slot, None);
                }
            }
            for (t, pair) in layer_pairs.drain(..) {
                layer
                    .target_mut(t)
                    .expect("check_targets")
                    .set_adapter(slot, Some(pair));
            }
        }
        let spec = AdapterSpec {
            name: name.to_string(),
            config,
            revision,
        };
        if slot == self.adapters.len() {
            self.adapters.push(spec);
        } else {
            self.adapters[slot] = spec;
        }
        Ok(AdapterId(slot))
    }

    /// A copy with adapter `id` folded into the base weights and no adapters left: the fast
    /// path for inference with one role.
    pub fn merged(&self, id: AdapterId) -> Self {
        let mut out = self.clone();
        for layer in &mut out.layers {
            for t in TargetModule::EVERY {
                if let Some(lin) = layer.target_mut(t) {
                    *lin = lin.merged(id.0);
                }
            }
        }
        out.adapters.clear();
        out
    }

    /// Final hidden states `[b, t, H]` (after `model.norm`). With a cache, `batch` holds only
    /// the new tokens and the cache grows by `batch.len` columns.
    pub fn forward_hidden(
        &self,
        batch: &Batch,
        opts: Forward,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor<3>> {
        let device = self.device();
        let (b, t) = (batch.batch, batch.len);
        if batch.ids.len() != b * t || batch.positions.len() != b * t || batch.valid.len() != b * t
        {
            return Err(BackboneError::Invalid(format!(
                "batch of {b}×{t} has {} ids, {} positions, {} flags",
                batch.ids.len(),
                batch.positions.len(),
                batch.valid.len()
            )));
        }
        if t == 0 {
            return Err(BackboneError::Invalid("empty batch (no tokens)".into()));
        }
        if let Some(&bad) = batch
            .ids
            .iter()
            .find(|&&id| id as usize >= self.config.vocab_size)
        {
            return Err(BackboneError::Invalid(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        if let Some(id) = opts.adapter
            && id.0 >= self.adapters.len()
        {
            return Err(BackboneError::Invalid(format!(
                "adapter slot {} is not registered",
                id.0
            )));
        }
        if let Some(c) = &cache
            && (c.key_valid.len() != b || c.layers.len() != self.layers.len())
        {
            return Err(BackboneError::Invalid(format!(
                "KV cache holds {} rows and {} layers; this call has {b} rows and the model {} layers",
                c.key_valid.len(),
                c.layers.len(),
                self.layers.len()
            )));
        }
        let past = cache.as_ref().map_or(0, |c| c.len());
        let total = past + t;
        if let Some(w) = self.config.sliding_window
            && total > w
        {
            return Err(BackboneError::Invalid(format!(
                "sequence of {total} tokens exceeds the sliding window {w}; sliding-window attention is not implemented"
            )));
        }

        let mut key_valid: Vec<Vec<bool>> = match &cache {
            Some(c) => c.key_valid.clone(),
            None => vec![Vec::new(); b],
        };
        for (row, kv) in key_valid.iter_mut().enumerate() {
            kv.extend_from_slice(&batch.valid[row * t..(row + 1) * t]);
        }
        let mask = AttentionMask::new(
            &key_valid,
            past,
            t,
            self.config.num_attention_heads,
            &device,
        );

        let (cos, sin) = self.rope.cos_sin(&batch.positions, &device);
        let rd = self.rope.rotary_dim();
        let cos = cos.reshape([b, 1, t, rd]);
        let sin = sin.reshape([b, 1, t, rd]);

        let ids = Tensor::<2, Int>::from_data(
            TensorData::new(
                batch.ids.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                [b, t],
            ),
            &device,
        );
        let mut x = embedding(self.embed_tokens.val(), ids);
        let slot = opts.adapter.map(|a| a.0);
        let mut new_cache = cache;
        for (li, layer) in self.layers.iter().enumerate() {
            let layer_cache = new_cache.as_mut().map(|c| &mut c.layers[li]);
            x = self.layer_forward(layer, x, &cos, &sin, &mask, slot, opts.train, layer_cache);
        }
        if let Some(c) = new_cache {
            c.key_valid = key_valid;
        }
        Ok(self.norm.forward(x))
    }

    #[allow(clippy::too_many_arguments)]
    fn layer_forward(
        &self,
        layer: &DecoderLayer,
        x: Tensor<3>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: &AttentionMask,
        slot: Option<usize>,
        train: bool,
        cache: Option<&mut Option<LayerKv>>,
    ) -> Tensor<3> {
        let c = &self.config;
        let [b, t, _] = x.dims();
        let (nh, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
        let n1 = layer.input_layernorm.forward(x.clone());
        let attn = &layer.self_attn;
        let (q, k, v) = match &attn.qkv {
            QkvProj::Separate(s) => (
                s.q_proj.forward(n1.clone(), slot, train),
                s.k_proj.forward(n1.clone(), slot, train),
                s.v_proj.forward(n1, slot, train),
            ),
            QkvProj::Fused(l) => {
                let qkv = l.forward(n1, slot, train);
                let (qd, kvd) = (nh * d, nkv * d);
                (
                    qkv.clone().slice([0..b, 0..t, 0..qd]),
                    qkv.clone().slice([0..b, 0..t, qd..qd + kvd]),
                    qkv.slice([0..b, 0..t, qd + kvd..qd + 2 * kvd]),
                )
            }
        };
        let mut q = q.reshape([b, t, nh, d]);
        let mut k = k.reshape([b, t, nkv, d]);
        if let (Some(qn), Some(kn)) = (&attn.q_norm, &attn.k_norm) {
            q = qn.forward(q);
            k = kn.forward(k);
        }
        let q = q.swap_dims(1, 2);
        let k = k.swap_dims(1, 2);
        let v = v.reshape([b, t, nkv, d]).swap_dims(1, 2);
        let q = apply_rotary(q, cos.clone(), sin.clone());
        let k = apply_rotary(k, cos.clone(), sin.clone());
        // With a cache, attention reads the first `total` columns of its buffers (the buffers
        // go back into the cache; these clones are gone before the next step appends).
        let (k, v, total) = match cache {
            Some(slot_cache) => {
                let grown = match slot_cache.take() {
                    Some(cached) => cached.appended(k, v),
                    None => LayerKv::new(k, v),
                };
                let (kb, vb) = grown.buffers();
                let read = (kb.clone(), vb.clone(), grown.len());
                *slot_cache = Some(grown);
                read
            }
            None => {
                let total = k.dims()[2];
                (k, v, total)
            }
        };
        let groups = nh / nkv;
        let expand = |x: Tensor<4>| -> Tensor<4> {
            if groups == 1 {
                x
            } else {
                x.unsqueeze_dim::<5>(2)
                    .expand([b, nkv, groups, total, d])
                    .reshape([b, nh, total, d])
            }
        };
        let scale = 1.0 / (d as f64).sqrt();
        // A decoding step reads the cache once per key/value head (grouped_attention); the
        // rest expands K and V to every head for Burn's kernel.
        let grouped = mask
            .key_mask()
            .and_then(|m| grouped_attention::decode(&q, &k, &v, total, m, scale as f32));
        let ctx = match grouped {
            Some(ctx) => ctx,
            None => attention(
                q,
                expand(first_columns(k, total)),
                expand(first_columns(v, total)),
                None,
                mask.bias.clone(),
                AttentionModuleOptions {
                    scale: Some(scale),
                    softcap: None,
                    is_causal: mask.is_causal,
                },
            )
            .swap_dims(1, 2)
            .reshape([b, t, nh * d]),
        };
        let h = x + attn.o_proj.forward(ctx, slot, train);
        let n2 = layer.post_attention_layernorm.forward(h.clone());
        let mlp = &layer.mlp;
        let (gate, up) = match &mlp.gate_up {
            GateUpProj::Separate(s) => (
                s.gate_proj.forward(n2.clone(), slot, train),
                s.up_proj.forward(n2, slot, train),
            ),
            GateUpProj::Fused(l) => {
                let i = c.intermediate_size;
                let gu = l.forward(n2, slot, train);
                (
                    gu.clone().slice([0..b, 0..t, 0..i]),
                    gu.slice([0..b, 0..t, i..2 * i]),
                )
            }
        };
        h + mlp.down_proj.forward(silu(gate) * up, slot, train)
    }

    /// Logits `[.., vocab]` of hidden states `[.., H]`.
    pub fn lm_logits<const D: usize>(&self, hidden: Tensor<D>) -> Tensor<D> {
        // A decoding step's few rows read the vocabulary's weights once (few_rows), from the
        // file's blocks where they are kept.
        if let Some(p) = &self.packed_output
            && let Some(y) = crate::few_rows::linear_packed(&hidden, p, None)
        {
            return y;
        }
        let (w, layout) = match &self.lm_head {
            Some(w) => (w.val(), Layout::InOut),
            None => (self.embed_tokens.val(), Layout::OutIn),
        };
        if let Some(y) = crate::few_rows::linear(&hidden, &w, None, layout) {
            return y;
        }
        match layout {
            Layout::InOut => linear(hidden, w, None),
            Layout::OutIn => linear(hidden, w.transpose(), None),
        }
    }

    /// Logits `[b, t, vocab]` of every position.
    pub fn forward(
        &self,
        batch: &Batch,
        opts: Forward,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor<3>> {
        let hidden = self.forward_hidden(batch, opts, cache)?;
        Ok(self.lm_logits(hidden))
    }

    /// An empty KV cache sized for this model.
    pub fn new_cache(&self, batch: usize) -> KvCache {
        KvCache::new(self.layers.len(), batch)
    }
}
