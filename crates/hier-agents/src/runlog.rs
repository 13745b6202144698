//! Bookkeeping every trainer shares: the learning-rate schedule, progress bars, metric lines (JSONL) that a
//! resumed run trims back to its checkpoint, and checkpoint directories swapped in whole.

use std::path::Path;

use hier_backbone::write_atomic;

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

/// Fills a fresh `<ckpt>.tmp` with `fill`, then swaps it in for `ckpt`, so a crash at any
/// point leaves either the old or the new checkpoint whole.
pub fn swap_in_dir<E>(ckpt: &Path, fill: impl FnOnce(&Path) -> Result<(), E>) -> Result<(), E>
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
