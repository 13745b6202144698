//! Bookkeeping every trainer shares: the learning-rate schedule, progress bars, metric lines (JSONL) that a
//! resumed run trims back to its checkpoint, and checkpoint directories swapped in whole.

use std::path::Path;

use hier_backbone::write_atomic;

use crate::error::{Error, Result};

/// Linear warm-up to `lr` over `warmup` steps, then cosine decay to `min_lr` at `steps`.
pub fn cosine_lr(lr: f64, min_lr: f64, warmup: usize, steps: usize, step: usize) -> f64 {
    if step < warmup {
        return lr * (step + 1) as f64 / warmup as f64;
    }
    let span = (steps - warmup).max(1) as f64;
    let progress = ((step - warmup) as f64 / span).min(1.0);
    min_lr + 0.5 * (lr - min_lr) * (1.0 + (std::f64::consts::PI * progress).cos())
}

/// Writes `rows` as JSON lines, atomically (the whole file or nothing).
pub fn write_jsonl<T: serde::Serialize>(path: &Path, rows: &[T]) -> hier_backbone::Result<()> {
    let text: String = rows
        .iter()
        .map(|r| serde_json::to_string(r).expect("serialises") + "\n")
        .collect();
    hier_backbone::write_atomic(path, text.as_bytes())
}

/// Appends one line to a metrics file.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{line}")
}

/// Drops metric lines written after the checkpoint (`"step"` > `step`) a run resumes from.
pub fn keep_metrics_up_to(path: &Path, step: usize) -> std::io::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(path)?;
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|s| s as usize <= step)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    write_atomic(path, kept.as_bytes()).map_err(std::io::Error::other)
}

/// The state a trainer resumes from: `state_path` parsed when it exists (`None`: a fresh run),
/// refused when it was written under another config (`config_of(state) != config`), since
/// resuming under changed settings would silently splice two different runs together.
pub fn resume_state<S, C>(
    state_path: &Path,
    config: &C,
    config_of: impl FnOnce(&S) -> &C,
) -> Result<Option<S>>
where
    S: serde::de::DeserializeOwned,
    C: PartialEq,
{
    if !state_path.exists() {
        return Ok(None);
    }
    let err = |msg: String| Error::checkpoint(state_path, msg);
    let text = std::fs::read_to_string(state_path).map_err(|e| err(e.to_string()))?;
    let state: S = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
    if config_of(&state) != config {
        return Err(err("checkpoint was written by a different config".into()));
    }
    Ok(Some(state))
}

/// Fills a fresh `<ckpt>.tmp` with `fill`, then swaps it in for `ckpt` by two renames
/// (`ckpt` → `<ckpt>.old`, `<ckpt>.tmp` → `ckpt`), so a crash at any point leaves a whole
/// checkpoint on disk: `ckpt` itself, or — killed between the two renames — `<ckpt>.old`, which
/// [`recover_swapped_dir`] puts back.
pub fn swap_in_dir<E>(
    ckpt: &Path,
    fill: impl FnOnce(&Path) -> std::result::Result<(), E>,
) -> std::result::Result<(), E>
where
    E: From<std::io::Error>,
{
    let tmp = ckpt.with_extension("tmp");
    let old = ckpt.with_extension("old");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    fill(&tmp)?;
    if ckpt.exists() {
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(ckpt, &old)?;
    }
    std::fs::rename(&tmp, ckpt)?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// What [`recover_swapped_dir`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// `ckpt` was whole (or there was none); leftovers of an unfinished swap were removed.
    Intact,
    /// `ckpt` was missing but `<ckpt>.old` was there: a swap was killed between its renames,
    /// and the previous checkpoint is back in place.
    RestoredOld,
}

/// Brings `ckpt` back to a whole checkpoint after a [`swap_in_dir`] that may have been killed.
///
/// The invariant: `<ckpt>.old` exists only between the two renames and just after them, so
/// - `ckpt` present: it is whole (the second rename is atomic); any `.old`/`.tmp` is stale;
/// - `ckpt` absent, `.old` present: killed between the renames — `.old` is the last complete
///   checkpoint and is renamed back (the newer `.tmp` was complete too, but `.old` is the one
///   written long enough ago to have reached the disk whatever the cause of the crash);
/// - neither: no checkpoint was ever completed; a `.tmp` is a partial first one.
pub fn recover_swapped_dir(ckpt: &Path) -> std::io::Result<Recovery> {
    let tmp = ckpt.with_extension("tmp");
    let old = ckpt.with_extension("old");
    let recovery = if !ckpt.exists() && old.is_dir() {
        std::fs::rename(&old, ckpt)?;
        Recovery::RestoredOld
    } else {
        Recovery::Intact
    };
    for leftover in [&tmp, &old] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover)?;
        }
    }
    Ok(recovery)
}

/// A bar of `len` steps labelled `what` (hidden unless `show`).
pub fn progress_bar(show: bool, len: usize, what: &str) -> indicatif::ProgressBar {
    let bar = if show {
        indicatif::ProgressBar::new(len as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} {{bar:30}} {{pos}}/{{len}} [{{elapsed_precise}}<{{eta_precise}}] {{msg}}"
        ))
        .expect("template"),
    );
    bar
}

/// How a trainer runs, without changing what it computes: a progress bar, an early stop
/// (after checkpointing) once `stop_after` steps are done — to test resumption — and a hook
/// called after every step. Every trainer takes this one type.
#[derive(Clone)]
pub struct RunOptions {
    pub progress: bool,
    /// Stop (after checkpointing) once this many steps are done — to test resumption.
    pub stop_after: Option<usize>,
    /// Called after every step of the trainer ([`crate::trainer::StepHook`]).
    pub on_step: Option<crate::trainer::StepHook>,
    /// Stop with [`crate::Error::MemoryLimit`] (after checkpointing) once resident memory
    /// exceeds this many MiB ([`crate::memory`]).
    pub memory_limit_mib: Option<u64>,
    /// Non-finite elements a loss may drop from one quantity in one invocation before the
    /// run stops ([`crate::trainer::TrainLoop::count_nonfinite`]); default 0.
    pub max_nonfinite: u64,
    /// MiB of context each generating role keeps across calls
    /// ([`crate::policy::DEFAULT_PREFIX_CACHE_MIB`] by default; 0: none).
    pub prefix_cache_mib: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            progress: false,
            stop_after: None,
            on_step: None,
            memory_limit_mib: None,
            max_nonfinite: 0,
            prefix_cache_mib: crate::policy::DEFAULT_PREFIX_CACHE_MIB,
        }
    }
}

impl RunOptions {
    /// Runs to the end, with a progress bar when `progress`.
    pub fn with_progress(progress: bool) -> Self {
        Self {
            progress,
            ..Self::default()
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("progress", &self.progress)
            .field("stop_after", &self.stop_after)
            .field("on_step", &self.on_step.as_ref().map(|_| "<hook>"))
            .finish()
    }
}

/// Fails unless `path` is absent (then written) or holds exactly `resolved`.
pub fn pin_config(path: &Path, resolved: &str) -> Result<()> {
    if path.exists() {
        let held = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        if held != resolved {
            return Err(Error::checkpoint(
                path,
                "this directory holds a run with a different config; use another --out or delete it",
            ));
        }
        Ok(())
    } else {
        Ok(hier_backbone::write_atomic(path, resolved.as_bytes())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct State {
        config: u32,
        step: usize,
    }

    #[test]
    fn a_run_resumes_only_from_a_state_of_its_own_config() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.json");
        let read = |c: u32| resume_state(&path, &c, |s: &State| &s.config);
        assert!(read(1).unwrap().is_none(), "no state: a fresh run");
        std::fs::write(&path, r#"{"config": 1, "step": 7}"#).unwrap();
        assert_eq!(read(1).unwrap().unwrap().step, 7);
        let checkpoint = |e: Error| match e {
            Error::Checkpoint { path, msg } => (path, msg),
            other => panic!("not a checkpoint error: {other}"),
        };
        let (at, msg) = checkpoint(read(2).unwrap_err());
        assert_eq!(at, path);
        assert!(msg.contains("different config"), "{msg}");
        std::fs::write(&path, r#"{"config": 1"#).unwrap();
        let (at, msg) = checkpoint(read(1).unwrap_err());
        assert!(at == path && msg.contains("EOF"), "{msg}");
    }
}
