//! The parts of the native ALFWorld engine built so far, against the real engine's output
//! (`tests/fixtures/alfworld/make_golden.py`: alfworld 0.4.2 + TextWorld 1.7.0 playing
//! `golden.kitchen.pddl`).

use std::path::PathBuf;

use hier_envs::alfworld::pddl::Problem;
use hier_envs::alfworld::{World, display_names};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/alfworld")
        .join(name)
}

fn golden() -> Vec<Value> {
    std::fs::read_to_string(fixture("golden.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn names_and_intro_match_the_real_engine() {
    let problem = Problem::load(&fixture("golden.kitchen.pddl")).unwrap();
    let lines = golden();
    let header = lines
        .iter()
        .find(|l| l["kind"] == "header" && l["episode"] == "kitchen")
        .expect("kitchen header");
    let want: std::collections::BTreeMap<String, String> =
        serde_json::from_value(header["names"].clone()).unwrap();
    let got = display_names(problem.entities());
    assert_eq!(got, want);

    let world = World::new(&problem, header["task"].as_str().unwrap());
    let intro = lines
        .iter()
        .find(|l| l["episode"] == "kitchen" && l["step"] == 0)
        .expect("kitchen step 0");
    assert_eq!(world.intro(), intro["obs"].as_str().unwrap());
}

#[test]
fn malformed_problem_names_file_and_line() {
    let dir = std::env::temp_dir().join(format!("hier-alfworld-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("initial_state.pddl");
    std::fs::write(&path, "(define (problem p)\n  (:init (atLocation a L))\n))").unwrap();
    let err = Problem::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("initial_state.pddl") && err.contains("line 3"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
