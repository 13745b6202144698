//! A loaded ALFWorld game: the static world (receptacles, objects, locations, what may contain
//! what, the goal, the task text) and the dynamic [`State`] the actions change.
//!
//! Built from a PDDL problem of the `alfred` domain. Entities are kept in sorted-id order,
//! which is also the order TextWorld lists them in, so list rendering is a plain scan.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::goal::{self, Cond};
use super::pddl::{Problem, Sexp};
use super::{TaskSpec, display_names};
use crate::EnvError;

/// A receptacle (furniture or appliance): `cabinet 1`, `sinkbasin 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct Receptacle {
    /// Lowercased PDDL id.
    pub id: String,
    pub name: String,
    /// ALFRED type without the `Type` suffix (`Cabinet`, `SinkBasin`).
    pub rtype: String,
    /// Index into [`Game::locations`].
    pub location: usize,
    pub openable: bool,
}

/// Static properties of an object (`mug 1`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Object {
    pub id: String,
    pub name: String,
    /// ALFRED type without the `Type` suffix (`Mug`, `DeskLamp`).
    pub otype: String,
    pub pickupable: bool,
    /// A movable receptacle (bowl, mug, plate…): `examine` says `This is a normal …`.
    pub receptacle_object: bool,
    pub cleanable: bool,
    pub heatable: bool,
    pub coolable: bool,
    pub toggleable: bool,
    pub sliceable: bool,
}

/// Object state bits.
pub mod flag {
    pub const HOT: u8 = 1;
    pub const COOL: u8 = 2;
    pub const CLEAN: u8 = 4;
    pub const SLICED: u8 = 8;
    pub const ON: u8 = 16;
    pub const TOGGLED: u8 = 32;
}

/// What changes while playing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Index into [`Game::locations`].
    pub agent_at: usize,
    pub holding: Option<usize>,
    /// Per object: the receptacles it is in (`inReceptacle`), sorted.
    pub inside: Vec<Vec<usize>>,
    /// Per object: its location (`objectAtLocation`), `None` while held.
    pub at: Vec<Option<usize>>,
    /// Per receptacle: `opened`.
    pub opened: Vec<bool>,
    /// Per object: [`flag`] bits.
    pub flags: Vec<u8>,
    /// `(object, receptacle)` pairs whose `inReceptacle` fact was true and was deleted —
    /// TextWorld keeps these as `not_inreceptacle` facts, and `look` lists such objects.
    pub left: BTreeSet<(usize, usize)>,
}

/// A game: static world plus initial state.
#[derive(Clone, Debug)]
pub struct Game {
    /// The task text (`put a hot mug in cabinet`).
    pub task: String,
    /// What the hand-coded expert needs; `None` for a bare PDDL file.
    pub spec: Option<TaskSpec>,
    /// Lowercased id → display name, for every entity TextWorld names.
    pub names: BTreeMap<String, String>,
    pub receptacles: Vec<Receptacle>,
    pub objects: Vec<Object>,
    /// Location ids (lowercased), sorted.
    pub locations: Vec<String>,
    /// `(receptacle type, object type)` pairs of `canContain`.
    pub can_contain: HashSet<(String, String)>,
    /// `fit[o * receptacles.len() + r]`: object `o`'s type may go in receptacle `r`'s type.
    fit: Vec<bool>,
    pub goal: Sexp,
    /// `goal`, compiled against this game's entities.
    pub(crate) goal_cond: Cond,
    /// Per object: the objects inside it (`inReceptacleObject`, only ever from `:init` —
    /// the 0.4.2 domain has no action that changes it).
    pub contents: Vec<Vec<usize>>,
    pub init: State,
}

fn strip_type(t: &str) -> &str {
    t.strip_suffix("Type")
        .or_else(|| t.strip_suffix("type"))
        .unwrap_or(t)
}

impl Game {
    /// Builds a game from an `alfred`-domain problem. Errors name the fact or id at fault.
    pub fn from_problem(
        problem: &Problem,
        task: impl Into<String>,
        spec: Option<TaskSpec>,
    ) -> crate::Result<Self> {
        let names = display_names(problem.entities());
        let lower = |s: &str| s.to_lowercase();
        let mut declared: HashMap<String, String> = HashMap::new();
        for (id, ty) in &problem.objects {
            declared.insert(lower(id), ty.to_lowercase());
        }
        let ids_of = |ty: &str| -> Vec<String> {
            let mut v: Vec<String> = declared
                .iter()
                .filter(|(id, t)| t.as_str() == ty && names.contains_key(id.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            v.sort();
            v
        };
        let rec_ids = ids_of("receptacle");
        let obj_ids = ids_of("object");
        let mut locations = ids_of("location");
        // A location only named in `:objects` still exists for the planner.
        for (id, t) in &declared {
            if t == "location" && !locations.contains(id) {
                locations.push(id.clone());
            }
        }
        locations.sort();
        let rec_ix: HashMap<&str, usize> = rec_ids
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        let obj_ix: HashMap<&str, usize> = obj_ids
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        let loc_ix: HashMap<&str, usize> = locations
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();

        let mut receptacles: Vec<Receptacle> = rec_ids
            .iter()
            .map(|id| Receptacle {
                id: id.clone(),
                name: names[id].clone(),
                rtype: String::new(),
                location: usize::MAX,
                openable: false,
            })
            .collect();
        let mut objects: Vec<Object> = obj_ids
            .iter()
            .map(|id| Object {
                id: id.clone(),
                name: names[id].clone(),
                ..Object::default()
            })
            .collect();
        let n_obj = objects.len();
        let mut state = State {
            agent_at: usize::MAX,
            holding: None,
            inside: vec![Vec::new(); n_obj],
            at: vec![None; n_obj],
            opened: vec![false; receptacles.len()],
            flags: vec![0; n_obj],
            left: BTreeSet::new(),
        };
        let mut can_contain = HashSet::new();
        let mut contents = vec![Vec::new(); n_obj];

        for fact in &problem.init {
            let pred = fact[0].to_lowercase();
            let args: Vec<String> = fact[1..].iter().map(|a| lower(a)).collect();
            let bad =
                || EnvError::Alfworld(format!("`:init` fact ({}): unknown id", fact.join(" ")));
            let rec = |k: usize| rec_ix.get(args[k].as_str()).copied().ok_or_else(bad);
            let obj = |k: usize| obj_ix.get(args[k].as_str()).copied().ok_or_else(bad);
            let loc = |k: usize| loc_ix.get(args[k].as_str()).copied().ok_or_else(bad);
            let want = |n: usize| -> crate::Result<()> {
                if args.len() == n {
                    Ok(())
                } else {
                    Err(EnvError::Alfworld(format!(
                        "`:init` fact ({}): expected {n} arguments",
                        fact.join(" ")
                    )))
                }
            };
            let set_flag = |state: &mut State, o: usize, f: u8| state.flags[o] |= f;
            match pred.as_str() {
                "atlocation" => {
                    want(2)?;
                    state.agent_at = loc(1)?;
                }
                "receptacleatlocation" => {
                    want(2)?;
                    receptacles[rec(0)?].location = loc(1)?;
                }
                "objectatlocation" => {
                    want(2)?;
                    state.at[obj(0)?] = Some(loc(1)?);
                }
                "inreceptacle" => {
                    want(2)?;
                    let (o, r) = (obj(0)?, rec(1)?);
                    if !state.inside[o].contains(&r) {
                        state.inside[o].push(r);
                        state.inside[o].sort_unstable();
                    }
                }
                "openable" => receptacles[rec(0)?].openable = true,
                "opened" => state.opened[rec(0)?] = true,
                "receptacletype" => {
                    want(2)?;
                    receptacles[rec(0)?].rtype = strip_type(&fact[2]).to_owned();
                }
                "objecttype" => {
                    want(2)?;
                    objects[obj(0)?].otype = strip_type(&fact[2]).to_owned();
                }
                "cancontain" => {
                    want(2)?;
                    can_contain.insert((
                        strip_type(&fact[1]).to_owned(),
                        strip_type(&fact[2]).to_owned(),
                    ));
                }
                "holds" => {
                    want(2)?;
                    state.holding = Some(obj(1)?);
                }
                "pickupable" => objects[obj(0)?].pickupable = true,
                "isreceptacleobject" => objects[obj(0)?].receptacle_object = true,
                "cleanable" => objects[obj(0)?].cleanable = true,
                "heatable" => objects[obj(0)?].heatable = true,
                "coolable" => objects[obj(0)?].coolable = true,
                "toggleable" => objects[obj(0)?].toggleable = true,
                "sliceable" => objects[obj(0)?].sliceable = true,
                "isclean" => set_flag(&mut state, obj(0)?, flag::CLEAN),
                "ishot" => set_flag(&mut state, obj(0)?, flag::HOT),
                "iscool" => set_flag(&mut state, obj(0)?, flag::COOL),
                "issliced" => set_flag(&mut state, obj(0)?, flag::SLICED),
                "ison" => set_flag(&mut state, obj(0)?, flag::ON),
                "istoggled" => set_flag(&mut state, obj(0)?, flag::TOGGLED),
                "inreceptacleobject" => {
                    want(2)?;
                    let (inner, outer) = (obj(0)?, obj(1)?);
                    contents[outer].push(inner);
                    contents[outer].sort_unstable();
                }
                // Bookkeeping predicates no action precondition or text reads.
                "moveable"
                | "holdsany"
                | "checked"
                | "examined"
                | "wasinreceptacle"
                | "full"
                | "isreceptacleobjectfull"
                | "holdsanyreceptacleobject" => {}
                other => {
                    return Err(EnvError::Alfworld(format!(
                        "`:init`: unknown predicate `{other}`"
                    )));
                }
            }
        }
        if state.agent_at == usize::MAX {
            return Err(EnvError::Alfworld(
                "`:init` has no `(atLocation <agent> <location>)` fact".into(),
            ));
        }
        for r in &receptacles {
            if r.location == usize::MAX {
                return Err(EnvError::Alfworld(format!(
                    "receptacle `{}` has no receptacleAtLocation",
                    r.id
                )));
            }
            if r.rtype.is_empty() {
                return Err(EnvError::Alfworld(format!(
                    "receptacle `{}` has no receptacleType",
                    r.id
                )));
            }
        }
        let goal = problem
            .goal
            .clone()
            .ok_or_else(|| EnvError::Alfworld("the problem has no `(:goal …)`".into()))?;
        let fit = objects
            .iter()
            .flat_map(|o| {
                receptacles
                    .iter()
                    .map(|r| can_contain.contains(&(r.rtype.clone(), o.otype.clone())))
            })
            .collect();
        let mut game = Self {
            task: task.into(),
            fit,
            goal_cond: Cond::And(Vec::new()),
            contents,
            spec,
            names,
            receptacles,
            objects,
            locations,
            can_contain,
            goal,
            init: state,
        };
        game.goal_cond = goal::compile(&game.goal, &game)?;
        Ok(game)
    }

    /// Whether the goal holds in `state` (TextWorld's `won`).
    pub fn won(&self, state: &State) -> bool {
        goal::holds(&self.goal_cond, self, state)
    }

    /// Receptacles at a location, in sorted-id order.
    pub fn receptacles_at(&self, loc: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.receptacles.len()).filter(move |&r| self.receptacles[r].location == loc)
    }

    /// Whether an object of this type may be put in this receptacle (`canContain`).
    pub fn fits(&self, o: usize, r: usize) -> bool {
        self.fit[o * self.receptacles.len() + r]
    }
}
