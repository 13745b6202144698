//! `reproduce steering` on data from files, as a user with wiki-18 and the benchmarks runs it:
//! the smoke world written out in the public formats (corpus rows, question JSONL split into
//! two named test sets), executors that play as their backbone is (no SFT: files have no gold
//! paths), one of them on its own, smaller backbone and prompted through the chat template.
//! The in-process index, an on-disk index and ASearcher's HTTP API on loopback must give the
//! same tables. Alone in its test binary, like `steering_smoke.rs`, because it compares tables
//! byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hier_envs::qa::corpus::{load_corpus, write_corpus};
use hier_envs::qa::index::Bm25Index;
use hier_envs::qa::server::{RetrievalServer, ServerConfig};
use hier_envs::qa::world::World;
use hier_steering::pipeline::{ExecutorSpec, QaFiles, SteeringProfile, profile_path, run};
use hier_train::stages::BackboneSpec;
use hier_train::stages::RunConfig;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Writes the world's corpus, its train questions and its test questions as two sets.
fn write_files(p: &SteeringProfile, dir: &Path) -> QaFiles {
    let world = World::generate(p.world.as_ref().unwrap()).unwrap();
    let corpus = dir.join("corpus.jsonl");
    write_corpus(&corpus, &world.documents).unwrap();
    let lines = |split: &str| -> Vec<String> {
        world
            .questions
            .iter()
            .filter(|q| q.split == split)
            .map(|q| serde_json::json!({"question": q.question, "answer": q.answer}).to_string())
            .collect()
    };
    let train = dir.join("train.jsonl");
    std::fs::write(&train, lines("train").join("\n")).unwrap();
    let test = lines("test");
    let (a, b) = test.split_at(test.len() / 2);
    let mut sets = BTreeMap::new();
    for (name, part) in [("set-a", a), ("set-b", b)] {
        let path = dir.join(format!("{name}.jsonl"));
        std::fs::write(&path, part.join("\n")).unwrap();
        sets.insert(name.to_string(), path);
    }
    QaFiles {
        corpus: Some(corpus),
        index: None,
        retriever_url: None,
        timeout_s: 30.0,
        train,
        test: sets,
    }
}

/// The smoke profile with its world's files in a fresh directory (`[world]` still set).
fn smoke_with_files() -> (SteeringProfile, QaFiles, tempfile::TempDir) {
    let mut p = SteeringProfile::from_file(&profile_path(&root(), "smoke")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let files = write_files(&p, tmp.path());
    p.files = Some(files.clone());
    (p, files, tmp)
}

/// A run into `out` on the CPU, without progress bars.
fn config(out: PathBuf) -> RunConfig {
    RunConfig {
        out,
        device: hier_backbone::burn::tensor::Device::flex().autodiff(),
        progress: false,
        stop_after_stages: None,
        memory_limit_mib: None,
        max_nonfinite: 0,
        prefix_cache_mib: hier_train::policy::DEFAULT_PREFIX_CACHE_MIB,
        report_only: false,
    }
}

#[test]
fn file_data_runs_with_any_retriever_to_the_same_tables() {
    let (mut p, files, tmp) = smoke_with_files();
    let smoke_backbone = p.backbone.clone();
    p.world = None;
    p.executor = ExecutorSpec {
        name: "main".into(),
        backbone: None,
        demos: 0,
        drift: None,
        sft: None,
        chat: false,
        worked_example: true,
        seed: 0,
    };
    let BackboneSpec::Pretrain { model, train } = &smoke_backbone else {
        panic!("the smoke backbone is pre-trained")
    };
    let mut small = model.clone();
    small.hidden_size = 16;
    small.intermediate_size = 32;
    small.num_hidden_layers = 1;
    p.transfer = vec![ExecutorSpec {
        name: "small".into(),
        backbone: Some(BackboneSpec::Pretrain {
            model: small,
            train: train.clone(),
        }),
        chat: true,
        ..p.executor.clone()
    }];
    p.check().unwrap();

    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();

    // The in-process index.
    let a = tmp.path().join("a");
    let report = run(&p, &config(a.clone())).unwrap();
    assert!(report.complete);
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"backbone-executor-small"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("demos")), "{names:?}");
    let json: serde_json::Value = serde_json::from_str(&read(&a, "steering.json")).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let per_set = p.eval.tasks * p.eval.seeds.len();
    for r in rows {
        assert_eq!(r["episodes"], 2 * per_set, "{r}");
        let sets = r["f1_by_set"].as_object().unwrap();
        assert_eq!(sets.keys().collect::<Vec<_>>(), ["set-a", "set-b"], "{r}");
    }
    let has = |m: &str, x: &str| rows.iter().any(|r| r["method"] == m && r["executor"] == x);
    assert!(has("none", "main") && has("rl", "main") && has("rl", "small") && has("none", "small"));
    // Every episode names its test set, and the sets get equal shares.
    let evals = json["evaluations"].as_array().unwrap();
    let in_a = evals[0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["test_set"] == "set-a")
        .count();
    assert_eq!(in_a, per_set);
    let md = read(&a, "steering.md");
    assert!(
        md.contains("F1 by test set") && md.contains("| set-a | set-b |"),
        "{md}"
    );
    assert!(md.contains("`small`: its own tiny backbone"), "{md}");

    // ASearcher's HTTP API on loopback, over the same corpus: the same tables.
    let docs = load_corpus(files.corpus.as_ref().unwrap()).unwrap();
    let server = RetrievalServer::start(
        "127.0.0.1:0",
        Arc::new(Bm25Index::in_memory(&docs).unwrap()),
        ServerConfig::default(),
    )
    .unwrap();
    let mut http = p.clone();
    http.files.as_mut().unwrap().retriever_url = Some(server.url());
    let b = tmp.path().join("b");
    run(&http, &config(b.clone())).unwrap();
    assert_eq!(read(&a, "steering.csv"), read(&b, "steering.csv"));
    server.shutdown();

    // An index kept on disk: built on the first run, opened by the next.
    let mut disk = p.clone();
    disk.files.as_mut().unwrap().index = Some(tmp.path().join("index"));
    let c = tmp.path().join("c");
    run(&disk, &config(c.clone())).unwrap();
    assert!(tmp.path().join("index/meta.json").exists());
    assert_eq!(read(&a, "steering.csv"), read(&c, "steering.csv"));
    let again = run(&disk, &config(c.clone())).unwrap();
    assert!(again.stages.iter().all(|s| s.cached));
    assert_eq!(read(&a, "steering.csv"), read(&c, "steering.csv"));
}

#[test]
fn file_profiles_refuse_what_files_cannot_give() {
    let (mut p, _, tmp) = smoke_with_files();
    assert!(
        p.check()
            .unwrap_err()
            .to_string()
            .contains("exactly one of [world] and [files]")
    );
    p.world = None;
    // The smoke executor is trained by SFT on gold-path demonstrations.
    let e = p.check().unwrap_err().to_string();
    assert!(e.contains("executor.sft") && e.contains("[world]"), "{e}");
    p.executor.sft = None;
    let e = p.check().unwrap_err().to_string();
    assert!(e.contains("executor.demos"), "{e}");
    p.executor.demos = 0;
    p.executor.drift = None;
    p.transfer.clear();
    p.check().unwrap();
    // A pre-trained backbone needs the corpus's text.
    let mut no_text = p.clone();
    no_text.files.as_mut().unwrap().corpus = None;
    no_text.files.as_mut().unwrap().retriever_url = Some("http://127.0.0.1:9".into());
    assert!(
        no_text
            .check()
            .unwrap_err()
            .to_string()
            .contains("files.corpus")
    );
    // A question file without answers is named with its line.
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"question\": \"q\", \"answer\": \"a\"}\n{\"question\": \"q\"}\n",
    )
    .unwrap();
    p.files.as_mut().unwrap().test.insert("bad".into(), bad);
    let e = run(&p, &config(tmp.path().join("out")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.jsonl:2") && e.contains("answer"), "{e}");
    // Two executors may not share a name.
    let mut twins = p.clone();
    twins.transfer = vec![twins.executor.clone()];
    assert!(
        twins
            .check()
            .unwrap_err()
            .to_string()
            .contains("named `main`")
    );
}
