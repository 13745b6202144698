//! Bad checkpoints and adapters produce errors that name the file and the tensor or field.

use std::path::Path;

use hier_backbone::CausalLm;
use hier_backbone::burn::tensor::Device;
use hier_backbone::weights::{read_safetensors, write_safetensors};

fn copy_model(family: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(family)
        .join("model");
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn err(dir: &Path) -> String {
    CausalLm::load(dir, &Device::flex())
        .unwrap_err()
        .to_string()
}

#[test]
fn missing_unexpected_and_misshaped_tensors_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    copy_model("mistral", &dir);
    let file = dir.join("model.safetensors");
    let good = read_safetensors(&file).unwrap();

    let mut t = good.clone();
    t.remove("model.layers.1.mlp.up_proj.weight");
    write_safetensors(&file, &t).unwrap();
    let e = err(&dir);
    assert!(
        e.contains("missing tensor `model.layers.1.mlp.up_proj.weight`")
            && e.contains("model.safetensors"),
        "{e}"
    );

    let mut t = good.clone();
    let extra = t["model.norm.weight"].clone();
    t.insert("model.layers.0.extra.weight".into(), extra);
    write_safetensors(&file, &t).unwrap();
    let e = err(&dir);
    assert!(
        e.contains("unexpected") && e.contains("model.layers.0.extra.weight"),
        "{e}"
    );

    let mut t = good.clone();
    let w = t.get_mut("model.layers.0.self_attn.k_proj.weight").unwrap();
    w.shape = vec![w.shape[1], w.shape[0]];
    write_safetensors(&file, &t).unwrap();
    let e = err(&dir);
    assert!(
        e.contains("model.layers.0.self_attn.k_proj.weight") && e.contains("shape"),
        "{e}"
    );
}

#[test]
fn unknown_config_field_and_missing_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m");
    copy_model("qwen2", &dir);
    let cfg_path = dir.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["quantization_config"] = serde_json::json!({"quant_method": "gptq"});
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let e = err(&dir);
    assert!(
        e.contains("quantization_config") && e.contains("config.json"),
        "{e}"
    );

    std::fs::remove_file(&cfg_path).unwrap();
    assert!(err(&dir).contains("config.json"));
    assert!(err(&tmp.path().join("nowhere")).contains("nowhere"));
}

#[test]
fn unsupported_peft_options_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama3");
    let mut lm = CausalLm::load(&src.join("model"), &Device::flex()).unwrap();
    let dir = tmp.path().join("a");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        src.join("adapter/adapter_model.safetensors"),
        dir.join("adapter_model.safetensors"),
    )
    .unwrap();
    let mut cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(src.join("adapter/adapter_config.json")).unwrap(),
    )
    .unwrap();
    cfg["use_dora"] = serde_json::json!(true);
    std::fs::write(dir.join("adapter_config.json"), cfg.to_string()).unwrap();
    let e = lm.load_adapter("x", &dir).unwrap_err().to_string();
    assert!(e.contains("use_dora"), "{e}");
    cfg["use_dora"] = serde_json::json!(false);
    cfg["r"] = serde_json::json!(8);
    std::fs::write(dir.join("adapter_config.json"), cfg.to_string()).unwrap();
    let e = lm.load_adapter("x", &dir).unwrap_err().to_string();
    assert!(e.contains("lora_A.weight") && e.contains("shape"), "{e}");
    assert!(
        lm.adapter_id("x").is_err(),
        "a failed load must not register the adapter"
    );
}

#[test]
fn adapter_targets_a_fused_model_lacks_are_named() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/phi3/model");
    let mut lm = CausalLm::load(&dir, &Device::flex()).unwrap();
    let cfg = hier_backbone::LoraConfig::new(2, 4.0, &[hier_backbone::TargetModule::Q]);
    let e = lm.add_adapter("a", cfg, 0).unwrap_err().to_string();
    assert!(
        e.contains("q_proj") && e.contains("phi3") && e.contains("qkv_proj"),
        "{e}"
    );
    let fused = hier_backbone::LoraConfig::new(
        2,
        4.0,
        &[
            hier_backbone::TargetModule::Qkv,
            hier_backbone::TargetModule::GateUp,
        ],
    );
    lm.add_adapter("b", fused, 0).unwrap();
}
