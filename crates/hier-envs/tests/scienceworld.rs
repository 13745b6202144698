//! ScienceWorld through the real jar (fetched from the PyPI wheel on first use; needs Java).

use std::sync::OnceLock;

use hier_envs::scienceworld::{Config, Pool, ScienceWorld, Splits};
use hier_envs::{Env, EnvError, Split, Task, step_all};

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        Pool::new(
            Config::from_assets().expect("ScienceWorld assets and Java"),
            1,
        )
        .unwrap()
    })
}

fn play(env: &mut ScienceWorld, actions: &[String]) -> Vec<hier_envs::Step> {
    actions.iter().map(|a| env.step(a).unwrap()).collect()
}

#[test]
fn boil_variation_0_gold_path_reaches_score_1() {
    let mut env = pool().env();
    let reset = env.reset(&Task::new("boil", 0)).unwrap();
    assert!(
        reset.observation.starts_with("This room is called"),
        "{}",
        reset.observation
    );
    assert!(reset.description.contains("boil"), "{}", reset.description);
    let gold = env.gold_actions().unwrap().unwrap();
    assert!(gold.len() > 10, "gold path of {} actions", gold.len());
    let steps = play(&mut env, &gold);
    let last = steps.last().unwrap();
    assert_eq!(last.score, 1.0, "final observation: {}", last.observation);
    assert!(last.done);
    // Rewards are score deltas: they sum to the final score.
    let total: f64 = steps.iter().map(|s| s.reward).sum();
    assert!((total - 1.0).abs() < 1e-9, "rewards sum to {total}");
    assert!(steps.iter().all(|s| !s.info.invalid));
}

#[test]
fn invalid_action_and_failure_state() {
    let mut env = pool().env();
    let err = env.reset(&Task::new("boiling", 0)).unwrap_err().to_string();
    assert!(
        err.contains("unknown ScienceWorld task `boiling`") && err.contains("boil,"),
        "{err}"
    );
    let err = env
        .reset(&Task::new("boil", 99_999))
        .unwrap_err()
        .to_string();
    assert!(err.contains("has 30 variations (0–29)"), "{err}");
    // Past our checks, the simulator throws; its exception's text is reported.
    let err = env
        .load(&Task::new("boil", 99_999), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("Java exception: java."), "{err}");
    env.reset(&Task::new("boil", 0)).unwrap();
    let s = env.step("fly to the moon").unwrap();
    assert!(s.info.invalid, "{}", s.observation);
    assert!(!s.done);
    assert_eq!(s.reward, 0.0);
    // ENVIRONMENTS.md: focusing on the wrong object fails the task.
    let s = env.step("focus on picture").unwrap();
    assert!(s.done, "{}", s.observation);
    assert!(s.score < 0.0, "score {}", s.score);
}

#[test]
fn valid_actions_match_the_json_variant() {
    let mut env = pool().env();
    env.reset(&Task::new("find-plant", 3)).unwrap();
    let valid = env.valid_actions().unwrap().unwrap();
    assert!(valid.len() > 20, "{} valid actions", valid.len());
    assert!(valid.iter().any(|a| a == "look around"), "{valid:?}");
    let mut list = env.valid_actions_list().unwrap();
    let mut json = valid.clone();
    list.sort();
    json.sort();
    assert_eq!(json, list, "JSON and list variants disagree");
}

/// Four environments on two JVMs play four different gold paths concurrently. Without the
/// per-JVM call lock, concurrent calls into one JVM corrupt each other (see the module docs).
#[test]
fn concurrent_environments_on_shared_jvms_all_solve_their_tasks() {
    let pool = Pool::new(Config::from_assets().unwrap(), 2).unwrap();
    let tasks = [
        Task::new("boil", 0),
        Task::new("melt", 2),
        Task::new("find-plant", 3),
        Task::new("use-thermometer", 1),
    ];
    let mut envs: Vec<Box<dyn Env>> = Vec::new();
    let mut golds = Vec::new();
    for t in &tasks {
        let mut e = pool.env();
        e.reset(t).unwrap();
        golds.push(e.gold_actions().unwrap().unwrap());
        envs.push(Box::new(e));
    }
    let longest = golds.iter().map(Vec::len).max().unwrap();
    let mut last = vec![None; envs.len()];
    for k in 0..longest {
        let actions: Vec<Option<&str>> =
            golds.iter().map(|g| g.get(k).map(String::as_str)).collect();
        for (i, r) in step_all(&mut envs, &actions).into_iter().enumerate() {
            if let Some(r) = r {
                last[i] = Some(r.unwrap());
            }
        }
    }
    for (t, s) in tasks.iter().zip(last) {
        let s = s.unwrap();
        assert_eq!(s.score, 1.0, "{t}: {}", s.observation);
    }
    assert_eq!(pool.jvm_starts(), 2);
}

#[test]
fn killed_jvm_fails_the_episode_then_recovers() {
    let pool = Pool::new(Config::from_assets().unwrap(), 1).unwrap();
    let mut env = pool.env();
    env.reset(&Task::new("boil", 1)).unwrap();
    env.step("look around").unwrap();
    let pid = env.jvm_pid().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let err = env.step("look around").unwrap_err();
    assert!(matches!(err, EnvError::Crashed(_)), "{err}");
    // The episode stays failed…
    let err = env.step("look around").unwrap_err();
    assert!(err.to_string().contains("lost"), "{err}");
    // …and a reset starts a new JVM and works.
    let reset = env.reset(&Task::new("boil", 1)).unwrap();
    assert!(reset.observation.starts_with("This room is called"));
    assert_ne!(env.jvm_pid().unwrap(), pid);
    assert_eq!(pool.jvm_starts(), 2);
    let s = env.step("look around").unwrap();
    assert!(!s.info.invalid);
}

#[test]
fn committed_split_file_matches_the_jar() {
    let mut env = pool().env();
    let fresh = Splits::generate(&mut env).unwrap();
    if std::env::var_os("HIER_WRITE_SPLITS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/scienceworld_splits.json");
        std::fs::write(path, fresh.to_json()).unwrap();
    }
    assert_eq!(
        fresh,
        Splits::committed().unwrap(),
        "the committed split file is stale: rerun with HIER_WRITE_SPLITS=1"
    );
    assert_eq!(fresh.tasks(Split::Ood).len(), 211);
}

/// Episodes recorded with the official Python wrapper (`tests/fixtures/scienceworld/
/// make_golden.py`): same observations, rewards (÷100), scores, done flags and moves.
///
/// The simulator lists the objects of a place in an order that changes from one JVM run to
/// the next (seen here: three paint cups on a table in three different orders across three
/// runs of the same variation), so observations are compared as multisets of their
/// newline/comma-separated parts.
#[test]
fn transcripts_match_the_python_wrapper() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scienceworld/transcripts.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut env = pool().env();
    let mut compared = 0;
    for (line, l) in text.lines().enumerate() {
        let ep: serde_json::Value = serde_json::from_str(l).unwrap();
        let task = Task::new(
            ep["task"].as_str().unwrap(),
            ep["variation"].as_u64().unwrap(),
        );
        let steps = ep["steps"].as_array().unwrap();
        let reset = env.reset(&task).unwrap();
        assert_eq!(
            parts(&reset.observation),
            parts(steps[0]["observation"].as_str().unwrap()),
            "line {}: reset",
            line + 1
        );
        for (k, want) in steps.iter().enumerate().skip(1) {
            let action = want["action"].as_str().unwrap();
            let got = env.step(action).unwrap();
            let ctx = format!("line {} ({task}) step {k} `{action}`", line + 1);
            assert_eq!(
                parts(&got.observation),
                parts(want["observation"].as_str().unwrap()),
                "{ctx}"
            );
            assert_eq!(
                (got.reward * 100.0).round(),
                want["reward"].as_f64().unwrap(),
                "{ctx}: reward"
            );
            assert_eq!(
                (got.score * 100.0).round(),
                want["score"].as_f64().unwrap(),
                "{ctx}: score"
            );
            assert_eq!(got.done, want["done"].as_bool().unwrap(), "{ctx}: done");
            assert_eq!(
                got.info.moves,
                want["moves"].as_u64().unwrap(),
                "{ctx}: moves"
            );
            compared += 1;
        }
    }
    assert!(compared > 50, "only {compared} steps compared");
}

/// An observation as the sorted multiset of its parts.
fn parts(observation: &str) -> Vec<&str> {
    let mut p: Vec<&str> = observation
        .split('\n')
        .flat_map(|l| l.split(", "))
        .map(str::trim)
        .collect();
    p.sort_unstable();
    p
}
