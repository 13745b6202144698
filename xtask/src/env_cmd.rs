//! `cargo xtask setup` and `cargo xtask env …`: fetch assets, play an environment.
//!
//! The JSON printed by `env` is read by external checks; keep its shape stable:
//! `{"env", "task", "steps": [{"action": null|str, "observation", "reward", "done"}], "score",
//! "done"}` plus descriptive keys (`seed`/`variation`, `goal`, `description`).

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};

use hier_envs::assets::{self, Assets};
use hier_envs::scienceworld::{Config, ScienceWorld};
use hier_envs::textcraft::{TextCraft, display_name};
use hier_envs::{Env, Task};

#[derive(Args, Debug)]
pub struct EnvArgs {
    /// textcraft | scienceworld | alfworld
    env: String,
    /// TextCraft: the seed (the goal is the seed-th candidate, modulo 419). ALFWorld: the
    /// game index within --split.
    #[arg(long, conflicts_with = "goal")]
    seed: Option<u64>,
    /// ALFWorld: id | ood | train (generated games, or the official ones under
    /// $ALFWORLD_DATA when it is set).
    #[arg(long, default_value = "id")]
    split: String,
    /// ALFWorld: play one game file instead (`game.tw-pddl`, or a `.pddl` problem with an
    /// optional `<stem>.json` sidecar).
    #[arg(long, conflicts_with = "seed")]
    game: Option<std::path::PathBuf>,
    /// ALFWorld: the text grammar, 0.3 (ReAct/ETO wording, default for generated games) or
    /// 0.4 (alfworld 0.4.2).
    #[arg(long)]
    grammar: Option<String>,
    /// ALFWorld: write the generated game as a PDDL problem (plus `<stem>.json` with the
    /// task text and spec) to this path and exit.
    #[arg(long)]
    export: Option<std::path::PathBuf>,
    /// TextCraft: the goal item (`cyan banner` or `minecraft:cyan_banner`).
    #[arg(long)]
    goal: Option<String>,
    /// ScienceWorld: the task name (`boil`, …).
    #[arg(long)]
    task: Option<String>,
    /// ScienceWorld: the variation index.
    #[arg(long, default_value_t = 0)]
    variation: u64,
    /// Actions separated by `;`.
    #[arg(long, conflicts_with = "gold")]
    actions: Option<String>,
    /// Play the expert / gold action sequence.
    #[arg(long)]
    gold: bool,
}

pub fn setup() -> Result<()> {
    let a = Assets::locate()?;
    for wheel in assets::ALL {
        let dir = a
            .ensure(wheel)
            .with_context(|| format!("setting up {}", wheel.requirement))?;
        println!("{:<22} {}", wheel.requirement, dir.display());
    }
    match assets::find_java() {
        Ok(java) => println!("{:<22} {}", "java", java.display()),
        Err(e) => eprintln!("warning: {e}"),
    }
    Ok(())
}

/// An environment ready to play a task, and the leading keys of the JSON.
type Prepared = (Box<dyn Env>, Task, serde_json::Map<String, Value>);

pub fn run(args: &EnvArgs) -> Result<()> {
    use hier_multi2::EnvKind;
    // Each environment takes its own task arguments (`--goal`, `--task --variation`,
    // `--split --seed`), hence one function each.
    let (mut env, task, head) = match EnvKind::parse(&args.env)? {
        EnvKind::Textcraft => textcraft(args)?,
        EnvKind::Scienceworld => scienceworld(args)?,
        EnvKind::Alfworld => match alfworld(args)? {
            Some(p) => p,
            None => return Ok(()),
        },
    };
    let actions = args.actions.as_deref().map(split_actions);
    let out = play(env.as_mut(), &task, actions, args.gold, head)?;
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}

fn split_actions(s: &str) -> Vec<String> {
    s.split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Resets, plays `actions` until done, and renders the episode.
fn play(
    env: &mut dyn Env,
    task: &Task,
    actions: Option<Vec<String>>,
    gold: bool,
    mut head: serde_json::Map<String, Value>,
) -> Result<Value> {
    let reset = env
        .reset(task)
        .with_context(|| format!("resetting {} to {task}", env.name()))?;
    let actions = match (actions, gold) {
        (Some(a), _) => a,
        (None, true) => env
            .gold_actions()?
            .context("this environment has no gold actions")?,
        (None, false) => Vec::new(),
    };
    let mut steps = vec![json!({
        "action": null, "observation": reset.observation, "reward": 0.0, "done": false
    })];
    let (mut score, mut done) = (0.0, false);
    for (k, a) in actions.iter().enumerate() {
        if done {
            eprintln!(
                "note: the episode ended; {} action(s) not played",
                actions.len() - k
            );
            break;
        }
        let s = env
            .step(a)
            .with_context(|| format!("step {} `{a}`", k + 1))?;
        steps.push(json!({
            "action": a, "observation": s.observation, "reward": s.reward, "done": s.done
        }));
        score = s.score;
        done = s.done;
    }
    head.insert("description".into(), json!(reset.description));
    head.insert("steps".into(), json!(steps));
    head.insert("score".into(), json!(score));
    head.insert("done".into(), json!(done));
    Ok(Value::Object(head))
}

fn textcraft(args: &EnvArgs) -> Result<Prepared> {
    if args.task.is_some() {
        bail!("--task is for scienceworld; textcraft takes --seed or --goal");
    }
    let env = TextCraft::from_assets().context("loading TextCraft recipes")?;
    let seed = match &args.goal {
        None => args.seed.unwrap_or(0),
        Some(g) => {
            let id = if g.starts_with("minecraft:") {
                g.clone()
            } else {
                format!("minecraft:{}", g.replace(' ', "_"))
            };
            env.candidates()
                .iter()
                .position(|(c, _)| *c == id)
                .with_context(|| {
                    format!(
                        "`{g}` is not a TextCraft goal (goals are craftable items of depth ≥ 2; \
                         e.g. `{}`)",
                        display_name(&env.candidates()[0].0)
                    )
                })? as u64
        }
    };
    let task = Task::new("craft", seed);
    let goal = env.goal_of(seed).to_owned();
    let mut head = serde_json::Map::new();
    head.insert("env".into(), json!(hier_multi2::EnvKind::Textcraft.name()));
    head.insert("task".into(), json!("craft"));
    head.insert("seed".into(), json!(seed));
    head.insert("goal".into(), json!(goal));
    Ok((Box::new(env), task, head))
}

fn scienceworld(args: &EnvArgs) -> Result<Prepared> {
    if args.seed.is_some() || args.goal.is_some() {
        bail!("--seed/--goal are for textcraft; scienceworld takes --task and --variation");
    }
    let name = args
        .task
        .clone()
        .context("scienceworld needs --task <name> (e.g. boil)")?;
    let mut config = Config::from_assets()?;
    config.gold_paths = args.gold;
    let env = ScienceWorld::new(config)?;
    let task = Task::new(name.clone(), args.variation);
    let mut head = serde_json::Map::new();
    head.insert(
        "env".into(),
        json!(hier_multi2::EnvKind::Scienceworld.name()),
    );
    head.insert("task".into(), json!(name));
    head.insert("variation".into(), json!(args.variation));
    Ok((Box::new(env), task, head))
}

/// ALFWorld; `None` when `--export` did all there was to do.
fn alfworld(args: &EnvArgs) -> Result<Option<Prepared>> {
    use hier_envs::alfworld::AlfWorld;
    use hier_envs::alfworld::env::Sidecar;
    use hier_envs::alfworld::generate;

    if args.task.is_some() || args.goal.is_some() {
        bail!("alfworld takes --split and --seed, or --game <file>");
    }
    let grammar = args
        .grammar
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut head = serde_json::Map::new();
    head.insert("env".into(), json!(hier_multi2::EnvKind::Alfworld.name()));
    let (mut env, task) = match &args.game {
        Some(path) => {
            let env = AlfWorld::from_file(path)?;
            let task = env.tasks(hier_envs::Split::Id)?.remove(0);
            (env, task)
        }
        None => {
            let split: hier_envs::Split = args.split.parse()?;
            let env = AlfWorld::locate(&Assets::locate()?)?;
            let mut tasks = env.tasks(split)?;
            let k = args.seed.unwrap_or(0);
            if k as usize >= tasks.len() {
                bail!(
                    "{} has {} {} games; --seed {k} is out of range",
                    env.label(),
                    tasks.len(),
                    args.split
                );
            }
            head.insert("split".into(), json!(args.split));
            head.insert("seed".into(), json!(k));
            if let hier_envs::alfworld::env::Source::Generated(data) = env.source() {
                let g = generate::generate(data, split, k).map_err(anyhow::Error::msg)?;
                head.insert("scene".into(), json!(format!("FloorPlan{}", g.scene)));
                head.insert("task_type".into(), json!(g.spec.task_type));
                if let Some(out) = &args.export {
                    let game = g.game().map_err(anyhow::Error::msg)?;
                    let engine = hier_envs::alfworld::engine::Engine::new(
                        std::sync::Arc::new(game),
                        hier_envs::alfworld::engine::Grammar::V03,
                    );
                    let gold = hier_envs::alfworld::expert::plan(&engine, &g.spec)
                        .map_err(anyhow::Error::msg)?;
                    let side = Sidecar {
                        task: g.task.clone(),
                        spec: Some(g.spec.clone()),
                        gold: Some(gold),
                    };
                    hier_backbone::write_atomic(out, g.problem.as_bytes())?;
                    hier_backbone::write_atomic(
                        &out.with_extension("json"),
                        serde_json::to_string_pretty(&side)?.as_bytes(),
                    )?;
                    println!("{}", out.display());
                    return Ok(None);
                }
            }
            (env, tasks.swap_remove(k as usize))
        }
    };
    if args.export.is_some() {
        bail!(
            "--export writes generated games (--split/--seed), not --game files or official ones"
        );
    }
    if let Some(g) = grammar {
        env = env.with_grammar(g);
    }
    head.insert("source".into(), json!(env.label()));
    head.insert("task".into(), json!(task.to_string()));
    Ok(Some((Box::new(env), task, head)))
}
