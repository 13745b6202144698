//! ALFWorld as an [`Env`]: generated games by default, the official games when the user has
//! them (`ALFWORLD_DATA`), or any single game file ([`read_game`]: a `game.tw-pddl`, or a PDDL
//! problem with an optional `<stem>.json` sidecar `{"task": …, "spec": {…}}`).
//!
//! - Generated: `tasks(split)` are `gen-<split>#k` for the split's size
//!   ([`generate::split_size`]); reports should say "ALFWorld (generated)" ([`AlfWorld::label`]).
//! - Official: ALFWorld's `json_2.1.1/{train,valid_seen,valid_unseen}` folders — one game per
//!   folder holding `game.tw-pddl` and `traj_data.json` — filtered the way alfworld's
//!   `AlfredTWEnv` does (the six task types; no `movable`/`Sliced` folders; `solvable` true).
//!   ID is `valid_seen` (140), OOD `valid_unseen` (134).
//! - `done` when the goal holds or the step limit (default 50, ReAct's budget) is reached;
//!   `reward` is the change of `score` (1 while the goal holds).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::data::AlfredData;
use super::engine::{Engine, Grammar};
use super::game::Game;
use super::pddl::Problem;
use super::{TaskSpec, TaskType, expert, generate};
use crate::assets::Assets;
use crate::error::{EnvError, Result};
use crate::{Env, Reset, Split, Step, StepInfo, Task};

/// ReAct's step budget for ALFWorld.
pub const DEFAULT_STEP_LIMIT: u64 = 50;

/// Where games come from.
#[derive(Clone, Debug)]
pub enum Source {
    Generated(Arc<AlfredData>),
    /// The `json_2.1.1` folder of ALFWorld's data.
    Official(PathBuf),
    /// One game file; its only task is `file#0`.
    File(PathBuf),
}

/// The ALFWorld environment.
#[derive(Debug)]
pub struct AlfWorld {
    source: Source,
    grammar: Option<Grammar>,
    step_limit: u64,
    engine: Option<Engine>,
    moves: u64,
    score: f64,
    done: bool,
}

/// A game file of ALFWorld's data: `game.tw-pddl` (JSON with `pddl_problem` and a `grammar`
/// whose task text is filled in) next to `traj_data.json`.
#[derive(Clone, Debug)]
pub struct GameFile {
    pub game: Game,
    /// The grammar the file was generated with.
    pub grammar: Grammar,
    pub solvable: Option<bool>,
}

/// Reads `game.tw-pddl` (and `traj_data.json` beside it, when present, for the expert).
pub fn read_game_file(path: &Path) -> Result<GameFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EnvError::file(path, format!("cannot read: {e}")))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| EnvError::file(path, format!("not JSON: {e}")))?;
    let field = |k: &str| {
        json.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| EnvError::file(path, format!("no string field `{k}`")))
    };
    let problem = Problem::parse(field("pddl_problem")?)
        .map_err(|m| EnvError::file(path, format!("pddl_problem: {m}")))?;
    let grammar_text = field("grammar")?;
    let task = grammar_text
        .split_once("Your task is to: ")
        .and_then(|(_, rest)| rest.split_once(".\""))
        .map(|(t, _)| t.to_owned())
        .ok_or_else(|| EnvError::file(path, "grammar has no `Your task is to: …` text"))?;
    if task == "UNKNOWN GOAL" {
        return Err(EnvError::file(
            path,
            "the task text was never filled in (run alfworld-generate on it first)",
        ));
    }
    let grammar = if grammar_text.contains("move {o} to {r}") {
        Grammar::V04
    } else {
        Grammar::V03
    };
    let traj = path.with_file_name("traj_data.json");
    let spec = if traj.exists() {
        Some(read_spec(&traj)?)
    } else {
        None
    };
    let game = Game::from_problem(&problem, task, spec)
        .map_err(|m| EnvError::file(path, m.to_string()))?;
    Ok(GameFile {
        game,
        grammar,
        solvable: json.get("solvable").and_then(Value::as_bool),
    })
}

/// Sidecar of an exported PDDL problem (`<stem>.json`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Sidecar {
    pub task: String,
    pub spec: Option<TaskSpec>,
    /// The expert's plan at export time (0.3 wording), for checking it elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold: Option<Vec<String>>,
}

/// Reads a game from a `game.tw-pddl`, or from a PDDL problem (`.pddl`) with its optional
/// sidecar `<stem>.json` giving the task text and the expert's spec.
pub fn read_game(path: &Path) -> Result<GameFile> {
    if path.extension().is_some_and(|e| e == "pddl") {
        let problem = Problem::load(path)?;
        let side = path.with_extension("json");
        let sidecar = if side.exists() {
            let text = std::fs::read_to_string(&side)
                .map_err(|e| EnvError::file(&side, format!("cannot read: {e}")))?;
            serde_json::from_str(&text)
                .map_err(|e| EnvError::file(&side, format!("expected {{task, spec}}: {e}")))?
        } else {
            Sidecar {
                task: "(no task text)".into(),
                spec: None,
                gold: None,
            }
        };
        let game = Game::from_problem(&problem, sidecar.task, sidecar.spec)
            .map_err(|m| EnvError::file(path, m.to_string()))?;
        return Ok(GameFile {
            game,
            grammar: Grammar::V03,
            solvable: None,
        });
    }
    read_game_file(path)
}

/// `task_type` and `pddl_params` of a `traj_data.json`.
pub fn read_spec(path: &Path) -> Result<TaskSpec> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EnvError::file(path, format!("cannot read: {e}")))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| EnvError::file(path, format!("not JSON: {e}")))?;
    let tt = json["task_type"]
        .as_str()
        .ok_or_else(|| EnvError::file(path, "no `task_type`"))?;
    let task_type = TaskType::from_name(tt)
        .ok_or_else(|| EnvError::file(path, format!("task type `{tt}` is not one of the six")))?;
    let p = &json["pddl_params"];
    let s = |k: &str| p[k].as_str().unwrap_or("").to_owned();
    Ok(TaskSpec {
        task_type,
        object_target: s("object_target"),
        parent_target: s("parent_target"),
        toggle_target: s("toggle_target"),
    })
}

/// The official games of a split, as alfworld's `AlfredTWEnv.collect_game_files` keeps them,
/// as paths relative to `root`, sorted.
pub fn official_games(root: &Path, split: Split) -> Result<Vec<String>> {
    let sub = match split {
        Split::Train => "train",
        Split::Id => "valid_seen",
        Split::Ood => "valid_unseen",
    };
    let base = root.join(sub);
    if !base.is_dir() {
        return Err(EnvError::file(
            &base,
            "not a folder: ALFWORLD_DATA should be ALFWorld's `json_2.1.1` folder",
        ));
    }
    let mut out = Vec::new();
    let mut stack = vec![base];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| EnvError::file(&dir, format!("cannot list: {e}")))?;
        for e in entries {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            }
        }
        let game = dir.join("game.tw-pddl");
        let traj = dir.join("traj_data.json");
        let rel = dir
            .strip_prefix(root)
            .unwrap_or(&dir)
            .to_string_lossy()
            .into_owned();
        if !game.exists() || !traj.exists() || rel.contains("movable") || rel.contains("Sliced") {
            continue;
        }
        if read_spec(&traj).is_err() {
            continue; // not one of the six task types
        }
        let json: Value = serde_json::from_str(
            &std::fs::read_to_string(&game)
                .map_err(|e| EnvError::file(&game, format!("cannot read: {e}")))?,
        )
        .map_err(|e| EnvError::file(&game, format!("not JSON: {e}")))?;
        if json.get("solvable").and_then(Value::as_bool) == Some(true) {
            out.push(rel);
        }
    }
    out.sort();
    Ok(out)
}

impl AlfWorld {
    /// Generated games over the floor plans of the alfworld wheel (fetched if missing).
    pub fn generated(assets: &Assets) -> Result<Self> {
        let dir = assets.alfworld()?;
        Ok(Self::new(Source::Generated(Arc::new(AlfredData::load(
            &dir,
        )?))))
    }

    /// The official games under `json_2.1.1`.
    pub fn official(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        if !root.is_dir() {
            return Err(EnvError::file(&root, "ALFWorld data folder does not exist"));
        }
        Ok(Self::new(Source::Official(root)))
    }

    /// Official games if `ALFWORLD_DATA` is set (an error if it points nowhere), else
    /// generated ones; [`label`](Self::label) says which.
    pub fn locate(assets: &Assets) -> Result<Self> {
        match std::env::var_os("ALFWORLD_DATA") {
            Some(dir) => Self::official(PathBuf::from(dir)),
            None => Self::generated(assets),
        }
    }

    /// One game file (see [`read_game`]).
    pub fn from_file(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        read_game(&path)?;
        Ok(Self::new(Source::File(path)))
    }

    pub fn new(source: Source) -> Self {
        Self {
            source,
            grammar: None,
            step_limit: DEFAULT_STEP_LIMIT,
            engine: None,
            moves: 0,
            score: 0.0,
            done: false,
        }
    }

    /// Forces a grammar (default: 0.3 for generated games, the file's own for official ones).
    pub fn with_grammar(mut self, grammar: Grammar) -> Self {
        self.grammar = Some(grammar);
        self
    }

    pub fn with_step_limit(mut self, limit: u64) -> Self {
        self.step_limit = limit;
        self
    }

    /// `ALFWorld` or `ALFWorld (generated)`, for tables.
    pub fn label(&self) -> &'static str {
        match self.source {
            Source::Generated(_) => "ALFWorld (generated)",
            Source::Official(_) | Source::File(_) => "ALFWorld",
        }
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The game being played.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    /// Starts a given game (a generated one, a `game.tw-pddl`, a PDDL problem).
    pub fn start(&mut self, game: Game, grammar: Grammar) -> Reset {
        let engine = Engine::new(Arc::new(game), self.grammar.unwrap_or(grammar));
        let observation = engine.intro();
        let description = engine.game().task.clone();
        self.engine = Some(engine);
        self.moves = 0;
        self.score = 0.0;
        self.done = false;
        Reset {
            observation,
            description,
        }
    }

    fn playing(&mut self) -> Result<&mut Engine> {
        self.engine
            .as_mut()
            .ok_or_else(|| EnvError::State("call reset before step".into()))
    }
}

impl Env for AlfWorld {
    fn name(&self) -> &'static str {
        "alfworld"
    }

    fn tasks(&self, split: Split) -> Result<Vec<Task>> {
        match &self.source {
            Source::Generated(_) => {
                let name = format!("gen-{}", split_name(split));
                Ok((0..generate::split_size(split))
                    .map(|k| Task::new(name.clone(), k))
                    .collect())
            }
            Source::Official(root) => Ok(official_games(root, split)?
                .into_iter()
                .map(|p| Task::new(p, 0))
                .collect()),
            Source::File(path) => Ok(vec![Task::new(path.to_string_lossy(), 0)]),
        }
    }

    fn reset(&mut self, task: &Task) -> Result<Reset> {
        let (game, grammar) = match &self.source {
            Source::Generated(data) => {
                let split = task
                    .name
                    .strip_prefix("gen-")
                    .and_then(|s| s.parse::<Split>().ok())
                    .ok_or_else(|| {
                        EnvError::InvalidArgument(format!(
                            "`{}` is not a generated ALFWorld task (gen-train|gen-id|gen-ood)",
                            task.name
                        ))
                    })?;
                let g = generate::generate(data, split, task.index)?;
                let game = g.game().map_err(|m| {
                    EnvError::State(format!("generated game {task} does not load: {m}"))
                })?;
                (game, Grammar::V03)
            }
            Source::Official(root) => {
                let f = read_game_file(&root.join(&task.name).join("game.tw-pddl"))?;
                (f.game, f.grammar)
            }
            Source::File(path) => {
                let f = read_game(path)?;
                (f.game, f.grammar)
            }
        };
        Ok(self.start(game, grammar))
    }

    fn step(&mut self, action: &str) -> Result<Step> {
        if self.done {
            return Err(EnvError::State("the episode is over; call reset".into()));
        }
        let limit = self.step_limit;
        let out = self.playing()?.step(action);
        self.moves += 1;
        let score = if out.won { 1.0 } else { 0.0 };
        let reward = score - self.score;
        self.score = score;
        let truncated = !out.won && self.moves >= limit;
        self.done = out.won || truncated;
        Ok(Step {
            observation: out.observation,
            reward,
            done: self.done,
            score,
            info: StepInfo {
                moves: self.moves,
                invalid: !out.valid,
                truncated,
            },
        })
    }

    fn valid_actions(&mut self) -> Result<Option<Vec<String>>> {
        Ok(Some(self.playing()?.admissible()))
    }

    fn gold_actions(&mut self) -> Result<Option<Vec<String>>> {
        let engine = self.playing()?;
        let Some(spec) = engine.game().spec.clone() else {
            return Ok(None);
        };
        expert::plan(engine, &spec)
            .map(Some)
            .map_err(|m| EnvError::State(format!("expert: {m}")))
    }

    /// The task type whose `goal_library` templates write the description (generated games:
    /// the templates come with the floor plans); `None` for official and single games, whose
    /// templates this environment does not hold.
    fn task_kind(&self, description: &str) -> Option<&'static str> {
        match &self.source {
            Source::Generated(data) => data.task_type_of_text(description).map(TaskType::name),
            Source::Official(_) | Source::File(_) => None,
        }
    }
}

fn split_name(split: Split) -> &'static str {
    match split {
        Split::Train => "train",
        Split::Id => "id",
        Split::Ood => "ood",
    }
}
