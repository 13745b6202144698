//! # hier-backbone
//!
//! One frozen decoder-only transformer of the Llama family — Llama 3.x (with `llama3` RoPE
//! scaling), Qwen2/Qwen2.5 (q/k/v bias, tied embeddings), Qwen3 (per-head q/k norms), Mistral
//! and Phi-3/Phi-4 (fused projections, partial rotary, LongRoPE) — read from Hugging Face
//! `config.json` + safetensors, with any number of **named LoRA adapters** (`sys1`, `sys2`,
//! `steer`, …) over the one base held once in memory. Each call picks its adapter; adapters
//! load and save in PEFT's format. Around it: value/Q heads, batched KV-cache generation with
//! per-token log-probabilities, scoring of given continuations (with or without autodiff),
//! HF tokenizers with chat templates, and byte-level BPE training for from-scratch backbones.
//! GGUF files (llama.cpp's format, quantised or not) load wherever an HF directory does.
//!
//! It owns no environment, loss or training loop (see the workspace's ARCHITECTURE).
//!
//! ```no_run
//! use hier_backbone::{CausalLm, LoraConfig, TargetModule, Batch, Forward, parse_device};
//! let device = parse_device("cpu")?;
//! let mut lm = CausalLm::load(std::path::Path::new("models/tiny"), &device)?;
//! let sys1 = lm.add_adapter("sys1", LoraConfig::new(16, 32.0, &[TargetModule::Q, TargetModule::V]), 0)?;
//! let logits = lm.forward(&Batch::single(&[1, 2, 3]), Forward::with(Some(sys1)), None)?;
//! # Ok::<(), hier_backbone::BackboneError>(())
//! ```

pub mod config;
pub mod device;
pub mod error;
pub mod few_rows;
pub mod generate;
pub mod gguf;
pub mod grouped_attention;
pub mod heads;
pub mod kv_cache;
pub mod llama;
pub mod lora;
pub mod packed;
pub mod param;
pub mod peft;
pub mod prefix_cache;
pub mod rope;
pub mod score;
pub mod serde_skip;
pub mod tokenizer;
pub mod weights;

pub use config::{Family, ModelConfig};
pub use device::parse_device;
pub use error::{BackboneError, Result, write_atomic};
pub use generate::{FinishReason, Generation, GenerationRequest, SamplingConfig};
pub use heads::{ValueHead, gather_positions};
pub use kv_cache::{KvCache, LayerKv};
pub use llama::{AdapterId, AdapterSpec, Batch, CausalLm, Forward};
pub use lora::{LoraConfig, TargetModule};
pub use prefix_cache::{PrefillStats, PrefixCache};
pub use score::{ScoreOutput, ScoreRequest};
pub use tokenizer::{ChatTemplate, Message, Tokenizer, train_bpe};

/// Re-export of the Burn version this crate is built on, so dependants use the same types.
pub use burn;
