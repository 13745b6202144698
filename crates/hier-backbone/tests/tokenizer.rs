//! A tokenizer saved by `transformers` (fixtures/make_tokenizer_fixture.py) loads here and
//! encodes, decodes and renders its chat template exactly as transformers did.

use hier_backbone::{Message, Tokenizer};
use serde_json::Value;

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn hf_tokenizer_encodes_like_transformers() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    let tok = Tokenizer::load(&dir).unwrap();
    assert_eq!(tok.vocab_size(), r["vocab_size"].as_u64().unwrap() as usize);
    for e in r["encodings"].as_array().unwrap() {
        let text = e["text"].as_str().unwrap();
        assert_eq!(
            tok.encode(text, true).unwrap(),
            ids(&e["ids_special"]),
            "{text:?}"
        );
        assert_eq!(tok.encode(text, false).unwrap(), ids(&e["ids"]), "{text:?}");
        assert_eq!(
            tok.decode(&ids(&e["ids"]), false).unwrap(),
            e["decoded"].as_str().unwrap()
        );
    }
    assert_eq!(
        tok.apply_chat_template(&[Message::new("user", "hi")], false)
            .unwrap(),
        r["chat"].as_str().unwrap()
    );
}

#[test]
fn missing_tokenizer_names_the_file() {
    let e = Tokenizer::load(std::path::Path::new("/nonexistent/dir/tokenizer.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/dir/tokenizer.json"), "{e}");
}
