//! GGUF files against independent references: every dequantisation type against the `gguf`
//! package's `gguf.quants.dequantize`, tiny random llama / qwen2 files against transformers'
//! own GGUF loader (logits, token ids, chat template), made by `fixtures/make_gguf_fixtures.py`;
//! and malformed files, which must be errors naming the file, never panics.

use std::path::{Path, PathBuf};

use hier_backbone::burn::tensor::Device;
use hier_backbone::gguf::{GgufFile, write_hf_dir};
use hier_backbone::{Batch, CausalLm, Forward, Message, Tokenizer};
use serde_json::Value;

mod common;
use common::{read_f32, rel_l2, u32s};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

const QUANT_TYPES: [&str; 11] = [
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
];

#[test]
fn every_type_dequantises_as_the_gguf_package_does() {
    for ty in QUANT_TYPES {
        let dir = fixtures().join("quants");
        let f = GgufFile::open(&dir.join(format!("{ty}.gguf"))).unwrap();
        let t = f.tensor("t").unwrap();
        assert_eq!(t.ty.name(), ty);
        assert_eq!(t.shape(), vec![3, 512]);
        let ours = f.dequantize(t).unwrap();
        let theirs = read_f32(&dir.join(format!("{ty}.f32")));
        assert_eq!(ours.len(), theirs.len());
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1e-3),
                "{ty}: element {i}: ours {a}, gguf {b}"
            );
        }
    }
}

fn reference(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join(format!("{name}.json"))).unwrap())
        .unwrap()
}

fn check_logits(lm: &CausalLm, r: &Value, label: &str) {
    let ids = u32s(&r["ids"]);
    let logits = lm
        .forward(&Batch::single(&ids), Forward::default(), None)
        .unwrap();
    let ours = hier_backbone::weights::HostTensor::from_tensor(logits).data;
    let mut theirs = Vec::new();
    for row in r["logits"].as_array().unwrap() {
        theirs.extend(
            row.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32),
        );
    }
    let err = rel_l2(&ours, &theirs);
    assert!(err < 1e-5, "{label}: relative L2 error {err}");
}

/// The 12-token sequences are decoding-sized (≤ 16 rows), so the q8 models' logits come from
/// the weights kept in their blocks: all 7 projections of both layers, and qwen2's tied head
/// (Q8_0; qwen3's is f32). K-quants and f32 are not kept packed.
#[test]
fn tiny_models_match_transformers_gguf_loader() {
    for (name, packed) in [
        ("llama-f32", 0),
        ("llama-q4k", 0),
        ("qwen2-q8", 15),
        ("qwen3-q8", 14),
    ] {
        let r = reference(name);
        let path = fixtures().join(format!("{name}.gguf"));
        let lm = CausalLm::load(&path, &Device::flex()).unwrap();
        assert_eq!(lm.packed_weights().0, packed, "{name}");
        check_logits(&lm, &r, name);
    }
}

/// A weight kept in its blocks multiplies as the `gguf` package's dequantised values do: rows
/// of x across the 4-row groups, output features across the tasks, the decoded tiles (8 rows
/// of 512 here) and an odd last pair.
#[test]
fn packed_products_match_the_gguf_packages_values() {
    use hier_backbone::packed::PackedWeight;
    for ty in ["Q4_0", "Q4_1", "Q8_0"] {
        let dir = fixtures().join("quants");
        let f = GgufFile::open(&dir.join(format!("{ty}.gguf"))).unwrap();
        let t = f.tensor("t").unwrap();
        let (three, k) = (3, 512);
        let theirs = read_f32(&dir.join(format!("{ty}.f32")));
        // 37 rows: the file's 3, over and over.
        let n = 37;
        let blocks = f.tensor_bytes(t).unwrap();
        let row_bytes = blocks.len() / three;
        let bytes: Vec<u8> = (0..n)
            .flat_map(|j| blocks[(j % three) * row_bytes..(j % three + 1) * row_bytes].to_vec())
            .collect();
        let w = PackedWeight::new(t.ty, n, k, bytes, ty).unwrap();
        assert_eq!(w.row(4), theirs[k..2 * k].to_vec(), "{ty}: row 4 decoded");
        let mut seed = 11u32;
        for rows in [1, 3, 4, 5, 8, 16] {
            let x: Vec<f32> = (0..rows * k)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                })
                .collect();
            let y = w.matmul(&x, rows);
            assert_eq!(y.len(), rows * n);
            for r in 0..rows {
                for j in 0..n {
                    let e = &theirs[(j % three) * k..(j % three + 1) * k];
                    let want: f64 = (0..k).map(|i| x[r * k + i] as f64 * e[i] as f64).sum();
                    let scale: f64 = (0..k).map(|i| (x[r * k + i] * e[i]).abs() as f64).sum();
                    let got = y[r * n + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-6 * scale + 1e-7,
                        "{ty} rows {rows}: y[{r}, {j}] = {got}, defined {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn tiny_tokenizers_match_transformers_gguf_loader() {
    for name in ["llama-f32", "llama-q4k", "qwen2-q8", "qwen3-q8"] {
        let r = reference(name);
        let tok = Tokenizer::load(&fixtures().join(format!("{name}.gguf"))).unwrap();
        let strings = r["strings"].as_array().unwrap();
        for (s, want) in strings.iter().zip(r["token_ids"].as_array().unwrap()) {
            let s = s.as_str().unwrap();
            assert_eq!(tok.encode(s, false).unwrap(), u32s(want), "{name}: {s:?}");
        }
        let chat = tok
            .apply_chat_template(&[Message::new("user", "hi 12")], true)
            .unwrap();
        assert_eq!(chat, r["chat"].as_str().unwrap(), "{name}");
        assert_eq!(tok.encode(&chat, false).unwrap(), u32s(&r["chat_ids"]));
    }
}

/// `convert` writes an HF directory that loads back (through the safetensors path) to the
/// same logits; that transformers loads it is checked by `fixtures/check_convert.py`.
#[test]
fn converted_directory_loads_to_the_same_logits() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["llama-f32", "qwen2-q8", "qwen3-q8"] {
        let file = GgufFile::open(&fixtures().join(format!("{name}.gguf"))).unwrap();
        let out = dir.path().join(name);
        write_hf_dir(&file, &out).unwrap();
        let lm = CausalLm::load(&out, &Device::flex()).unwrap();
        check_logits(&lm, &reference(name), &format!("{name} converted"));
        let tok = Tokenizer::load(&out).unwrap();
        let chat = tok
            .apply_chat_template(&[Message::new("user", "hi 12")], true)
            .unwrap();
        assert_eq!(
            tok.encode(&chat, false).unwrap(),
            u32s(&reference(name)["chat_ids"])
        );
    }
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap()
}

fn parse_err(b: Vec<u8>) -> String {
    GgufFile::parse(Path::new("bad.gguf"), b)
        .and_then(|f| {
            f.model_config()?;
            f.tokenizer()?;
            for t in &f.tensors {
                f.dequantize(t)?;
            }
            Ok(())
        })
        .expect_err("a malformed file must be an error")
        .to_string()
}

fn replace(b: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let at = b
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern in fixture");
    b[at..at + to.len()].copy_from_slice(to);
}

#[test]
fn version_2_reads_like_3() {
    let mut b = bytes("llama-f32.gguf");
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    let f = GgufFile::parse(Path::new("v2.gguf"), b).unwrap();
    assert_eq!(f.version, 2);
    f.model_config().unwrap();
}

#[test]
fn truncated_files_are_errors_at_every_length() {
    let b = bytes("qwen2-q8.gguf");
    // Every prefix up to the end of the header region, then a sample of the data region.
    let mut cuts: Vec<usize> = (0..8192.min(b.len())).step_by(7).collect();
    cuts.extend((8192..b.len()).step_by(997));
    for cut in cuts {
        let e = parse_err(b[..cut].to_vec());
        assert!(e.contains("bad.gguf"), "cut at {cut}: {e}");
    }
}

#[test]
fn corrupt_files_name_what_is_wrong() {
    let mut b = bytes("llama-f32.gguf");
    b[0] = b'X';
    assert!(parse_err(b).contains("not a GGUF file"));

    let mut b = bytes("llama-f32.gguf");
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(parse_err(b).contains("version 1"));

    let mut b = bytes("llama-f32.gguf");
    replace(
        &mut b,
        b"\x05\x00\x00\x00\x00\x00\x00\x00llama",
        b"\x05\x00\x00\x00\x00\x00\x00\x00llamb",
    );
    let e = parse_err(b);
    assert!(
        e.contains("general.architecture") && e.contains("llamb"),
        "{e}"
    );

    let mut b = bytes("llama-f32.gguf");
    replace(&mut b, b"llama-bpe", b"llama-xpe");
    let e = parse_err(b);
    assert!(
        e.contains("tokenizer.ggml.pre") && e.contains("llama-xpe"),
        "{e}"
    );

    // The quants fixture's one tensor, re-typed as Q2_K (id 10): its info ends with the type id
    // and an offset of 0, right before the data section.
    let mut b = bytes("quants/Q4_0.gguf");
    replace(
        &mut b,
        b"\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        b"\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    );
    let f = GgufFile::parse(Path::new("bad.gguf"), b).unwrap();
    let e = f.dequantize(&f.tensors[0]).unwrap_err().to_string();
    assert!(
        e.contains("Q2_K") && e.contains("`t`") && e.contains("bad.gguf"),
        "{e}"
    );

    // A huge array count must not allocate; it is an error about the count.
    let mut b = bytes("llama-f32.gguf");
    let key = b"tokenizer.ggml.tokens";
    let at = b.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    // value type u32 (9 = array), element type u32, then the count.
    b[at + 8..at + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = parse_err(b);
    assert!(e.contains("tokenizer.ggml.tokens"), "{e}");
}

/// `smollm`/`starcoder` vocabularies split every digit before BPE, as llama.cpp does and as
/// SmolLM's own `tokenizer.json` does (`Digits(individual_digits)`); transformers' GGUF loader
/// leaves that step out, which changes nothing on a vocabulary learned that way (SmolLM2's has
/// no merge across digits) but would on one with digit merges, like this `llama-bpe` one.
#[test]
fn starcoder_style_pre_tokenizers_split_every_digit() {
    let llama = Tokenizer::load(&fixtures().join("llama-f32.gguf")).unwrap();
    let mut b = bytes("llama-f32.gguf");
    replace(&mut b, b"llama-bpe", b"starcoder");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("starcoder.gguf");
    std::fs::write(&path, b).unwrap();
    let digits = Tokenizer::load(&path).unwrap();
    let each: Vec<u32> = "12345"
        .chars()
        .map(|c| digits.token_id(&c.to_string()).unwrap())
        .collect();
    assert_eq!(digits.encode("12345", false).unwrap(), each);
    assert!(
        llama.encode("12345", false).unwrap().len() < 5,
        "the vocabulary has digit merges"
    );
}
