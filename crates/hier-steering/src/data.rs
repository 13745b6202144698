//! Where `reproduce steering`'s questions and passages come from: the synthetic multi-hop
//! world (`[world]`), or files (`[files]`) — a corpus in wiki-18's form, question sets in the
//! benchmarks' JSONL (`question`, `answer` / `gt` / `golden_answers`), and either the
//! in-process BM25 index over the corpus or any ASearcher-compatible retrieval server by URL
//! (e.g. `cargo xtask serve-retrieval` over wiki-18). With files, a user holding wiki-18 and
//! the seven benchmarks runs the paper's setting through the same pipeline.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hier_envs::qa::corpus::{Document, load_corpus, load_questions};
use hier_envs::qa::env::{QaEnv, QaEnvConfig, QaTask};
use hier_envs::qa::index::{Bm25Index, Retriever};
use hier_envs::qa::server::HttpRetriever;
use hier_envs::qa::world::World;
use hier_envs::{Env, Split, Task};

use crate::error::{Error, Result};
use crate::profile::{QaFiles, QaSpec};
use hier_envs::qa::world::WorldConfig;
use hier_train::SharedErrors as _;
use hier_train::eval::spread;

/// The loaded data of a run.
pub(crate) struct QaData {
    /// The synthetic world, when the data is one (its demonstrations need gold paths).
    pub world: Option<World>,
    /// The corpus's passages, when loaded (the synthetic world's always; a file corpus only
    /// when the in-process index is built from it or a tiny backbone pre-trains on it).
    pub documents: Vec<Document>,
    pub train_env: QaEnv,
    pub eval_env: QaEnv,
    /// Named test sets and the test-split indices each holds (one unnamed set for a world).
    pub test_sets: Vec<(Option<String>, Range<usize>)>,
    /// What later stages' keys say of the data.
    pub key: serde_json::Value,
}

/// A file's identity for stage keys: its path and size, and for question sets (small) the
/// hash of their bytes — a corpus of gigabytes is not hashed.
fn file_key(path: &Path, hash: bool) -> Result<serde_json::Value> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mut v = serde_json::json!({"path": path, "bytes": meta.len()});
    if hash {
        use sha2::{Digest, Sha256};
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        v["sha256"] = hex(&Sha256::digest(&bytes)).into();
    }
    Ok(v)
}

/// The first 8 bytes of a digest in hex: enough to tell stage inputs apart.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn questions(path: &Path) -> Result<Vec<QaTask>> {
    let items = load_questions(path)?;
    if items.is_empty() {
        return Err(Error::invalid(format!("{}: no questions", path.display())));
    }
    Ok(items.into_iter().map(QaTask::from).collect())
}

impl QaData {
    /// Loads the data of a checked profile (its `[world]` or `[files]`, and `[qa]`);
    /// `need_text`: the corpus's passages are wanted (a tiny backbone pre-trains on them).
    pub fn load(
        world: Option<&WorldConfig>,
        files: Option<&QaFiles>,
        qa: &QaSpec,
        need_text: bool,
    ) -> Result<Self> {
        let config = QaEnvConfig {
            topk: qa.topk,
            max_turns: qa.train_max_turns,
        };
        let mut data = match (world, files) {
            (Some(w), None) => {
                let world = World::generate(w)?;
                let train_env = QaEnv::synthetic(&world, config)?;
                let n = train_env.tasks(Split::Id)?.len();
                Self {
                    documents: world.documents.clone(),
                    world: Some(world),
                    eval_env: train_env.fork(),
                    train_env,
                    test_sets: vec![(None, 0..n)],
                    key: serde_json::json!({"world": w}),
                }
            }
            (None, Some(f)) => Self::from_files(f, config, need_text)?,
            _ => {
                return Err(Error::invalid(
                    "a profile takes exactly one of [world] and [files]".into(),
                ));
            }
        };
        data.eval_env.config.max_turns = qa.eval_max_turns;
        Ok(data)
    }

    fn from_files(f: &QaFiles, config: QaEnvConfig, need_text: bool) -> Result<Self> {
        let has_index = f
            .index
            .as_ref()
            .is_some_and(|d| d.join("meta.json").exists());
        let in_memory = f.retriever_url.is_none() && f.index.is_none();
        // `SteeringProfile::check` made sure a corpus is given when the text is needed.
        let documents = match &f.corpus {
            Some(c) if need_text || in_memory || (f.index.is_some() && !has_index) => {
                let docs = load_corpus(c)?;
                if docs.is_empty() {
                    return Err(Error::invalid(format!("{}: no passages", c.display())));
                }
                docs
            }
            _ => Vec::new(),
        };
        let retriever: Arc<dyn Retriever> = match (&f.retriever_url, &f.index) {
            (Some(url), _) => Arc::new(HttpRetriever::new(
                url,
                Duration::from_secs_f64(f.timeout_s),
            )),
            (None, Some(dir)) if has_index => Arc::new(Bm25Index::on_disk(dir, None)?),
            (None, Some(dir)) => {
                if documents.is_empty() {
                    return Err(Error::invalid(format!(
                        "{} holds no index, and files.corpus is not given to build one",
                        dir.display()
                    )));
                }
                Arc::new(Bm25Index::on_disk(dir, Some(&documents))?)
            }
            (None, None) => Arc::new(Bm25Index::in_memory(&documents)?),
        };
        let train = questions(&f.train)?;
        let mut test = Vec::new();
        let mut test_sets = Vec::new();
        let mut test_keys = serde_json::Map::new();
        for (name, path) in &f.test {
            let qs = questions(path)?;
            test_sets.push((Some(name.clone()), test.len()..test.len() + qs.len()));
            test.extend(qs);
            test_keys.insert(name.clone(), file_key(path, true)?);
        }
        let key = serde_json::json!({
            "corpus": f.corpus.as_deref().map(|c| file_key(c, false)).transpose()?,
            "retriever_url": f.retriever_url,
            "train": file_key(&f.train, true)?,
            "test": test_keys,
        });
        let train_env = QaEnv::new(retriever, train, test, Vec::new(), config);
        Ok(Self {
            world: None,
            documents,
            eval_env: train_env.fork(),
            train_env,
            test_sets,
            key,
        })
    }

    /// The evaluation's questions: `n` spread over each test set.
    pub fn test_tasks(&self, n: usize) -> Result<Vec<Task>> {
        let all = self.eval_env.tasks(Split::Id)?;
        Ok(self
            .test_sets
            .iter()
            .flat_map(|(_, r)| spread(&all[r.clone()], n))
            .collect())
    }

    /// The name of the test set holding `task`.
    pub fn test_set(&self, task: &Task) -> Option<String> {
        let i = task.index as usize;
        self.test_sets
            .iter()
            .find(|(_, r)| r.contains(&i))
            .and_then(|(n, _)| n.clone())
    }
}
