//! Environment throughput, printed as JSON lines shaped like `benches/peers/envs_py.py`'s:
//! `{"fw": "hier", "mode", "count", "seconds", "per_s"}`. Run through
//! `benches/side_by_side.sh`, which alternates with the Python packages.
//!
//! usage: env_bench [--episodes N] [--sw-steps N] [--only <mode prefix>]

use std::time::Instant;

use hier_envs::assets::Assets;
use hier_envs::scienceworld::{Config, ScienceWorld};
use hier_envs::textcraft::TextCraft;
use hier_envs::{Env, Task};

const TASKS: [(&str, u64); 4] = [
    ("boil", 0),
    ("melt", 2),
    ("find-plant", 3),
    ("use-thermometer", 1),
];

fn args() -> Vec<String> {
    std::env::args().collect()
}

fn arg(name: &str, default: usize) -> usize {
    let args = args();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

/// `--only <prefix>` restricts the run to modes starting with it (for profiling).
fn wanted(mode: &str) -> bool {
    let args = args();
    match args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
    {
        Some(p) => mode.starts_with(p.as_str()),
        None => true,
    }
}

fn emit(mode: &str, count: usize, seconds: f64) {
    println!(
        "{}",
        serde_json::json!({"fw": "hier", "mode": mode, "count": count,
            "seconds": (seconds * 1e4).round() / 1e4,
            "per_s": ((count as f64 / seconds) * 100.0).round() / 100.0})
    );
}

fn main() -> hier_envs::Result<()> {
    let episodes = arg("--episodes", 60);
    let sw_steps = arg("--sw-steps", 400);
    let recipes = Assets::locate()?.textcraft_recipes()?;

    // Fresh environment (recipe files parsed) + reset, per episode: what Python needs.
    if wanted("textcraft-reset-fresh") {
        let t = Instant::now();
        for s in 0..episodes {
            TextCraft::load(&recipes)?.reset(&Task::new("craft", s as u64))?;
        }
        emit("textcraft-reset-fresh", episodes, t.elapsed().as_secs_f64());
    }

    // Resets of one environment (ours does not mutate its tables, so this is exact).
    let mut env = TextCraft::load(&recipes)?;
    if wanted("textcraft-reset") {
        let n = episodes * 1000;
        let t = Instant::now();
        for s in 0..n {
            env.reset(&Task::new("craft", s as u64))?;
        }
        emit("textcraft-reset", n, t.elapsed().as_secs_f64());
    }

    if wanted("textcraft-step") {
        env.reset(&Task::new("craft", 0))?;
        let n = 2_000_000;
        let t = Instant::now();
        for k in 0..n {
            env.step(if k % 2 == 1 {
                "get 1 oak log"
            } else {
                "inventory"
            })?;
        }
        emit("textcraft-step", n, t.elapsed().as_secs_f64());
    }
    if !wanted("scienceworld") {
        return Ok(());
    }

    // ScienceWorld: gold paths, each step followed by the valid-action listing (the Python
    // wrapper lists valid actions inside every step).
    let mut sw = ScienceWorld::new(Config::from_assets()?)?;
    let (mut steps, mut raw_steps, mut secs, mut raw_secs) = (0, 0, 0.0, 0.0);
    let (mut valid_list, mut valid_json, mut listings) = (0.0, 0.0, 0);
    while steps < sw_steps {
        for (task, var) in TASKS {
            let task = Task::new(task, var);
            sw.reset(&task)?;
            let gold = sw.gold_actions()?.expect("gold paths on");
            let t = Instant::now();
            for a in &gold {
                sw.step(a)?;
                sw.valid_actions()?;
            }
            secs += t.elapsed().as_secs_f64();
            steps += gold.len();
            sw.reset(&task)?;
            let t = Instant::now();
            for a in &gold {
                sw.step(a)?;
            }
            raw_secs += t.elapsed().as_secs_f64();
            raw_steps += gold.len();
            // The two ways of listing valid actions, on the final state.
            let t = Instant::now();
            sw.valid_actions_list()?;
            valid_list += t.elapsed().as_secs_f64();
            let t = Instant::now();
            sw.valid_actions()?;
            valid_json += t.elapsed().as_secs_f64();
            listings += 1;
        }
    }
    emit("scienceworld-step", steps, secs);
    emit("scienceworld-step-only", raw_steps, raw_secs);
    emit("scienceworld-valid-list", listings, valid_list);
    emit("scienceworld-valid-json", listings, valid_json);
    Ok(())
}
