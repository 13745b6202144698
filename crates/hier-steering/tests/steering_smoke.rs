//! `reproduce steering --profile smoke` runs every stage, writes its outputs, and resumes to
//! the same tables. Alone in its test binary: the CPU backend's parallel reductions may differ
//! in the last bits when other tests share its thread pool, and this test compares tables
//! byte for byte.

mod common;

use std::path::{Path, PathBuf};

use hier_steering::pipeline::{SteeringProfile, profile_path, run};
use hier_train::stages::RunConfig;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_smoke_profile_runs_every_stage_writes_its_outputs_and_resumes() {
    let p = SteeringProfile::from_file(&profile_path(&root(), "smoke")).unwrap();
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
        serde_json::from_str(&std::fs::read_to_string(a.join("steering.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let has = |m: &str, x: &str, tau: Option<f64>| {
        rows.iter().any(|r| {
            r["method"] == m && r["executor"] == x && r["tau"].as_f64() == tau && r["episodes"] == 2
        })
    };
    for m in ["none", "planning", "verification"] {
        assert!(has(m, "main", None), "{m}");
    }
    for m in ["zero-shot", "filtered-bc", "rl"] {
        assert!(has(m, "main", Some(p.steer.tau)), "{m}");
    }
    for t in &p.eval.taus {
        assert!(has("rl", "main", Some(*t)), "τ = {t}");
    }
    for x in ["transfer", "smaller"] {
        assert!(
            has("none", x, None) && has("rl", x, Some(p.steer.tau)),
            "{x}"
        );
    }
    // The smaller executor has its own pre-trained backbone and its own SFT on it.
    let stages: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    for s in [
        "backbone-executor-smaller",
        "demos-smaller",
        "executor-smaller",
    ] {
        assert!(stages.contains(&s), "{s}: {stages:?}");
    }
    // Every evaluation and the training stage say what the executor's prompts cost.
    for s in report
        .stages
        .iter()
        .filter(|s| s.name.starts_with("eval-") || s.name == "steer-rl")
    {
        let cost: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(a.join(&s.dir).join("prefill.json")).unwrap(),
        )
        .unwrap();
        let (prompt, prefilled) = (
            cost["prompt_tokens"].as_u64().unwrap(),
            cost["prefilled_tokens"].as_u64().unwrap(),
        );
        assert!(prompt > 0 && prefilled <= prompt, "{}: {cost}", s.name);
    }
    let md = std::fs::read_to_string(a.join("steering.md")).unwrap();
    assert!(md.contains("+6.66") && md.contains("τ sweep") && md.contains("Transfer"));
    assert_eq!(
        std::fs::read_to_string(a.join("steering.csv"))
            .unwrap()
            .lines()
            .count(),
        rows.len() + 1
    );
    // With a usable font every figure is a real PNG; without one, NO_FONT.txt says why and
    // no figure pretends to be there.
    let figs = a.join("figures");
    let names = ["f1", "cost", "transfer", "tau_sweep"];
    if hier_train::charts::ensure_font().is_ok() {
        assert!(!figs.join("NO_FONT.txt").exists());
        for f in names {
            let png = std::fs::read(figs.join(format!("{f}.png"))).unwrap();
            assert!(png.starts_with(b"\x89PNG") && png.len() > 2000, "{f}.png");
        }
    } else {
        let why = std::fs::read_to_string(figs.join("NO_FONT.txt")).unwrap();
        assert!(why.contains("font"), "{why}");
        assert!(
            names
                .iter()
                .all(|f| !figs.join(format!("{f}.png")).exists())
        );
    }
    // Stopped after 4 stages, then resumed: the same tables; a third run reuses everything.
    let b = tmp.path().join("b");
    assert!(!run(&p, &cfg(b.clone(), Some(4))).unwrap().complete);
    let report = run(&p, &cfg(b.clone(), None)).unwrap();
    assert_eq!(report.stages.iter().filter(|s| s.cached).count(), 4);
    let csv = |d: &Path| std::fs::read_to_string(d.join("steering.csv")).unwrap();
    assert_eq!(csv(&a), csv(&b));
    let again = run(&p, &cfg(b.clone(), None)).unwrap();
    assert!(again.stages.iter().all(|s| s.cached));
    assert_eq!(csv(&a), csv(&b));
    // The steering adapter trained again under the same settings (here: one weight's lowest
    // mantissa bit flipped): the done evaluations that played the first one are refused, by
    // name, instead of being reported as the second one's.
    common::flip_a_steer_rl_weight(&again, &b);
    let err = run(&p, &cfg(b.clone(), None)).unwrap_err().to_string();
    assert!(
        err.contains("eval-rl-main") && err.contains("steer-rl-"),
        "{err}"
    );
}
