//! `reproduce table1 --profile smoke` end to end (every stage, every environment, every
//! method), interrupted after a few stages and resumed: the stages done before the
//! interruption are reused, not re-run, and the run completes with its tables.

use std::path::PathBuf;

use hier_multi2::table1::{Profile, RunConfig, run};

#[test]
fn smoke_profile_runs_every_stage_and_resumes_after_an_interruption() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let profile = Profile::from_file(&root.join("configs/table1/smoke.toml")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let device = hier_backbone::burn::tensor::Device::flex().autodiff();
    let mut cfg = RunConfig {
        out: out.path().to_owned(),
        device,
        progress: false,
        stop_after_stages: Some(4),
        memory_limit_mib: None,
        max_nonfinite: 0,
        prefix_cache_mib: hier_train::policy::DEFAULT_PREFIX_CACHE_MIB,
        report_only: false,
    };
    let first = run(&profile, &cfg).unwrap();
    assert!(!first.complete, "the run must stop after 4 stages");
    let ran: Vec<String> = first
        .stages
        .iter()
        .filter(|s| !s.cached)
        .map(|s| s.dir.clone())
        .collect();
    assert_eq!(ran.len(), 4, "{:?}", first.stages);
    assert!(
        !out.path().join("table1.md").exists(),
        "no table before the run completes"
    );

    cfg.stop_after_stages = None;
    let second = run(&profile, &cfg).unwrap();
    assert!(second.complete);
    for dir in &ran {
        let rec = second.stages.iter().find(|s| &s.dir == dir).unwrap();
        assert!(
            rec.cached,
            "stage {dir} was run again after the interruption"
        );
    }
    assert!(
        second.stages.iter().any(|s| !s.cached),
        "the rest must run now"
    );
    // Every environment × method has a trained, evaluated result.
    for env in &profile.envs {
        for m in &profile.methods {
            let name = format!("eval-{m}-{env}");
            assert!(
                second.stages.iter().any(|s| s.name == name),
                "missing {name}"
            );
        }
    }
    let md = std::fs::read_to_string(out.path().join("table1.md")).unwrap();
    assert!(
        md.contains("| Multi² |") && md.contains("| Flat SFT |") && md.contains("(paper)"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("table1.json")).unwrap())
            .unwrap();
    let cells = json["cells"].as_array().unwrap();
    // TextCraft has one split, ScienceWorld and ALFWorld two: 5 columns × 7 methods.
    assert_eq!(profile.methods.len(), 7);
    assert_eq!(cells.len(), 35);
    // Each TextCraft cell (one split, one evaluation seed) is what its evaluation's episode
    // records say, recomputed here from `episodes.jsonl`.
    for m in &profile.methods {
        let stage = format!("eval-{}-textcraft", m.name());
        let rec = second.stages.iter().find(|s| s.name == stage).unwrap();
        let episodes: Vec<serde_json::Value> =
            std::fs::read_to_string(out.path().join(&rec.dir).join("episodes.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        let n = episodes.len() as f64;
        let success = 100.0 * episodes.iter().filter(|e| e["success"] == true).count() as f64 / n;
        let tokens = episodes
            .iter()
            .map(|e| e["tokens"].as_f64().unwrap())
            .sum::<f64>()
            / n;
        let cell = cells
            .iter()
            .find(|c| c["method"] == m.name() && c["env"] == "textcraft")
            .unwrap();
        let s = &cell["summary"];
        assert_eq!(s["episodes"].as_u64().unwrap() as f64, n, "{cell}");
        assert!(
            (s["success"]["mean"].as_f64().unwrap() - success).abs() < 1e-9,
            "{cell}"
        );
        assert!(
            (s["mean_tokens"].as_f64().unwrap() - tokens).abs() < 1e-9,
            "{cell}"
        );
        assert!(tokens > 0.0, "{cell}");
    }
    let csv = std::fs::read_to_string(out.path().join("table1.csv")).unwrap();
    assert_eq!(csv.lines().count(), 36);
    // Reflexion reports pass@1 beside pass@k; the prompted agents spent tokens on prompts.
    let reflexion = cells.iter().find(|c| c["method"] == "reflexion").unwrap();
    assert!(
        reflexion["summary"]["pass1"].as_f64().is_some(),
        "{reflexion}"
    );
    // Every ablation variant, trained with each seed, on TextCraft's one split.
    let ab = profile.ablations.as_ref().unwrap();
    let rows = json["ablations"].as_array().unwrap();
    assert_eq!(rows.len(), ab.variants.len());
    for r in rows {
        assert_eq!(r["seeds"].as_array().unwrap().len(), ab.seeds.len(), "{r}");
    }
    for seed in &ab.seeds {
        for v in &ab.variants {
            let name = format!("ablation-{v}-s{seed}-textcraft");
            assert!(
                second.stages.iter().any(|s| s.name == name),
                "missing {name}"
            );
        }
    }
    // Seed 1 trains its own adapters; seed 0 shares the main table's.
    let mut sys1_dirs: Vec<&str> = second
        .stages
        .iter()
        .filter(|s| s.name == "sft-sys1-textcraft")
        .map(|s| s.dir.as_str())
        .collect();
    sys1_dirs.sort();
    sys1_dirs.dedup();
    assert_eq!(sys1_dirs.len(), ab.seeds.len(), "{sys1_dirs:?}");
    assert!(
        md.contains("## Ablations") && md.contains("| paradigm-swap |"),
        "{md}"
    );
    // …and each variant paired with Multi² on the same training seeds, tasks and evaluation
    // seeds: every variant played them all.
    for v in ab.variants.iter().filter(|v| v.name() != "multi2") {
        let row = format!("| ID | {v} | {:?} | ", ab.seeds);
        assert!(md.contains(&row), "no row {row}: {md}");
        assert!(!md.contains(&format!("{row}– |")), "{v} did not pair: {md}");
    }
    // The learning curve has one point per online iteration, iteration 0 first.
    let curve = &json["learning_curves"]["textcraft"];
    assert_eq!(curve.as_array().unwrap().len(), profile.online.iterations);
    assert_eq!(curve[0]["iteration"], 0);
    // A third run reuses everything.
    let third = run(&profile, &cfg).unwrap();
    assert!(third.stages.iter().all(|s| s.cached));
    // Each stage's own run time survives in its DONE stamp, and the report reads it from there.
    for s in &third.stages {
        let stamp: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join(&s.dir).join("DONE")).unwrap(),
        )
        .unwrap();
        assert_eq!(s.ran_seconds, stamp["seconds"].as_f64(), "{}", s.name);
        assert!(s.ran_seconds.is_some_and(|t| t > 0.0), "{}", s.name);
    }
    // The reused training stages are still in the third run's record.
    assert!(third.stages.iter().any(|s| s.name == "online-textcraft"));

    // Evaluations stand without the training stages that made them (a later session restores
    // only the committed evaluation stages and the online curves): every training stage is
    // removed — the online stages keep their curve — and a fourth run trains nothing and
    // writes the same table and learning curve.
    let stages = out.path().join("stages");
    let training = ["sft-", "offline-", "online-", "grpo-", "glider-online-"];
    let mut removed = 0;
    for entry in std::fs::read_dir(&stages).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if !training.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let curve = std::fs::read(dir.join("curve.jsonl")).ok();
        std::fs::remove_dir_all(&dir).unwrap();
        if let Some(c) = curve {
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("curve.jsonl"), c).unwrap();
        }
        removed += 1;
    }
    assert!(removed >= 10, "{removed} training stages");
    let fourth = run(&profile, &cfg).unwrap();
    assert!(fourth.complete && fourth.stages.iter().all(|s| s.cached));
    assert!(
        !fourth
            .stages
            .iter()
            .any(|s| training.iter().any(|p| s.name.starts_with(p))),
        "{:?}",
        fourth.stages
    );
    for entry in std::fs::read_dir(&stages).unwrap() {
        let dir = entry.unwrap().path();
        assert!(
            dir.join("DONE").exists() || !dir.join("adapter").exists(),
            "{} was trained again",
            dir.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(out.path().join("table1.csv")).unwrap(),
        csv
    );
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("table1.json")).unwrap())
            .unwrap();
    assert_eq!(again["learning_curves"], json["learning_curves"]);
    assert_eq!(again["claims"], json["claims"]);

    // Every method and environment has its sample episodes, linked from the table.
    for env in &profile.envs {
        for m in &profile.methods {
            let name = format!("{env}-{}.md", m.name());
            let traces = std::fs::read_to_string(out.path().join("traces").join(&name))
                .unwrap_or_else(|e| panic!("traces/{name}: {e}"));
            assert!(traces.contains("**Step 1**"), "{name}: {traces}");
            assert!(md.contains(&format!("(traces/{name})")), "{name}");
        }
    }

    // A report-only run with one evaluation gone (ReAct's on TextCraft) plays and trains
    // nothing — not that evaluation either — and reports the other cells, that one as not done.
    for entry in std::fs::read_dir(&stages).unwrap() {
        let dir = entry.unwrap().path();
        if (dir.file_name().unwrap().to_string_lossy()).starts_with("eval-react-textcraft-") {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    let before = std::fs::read_dir(&stages).unwrap().count();
    cfg.report_only = true;
    let fifth = run(&profile, &cfg).unwrap();
    assert!(fifth.stages.iter().all(|s| s.cached), "{:?}", fifth.stages);
    assert_eq!(std::fs::read_dir(&stages).unwrap().count(), before);
    let only: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("table1.json")).unwrap())
            .unwrap();
    assert_eq!(only["cells"].as_array().unwrap().len(), 34);
    let md = std::fs::read_to_string(out.path().join("table1.md")).unwrap();
    assert!(
        md.contains("Report only") && md.contains("not done"),
        "{md}"
    );
}
