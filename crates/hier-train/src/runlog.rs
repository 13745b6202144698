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

/// A bar of `len` steps labelled `what` (hidden unless `show`), `done` of them done already (a
/// resumed run's: they count in its position, not in its rate). On a terminal it redraws in
/// place; where standard error is not one (a run under `nohup`, its output in a log file) it
/// writes the bar as a plain line at most once every [`LOG_EVERY`], and its last state when it
/// ends — indicatif alone would show nothing there, leaving hours-long runs silent.
pub fn progress_bar(show: bool, done: usize, len: usize, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !show {
        style_bar(indicatif::ProgressBar::hidden(), what)
    } else if std::io::stderr().is_terminal() {
        begin(style_bar(
            indicatif::ProgressBar::new(len as u64).with_position(done as u64),
            what,
        ))
    } else {
        logged_bar(done, len, what, Box::new(std::io::stderr()), LOG_EVERY)
    }
}

/// A bar of `len` steps, `done` of them done, written to `out` as lines ([`LineLog`]), its
/// first line at once: the log says the work began, how much there is and how much a resumed
/// run found done, before any step ends.
fn logged_bar(
    done: usize,
    len: usize,
    what: &str,
    out: Box<dyn std::io::Write + Send>,
    every: std::time::Duration,
) -> indicatif::ProgressBar {
    let bar = style_bar(
        indicatif::ProgressBar::with_draw_target(
            Some(len as u64),
            indicatif::ProgressDrawTarget::term_like(Box::new(LineLog::new(out, every))),
        )
        .with_position(done as u64),
        what,
    );
    begin(bar)
}

/// Draws a new bar's first state; the steps it starts with then leave the rate: the draw
/// records them as made at once, and they took no time here.
fn begin(bar: indicatif::ProgressBar) -> indicatif::ProgressBar {
    bar.tick();
    bar.reset_eta();
    bar
}

/// How often a progress bar written to a log (not a terminal) writes a line.
pub const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

fn style_bar(bar: indicatif::ProgressBar, what: &str) -> indicatif::ProgressBar {
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{what} {{bar:30}} {{pos}}/{{len}} [{{elapsed_precise}}<{{eta_precise}}] {{msg}}"
        ))
        .expect("template"),
    );
    bar
}

/// A progress bar's draw target for a log: each redraw is kept as the pending line, written
/// out when `every` has passed since the last one written (the first at once), and the pending
/// one when the bar is dropped — its final state. Cursor movements mean nothing in a file and
/// are ignored.
struct LineLog {
    state: std::sync::Mutex<LineLogState>,
}

struct LineLogState {
    out: Box<dyn std::io::Write + Send>,
    every: std::time::Duration,
    /// The redraw being assembled since the last flush.
    drawing: String,
    /// The last complete redraw not yet written.
    pending: Option<String>,
    written_at: Option<std::time::Instant>,
}

impl LineLog {
    fn new(out: Box<dyn std::io::Write + Send>, every: std::time::Duration) -> Self {
        Self {
            state: std::sync::Mutex::new(LineLogState {
                out,
                every,
                drawing: String::new(),
                pending: None,
                written_at: None,
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut LineLogState) -> T) -> T {
        // A panic elsewhere while drawing leaves the text intact: keep logging.
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl LineLogState {
    fn write_pending(&mut self) -> std::io::Result<()> {
        if let Some(line) = self.pending.take() {
            writeln!(self.out, "{line}")?;
            self.out.flush()?;
            self.written_at = Some(std::time::Instant::now());
        }
        Ok(())
    }
}

impl std::fmt::Debug for LineLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineLog")
    }
}

impl indicatif::TermLike for LineLog {
    fn width(&self) -> u16 {
        160
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.with(|st| st.drawing.push_str(s.trim_matches('\r')));
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.with(|st| st.drawing.clear());
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        self.with(|st| {
            // The bar is drawn padded to the width: a log keeps the text only.
            let line = std::mem::take(&mut st.drawing).trim_end().to_owned();
            if line.is_empty() {
                return Ok(());
            }
            st.pending = Some(line);
            match st.written_at {
                Some(at) if at.elapsed() < st.every => Ok(()),
                _ => st.write_pending(),
            }
        })
    }
}

impl Drop for LineLog {
    fn drop(&mut self) {
        // The bar's final state; a log that cannot be written has nowhere to report it.
        let _ = self.with(|st| st.write_pending());
    }
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
    use std::time::Duration;

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

    /// A `Write` whose bytes the test can read while the bar holds it.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines(out: &Shared) -> Vec<String> {
        String::from_utf8(out.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// In a log, a bar writes whole lines: the first redraw at once, then none until the
    /// interval has passed, and its final state when it ends — nothing of a terminal's cursor
    /// control.
    #[test]
    fn a_bar_in_a_log_writes_its_first_and_last_state_between_intervals() {
        let out = Shared::default();
        let bar = logged_bar(
            0,
            5,
            "eval x",
            Box::new(out.clone()),
            Duration::from_secs(3600),
        );
        for _ in 0..5 {
            bar.inc(1);
        }
        // Only the first line (0 of 5, at the start) within the interval.
        assert_eq!(lines(&out).len(), 1, "{:?}", lines(&out));
        bar.finish();
        drop(bar);
        let got = lines(&out);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got[0].starts_with("eval x ") && got[0].contains(" 0/5 "),
            "{got:?}"
        );
        assert!(got[1].contains(" 5/5 "), "{got:?}");
        assert!(
            got.iter()
                .all(|l| !l.contains('\u{1b}') && !l.contains('\r') && !l.ends_with(' ')),
            "{got:?}"
        );

        // With no interval every redraw is a line, in order.
        let out = Shared::default();
        let bar = logged_bar(0, 5, "eval x", Box::new(out.clone()), Duration::ZERO);
        for _ in 0..5 {
            bar.inc(1);
        }
        drop(bar);
        let got = lines(&out);
        let positions: Vec<usize> = (0..=5)
            .map(|k| {
                got.iter()
                    .position(|l| l.contains(&format!(" {k}/5 ")))
                    .unwrap()
            })
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{got:?}");
    }

    /// A resumed run's first line says how far it is, not 0: a log read in the hour before its
    /// next step ends shows the work found done.
    #[test]
    fn a_resumed_bar_in_a_log_starts_at_the_work_found_done() {
        let out = Shared::default();
        let bar = logged_bar(
            144,
            200,
            "eval x",
            Box::new(out.clone()),
            Duration::from_secs(3600),
        );
        let got = lines(&out);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains(" 144/200 "), "{got:?}");
        bar.inc(8);
        drop(bar);
        assert!(lines(&out)[1].contains(" 152/200 "), "{:?}", lines(&out));
    }
}
