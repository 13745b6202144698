//! The process's resident memory, and the limit a run holds itself to so that it stops with a
//! clear error instead of being killed by the kernel's OOM killer: between training steps after
//! checkpointing ([`check_limit`]), within one by ending the process ([`Watchdog`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Resident set size of this process in MiB (`VmRSS` of `/proc/self/status`); `None` where
/// the platform does not report it.
pub fn resident_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    kib_field(&status, "VmRSS:").map(|kib| kib / 1024.0)
}

/// Peak resident memory of this process so far in MiB (`VmHWM`); `None` where not reported.
pub fn peak_resident_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    kib_field(&status, "VmHWM:").map(|kib| kib / 1024.0)
}

/// Physical memory in MiB (`MemTotal` of `/proc/meminfo`); `None` where not reported.
pub fn physical_mib() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    kib_field(&info, "MemTotal:").map(|kib| kib / 1024.0)
}

/// The value of a `Name:   1234 kB` line.
fn kib_field(text: &str, name: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// The memory this process may use in MiB: physical memory, or the container's cgroup (v2)
/// limit when that is lower — inside a container `/proc/meminfo` shows the host's memory.
pub fn available_mib() -> Option<f64> {
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|t| t.trim().parse::<f64>().ok())
        .map(|bytes| bytes / (1024.0 * 1024.0));
    match (physical_mib(), cgroup) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

/// The default limit: 90 % of [`available_mib`], so the run stops itself with room to spare
/// before the kernel would kill it; `None` where neither is reported.
pub fn default_limit_mib() -> Option<u64> {
    available_mib().map(|m| (m * 0.9) as u64)
}

/// `Err` naming `what()` when resident memory exceeds `limit_mib`; without a limit, nothing is
/// read (this runs after every training step).
pub fn check_limit(
    limit_mib: Option<u64>,
    what: impl FnOnce() -> String,
) -> crate::error::Result<()> {
    let Some(limit) = limit_mib else {
        return Ok(());
    };
    let Some(rss) = resident_mib() else {
        return Ok(());
    };
    if rss > limit as f64 {
        return Err(crate::error::Error::MemoryLimit {
            what: what(),
            resident_mib: rss,
            limit_mib: limit,
        });
    }
    Ok(())
}

/// The exit status of a process that [`Watchdog`] ends: `EX_TEMPFAIL` of `sysexits.h` (the
/// command may be run again: it resumes).
pub const WATCHDOG_EXIT_CODE: i32 = 75;

/// How far past the run's limit a [`Watchdog`] lets a step go (× the limit): a run that crosses
/// the limit slowly stops at the end of its step instead, where a trainer checkpoints first —
/// the watchdog's exit loses everything since the last checkpoint (written every
/// `checkpoint_every` steps) or journal batch.
pub const WATCHDOG_MARGIN: f64 = 1.05;

/// How often a [`Watchdog`] reads resident memory: reading `/proc/self/status` costs
/// microseconds, and memory grows by at most a few hundred MiB in this time on a CPU.
pub const WATCHDOG_PERIOD: Duration = Duration::from_millis(200);

/// Reads resident memory on a thread of its own while work that cannot stop in the middle runs
/// (a stage), and ends the process with [`WATCHDOG_EXIT_CODE`] and a message naming the work
/// once it exceeds the limit by more than [`WATCHDOG_MARGIN`].
///
/// Why a thread: [`check_limit`] runs between training steps, and one step can outgrow the
/// machine on its own — GRPO's whole update is one step; one of 16 rows × 1,024 tokens was
/// killed by the kernel's OOM killer at 23 GB with nothing in the run's log. Ending the process
/// here loses what that kill loses, the work since the last checkpoint or journal batch (both
/// are written atomically, so the last whole one stands and the command resumes from it), but
/// says why and does it near the run's limit rather than at the machine's. Disarmed when
/// dropped.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching against `limit_mib` × [`WATCHDOG_MARGIN`], polling every `period`;
    /// `None` (nothing watched) without a limit or where resident memory is not reported.
    pub fn arm(limit_mib: Option<u64>, what: impl Into<String>, period: Duration) -> Option<Self> {
        let limit = limit_mib?;
        resident_mib()?;
        let threshold = limit as f64 * WATCHDOG_MARGIN;
        let what = what.into();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("memory-watchdog".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    if let Some(rss) = resident_mib().filter(|&r| r > threshold) {
                        let message = format!(
                            "error: {what}: resident memory {rss:.0} MiB exceeds the limit of \
                             {limit} MiB by more than {margin:.0} % in the middle of a step; the \
                             process exits now (status {WATCHDOG_EXIT_CODE}) and loses the work \
                             since its last checkpoint or journal batch — run the same command \
                             again to resume, after lowering the memory a step needs (e.g. a \
                             smaller micro_batch) or raising --max-rss-mib",
                            margin = (WATCHDOG_MARGIN - 1.0) * 100.0
                        );
                        tracing::error!("{message}");
                        eprintln!("{message}");
                        std::process::exit(WATCHDOG_EXIT_CODE);
                    }
                    std::thread::park_timeout(period);
                }
            })
            .ok()?;
        Some(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_fields_and_enforces_a_limit() {
        let status = "Name:\tx\nVmPeak:\t  2048 kB\nVmRSS:\t    1536 kB\n";
        assert_eq!(kib_field(status, "VmRSS:"), Some(1536.0));
        assert_eq!(kib_field(status, "VmSwap:"), None);
        if let Some(rss) = resident_mib() {
            // This test process holds at least a megabyte and far less than a terabyte.
            assert!(rss > 1.0 && rss < 1e6, "{rss}");
            let what = || "stage x".to_owned();
            let err = check_limit(Some(1), what).unwrap_err().to_string();
            assert!(err.contains("stage x") && err.contains("1 MiB"), "{err}");
            check_limit(Some(u64::MAX / 2), what).unwrap();
        }
        check_limit(None, || "stage x".to_owned()).unwrap();
    }

    #[test]
    fn a_watchdog_within_its_limit_lets_the_work_finish_and_stops_when_dropped() {
        assert!(Watchdog::arm(None, "stage x", WATCHDOG_PERIOD).is_none());
        if resident_mib().is_some() {
            let dog = Watchdog::arm(Some(u64::MAX / 2), "stage x", WATCHDOG_PERIOD)
                .expect("armed where memory is reported");
            let started = std::time::Instant::now();
            drop(dog);
            // Dropping wakes the thread rather than waiting out its period.
            assert!(started.elapsed() < WATCHDOG_PERIOD * 5);
        }
    }
}
