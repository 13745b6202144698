//! The hand-coded expert: a policy with full knowledge of the state that fetches the target
//! object, processes it (heat in the microwave, cool in the fridge, clean in the sink basin),
//! and puts it where the goal wants it — or, for `look_at_obj_in_light`, carries it to the lamp
//! and switches the lamp on. Unlike alfworld's `HandCodedTWAgent`, which searches receptacles
//! one by one, it knows where things are, so its plans are short (ALFWorld's planner-style
//! demonstrations, not its exploration traces).
//!
//! Every action it picks is admissible by construction ([`plan`] checks it anyway), and a
//! plan ends when the goal holds.

use super::engine::{Action, Engine};
use super::game::{Game, State, flag};
use super::{TaskSpec, TaskType};
use crate::EnvError;

/// The longest plan [`plan`] will make before giving up.
pub const MAX_PLAN: usize = 60;

fn typed(g: &Game, o: usize, t: &str) -> bool {
    g.objects[o].otype.eq_ignore_ascii_case(t)
}

fn rtyped(g: &Game, r: usize, t: &str) -> bool {
    g.receptacles[r].rtype.eq_ignore_ascii_case(t)
}

/// Walk to `r`, open it if needed, then `then`.
fn reach(g: &Game, s: &State, r: usize, then: Action) -> Action {
    let rec = &g.receptacles[r];
    if s.agent_at != rec.location {
        Action::GoTo(r)
    } else if rec.openable && !s.opened[r] && !matches!(then, Action::Use(_)) {
        Action::Open(r)
    } else {
        then
    }
}

/// Fetch an object of type `t` (not one of `skip`): go to where it is, open, take.
fn fetch(g: &Game, s: &State, t: &str, skip: impl Fn(usize) -> bool) -> Option<Action> {
    let o = (0..g.objects.len()).find(|&o| {
        typed(g, o, t) && g.objects[o].pickupable && !s.inside[o].is_empty() && !skip(o)
    })?;
    let r = s.inside[o][0];
    Some(reach(g, s, r, Action::Take(o, r)))
}

/// A processing action: `heat/cool/clean (object, appliance)`.
type Process = fn(usize, usize) -> Action;

/// The appliance type of a processing step the held object still needs, and the action.
fn processing(spec: &TaskSpec, s: &State, o: usize) -> Option<(&'static str, Process)> {
    let f = s.flags[o];
    match spec.task_type {
        TaskType::PickCleanThenPlaceInRecep if f & flag::CLEAN == 0 => {
            Some(("SinkBasin", Action::Clean as Process))
        }
        TaskType::PickHeatThenPlaceInRecep if f & flag::HOT == 0 => {
            Some(("Microwave", Action::Heat))
        }
        TaskType::PickCoolThenPlaceInRecep if f & flag::COOL == 0 => Some(("Fridge", Action::Cool)),
        _ => None,
    }
}

/// The expert's next action, or `None` when the goal holds or it sees no way on.
pub fn next_action(engine: &Engine, spec: &TaskSpec) -> Option<Action> {
    if engine.won() {
        return None;
    }
    let (g, s) = (engine.game(), engine.state());
    let held = s.holding;
    let wanted = |o: usize| typed(g, o, &spec.object_target);
    // Holding the wrong thing (after someone else's action): put it down first — here if
    // something here takes it, else back where it came from.
    if let Some(o) = held.filter(|&o| !wanted(o)) {
        let open_here = g
            .receptacles_at(s.agent_at)
            .find(|&r| g.fits(o, r) && (!g.receptacles[r].openable || s.opened[r]));
        if let Some(r) = open_here {
            return Some(Action::Move(o, r));
        }
        let home = g
            .receptacles_at(s.agent_at)
            .find(|&r| g.fits(o, r))
            .or_else(|| {
                s.left
                    .iter()
                    .find(|&&(x, r)| x == o && g.fits(o, r))
                    .map(|&(_, r)| r)
            })?;
        return Some(reach(g, s, home, Action::Move(o, home)));
    }
    match spec.task_type {
        TaskType::LookAtObjInLight => {
            if held.is_none() {
                return fetch(g, s, &spec.object_target, |_| false);
            }
            let lamp = (0..g.objects.len())
                .find(|&l| typed(g, l, &spec.toggle_target) && !s.inside[l].is_empty())?;
            let r = s.inside[lamp][0];
            // Switching a lamp that is already on turns it off: use it only when off.
            if s.agent_at == g.receptacles[r].location && s.flags[lamp] & flag::ON != 0 {
                return None;
            }
            Some(reach(g, s, r, Action::Use(lamp)))
        }
        TaskType::PickTwoObjAndPlace => {
            let count = |r: usize| {
                (0..g.objects.len())
                    .filter(|&o| wanted(o) && s.inside[o].contains(&r))
                    .count()
            };
            // The receptacle that already holds most of them (first on ties).
            let target = (0..g.receptacles.len())
                .filter(|&r| rtyped(g, r, &spec.parent_target))
                .max_by_key(|&r| (count(r), std::cmp::Reverse(r)))?;
            match held {
                Some(o) => Some(reach(g, s, target, Action::Move(o, target))),
                None => fetch(g, s, &spec.object_target, |o| s.inside[o].contains(&target)),
            }
        }
        TaskType::PickAndPlaceSimple
        | TaskType::PickCleanThenPlaceInRecep
        | TaskType::PickHeatThenPlaceInRecep
        | TaskType::PickCoolThenPlaceInRecep => {
            // While the goal does not hold no instance is both processed and in place, so
            // any one will do (even one already in a target receptacle, e.g. a cold mug in
            // the cabinet it must go back to hot).
            let Some(o) = held else {
                return fetch(g, s, &spec.object_target, |_| false);
            };
            if let Some((appliance, act)) = processing(spec, s, o) {
                let r = (0..g.receptacles.len()).find(|&r| rtyped(g, r, appliance))?;
                return Some(if s.agent_at != g.receptacles[r].location {
                    Action::GoTo(r)
                } else {
                    act(o, r)
                });
            }
            let target = (0..g.receptacles.len())
                .find(|&r| rtyped(g, r, &spec.parent_target) && g.fits(o, r))?;
            Some(reach(g, s, target, Action::Move(o, target)))
        }
    }
}

/// The expert's whole plan from the engine's current state, as commands; every command is
/// checked to be admissible and the last one to win.
pub fn plan(engine: &Engine, spec: &TaskSpec) -> crate::Result<Vec<String>> {
    let mut sim = engine.clone();
    let mut out = Vec::new();
    while !sim.won() {
        if out.len() >= MAX_PLAN {
            return Err(EnvError::Alfworld(format!(
                "no plan within {MAX_PLAN} steps"
            )));
        }
        let a = next_action(&sim, spec).ok_or_else(|| {
            EnvError::Alfworld(format!(
                "the expert is stuck after {:?} (task `{}`)",
                out,
                sim.game().task
            ))
        })?;
        let cmd = sim.command(a);
        let outcome = sim.step(&cmd);
        if !outcome.valid {
            return Err(EnvError::Alfworld(format!(
                "the expert chose `{cmd}`, which is not admissible"
            )));
        }
        out.push(cmd);
    }
    Ok(out)
}
