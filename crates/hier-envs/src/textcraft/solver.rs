//! The TextCraft expert: a shortest action sequence that crafts the goal.
//!
//! A plan fixes one recipe per item to craft (among the recipes shown in the observation) and
//! one member item per tag ingredient (`planks` → `oak planks`). Given those choices the
//! action count is fixed: one `get N X` per base item (any amount in one action) plus
//! `⌈demand / yield⌉` crafts per item, demands flowing from the goal (1) down the chosen
//! recipes. The solver enumerates the choice combinations reachable from the goal
//! (depth-first, first options first) and keeps the cheapest — ties go to the earliest, so
//! plans are deterministic. Past [`SEARCH_BUDGET`] combinations it improves the best plan so
//! far one choice at a time until no single change helps.
//!
//! Action order: all `get`s (in order of first use), then the crafts bottom-up, each
//! intermediate item crafted as many times as needed right before its first consumer.

use std::collections::{BTreeMap, HashMap, HashSet};

use indexmap::IndexMap;

use super::tree::{CraftingTree, RecipeId, display_name};
use crate::error::{EnvError, Result};

/// Combinations evaluated exhaustively before falling back to coordinate descent.
pub const SEARCH_BUDGET: usize = 4096;

/// An expert plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The actions, ready for `step`.
    pub actions: Vec<String>,
    /// Base items and how many of each to get, in action order.
    pub gets: Vec<(String, i128)>,
    /// Items crafted (ids), how many times, and with which recipe, bottom-up.
    pub crafts: Vec<(String, u64, RecipeId)>,
    /// Every reachable choice combination was compared (the plan is shortest among plans
    /// with one recipe per item and one member per tag); `false` after coordinate descent.
    pub exhaustive: bool,
}

/// A choice point: which recipe for an item, or which member for a tag.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Point {
    Recipe(String),
    Member(String),
}

/// Shortest plan for `goal` using only recipes in `allowed` (the observation's lines).
pub fn solve(tree: &CraftingTree, goal: &str, allowed: &[RecipeId]) -> Result<Plan> {
    let search = Search::new(tree, allowed);
    let mut best: Option<(usize, BTreeMap<Point, usize>)> = None;
    let mut evaluated = 0usize;
    let mut stack: Vec<BTreeMap<Point, usize>> = vec![BTreeMap::new()];
    while let Some(choices) = stack.pop() {
        if evaluated >= SEARCH_BUDGET {
            break;
        }
        match search.evaluate(goal, &choices) {
            Outcome::Complete(cost) => {
                evaluated += 1;
                if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                    best = Some((cost, choices));
                }
            }
            Outcome::Open(point, n) => {
                // Push in reverse so the first option is explored first.
                for k in (0..n).rev() {
                    let mut next = choices.clone();
                    next.insert(point.clone(), k);
                    stack.push(next);
                }
            }
            Outcome::Infeasible => {}
        }
    }
    let (mut cost, mut choices) = best.ok_or_else(|| {
        EnvError::State(format!(
            "textcraft solver: no plan crafts {goal} from the shown recipes"
        ))
    })?;
    if evaluated >= SEARCH_BUDGET {
        // Coordinate descent from the best enumerated plan.
        loop {
            let mut improved = false;
            let points: Vec<(Point, usize)> = search.points(&choices);
            for (point, n) in points {
                for k in 0..n {
                    let mut next = choices.clone();
                    next.insert(point.clone(), k);
                    if let Outcome::Complete(c) = search.evaluate(goal, &next)
                        && c < cost
                    {
                        cost = c;
                        choices = next;
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
    let mut plan = search.plan(goal, &choices);
    plan.exhaustive = evaluated < SEARCH_BUDGET;
    Ok(plan)
}

enum Outcome {
    Complete(usize),
    /// The first unassigned choice point met, and its number of options.
    Open(Point, usize),
    Infeasible,
}

struct Search<'a> {
    tree: &'a CraftingTree,
    /// Item → its allowed recipes, in table order.
    options: HashMap<&'a str, Vec<RecipeId>>,
    /// Tag → its obtainable member items, in table order.
    members: HashMap<&'a str, Vec<&'a str>>,
}

/// One node of the chosen recipe graph.
struct Expansion {
    /// Items to craft in bottom-up order, with their recipe.
    order: Vec<(String, RecipeId)>,
    /// Base items in order of first use.
    bases: Vec<String>,
    /// Concrete input item ids of each recipe (tags resolved).
    concrete: HashMap<RecipeId, Vec<String>>,
}

impl<'a> Search<'a> {
    fn new(tree: &'a CraftingTree, allowed: &[RecipeId]) -> Self {
        let allowed: HashSet<RecipeId> = allowed.iter().copied().collect();
        let mut options = HashMap::new();
        for (item, recipes) in &tree.itemid_recipes {
            let ok: Vec<RecipeId> = recipes
                .iter()
                .copied()
                .filter(|r| allowed.contains(r))
                .collect();
            if !ok.is_empty() {
                options.insert(item.as_str(), ok);
            }
        }
        let mut search = Self {
            tree,
            options,
            members: HashMap::new(),
        };
        let mut members: HashMap<&'a str, Vec<&'a str>> = HashMap::new();
        for (id, tag) in &tree.item_id_to_tag {
            if search.obtainable(id) {
                members.entry(tag.as_str()).or_default().push(id.as_str());
            }
        }
        search.members = members;
        search
    }

    fn gettable(&self, id: &str) -> bool {
        !self.tree.is_craftable(id) && !self.tree.is_tag(id) && self.tree.is_valid_item(id)
    }

    fn obtainable(&self, id: &str) -> bool {
        self.options.contains_key(id) || self.gettable(id)
    }

    /// Members of a tag that can be obtained, in table order.
    fn members(&self, tag: &str) -> &[&'a str] {
        self.members.get(tag).map_or(&[], Vec::as_slice)
    }

    /// Walks the graph the choices define; `Err` carries the first open point.
    fn expand(
        &self,
        goal: &str,
        choices: &BTreeMap<Point, usize>,
    ) -> std::result::Result<Option<Expansion>, (Point, usize)> {
        let mut ex = Expansion {
            order: Vec::new(),
            bases: Vec::new(),
            concrete: HashMap::new(),
        };
        let mut state: HashMap<String, bool> = HashMap::new(); // false = on stack, true = done
        if !self.visit(goal, choices, &mut ex, &mut state)? {
            return Ok(None);
        }
        Ok(Some(ex))
    }

    /// Post-order DFS; `Ok(false)` when the choices make the item unobtainable or cyclic.
    fn visit(
        &self,
        item: &str,
        choices: &BTreeMap<Point, usize>,
        ex: &mut Expansion,
        state: &mut HashMap<String, bool>,
    ) -> std::result::Result<bool, (Point, usize)> {
        match state.get(item) {
            Some(true) => return Ok(true),
            Some(false) => return Ok(false),
            None => {}
        }
        let Some(options) = self.options.get(item) else {
            if self.gettable(item) {
                state.insert(item.to_owned(), true);
                ex.bases.push(item.to_owned());
                return Ok(true);
            }
            return Ok(false);
        };
        let point = Point::Recipe(item.to_owned());
        let Some(&k) = choices.get(&point) else {
            return Err((point, options.len()));
        };
        let rid = options[k];
        state.insert(item.to_owned(), false);
        let mut concrete = Vec::new();
        for input in &self.tree.recipes[rid].inputs {
            let id = match &input.item.item_id {
                Some(id) => id.clone(),
                None => {
                    let tag = input.item.tag.as_deref().expect("tag-only input");
                    let members = self.members(tag);
                    if members.is_empty() {
                        return Ok(false);
                    }
                    let point = Point::Member(tag.to_owned());
                    match choices.get(&point) {
                        Some(&m) => members[m].to_owned(),
                        None => return Err((point, members.len())),
                    }
                }
            };
            if !self.visit(&id, choices, ex, state)? {
                return Ok(false);
            }
            concrete.push(id);
        }
        state.insert(item.to_owned(), true);
        ex.concrete.insert(rid, concrete);
        ex.order.push((item.to_owned(), rid));
        Ok(true)
    }

    /// Craft counts and base amounts of an expansion.
    fn quantities(&self, ex: &Expansion) -> (IndexMap<String, u64>, IndexMap<String, i128>) {
        let mut demand: HashMap<&str, i128> = HashMap::new();
        if let Some((goal, _)) = ex.order.last() {
            demand.insert(goal, 1);
        }
        let mut crafts = IndexMap::new();
        for (item, rid) in ex.order.iter().rev() {
            let need = demand.get(item.as_str()).copied().unwrap_or(0);
            let recipe = &self.tree.recipes[*rid];
            let batches = (need + recipe.output.count - 1) / recipe.output.count;
            crafts.insert(item.clone(), batches as u64);
            for (input, id) in recipe.inputs.iter().zip(&ex.concrete[rid]) {
                *demand.entry(id.as_str()).or_default() += batches * input.count;
            }
        }
        let gets = ex
            .bases
            .iter()
            .map(|b| (b.clone(), demand.get(b.as_str()).copied().unwrap_or(0)))
            .collect();
        (crafts, gets)
    }

    fn evaluate(&self, goal: &str, choices: &BTreeMap<Point, usize>) -> Outcome {
        match self.expand(goal, choices) {
            Err((p, n)) => Outcome::Open(p, n),
            Ok(None) => Outcome::Infeasible,
            Ok(Some(ex)) => {
                let (crafts, gets) = self.quantities(&ex);
                Outcome::Complete(crafts.values().sum::<u64>() as usize + gets.len())
            }
        }
    }

    /// The choice points of an assignment (in a fixed order), with their option counts.
    fn points(&self, choices: &BTreeMap<Point, usize>) -> Vec<(Point, usize)> {
        choices
            .keys()
            .map(|point| {
                let n = match point {
                    Point::Recipe(item) => self.options.get(item.as_str()).map_or(0, Vec::len),
                    Point::Member(tag) => self.members(tag).len(),
                };
                (point.clone(), n)
            })
            .collect()
    }

    fn plan(&self, goal: &str, choices: &BTreeMap<Point, usize>) -> Plan {
        let ex = match self.expand(goal, choices) {
            Ok(Some(ex)) => ex,
            _ => unreachable!("the chosen assignment was evaluated as complete"),
        };
        let (crafts, gets) = self.quantities(&ex);
        let mut actions: Vec<String> = gets
            .iter()
            .map(|(id, n)| format!("get {n} {}", display_name(id)))
            .collect();
        let mut plan_crafts = Vec::new();
        for (item, rid) in &ex.order {
            let recipe = &self.tree.recipes[*rid];
            let inputs: Vec<String> = recipe
                .inputs
                .iter()
                .zip(&ex.concrete[rid])
                .map(|(s, id)| format!("{} {}", s.count, display_name(id)))
                .collect();
            let line = format!(
                "craft {} {} using {}",
                recipe.output.count,
                display_name(item),
                inputs.join(", ")
            );
            let times = crafts[item];
            for _ in 0..times {
                actions.push(line.clone());
            }
            plan_crafts.push((item.clone(), times, *rid));
        }
        Plan {
            actions,
            gets: gets.into_iter().collect(),
            crafts: plan_crafts,
            exhaustive: false,
        }
    }
}
