//! `cargo xtask`'s argument handling and exit codes, on the built binary: usage errors exit 2
//! (clap), failures exit 1 with a message naming the bad argument, file or key, and a run past
//! its memory limit stops before its first stage.

use std::path::Path;
use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("the xtask binary runs")
}

/// Exit code and stderr; panics on success.
fn failure(args: &[&str]) -> (i32, String) {
    let out = xtask(args);
    assert!(
        !out.status.success(),
        "`xtask {}` succeeded",
        args.join(" ")
    );
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn usage_errors_exit_2_and_name_the_argument() {
    let (code, err) = failure(&["reproduce", "table1", "--no-such-flag"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
    let (code, err) = failure(&["no-such-command"]);
    assert_eq!(code, 2, "{err}");
    let (code, err) = failure(&["reproduce", "table1", "--max-rss-mib", "lots"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-rss-mib"), "{err}");
    let (code, err) = failure(&["reproduce", "table1", "--max-nonfinite", "many"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-nonfinite"), "{err}");
}

#[test]
fn bad_targets_profiles_and_names_exit_1_with_what_is_wrong() {
    let (code, err) = failure(&["reproduce", "table2", "--profile", "smoke"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown target `table2`"), "{err}");

    let (code, err) = failure(&[
        "reproduce",
        "steering",
        "--profile",
        "smoke",
        "--envs",
        "textcraft",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--envs, --methods and --no-ablations apply to table1"),
        "{err}"
    );
    let (code, err) = failure(&[
        "reproduce",
        "steering-mas",
        "--profile",
        "smoke",
        "--no-ablations",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("apply to table1"), "{err}");

    let (code, err) = failure(&["reproduce", "table1", "--profile", "no-such-profile"]);
    assert_eq!(code, 1);
    assert!(err.contains("no-such-profile.toml"), "{err}");

    let (code, err) = failure(&[
        "reproduce",
        "table1",
        "--profile",
        "smoke",
        "--envs",
        "webshop",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("webshop"), "{err}");
    let (code, err) = failure(&[
        "reproduce",
        "table1",
        "--profile",
        "smoke",
        "--methods",
        "multi3",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("multi3"), "{err}");
}

#[test]
fn a_profile_with_an_unknown_key_is_refused_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let smoke = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/table1/smoke.toml");
    let text = std::fs::read_to_string(smoke).unwrap();
    let bad = dir.path().join("typo.toml");
    std::fs::write(
        &bad,
        text.replace("[sft]\n", "[sft]\nlearning_rate = 1e-3\n"),
    )
    .unwrap();
    let (code, err) = failure(&["reproduce", "table1", "--profile", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("typo.toml") && err.contains("learning_rate"),
        "{err}"
    );
}

#[test]
fn a_run_over_its_memory_limit_stops_before_its_first_stage() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, err) = failure(&[
        "reproduce",
        "table1",
        "--profile",
        "smoke",
        "--max-rss-mib",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("exceeds the limit of 1 MiB"), "{err}");
    assert!(
        !out.join("stages").exists() || std::fs::read_dir(out.join("stages")).unwrap().count() == 0,
        "no stage ran"
    );
}
