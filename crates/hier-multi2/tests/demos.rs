//! Datasets from expert demonstrations, for all three environments: deterministic by seed
//! (byte-identical files), JSONL and postcard agree, segments are meaningful, and noisy
//! ("medium") data holds successes and failures.

use std::path::{Path, PathBuf};

use hier_data::io::read_all;
use hier_data::schema::{FlatTrajectory, Sys1Record, Sys2Transition};
use hier_envs::alfworld::AlfWorld;
use hier_envs::assets::Assets;
use hier_envs::scienceworld::{Config, ScienceWorld};
use hier_envs::textcraft::TextCraft;
use hier_envs::{Env, Split, Task};
use hier_multi2::demos::{BuildOptions, Segmenter, build_dataset};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hier-demos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Builds twice into two folders and checks the files are identical and consistent.
fn build_twice(env: &mut dyn Env, tasks: &[Task], name: &str, opts: &BuildOptions) -> PathBuf {
    let (a, b) = (tmp(&format!("{name}-a")), tmp(&format!("{name}-b")));
    let m = build_dataset(env, tasks, "train", &a, opts).unwrap();
    build_dataset(env, tasks, "train", &b, opts).unwrap();
    let (fa, fb) = (bytes(&a), bytes(&b));
    assert_eq!(
        fa.iter().map(|f| &f.0).collect::<Vec<_>>(),
        [
            "flat.jsonl",
            "flat.pcd",
            "manifest.json",
            "sys1.jsonl",
            "sys1.pcd",
            "sys2.jsonl",
            "sys2.pcd"
        ]
    );
    for (x, y) in fa.iter().zip(&fb) {
        assert!(x.1 == y.1, "{name}: {} differs between two builds", x.0);
    }
    // Both formats hold the same records.
    let s2: Vec<Sys2Transition> = read_all(a.join("sys2.jsonl")).unwrap();
    assert_eq!(s2, read_all::<Sys2Transition>(a.join("sys2.pcd")).unwrap());
    let s1: Vec<Sys1Record> = read_all(a.join("sys1.pcd")).unwrap();
    let flat: Vec<FlatTrajectory> = read_all(a.join("flat.pcd")).unwrap();
    assert_eq!(
        (m.sys1, m.sys2, m.flat),
        (s1.len() as u64, s2.len() as u64, flat.len() as u64)
    );
    let played = tasks.len().min(opts.limit.unwrap_or(usize::MAX));
    assert_eq!(flat.len() + m.dropped.len(), played);
    if opts.noise == 0.0 {
        assert!(
            m.dropped.is_empty(),
            "{name}: the expert failed {:?}",
            m.dropped
        );
    }
    // One intrinsic reward per segment, on its last action.
    let completions = s2.iter().filter(|t| t.subgoal_done).count();
    assert_eq!(completions, s1.len());
    assert_eq!(s2.iter().map(|t| t.reward).sum::<f64>(), s1.len() as f64);
    for f in &flat {
        f.check().unwrap();
    }
    let _ = std::fs::remove_dir_all(&b);
    a
}

#[test]
fn alfworld_expert_and_medium_data() {
    let mut env = AlfWorld::generated(&Assets::locate().unwrap()).unwrap();
    let tasks = env.tasks(Split::Train).unwrap();
    let opts = BuildOptions {
        limit: Some(40),
        ..BuildOptions::default()
    };
    let dir = build_twice(&mut env, &tasks, "alfworld", &opts);
    let s1: Vec<Sys1Record> = read_all(dir.join("sys1.jsonl")).unwrap();
    // Phases: every episode starts by finding and taking something and ends with its goal
    // action (put / use).
    assert!(s1.iter().any(|r| r.subgoal.starts_with("find ")));
    assert!(s1.iter().any(|r| r.subgoal.starts_with("take ")));
    assert!(
        s1.iter()
            .any(|r| r.subgoal.starts_with("heat ") || r.subgoal.starts_with("cool "))
    );
    assert!(
        s1.iter()
            .filter(|r| r.done)
            .all(|r| r.subgoal.starts_with("put ") || r.subgoal.starts_with("use "))
    );
    let _ = std::fs::remove_dir_all(dir);

    // Medium data: noise gives failures too, and is reproducible by seed.
    let noisy = BuildOptions {
        limit: Some(40),
        noise: 0.3,
        seed: 5,
        ..BuildOptions::default()
    };
    let dir = build_twice(&mut env, &tasks, "alfworld-noisy", &noisy);
    let flat: Vec<FlatTrajectory> = read_all(dir.join("flat.jsonl")).unwrap();
    let wins = flat.iter().filter(|f| f.success).count();
    assert!(
        wins > 0 && wins < flat.len(),
        "{wins} of {} succeeded",
        flat.len()
    );
    assert!(flat.iter().all(|f| f.origin == "noisy-expert(eps=0.3)"));
    let other_seed = tmp("alfworld-noisy-seed6");
    build_dataset(
        &mut env,
        &tasks,
        "train",
        &other_seed,
        &BuildOptions { seed: 6, ..noisy },
    )
    .unwrap();
    assert_ne!(
        bytes(&dir),
        bytes(&other_seed),
        "the seed changes medium data"
    );
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(other_seed);
}

#[test]
fn textcraft_expert_data() {
    let mut env = TextCraft::from_assets().unwrap();
    let tasks = env.tasks(Split::Train).unwrap();
    let opts = BuildOptions {
        limit: Some(30),
        ..BuildOptions::default()
    };
    let dir = build_twice(&mut env, &tasks, "textcraft", &opts);
    let s1: Vec<Sys1Record> = read_all(dir.join("sys1.jsonl")).unwrap();
    let firsts: Vec<&Sys1Record> = s1.iter().filter(|r| r.group_action.is_empty()).collect();
    assert_eq!(firsts.len(), 30);
    assert!(
        firsts
            .iter()
            .all(|r| r.subgoal.starts_with("gather base items: "))
    );
    assert!(
        s1.iter()
            .filter(|r| r.done)
            .all(|r| r.subgoal.starts_with("craft 1 ") || r.subgoal.starts_with("craft "))
    );
    // System 2 is shown the commands it needs: every craft of the expert (checked by the
    // environment) makes what one of the lines its subtask lists makes (the line may name a tag,
    // `2 planks`, where the expert names the item, `2 dark oak planks`), and gathering subtasks
    // list none.
    let s2: Vec<Sys2Transition> = read_all(dir.join("sys2.jsonl")).unwrap();
    let crafts: Vec<&Sys2Transition> = s2
        .iter()
        .filter(|t| t.action.starts_with("craft "))
        .collect();
    assert!(crafts.len() >= 30, "{} crafts", crafts.len());
    for t in crafts {
        let (_, listed) = t
            .subgoal
            .split_once("\nCrafting commands:\n")
            .unwrap_or_else(|| panic!("no commands in {:?}", t.subgoal));
        let makes = |c: &str| c.split_once(" using ").map(|(m, _)| m.to_owned());
        assert!(
            listed.lines().any(|l| makes(l) == makes(&t.action)),
            "{:?} not among {listed:?}",
            t.action
        );
    }
    assert!(
        s2.iter()
            .filter(|t| t.subgoal.starts_with("gather base items: "))
            .all(|t| !t.subgoal.contains("Crafting commands:"))
    );
    let _ = std::fs::remove_dir_all(dir);

    // The authors' two templates, as an option.
    let t = tmp("textcraft-templates");
    let m = build_dataset(
        &mut env,
        &tasks,
        "train",
        &t,
        &BuildOptions {
            limit: Some(5),
            segmenter: Some(Segmenter::TextcraftTemplates),
            ..BuildOptions::default()
        },
    )
    .unwrap();
    assert_eq!(m.sys1, 10);
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn scienceworld_expert_data() {
    let mut env = ScienceWorld::new(Config::from_assets().unwrap()).unwrap();
    let tasks = vec![Task::new("boil", 3), Task::new("find-plant", 5)];
    let dir = build_twice(&mut env, &tasks, "scienceworld", &BuildOptions::default());
    let s1: Vec<Sys1Record> = read_all(dir.join("sys1.jsonl")).unwrap();
    let goals: Vec<&str> = s1.iter().map(|r| r.subgoal.as_str()).collect();
    assert!(goals.iter().any(|g| g.starts_with("go to ")), "{goals:?}");
    assert!(
        goals.iter().any(|g| g.starts_with("focus on ")),
        "{goals:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_options_are_refused_before_playing() {
    let mut env = TextCraft::from_assets().unwrap();
    let tasks = env.tasks(Split::Train).unwrap();
    let out = tmp("bad");
    let err = build_dataset(
        &mut env,
        &tasks,
        "train",
        &out,
        &BuildOptions {
            noise: 1.5,
            ..BuildOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("noise"), "{err}");
    assert!(!out.exists());
}
