//! The parsers of outside input in the environments — PDDL problems, the retrieval server's
//! requests (as values and as raw bytes on a socket), the QA agent's tool calls, Python literal
//! modules (TextCraft's and ALFWorld's data files), ScienceWorld's py4j replies, TextCraft's
//! recipe files — survive any input: a typed error or a
//! well-formed answer, never a panic, and the server keeps serving others.
//! Cases per property: `PROPTEST_CASES` (default 256).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use hier_envs::alfworld::pddl::{Problem, parse_sexp};
use hier_envs::qa::corpus::Document;
use hier_envs::qa::env::parse_call;
use hier_envs::qa::index::Bm25Index;
use hier_envs::qa::server::{RetrievalServer, ServerConfig, handle};
use proptest::prelude::*;

/// Proptest's defaults (256 cases, or `PROPTEST_CASES`), without writing regression files into
/// the source tree.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A small ALFWorld-shaped problem, to damage.
const PROBLEM: &str = "(define (problem plan_trial)
  (:domain alfred)
  (:objects agent1 - agent apple_1 - object countertop_1 - receptacle)
  (:init (atLocation agent1 loc_1) (inReceptacle apple_1 countertop_1) (openable countertop_1))
  (:goal (and (exists (?r - receptacle) (inReceptacle apple_1 ?r)))))";

fn index() -> &'static Bm25Index {
    static INDEX: std::sync::OnceLock<Bm25Index> = std::sync::OnceLock::new();
    INDEX.get_or_init(build_index)
}

fn build_index() -> Bm25Index {
    let docs: Vec<Document> = (0..4)
        .map(|i| Document {
            id: i.to_string(),
            title: format!("Page {i}"),
            text: format!("page {i} is about the river number {i}"),
            url: format!("https://example.org/{i}"),
        })
        .collect();
    Bm25Index::in_memory(&docs).unwrap()
}

/// Damages `text`: deletes `cuts` (position fraction, length) and inserts `adds`.
fn damage(text: &str, cuts: &[(f64, usize)], adds: &[(f64, String)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(at, len) in cuts {
        let i = (chars.len() as f64 * at) as usize;
        let j = (i + len).min(chars.len());
        chars.drain(i.min(j)..j);
    }
    for (at, s) in adds {
        let i = ((chars.len() as f64 * at) as usize).min(chars.len());
        chars.splice(i..i, s.chars());
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pddl_never_panics(
        cuts in proptest::collection::vec((0.0f64..1.0, 0usize..12), 0..4),
        adds in proptest::collection::vec((0.0f64..1.0, "[()\\-?: a-z0-9]{0,6}"), 0..4),
    ) {
        let text = damage(PROBLEM, &cuts, &adds);
        let _ = parse_sexp(&text);
        if let Ok(p) = Problem::parse(&text) {
            let _ = p.entities();
        }
    }

    #[test]
    fn tool_calls_never_panic(turn in "(<think>|</think>|<search>|</search>|<answer>|</answer>|<access>|</access>|[ a-z\\n]{0,8}){0,10}") {
        let _ = parse_call(&turn);
    }

    #[test]
    fn python_literal_modules_never_panic(src in "([\\[\\]{}()'\",:=#\\n\\\\ ]|[a-z0-9_]{1,4}|\"\"\"|'''){0,40}") {
        let _ = hier_envs::pyliteral::module_tables(&src);
    }

    #[test]
    fn server_requests_get_a_well_formed_answer(
        method in prop_oneof![Just("POST".to_owned()), Just("GET".to_owned()), "[A-Z]{0,6}"],
        path in prop_oneof![Just("/retrieve".to_owned()), Just("/access".to_owned()), "/[a-z?=&]{0,10}"],
        body in prop_oneof![
            Just(br#"{"queries": ["river"], "topk": 2}"#.to_vec()),
            Just(br#"{"urls": ["https://example.org/1"]}"#.to_vec()),
            Just(br#"{"queries": "river", "topk": -1}"#.to_vec()),
            Just(br#"{"queries": ["river"], "topk": 100000000000}"#.to_vec()),
            "\\PC{0,40}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..64),
        ],
    ) {
        let (status, answer) = handle(index(), &ServerConfig::default(), &method, &path, &body);
        prop_assert!(matches!(status, 200 | 400 | 404 | 405 | 413), "{status}");
        if status != 200 {
            prop_assert!(answer["error"].as_str().is_some_and(|e| !e.is_empty()), "{answer}");
        }
    }
}

/// Raw bytes on a socket: whatever a client sends (or does not finish sending), it gets an
/// HTTP answer or a closed connection within the timeout, and a proper request still works
/// afterwards.
#[test]
fn the_server_survives_any_bytes_on_the_wire() {
    let cfg = ServerConfig {
        read_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = RetrievalServer::start("127.0.0.1:0", Arc::new(build_index()), cfg).unwrap();
    let addr = server.addr();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: config().cases.min(128),
        ..config()
    });
    let request = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        "(POST|GET|\\PC{0,5}) (/retrieve|/access|\\PC{0,5}) HTTP/1.1\r\n(Content-Length: ([0-9]{1,12}|x)\r\n|Transfer-Encoding: chunked\r\n|\\PC{0,20}\r\n){0,4}\r\n\\PC{0,30}"
            .prop_map(String::into_bytes),
    ];
    runner
        .run(&request, |bytes| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.write_all(&bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            prop_assert!(answer.is_empty() || answer.starts_with(b"HTTP/1.1 "));
            Ok(())
        })
        .unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    let body = br#"{"queries": ["river"], "topk": 1}"#;
    write!(
        s,
        "POST /retrieve HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    server.shutdown();
}

proptest! {
    #![proptest_config(config())]

    /// ScienceWorld's py4j replies come from a JVM over a socket: any line decodes or is a
    /// protocol error.
    #[test]
    fn py4j_replies_never_panic(line in "(!y|!x|!)?[vnsiLdbrlx]?(\\PC|\\\\[nrt\\\\]){0,12}") {
        let _ = hier_envs::scienceworld::py4j::decode_reply(&line);
    }

    /// TextCraft's recipe files (Minecraft JSON): a directory with one damaged recipe loads or
    /// fails naming a file, never panics.
    #[test]
    fn damaged_recipe_files_never_panic(
        file in 0usize..40,
        key in prop_oneof![
            Just("type"), Just("result"), Just("key"), Just("pattern"), Just("ingredients"),
            Just("ingredient"), Just("count"), Just("group"),
        ],
        value in prop_oneof![
            Just(serde_json::json!(null)), Just(serde_json::json!(0)), Just(serde_json::json!(-3)),
            Just(serde_json::json!("")), Just(serde_json::json!("minecraft:")), Just(serde_json::json!([])),
            Just(serde_json::json!([[]])), Just(serde_json::json!({})), Just(serde_json::json!({"item": 5})),
            Just(serde_json::json!(["###", "#"])), Just(serde_json::json!({"tag": "minecraft:planks"})),
            Just(serde_json::json!({"#": {}})), Just(serde_json::json!(1e300)),
        ],
    ) {
        let src = hier_envs::assets::Assets::locate().unwrap().textcraft_recipes().unwrap();
        let mut names: Vec<_> = std::fs::read_dir(&src).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        let dir = tempfile::tempdir().unwrap();
        for (i, f) in names.iter().take(40).enumerate() {
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            if i == file {
                v[key] = value.clone();
            }
            std::fs::write(dir.path().join(f.file_name().unwrap()), v.to_string()).unwrap();
        }
        match hier_envs::textcraft::tree::CraftingTree::load(dir.path()) {
            Ok(tree) => {
                let _ = hier_envs::textcraft::TextCraft::from_tree(tree);
            }
            Err(e) => prop_assert!(e.to_string().contains(&dir.path().display().to_string()), "{e}"),
        }
    }
}
