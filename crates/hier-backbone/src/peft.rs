//! LoRA adapters in PEFT's on-disk format: `adapter_config.json` plus
//! `adapter_model.safetensors` with keys
//! `base_model.model.model.layers.{i}.{self_attn|mlp}.{name}.lora_{A|B}.weight`,
//! `lora_A: [r, in]`, `lora_B: [out, r]` (we hold their transposes). An adapter written here
//! loads with `PeftModel.from_pretrained`, and one trained with PEFT loads here.
//!
//! Options we do not implement (DoRA, per-layer rank/alpha patterns, trained biases,
//! `modules_to_save`, …) are refused with an error naming the option, never ignored.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::{Tensor, TensorData};
use serde_json::{Value, json};

use crate::error::{BackboneError, Result, read_json, write_atomic};
use crate::llama::{AdapterId, CausalLm};
use crate::lora::{LoraConfig, LoraPair, TargetModule};
use crate::weights::{HostTensor, read_safetensors, write_safetensors};

/// PEFT config keys that do not change the adapter's function.
const IGNORED_KEYS: &[&str] = &[
    "peft_type",
    "task_type",
    "base_model_name_or_path",
    "revision",
    "inference_mode",
    "auto_mapping",
    "peft_version",
    "init_lora_weights",
    "megatron_core",
    "layers_pattern",
    "qalora_group_size",
];

fn is_default(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Reads `adapter_config.json` into a [`LoraConfig`]; `"all-linear"` means `all_linear` (the
/// model's own linear modules, [`crate::ModelConfig::linear_targets`]).
pub fn read_adapter_config(path: &Path, all_linear: &[TargetModule]) -> Result<LoraConfig> {
    let v = read_json(path)?;
    let m = v
        .as_object()
        .ok_or_else(|| BackboneError::config(path, "<root>", "not an object"))?;
    let peft_type = m.get("peft_type").and_then(Value::as_str).unwrap_or("LORA");
    if peft_type != "LORA" {
        return Err(BackboneError::config(
            path,
            "peft_type",
            format!("`{peft_type}` is not supported (only LORA)"),
        ));
    }
    let r = m
        .get("r")
        .and_then(Value::as_u64)
        .ok_or_else(|| BackboneError::config(path, "r", "missing or not an integer"))?
        as usize;
    let alpha = m.get("lora_alpha").and_then(Value::as_f64).unwrap_or(8.0);
    let dropout = m.get("lora_dropout").and_then(Value::as_f64).unwrap_or(0.0);
    let use_rslora = m
        .get("use_rslora")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let target_modules = match m.get("target_modules") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .and_then(TargetModule::parse)
                    .ok_or_else(|| BackboneError::config(path, "target_modules", format!("{x} is not one of q_proj, k_proj, v_proj, qkv_proj, o_proj, gate_proj, up_proj, gate_up_proj, down_proj")))
            })
            .collect::<Result<Vec<_>>>()?,
        Some(Value::String(s)) if s == "all-linear" => all_linear.to_vec(),
        Some(other) => return Err(BackboneError::config(path, "target_modules", format!("{other} is not supported (a list of module names, or \"all-linear\")"))),
        None => return Err(BackboneError::config(path, "target_modules", "missing")),
    };
    for (k, val) in m {
        let handled = [
            "r",
            "lora_alpha",
            "lora_dropout",
            "use_rslora",
            "target_modules",
        ]
        .contains(&k.as_str());
        if handled || IGNORED_KEYS.contains(&k.as_str()) {
            continue;
        }
        let ok = match k.as_str() {
            "bias" => val.as_str() == Some("none"),
            _ => is_default(val),
        };
        if !ok {
            return Err(BackboneError::config(
                path,
                k,
                format!("PEFT option {val} is not supported"),
            ));
        }
    }
    let mut target_modules = target_modules;
    target_modules.sort();
    target_modules.dedup();
    Ok(LoraConfig {
        r,
        alpha,
        dropout,
        target_modules,
        use_rslora,
    })
}

/// The PEFT `adapter_config.json` of a config.
pub fn adapter_config_json(config: &LoraConfig, base_model: Option<&str>) -> Value {
    json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": config.r,
        "lora_alpha": config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": config.target_modules.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "bias": "none",
        "fan_in_fan_out": false,
        "use_rslora": config.use_rslora,
        "use_dora": false,
        "init_lora_weights": true,
        "modules_to_save": null,
        "layers_to_transform": null,
        "layers_pattern": null,
        "rank_pattern": {},
        "alpha_pattern": {},
        "inference_mode": true,
        "revision": null,
    })
}

fn key(layer: usize, t: TargetModule, ab: &str) -> String {
    format!(
        "base_model.model.model.layers.{layer}.{}.lora_{ab}.weight",
        t.path()
    )
}

impl CausalLm {
    /// Writes adapter `id` as a PEFT directory (`adapter_config.json`, `adapter_model.safetensors`).
    pub fn save_adapter(&self, id: AdapterId, dir: &Path, base_model: Option<&str>) -> Result<()> {
        let spec = self
            .adapters()
            .get(id.0)
            .ok_or_else(|| BackboneError::adapter(format!("#{}", id.0), "not registered"))?
            .clone();
        let mut tensors = BTreeMap::new();
        for (l, layer) in self.layers.iter().enumerate() {
            for &t in &spec.config.target_modules {
                let pair = layer
                    .target(t)
                    .and_then(|lin| lin.lora.get(id.0))
                    .and_then(Option::as_ref)
                    .ok_or_else(|| {
                        BackboneError::adapter(
                            &spec.name,
                            format!("layer {l} {} has no pair", t.name()),
                        )
                    })?;
                tensors.insert(
                    key(l, t, "A"),
                    HostTensor::from_tensor(pair.a.val()).transposed(),
                );
                tensors.insert(
                    key(l, t, "B"),
                    HostTensor::from_tensor(pair.b.val()).transposed(),
                );
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| BackboneError::io(dir, e))?;
        write_safetensors(&dir.join("adapter_model.safetensors"), &tensors)?;
        let cfg = serde_json::to_string_pretty(&adapter_config_json(&spec.config, base_model))
            .expect("json");
        write_atomic(&dir.join("adapter_config.json"), cfg.as_bytes())
    }

    /// Loads a PEFT adapter directory under `name` (replacing an adapter of that name).
    pub fn load_adapter(&mut self, name: &str, dir: &Path) -> Result<AdapterId> {
        let cfg_path = dir.join("adapter_config.json");
        let config = read_adapter_config(&cfg_path, self.config.linear_targets())?;
        self.check_targets(name, &config.target_modules)?;
        let st_path = dir.join("adapter_model.safetensors");
        let mut tensors = read_safetensors(&st_path)?;
        let device = self.device();
        let mut pairs = Vec::with_capacity(self.layers.len());
        for (l, layer) in self.layers.iter().enumerate() {
            let mut layer_pairs = Vec::new();
            for &t in &config.target_modules {
                let [din, dout] = layer.target(t).expect("check_targets").dims();
                let mut take = |ab: &str, shape: [usize; 2]| -> Result<Tensor<2>> {
                    let k = key(l, t, ab);
                    let h = tensors
                        .remove(&k)
                        .ok_or_else(|| BackboneError::MissingTensor {
                            path: st_path.clone(),
                            name: k.clone(),
                        })?;
                    if h.shape != shape {
                        return Err(BackboneError::ShapeMismatch {
                            path: st_path.clone(),
                            name: k,
                            got: h.shape,
                            expected: shape.to_vec(),
                        });
                    }
                    let h = h.transposed();
                    Ok(Tensor::from_data(
                        TensorData::new(h.data, [shape[1], shape[0]]),
                        &device,
                    ))
                };
                let a = take("A", [config.r, din])?;
                let b = take("B", [dout, config.r])?;
                layer_pairs.push((
                    t,
                    LoraPair::from_tensors(
                        &format!("{name}/model.layers.{l}.{}", t.path()),
                        a,
                        b,
                        &config,
                    ),
                ));
            }
            pairs.push(layer_pairs);
        }
        if !tensors.is_empty() {
            return Err(BackboneError::UnexpectedTensors {
                path: st_path,
                names: tensors.into_keys().collect(),
            });
        }
        self.replace_adapter(name, config, pairs)
    }
}
