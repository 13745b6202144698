//! What the game generator knows about ALFRED, read from the alfworld 0.4.2 wheel
//! (`cargo xtask setup` puts it under `<assets>/alfworld`): the 120 floor plans
//! (`layouts/FloorPlan<N>-objects.json`, `-openable.json`), the tables of `constants.py`
//! (what may go in what, which types can be heated/cooled/cleaned/sliced/toggled/opened, the
//! room type of each scene, which goals suit which rooms) and `goal_library.py` (goal PDDL and
//! task templates per task type). Nothing is copied into this repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::TaskType;
use crate::error::{EnvError, Result};

/// One ALFRED scene.
#[derive(Clone, Debug, PartialEq)]
pub struct Scene {
    /// `FloorPlan<number>`.
    pub number: u32,
    /// `Kitchen`, `LivingRoom`, `Bedroom` or `Bathroom`.
    pub room: String,
    /// Object and receptacle types present (`-objects.json`), in file order.
    pub types: Vec<String>,
    /// Receptacle ids with the agent's interaction pose `[x, z, rotation°, horizon°]`
    /// (`-openable.json`), sorted by id.
    pub poses: Vec<(String, [f64; 4])>,
}

/// A goal of `goal_library.gdict`.
#[derive(Clone, Debug, PartialEq)]
pub struct GoalTemplate {
    /// The `(:goal …)` text with `#` for `-` and `{obj}`/`{recep}`/`{toggle}` slots.
    pub pddl: String,
    /// Task texts (`put a hot {obj} in {recep}`).
    pub templates: Vec<String>,
}

/// The ALFRED tables and scenes.
#[derive(Clone, Debug)]
pub struct AlfredData {
    pub root: PathBuf,
    /// `VAL_RECEPTACLE_OBJECTS`: receptacle type → object types it may hold.
    pub receptacle_objects: BTreeMap<String, BTreeSet<String>>,
    /// `VAL_ACTION_OBJECTS`: `Heatable`, `Coolable`, `Cleanable`, `Toggleable`, `Sliceable`.
    pub action_objects: BTreeMap<String, BTreeSet<String>>,
    /// `OPENABLE_CLASS_LIST`.
    pub openable: BTreeSet<String>,
    /// `MOVABLE_RECEPTACLES` (bowl, mug…: objects that are also receptacles).
    pub movable_receptacles: BTreeSet<String>,
    /// `GOALS_VALID`: task type → room types it is generated in.
    pub goals_valid: BTreeMap<String, BTreeSet<String>>,
    /// `goal_library.gdict` for the six task types.
    pub goals: BTreeMap<TaskType, GoalTemplate>,
    /// All floor plans, by number.
    pub scenes: BTreeMap<u32, Scene>,
}

fn table<'a>(t: &'a Map<String, Value>, name: &str, file: &Path) -> Result<&'a Value> {
    t.get(name)
        .ok_or_else(|| EnvError::file(file, format!("no literal table `{name}`")))
}

fn strings(v: &Value, what: &str, file: &Path) -> Result<BTreeSet<String>> {
    v.as_array()
        .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_owned)).collect())
        .ok_or_else(|| EnvError::file(file, format!("`{what}` is not a list of strings")))
}

fn string_sets(v: &Value, what: &str, file: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let m = v
        .as_object()
        .ok_or_else(|| EnvError::file(file, format!("`{what}` is not a dict")))?;
    m.iter()
        .map(|(k, v)| Ok((k.clone(), strings(v, &format!("{what}[{k}]"), file)?)))
        .collect()
}

impl AlfredData {
    /// Reads `<dir>/constants.py`, `<dir>/goal_library.py` and `<dir>/layouts/`.
    pub fn load(dir: &Path) -> Result<Self> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| EnvError::file(p, format!("cannot read: {e}")))
        };
        let cpath = dir.join("constants.py");
        let c = crate::pyliteral::module_tables(&read(&cpath)?)
            .map_err(|m| EnvError::file(&cpath, m.to_string()))?;
        let gpath = dir.join("goal_library.py");
        let g = crate::pyliteral::module_tables(&read(&gpath)?)
            .map_err(|m| EnvError::file(&gpath, m.to_string()))?;

        let receptacle_objects = string_sets(
            table(&c, "VAL_RECEPTACLE_OBJECTS", &cpath)?,
            "VAL_RECEPTACLE_OBJECTS",
            &cpath,
        )?;
        let action_objects = string_sets(
            table(&c, "VAL_ACTION_OBJECTS", &cpath)?,
            "VAL_ACTION_OBJECTS",
            &cpath,
        )?;
        let openable = strings(
            table(&c, "OPENABLE_CLASS_LIST", &cpath)?,
            "OPENABLE_CLASS_LIST",
            &cpath,
        )?;
        let movable_receptacles = strings(
            table(&c, "MOVABLE_RECEPTACLES", &cpath)?,
            "MOVABLE_RECEPTACLES",
            &cpath,
        )?;
        let goals_valid = string_sets(table(&c, "GOALS_VALID", &cpath)?, "GOALS_VALID", &cpath)?;
        let mut room_of: BTreeMap<u32, String> = BTreeMap::new();
        let scene_type = table(&c, "SCENE_TYPE", &cpath)?
            .as_object()
            .ok_or_else(|| EnvError::file(&cpath, "`SCENE_TYPE` is not a dict"))?;
        for (room, numbers) in scene_type {
            for n in numbers.as_array().into_iter().flatten() {
                if let Some(n) = n.as_u64() {
                    room_of.insert(n as u32, room.clone());
                }
            }
        }
        for key in [
            "Heatable",
            "Coolable",
            "Cleanable",
            "Toggleable",
            "Sliceable",
        ] {
            if !action_objects.contains_key(key) {
                return Err(EnvError::file(
                    &cpath,
                    format!("`VAL_ACTION_OBJECTS` has no `{key}`"),
                ));
            }
        }

        let gdict = table(&g, "gdict", &gpath)?;
        let mut goals = BTreeMap::new();
        for t in TaskType::ALL {
            let entry = gdict
                .get(t.name())
                .ok_or_else(|| EnvError::file(&gpath, format!("`gdict` has no `{}`", t.name())))?;
            let pddl = entry["pddl"]
                .as_str()
                .ok_or_else(|| EnvError::file(&gpath, format!("gdict[{}]['pddl']", t.name())))?;
            let templates = entry["templates"]
                .as_array()
                .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_owned)).collect())
                .ok_or_else(|| {
                    EnvError::file(&gpath, format!("gdict[{}]['templates']", t.name()))
                })?;
            goals.insert(
                t,
                GoalTemplate {
                    pddl: pddl.to_owned(),
                    templates,
                },
            );
        }

        let layouts = dir.join("layouts");
        let mut scenes = BTreeMap::new();
        let entries = std::fs::read_dir(&layouts)
            .map_err(|e| EnvError::file(&layouts, format!("cannot list: {e}")))?;
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            let Some(n) = name
                .strip_prefix("FloorPlan")
                .and_then(|r| r.strip_suffix("-objects.json"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let room = room_of.get(&n).cloned().ok_or_else(|| {
                EnvError::file(&cpath, format!("`SCENE_TYPE` has no room for FloorPlan{n}"))
            })?;
            let opath = layouts.join(&name);
            let types: Vec<String> = serde_json::from_str(&read(&opath)?)
                .map_err(|e| EnvError::file(&opath, format!("not a list of type names: {e}")))?;
            let ppath = layouts.join(format!("FloorPlan{n}-openable.json"));
            let poses: BTreeMap<String, [f64; 4]> = serde_json::from_str(&read(&ppath)?)
                .map_err(|e| EnvError::file(&ppath, format!("not id → [x, z, rot, hor]: {e}")))?;
            scenes.insert(
                n,
                Scene {
                    number: n,
                    room,
                    types,
                    poses: poses.into_iter().collect(),
                },
            );
        }
        if scenes.len() != 120 {
            return Err(EnvError::file(
                &layouts,
                format!(
                    "expected the 120 ALFRED floor plans, found {}",
                    scenes.len()
                ),
            ));
        }
        Ok(Self {
            root: dir.to_owned(),
            receptacle_objects,
            action_objects,
            openable,
            movable_receptacles,
            goals_valid,
            goals,
            scenes,
        })
    }

    /// Whether `otype` has the `VAL_ACTION_OBJECTS` property (`Heatable`, …).
    pub fn can(&self, property: &str, otype: &str) -> bool {
        self.action_objects
            .get(property)
            .is_some_and(|s| s.contains(otype))
    }
}

impl AlfredData {
    /// The task type whose `goal_library` templates write `text` (a task as the game states it
    /// after `Your task is to: `, with or without its final period), or `None` if no template
    /// does. A slot (`{obj}`, `{recep}`, `{toggle}`) stands for one word, as ALFRED's type
    /// names are, so `put a clean mug in coffeemachine` is `pick_clean_then_place_in_recep`
    /// and not `pick_and_place_simple` read with the object `clean mug`.
    pub fn task_type_of_text(&self, text: &str) -> Option<TaskType> {
        let text = text.trim().trim_end_matches('.').to_lowercase();
        self.goals.iter().find_map(|(&t, g)| {
            g.templates
                .iter()
                .any(|tpl| template_writes(tpl.trim().trim_end_matches('.'), &text))
                .then_some(t)
        })
    }
}

/// Whether `template` with each `{slot}` filled by one word (no whitespace) gives `text`.
fn template_writes(template: &str, text: &str) -> bool {
    match template.find('{') {
        None => template == text,
        Some(open) => {
            let Some(close) = template[open..].find('}').map(|c| open + c) else {
                return template == text;
            };
            let (literal, rest) = (&template[..open], &template[close + 1..]);
            let Some(after) = text.strip_prefix(literal) else {
                return false;
            };
            // The slot's word: the longest run of non-whitespace that lets the rest match.
            let word_end = after.find(char::is_whitespace).unwrap_or(after.len());
            (1..=word_end)
                .filter(|&end| after.is_char_boundary(end))
                .any(|end| template_writes(rest, &after[end..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::template_writes;

    #[test]
    fn a_slot_is_one_word() {
        assert!(template_writes(
            "put a {obj} in {recep}",
            "put a mug in sinkbasin"
        ));
        assert!(!template_writes(
            "put a {obj} in {recep}",
            "put a clean mug in sinkbasin"
        ));
        assert!(template_writes(
            "put a clean {obj} in {recep}",
            "put a clean mug in sinkbasin"
        ));
        assert!(template_writes(
            "look at {obj} under the {toggle}",
            "look at cd under the desklamp"
        ));
        assert!(!template_writes(
            "look at {obj} under the {toggle}",
            "look at cd under the"
        ));
        assert!(!template_writes("put a {obj} in {recep}", "put a mug in"));
        assert!(template_writes(
            "examine the {obj} with the {toggle}",
            "examine the pen with the desklamp"
        ));
    }
}
