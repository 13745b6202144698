//! Environment throughput, printed as JSON lines shaped like `benches/peers/envs_py.py`'s:
//! `{"fw": "hier", "mode", "count", "seconds", "per_s"}`. Run through
//! `benches/side_by_side.sh`, which alternates with the Python packages.
//!
//! usage: env_bench [--episodes N] [--sw-steps N] [--alf-walk N] [--only <mode prefix>]

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

/// The generated games of the ALFWorld conformance file (the peer plays the same ones).
fn alfworld_games() -> Vec<(String, String)> {
    use std::io::Read;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/alfworld/golden_generated.jsonl.gz"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect(path))
        .read_to_string(&mut text)
        .expect("gzip");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|l| l["kind"] == "game")
        .map(|l| {
            let s = |k: &str| l[k].as_str().expect(k).to_owned();
            (s("problem"), s("task"))
        })
        .collect()
}

/// ALFWorld: load + reset each game, then a random walk over admissible commands (the
/// admissible list is computed every step, as TextWorld does).
fn alfworld(walk: usize) {
    use std::sync::Arc;

    use hier_envs::alfworld::engine::{Engine, Grammar};
    use hier_envs::alfworld::game::Game;
    use hier_envs::alfworld::pddl::Problem;
    use hier_envs::pyrand::PyRandom;

    let games = alfworld_games();
    let rounds = 20;
    let t = Instant::now();
    let mut engines = Vec::new();
    for _ in 0..rounds {
        engines.clear();
        for (problem, task) in &games {
            let p = Problem::parse(problem).expect("problem");
            let g = Game::from_problem(&p, task.clone(), None).expect("game");
            let e = Engine::new(Arc::new(g), Grammar::V04);
            std::hint::black_box(e.intro());
            std::hint::black_box(e.admissible());
            engines.push(e);
        }
    }
    emit(
        "alfworld-load-reset",
        rounds * games.len(),
        t.elapsed().as_secs_f64(),
    );

    let mut rng = PyRandom::new(0);
    let (mut steps, t) = (0, Instant::now());
    for _ in 0..rounds {
        for e in &mut engines {
            e.restart();
            let mut adm = e.admissible();
            for _ in 0..walk {
                let cmd = rng.choice(&adm).expect("look is always admissible").clone();
                std::hint::black_box(e.step(&cmd));
                adm = e.admissible();
                steps += 1;
            }
        }
    }
    emit("alfworld-step", steps, t.elapsed().as_secs_f64());
}

fn main() -> hier_envs::Result<()> {
    let episodes = arg("--episodes", 60);
    let sw_steps = arg("--sw-steps", 400);
    if wanted("alfworld") {
        alfworld(arg("--alf-walk", 40));
    }
    if !wanted("textcraft") && !wanted("scienceworld") {
        return Ok(());
    }
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
