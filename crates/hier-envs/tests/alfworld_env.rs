//! ALFWorld behind the `Env` trait: official-data layout (`ALFWORLD_DATA`), single game files,
//! episode bookkeeping (reward, done, step limit), the expert, and errors. Uses the committed
//! kitchen world, so no assets are needed.

use std::path::{Path, PathBuf};

use hier_envs::alfworld::AlfWorld;
use hier_envs::alfworld::engine::Grammar;
use hier_envs::{Env, EnvError, Split, Task};
use serde_json::json;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/alfworld")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hier-alfworld-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `game.tw-pddl` as alfworld-generate writes it: domain, grammar with the task filled in,
/// problem, `solvable`. Only the parts of the grammar the reader looks at are real.
fn write_game(dir: &Path, solvable: bool, wording: &str, task_type: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let grammar = format!(
        "grammar :: \"\"\"{{\"task\": [{{\"rhs\": \"Your task is to: put a hot mug in cabinet.\"}}]}}\"\"\";\n\
         action PutObject {{ template :: \"{wording}\"; }}"
    );
    let game = json!({
        "pddl_domain": "(define (domain alfred))",
        "grammar": grammar,
        "pddl_problem": std::fs::read_to_string(fixture("golden.kitchen.pddl")).unwrap(),
        "solvable": solvable,
    });
    std::fs::write(dir.join("game.tw-pddl"), game.to_string()).unwrap();
    let traj = json!({
        "task_type": task_type,
        "pddl_params": {"object_target": "Mug", "parent_target": "Cabinet", "toggle_target": "",
                        "mrecep_target": "", "object_sliced": false},
    });
    std::fs::write(dir.join("traj_data.json"), traj.to_string()).unwrap();
}

/// A `json_2.1.1`-shaped folder; `name` keeps parallel tests apart.
fn official_tree(name: &str) -> PathBuf {
    let root = tmp(name);
    // One playable game, and four that alfworld's AlfredTWEnv filters out: unsolvable,
    // `movable` and `Sliced` folders, a seventh task type.
    let heat = "pick_heat_then_place_in_recep";
    for (dir, solvable, task_type) in [
        (
            "pick_heat_then_place_in_recep-Mug-None-Cabinet-1/trial_1",
            true,
            heat,
        ),
        (
            "pick_heat_then_place_in_recep-Mug-None-Cabinet-2/trial_1",
            false,
            heat,
        ),
        (
            "pick_and_place_with_movable_recep-Mug-Bowl-Cabinet-3/trial_1",
            true,
            heat,
        ),
        (
            "pick_heat_then_place_in_recep-AppleSliced-None-Cabinet-4/trial_1",
            true,
            heat,
        ),
        ("other-5/trial_1", true, "pick_and_place_with_movable_recep"),
    ] {
        write_game(
            &root.join("valid_seen").join(dir),
            solvable,
            "move {o} to {r}",
            task_type,
        );
    }
    std::fs::create_dir_all(root.join("valid_unseen")).unwrap();
    root
}

#[test]
fn official_layout_is_read_and_filtered_like_alfworld() {
    let root = official_tree("official");
    let mut env = AlfWorld::official(&root).unwrap();
    assert_eq!(env.label(), "ALFWorld");
    let tasks = env.tasks(Split::Id).unwrap();
    assert_eq!(
        tasks,
        vec![Task::new(
            "valid_seen/pick_heat_then_place_in_recep-Mug-None-Cabinet-1/trial_1",
            0
        )]
    );
    assert!(env.tasks(Split::Ood).unwrap().is_empty());
    let err = env.tasks(Split::Train).unwrap_err().to_string();
    assert!(err.contains("train") && err.contains("json_2.1.1"), "{err}");

    // The file's grammar (0.4.2 wording) decides the text; the kitchen golden's intro.
    let reset = env.reset(&tasks[0]).unwrap();
    assert_eq!(reset.description, "put a hot mug in cabinet");
    assert!(
        reset
            .observation
            .starts_with("-= Welcome to TextWorld, ALFRED! =-")
    );
    assert_eq!(env.engine().unwrap().grammar(), Grammar::V04);

    // The expert (from traj_data.json) wins; reward is the score change; done ends it.
    let gold = env.gold_actions().unwrap().unwrap();
    assert!(
        gold.iter().any(|a| a.starts_with("move mug 1 to cabinet")),
        "{gold:?}"
    );
    let mut last = None;
    for (i, a) in gold.iter().enumerate() {
        let s = env.step(a).unwrap();
        assert!(!s.info.invalid, "{a}");
        assert_eq!(s.done, i + 1 == gold.len());
        last = Some(s);
    }
    let last = last.unwrap();
    assert_eq!((last.reward, last.score), (1.0, 1.0));
    assert!(matches!(env.step("look"), Err(EnvError::State(_))));
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn step_limit_truncates_and_invalid_commands_are_flagged() {
    let root = official_tree("limit");
    let mut env = AlfWorld::official(&root)
        .unwrap()
        .with_step_limit(3)
        .with_grammar(Grammar::V03);
    let task = env.tasks(Split::Id).unwrap().remove(0);
    env.reset(&task).unwrap();
    let s = env.step("jump").unwrap();
    assert_eq!(s.observation, "Nothing happens.");
    assert!(s.info.invalid && !s.done);
    // Forced 0.3 grammar: `help` does not exist, arrival names the location.
    assert_eq!(env.step("help").unwrap().observation, "Nothing happens.");
    let s = env.step("go to countertop 1").unwrap();
    assert!(
        s.observation
            .starts_with("You arrive at loc 6. On the countertop 1")
    );
    assert!(s.done && s.info.truncated && s.score == 0.0);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_pddl_file_with_its_sidecar_is_a_game() {
    let dir = tmp("file");
    let pddl = dir.join("kitchen.pddl");
    std::fs::copy(fixture("golden.kitchen.pddl"), &pddl).unwrap();
    // Without a sidecar: playable, but no expert.
    let mut env = AlfWorld::from_file(&pddl).unwrap();
    let task = env.tasks(Split::Id).unwrap().remove(0);
    let reset = env.reset(&task).unwrap();
    assert!(
        reset
            .observation
            .ends_with("Your task is to: (no task text).")
    );
    assert_eq!(env.gold_actions().unwrap(), None);
    let valid = env.valid_actions().unwrap().unwrap();
    assert!(valid.contains(&"go to microwave 1".to_owned()), "{valid:?}");

    std::fs::write(
        dir.join("kitchen.json"),
        json!({"task": "put a hot mug in cabinet", "spec": {
            "task_type": "pick_heat_then_place_in_recep", "object_target": "Mug",
            "parent_target": "Cabinet", "toggle_target": ""}})
        .to_string(),
    )
    .unwrap();
    let mut env = AlfWorld::from_file(&pddl).unwrap();
    env.reset(&task).unwrap();
    let gold = env.gold_actions().unwrap().unwrap();
    // Default grammar of a bare problem is 0.3: the put is `put … in/on …`.
    assert!(
        gold.last().unwrap().starts_with("put mug 1 in/on cabinet"),
        "{gold:?}"
    );
    // 0.4's wording is accepted as an alias.
    let mut won = false;
    for a in &gold {
        let a = match a.strip_prefix("put ").and_then(|r| r.split_once(" in/on ")) {
            Some((x, y)) => format!("move {x} to {y}"),
            None => a.clone(),
        };
        won = env.step(&a).unwrap().score == 1.0;
    }
    assert!(won);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_game_files_name_file_and_field() {
    let dir = tmp("bad");
    let f = dir.join("game.tw-pddl");
    std::fs::write(&f, "{\"grammar\": \"x\"}").unwrap();
    let err = AlfWorld::from_file(&f).unwrap_err().to_string();
    assert!(
        err.contains("game.tw-pddl") && err.contains("pddl_problem"),
        "{err}"
    );
    let p = dir.join("broken.pddl");
    std::fs::write(
        &p,
        "(define (problem p) (:domain alfred)\n (:objects a - agent L - location)\n \
         (:init (atLocation a L) (flies a))\n (:goal (and)))",
    )
    .unwrap();
    let err = AlfWorld::from_file(&p).unwrap_err().to_string();
    assert!(
        err.contains("broken.pddl") && err.contains("flies"),
        "{err}"
    );
    let err = AlfWorld::official(dir.join("nowhere"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("nowhere"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
