//! PDDL goals of the `alfred` domain, compiled once per game and checked after every step.
//!
//! ALFWorld goals (`goal_library.py`) are first-order: `and`/`or`/`not`, `exists`/`forall`
//! over typed variables (`?r - receptacle`), `=` and the domain's predicates. `won` is the goal
//! holding in the current state — TextWorld does not latch it (undoing the goal un-wins).

use super::game::{Game, State, flag};
use super::pddl::Sexp;
use crate::EnvError;

/// A value a term can take.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Agent,
    Location(usize),
    Receptacle(usize),
    Object(usize),
    /// An ALFRED type constant, lowercased, without `Type` (`mugtype` → `mug`).
    Type(String),
}

#[derive(Clone, Debug)]
pub(crate) enum Term {
    Var(usize),
    Val(Val),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    Agent,
    Location,
    Receptacle,
    Object,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pred {
    AtLocation,
    ReceptacleAtLocation,
    ObjectAtLocation,
    Openable,
    Opened,
    InReceptacle,
    ReceptacleType,
    ObjectType,
    CanContain,
    Holds,
    HoldsAny,
    Pickupable,
    IsReceptacleObject,
    Cleanable,
    Heatable,
    Coolable,
    Toggleable,
    Sliceable,
    Flag(u8),
}

/// A compiled goal.
#[derive(Clone, Debug)]
pub(crate) enum Cond {
    And(Vec<Cond>),
    Or(Vec<Cond>),
    Not(Box<Cond>),
    Exists(Vec<(usize, Domain)>, Box<Cond>),
    Forall(Vec<(usize, Domain)>, Box<Cond>),
    Eq(Term, Term),
    Atom(Pred, Vec<Term>),
}

fn pred(name: &str) -> Option<Pred> {
    Some(match name.to_lowercase().as_str() {
        "atlocation" => Pred::AtLocation,
        "receptacleatlocation" => Pred::ReceptacleAtLocation,
        "objectatlocation" => Pred::ObjectAtLocation,
        "openable" => Pred::Openable,
        "opened" => Pred::Opened,
        "inreceptacle" => Pred::InReceptacle,
        "receptacletype" => Pred::ReceptacleType,
        "objecttype" => Pred::ObjectType,
        "cancontain" => Pred::CanContain,
        "holds" => Pred::Holds,
        "holdsany" => Pred::HoldsAny,
        "pickupable" => Pred::Pickupable,
        "isreceptacleobject" => Pred::IsReceptacleObject,
        "cleanable" => Pred::Cleanable,
        "heatable" => Pred::Heatable,
        "coolable" => Pred::Coolable,
        "toggleable" => Pred::Toggleable,
        "sliceable" => Pred::Sliceable,
        "isclean" => Pred::Flag(flag::CLEAN),
        "ishot" => Pred::Flag(flag::HOT),
        "iscool" => Pred::Flag(flag::COOL),
        "issliced" => Pred::Flag(flag::SLICED),
        "ison" => Pred::Flag(flag::ON),
        "istoggled" => Pred::Flag(flag::TOGGLED),
        _ => return None,
    })
}

fn type_const(s: &str) -> String {
    let l = s.to_lowercase();
    l.strip_suffix("type").map(str::to_owned).unwrap_or(l)
}

/// Compiles `(:goal …)`'s body against a game's entities.
pub(crate) fn compile(goal: &Sexp, game: &Game) -> crate::Result<Cond> {
    let mut scope: Vec<String> = Vec::new();
    compile_in(goal, game, &mut scope)
}

fn compile_in(s: &Sexp, game: &Game, scope: &mut Vec<String>) -> crate::Result<Cond> {
    let l = s
        .list()
        .ok_or_else(|| EnvError::Alfworld(format!("goal: expected a list, found `{s:?}`")))?;
    let head = l
        .first()
        .and_then(Sexp::atom)
        .ok_or_else(|| EnvError::Alfworld("goal: empty or nested head".into()))?;
    let rest = &l[1..];
    let subs = |scope: &mut Vec<String>| -> crate::Result<Vec<Cond>> {
        rest.iter().map(|c| compile_in(c, game, scope)).collect()
    };
    match head.to_lowercase().as_str() {
        "and" => Ok(Cond::And(subs(scope)?)),
        "or" => Ok(Cond::Or(subs(scope)?)),
        "not" => {
            let [c] = rest else {
                return Err(EnvError::Alfworld("goal: `not` takes one condition".into()));
            };
            Ok(Cond::Not(Box::new(compile_in(c, game, scope)?)))
        }
        q @ ("exists" | "forall") => {
            let [vars, body] = rest else {
                return Err(EnvError::Alfworld(format!(
                    "goal: `{q}` takes a variable list and a body"
                )));
            };
            let vars = vars.list().ok_or_else(|| {
                EnvError::Alfworld("goal: quantifier without a variable list".into())
            })?;
            let mut words: Vec<&str> = Vec::new();
            for v in vars {
                let a = v.atom().ok_or_else(|| {
                    EnvError::Alfworld("goal: nested list among quantified variables".into())
                })?;
                words.extend(a.split(',').filter(|w| !w.is_empty()));
            }
            let (mut bound, mut pending) = (Vec::new(), Vec::new());
            let mut it = words.into_iter();
            while let Some(w) = it.next() {
                if w == "-" || w == "#" {
                    let ty = it
                        .next()
                        .ok_or_else(|| EnvError::Alfworld("goal: `-` without a type".into()))?;
                    let dom = match ty.to_lowercase().as_str() {
                        "agent" => Domain::Agent,
                        "location" => Domain::Location,
                        "receptacle" => Domain::Receptacle,
                        "object" => Domain::Object,
                        other => {
                            return Err(EnvError::Alfworld(format!(
                                "goal: cannot quantify over `{other}`"
                            )));
                        }
                    };
                    for name in pending.drain(..) {
                        scope.push(name);
                        bound.push((scope.len() - 1, dom));
                    }
                } else {
                    pending.push(w.to_lowercase());
                }
            }
            if !pending.is_empty() {
                return Err(EnvError::Alfworld(format!(
                    "goal: untyped variables {pending:?}"
                )));
            }
            let body = compile_in(body, game, scope)?;
            scope.truncate(scope.len() - bound.len());
            Ok(if q == "exists" {
                Cond::Exists(bound, Box::new(body))
            } else {
                Cond::Forall(bound, Box::new(body))
            })
        }
        name => {
            let terms = rest
                .iter()
                .map(|t| term(t, game, scope))
                .collect::<Result<Vec<_>, _>>()?;
            if name == "=" {
                let [a, b] = <[Term; 2]>::try_from(terms)
                    .map_err(|_| EnvError::Alfworld("goal: `=` takes two terms".into()))?;
                return Ok(Cond::Eq(a, b));
            }
            let p = pred(name)
                .ok_or_else(|| EnvError::Alfworld(format!("goal: unknown predicate `{name}`")))?;
            Ok(Cond::Atom(p, terms))
        }
    }
}

fn term(t: &Sexp, game: &Game, scope: &[String]) -> crate::Result<Term> {
    let a = t
        .atom()
        .ok_or_else(|| EnvError::Alfworld("goal: nested list as an argument".into()))?;
    let low = a.to_lowercase();
    if low.starts_with('?') {
        let slot = scope
            .iter()
            .rposition(|v| *v == low)
            .ok_or_else(|| EnvError::Alfworld(format!("goal: unbound variable `{a}`")))?;
        return Ok(Term::Var(slot));
    }
    if let Some(r) = game.receptacles.iter().position(|r| r.id == low) {
        return Ok(Term::Val(Val::Receptacle(r)));
    }
    if let Some(o) = game.objects.iter().position(|o| o.id == low) {
        return Ok(Term::Val(Val::Object(o)));
    }
    if let Some(l) = game.locations.iter().position(|l| *l == low) {
        return Ok(Term::Val(Val::Location(l)));
    }
    if low.ends_with("type") {
        return Ok(Term::Val(Val::Type(type_const(&low))));
    }
    // The agent is the one non-typed constant left (`agent1`).
    Ok(Term::Val(Val::Agent))
}

/// Whether the compiled goal holds in `state`.
pub(crate) fn holds(cond: &Cond, game: &Game, state: &State) -> bool {
    let mut slots = Vec::new();
    eval(cond, game, state, &mut slots)
}

fn eval(c: &Cond, g: &Game, s: &State, slots: &mut Vec<Val>) -> bool {
    match c {
        Cond::And(cs) => cs.iter().all(|c| eval(c, g, s, slots)),
        Cond::Or(cs) => cs.iter().any(|c| eval(c, g, s, slots)),
        Cond::Not(c) => !eval(c, g, s, slots),
        Cond::Exists(vars, body) => quantify(vars, body, g, s, slots, true),
        Cond::Forall(vars, body) => quantify(vars, body, g, s, slots, false),
        Cond::Eq(a, b) => value(a, slots) == value(b, slots),
        Cond::Atom(p, args) => atom(*p, args, g, s, slots),
    }
}

fn quantify(
    vars: &[(usize, Domain)],
    body: &Cond,
    g: &Game,
    s: &State,
    slots: &mut Vec<Val>,
    exists: bool,
) -> bool {
    let Some(&(slot, dom)) = vars.first() else {
        return eval(body, g, s, slots);
    };
    // Checked after every step: walk the domain by index rather than collecting it.
    let (count, make): (usize, fn(usize) -> Val) = match dom {
        Domain::Agent => (1, |_| Val::Agent),
        Domain::Location => (g.locations.len(), Val::Location),
        Domain::Receptacle => (g.receptacles.len(), Val::Receptacle),
        Domain::Object => (g.objects.len(), Val::Object),
    };
    if slots.len() <= slot {
        slots.resize(slot + 1, Val::Agent);
    }
    for k in 0..count {
        slots[slot] = make(k);
        let r = quantify(&vars[1..], body, g, s, slots, exists);
        if r == exists {
            return exists;
        }
    }
    !exists
}

fn value<'a>(t: &'a Term, slots: &'a [Val]) -> &'a Val {
    match t {
        Term::Var(i) => &slots[*i],
        Term::Val(v) => v,
    }
}

fn atom(p: Pred, args: &[Term], g: &Game, s: &State, slots: &[Val]) -> bool {
    let v = |k: usize| args.get(k).map(|t| value(t, slots));
    let obj = |k: usize| match v(k) {
        Some(Val::Object(o)) => Some(*o),
        _ => None,
    };
    let rec = |k: usize| match v(k) {
        Some(Val::Receptacle(r)) => Some(*r),
        _ => None,
    };
    let loc = |k: usize| match v(k) {
        Some(Val::Location(l)) => Some(*l),
        _ => None,
    };
    let ty = |k: usize| match v(k) {
        Some(Val::Type(t)) => Some(t.as_str()),
        _ => None,
    };
    let prop = |f: fn(&super::game::Object) -> bool| obj(0).is_some_and(|o| f(&g.objects[o]));
    match p {
        Pred::AtLocation => loc(1) == Some(s.agent_at),
        Pred::ReceptacleAtLocation => {
            matches!((rec(0), loc(1)), (Some(r), Some(l)) if g.receptacles[r].location == l)
        }
        Pred::ObjectAtLocation => {
            matches!((obj(0), loc(1)), (Some(o), l @ Some(_)) if s.at[o] == l)
        }
        Pred::Openable => rec(0).is_some_and(|r| g.receptacles[r].openable),
        Pred::Opened => rec(0).is_some_and(|r| s.opened[r]),
        Pred::InReceptacle => {
            matches!((obj(0), rec(1)), (Some(o), Some(r)) if s.inside[o].contains(&r))
        }
        Pred::ReceptacleType => matches!((rec(0), ty(1)),
            (Some(r), Some(t)) if g.receptacles[r].rtype.eq_ignore_ascii_case(t)),
        Pred::ObjectType => matches!((obj(0), ty(1)),
            (Some(o), Some(t)) if g.objects[o].otype.eq_ignore_ascii_case(t)),
        Pred::CanContain => match (ty(0), ty(1)) {
            (Some(rt), Some(ot)) => g
                .can_contain
                .iter()
                .any(|(r, o)| r.eq_ignore_ascii_case(rt) && o.eq_ignore_ascii_case(ot)),
            _ => false,
        },
        Pred::Holds => obj(1).is_some() && s.holding == obj(1),
        Pred::HoldsAny => s.holding.is_some(),
        Pred::Pickupable => prop(|o| o.pickupable),
        Pred::IsReceptacleObject => prop(|o| o.receptacle_object),
        Pred::Cleanable => prop(|o| o.cleanable),
        Pred::Heatable => prop(|o| o.heatable),
        Pred::Coolable => prop(|o| o.coolable),
        Pred::Toggleable => prop(|o| o.toggleable),
        Pred::Sliceable => prop(|o| o.sliceable),
        Pred::Flag(f) => obj(0).is_some_and(|o| s.flags[o] & f != 0),
    }
}
