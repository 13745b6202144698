//! Hugging Face safetensors checkpoints: loading (one file or a sharded index; f32/f16/bf16),
//! random initialisation with transformers' scheme, and saving in the same layout.
//!
//! HF stores a linear layer's weight as `[out, in]` and computes `x·Wᵀ`; we keep `[in, out]`
//! and compute `x·W`, so linear weights are transposed on the way in and out. Every tensor the
//! config implies must be present with the right shape, and no other tensor may be: the error
//! names the tensor and the file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::{Device, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};

use crate::config::ModelConfig;
use crate::error::{BackboneError, Result, read_json, write_atomic};
use crate::llama::{
    Attention, CausalLm, DecoderLayer, GateUpProj, Mlp, QkvProj, RmsNorm, SeparateGateUp,
    SeparateQkv,
};
use crate::lora::LoraLinear;
use crate::packed::PackedWeight;

/// A tensor read from a checkpoint, converted to f32 on the host.
#[derive(Debug, Clone)]
pub struct HostTensor {
    /// Shape as stored.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

impl HostTensor {
    /// Copies a tensor to the host as f32.
    pub fn from_tensor<const D: usize>(t: Tensor<D>) -> Self {
        let shape = t.dims().to_vec();
        let data = t
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .expect("a float tensor converted to f32 reads as f32");
        Self { shape, data }
    }

    /// Transposes a 2-D tensor.
    pub fn transposed(&self) -> HostTensor {
        let (r, c) = (self.shape[0], self.shape[1]);
        let mut out = vec![0f32; r * c];
        for i in 0..r {
            for j in 0..c {
                out[j * r + i] = self.data[i * c + j];
            }
        }
        HostTensor {
            shape: vec![c, r],
            data: out,
        }
    }
}

/// Decodes one safetensors view to f32.
fn decode(
    path: &Path,
    name: &str,
    view: &safetensors::tensor::TensorView<'_>,
) -> Result<HostTensor> {
    let bytes = view.data();
    let data: Vec<f32> = match view.dtype() {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => {
            return Err(BackboneError::Safetensors {
                path: path.into(),
                msg: format!(
                    "tensor `{name}` has dtype {other:?}; only F32, F16 and BF16 are supported"
                ),
            });
        }
    };
    Ok(HostTensor {
        shape: view.shape().to_vec(),
        data,
    })
}

/// Reads every tensor of one safetensors file.
pub fn read_safetensors(path: &Path) -> Result<BTreeMap<String, HostTensor>> {
    let bytes = std::fs::read(path).map_err(|e| BackboneError::io(path, e))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| BackboneError::Safetensors {
        path: path.into(),
        msg: e.to_string(),
    })?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let t = decode(path, &name, &view)?;
        out.insert(name, t);
    }
    Ok(out)
}

/// Writes f32 tensors as one safetensors file (metadata `format: pt`, which transformers wants),
/// atomically.
pub fn write_safetensors(path: &Path, tensors: &BTreeMap<String, HostTensor>) -> Result<()> {
    let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|(k, t)| {
            (
                k.clone(),
                t.data.iter().flat_map(|x| x.to_le_bytes()).collect(),
                t.shape.clone(),
            )
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(k, b, s)| {
            safetensors::tensor::TensorView::new(Dtype::F32, s.clone(), b)
                .map(|v| (k.clone(), v))
                .map_err(|e| BackboneError::Safetensors {
                    path: path.into(),
                    msg: format!("tensor `{k}`: {e}"),
                })
        })
        .collect::<Result<_>>()?;
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    let out =
        safetensors::serialize(views, Some(meta)).map_err(|e| BackboneError::Safetensors {
            path: path.into(),
            msg: e.to_string(),
        })?;
    write_atomic(path, &out)
}

/// Where the tensors of a model come from.
pub trait TensorSource {
    /// The tensor `name`, which must have `shape` (HF layout).
    fn take(&mut self, name: &str, shape: &[usize], kind: InitKind) -> Result<HostTensor>;
    /// The 2-D tensor `name` (HF layout `[out, in]`, already [`TensorSource::take`]n) as the
    /// file stores it, when it is kept that way for decoding ([`PackedWeight`]); `None` for
    /// sources of f32 values (checkpoints, random initialisation) and types without a kernel.
    fn packed(&mut self, _name: &str) -> Result<Option<PackedWeight>> {
        Ok(None)
    }
    /// Called after the model is built: complain about tensors nobody took.
    fn finish(self) -> Result<()>;
}

/// How transformers initialises a tensor of this role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitKind {
    /// `N(0, initializer_range)`: embeddings and linear weights.
    Normal,
    /// Zeros: biases.
    Zeros,
    /// Ones: norm scales.
    Ones,
}

/// Tensors from a checkpoint directory (single file or sharded index).
pub struct CheckpointSource {
    label: PathBuf,
    tensors: BTreeMap<String, HostTensor>,
}

impl CheckpointSource {
    /// Opens `<dir>/model.safetensors` or `<dir>/model.safetensors.index.json`.
    pub fn open(dir: &Path) -> Result<Self> {
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        if single.exists() {
            return Ok(Self {
                tensors: read_safetensors(&single)?,
                label: single,
            });
        }
        if index.exists() {
            let v = read_json(&index)?;
            let map = v
                .get("weight_map")
                .and_then(|m| m.as_object())
                .ok_or_else(|| {
                    BackboneError::config(&index, "weight_map", "missing or not an object")
                })?;
            let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (name, file) in map {
                let file = file.as_str().ok_or_else(|| {
                    BackboneError::config(&index, format!("weight_map.{name}"), "not a file name")
                })?;
                by_file
                    .entry(file.to_string())
                    .or_default()
                    .push(name.clone());
            }
            let mut tensors = BTreeMap::new();
            for (file, names) in by_file {
                let shard_path = dir.join(&file);
                let mut shard = read_safetensors(&shard_path)?;
                for n in names {
                    let t = shard
                        .remove(&n)
                        .ok_or_else(|| BackboneError::MissingTensor {
                            path: shard_path.clone(),
                            name: n.clone(),
                        })?;
                    tensors.insert(n, t);
                }
            }
            return Ok(Self {
                tensors,
                label: index,
            });
        }
        Err(BackboneError::io(
            single,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no model.safetensors or model.safetensors.index.json in this directory",
            ),
        ))
    }
}

impl TensorSource for CheckpointSource {
    fn take(&mut self, name: &str, shape: &[usize], _kind: InitKind) -> Result<HostTensor> {
        let t = self
            .tensors
            .remove(name)
            .ok_or_else(|| BackboneError::MissingTensor {
                path: self.label.clone(),
                name: name.into(),
            })?;
        if t.shape != shape {
            return Err(BackboneError::ShapeMismatch {
                path: self.label.clone(),
                name: name.into(),
                got: t.shape,
                expected: shape.to_vec(),
            });
        }
        Ok(t)
    }
    fn finish(self) -> Result<()> {
        // Left over only when embeddings are tied: transformers drops a stored lm_head then, and
        // old checkpoints carry RoPE's inv_freq buffers; so do we.
        let names: Vec<String> = self
            .tensors
            .into_keys()
            .filter(|k| k != "lm_head.weight" && !k.ends_with("rotary_emb.inv_freq"))
            .collect();
        if names.is_empty() {
            Ok(())
        } else {
            Err(BackboneError::UnexpectedTensors {
                path: self.label,
                names,
            })
        }
    }
}

/// Random tensors with transformers' initialisation (`N(0, σ)` weights, zero biases, unit norms),
/// drawn from a seeded generator so a seed fixes the model.
pub struct RandomSource {
    rng: rand::rngs::StdRng,
    std: f32,
}

impl RandomSource {
    /// `N(0, std)` weights from `seed`.
    pub fn new(seed: u64, std: f32) -> Self {
        use rand::SeedableRng;
        Self {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            std,
        }
    }
}

impl TensorSource for RandomSource {
    fn take(&mut self, _name: &str, shape: &[usize], kind: InitKind) -> Result<HostTensor> {
        use rand::Rng;
        let n: usize = shape.iter().product();
        let data = match kind {
            InitKind::Zeros => vec![0.0; n],
            InitKind::Ones => vec![1.0; n],
            InitKind::Normal => (0..n)
                .map(|_| {
                    // Box–Muller: keeps the dependency list short and the stream seeded.
                    let u1: f32 = self.rng.random_range(f32::EPSILON..1.0);
                    let u2: f32 = self.rng.random();
                    self.std * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
                })
                .collect(),
        };
        Ok(HostTensor {
            shape: shape.to_vec(),
            data,
        })
    }
    fn finish(self) -> Result<()> {
        Ok(())
    }
}

fn to_device2(t: HostTensor, device: &Device) -> Tensor<2> {
    let s = [t.shape[0], t.shape[1]];
    Tensor::from_data(TensorData::new(t.data, s), device)
}

fn to_device1(t: HostTensor, device: &Device) -> Tensor<1> {
    let s = [t.shape[0]];
    Tensor::from_data(TensorData::new(t.data, s), device)
}

/// The HF tensors of one linear layer: `(weight [out,in], bias [out]?)`.
fn take_linear(
    src: &mut impl TensorSource,
    prefix: &str,
    din: usize,
    dout: usize,
    bias: bool,
    device: &Device,
) -> Result<LoraLinear> {
    let w = src
        .take(&format!("{prefix}.weight"), &[dout, din], InitKind::Normal)?
        .transposed();
    let b = if bias {
        Some(to_device1(
            src.take(&format!("{prefix}.bias"), &[dout], InitKind::Zeros)?,
            device,
        ))
    } else {
        None
    };
    let mut lin = LoraLinear::new(prefix, to_device2(w, device), b);
    lin.packed = packed(src, &format!("{prefix}.weight"), [dout, din])?;
    Ok(lin)
}

/// [`TensorSource::packed`], checked to have the HF shape `[out, in]` the dense weight has.
fn packed(
    src: &mut impl TensorSource,
    name: &str,
    shape: [usize; 2],
) -> Result<Option<Arc<PackedWeight>>> {
    match src.packed(name)? {
        Some(p) if p.dims() != shape => Err(BackboneError::Invalid(format!(
            "{name}: packed blocks of {:?}, dense weight of {shape:?}",
            p.dims()
        ))),
        p => Ok(p.map(Arc::new)),
    }
}

fn take_norm(
    src: &mut impl TensorSource,
    name: &str,
    h: usize,
    eps: f64,
    device: &Device,
) -> Result<RmsNorm> {
    let w = to_device1(src.take(name, &[h], InitKind::Ones)?, device);
    Ok(RmsNorm {
        weight: crate::param::named_param(name, w, false),
        eps,
    })
}

impl CausalLm {
    /// Builds the model from any tensor source (a checkpoint, or random initialisation).
    pub fn from_source(
        config: ModelConfig,
        mut src: impl TensorSource,
        device: &Device,
    ) -> Result<Self> {
        let c = &config;
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let q = c.num_attention_heads * c.head_dim;
        let kv = c.num_key_value_heads * c.head_dim;
        let embed = to_device2(
            src.take(
                "model.embed_tokens.weight",
                &[c.vocab_size, h],
                InitKind::Normal,
            )?,
            device,
        );
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for l in 0..c.num_hidden_layers {
            let p = format!("model.layers.{l}");
            let mut lin = |name: &str, din: usize, dout: usize, bias: bool| {
                take_linear(&mut src, &format!("{p}.{name}"), din, dout, bias, device)
            };
            let qkv = if c.fused_projections {
                QkvProj::Fused(lin("self_attn.qkv_proj", h, q + 2 * kv, c.qkv_bias)?)
            } else {
                QkvProj::Separate(SeparateQkv {
                    q_proj: lin("self_attn.q_proj", h, q, c.qkv_bias)?,
                    k_proj: lin("self_attn.k_proj", h, kv, c.qkv_bias)?,
                    v_proj: lin("self_attn.v_proj", h, kv, c.qkv_bias)?,
                })
            };
            let o_proj = lin("self_attn.o_proj", q, h, c.o_bias)?;
            let gate_up = if c.fused_projections {
                GateUpProj::Fused(lin("mlp.gate_up_proj", h, 2 * i, c.mlp_bias)?)
            } else {
                GateUpProj::Separate(SeparateGateUp {
                    gate_proj: lin("mlp.gate_proj", h, i, c.mlp_bias)?,
                    up_proj: lin("mlp.up_proj", h, i, c.mlp_bias)?,
                })
            };
            let down_proj = lin("mlp.down_proj", i, h, c.mlp_bias)?;
            let mut norm = |name: &str, dim: usize| {
                take_norm(
                    &mut src,
                    &format!("{p}.{name}.weight"),
                    dim,
                    c.rms_norm_eps,
                    device,
                )
            };
            let (q_norm, k_norm) = if c.qk_norm {
                (
                    Some(norm("self_attn.q_norm", c.head_dim)?),
                    Some(norm("self_attn.k_norm", c.head_dim)?),
                )
            } else {
                (None, None)
            };
            let input_layernorm = norm("input_layernorm", h)?;
            let post_attention_layernorm = norm("post_attention_layernorm", h)?;
            layers.push(DecoderLayer {
                self_attn: Attention {
                    qkv,
                    o_proj,
                    q_norm,
                    k_norm,
                },
                mlp: Mlp { gate_up, down_proj },
                input_layernorm,
                post_attention_layernorm,
            });
        }
        let norm = to_device1(src.take("model.norm.weight", &[h], InitKind::Ones)?, device);
        let (lm_head, packed_output) = if c.tie_word_embeddings {
            let packed = packed(&mut src, "model.embed_tokens.weight", [c.vocab_size, h])?;
            (None, packed)
        } else {
            let w = src
                .take("lm_head.weight", &[c.vocab_size, h], InitKind::Normal)?
                .transposed();
            let packed = packed(&mut src, "lm_head.weight", [c.vocab_size, h])?;
            (Some(to_device2(w, device)), packed)
        };
        src.finish()?;
        let mut lm = CausalLm::from_parts(config, embed, layers, norm, lm_head);
        lm.packed_output = packed_output;
        Ok(lm)
    }

    /// Loads a model: an HF directory (`config.json` + safetensors) or a `.gguf` file
    /// (dequantised to f32).
    pub fn load(path: &Path, device: &Device) -> Result<Self> {
        if crate::gguf::is_gguf(path) {
            return Self::from_gguf(&crate::gguf::GgufFile::open(path)?, device);
        }
        let config = ModelConfig::from_file(path)?;
        Self::from_source(config, CheckpointSource::open(path)?, device)
    }

    /// The model of a GGUF file already read (its tokenizer comes from the same file:
    /// [`crate::gguf::GgufFile::tokenizer`]).
    pub fn from_gguf(file: &crate::gguf::GgufFile, device: &Device) -> Result<Self> {
        let config = file.model_config()?;
        Self::from_source(
            config.clone(),
            crate::gguf::GgufSource::new(file, config),
            device,
        )
    }

    /// A randomly initialised model (transformers' scheme, σ = 0.02), fixed by `seed`.
    pub fn random(config: ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        Self::from_source(config, RandomSource::new(seed, 0.02), device)
    }

    /// The base weights under their HF names and in HF layout.
    pub fn hf_tensors(&self) -> BTreeMap<String, HostTensor> {
        let mut out = BTreeMap::new();
        let host2 = |t: Tensor<2>, transpose: bool| {
            let h = HostTensor::from_tensor(t);
            if transpose { h.transposed() } else { h }
        };
        let host1 = HostTensor::from_tensor::<1>;
        out.insert(
            "model.embed_tokens.weight".into(),
            host2(self.embed_tokens.val(), false),
        );
        for (l, layer) in self.layers.iter().enumerate() {
            for (t, lin) in layer.linears() {
                let p = format!("model.layers.{l}.{}", t.path());
                out.insert(format!("{p}.weight"), host2(lin.weight.val(), true));
                if let Some(b) = &lin.bias {
                    out.insert(format!("{p}.bias"), host1(b.val()));
                }
            }
            for (name, norm) in [
                ("q_norm", &layer.self_attn.q_norm),
                ("k_norm", &layer.self_attn.k_norm),
            ] {
                if let Some(n) = norm {
                    out.insert(
                        format!("model.layers.{l}.self_attn.{name}.weight"),
                        host1(n.weight.val()),
                    );
                }
            }
            out.insert(
                format!("model.layers.{l}.input_layernorm.weight"),
                host1(layer.input_layernorm.weight.val()),
            );
            out.insert(
                format!("model.layers.{l}.post_attention_layernorm.weight"),
                host1(layer.post_attention_layernorm.weight.val()),
            );
        }
        out.insert("model.norm.weight".into(), host1(self.norm.weight.val()));
        if let Some(w) = &self.lm_head {
            out.insert("lm_head.weight".into(), host2(w.val(), true));
        }
        out
    }

    /// Writes `config.json` and `model.safetensors` (f32) so `transformers` loads them.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| BackboneError::io(dir, e))?;
        let cfg = serde_json::to_string_pretty(&self.config.to_json()).expect("json");
        write_safetensors(&dir.join("model.safetensors"), &self.hf_tensors())?;
        write_atomic(&dir.join("config.json"), cfg.as_bytes())
    }
}
