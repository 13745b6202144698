//! The rules: which commands are admissible, what they do, and the text they produce —
//! ALFWorld 0.4.2's `alfred.pddl` actions rendered through its `alfred.twl2` grammar, as
//! TextWorld's `PddlEnv` plays them (measured facts: `tests/fixtures/alfworld/NOTES.md`).
//!
//! A command is carried out only if, after trimming, it equals one admissible command exactly;
//! anything else gives `Nothing happens.` and changes nothing.
//!
//! Two grammars, the same rules ([`Grammar`]): ALFWorld 0.3's, which the ReAct/ETO prompts and
//! trajectories are written in (`put X in/on Y`, `You arrive at loc 5.`, no `help`), and
//! 0.4.2's (`move X to Y`, `You arrive at cabinet 1.`, `help`). Each also takes the other's
//! put/move wording as an alias, which the real engines reject; nothing else differs.

use std::sync::Arc;

use super::game::{Game, State, flag};
use super::render_list;
use crate::EnvError;

/// Which ALFWorld text grammar to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Grammar {
    /// `alfred.twl2` of alfworld 0.3.3: the wording of ReAct/ETO prompts and data.
    #[default]
    V03,
    /// `alfred.twl2` of alfworld 0.4.2.
    V04,
}

impl std::str::FromStr for Grammar {
    type Err = EnvError;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "0.3" | "v03" | "react" => Ok(Grammar::V03),
            "0.4" | "v04" => Ok(Grammar::V04),
            other => Err(EnvError::Alfworld(format!(
                "unknown ALFWorld grammar `{other}`: expected 0.3 or 0.4"
            ))),
        }
    }
}

/// One grounded action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Look,
    Inventory,
    Help,
    GoTo(usize),
    Open(usize),
    Close(usize),
    Take(usize, usize),
    Move(usize, usize),
    ExamineReceptacle(usize),
    ExamineObject(usize),
    Use(usize),
    Heat(usize, usize),
    Cool(usize, usize),
    Clean(usize, usize),
    Slice(usize, usize),
}

/// The `help` text of the 0.4.2 grammar (its leading newline is not in the observation).
pub const HELP: &str = "Available commands:\n  look:                             look around your current location\n  inventory:                        check your current inventory\n  go to (receptacle):               move to a receptacle\n  open (receptacle):                open a receptacle\n  close (receptacle):               close a receptacle\n  take (object) from (receptacle):  take an object from a receptacle\n  move (object) to (receptacle):  place an object in or on a receptacle\n  examine (something):              examine a receptacle or an object\n  use (object):                     use an object\n  heat (object) with (receptacle):  heat an object using a receptacle\n  clean (object) with (receptacle): clean an object using a receptacle\n  cool (object) with (receptacle):  cool an object using a receptacle\n  slice (object) with (object):     slice an object using a sharp object\n";

/// The text of an invalid command.
pub const NOTHING_HAPPENS: &str = "Nothing happens.";

/// The result of one command.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub observation: String,
    /// The command was admissible and was carried out.
    pub valid: bool,
    /// The goal holds now.
    pub won: bool,
}

/// A game being played.
#[derive(Clone, Debug)]
pub struct Engine {
    game: Arc<Game>,
    grammar: Grammar,
    state: State,
}

impl Engine {
    pub fn new(game: Arc<Game>, grammar: Grammar) -> Self {
        let state = game.init.clone();
        Self {
            game,
            grammar,
            state,
        }
    }

    pub fn grammar(&self) -> Grammar {
        self.grammar
    }

    pub fn game(&self) -> &Game {
        &self.game
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Back to the initial state.
    pub fn restart(&mut self) {
        self.state = self.game.init.clone();
    }

    pub fn won(&self) -> bool {
        self.game.won(&self.state)
    }

    /// The first observation: every receptacle, in sorted-id order, and the task.
    pub fn intro(&self) -> String {
        let all: Vec<&str> = self
            .game
            .receptacles
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        format!(
            "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking \
             quickly around you, you see {}.\n\nYour task is to: {}.",
            render_list(&all),
            self.game.task
        )
    }

    /// Every action whose preconditions hold, in no particular order.
    pub fn actions(&self) -> Vec<Action> {
        let (g, s) = (&*self.game, &self.state);
        let here: Vec<usize> = g.receptacles_at(s.agent_at).collect();
        let reachable = |r: usize| !g.receptacles[r].openable || s.opened[r];
        let mut out = vec![Action::Look, Action::Inventory];
        if self.grammar == Grammar::V04 {
            out.push(Action::Help);
        }
        for (r, rec) in g.receptacles.iter().enumerate() {
            if rec.location != s.agent_at {
                out.push(Action::GoTo(r));
            }
        }
        for &r in &here {
            out.push(Action::ExamineReceptacle(r));
            if g.receptacles[r].openable {
                out.push(if s.opened[r] {
                    Action::Close(r)
                } else {
                    Action::Open(r)
                });
            }
        }
        for (o, obj) in g.objects.iter().enumerate() {
            for &r in &s.inside[o] {
                if !here.contains(&r) {
                    continue;
                }
                if obj.pickupable && s.holding.is_none() && reachable(r) {
                    out.push(Action::Take(o, r));
                }
                if obj.toggleable {
                    out.push(Action::Use(o));
                }
            }
        }
        if let Some(o) = s.holding {
            let obj = &g.objects[o];
            out.push(Action::ExamineObject(o));
            for &r in &here {
                if reachable(r) && g.fits(o, r) {
                    out.push(Action::Move(o, r));
                }
                match g.receptacles[r].rtype.as_str() {
                    "Microwave" if obj.heatable => out.push(Action::Heat(o, r)),
                    "Fridge" if obj.coolable => out.push(Action::Cool(o, r)),
                    "SinkBasin" if obj.cleanable => out.push(Action::Clean(o, r)),
                    _ => {}
                }
            }
            if matches!(obj.otype.as_str(), "Knife" | "ButterKnife") {
                for (c, cut) in g.objects.iter().enumerate() {
                    if cut.sliceable && s.at[c] == Some(s.agent_at) {
                        out.push(Action::Slice(c, o));
                    }
                }
            }
        }
        out
    }

    /// The command text of an action.
    pub fn command(&self, a: Action) -> String {
        let g = &*self.game;
        let r = |i: usize| g.receptacles[i].name.as_str();
        let o = |i: usize| g.objects[i].name.as_str();
        match a {
            Action::Look => "look".into(),
            Action::Inventory => "inventory".into(),
            Action::Help => "help".into(),
            Action::GoTo(x) => format!("go to {}", r(x)),
            Action::Open(x) => format!("open {}", r(x)),
            Action::Close(x) => format!("close {}", r(x)),
            Action::Take(x, y) => format!("take {} from {}", o(x), r(y)),
            Action::Move(x, y) => match self.grammar {
                Grammar::V03 => format!("put {} in/on {}", o(x), r(y)),
                Grammar::V04 => format!("move {} to {}", o(x), r(y)),
            },
            Action::ExamineReceptacle(x) => format!("examine {}", r(x)),
            Action::ExamineObject(x) => format!("examine {}", o(x)),
            Action::Use(x) => format!("use {}", o(x)),
            Action::Heat(x, y) => format!("heat {} with {}", o(x), r(y)),
            Action::Cool(x, y) => format!("cool {} with {}", o(x), r(y)),
            Action::Clean(x, y) => format!("clean {} with {}", o(x), r(y)),
            Action::Slice(x, y) => format!("slice {} with {}", o(x), o(y)),
        }
    }

    /// Admissible commands, sorted (Python `sorted()`: byte order) and without repeats.
    pub fn admissible(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .actions()
            .into_iter()
            .map(|a| self.command(a))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The admissible action a command names, if any; the other grammar's put/move wording
    /// is read as this grammar's.
    pub fn parse(&self, command: &str) -> Option<Action> {
        let command = command.trim();
        let aliased = alias(command, self.grammar);
        let command = aliased.as_deref().unwrap_or(command);
        self.actions()
            .into_iter()
            .find(|&a| self.command(a) == command)
    }

    /// Carries out one command.
    pub fn step(&mut self, command: &str) -> Outcome {
        let Some(action) = self.parse(command) else {
            return Outcome {
                observation: NOTHING_HAPPENS.into(),
                valid: false,
                won: self.won(),
            };
        };
        let observation = self.apply(action);
        Outcome {
            observation,
            valid: true,
            won: self.won(),
        }
    }

    fn apply(&mut self, a: Action) -> String {
        let game = Arc::clone(&self.game);
        let g = &*game;
        let s = &mut self.state;
        let r = |i: usize| g.receptacles[i].name.as_str();
        let o = |i: usize| g.objects[i].name.as_str();
        match a {
            Action::Look => self.look(),
            Action::Inventory => match s.holding {
                Some(x) => format!("You are carrying: a {}.", o(x)),
                None => "You are not carrying anything.".into(),
            },
            Action::Help => HELP.into(),
            Action::GoTo(x) => {
                let to = g.receptacles[x].location;
                s.agent_at = to;
                let arrived = match self.grammar {
                    Grammar::V03 => g.names[&g.locations[to]].as_str(),
                    Grammar::V04 => r(x),
                };
                format!("You arrive at {arrived}. {}", self.examine_receptacle(x))
            }
            Action::Open(x) => {
                s.opened[x] = true;
                format!("You open the {}. {}", r(x), self.examine_receptacle(x))
            }
            Action::Close(x) => {
                s.opened[x] = false;
                format!("You close the {}.", r(x))
            }
            Action::Take(x, y) => {
                s.inside[x].retain(|&k| k != y);
                s.left.insert((x, y));
                s.holding = Some(x);
                s.at[x] = None;
                format!("You pick up the {} from the {}.", o(x), r(y))
            }
            Action::Move(x, y) => {
                if let Err(i) = s.inside[x].binary_search(&y) {
                    s.inside[x].insert(i, y);
                }
                s.left.remove(&(x, y));
                s.at[x] = Some(s.agent_at);
                s.holding = None;
                match self.grammar {
                    Grammar::V03 => format!("You put the {} in/on the {}.", o(x), r(y)),
                    Grammar::V04 => format!("You move the {} to the {}.", o(x), r(y)),
                }
            }
            Action::ExamineReceptacle(x) => self.examine_receptacle(x),
            Action::ExamineObject(x) => self.examine_object(x),
            Action::Use(x) => {
                s.flags[x] ^= flag::ON;
                s.flags[x] |= flag::TOGGLED;
                // `isToggled` is never deleted, so the grammar's "turn off" branch is
                // unreachable: every use reads "turn on".
                format!("You turn on the {}.", o(x))
            }
            Action::Heat(x, y) => {
                s.flags[x] = (s.flags[x] | flag::HOT) & !flag::COOL;
                format!("You heat the {} using the {}.", o(x), r(y))
            }
            Action::Cool(x, y) => {
                s.flags[x] = (s.flags[x] | flag::COOL) & !flag::HOT;
                format!("You cool the {} using the {}.", o(x), r(y))
            }
            Action::Clean(x, y) => {
                s.flags[x] |= flag::CLEAN;
                format!("You clean the {} using the {}.", o(x), r(y))
            }
            Action::Slice(x, k) => {
                s.flags[x] |= flag::SLICED;
                format!("You sliced the {} with the {}.", o(x), o(k))
            }
        }
    }

    fn names_of(&self, objects: impl Iterator<Item = usize>) -> String {
        let names: Vec<&str> = objects
            .map(|o| self.game.objects[o].name.as_str())
            .collect();
        render_list(&names)
    }

    /// `The R is open. In it, you see …` / `The R is closed.` / `On the R, you see …`.
    fn examine_receptacle(&self, r: usize) -> String {
        let (g, s) = (&*self.game, &self.state);
        let rec = &g.receptacles[r];
        let contents = || self.names_of((0..g.objects.len()).filter(|&o| s.inside[o].contains(&r)));
        match (rec.openable, s.opened[r]) {
            (true, true) => format!("The {} is open. In it, you see {}.", rec.name, contents()),
            (true, false) => format!("The {} is closed.", rec.name),
            _ => format!("On the {}, you see {}.", rec.name, contents()),
        }
    }

    /// The first matching line of the grammar's `examineObject.feedback`.
    fn examine_object(&self, o: usize) -> String {
        let (g, s) = (&*self.game, &self.state);
        let obj = &g.objects[o];
        let n = obj.name.as_str();
        let f = |bits: u8| s.flags[o] & bits == bits;
        use flag::{CLEAN, COOL, HOT, SLICED, TOGGLED};
        if obj.receptacle_object {
            let inside = self.names_of(g.contents[o].iter().copied());
            format!("This is a normal {n}. In it, you see {inside}.")
        } else if f(CLEAN | HOT | SLICED) {
            format!("This is a hot and clean sliced {n}.")
        } else if f(CLEAN | COOL | SLICED) {
            format!("This is a cool and clean sliced {n}.")
        } else if f(CLEAN | SLICED) {
            format!("This is a clean sliced {n}.")
        } else if f(HOT | SLICED) {
            format!("This is a hot sliced {n}.")
        } else if f(COOL | SLICED) {
            format!("This is a cool sliced {n}.")
        } else if f(CLEAN | HOT) {
            format!("This is a hot and clean {n}.")
        } else if f(CLEAN | COOL) {
            format!("This is a cool and clean {n}.")
        } else if f(HOT) {
            format!("This is a hot {n}.")
        } else if f(CLEAN) {
            format!("This is a clean {n}.")
        } else if f(COOL) {
            format!("This is a cold {n}.")
        } else if obj.toggleable && f(TOGGLED) {
            format!("This {n} is on.")
        } else if obj.sliceable && f(SLICED) {
            format!("This is a sliced {n}.")
        } else {
            // `This … is off.` needs a `not_istoggled` fact, which never arises.
            format!("There's nothing special about {n}.")
        }
    }

    /// `look`: the receptacles here, and objects that were taken out of one of them and
    /// now lie at this location outside it (TextWorld's `not_inreceptacle` facts).
    fn look(&self) -> String {
        let (g, s) = (&*self.game, &self.state);
        let here: Vec<usize> = g.receptacles_at(s.agent_at).collect();
        if here.is_empty() {
            return "You are in the middle of a room. Looking quickly around you, you see \
                    nothing."
                .into();
        }
        let facing = render_bare(
            &here
                .iter()
                .map(|&r| g.receptacles[r].name.as_str())
                .collect::<Vec<_>>(),
        );
        let floor = self.names_of((0..g.objects.len()).filter(|&o| {
            s.at[o] == Some(s.agent_at) && s.left.iter().any(|&(x, r)| x == o && here.contains(&r))
        }));
        format!("You are facing the {facing}. Next to it, you see {floor}.")
    }
}

/// `x` / `x, and y` / `x, y, and z` — a list without articles.
fn render_bare(names: &[&str]) -> String {
    match names {
        [] => "nothing".into(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
    }
}

/// The other grammar's wording of a put: `move X to Y` ↔ `put X in/on Y`. Nothing looser
/// (`put X in Y` stays invalid, as in both real engines).
fn alias(command: &str, grammar: Grammar) -> Option<String> {
    let (x, y) = if let Some(rest) = command.strip_prefix("put ") {
        rest.split_once(" in/on ")?
    } else {
        command.strip_prefix("move ")?.split_once(" to ")?
    };
    Some(match grammar {
        Grammar::V03 => format!("put {x} in/on {y}"),
        Grammar::V04 => format!("move {x} to {y}"),
    })
}
