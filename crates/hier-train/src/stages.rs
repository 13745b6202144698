//! Cached pipeline stages shared by `reproduce table1` and `reproduce steering`.
//!
//! Every stage runs in `<out>/stages/<name>-<hash>/`, where the hash covers the stage's own
//! settings and the names of the stages it reads, and is marked done by a `DONE` file written
//! last (holding its key and the seconds it took). A stage under way holds its key in
//! [`KEY_FILE`] from its start, so a journal or checkpoint says what it belongs to. A second
//! run skips done stages; a stage interrupted half-way resumes from its own checkpoint (the
//! trainers are resumable) or journal (an evaluation keeps every finished batch of episodes:
//! [`crate::journal`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::CausalLm;
use hier_backbone::burn::tensor::Device;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result, StageError};
use crate::memory::{WATCHDOG_PERIOD, Watchdog};
use crate::pretrain::{PretrainConfig, pretrain};
use crate::runlog::RunOptions;
use crate::sft::{SftConfig, train_adapter};

/// The file in a stage's directory that holds its key (JSON) from the moment it starts.
pub const KEY_FILE: &str = "KEY.json";

/// Where the backbone comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BackboneSpec {
    /// Pre-train the tiny model from scratch on the pipeline's text.
    Pretrain {
        model: crate::pretrain::TinyModelConfig,
        train: crate::pretrain::TrainConfig,
    },
    /// An HF checkpoint directory (`config.json`, safetensors, `tokenizer.json`) or a `.gguf`
    /// file.
    Hf { path: PathBuf },
}

/// The file in a run's directory that holds the profile it ran, resolved (`extends` merged).
pub const RESOLVED_PROFILE: &str = "profile.resolved.toml";

/// Writes `<out>/profile.resolved.toml`, runs `body` over fresh [`Stages`], and turns an early
/// stop (`stop_after_stages`) into an incomplete [`Report`].
pub fn run_pipeline<P: Serialize, E: StageError>(
    profile: &P,
    cfg: &RunConfig,
    body: impl FnOnce(&mut Stages<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<Report, E> {
    std::fs::create_dir_all(&cfg.out).map_err(|e| Error::io(&cfg.out, e))?;
    let resolved = toml::to_string(profile)
        .map_err(|e| Error::Invalid(format!("the profile does not serialise: {e}")))?;
    hier_backbone::write_atomic(&cfg.out.join(RESOLVED_PROFILE), resolved.as_bytes())
        .map_err(Error::from)?;
    let mut stages = Stages {
        cfg,
        records: Vec::new(),
        ran: 0,
        planning: None,
    };
    match body(&mut stages) {
        Ok(()) => Ok(Report {
            stages: stages.records,
            complete: true,
        }),
        Err(e) if e.is_stopped() => Ok(Report {
            stages: stages.records,
            complete: false,
        }),
        Err(e) => Err(e),
    }
}

/// The backbone: an HF checkpoint as it is, or the stage `name` (keyed by `key`, which must
/// hold the spec and what the corpus is made from) pre-training the tiny model on `corpus()`.
/// Returns the model directory and the key by which later stages name it.
pub fn backbone_stage<E: StageError>(
    st: &mut Stages<'_>,
    name: &str,
    spec: &BackboneSpec,
    key: serde_json::Value,
    corpus: impl FnOnce() -> std::result::Result<String, E>,
) -> std::result::Result<(PathBuf, String), E> {
    match spec {
        BackboneSpec::Hf { path } => Ok((path.clone(), path.display().to_string())),
        BackboneSpec::Pretrain { model, train } => {
            let (device, opts) = (st.cfg.device.clone(), st.cfg.run_options());
            let dir = st.run(name, key, |dir| -> std::result::Result<(), E> {
                let text = dir.join("corpus.txt");
                hier_backbone::write_atomic(&text, corpus()?.as_bytes()).map_err(Error::from)?;
                let pc = PretrainConfig {
                    model: model.clone(),
                    train: train.clone(),
                };
                pretrain(&pc, &[text], &dir.join("model"), &device, &opts)?;
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
    /// Stop with [`Error::MemoryLimit`] when resident memory exceeds this many MiB: checked
    /// before and after every stage and after every training step (which checkpoints first);
    /// while a stage runs, a [`crate::memory::Watchdog`] ends the process in the middle of a
    /// step once it is 5 % past this limit (losing the work since the last checkpoint).
    pub memory_limit_mib: Option<u64>,
    /// Stop with [`Error::NonFinite`] once a trainer has seen more non-finite loss elements of
    /// one quantity than this (0: the first one stops the run).
    pub max_nonfinite: u64,
    /// MiB of keys and values each generating role keeps across its calls
    /// ([`crate::policy::BackbonePolicy::prefix_cache`]; 0: recompute every prompt). Results do
    /// not depend on it (to float rounding), so it is no part of any stage's key.
    pub prefix_cache_mib: usize,
    /// Run nothing: every stage must be done ([`Error::NotDone`] names the first that is
    /// not). A pipeline that reports cells (Table 1) leaves out those whose evaluation is not
    /// done and reports the rest.
    pub report_only: bool,
}

impl RunConfig {
    /// The trainer options of this run's stages: progress bars, memory limit, non-finite limit.
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            memory_limit_mib: self.memory_limit_mib,
            max_nonfinite: self.max_nonfinite,
            prefix_cache_mib: self.prefix_cache_mib,
            ..RunOptions::with_progress(self.progress)
        }
    }
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
    /// The process's resident memory (MiB) when the stage was over, in this invocation
    /// ([`crate::memory::resident_mib`]; `None` where not reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_mib: Option<f64>,
}

/// The distinct stages among `records`, in order of first mention: a stage that several
/// methods read (System 1's SFT, an offline stage the ablations share) is recorded each time
/// it is asked for, and must count once in a run's compute time. A stage counts as reused
/// only when every record of it is (one that ran in this run is recorded once as run, then
/// as reused).
pub fn distinct_stages(records: &[StageRecord]) -> Vec<StageRecord> {
    let mut out: Vec<StageRecord> = Vec::new();
    for r in records {
        match out.iter_mut().find(|o| o.dir == r.dir) {
            Some(o) => {
                o.cached &= r.cached;
                o.seconds += r.seconds;
                o.ran_seconds = o.ran_seconds.or(r.ran_seconds);
            }
            None => out.push(r.clone()),
        }
    }
    out
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub stages: Vec<StageRecord>,
    /// False when the run stopped early (`stop_after_stages`).
    pub complete: bool,
}

/// The stages of one run: where they live, which ran, and the run's options.
pub struct Stages<'a> {
    /// The run's options.
    pub cfg: &'a RunConfig,
    records: Vec<StageRecord>,
    ran: usize,
    /// While planning ([`Stages::begin_planning`]): the number of records before it began.
    planning: Option<usize>,
}

impl Stages<'_> {
    /// What happened to every stage so far, in order.
    pub fn records(&self) -> &[StageRecord] {
        &self.records
    }

    /// `<out>/stages/<name>-<hash of name and key>`.
    pub fn dir(&self, name: &str, key: &serde_json::Value) -> PathBuf {
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

    /// Moves the stage that an earlier version of the code keyed `legacy` to where `key` puts
    /// it, so that a change of what a key covers (not of what the stage computes) keeps the
    /// work done: a done stage, or a journal or checkpoint to resume. Nothing moves when `key`'s
    /// directory exists already (its content stands) or `legacy`'s does not. A moved `DONE`
    /// is rewritten with `key` and the directory it came from (`adopted_from`), its seconds
    /// kept. Refuses ([`Error::StageBusy`]) a legacy directory another process is running —
    /// an older binary still at work there. Returns whether it moved one.
    pub fn adopt(
        &self,
        name: &str,
        legacy: &serde_json::Value,
        key: &serde_json::Value,
    ) -> Result<bool> {
        let (from, to) = (self.dir(name, legacy), self.dir(name, key));
        if from == to || to.exists() || !from.exists() {
            return Ok(false);
        }
        let lock = lock_stage(&from)?;
        std::fs::rename(&from, &to).map_err(|e| Error::io(&to, e))?;
        let done = to.join("DONE");
        // A journal or checkpoint says which key it now belongs to.
        if !done.exists() || to.join(KEY_FILE).exists() {
            write_json(&to.join(KEY_FILE), key)?;
        }
        // The lock file moved with the directory; a done stage keeps none.
        if done.exists() {
            let old: serde_json::Value = read_json(&done)?;
            let stamp = serde_json::json!({
                "key": key,
                "seconds": old["seconds"],
                "adopted_from": Self::upstream(&from),
            });
            write_json(&done, &stamp)?;
            let _ = std::fs::remove_file(to.join("LOCK"));
        }
        drop(lock);
        tracing::info!("stage {name}: {} is now {}", from.display(), to.display());
        Ok(true)
    }

    /// Starts a planning pass: until [`end_planning`](Self::end_planning), [`run`](Self::run)
    /// returns each stage's directory without running anything (done stages are recorded as
    /// reused), and [`sft_stage`] installs nothing — a pass that finds the keys of the stages
    /// downstream (e.g. whether an evaluation is done) without training anything.
    pub fn begin_planning(&mut self) {
        self.planning = Some(self.records.len());
    }

    /// Ends a planning pass, keeping what it recorded (the plan stands) or not (the stages
    /// are about to run for real, and record themselves).
    pub fn end_planning(&mut self, keep_records: bool) {
        if let Some(n) = self.planning.take()
            && !keep_records
        {
            self.records.truncate(n);
        }
    }

    pub fn planning(&self) -> bool {
        self.planning.is_some()
    }

    /// Runs `work` in the stage's directory unless it is done; returns the directory. While
    /// [planning](Self::begin_planning), only returns the directory.
    pub fn run<E: StageError>(
        &mut self,
        name: &str,
        key: serde_json::Value,
        work: impl FnOnce(&Path) -> std::result::Result<(), E>,
    ) -> std::result::Result<PathBuf, E> {
        let dir = self.dir(name, &key);
        let done = dir.join("DONE");
        let t = Instant::now();
        let cached = done.exists();
        if self.planning() && !cached {
            return Ok(dir);
        }
        if !cached {
            if self.cfg.report_only {
                return Err(Error::NotDone {
                    stage: name.into(),
                    dir,
                }
                .into());
            }
            if self.cfg.stop_after_stages.is_some_and(|k| self.ran >= k) {
                return Err(Error::Stopped.into());
            }
            let limit = self.cfg.memory_limit_mib;
            crate::memory::check_limit(limit, || format!("before stage {name}"))?;
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let lock = lock_stage(&dir)?;
            // Another process may have finished the stage between the check above and the
            // lock; its `DONE` stands.
            if done.exists() {
                return self.record(name, &dir, true, t);
            }
            stamp_key(&dir, &key)?;
            tracing::info!("stage {name}: running in {}", dir.display());
            let watchdog = Watchdog::arm(limit, format!("stage {name}"), WATCHDOG_PERIOD);
            work(&dir).map_err(|e| e.in_stage(name))?;
            drop(watchdog);
            let seconds = t.elapsed().as_secs_f64() + earlier_seconds(&dir)?;
            let stamp = serde_json::json!({"key": key, "seconds": seconds});
            let stamp = serde_json::to_string_pretty(&stamp).expect("serialises");
            hier_backbone::write_atomic(&done, stamp.as_bytes()).map_err(Error::from)?;
            // A done stage keeps no lock file: whoever opened it before this removal and
            // takes the lock after it finds `DONE` above.
            let _ = std::fs::remove_file(dir.join("LOCK"));
            drop(lock);
            self.ran += 1;
            self.record(name, &dir, false, t)
        } else {
            tracing::info!("stage {name}: done before ({})", dir.display());
            self.record(name, &dir, true, t)
        }
    }

    /// Records the stage in `dir` (done now) and, after one that ran, checks the memory
    /// limit; returns the directory.
    fn record<E: StageError>(
        &mut self,
        name: &str,
        dir: &Path,
        cached: bool,
        t: Instant,
    ) -> std::result::Result<PathBuf, E> {
        let done = dir.join("DONE");
        let ran_seconds = std::fs::read_to_string(&done)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["seconds"].as_f64());
        self.records.push(StageRecord {
            name: name.into(),
            ran_seconds,
            dir: dir
                .strip_prefix(&self.cfg.out)
                .unwrap_or(dir)
                .display()
                .to_string(),
            cached,
            seconds: t.elapsed().as_secs_f64(),
            rss_mib: crate::memory::resident_mib(),
        });
        if !cached {
            crate::memory::check_limit(self.cfg.memory_limit_mib, || {
                format!("after stage {name}")
            })?;
        }
        Ok(dir.to_path_buf())
    }

    /// The key of a stage that reads `dir` (a done stage): its name.
    pub fn upstream(dir: &Path) -> String {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Writes `key` to the [`KEY_FILE`] of a stage that is starting or resuming in `dir`; a file
/// there that holds another key (two keys hashed to one directory, or a file edited by hand)
/// is an error, not overwritten — the journal beside it belongs to that key.
fn stamp_key(dir: &Path, key: &serde_json::Value) -> Result<()> {
    let path = dir.join(KEY_FILE);
    if path.exists() {
        let held: serde_json::Value = read_json(&path)?;
        if &held != key {
            return Err(Error::Invalid(format!(
                "{} holds another stage's key; the work in {} is not this stage's (move it away to start over)",
                path.display(),
                dir.display()
            )));
        }
        return Ok(());
    }
    write_json(&path, key)
}

/// Takes the stage directory's `LOCK` (an advisory lock on `<dir>/LOCK`, held while the
/// returned file is open): two invocations sharing an `--out` may run different stages at
/// once, never the same one — both would append to one journal or checkpoint. The OS drops
/// the lock when its process ends, however it ends, so a killed run leaves nothing to clear.
fn lock_stage(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::StageBusy { dir: dir.into() }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// A file a stage that resumes piece by piece (an evaluation's [`crate::journal::Journal`], a
/// trainer's checkpoint: [`crate::trainer::TrainLoop::open`]) writes in its directory: the
/// seconds its earlier, interrupted invocations spent on the pieces it kept. [`Stages::run`]
/// adds them to the stamp's `seconds`, so a stage run in pieces reports what it cost in all (a
/// killed invocation's unfinished piece is not counted).
pub const EARLIER_SECONDS: &str = "EARLIER_SECONDS";

/// Writes `seconds` as `<dir>/EARLIER_SECONDS`, or removes the file when there are none, so
/// that a file left beside an abandoned journal or checkpoint never counts.
pub fn write_earlier_seconds(dir: &Path, seconds: f64) -> Result<()> {
    let path = dir.join(EARLIER_SECONDS);
    if seconds > 0.0 {
        hier_backbone::write_atomic(&path, format!("{seconds}\n").as_bytes())?;
    } else if path.exists() {
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

/// The seconds in `<dir>/EARLIER_SECONDS` (0 when the file is absent).
fn earlier_seconds(dir: &Path) -> Result<f64> {
    let path = dir.join(EARLIER_SECONDS);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|e| {
            Error::Invalid(format!("{}: not a number of seconds: {e}", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0.0),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// An SFT stage: trains `sft.adapter` on `examples()` unless the stage is done, then installs
/// the stage's adapter.
pub fn sft_stage<E: StageError>(
    st: &mut Stages<'_>,
    lm: &mut CausalLm,
    name: &str,
    key: serde_json::Value,
    sft: &SftConfig,
    examples: impl FnOnce() -> std::result::Result<Vec<crate::sft::SftExample>, E>,
) -> std::result::Result<PathBuf, E> {
    let opts = st.cfg.run_options();
    let dir = st.run(name, key, |dir| -> std::result::Result<(), E> {
        let ex = examples()?;
        *lm = train_adapter(take(lm), &ex, sft, dir, &opts)?.0;
        Ok(())
    })?;
    if !st.planning() {
        load(lm, &sft.adapter, &dir.join("adapter"))?;
    }
    Ok(dir)
}

/// The model out of `lm` for a trainer that takes it by value (a clone stays behind until the
/// trainer's result replaces it).
pub fn take(lm: &mut CausalLm) -> CausalLm {
    // Trainers take the model by value; the placeholder is replaced before anyone reads it.
    std::mem::replace(lm, lm.clone())
}

/// Installs a done stage's adapter under `name` (replacing what the name held).
pub fn load(lm: &mut CausalLm, name: &str, dir: &Path) -> Result<()> {
    lm.load_adapter(name, dir)?;
    Ok(())
}

/// Writes `value` as pretty JSON, atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("serialises") + "\n";
    Ok(hier_backbone::write_atomic(path, text.as_bytes())?)
}

/// Reads a JSON file.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.into(),
        line: None,
        source,
    })
}

/// Reads a JSON-lines file (blank lines skipped); an error names the line.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| Error::Json {
                path: path.into(),
                line: Some(i + 1),
                source,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(out: &Path) -> RunConfig {
        RunConfig {
            out: out.into(),
            device: hier_backbone::burn::tensor::Device::flex().autodiff(),
            progress: false,
            stop_after_stages: None,
            memory_limit_mib: None,
            max_nonfinite: 0,
            prefix_cache_mib: 0,
            report_only: false,
        }
    }

    /// Stages over `cfg` with nothing run or recorded yet.
    fn fresh_stages(cfg: &RunConfig) -> Stages<'_> {
        Stages {
            cfg,
            records: Vec::new(),
            ran: 0,
            planning: None,
        }
    }

    #[test]
    fn a_stage_another_process_runs_is_refused_then_reused() {
        let out = tempfile::tempdir().unwrap();
        let cfg = config(out.path());
        let mut st = fresh_stages(&cfg);
        let key = serde_json::json!({"k": 1});
        let dir = st.dir("eval-x", &key);
        std::fs::create_dir_all(&dir).unwrap();
        // The other process: an open file description holding the lock (flock locks of two
        // opens conflict within one process too).
        let other = std::fs::File::create(dir.join("LOCK")).unwrap();
        other.lock().unwrap();
        let mut ran = false;
        let err = st
            .run("eval-x", key.clone(), |_| -> Result<()> {
                ran = true;
                Ok(())
            })
            .unwrap_err();
        assert!(!ran, "the stage ran beside its owner");
        assert!(
            matches!(&err, Error::StageBusy { dir: d } if d == &dir),
            "{err}"
        );
        assert!(err.to_string().contains("another process"), "{err}");
        // The owner finishes: its DONE stands, and nothing runs again.
        std::fs::write(dir.join("DONE"), r#"{"seconds": 2.0}"#).unwrap();
        drop(other);
        let got = st
            .run("eval-x", key.clone(), |_| -> Result<()> {
                ran = true;
                Ok(())
            })
            .unwrap();
        assert_eq!(got, dir);
        assert!(!ran);
        assert!(st.records()[0].cached);
        assert_eq!(st.records()[0].ran_seconds, Some(2.0));
        // A stage that runs here takes the lock, and a done one keeps no lock file.
        let other_key = serde_json::json!({"k": 2});
        let dir2 = st
            .run("eval-y", other_key, |d| -> Result<()> {
                let f = std::fs::File::open(d.join("LOCK")).unwrap();
                assert!(matches!(
                    f.try_lock(),
                    Err(std::fs::TryLockError::WouldBlock)
                ));
                Ok(())
            })
            .unwrap();
        assert!(dir2.join("DONE").exists());
        assert!(!dir2.join("LOCK").exists());
    }

    /// A report-only run reuses done stages and refuses, naming it, one that is not done —
    /// without running it or making its directory.
    #[test]
    fn a_report_only_run_runs_nothing() {
        let out = tempfile::tempdir().unwrap();
        let cfg = RunConfig {
            report_only: true,
            ..config(out.path())
        };
        let mut st = fresh_stages(&cfg);
        let done = st.dir("data-x", &serde_json::json!(1));
        std::fs::create_dir_all(&done).unwrap();
        std::fs::write(done.join("DONE"), "{}").unwrap();
        let mut ran = false;
        let mut work = |_: &Path| -> Result<()> {
            ran = true;
            Ok(())
        };
        assert_eq!(
            st.run("data-x", serde_json::json!(1), &mut work).unwrap(),
            done
        );
        let err = st
            .run("sft-x", serde_json::json!(2), &mut work)
            .unwrap_err();
        let missing = st.dir("sft-x", &serde_json::json!(2));
        assert!(
            matches!(&err, Error::NotDone { stage, dir } if stage == "sft-x" && dir == &missing)
        );
        assert!(err.to_string().contains("--report-only"), "{err}");
        assert!(!ran && !missing.exists());
        assert_eq!(st.records().len(), 1);
    }

    #[test]
    fn a_stage_recorded_twice_counts_once() {
        let rec = |dir: &str, cached, ran| StageRecord {
            name: dir.into(),
            dir: dir.into(),
            cached,
            seconds: if cached { 0.5 } else { ran },
            ran_seconds: Some(ran),
            rss_mib: None,
        };
        let records = [
            rec("sft", false, 10.0),
            rec("eval-a", true, 5.0),
            rec("sft", true, 10.0),
        ];
        let d = distinct_stages(&records);
        assert_eq!(d.len(), 2);
        assert_eq!(d.iter().filter_map(|s| s.ran_seconds).sum::<f64>(), 15.0);
        assert_eq!(
            (d[0].dir.as_str(), d[0].cached, d[0].seconds),
            ("sft", false, 10.5)
        );
        assert!(d[1].cached);
    }

    /// A stage under way holds its key from its start; a directory holding another key's
    /// work is refused with the file named, and its work left as it is.
    #[test]
    fn a_stage_holds_its_key_from_its_start() {
        let out = tempfile::tempdir().unwrap();
        let cfg = config(out.path());
        let mut st = fresh_stages(&cfg);
        let key = serde_json::json!({"k": 1, "seeds": [0, 1]});
        let mut seen = None;
        st.run("eval-k", key.clone(), |dir| -> Result<()> {
            seen = Some(read_json::<serde_json::Value>(&dir.join(KEY_FILE))?);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, Some(key));
        let other = serde_json::json!({"k": 2});
        let dir = st.dir("eval-l", &other);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(KEY_FILE), r#"{"k": 3}"#).unwrap();
        std::fs::write(dir.join("batches.jsonl"), "1\n").unwrap();
        let mut ran = false;
        let err = st
            .run("eval-l", other, |_| -> Result<()> {
                ran = true;
                Ok(())
            })
            .unwrap_err();
        assert!(!ran);
        assert!(err.to_string().contains(KEY_FILE), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("batches.jsonl")).unwrap(),
            "1\n"
        );
    }

    /// A stage keyed by an earlier version of the code moves under its new key: a done one with
    /// its `DONE` re-stamped (seconds kept, where it came from named), a journal as it is; one
    /// whose new directory exists, or that another process holds, stays where it is.
    #[test]
    fn a_stage_under_its_legacy_key_is_adopted() {
        let out = tempfile::tempdir().unwrap();
        let cfg = config(out.path());
        let st = fresh_stages(&cfg);
        let (old, new) = (serde_json::json!({"k": 1}), serde_json::json!({"k": 2}));
        // A done stage.
        let from = st.dir("eval-a", &old);
        std::fs::create_dir_all(&from).unwrap();
        std::fs::write(from.join("DONE"), r#"{"key": {"k": 1}, "seconds": 7.5}"#).unwrap();
        std::fs::write(from.join("episodes.jsonl"), "{}\n").unwrap();
        assert!(st.adopt("eval-a", &old, &new).unwrap());
        let to = st.dir("eval-a", &new);
        assert!(!from.exists());
        assert_eq!(
            std::fs::read_to_string(to.join("episodes.jsonl")).unwrap(),
            "{}\n"
        );
        let stamp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(to.join("DONE")).unwrap()).unwrap();
        assert_eq!(stamp["key"], new);
        assert_eq!(stamp["seconds"], 7.5);
        assert_eq!(stamp["adopted_from"], Stages::upstream(&from));
        assert!(!to.join("LOCK").exists());
        assert!(
            !to.join(KEY_FILE).exists(),
            "a done stage's key is in its DONE"
        );
        // Again: nothing left to move.
        assert!(!st.adopt("eval-a", &old, &new).unwrap());
        // A journal moves as it is (its lock file with it).
        let from = st.dir("eval-b", &old);
        std::fs::create_dir_all(&from).unwrap();
        std::fs::write(from.join("batches.jsonl"), "1\n").unwrap();
        assert!(st.adopt("eval-b", &old, &new).unwrap());
        let to = st.dir("eval-b", &new);
        assert_eq!(
            std::fs::read_to_string(to.join("batches.jsonl")).unwrap(),
            "1\n"
        );
        assert!(!to.join("DONE").exists());
        let held: serde_json::Value = read_json(&to.join(KEY_FILE)).unwrap();
        assert_eq!(held, new, "the journal is stamped with its new key");
        // Both exist: the new one stands, the old one stays.
        let from = st.dir("eval-c", &old);
        let to = st.dir("eval-c", &new);
        std::fs::create_dir_all(&from).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        assert!(!st.adopt("eval-c", &old, &new).unwrap());
        assert!(from.exists() && to.exists());
        // Held by another process: refused, nothing moved.
        let from = st.dir("eval-d", &old);
        std::fs::create_dir_all(&from).unwrap();
        let other = std::fs::File::create(from.join("LOCK")).unwrap();
        other.lock().unwrap();
        let err = st.adopt("eval-d", &old, &new).unwrap_err();
        assert!(
            matches!(&err, Error::StageBusy { dir } if dir == &from),
            "{err}"
        );
        assert!(from.exists() && !st.dir("eval-d", &new).exists());
    }
}
