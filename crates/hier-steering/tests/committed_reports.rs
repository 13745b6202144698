//! The committed steering results (`docs/results/steering-*`) are written again from what their
//! runs recorded (`cargo xtask report`): the rows are derived anew from the per-episode results,
//! and the tables must come out byte for byte as committed — the run wrote them from its stages,
//! so a field the JSON loses or a rounding the round trip changes shows here. A directory whose
//! JSON or profile does not match is refused with the file named.

use std::path::{Path, PathBuf};

use hier_train::stages::RESOLVED_PROFILE;

fn committed(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results")
        .join(name)
}

/// Copies a committed run's recorded JSON and resolved profile (nothing else) into a fresh
/// directory.
fn copy_recorded(from: &Path, what: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in [format!("{what}.json"), RESOLVED_PROFILE.to_owned()] {
        std::fs::copy(from.join(&f), dir.path().join(&f)).unwrap();
    }
    dir
}

/// Writes the committed run `name` again from its recorded `<what>.json` by `rewrite`, and
/// checks that its tables and JSON come out as committed.
fn assert_rewritten_as_committed(
    name: &str,
    what: &str,
    rewrite: fn(&Path) -> hier_steering::error::Result<()>,
) {
    let from = committed(name);
    let dir = copy_recorded(&from, what);
    rewrite(dir.path()).unwrap();
    for ext in ["md", "csv", "json"] {
        let file = format!("{what}.{ext}");
        let a = std::fs::read_to_string(from.join(&file)).unwrap();
        let b = std::fs::read_to_string(dir.path().join(&file)).unwrap();
        assert!(
            a == b,
            "{file} written again differs from {}",
            from.join(&file).display()
        );
    }
}

#[test]
fn the_committed_steering_report_is_written_again_byte_for_byte() {
    // (`steering-small` ran a profile of an earlier schema — `[backbone.train] grad_clip`, now
    // under `optim` — which this version refuses to read, naming the field.)
    assert_rewritten_as_committed(
        "steering-smollm",
        "steering",
        hier_steering::report::rewrite,
    );
}

#[test]
fn the_committed_pipeline_report_is_written_again_byte_for_byte() {
    assert_rewritten_as_committed(
        "steering-mas-smollm",
        "steering-mas",
        hier_steering::mas_report::rewrite,
    );
}

#[test]
fn a_json_recorded_by_another_profile_is_refused_naming_both() {
    let dir = copy_recorded(&committed("steering-smollm"), "steering");
    let json = dir.path().join("steering.json");
    let text = std::fs::read_to_string(&json).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["profile"] = "smoke".into();
    std::fs::write(&json, v.to_string()).unwrap();
    let e = hier_steering::report::rewrite(dir.path())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("steering.json") && e.contains("`smoke`") && e.contains("`small`"),
        "{e}"
    );
    assert!(!dir.path().join("steering.md").exists(), "nothing written");
}

#[test]
fn a_directory_without_its_json_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        committed("steering-smollm").join(RESOLVED_PROFILE),
        dir.path().join(RESOLVED_PROFILE),
    )
    .unwrap();
    let e = hier_steering::report::rewrite(dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("steering.json"), "{e}");
}
