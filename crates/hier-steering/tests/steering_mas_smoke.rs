//! `reproduce steering-mas --profile smoke` runs every stage, writes every row and its outputs,
//! and resumes to the same tables. Alone in its test binary (as `steering_smoke.rs`): it
//! compares tables byte for byte.

mod common;

use std::path::{Path, PathBuf};

use hier_steering::mas_pipeline::{MasProfile, profile_path, run};
use hier_train::stages::RunConfig;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_smoke_profile_writes_every_row_and_resumes() {
    let p = MasProfile::from_file(&profile_path(&root(), "smoke")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let device = hier_backbone::burn::tensor::Device::flex().autodiff();
    let cfg = |out: PathBuf, stop: Option<usize>| RunConfig {
        out,
        device: device.clone(),
        progress: false,
        stop_after_stages: stop,
        memory_limit_mib: None,
        max_nonfinite: 0,
        prefix_cache_mib: hier_train::policy::DEFAULT_PREFIX_CACHE_MIB,
        report_only: false,
    };
    let a = tmp.path().join("a");
    let report = run(&p, &cfg(a.clone(), None)).unwrap();
    assert!(report.complete && report.stages.iter().all(|s| !s.cached));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("steering-mas.json")).unwrap())
            .unwrap();
    let rows = json["rows"].as_array().unwrap();
    let episodes = p.eval.tasks * p.eval.seeds.len();
    let has = |m: &str, tau: Option<f64>| {
        rows.iter()
            .any(|r| r["method"] == m && r["tau"].as_f64() == tau && r["episodes"] == episodes)
    };
    assert!(has("none", None) && has("forced", None));
    assert!(has("zero-shot", Some(p.steer.tau)));
    for t in &p.eval.taus {
        assert!(has("rl", Some(*t)), "τ = {t}");
    }
    // Every steered row ran the steering agent at handoffs; forced ran its slow path at all.
    for e in json["evaluations"].as_array().unwrap() {
        if e["method"] != "none" {
            assert!(e["handoffs"].as_u64().unwrap() > 0, "{}", e["method"]);
        }
        if e["method"] == "forced" {
            assert_eq!(e["handoffs"], e["slow_path_runs"]);
        }
    }
    for s in report.stages.iter().filter(|s| s.name.starts_with("eval-")) {
        let dir = a.join(&s.dir);
        assert!(
            dir.join("prefill.json").exists() && dir.join("traces.jsonl").exists(),
            "{}",
            s.name
        );
    }
    let md = std::fs::read_to_string(a.join("steering-mas.md")).unwrap();
    assert!(md.contains("−7.14") && md.contains("τ sweep") && md.contains("claims"));
    assert_eq!(
        std::fs::read_to_string(a.join("steering-mas.csv"))
            .unwrap()
            .lines()
            .count(),
        rows.len() + 1
    );
    let figs = a.join("figures");
    if hier_train::charts::ensure_font().is_ok() {
        for f in ["f1", "cost", "tau_sweep"] {
            let png = std::fs::read(figs.join(format!("{f}.png"))).unwrap();
            assert!(png.starts_with(b"\x89PNG") && png.len() > 2000, "{f}.png");
        }
    } else {
        assert!(figs.join("NO_FONT.txt").exists());
    }
    // Stopped after 3 stages, then resumed: the same tables; a third run reuses everything.
    let b = tmp.path().join("b");
    assert!(!run(&p, &cfg(b.clone(), Some(3))).unwrap().complete);
    let report = run(&p, &cfg(b.clone(), None)).unwrap();
    assert_eq!(report.stages.iter().filter(|s| s.cached).count(), 3);
    let csv = |d: &Path| std::fs::read_to_string(d.join("steering-mas.csv")).unwrap();
    assert_eq!(csv(&a), csv(&b));
    let again = run(&p, &cfg(b.clone(), None)).unwrap();
    assert!(again.stages.iter().all(|s| s.cached));
    assert_eq!(csv(&a), csv(&b));
    // The steering adapter trained again under the same settings (here: one weight's lowest
    // mantissa bit flipped): the done evaluation that played the first one is refused, by name.
    common::flip_a_steer_rl_weight(&again, &b);
    let err = run(&p, &cfg(b.clone(), None)).unwrap_err().to_string();
    assert!(
        err.contains("eval-rl") && err.contains("steer-rl-"),
        "{err}"
    );
}
