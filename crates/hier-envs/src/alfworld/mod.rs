//! ALFWorld, native (issue #5) — **in progress: world loading, names and the intro only.**
//! There is no [`crate::Env`] implementation yet; actions, admissible commands, the game
//! generator and the expert are still to be written. The facts this follows were measured on
//! the real engine (alfworld 0.4.2 + TextWorld 1.7.0) and are recorded, with golden
//! transcripts, in `tests/fixtures/alfworld/` (`NOTES.md`, `golden.jsonl`).
//!
//! - Ids are lowercased ALFRED-mangled ids (`mug_bar__plus_00_dot_60_bar_…`); a display name
//!   is the text before the first `_bar_`, plus `basin` when the id contains it (`sinkbasin`),
//!   then a number: over the sorted ids of one name, the *first* id gets the *highest* number.
//!   Ids without `_bar_` are named `<id> ` (TextWorld's own behaviour). Only ids that occur
//!   in an `:init` fact are entities.
//! - Lists read `nothing` / `a x` / `a x, and a y` / `a x, a y, and a z`, always with `a`, in
//!   sorted-id order (not display order).

pub mod pddl;

use std::collections::BTreeMap;

use pddl::Problem;

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

/// A loaded game: the entities of a PDDL problem with their display names.
#[derive(Clone, Debug)]
pub struct World {
    /// Lowercased id → display name.
    pub names: BTreeMap<String, String>,
    /// Receptacle ids (lowercased), sorted.
    pub receptacles: Vec<String>,
    /// Object ids (lowercased), sorted.
    pub objects: Vec<String>,
    /// The task text (`put a hot mug in cabinet`).
    pub task: String,
}

impl World {
    pub fn new(problem: &Problem, task: impl Into<String>) -> Self {
        let names = display_names(problem.entities());
        let of_type = |t: &str| -> Vec<String> {
            let mut v: Vec<String> = problem
                .objects
                .iter()
                .filter(|(id, ty)| ty == t && names.contains_key(&id.to_lowercase()))
                .map(|(id, _)| id.to_lowercase())
                .collect();
            v.sort();
            v
        };
        Self {
            receptacles: of_type("receptacle"),
            objects: of_type("object"),
            names,
            task: task.into(),
        }
    }

    /// The first observation: every receptacle, in sorted-id order, and the task.
    pub fn intro(&self) -> String {
        let all: Vec<&str> = self
            .receptacles
            .iter()
            .map(|r| self.names[r].as_str())
            .collect();
        format!(
            "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking \
             quickly around you, you see {}.\n\nYour task is to: {}.",
            render_list(&all),
            self.task
        )
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
