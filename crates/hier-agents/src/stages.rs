//! Cached pipeline stages shared by `reproduce table1` and `reproduce steering`.
//!
//! Every stage runs in `<out>/stages/<name>-<hash>/`, where the hash covers the stage's own
//! settings and the names of the stages it reads, and is marked done by a `DONE` file written
//! last (holding its key and the seconds it took). A second run skips done stages; a stage
//! interrupted half-way resumes from its own checkpoint (the trainers are resumable).

use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::CausalLm;
use hier_backbone::burn::tensor::Device;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pretrain::{PretrainConfig, PretrainOptions, pretrain};
use crate::sft::{SftConfig, SftOptions, train_adapter};

/// Errors of a pipeline (each names its stage).
pub type Result<T> = std::result::Result<T, String>;

/// Where the backbone comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BackboneSpec {
    /// Pre-train the tiny model from scratch on the pipeline's text.
    Pretrain {
        model: crate::pretrain::TinyModelConfig,
        train: crate::pretrain::TrainConfig,
    },
    /// An HF checkpoint directory (`config.json`, safetensors, `tokenizer.json`).
    Hf { path: PathBuf },
}

/// Writes `<out>/profile.resolved.toml`, runs `body` over fresh [`Stages`], and turns an early
/// stop (`stop_after_stages`) into an incomplete [`Report`].
pub(crate) fn run_pipeline<P: Serialize>(
    profile: &P,
    cfg: &RunConfig,
    body: impl FnOnce(&mut Stages<'_>) -> Result<()>,
) -> Result<Report> {
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("{}: {e}", cfg.out.display()))?;
    let resolved = toml::to_string(profile).map_err(|e| e.to_string())?;
    hier_backbone::write_atomic(&cfg.out.join("profile.resolved.toml"), resolved.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut stages = Stages {
        cfg,
        records: Vec::new(),
        ran: 0,
    };
    match body(&mut stages) {
        Ok(()) => Ok(Report {
            stages: stages.records,
            complete: true,
        }),
        Err(e) if e == STOPPED => Ok(Report {
            stages: stages.records,
            complete: false,
        }),
        Err(e) => Err(e),
    }
}

/// The backbone: an HF checkpoint as it is, or the stage `name` (keyed by `key`, which must
/// hold the spec and what the corpus is made from) pre-training the tiny model on `corpus()`.
/// Returns the model directory and the key by which later stages name it.
pub(crate) fn backbone_stage(
    st: &mut Stages<'_>,
    name: &str,
    spec: &BackboneSpec,
    key: serde_json::Value,
    corpus: impl FnOnce() -> Result<String>,
) -> Result<(PathBuf, String)> {
    match spec {
        BackboneSpec::Hf { path } => Ok((path.clone(), path.display().to_string())),
        BackboneSpec::Pretrain { model, train } => {
            let (device, progress) = (st.cfg.device.clone(), st.cfg.progress);
            let dir = st.run(name, key, |dir| {
                let text = dir.join("corpus.txt");
                hier_backbone::write_atomic(&text, corpus()?.as_bytes())
                    .map_err(|e| e.to_string())?;
                let pc = PretrainConfig {
                    model: model.clone(),
                    train: train.clone(),
                };
                let opts = PretrainOptions {
                    progress,
                    stop_after: None,
                };
                pretrain(&pc, &[text], &dir.join("model"), &device, &opts)
                    .map_err(|e| e.to_string())?;
                Ok(())
            })?;
            Ok((dir.join("model"), Stages::upstream(&dir)))
        }
    }
}

/// Options of a run that do not change its results.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub out: PathBuf,
    /// An autodiff device.
    pub device: Device,
    pub progress: bool,
    /// Return after this many stages have *run* (cached ones do not count) — to test resuming.
    pub stop_after_stages: Option<usize>,
}

/// What happened to one stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    pub name: String,
    pub dir: String,
    pub cached: bool,
    /// Seconds spent in this invocation (≈0 when reused).
    pub seconds: f64,
    /// Seconds the stage took when it ran (from its `DONE` stamp; `None` for stamps written
    /// before the time was recorded).
    pub ran_seconds: Option<f64>,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub stages: Vec<StageRecord>,
    /// False when the run stopped early (`stop_after_stages`).
    pub complete: bool,
}

pub(crate) struct Stages<'a> {
    pub(crate) cfg: &'a RunConfig,
    pub(crate) records: Vec<StageRecord>,
    pub(crate) ran: usize,
}

/// The stage stopped the run early (not an error).
pub(crate) const STOPPED: &str = "\u{0}stopped";

impl Stages<'_> {
    pub(crate) fn dir(&self, name: &str, key: &serde_json::Value) -> PathBuf {
        let mut h = Sha256::new();
        h.update(name.as_bytes());
        h.update(key.to_string().as_bytes());
        let hex: String = h
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        self.cfg.out.join("stages").join(format!("{name}-{hex}"))
    }

    /// Runs `work` in the stage's directory unless it is done; returns the directory.
    pub(crate) fn run(
        &mut self,
        name: &str,
        key: serde_json::Value,
        work: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<PathBuf> {
        let dir = self.dir(name, &key);
        let done = dir.join("DONE");
        let t = Instant::now();
        let cached = done.exists();
        if !cached {
            if self.cfg.stop_after_stages.is_some_and(|k| self.ran >= k) {
                return Err(STOPPED.into());
            }
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            tracing::info!("stage {name}: running in {}", dir.display());
            work(&dir).map_err(|e| format!("stage {name}: {e}"))?;
            let stamp = serde_json::json!({"key": key, "seconds": t.elapsed().as_secs_f64()});
            let stamp = serde_json::to_string_pretty(&stamp).expect("serialises");
            hier_backbone::write_atomic(&done, stamp.as_bytes()).map_err(|e| e.to_string())?;
            self.ran += 1;
        } else {
            tracing::info!("stage {name}: done before ({})", dir.display());
        }
        let ran_seconds = std::fs::read_to_string(&done)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["seconds"].as_f64());
        self.records.push(StageRecord {
            name: name.into(),
            ran_seconds,
            dir: dir
                .strip_prefix(&self.cfg.out)
                .unwrap_or(&dir)
                .display()
                .to_string(),
            cached,
            seconds: t.elapsed().as_secs_f64(),
        });
        Ok(dir)
    }

    /// The key of a stage that reads `dir` (a done stage): its name.
    pub(crate) fn upstream(dir: &Path) -> String {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// An SFT stage: trains `sft.adapter` on `examples()` unless the stage is done, then installs
/// the stage's adapter.
pub(crate) fn sft_stage(
    st: &mut Stages<'_>,
    lm: &mut CausalLm,
    name: &str,
    key: serde_json::Value,
    sft: &SftConfig,
    progress: bool,
    examples: impl FnOnce() -> Result<Vec<crate::sft::SftExample>>,
) -> Result<PathBuf> {
    let dir = st.run(name, key, |dir| {
        let ex = examples()?;
        let opts = SftOptions {
            progress,
            stop_after: None,
        };
        *lm = train_adapter(take(lm), &ex, sft, dir, &opts)
            .map_err(|e| e.to_string())?
            .0;
        Ok(())
    })?;
    load(lm, &sft.adapter, &dir.join("adapter"))?;
    Ok(dir)
}

pub(crate) fn take(lm: &mut CausalLm) -> CausalLm {
    // Trainers take the model by value; the placeholder is replaced before anyone reads it.
    std::mem::replace(lm, lm.clone())
}

/// Installs a done stage's adapter under `name` (replacing what the name held).
pub(crate) fn load(lm: &mut CausalLm, name: &str, dir: &Path) -> Result<()> {
    lm.load_adapter(name, dir)
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("serialises") + "\n";
    hier_backbone::write_atomic(path, text.as_bytes()).map_err(|e| e.to_string())
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}
