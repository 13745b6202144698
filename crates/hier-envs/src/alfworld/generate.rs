//! Deterministic ALFWorld games over the 120 ALFRED floor plans, for users without the
//! official game files (tables call these "ALFWorld (generated)").
//!
//! A game is a function of `(split, k)`: its task type (evaluation splits hold ALFWorld's
//! per-type counts, see [`TYPE_COUNTS_OOD`]; the training pool draws types in the same
//! proportions), then from its seed a floor plan of the split whose room allows that type
//! (`GOALS_VALID`), targets that make it solvable, and where every object starts. Placement follows `VAL_RECEPTACLE_OBJECTS` (only where ALFRED allows the type);
//! object properties follow `VAL_ACTION_OBJECTS`; openable receptacles are
//! `OPENABLE_CLASS_LIST` and start closed; goals and task texts come from `goal_library.py`.
//! The game is written as a PDDL problem of the `alfred` domain — the same text TextWorld can
//! load — then parsed back, so what is played is exactly what is exported. A draw is kept only
//! if the goal does not already hold and the [`expert`](super::expert) solves it; otherwise
//! the next draw of the same stream is tried.
//!
//! - Receptacles are the scene's ids in `-openable.json` (with their interaction poses, which
//!   become locations `loc|x/0.25|z/0.25|rot/90|horizon`, shared by receptacles with one pose);
//!   a receptacle type the scene lists with no id there (stove burners, garbage cans, …) gets
//!   one instance (four stove burners) at a drawn pose.
//! - Objects: every type of the scene that some present receptacle may hold, 1–3 instances
//!   (`MAX_NUM_OF_OBJ_INSTANCES`), the target 1–4 (`PICKUP_REPEAT_MAX`, at least 2 for
//!   `pick_two`), never starting in a receptacle of the goal's type. Lamps (`Toggleable`) stand
//!   on a desk, side table, dresser, … of the scene (ALFRED's tables do not list where lamps go).
//! - Splits: OOD games use ALFRED's unseen scenes ([`OOD_SCENES`]); ID evaluation games and the
//!   training pool use the other 116, with disjoint seed streams.

use std::collections::BTreeSet;

use super::data::{AlfredData, Scene};
use super::engine::{Engine, Grammar};
use super::game::Game;
use super::pddl::Problem;
use super::{TaskSpec, TaskType, expert};
use crate::EnvError;
use crate::Split;
use crate::pyrand::PyRandom;

/// ALFRED's `valid_unseen` scenes: the OOD floor plans.
pub const OOD_SCENES: [u32; 4] = [10, 219, 308, 424];
/// ALFWorld's evaluation sizes: `valid_seen` (ID) and `valid_unseen` (OOD).
pub const ID_GAMES: u64 = 140;
pub const OOD_GAMES: u64 = 134;
/// ALFWorld's training set size (games of the six types).
pub const TRAIN_GAMES: u64 = 3553;
/// Games per task type in ALFWorld's `valid_unseen` (the denominators of ReAct's per-type
/// table), in [`TaskType::ALL`] order: pick 24, look 18, clean 31, heat 23, cool 21, two 17.
pub const TYPE_COUNTS_OOD: [u64; 6] = [24, 18, 31, 23, 21, 17];
/// The ID split in the same proportions, rounded to 140 (the per-type counts of
/// `valid_seen` are not published in a form we could check).
pub const TYPE_COUNTS_ID: [u64; 6] = [25, 19, 32, 24, 22, 18];

/// Draws tried for one game before giving up (never reached on the 120 floor plans).
const MAX_DRAWS: usize = 200;

/// Receptacle types a lamp may stand on.
const LAMP_HOSTS: [&str; 7] = [
    "Desk",
    "SideTable",
    "Dresser",
    "Shelf",
    "CoffeeTable",
    "DiningTable",
    "TVStand",
];

/// A generated game.
#[derive(Clone, Debug)]
pub struct Generated {
    pub split: Split,
    pub k: u64,
    /// `FloorPlan<scene>`.
    pub scene: u32,
    pub spec: TaskSpec,
    /// Task text (`put a hot mug in cabinet`).
    pub task: String,
    /// The PDDL problem (`alfred` domain).
    pub problem: String,
    /// Draws rejected before this one.
    pub rejected: usize,
    /// `problem`, loaded (the acceptance check built it already).
    game: Game,
}

impl Generated {
    /// The playable game (parsed back from `problem` when the draw was checked).
    pub fn game(&self) -> crate::Result<Game> {
        Ok(self.game.clone())
    }
}

/// Number of games of a split.
pub fn split_size(split: Split) -> u64 {
    match split {
        Split::Train => TRAIN_GAMES,
        Split::Id => ID_GAMES,
        Split::Ood => OOD_GAMES,
    }
}

fn seed_of(split: Split, k: u64) -> u64 {
    let base: u64 = match split {
        Split::Train => 0x7472_6169,
        Split::Id => 0x6964_0000,
        Split::Ood => 0x6f6f_6400,
    };
    (base << 20) + k
}

fn mangle(raw: &str) -> String {
    raw.replace('|', "_bar_")
        .replace('+', "_plus_")
        .replace('-', "_minus_")
        .replace('.', "_dot_")
        .replace(',', "_comma_")
}

fn receptacle_type(id: &str) -> &str {
    match id.rsplit_once('|') {
        Some((_, last)) if last.ends_with("Basin") => last,
        _ => id.split('|').next().unwrap_or(id),
    }
}

struct Rec {
    id: String,
    rtype: String,
    loc: String,
    xyz: [f64; 3],
}

fn location(pose: [f64; 4]) -> String {
    let g = |v: f64| (v / 0.25).round() as i64;
    mangle(&format!(
        "loc|{}|{}|{}|{}",
        g(pose[0]),
        g(pose[1]),
        (pose[2] / 90.0).round() as i64,
        pose[3].round() as i64
    ))
}

fn draw_pose(rng: &mut PyRandom) -> [f64; 4] {
    let grid = |rng: &mut PyRandom| (rng.randbelow(25) as f64 - 12.0) * 0.25;
    [
        grid(rng),
        grid(rng),
        (rng.randbelow(4) * 90) as f64,
        [0.0, 15.0, 30.0, 45.0, 60.0][rng.randbelow(5)],
    ]
}

fn draw_xyz(rng: &mut PyRandom) -> [f64; 3] {
    let c = |rng: &mut PyRandom, lo: f64, hi: f64| {
        ((lo + (hi - lo) * rng.random()) * 100.0).round() / 100.0
    };
    [c(rng, -4.0, 4.0), c(rng, 0.0, 2.2), c(rng, -4.0, 4.0)]
}

/// The receptacles of a scene (ids from `-openable.json`, plus one drawn instance — four
/// stove burners — of each listed type without an id).
fn receptacles(data: &AlfredData, scene: &Scene, rng: &mut PyRandom) -> Vec<Rec> {
    let statics: BTreeSet<&str> = data
        .receptacle_objects
        .keys()
        .map(String::as_str)
        .filter(|t| !data.movable_receptacles.contains(*t))
        .collect();
    let mut out = Vec::new();
    for (id, pose) in &scene.poses {
        let t = receptacle_type(id);
        if !statics.contains(t) {
            continue;
        }
        let parts: Vec<f64> = id
            .split('|')
            .skip(1)
            .take(3)
            .filter_map(|p| p.parse().ok())
            .collect();
        let xyz = match parts[..] {
            [x, y, z] => [x, y, z],
            _ => draw_xyz(rng),
        };
        out.push(Rec {
            id: mangle(id),
            rtype: t.to_owned(),
            loc: location(*pose),
            xyz,
        });
    }
    let have: BTreeSet<String> = out.iter().map(|r| r.rtype.clone()).collect();
    for t in &scene.types {
        if !statics.contains(t.as_str()) || have.contains(t) {
            continue;
        }
        let n = if t == "StoveBurner" { 4 } else { 1 };
        for _ in 0..n {
            let xyz = draw_xyz(rng);
            let at = format!(
                "{}|{}|{}",
                coord_raw(xyz[0]),
                coord_raw(xyz[1]),
                coord_raw(xyz[2])
            );
            // Basins are named after their fixture: `Sink|x|y|z|SinkBasin`.
            let raw = match t.strip_suffix("Basin") {
                Some(fixture) => format!("{fixture}|{at}|{t}"),
                None => format!("{t}|{at}"),
            };
            out.push(Rec {
                id: mangle(&raw),
                rtype: t.clone(),
                loc: location(draw_pose(rng)),
                xyz,
            });
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

/// ALFRED's coordinate text, Python `{:+06.2f}`: `-0.5` → `-00.50`.
fn coord_raw(v: f64) -> String {
    format!("{v:+06.2}")
}

/// The `(:goal …)` of a task, from `goal_library`.
fn goal_pddl(data: &AlfredData, spec: &TaskSpec) -> String {
    data.goals[&spec.task_type]
        .pddl
        .replace('#', "-")
        .replace("{obj}", &spec.object_target)
        .replace("{recep}", &spec.parent_target)
        .replace("{toggle}", &spec.toggle_target)
}

/// Task text: a `goal_library` template with lowercased type names.
fn task_text(template: &str, spec: &TaskSpec) -> String {
    template
        .replace("{obj}", &spec.object_target.to_lowercase())
        .replace("{recep}", &spec.parent_target.to_lowercase())
        .replace("{toggle}", &spec.toggle_target.to_lowercase())
}

/// The scenes of a split.
pub fn scenes_of(data: &AlfredData, split: Split) -> Vec<u32> {
    data.scenes
        .keys()
        .copied()
        .filter(|n| OOD_SCENES.contains(n) == (split == Split::Ood))
        .collect()
}

/// The task type of game `k`: evaluation splits deal their per-type counts in an order
/// shuffled once per split; the training pool draws by the same proportions.
pub fn task_type_of(split: Split, k: u64) -> TaskType {
    let counts = match split {
        Split::Ood => TYPE_COUNTS_OOD,
        Split::Id | Split::Train => TYPE_COUNTS_ID,
    };
    if split == Split::Train {
        let mut rng = PyRandom::new(seed_of(split, k) ^ 0x7479_7065);
        let mut x = rng.randbelow(counts.iter().sum::<u64>() as usize) as u64;
        for (t, c) in TaskType::ALL.into_iter().zip(counts) {
            if x < c {
                return t;
            }
            x -= c;
        }
        unreachable!("x < sum of counts");
    }
    let mut deck: Vec<TaskType> = TaskType::ALL
        .into_iter()
        .zip(counts)
        .flat_map(|(t, c)| std::iter::repeat_n(t, c as usize))
        .collect();
    PyRandom::new(seed_of(split, u64::from(u32::MAX))).shuffle(&mut deck);
    deck[k as usize]
}

/// Game `k` of a split.
pub fn generate(data: &AlfredData, split: Split, k: u64) -> crate::Result<Generated> {
    if k >= split_size(split) {
        return Err(EnvError::Alfworld(format!(
            "generated ALFWorld has {} {split:?} games; asked for game {k}",
            split_size(split)
        )));
    }
    let tt = task_type_of(split, k);
    let mut rng = PyRandom::new(seed_of(split, k));
    let scenes: Vec<u32> = scenes_of(data, split)
        .into_iter()
        .filter(|n| {
            data.goals_valid
                .get(tt.name())
                .is_some_and(|rooms| rooms.contains(&data.scenes[n].room))
        })
        .collect();
    let mut last_err = format!("no {split:?} floor plan allows {}", tt.name());
    for rejected in 0..MAX_DRAWS {
        let Some(n) = rng.choice(&scenes) else { break };
        let scene = &data.scenes[n];
        match draw(data, scene, tt, &mut rng) {
            Ok((spec, task, problem)) => match check(&problem, &task, &spec) {
                Ok(game) => {
                    return Ok(Generated {
                        split,
                        k,
                        scene: scene.number,
                        spec,
                        task,
                        problem,
                        rejected,
                        game,
                    });
                }
                Err(e) => last_err = e.to_string(),
            },
            Err(e) => last_err = e.to_string(),
        }
    }
    Err(EnvError::Alfworld(format!(
        "no solvable draw for {split:?} game {k} in {MAX_DRAWS} tries (last: {last_err})"
    )))
}

/// A draw is kept if its goal does not hold yet and the expert reaches it; returns the
/// loaded game (parsed back from the PDDL text, so what is played is what is exported).
fn check(problem: &str, task: &str, spec: &TaskSpec) -> crate::Result<Game> {
    let p = Problem::parse(problem)?;
    let game = Game::from_problem(&p, task.to_owned(), Some(spec.clone()))?;
    let engine = Engine::new(std::sync::Arc::new(game), Grammar::V04);
    if engine.won() {
        return Err(EnvError::Alfworld("goal holds at the start".into()));
    }
    expert::plan(&engine, spec)?;
    Ok(engine.game().clone())
}

/// One draw: targets, placements, PDDL text.
fn draw(
    data: &AlfredData,
    scene: &Scene,
    tt: TaskType,
    rng: &mut PyRandom,
) -> crate::Result<(TaskSpec, String, String)> {
    let recs = receptacles(data, scene, rng);
    let rtypes: BTreeSet<&str> = recs.iter().map(|r| r.rtype.as_str()).collect();
    let vro = &data.receptacle_objects;
    let holds = |rt: &str, ot: &str| vro.get(rt).is_some_and(|s| s.contains(ot));
    // Object types of the scene that some receptacle here may hold.
    let mut placeable: Vec<&str> = scene
        .types
        .iter()
        .map(String::as_str)
        .filter(|t| !rtypes.contains(t) || data.movable_receptacles.contains(*t))
        .filter(|t| rtypes.iter().any(|rt| holds(rt, t)))
        .collect();
    placeable.sort_unstable();
    placeable.dedup();
    let hosts: Vec<usize> = (0..recs.len())
        .filter(|&i| LAMP_HOSTS.contains(&recs[i].rtype.as_str()))
        .collect();
    let lamps: Vec<&str> = scene
        .types
        .iter()
        .map(String::as_str)
        .filter(|t| data.can("Toggleable", t))
        .collect();

    // Every feasible choice of targets.
    let mut options: Vec<TaskSpec> = Vec::new();
    {
        let v = &mut options;
        if tt == TaskType::LookAtObjInLight {
            if hosts.is_empty() {
                return Err(EnvError::Alfworld(format!(
                    "FloorPlan{}: nowhere to stand a lamp",
                    scene.number
                )));
            }
            for lamp in &lamps {
                for o in &placeable {
                    v.push(TaskSpec {
                        task_type: tt,
                        object_target: (*o).into(),
                        parent_target: String::new(),
                        toggle_target: (*lamp).into(),
                    });
                }
            }
        }
        let (property, appliance) = match tt {
            TaskType::PickCleanThenPlaceInRecep => (Some("Cleanable"), Some("SinkBasin")),
            TaskType::PickHeatThenPlaceInRecep => (Some("Heatable"), Some("Microwave")),
            TaskType::PickCoolThenPlaceInRecep => (Some("Coolable"), Some("Fridge")),
            _ => (None, None),
        };
        let appliance_missing = appliance.is_some_and(|a| !rtypes.contains(a));
        for o in placeable
            .iter()
            .filter(|_| tt != TaskType::LookAtObjInLight && !appliance_missing)
        {
            if property.is_some_and(|p| !data.can(p, o)) {
                continue;
            }
            for rt in &rtypes {
                let other_home = rtypes.iter().any(|x| x != rt && holds(x, o));
                if holds(rt, o) && Some(*rt) != appliance && other_home {
                    v.push(TaskSpec {
                        task_type: tt,
                        object_target: (*o).into(),
                        parent_target: (*rt).into(),
                        toggle_target: String::new(),
                    });
                }
            }
        }
    }
    let spec = rng
        .choice(&options)
        .ok_or_else(|| {
            EnvError::Alfworld(format!(
                "FloorPlan{}: no feasible {} task",
                scene.number,
                tt.name()
            ))
        })?
        .clone();
    let template = rng
        .choice(&data.goals[&tt].templates)
        .expect("templates")
        .clone();
    let task = task_text(&template, &spec);

    // Objects: (type, receptacle index, id).
    let mut objects: Vec<(String, usize, String)> = Vec::new();
    let mut taken: BTreeSet<String> = recs.iter().map(|r| r.id.clone()).collect();
    let mut place = |t: &str, homes: &[usize], rng: &mut PyRandom, objects: &mut Vec<_>| {
        let Some(&r) = rng.choice(homes) else { return };
        loop {
            let base = recs[r].xyz;
            let j = |rng: &mut PyRandom| (rng.random() - 0.5) * 0.6;
            let xyz = [base[0] + j(rng), base[1] + j(rng).abs(), base[2] + j(rng)];
            let id = mangle(&format!(
                "{t}|{}|{}|{}",
                coord_raw((xyz[0] * 100.0).round() / 100.0),
                coord_raw((xyz[1] * 100.0).round() / 100.0),
                coord_raw((xyz[2] * 100.0).round() / 100.0)
            ));
            if taken.insert(id.clone()) {
                objects.push((t.to_owned(), r, id));
                return;
            }
        }
    };
    for t in &placeable {
        let is_target = *t == spec.object_target;
        let homes: Vec<usize> = (0..recs.len())
            .filter(|&i| holds(&recs[i].rtype, t))
            .filter(|&i| !is_target || recs[i].rtype != spec.parent_target)
            .collect();
        let n = if !is_target {
            1 + rng.randbelow(3)
        } else if tt == TaskType::PickTwoObjAndPlace {
            2 + rng.randbelow(3)
        } else {
            1 + rng.randbelow(4)
        };
        for _ in 0..n {
            place(t, &homes, rng, &mut objects);
        }
    }
    for lamp in &lamps {
        place(lamp, &hosts, rng, &mut objects);
    }
    objects.sort_by(|a, b| a.2.cmp(&b.2));

    // The agent starts away from every receptacle.
    let rec_locs: BTreeSet<&str> = recs.iter().map(|r| r.loc.as_str()).collect();
    let start = loop {
        let l = location(draw_pose(rng));
        if !rec_locs.contains(l.as_str()) {
            break l;
        }
    };

    let problem = write_problem(
        data,
        &recs,
        &objects,
        &start,
        &goal_pddl(data, &spec),
        scene.number,
    );
    Ok((spec, task, problem))
}

fn write_problem(
    data: &AlfredData,
    recs: &[Rec],
    objects: &[(String, usize, String)],
    start: &str,
    goal: &str,
    scene: u32,
) -> String {
    let vro = &data.receptacle_objects;
    let otypes: BTreeSet<&str> = objects
        .iter()
        .map(|o| o.0.as_str())
        .chain(["Knife", "ButterKnife"])
        .collect();
    let rtypes: BTreeSet<&str> = recs
        .iter()
        .map(|r| r.rtype.as_str())
        .chain(["Microwave", "Fridge", "SinkBasin"])
        .collect();
    let mut locs: BTreeSet<&str> = recs.iter().map(|r| r.loc.as_str()).collect();
    locs.insert(start);

    let mut decl = vec!["agent1 - agent".to_owned()];
    decl.extend(otypes.iter().map(|t| format!("{t}Type - otype")));
    decl.extend(rtypes.iter().map(|t| format!("{t}Type - rtype")));
    decl.extend(objects.iter().map(|o| format!("{} - object", o.2)));
    decl.extend(recs.iter().map(|r| format!("{} - receptacle", r.id)));
    decl.extend(locs.iter().map(|l| format!("{l} - location")));

    let mut init = vec![format!("(atLocation agent1 {start})")];
    let present_o: BTreeSet<&str> = objects.iter().map(|o| o.0.as_str()).collect();
    let present_r: BTreeSet<&str> = recs.iter().map(|r| r.rtype.as_str()).collect();
    for rt in &present_r {
        for ot in &present_o {
            if vro.get(*rt).is_some_and(|s| s.contains(*ot)) {
                init.push(format!("(canContain {rt}Type {ot}Type)"));
            }
        }
    }
    for r in recs {
        init.push(format!("(receptacleType {} {}Type)", r.id, r.rtype));
        init.push(format!("(receptacleAtLocation {} {})", r.id, r.loc));
        if data.openable.contains(&r.rtype) {
            init.push(format!("(openable {})", r.id));
        }
    }
    for (t, r, id) in objects {
        init.push(format!("(objectType {id} {t}Type)"));
        if data.can("Toggleable", t) {
            init.push(format!("(toggleable {id})"));
        } else {
            init.push(format!("(pickupable {id})"));
        }
        if data.movable_receptacles.contains(t) {
            init.push(format!("(isReceptacleObject {id})"));
        }
        for (prop, pred) in [
            ("Cleanable", "cleanable"),
            ("Heatable", "heatable"),
            ("Coolable", "coolable"),
            ("Sliceable", "sliceable"),
        ] {
            if data.can(prop, t) {
                init.push(format!("({pred} {id})"));
            }
        }
        init.push(format!("(inReceptacle {id} {})", recs[*r].id));
        init.push(format!("(objectAtLocation {id} {})", recs[*r].loc));
    }
    format!(
        "(define (problem hier_floorplan{scene})\n    (:domain alfred)\n    (:objects\n        {}\n    )\n    (:init\n        {}\n    )\n{}\n",
        decl.join("\n        "),
        init.join("\n        "),
        goal.trim_end()
    )
}
