//! GGUF checkpoints — llama.cpp's single-file format, and how most people keep local models
//! (llama.cpp, Ollama, LM Studio) — read as a model, a tokenizer and a chat template.
//!
//! - [`GgufFile`]: the container (versions 2 and 3; metadata of every value type; tensor infos;
//!   alignment), every length checked against the file.
//! - [`quant`]: dequantisation of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and
//!   Q6_K to f32 (the model then runs in f32 like an HF checkpoint).
//! - [`GgufSource`]: tensors under their HF names, with llama.cpp's q/k row permutation undone;
//!   [`GgufFile::model_config`]: the hyper-parameters as a [`crate::ModelConfig`].
//! - [`GgufFile::tokenizer`]: the byte-level BPE tokenizer and chat template from
//!   `tokenizer.ggml.*` and `tokenizer.chat_template`.
//!
//! [`crate::CausalLm::load`] and [`crate::Tokenizer::load`] take a `.gguf` path wherever they
//! take an HF directory; [`write_hf_dir`] writes the HF directory transformers loads.

mod file;
mod model;
pub mod quant;
mod tokenizer;

use std::path::Path;

pub use file::{GgufFile, MetaValue, TensorInfo};
pub use model::{ARCHITECTURES, GgufSource, unpermute_rows};
pub use quant::GgmlType;
pub use tokenizer::{GgufTokenizer, PRE_TOKENIZERS};

use crate::error::{Result, write_atomic};

/// Whether `path` names a GGUF file (by its extension).
pub fn is_gguf(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// Writes `config.json`, `model.safetensors` (f32), `tokenizer.json`, `tokenizer_config.json`
/// (with the chat template) and `generation_config.json` for the GGUF file `file` into `out`:
/// an HF directory that transformers loads and that computes the same logits.
pub fn write_hf_dir(file: &GgufFile, out: &Path) -> Result<()> {
    let config = file.model_config()?;
    let docs = file.tokenizer_documents()?;
    let tensors = GgufSource::new(file, config.clone()).all_hf()?;
    std::fs::create_dir_all(out).map_err(|e| crate::error::BackboneError::io(out, e))?;
    crate::weights::write_safetensors(&out.join("model.safetensors"), &tensors)?;
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).expect("json");
    write_atomic(
        &out.join("tokenizer.json"),
        docs.tokenizer_json.to_string().as_bytes(),
    )?;
    write_atomic(
        &out.join("tokenizer_config.json"),
        pretty(&docs.tokenizer_config).as_bytes(),
    )?;
    let mut generation = serde_json::Map::new();
    if let Some(b) = config.bos_token_id {
        generation.insert("bos_token_id".into(), b.into());
    }
    if let Some(&e) = config.eos_token_ids.first() {
        generation.insert("eos_token_id".into(), e.into());
    }
    if let Some(p) = config.pad_token_id {
        generation.insert("pad_token_id".into(), p.into());
    }
    write_atomic(
        &out.join("generation_config.json"),
        pretty(&serde_json::Value::Object(generation)).as_bytes(),
    )?;
    // config.json last: a directory without it is not taken for a finished model.
    write_atomic(
        &out.join("config.json"),
        pretty(&config.to_json()).as_bytes(),
    )
}
