//! Subgoal segmentation of expert action streams: documented rules that cut a demonstration
//! into consecutive segments, each a meaningful step, and name its subgoal. Segments cover
//! every action exactly once, in order. The rules read only the action text, so they apply to
//! any demonstration in the environment's command language.

use serde::{Deserialize, Serialize};

/// Actions `start..end` of a demonstration serve `subgoal`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub subgoal: String,
    pub start: usize,
    pub end: usize,
}

/// Checks that segments tile `0..n` in order with no empty segment.
pub fn check_tiling(segments: &[Segment], n: usize) -> crate::error::Result<()> {
    let mut at = 0;
    for (i, s) in segments.iter().enumerate() {
        if s.start != at || s.end <= s.start {
            return Err(crate::error::DataError::Invalid(format!(
                "segment {i} `{}` covers {}..{}, expected to start at {at} and be non-empty",
                s.subgoal, s.start, s.end
            )));
        }
        at = s.end;
    }
    if at != n {
        return Err(crate::error::DataError::Invalid(format!(
            "segments end at {at}, the demonstration has {n} actions"
        )));
    }
    Ok(())
}

/// Appends action `i` to the last segment if it has the same subgoal, else opens a new one.
fn push(out: &mut Vec<Segment>, subgoal: String, i: usize) {
    match out.last_mut() {
        Some(last) if last.subgoal == subgoal && last.end == i => last.end = i + 1,
        _ => out.push(Segment {
            subgoal,
            start: i,
            end: i + 1,
        }),
    }
}

/// TextCraft, from the crafting structure of the plan:
/// - the `get` actions (base items) form one subgoal `gather base items: 3 lapis lazuli, …`
///   (each maximal run of them; the solver gets everything first);
/// - each maximal run of `craft … <item> using …` crafting the same item is one subgoal
///   `craft <total count> <item>` (e.g. three `craft 1 blue dye` → `craft 3 blue dye`);
/// - anything else (`inventory`, invalid text) joins the segment it interrupts, or the next one.
pub fn textcraft(actions: &[String]) -> Vec<Segment> {
    #[derive(PartialEq)]
    enum Kind {
        Get(String),
        Craft(String, u64),
        Other,
    }
    let kind = |a: &str| -> Kind {
        if let Some(rest) = a.strip_prefix("get ") {
            return Kind::Get(rest.trim().to_owned());
        }
        if let Some((what, _)) = a
            .strip_prefix("craft ")
            .and_then(|rest| rest.split_once(" using "))
        {
            let (n, item) = what.split_once(' ').unwrap_or(("1", what));
            if let Ok(n) = n.parse() {
                return Kind::Craft(item.trim().to_owned(), n);
            }
        }
        Kind::Other
    };
    // Runs of same-kind actions: (is_get, item for crafts, start, end, gets, total crafted).
    struct Run {
        item: Option<String>,
        start: usize,
        end: usize,
        gets: Vec<String>,
        total: u64,
    }
    let mut runs: Vec<Run> = Vec::new();
    let mut pending_other: Vec<usize> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let k = kind(a);
        let (item, got, n) = match k {
            Kind::Get(g) => (None, Some(g), 0),
            Kind::Craft(item, n) => (Some(item), None, n),
            Kind::Other => {
                pending_other.push(i);
                continue;
            }
        };
        let same = runs
            .last()
            .is_some_and(|r| r.item == item && r.end + pending_other.len() == i);
        if same {
            let r = runs.last_mut().expect("checked");
            r.end = i + 1;
            r.total += n;
            r.gets.extend(got);
        } else {
            let start = pending_other.first().copied().unwrap_or(i);
            runs.push(Run {
                item,
                start,
                end: i + 1,
                gets: got.into_iter().collect(),
                total: n,
            });
        }
        pending_other.clear();
    }
    let mut out: Vec<Segment> = runs
        .into_iter()
        .map(|r| Segment {
            subgoal: match r.item {
                None => format!("gather base items: {}", r.gets.join(", ")),
                Some(item) => format!("craft {} {item}", r.total),
            },
            start: r.start,
            end: r.end,
        })
        .collect();
    extend_tail(&mut out, actions.len(), "explore the crafting commands");
    out
}

/// The authors' two TextCraft subgoals (`acquire needed items …`, `craft target: X`): every
/// action before the last craft serves the first, the last craft the second.
pub fn textcraft_templates(actions: &[String], target: &str) -> Vec<Segment> {
    let n = actions.len();
    let last_craft = actions.iter().rposition(|a| a.starts_with("craft "));
    match last_craft {
        Some(k) if k > 0 => vec![
            Segment {
                subgoal: format!("acquire needed items to craft {target}"),
                start: 0,
                end: k,
            },
            Segment {
                subgoal: format!("craft target: {target}"),
                start: k,
                end: n,
            },
        ],
        _ if n > 0 => vec![Segment {
            subgoal: format!("craft target: {target}"),
            start: 0,
            end: n,
        }],
        _ => Vec::new(),
    }
}

/// Trailing actions no rule claimed join the last segment (or form one, named `name`).
fn extend_tail(out: &mut Vec<Segment>, n: usize, name: &str) {
    let end = out.last().map_or(0, |s| s.end);
    if end < n {
        match out.last_mut() {
            Some(last) => last.end = n,
            None => out.push(Segment {
                subgoal: name.into(),
                start: 0,
                end: n,
            }),
        }
    }
}

/// What a ScienceWorld action does, for segmentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwKind {
    /// `go to X`, `teleport to X`, `open door to X` (opening a door is part of the walk).
    Navigate(String),
    /// `look around`, `look at`, `look in`, `examine`, `read`, `inventory`, `task`, `score`:
    /// no change to the world; joins the step it prepares.
    Observe,
    /// `open X` / `close X` (not doors): joins the manipulation it prepares.
    Prepare,
    /// `pick up`, `put down`, `move`, `pour`, `dunk`, `mix`, `eat`, `drink`, …: the action is
    /// the subgoal (`move metal pot to stove`).
    Manipulate,
    /// `focus on X`: the task's own checkpoint; always its own segment.
    Focus(String),
    /// `activate`, `deactivate`, `use`, `connect`, `disconnect`, `flush`: using a device.
    Device,
    /// `wait`, `wait1`, `sleep`: letting a process run.
    Wait,
}

/// Classifies a ScienceWorld action by its verb.
pub fn scienceworld_kind(a: &str) -> SwKind {
    let a = a.trim();
    let after = |p: &str| a.strip_prefix(p).map(|s| s.trim().to_owned());
    if let Some(place) = after("go to ").or_else(|| after("teleport to ")) {
        return SwKind::Navigate(place);
    }
    if let Some(place) = after("open door to ") {
        return SwKind::Navigate(place);
    }
    if a.starts_with("close door to ") {
        return SwKind::Observe;
    }
    if let Some(x) = after("focus on ") {
        return SwKind::Focus(x);
    }
    let verb = a.split_whitespace().next().unwrap_or("");
    match verb {
        "look" | "examine" | "read" | "inventory" | "task" | "score" | "" => SwKind::Observe,
        "open" | "close" => SwKind::Prepare,
        "activate" | "deactivate" | "use" | "connect" | "disconnect" | "flush" => SwKind::Device,
        "wait" | "wait1" | "wait2" | "sleep" => SwKind::Wait,
        _ => SwKind::Manipulate,
    }
}

/// ScienceWorld gold paths, by these rules over the action stream:
/// 1. a maximal run of navigation (`go to`, `open door to`, with looks in between) is one
///    subgoal, `go to <last destination>`;
/// 2. `focus on X` is its own subgoal, `focus on X`;
/// 3. a manipulation is one subgoal named by the action (`move metal pot to stove`); `open` /
///    `close` of a container and observations just before it join it, and so does an
///    immediate repeat of the same manipulation;
/// 4. device use: consecutive actions on one device (`activate sink`, `deactivate sink`) form
///    one subgoal named by the first (`activate sink`), and a repeated measurement — the same
///    `use … on …` again and again with observations between — is one subgoal
///    `monitor <target> with <device>`;
/// 5. a run of waits is `wait for the process`;
/// 6. observations join the step they precede; trailing ones join the last segment.
pub fn scienceworld(actions: &[String]) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let mut pending: Option<usize> = None; // first unassigned observe/prepare action
    let n = actions.len();
    let mut i = 0;
    while i < n {
        let a = actions[i].trim();
        let kind = scienceworld_kind(a);
        let start = pending.take().unwrap_or(i);
        match kind {
            SwKind::Observe | SwKind::Prepare => {
                pending = Some(start);
                i += 1;
                continue;
            }
            SwKind::Navigate(mut dest) => {
                // Extend over navigation and observations.
                let mut end = i + 1;
                let mut j = i + 1;
                while j < n {
                    match scienceworld_kind(&actions[j]) {
                        SwKind::Navigate(d) => {
                            dest = d;
                            end = j + 1;
                        }
                        SwKind::Observe => {}
                        _ => break,
                    }
                    j += 1;
                }
                // Looks after the last move stay pending for the next step.
                let subgoal = format!("go to {dest}");
                merge_or_push(&mut out, subgoal, start, end);
                if end < j {
                    pending = Some(end);
                }
                i = j;
            }
            SwKind::Focus(x) => {
                out.push(Segment {
                    subgoal: format!("focus on {x}"),
                    start,
                    end: i + 1,
                });
                i += 1;
            }
            SwKind::Manipulate => {
                // The same manipulation twice in a row (gold paths repeat `pick up X`) is one
                // step.
                merge_or_push(&mut out, a.to_owned(), start, i + 1);
                i += 1;
            }
            SwKind::Wait => {
                let mut end = i + 1;
                while end < n && scienceworld_kind(&actions[end]) == SwKind::Wait {
                    end += 1;
                }
                out.push(Segment {
                    subgoal: "wait for the process".into(),
                    start,
                    end,
                });
                i = end;
            }
            SwKind::Device => {
                let device = device_of(a);
                let mut end = i + 1;
                let mut j = i + 1;
                let mut repeats = 0;
                while j < n {
                    let b = actions[j].trim();
                    match scienceworld_kind(b) {
                        SwKind::Device if device_of(b) == device => {
                            if b == a {
                                repeats += 1;
                            }
                            end = j + 1;
                        }
                        SwKind::Observe => {}
                        _ => break,
                    }
                    j += 1;
                }
                let subgoal = match (
                    repeats,
                    a.strip_prefix("use ").and_then(|r| r.split_once(" on ")),
                ) {
                    (r, Some((tool, target))) if r > 0 => {
                        let tool = tool.trim_end_matches(" in inventory");
                        format!("monitor {target} with {tool}")
                    }
                    _ => a.to_owned(),
                };
                out.push(Segment {
                    subgoal,
                    start,
                    end,
                });
                if end < j {
                    pending = Some(end);
                }
                i = j;
            }
        }
    }
    extend_tail(&mut out, n, "look around");
    out
}

fn merge_or_push(out: &mut Vec<Segment>, subgoal: String, start: usize, end: usize) {
    match out.last_mut() {
        Some(last) if last.subgoal == subgoal && last.end == start => last.end = end,
        _ => out.push(Segment {
            subgoal,
            start,
            end,
        }),
    }
}

/// The device an action operates: `activate sink` → `sink`; `use thermometer in inventory on
/// X` → `thermometer in inventory`.
fn device_of(a: &str) -> String {
    let rest = a.split_once(' ').map_or("", |(_, r)| r);
    match rest.split_once(" on ") {
        Some((tool, _)) if a.starts_with("use ") => tool.to_owned(),
        _ => rest.to_owned(),
    }
}

/// ALFWorld expert plans, by phase:
/// - `go to` / `open` before a `take X from R` → `find X`; the take → `take X from R`;
/// - `go to` before `heat/cool/clean X with R` plus the action → `heat X with R` (etc.);
/// - `go to` / `open` before `put X in/on Y` (or `move X to Y`) plus the put → `put X in/on Y`;
/// - `go to` before `use L` plus the use → `use L`;
/// - `slice X with K` (and its approach) → `slice X with K`;
/// - observations (`look`, `examine`, `inventory`, `help`) and `close` join the next phase.
pub fn alfworld(actions: &[String]) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let mut pending: Option<usize> = None;
    for (i, a) in actions.iter().enumerate() {
        let a = a.trim();
        let start = pending.unwrap_or(i);
        let verb = a.split_whitespace().next().unwrap_or("");
        let subgoal = match verb {
            "take" => {
                let (obj, rec) = a[5..].split_once(" from ").unwrap_or((&a[5..], ""));
                if start < i {
                    out.push(Segment {
                        subgoal: format!("find {obj}"),
                        start,
                        end: i,
                    });
                }
                pending = None;
                push(&mut out, format!("take {obj} from {rec}"), i);
                continue;
            }
            "heat" | "cool" | "clean" | "slice" | "use" => a.to_owned(),
            "put" => a.to_owned(),
            "move" => match a[5..].split_once(" to ") {
                Some((x, y)) => format!("put {x} in/on {y}"),
                None => a.to_owned(),
            },
            _ => {
                pending.get_or_insert(i);
                continue;
            }
        };
        out.push(Segment {
            subgoal,
            start,
            end: i + 1,
        });
        pending = None;
    }
    extend_tail(&mut out, actions.len(), "explore the room");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn names(s: &[Segment]) -> Vec<(&str, usize, usize)> {
        s.iter()
            .map(|s| (s.subgoal.as_str(), s.start, s.end))
            .collect()
    }

    #[test]
    fn textcraft_gathers_then_one_subgoal_per_crafted_item() {
        let a = v(&[
            "get 3 lapis lazuli",
            "get 2 bamboo",
            "craft 1 blue dye using 1 lapis lazuli",
            "craft 1 blue dye using 1 lapis lazuli",
            "inventory",
            "craft 1 blue dye using 1 lapis lazuli",
            "craft 2 cyan dye using 1 blue dye, 1 green dye",
            "craft 1 stick using 2 bamboo",
            "inventory",
        ]);
        let s = textcraft(&a);
        assert_eq!(
            names(&s),
            vec![
                ("gather base items: 3 lapis lazuli, 2 bamboo", 0, 2),
                ("craft 3 blue dye", 2, 6),
                ("craft 2 cyan dye", 6, 7),
                ("craft 1 stick", 7, 9),
            ]
        );
        check_tiling(&s, a.len()).unwrap();
        let t = textcraft_templates(&a, "cyan banner");
        assert_eq!(
            names(&t),
            vec![
                ("acquire needed items to craft cyan banner", 0, 7),
                ("craft target: cyan banner", 7, 9)
            ]
        );
    }

    #[test]
    fn scienceworld_rules_on_a_boil_gold_path() {
        let a = v(&[
            "open door to kitchen",
            "go to kitchen",
            "look around",
            "pick up thermometer",
            "open cupboard",
            "pick up metal pot",
            "look around",
            "move metal pot to sink",
            "activate sink",
            "deactivate sink",
            "pick up metal pot",
            "focus on substance in metal pot",
            "move metal pot to stove",
            "activate stove",
            "examine substance in metal pot",
            "use thermometer in inventory on substance in metal pot",
            "examine substance in metal pot",
            "use thermometer in inventory on substance in metal pot",
            "wait1",
            "wait1",
            "look around",
            "pick up metal pot",
            "pick up metal pot",
        ]);
        let s = scienceworld(&a);
        assert_eq!(
            names(&s),
            vec![
                ("go to kitchen", 0, 2),
                ("pick up thermometer", 2, 4),
                ("pick up metal pot", 4, 6),
                ("move metal pot to sink", 6, 8),
                ("activate sink", 8, 10),
                ("pick up metal pot", 10, 11),
                ("focus on substance in metal pot", 11, 12),
                ("move metal pot to stove", 12, 13),
                ("activate stove", 13, 14),
                ("monitor substance in metal pot with thermometer", 14, 18),
                ("wait for the process", 18, 20),
                ("pick up metal pot", 20, 23),
            ]
        );
        check_tiling(&s, a.len()).unwrap();
    }

    #[test]
    fn alfworld_phases() {
        let a = v(&[
            "go to drawer 4",
            "open drawer 4",
            "take spatula 2 from drawer 4",
            "go to microwave 1",
            "heat spatula 2 with microwave 1",
            "go to countertop 3",
            "put spatula 2 in/on countertop 3",
        ]);
        let s = alfworld(&a);
        assert_eq!(
            names(&s),
            vec![
                ("find spatula 2", 0, 2),
                ("take spatula 2 from drawer 4", 2, 3),
                ("heat spatula 2 with microwave 1", 3, 5),
                ("put spatula 2 in/on countertop 3", 5, 7),
            ]
        );
        // 0.4 wording, a take with nothing before it, trailing looks.
        let b = v(&["take cd 1 from desk 1", "move cd 1 to desk 1", "look"]);
        assert_eq!(
            names(&alfworld(&b)),
            vec![
                ("take cd 1 from desk 1", 0, 1),
                ("put cd 1 in/on desk 1", 1, 3)
            ]
        );
    }

    #[test]
    fn tiling_errors_say_where() {
        let s = vec![Segment {
            subgoal: "x".into(),
            start: 1,
            end: 2,
        }];
        assert!(
            check_tiling(&s, 2)
                .unwrap_err()
                .to_string()
                .contains("start at 0")
        );
        assert!(
            check_tiling(&[], 3)
                .unwrap_err()
                .to_string()
                .contains("3 actions")
        );
        assert!(textcraft(&[]).is_empty() && scienceworld(&[]).is_empty());
    }
}
