//! Importer for the authors' released hierarchical data (METHODS.md A.3): one JSON object of
//! parallel lists per level.
//!
//! - `high_data/expert.json`: `task_description[i]`, and per trajectory `i` the lists
//!   `obs[i][h]` (`Group action: [...]. Current observation: ...`), `subtask[i][h]`,
//!   `reward[i][h]`, `score[i][h]`, `done[i][h]`.
//! - `low_data/expert.json`: per segment `j`: `subtask[j]` (a prompt ending in
//!   `Subtask: <g>`), `obs[j]` (actions + 1 entries, `Obs: ...`), `action[j][t]`
//!   (`<action>; True|False`), `reward[j][t]`, `score[j][t]`, `done[j][t]`.
//!
//! The group-action text is kept as one string (the authors' actions may contain `, `, so the
//! list cannot be split back reliably); [`Sys1Record::context`] then reproduces the authors'
//! context string exactly. Errors name the file, the list and the index.

use std::path::Path;

use serde_json::Value;

use crate::error::{DataError, Result};
use crate::schema::{Sys1Record, Sys2Transition};

fn load(path: &Path) -> Result<serde_json::Map<String, Value>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DataError::file(path, format!("cannot read: {e}")))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(DataError::file(
            path,
            "expected a JSON object of parallel lists",
        )),
        Err(e) => Err(DataError::line(
            path,
            e.line() as u64,
            format!("not JSON: {e}"),
        )),
    }
}

fn list<'a>(m: &'a serde_json::Map<String, Value>, key: &str, path: &Path) -> Result<&'a [Value]> {
    m.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| DataError::file(path, format!("no list `{key}`")))
}

fn at<'a>(v: &'a [Value], i: usize, what: &str, path: &Path) -> Result<&'a Value> {
    v.get(i)
        .ok_or_else(|| DataError::file(path, format!("`{what}` has no entry {i}")))
}

/// Trajectory `i` of a per-trajectory list: `v[i]`, which must itself be a list.
fn row<'a>(v: &'a [Value], i: usize, key: &str, path: &Path) -> Result<&'a [Value]> {
    at(v, i, key, path)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| DataError::file(path, format!("`{key}[{i}]` is not a list")))
}

fn str_at<'a>(v: &'a Value, what: &str, path: &Path) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| DataError::file(path, format!("`{what}` is not a string")))
}

fn num(v: &Value, what: &str, path: &Path) -> Result<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
    .ok_or_else(|| DataError::file(path, format!("`{what}` is not a number")))
}

fn boolean(v: &Value, what: &str, path: &Path) -> Result<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|x| x != 0.0),
        _ => None,
    }
    .ok_or_else(|| DataError::file(path, format!("`{what}` is not a boolean")))
}

/// Splits `Group action: [X]. Current observation: Y` into `(X, Y)`.
pub fn split_context(s: &str) -> Option<(&str, &str)> {
    let rest = s.strip_prefix("Group action: [")?;
    let (group, obs) = rest.split_once("]. Current observation: ")?;
    Some((group, obs))
}

/// Reads `high_data/expert.json` into System-1 records.
pub fn high_level(path: &Path) -> Result<Vec<Sys1Record>> {
    let m = load(path)?;
    let tasks = list(&m, "task_description", path)?;
    let obs = list(&m, "obs", path)?;
    let subtask = list(&m, "subtask", path)?;
    let reward = list(&m, "reward", path)?;
    let score = list(&m, "score", path)?;
    let done = list(&m, "done", path)?;
    let mut out = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let task = str_at(task, &format!("task_description[{i}]"), path)?;
        let (o, g, r, s, d) = (
            row(obs, i, "obs", path)?,
            row(subtask, i, "subtask", path)?,
            row(reward, i, "reward", path)?,
            row(score, i, "score", path)?,
            row(done, i, "done", path)?,
        );
        for (key, len) in [
            ("obs", o.len()),
            ("reward", r.len()),
            ("score", s.len()),
            ("done", d.len()),
        ] {
            if len != g.len() {
                return Err(DataError::file(
                    path,
                    format!(
                        "`{key}[{i}]` has {len} entries, `subtask[{i}]` has {}",
                        g.len()
                    ),
                ));
            }
        }
        for h in 0..g.len() {
            let ctx = str_at(&o[h], &format!("obs[{i}][{h}]"), path)?;
            let (group, observation) = split_context(ctx).unwrap_or(("", ctx));
            out.push(Sys1Record {
                source: format!("imported:high#{i}"),
                task: task.to_owned(),
                group_action: if group.is_empty() {
                    Vec::new()
                } else {
                    vec![group.to_owned()]
                },
                observation: observation.to_owned(),
                subgoal: str_at(&g[h], &format!("subtask[{i}][{h}]"), path)?.to_owned(),
                reward: num(&r[h], &format!("reward[{i}][{h}]"), path)?,
                score: num(&s[h], &format!("score[{i}][{h}]"), path)?,
                done: boolean(&d[h], &format!("done[{i}][{h}]"), path)?,
            });
        }
    }
    Ok(out)
}

/// Reads `low_data/expert.json` into System-2 transitions.
pub fn low_level(path: &Path) -> Result<Vec<Sys2Transition>> {
    let m = load(path)?;
    let subtask = list(&m, "subtask", path)?;
    let obs = list(&m, "obs", path)?;
    let action = list(&m, "action", path)?;
    let reward = list(&m, "reward", path)?;
    let done = list(&m, "done", path)?;
    let mut out = Vec::new();
    for (j, prompt) in subtask.iter().enumerate() {
        let prompt = str_at(prompt, &format!("subtask[{j}]"), path)?;
        let subgoal = prompt
            .rsplit_once("Subtask: ")
            .map_or(prompt, |(_, g)| g)
            .trim()
            .to_owned();
        let (o, a, r, d) = (
            row(obs, j, "obs", path)?,
            row(action, j, "action", path)?,
            row(reward, j, "reward", path)?,
            row(done, j, "done", path)?,
        );
        if o.len() != a.len() + 1 {
            return Err(DataError::file(
                path,
                format!(
                    "`obs[{j}]` has {} entries, expected `action[{j}]` + 1 = {}",
                    o.len(),
                    a.len() + 1
                ),
            ));
        }
        for (key, len) in [("reward", r.len()), ("done", d.len())] {
            if len != a.len() {
                return Err(DataError::file(
                    path,
                    format!(
                        "`{key}[{j}]` has {len} entries, `action[{j}]` has {}",
                        a.len()
                    ),
                ));
            }
        }
        let strip = |s: &str| s.strip_prefix("Obs: ").unwrap_or(s).to_owned();
        for t in 0..a.len() {
            let text = str_at(&a[t], &format!("action[{j}][{t}]"), path)?;
            let (act, flag) = match text.rsplit_once("; ") {
                Some((x, "True")) => (x, true),
                Some((x, "False")) => (x, false),
                _ => (text, t + 1 == a.len()),
            };
            let terminal = boolean(&d[t], &format!("done[{j}][{t}]"), path)?;
            out.push(Sys2Transition {
                source: format!("imported:low#{j}"),
                subgoal: subgoal.clone(),
                observation: strip(str_at(&o[t], &format!("obs[{j}][{t}]"), path)?),
                action: act.trim().to_owned(),
                subgoal_done: flag,
                reward: num(&r[t], &format!("reward[{j}][{t}]"), path)?,
                env_reward: 0.0,
                next_observation: strip(str_at(&o[t + 1], &format!("obs[{j}][{}]", t + 1), path)?),
                terminal,
                segment: j as u32,
                step: t as u32,
            });
        }
    }
    Ok(out)
}
