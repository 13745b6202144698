//! ALFWorld, native (issue #5): ALFWorld's text household games — the `alfred.pddl` actions
//! of alfworld 0.4.2 spoken in its 0.3 or 0.4 grammar — with no Python or TextWorld at run
//! time. Checked line by line against the real engine (alfworld 0.4.2 + TextWorld 1.7.0):
//! `tests/fixtures/alfworld/` holds the script, the measured facts (`NOTES.md`) and the golden
//! transcripts.
//!
//! - [`pddl`] reads problem files, [`game::Game`] is a loaded world, [`engine::Engine`] plays
//!   it (admissible commands, feedback text, `won`).
//! - Ids are lowercased ALFRED-mangled ids (`mug_bar__plus_00_dot_60_bar_…`); a display name
//!   is the text before the first `_bar_`, plus `basin` when the id contains it (`sinkbasin`),
//!   then a number: over the sorted ids of one name, the *first* id gets the *highest* number.
//!   Ids without `_bar_` are named `<id> ` (TextWorld's own behaviour). Only ids that occur
//!   in an `:init` fact are entities.
//! - Lists read `nothing` / `a x` / `a x, and a y` / `a x, a y, and a z`, always with `a`, in
//!   sorted-id order (not display order).

pub mod data;
pub mod engine;
pub mod env;
pub mod expert;
pub mod game;
pub mod generate;
mod goal;
pub mod pddl;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use env::AlfWorld;

/// The six ALFWorld task types (ALFRED's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    PickAndPlaceSimple,
    LookAtObjInLight,
    PickCleanThenPlaceInRecep,
    PickHeatThenPlaceInRecep,
    PickCoolThenPlaceInRecep,
    PickTwoObjAndPlace,
}

impl TaskType {
    pub const ALL: [TaskType; 6] = [
        TaskType::PickAndPlaceSimple,
        TaskType::LookAtObjInLight,
        TaskType::PickCleanThenPlaceInRecep,
        TaskType::PickHeatThenPlaceInRecep,
        TaskType::PickCoolThenPlaceInRecep,
        TaskType::PickTwoObjAndPlace,
    ];

    /// ALFRED's name (`pick_heat_then_place_in_recep`), the key of `goal_library.gdict`.
    pub fn name(self) -> &'static str {
        match self {
            TaskType::PickAndPlaceSimple => "pick_and_place_simple",
            TaskType::LookAtObjInLight => "look_at_obj_in_light",
            TaskType::PickCleanThenPlaceInRecep => "pick_clean_then_place_in_recep",
            TaskType::PickHeatThenPlaceInRecep => "pick_heat_then_place_in_recep",
            TaskType::PickCoolThenPlaceInRecep => "pick_cool_then_place_in_recep",
            TaskType::PickTwoObjAndPlace => "pick_two_obj_and_place",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// What a game asks for, as `traj_data.json`'s `task_type` and `pddl_params` say it (ALFRED
/// type names: `object_target: "Mug"`). The hand-coded expert plans from this.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskSpec {
    pub task_type: TaskType,
    pub object_target: String,
    /// Empty for `look_at_obj_in_light`.
    pub parent_target: String,
    /// Empty unless `look_at_obj_in_light`.
    pub toggle_target: String,
}

/// Display names of entity ids (lowercased), TextWorld/ALFWorld style.
pub fn display_names<'a>(ids: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let mut ids: Vec<String> = ids.into_iter().map(str::to_lowercase).collect();
    ids.sort();
    ids.dedup();
    let base = |id: &str| -> Option<String> {
        let (head, _) = id.split_once("_bar_")?;
        let mut name = head.to_owned();
        if id.contains("basin") {
            name.push_str("basin");
        }
        Some(name)
    };
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for id in &ids {
        match base(id) {
            Some(name) => by_name.entry(name).or_default().push(id),
            None => {
                out.insert(id.clone(), format!("{id} "));
            }
        }
    }
    for (name, members) in by_name {
        let n = members.len();
        for (k, id) in members.into_iter().enumerate() {
            out.insert(id.to_owned(), format!("{name} {}", n - k));
        }
    }
    out
}

/// `nothing` / `a x` / `a x, and a y` / `a x, a y, and a z`.
pub fn render_list(names: &[&str]) -> String {
    match names {
        [] => "nothing".into(),
        [one] => format!("a {one}"),
        [init @ .., last] => {
            let head: Vec<String> = init.iter().map(|n| format!("a {n}")).collect();
            format!("{}, and a {last}", head.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_render_like_textworld() {
        assert_eq!(render_list(&[]), "nothing");
        assert_eq!(render_list(&["knife 1"]), "a knife 1");
        assert_eq!(
            render_list(&["apple 1", "tomato 1"]),
            "a apple 1, and a tomato 1"
        );
        assert_eq!(
            render_list(&["x 1", "y 1", "z 1"]),
            "a x 1, a y 1, and a z 1"
        );
    }

    #[test]
    fn first_sorted_id_gets_the_highest_number() {
        let n = display_names([
            "Bowl_bar__plus_00_dot_27",
            "Bowl_bar__minus_03_dot_83",
            "Bowl_bar__minus_03_dot_86",
            "Sink_bar__plus_00_dot_71_bar_SinkBasin",
            "agent1",
        ]);
        assert_eq!(n["bowl_bar__minus_03_dot_83"], "bowl 3");
        assert_eq!(n["bowl_bar__minus_03_dot_86"], "bowl 2");
        assert_eq!(n["bowl_bar__plus_00_dot_27"], "bowl 1");
        assert_eq!(n["sink_bar__plus_00_dot_71_bar_sinkbasin"], "sinkbasin 1");
        assert_eq!(n["agent1"], "agent1 ");
    }
}
