//! The subtask System 2 is shown: the planner's subgoal, and — where the task description lists
//! TextCraft's crafting commands — the commands that subgoal needs.
//!
//! The authors' executor data writes TextCraft subtasks as `craft target: <item>` followed by
//! `Crafting commands:` and the commands that make the item (`dataset/textcraft/low_data` of
//! their release). Without them System 2 sees only the subgoal and the current observation, and
//! TextCraft lists its commands in the *first* observation alone: the executor would have to
//! recall recipes, which no small model does for unseen goals. The planner keeps writing short
//! subgoals; the commands are looked up here, the same way when the data is built and when the
//! agent acts, so training and acting show System 2 one text.

use std::collections::BTreeSet;

/// The heading of the crafting commands in a TextCraft task description (and observation).
pub const CRAFTING_COMMANDS: &str = "Crafting commands:";

/// One crafting command, `craft <n> <output> using <m> <ingredient>, …`.
#[derive(Debug)]
struct Recipe<'a> {
    line: &'a str,
    output: &'a str,
    ingredients: Vec<&'a str>,
}

/// `craft <n> <item>` → `<item>` (a leading count is optional).
fn counted_item(text: &str) -> &str {
    let text = text.trim();
    match text.split_once(' ') {
        Some((n, item)) if n.parse::<u64>().is_ok() => item.trim(),
        _ => text,
    }
}

fn parse_recipe(line: &str) -> Option<Recipe<'_>> {
    let (made, using) = line.trim().strip_prefix("craft ")?.split_once(" using ")?;
    Some(Recipe {
        line: line.trim(),
        output: counted_item(made),
        ingredients: using.split(',').map(counted_item).collect(),
    })
}

/// The crafting commands listed in `task` after [`CRAFTING_COMMANDS`] (none if it lists none).
fn recipes(task: &str) -> Vec<Recipe<'_>> {
    task.split_once(CRAFTING_COMMANDS)
        .map(|(_, rest)| rest.lines().filter_map(parse_recipe).collect())
        .unwrap_or_default()
}

/// The items whose commands subgoal `g` needs: `craft <n> <item>` and `craft target: <item>` →
/// `<item>`; `acquire needed items … for|to craft <item>` → the ingredients of `<item>`'s
/// commands, down the recipe tree (the items that have commands; base items are gathered).
fn needed_items<'a>(subgoal: &'a str, recipes: &[Recipe<'a>]) -> BTreeSet<&'a str> {
    let mut out = BTreeSet::new();
    if subgoal.starts_with("acquire needed items") {
        let target = subgoal
            .rsplit_once(" for ")
            .or_else(|| subgoal.rsplit_once(" craft "))
            .map_or("", |(_, t)| t.trim());
        let mut todo: Vec<&str> = vec![target];
        let mut seen = BTreeSet::from([target]);
        while let Some(item) = todo.pop() {
            for r in recipes.iter().filter(|r| r.output == item) {
                for &ing in &r.ingredients {
                    if recipes.iter().any(|r| r.output == ing) && seen.insert(ing) {
                        out.insert(ing);
                        todo.push(ing);
                    }
                }
            }
        }
    } else if let Some(rest) = subgoal.strip_prefix("craft ") {
        let item = rest
            .strip_prefix("target:")
            .map_or_else(|| counted_item(rest), str::trim);
        out.insert(item);
    }
    out
}

/// The subtask System 2 is shown for subgoal `g` of the task described by `task`:
/// `g`, then `Crafting commands:` and, in the task's order, every command of `task` that makes an
/// item `g` needs (see [`needed_items`]); `g` unchanged when it needs none (`gather base items:
/// …`, any ScienceWorld or ALFWorld subgoal) or already carries commands (the authors' data).
/// Only `g`'s first line is read: a planner's reply is one line.
pub fn executor_subtask(task: &str, subgoal: &str) -> String {
    if subgoal.contains(CRAFTING_COMMANDS) {
        return subgoal.to_owned();
    }
    let all = recipes(task);
    if all.is_empty() {
        return subgoal.to_owned();
    }
    let wanted = needed_items(subgoal.lines().next().unwrap_or("").trim(), &all);
    let lines: Vec<&str> = all
        .iter()
        .filter(|r| wanted.contains(r.output))
        .map(|r| r.line)
        .collect();
    if lines.is_empty() {
        return subgoal.to_owned();
    }
    format!("{subgoal}\n{CRAFTING_COMMANDS}\n{}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task description in TextCraft's format (the goal, a blank line, the commands, with
    /// distractors), the commands of the authors' `light blue dye` and `sugar` episodes.
    const TASK: &str = "craft light blue dye\n\nCrafting commands:\n\
        craft 1 blue dye using 1 lapis lazuli\n\
        craft 1 light blue dye using 1 blue orchid\n\
        craft 1 white dye using 1 lily of the valley\n\
        craft 1 white dye using 1 bone meal\n\
        craft 2 light blue dye using 1 blue dye, 1 white dye\n\
        craft 3 bone meal using 1 bone\n\
        craft 4 honey bottle using 1 honey block, 4 glass bottle\n\
        craft 1 blue dye using 1 cornflower";

    #[test]
    fn a_craft_subgoal_gets_the_commands_that_make_its_item() {
        assert_eq!(
            executor_subtask(TASK, "craft 2 light blue dye"),
            "craft 2 light blue dye\nCrafting commands:\n\
             craft 1 light blue dye using 1 blue orchid\n\
             craft 2 light blue dye using 1 blue dye, 1 white dye"
        );
        // The authors' wording of the same subgoal finds the same commands; `blue dye` is not
        // mistaken for `light blue dye`.
        assert_eq!(
            executor_subtask(TASK, "craft target: blue dye"),
            "craft target: blue dye\nCrafting commands:\n\
             craft 1 blue dye using 1 lapis lazuli\n\
             craft 1 blue dye using 1 cornflower"
        );
    }

    #[test]
    fn acquiring_lists_the_ingredients_commands_down_the_tree() {
        assert_eq!(
            executor_subtask(TASK, "acquire needed items to craft light blue dye"),
            "acquire needed items to craft light blue dye\nCrafting commands:\n\
             craft 1 blue dye using 1 lapis lazuli\n\
             craft 1 white dye using 1 lily of the valley\n\
             craft 1 white dye using 1 bone meal\n\
             craft 3 bone meal using 1 bone\n\
             craft 1 blue dye using 1 cornflower"
        );
    }

    #[test]
    fn subgoals_without_commands_stay_as_they_are() {
        for g in [
            "gather base items: 1 bone, 1 lapis lazuli",
            "craft 1 stick",
            "inventory",
        ] {
            assert_eq!(executor_subtask(TASK, g), g);
        }
        // No commands in the task (ScienceWorld, ALFWorld): unchanged.
        assert_eq!(
            executor_subtask("boil water", "craft 1 blue dye"),
            "craft 1 blue dye"
        );
        // Already carrying commands (the authors' imported data): unchanged.
        let theirs = "craft target: sugar\nCrafting commands:\ncraft 1 sugar using 1 sugar cane";
        assert_eq!(executor_subtask(TASK, theirs), theirs);
    }
}
