//! The memory watchdog ends a process whose work outgrows the run's limit in the middle of a
//! step, with its exit status and a message naming the work — checked on a child process that
//! allocates until it is stopped.

use std::process::Command;

use hier_train::memory::{WATCHDOG_EXIT_CODE, WATCHDOG_PERIOD, Watchdog, resident_mib};

const CHILD: &str = "HIER_WATCHDOG_CHILD";

/// Not a test: the process the watchdog test starts (it allocates until the watchdog ends it,
/// or up to 4 GiB, and then exits with status 0, which fails the test).
#[test]
#[ignore = "run by a_process_past_its_limit_exits_with_the_watchdogs_status_and_message"]
fn allocating_child() {
    std::env::var(CHILD).expect("started by the watchdog test");
    let limit = resident_mib().expect("memory is reported") as u64 + 64;
    let _dog = Watchdog::arm(Some(limit), "stage allocating-child", WATCHDOG_PERIOD);
    let mut held: Vec<Vec<u8>> = Vec::new();
    for _ in 0..256 {
        // 16 MiB, written so that the pages are resident.
        held.push(vec![1u8; 16 << 20]);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::hint::black_box(&held);
}

#[test]
fn a_process_past_its_limit_exits_with_the_watchdogs_status_and_message() {
    if resident_mib().is_none() {
        return; // No `/proc/self/status`: the watchdog does not arm where memory is not reported.
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["allocating_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(WATCHDOG_EXIT_CODE), "{stderr}");
    assert!(
        stderr.contains("stage allocating-child: resident memory")
            && stderr.contains("exceeds the limit of")
            && stderr.contains("by more than 5 %")
            && stderr.contains("run the same command again to resume"),
        "{stderr}"
    );
}
