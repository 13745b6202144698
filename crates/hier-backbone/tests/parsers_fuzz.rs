//! The parsers of files from outside — GGUF, safetensors, `config.json`, PEFT adapters —
//! survive any input:
//! random bytes and damaged copies of real fixtures (cut short, bytes overwritten, length fields
//! set huge) give a typed error naming the file, never a panic or an unbounded allocation.
//! Cases per property: `PROPTEST_CASES` (default 256 here; CI runs the default).

use std::path::Path;

use hier_backbone::burn::tensor::Device;
use hier_backbone::gguf::GgufFile;
use hier_backbone::weights::read_safetensors;
use hier_backbone::{BackboneError, CausalLm, ModelConfig};
use proptest::prelude::*;

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(rel),
    )
    .unwrap()
}

/// A damaged copy of `bytes`: cut at `cut` (a fraction), then `edits` overwritten with
/// `(position fraction, byte)`, and optionally a little-endian u64 set to `huge` at `at`.
fn damage(
    bytes: &[u8],
    cut: f64,
    edits: &[(f64, u8)],
    huge: Option<(f64, u64)>,
    head: usize,
) -> Vec<u8> {
    let mut b = bytes[..((bytes.len() as f64 * cut) as usize).max(1)].to_vec();
    let span = b.len().min(head).max(1);
    for &(at, v) in edits {
        let i = ((span as f64 * at) as usize).min(b.len() - 1);
        b[i] = v;
    }
    if let Some((at, v)) = huge {
        let i = (span as f64 * at) as usize;
        if i + 8 <= b.len() {
            b[i..i + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// Proptest's defaults (256 cases, or `PROPTEST_CASES`), without writing regression files into
/// the source tree.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn names_the_file(e: &BackboneError, file: &str) -> bool {
    e.to_string().contains(file)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn gguf_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let e = GgufFile::parse(Path::new("random.gguf"), bytes).err();
        prop_assert!(e.is_some_and(|e| names_the_file(&e, "random.gguf")));
    }

    #[test]
    fn gguf_never_panics_on_damaged_files(
        cut in 0.0f64..=1.0,
        edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..8),
        huge in proptest::option::of((0.0f64..1.0, prop_oneof![Just(u64::MAX), Just(1u64 << 40), any::<u64>()])),
    ) {
        // The metadata and tensor table of a real file: where every length field lives.
        let bytes = damage(&fixture("gguf/qwen2-q8.gguf"), cut, &edits, huge, 8192);
        if let Err(e) = GgufFile::parse(Path::new("damaged.gguf"), bytes) {
            prop_assert!(names_the_file(&e, "damaged.gguf"), "{e}");
        }
    }

    #[test]
    fn safetensors_never_panics_on_damaged_files(
        cut in 0.0f64..=1.0,
        edits in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..8),
        huge in proptest::option::of((0.0f64..1.0, prop_oneof![Just(u64::MAX), any::<u64>()])),
    ) {
        let bytes = damage(&fixture("llama3/model/model-00001-of-00006.safetensors"), cut, &edits, huge, 512);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("damaged.safetensors");
        std::fs::write(&path, bytes).unwrap();
        if let Err(e) = read_safetensors(&path) {
            prop_assert!(names_the_file(&e, "damaged.safetensors"), "{e}");
        }
    }

    #[test]
    fn config_json_never_panics_on_damaged_values(
        key in prop_oneof![
            Just("hidden_size"), Just("num_attention_heads"), Just("num_key_value_heads"),
            Just("intermediate_size"), Just("vocab_size"), Just("rope_theta"),
            Just("rope_scaling"), Just("head_dim"), Just("model_type"), Just("max_position_embeddings"),
        ],
        value in prop_oneof![
            Just(serde_json::json!(0)), Just(serde_json::json!(-1)), Just(serde_json::json!(1u64 << 40)),
            Just(serde_json::json!(null)), Just(serde_json::json!("x")), Just(serde_json::json!(1.5)),
            Just(serde_json::json!({"rope_type": "llama3"})), Just(serde_json::json!([1, 2])),
            any::<i64>().prop_map(|v| serde_json::json!(v)),
        ],
    ) {
        let mut cfg: serde_json::Value = serde_json::from_slice(&fixture("llama3/model/config.json")).unwrap();
        cfg[key] = value;
        if let Err(e) = ModelConfig::from_json(Path::new("config.json"), &cfg) {
            prop_assert!(names_the_file(&e, "config.json"), "{e}");
        }
    }

    #[test]
    fn peft_adapters_never_panic(
        key in prop_oneof![
            Just("r"), Just("lora_alpha"), Just("target_modules"), Just("lora_dropout"),
            Just("use_rslora"), Just("use_dora"), Just("bias"), Just("peft_type"),
            Just("fan_in_fan_out"), Just("rank_pattern"), Just("alpha_pattern"), Just("task_type"),
        ],
        value in prop_oneof![
            Just(serde_json::json!(null)), Just(serde_json::json!(0)), Just(serde_json::json!(-4)),
            Just(serde_json::json!(1u64 << 40)), Just(serde_json::json!("")), Just(serde_json::json!([])),
            Just(serde_json::json!(["q_proj", "nope"])), Just(serde_json::json!({"q_proj": 0})),
            Just(serde_json::json!(true)), Just(serde_json::json!(0.5)), Just(serde_json::json!("all-linear")),
        ],
        cut in proptest::option::of(0.0f64..1.0),
    ) {
        static LM: std::sync::OnceLock<std::sync::Mutex<CausalLm>> = std::sync::OnceLock::new();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama3");
        let lm = LM.get_or_init(|| {
            std::sync::Mutex::new(CausalLm::load(&src.join("model"), &Device::flex()).unwrap())
        });
        let dir = tempfile::tempdir().unwrap();
        let mut cfg: serde_json::Value =
            serde_json::from_slice(&fixture("llama3/adapter/adapter_config.json")).unwrap();
        cfg[key] = value;
        std::fs::write(dir.path().join("adapter_config.json"), cfg.to_string()).unwrap();
        let mut weights = fixture("llama3/adapter/adapter_model.safetensors");
        if let Some(c) = cut {
            weights.truncate((weights.len() as f64 * c) as usize);
        }
        std::fs::write(dir.path().join("adapter_model.safetensors"), weights).unwrap();
        let mut lm = lm.lock().unwrap();
        if let Err(e) = lm.load_adapter("fuzzed", dir.path()) {
            let msg = e.to_string();
            prop_assert!(
                msg.contains("adapter_config.json") || msg.contains("adapter_model.safetensors")
                    || msg.contains(&dir.path().display().to_string()),
                "{msg}"
            );
        }
    }
}
