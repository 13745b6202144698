//! A checkpoint swap ([`swap_in_dir`]) killed at any moment leaves a whole checkpoint, which
//! [`recover_swapped_dir`] puts in place: tested on the exact states each kill point leaves, and
//! by SIGKILLing a process that swaps checkpoints in a loop at staggered moments.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use hier_train::runlog::{Recovery, recover_swapped_dir, swap_in_dir};

const PARTS: usize = 6;
const PART_BYTES: usize = 256 * 1024;

/// A checkpoint of generation `n`: several files that all name `n`, so a partial or mixed copy
/// shows.
fn fill(dir: &Path, n: u64) -> std::io::Result<()> {
    for k in 0..PARTS {
        std::fs::write(
            dir.join(format!("part{k}.bin")),
            vec![(n % 251) as u8; PART_BYTES],
        )?;
    }
    std::fs::write(dir.join("state.json"), n.to_string())
}

/// The generation of the whole checkpoint in `dir` (panics on a partial or mixed one).
fn generation(dir: &Path) -> u64 {
    let n: u64 = std::fs::read_to_string(dir.join("state.json"))
        .expect("state.json")
        .parse()
        .expect("a generation");
    for k in 0..PARTS {
        let bytes = std::fs::read(dir.join(format!("part{k}.bin"))).expect("every part");
        assert_eq!(
            bytes.len(),
            PART_BYTES,
            "part {k} of generation {n} is short"
        );
        assert!(
            bytes.iter().all(|&b| b == (n % 251) as u8),
            "part {k} is of another generation"
        );
    }
    n
}

#[test]
fn each_kill_point_of_a_swap_recovers_a_whole_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = tmp.path().join("checkpoint");
    let (old, new) = (ckpt.with_extension("old"), ckpt.with_extension("tmp"));
    let reset = || {
        for d in [&ckpt, &old, &new] {
            let _ = std::fs::remove_dir_all(d);
        }
        std::fs::create_dir(&ckpt).unwrap();
        fill(&ckpt, 1).unwrap();
        std::fs::create_dir(&new).unwrap();
    };

    // Killed while filling `.tmp`: the checkpoint is untouched, the partial copy goes.
    reset();
    std::fs::write(new.join("part0.bin"), b"partial").unwrap();
    assert_eq!(recover_swapped_dir(&ckpt).unwrap(), Recovery::Intact);
    assert_eq!(generation(&ckpt), 1);

    // Killed between the renames: only `.old` (and the new `.tmp`) are left.
    reset();
    fill(&new, 2).unwrap();
    std::fs::rename(&ckpt, &old).unwrap();
    assert_eq!(recover_swapped_dir(&ckpt).unwrap(), Recovery::RestoredOld);
    assert_eq!(generation(&ckpt), 1);

    // Killed after the second rename, before `.old` was removed: the new one stands.
    reset();
    fill(&new, 2).unwrap();
    std::fs::rename(&ckpt, &old).unwrap();
    std::fs::rename(&new, &ckpt).unwrap();
    assert_eq!(recover_swapped_dir(&ckpt).unwrap(), Recovery::Intact);
    assert_eq!(generation(&ckpt), 2);

    for d in [&old, &new] {
        assert!(!d.exists(), "{} left behind", d.display());
    }
    // No checkpoint ever completed: nothing to recover, the partial first one goes.
    std::fs::remove_dir_all(&ckpt).unwrap();
    std::fs::create_dir(&new).unwrap();
    assert_eq!(recover_swapped_dir(&ckpt).unwrap(), Recovery::Intact);
    assert!(!ckpt.exists() && !new.exists());
}

const CHILD_DIR: &str = "HIER_SWAP_CHILD_DIR";

/// Not a test: the process the kill test starts (it swaps checkpoints until killed).
#[test]
#[ignore = "run by sigkill_at_staggered_moments_leaves_a_whole_checkpoint"]
fn swapping_child() {
    let dir = std::env::var(CHILD_DIR).expect("started by the kill test");
    let ckpt = Path::new(&dir).join("checkpoint");
    for n in 1.. {
        swap_in_dir(&ckpt, |d| fill(d, n)).unwrap();
    }
}

#[test]
fn sigkill_at_staggered_moments_leaves_a_whole_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let mut generations = Vec::new();
    let mut restored = 0;
    for trial in 0..16u64 {
        let dir = tmp.path().join(format!("trial{trial}"));
        std::fs::create_dir(&dir).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["swapping_child", "--exact", "--ignored", "--nocapture"])
            .env(CHILD_DIR, &dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the first complete checkpoint, then kill at a staggered moment.
        let ckpt = dir.join("checkpoint");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !ckpt.join("state.json").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(300 + 977 * trial));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        if recover_swapped_dir(&ckpt).unwrap() == Recovery::RestoredOld {
            restored += 1;
        }
        generations.push(generation(&ckpt));
        assert!(!ckpt.with_extension("old").exists() && !ckpt.with_extension("tmp").exists());
    }
    assert!(generations.iter().all(|&n| n >= 1), "{generations:?}");
    eprintln!("generations at the kills: {generations:?}; restored from .old: {restored}");
}
