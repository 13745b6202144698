//! The tokenizer a GGUF file carries in its metadata (`tokenizer.ggml.*`), rebuilt as a
//! Hugging Face `tokenizer.json` (the same document `convert` writes next to the weights).
//!
//! Only byte-level BPE vocabularies (`tokenizer.ggml.model = "gpt2"`) are read. The
//! pre-tokenizer is chosen by `tokenizer.ggml.pre`, as llama.cpp chooses its split regexes:
//!
//! | `pre` | pre-tokenizer |
//! |---|---|
//! | `smollm`, `starcoder`, `refact` | every digit alone, then GPT-2's byte-level regex |
//! | `llama-bpe`, `llama3` | Llama 3's regex (digits in runs of ≤ 3), then byte-level without regex |
//! | `qwen2` | Qwen2's regex (single digits), byte-level without regex; NFC normalisation |
//! | `gpt-2`, `default` | GPT-2's byte-level regex |
//!
//! Token types (`tokenizer.ggml.token_type`): 3 (control) become special added tokens, 4
//! (user-defined) non-special added tokens; both are matched in text before BPE runs, as
//! transformers does by default.

use serde_json::{Value, json};

use super::file::GgufFile;
use crate::error::{BackboneError, Result};
use crate::tokenizer::{ChatTemplate, Tokenizer};

/// Llama 3's split regex (as its `tokenizer.json` writes it).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split regex: as Llama 3's, with single digits.
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `pre` names this module reads.
pub const PRE_TOKENIZERS: &str =
    "smollm, starcoder, refact, llama-bpe, llama3, qwen2, gpt-2, default";

fn byte_level(use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split(regex: &str) -> Value {
    json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false})
}

/// `(normalizer, pre_tokenizer, ignore_merges)` for a `pre` name.
fn pre_tokenizer(file: &GgufFile, pre: &str) -> Result<(Value, Value, bool)> {
    Ok(match pre {
        "smollm" | "starcoder" | "refact" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            false,
        ),
        "llama-bpe" | "llama3" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]}),
            true,
        ),
        "qwen2" => (
            json!({"type": "NFC"}),
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
            false,
        ),
        "gpt-2" | "default" => (Value::Null, byte_level(true), false),
        other => {
            return Err(file.meta_err(
                "tokenizer.ggml.pre",
                format!("pre-tokenizer `{other}` is not supported (supported: {PRE_TOKENIZERS})"),
            ));
        }
    })
}

fn strings<'a>(file: &'a GgufFile, key: &str) -> Result<Vec<&'a str>> {
    let arr = file
        .get(key)
        .ok_or_else(|| file.meta_err(key, "missing"))?
        .as_array()
        .ok_or_else(|| file.meta_err(key, "not an array"))?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .ok_or_else(|| file.meta_err(key, format!("element {i} is not a string")))
        })
        .collect()
}

/// The special-token ids the file names (`bos`, `eos`, `unk`, `pad`).
fn special_ids(file: &GgufFile, n: usize) -> Result<Vec<(&'static str, usize)>> {
    let mut out = Vec::new();
    for (name, key) in [
        ("bos_token", "tokenizer.ggml.bos_token_id"),
        ("eos_token", "tokenizer.ggml.eos_token_id"),
        ("unk_token", "tokenizer.ggml.unknown_token_id"),
        ("pad_token", "tokenizer.ggml.padding_token_id"),
    ] {
        if let Some(id) = file.opt_usize(key)? {
            if id >= n {
                return Err(file.meta_err(key, format!("token id {id} is outside the {n} tokens")));
            }
            out.push((name, id));
        }
    }
    Ok(out)
}

/// The `tokenizer.json` document and `tokenizer_config.json` fields of a GGUF file.
pub struct GgufTokenizer {
    /// HF `tokenizer.json`.
    pub tokenizer_json: Value,
    /// HF `tokenizer_config.json` (special tokens, `add_bos_token`, the chat template).
    pub tokenizer_config: Value,
}

impl GgufFile {
    /// Rebuilds the file's tokenizer as HF documents.
    pub fn tokenizer_documents(&self) -> Result<GgufTokenizer> {
        let model = self.str_key("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(self.meta_err(
                "tokenizer.ggml.model",
                format!(
                    "tokenizer model `{model}` is not supported (only byte-level BPE, `gpt2`; \
                     SentencePiece `llama` vocabularies are not read yet)"
                ),
            ));
        }
        let pre = match self.get("tokenizer.ggml.pre") {
            None => "default",
            Some(_) => self.str_key("tokenizer.ggml.pre")?,
        };
        let (normalizer, pre_tok, ignore_merges) = pre_tokenizer(self, pre)?;
        let tokens = strings(self, "tokenizer.ggml.tokens")?;
        let merges = strings(self, "tokenizer.ggml.merges")?;
        let types: Vec<i64> = match self.get("tokenizer.ggml.token_type") {
            None => vec![1; tokens.len()],
            Some(v) => {
                let a = v
                    .as_array()
                    .ok_or_else(|| self.meta_err("tokenizer.ggml.token_type", "not an array"))?;
                if a.len() != tokens.len() {
                    return Err(self.meta_err(
                        "tokenizer.ggml.token_type",
                        format!("{} types for {} tokens", a.len(), tokens.len()),
                    ));
                }
                a.iter()
                    .map(|t| {
                        t.as_i64().ok_or_else(|| {
                            self.meta_err("tokenizer.ggml.token_type", "not an integer")
                        })
                    })
                    .collect::<Result<_>>()?
            }
        };
        let mut vocab = serde_json::Map::with_capacity(tokens.len());
        let mut added = Vec::new();
        for (id, (tok, ty)) in tokens.iter().zip(&types).enumerate() {
            if vocab.insert((*tok).to_string(), json!(id)).is_some() {
                return Err(self.meta_err(
                    "tokenizer.ggml.tokens",
                    format!("token {tok:?} appears twice (again at id {id})"),
                ));
            }
            // 3 = control (special), 4 = user-defined (matched in text, not special).
            if *ty == 3 || *ty == 4 {
                added.push(
                    json!({"id": id, "content": tok, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": *ty == 3}),
                );
            }
        }
        for (i, m) in merges.iter().enumerate() {
            let Some((a, b)) = m.split_once(' ') else {
                return Err(self.meta_err(
                    "tokenizer.ggml.merges",
                    format!("merge {i} ({m:?}) is not two tokens separated by a space"),
                ));
            };
            for part in [a, b] {
                if !vocab.contains_key(part) {
                    return Err(self.meta_err(
                        "tokenizer.ggml.merges",
                        format!("merge {i} ({m:?}) names {part:?}, which is not in the vocabulary"),
                    ));
                }
            }
        }
        let specials = special_ids(self, tokens.len())?;
        let add_bos = self
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let bos = specials.iter().find(|(n, _)| *n == "bos_token");
        let post = match (add_bos, bos) {
            (true, Some((_, id))) => {
                let t = tokens[*id];
                json!({"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": t, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": t, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": t, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {t: {"id": t, "ids": [id], "tokens": [t]}}})
            }
            (true, None) => {
                return Err(self.meta_err(
                    "tokenizer.ggml.add_bos_token",
                    "true, but the file names no tokenizer.ggml.bos_token_id",
                ));
            }
            (false, _) => Value::Null,
        };
        let tokenizer_json = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": normalizer,
            "pre_tokenizer": pre_tok,
            "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges},
        });
        let mut cfg = serde_json::Map::new();
        cfg.insert("tokenizer_class".into(), json!("PreTrainedTokenizerFast"));
        cfg.insert("add_bos_token".into(), json!(add_bos));
        cfg.insert("add_eos_token".into(), json!(false));
        for (name, id) in &specials {
            cfg.insert((*name).into(), json!(tokens[*id]));
        }
        let arch = self.str_key("general.architecture").unwrap_or("llama");
        if let Some(ctx) = self.opt_usize(&format!("{arch}.context_length"))? {
            cfg.insert("model_max_length".into(), json!(ctx));
        }
        if let Some(t) = self.get("tokenizer.chat_template") {
            let t = t
                .as_str()
                .ok_or_else(|| self.meta_err("tokenizer.chat_template", "not a string"))?;
            cfg.insert("chat_template".into(), json!(t));
        }
        Ok(GgufTokenizer {
            tokenizer_json,
            tokenizer_config: Value::Object(cfg),
        })
    }

    /// The file's tokenizer, with its chat template.
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        let docs = self.tokenizer_documents()?;
        let text = docs.tokenizer_json.to_string();
        let inner: tokenizers::Tokenizer =
            text.parse()
                .map_err(|e: tokenizers::Error| BackboneError::Tokenizer {
                    path: self.path.clone(),
                    msg: format!("the tokenizer rebuilt from its metadata does not load: {e}"),
                })?;
        let mut tok = Tokenizer::from_inner(inner).with_path(self.path.clone());
        let cfg = &docs.tokenizer_config;
        if let Some(src) = cfg.get("chat_template").and_then(Value::as_str) {
            tok.chat_template = Some(ChatTemplate::with_config_tokens(src, cfg)?);
        }
        Ok(tok)
    }
}
