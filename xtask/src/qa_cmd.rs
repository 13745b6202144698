//! `cargo xtask serve-retrieval` and `cargo xtask qa-world`: the retrieval QA setting's server
//! and its synthetic data.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use hier_envs::qa::corpus::{load_corpus, write_atomic, write_corpus};
use hier_envs::qa::index::Bm25Index;
use hier_envs::qa::server::{RetrievalServer, ServerConfig};
use hier_envs::qa::world::{World, WorldConfig};

#[derive(Args)]
pub struct ServeArgs {
    /// Corpus JSONL in wiki-18's form (`{"id", "contents": "\"Title\"\ntext"}`, optional `url`).
    #[arg(long)]
    corpus: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:5005")]
    addr: String,
    /// Keep the BM25 index here (built on first use, reopened after); default: in memory.
    #[arg(long)]
    index: Option<PathBuf>,
    /// Requests served at once.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// `topk` of requests that give none.
    #[arg(long, default_value_t = 3)]
    topk: usize,
    /// Seconds a client may take to send its request.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
}

pub fn serve(a: &ServeArgs) -> Result<()> {
    let index = match &a.index {
        Some(dir) if dir.join("meta.json").exists() => {
            Bm25Index::on_disk(dir, None).map_err(|e| anyhow!(e))?
        }
        other => {
            let docs = load_corpus(&a.corpus).map_err(|e| anyhow!(e))?;
            eprintln!(
                "indexing {} passages from {}",
                docs.len(),
                a.corpus.display()
            );
            match other {
                Some(dir) => Bm25Index::on_disk(dir, Some(&docs)),
                None => Bm25Index::in_memory(&docs),
            }
            .map_err(|e| anyhow!(e))?
        }
    };
    let cfg = ServerConfig {
        workers: a.workers,
        default_topk: a.topk,
        read_timeout: Duration::from_secs(a.timeout),
        ..ServerConfig::default()
    };
    let server = RetrievalServer::start(&a.addr, Arc::new(index), cfg).map_err(|e| anyhow!(e))?;
    eprintln!(
        "serving ASearcher's API on {} (POST /retrieve, POST /access); Ctrl-C stops",
        server.url()
    );
    server.wait();
    Ok(())
}

#[derive(Args)]
pub struct WorldArgs {
    /// Directory for `corpus.jsonl`, `train.jsonl`, `test.jsonl` and `world.json` (the config).
    #[arg(long)]
    out: PathBuf,
    /// World settings as TOML (default: `WorldConfig::default()`).
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    seed: Option<u64>,
}

pub fn world(a: &WorldArgs) -> Result<()> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}", p.display()))?
        }
        None => WorldConfig::default(),
    };
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    let w = World::generate(&cfg).map_err(|e| anyhow!(e))?;
    write_corpus(&a.out.join("corpus.jsonl"), &w.documents).map_err(|e| anyhow!(e))?;
    for split in ["train", "test"] {
        let text: String = w
            .questions
            .iter()
            .filter(|q| q.split == split)
            .map(|q| serde_json::to_string(q).expect("serialises") + "\n")
            .collect();
        write_atomic(&a.out.join(format!("{split}.jsonl")), &text).map_err(|e| anyhow!(e))?;
    }
    write_atomic(
        &a.out.join("world.json"),
        &serde_json::to_string_pretty(&cfg)?,
    )
    .map_err(|e| anyhow!(e))?;
    println!(
        "{}",
        serde_json::json!({"documents": w.documents.len(), "entities": w.entities.len(),
            "questions": w.questions.len(), "out": a.out})
    );
    Ok(())
}
