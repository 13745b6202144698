//! The process's resident memory, and the limit a run holds itself to so that it stops with a
//! clear error — after checkpointing — instead of being killed by the kernel's OOM killer.

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
}
