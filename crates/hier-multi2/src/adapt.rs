//! ADaPT (Prasad et al., 2024): as-needed decomposition. An executor (the ReAct agent, allowed
//! to end a sub-task with `finish: success|failure`) tries the task; only when it fails does a
//! planner break the task into steps joined by `AND` (all, in order) or `OR` (the first that
//! succeeds), and each step is solved the same way, recursively, down to depth `max_depth`
//! (the root is depth 0; the paper uses 3):
//!
//! ```text
//! adapt(T, d) = executor(T) ∨ (d < d_max ∧ combine_logic({adapt(T_i, d + 1)}))
//! ```
//!
//! The environment is never reset between attempts: a failed attempt's actions stay done. The
//! root succeeds only when the environment reports success; a sub-task succeeds when its
//! executor says so. All of an episode's attempts share its step limit.
//!
//! Many episodes run in lock step: each is a stack of frames (executing, planning, or working
//! through a plan); every round, the executors that are due answer in one batched call and the
//! planners that are due in another.

use hier_envs::{Env, Task, step_all};

use crate::agent::RolloutConfig;
use crate::error::Result;
use crate::react::{Prompter, Step, Turn, parse_turn, start_episodes};
use hier_train::policy::{TextPolicy, Trace};

/// A plan: its steps and whether all (`AND`) or any (`OR`) must succeed.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub steps: Vec<String>,
    pub all: bool,
}

/// Steps a plan may have at most.
pub const MAX_PLAN_STEPS: usize = 4;

/// Parses `Step 1: …; Step 2: …; Logic: AND|OR` (one line; `;` inside a step is kept; the
/// logic defaults to `AND`). `None` when no step is found.
pub fn parse_plan(reply: &str) -> Option<Plan> {
    let line = reply.lines().next().unwrap_or("").trim();
    let line = line.strip_prefix("Plan:").unwrap_or(line);
    let mut steps: Vec<String> = Vec::new();
    let mut all = true;
    for part in line.split(';') {
        let p = part.trim();
        let lower = p.to_ascii_lowercase();
        if let Some(l) = lower.strip_prefix("logic:") {
            all = !l.trim().starts_with("or");
        } else if lower.starts_with("step") {
            let text = p.split_once(':').map(|(_, t)| t.trim()).unwrap_or("");
            steps.push(text.to_owned());
        } else if let Some(last) = steps.last_mut() {
            last.push_str("; ");
            last.push_str(p);
        }
    }
    steps.retain(|s| !s.is_empty());
    steps.truncate(MAX_PLAN_STEPS);
    (!steps.is_empty()).then_some(Plan { steps, all })
}

/// Renders a plan the way [`parse_plan`] reads it.
pub fn render_plan(steps: &[String], all: bool) -> String {
    let mut parts: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(k, s)| format!("Step {}: {s}", k + 1))
        .collect();
    parts.push(format!("Logic: {}", if all { "AND" } else { "OR" }));
    parts.join("; ")
}

enum Phase {
    Execute {
        first_obs: String,
        local: Vec<Step>,
        turns: usize,
    },
    Plan,
    Iterate {
        plan: Plan,
        next: usize,
    },
}

struct Frame {
    task: String,
    depth: usize,
    phase: Phase,
}

fn execute(task: String, depth: usize, obs: &str) -> Frame {
    Frame {
        task,
        depth,
        phase: Phase::Execute {
            first_obs: obs.to_owned(),
            local: Vec::new(),
            turns: 0,
        },
    }
}

/// Pops the top frame with result `ok` and hands the result up through the plans above it.
/// Returns the root's result once it is known.
fn finish_top(stack: &mut Vec<Frame>, mut ok: bool) -> Option<bool> {
    stack.pop();
    loop {
        let Some(parent) = stack.last_mut() else {
            return Some(ok);
        };
        let Phase::Iterate { plan, next } = &mut parent.phase else {
            unreachable!("only a plan has children");
        };
        *next += 1;
        let decided = if plan.all { !ok } else { ok };
        if !decided && *next < plan.steps.len() {
            return None;
        }
        // An AND plan fails at its first failed step (and succeeds after its last); an OR
        // plan succeeds at its first success (and fails after its last).
        ok = if decided { !plan.all } else { plan.all };
        stack.pop();
    }
}

/// An executor attempt ended with `ok`: a failed one below the depth limit turns into planning.
fn attempt_over(stack: &mut Vec<Frame>, ok: bool, max_depth: usize) -> Option<bool> {
    let top = stack.last_mut().expect("an attempt runs in a frame");
    if !ok && top.depth < max_depth {
        top.phase = Phase::Plan;
        return None;
    }
    finish_top(stack, ok)
}

struct Live {
    ep: crate::react::PromptedEpisode,
    stack: Vec<Frame>,
}

/// The planner's prompt: demonstrations from the expert's subgoals, then the (sub-)task.
fn plan_prompt(
    prompter: &Prompter<'_>,
    task: &str,
    kind: Option<&str>,
    obs: &str,
) -> Result<String> {
    let mut text = String::from(
        "Break a task in a text environment into at most 4 simpler steps. Answer with exactly \
         one line: `Step 1: ...; Step 2: ...; Logic: AND` (AND: every step is needed, in \
         order) or `...; Logic: OR` (any one step is enough).\n\n",
    );
    for d in prompter.demos_for(kind) {
        text.push_str(&format!(
            "Task: {}\nPlan: {}\n\n",
            hier_envs::headline(&d.task),
            render_plan(&d.subgoals, true)
        ));
    }
    let obs: String = obs.chars().take(prompter.spec.demo_obs_chars * 2).collect();
    text.push_str(&format!(
        "Now your task.\nCurrent observation: {}\nTask: {}\nPlan:",
        obs.trim(),
        hier_envs::headline(task)
    ));
    prompter.chat(text)
}

/// Plays `tasks[i]` on `envs[i]` with ADaPT, all in lock step, at most
/// [`RolloutConfig::episode_limit`] environment steps per episode.
pub fn rollout_adapt(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    policy: &mut dyn TextPolicy,
    prompter: &Prompter<'_>,
    rollout: &RolloutConfig,
    origin: &str,
) -> Result<Vec<Trace>> {
    let (max_depth, budget) = (
        prompter.spec.adapt_max_depth,
        prompter.spec.adapt_executor_turns.max(1),
    );
    let mut live: Vec<Live> = start_episodes(envs, tasks, rollout, origin)?
        .into_iter()
        .map(|ep| {
            let root = execute(ep.trace.episode.task.clone(), 0, ep.first_obs());
            Live {
                ep,
                stack: vec![root],
            }
        })
        .collect();
    loop {
        // Start the next step of every plan on top of a stack.
        for l in live.iter_mut().filter(|l| !l.ep.finished) {
            let obs = l.ep.trace.episode.observations.last().expect("obs").clone();
            let top = l.stack.last().expect("a live episode has a frame");
            if let Phase::Iterate { plan, next } = &top.phase {
                let child = execute(plan.steps[*next].clone(), top.depth + 1, &obs);
                let at = l.ep.trace.episode.actions.len();
                l.ep.trace.notes.push((
                    at,
                    format!("subtask (depth {}): {}", child.depth, child.task),
                ));
                l.stack.push(child);
            }
        }
        let due = |want_plan: bool| -> Vec<usize> {
            (0..live.len())
                .filter(|&i| {
                    !live[i].ep.finished
                        && matches!(
                            (&live[i].stack.last().expect("frame").phase, want_plan),
                            (Phase::Plan, true) | (Phase::Execute { .. }, false)
                        )
                })
                .collect()
        };
        let (acting, planning) = (due(false), due(true));
        if acting.is_empty() && planning.is_empty() {
            break;
        }
        // Executors.
        let prompts = acting
            .iter()
            .map(|&i| {
                let f = live[i].stack.last().expect("frame");
                let Phase::Execute {
                    first_obs, local, ..
                } = &f.phase
                else {
                    unreachable!()
                };
                // Sub-tasks are shown the root task's kind of demonstrations.
                prompter.act_prompt(&f.task, live[i].ep.kind, first_obs, local, &[], true)
            })
            .collect::<Result<Vec<_>>>()?;
        let replies = if prompts.is_empty() {
            Vec::new()
        } else {
            policy.reply(&prompts)?
        };
        let mut actions: Vec<Option<String>> = vec![None; live.len()];
        for (&i, r) in acting.iter().zip(&replies) {
            let l = &mut live[i];
            l.ep.charge(r);
            l.ep.turns += 1;
            let turn = parse_turn(&r.text);
            let Some(Frame {
                phase: Phase::Execute { local, turns, .. },
                depth,
                ..
            }) = l.stack.last_mut()
            else {
                unreachable!()
            };
            *turns += 1;
            let depth = *depth;
            match turn {
                Turn::Think(t) => {
                    local.push(Step {
                        line: format!("think: {t}"),
                        observation: "OK.".into(),
                    });
                    l.ep.record_thought(t);
                }
                Turn::Act(a) => actions[i] = Some(a),
                Turn::Finish(claimed) => {
                    // The root's success is the environment's, which has not ended.
                    let ok = claimed && depth > 0;
                    if attempt_over(&mut l.stack, ok, max_depth).is_some() {
                        l.ep.finished = true;
                    }
                }
            }
        }
        let refs: Vec<Option<&str>> = actions.iter().map(|a| a.as_deref()).collect();
        for (i, s) in step_all(envs, &refs).into_iter().enumerate() {
            let Some(s) = s else { continue };
            let l = &mut live[i];
            let s = s.map_err(|e| {
                hier_train::Error::env(format!("{}: step", l.ep.trace.episode.source), e)
            })?;
            let line = actions[i].take().expect("stepped");
            if let Some(Frame {
                phase: Phase::Execute { local, .. },
                ..
            }) = l.stack.last_mut()
            {
                local.push(Step {
                    line: line.clone(),
                    observation: s.observation.clone(),
                });
            }
            l.ep.record_step(line, s);
        }
        // Attempts out of turns fail; every episode is bounded by twice its step limit in turns.
        for &i in &acting {
            let l = &mut live[i];
            if l.ep.finished {
                continue;
            }
            if l.ep.turns >= 2 * l.ep.limit {
                l.ep.finished = true;
                continue;
            }
            let out_of_turns = matches!(
                l.stack.last().map(|f| &f.phase),
                Some(Phase::Execute { turns, .. }) if *turns >= budget
            );
            if out_of_turns && attempt_over(&mut l.stack, false, max_depth).is_some() {
                l.ep.finished = true;
            }
        }
        // Planners.
        let prompts = planning
            .iter()
            .map(|&i| {
                let l = &live[i];
                let obs = l.ep.trace.episode.observations.last().expect("obs");
                plan_prompt(
                    prompter,
                    &l.stack.last().expect("frame").task,
                    l.ep.kind,
                    obs,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let replies = if prompts.is_empty() {
            Vec::new()
        } else {
            policy.reply(&prompts)?
        };
        for (&i, r) in planning.iter().zip(&replies) {
            let l = &mut live[i];
            l.ep.charge(r);
            l.ep.trace.sys2_calls -= 1;
            l.ep.trace.sys1_calls += 1;
            let at = l.ep.trace.episode.actions.len();
            l.ep.trace
                .notes
                .push((at, format!("plan: {}", r.text.trim())));
            match parse_plan(&r.text) {
                Some(plan) => {
                    l.stack.last_mut().expect("frame").phase = Phase::Iterate { plan, next: 0 }
                }
                // An unreadable plan fails the task it was asked for.
                None => {
                    if finish_top(&mut l.stack, false).is_some() {
                        l.ep.finished = true;
                    }
                }
            }
        }
    }
    Ok(live.into_iter().map(|l| l.ep.trace).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_with_their_logic() {
        let p =
            parse_plan("Step 1: find a mug; Step 2: craft 1 x using 1 a; 1 b; Logic: OR").unwrap();
        assert_eq!(p.steps, ["find a mug", "craft 1 x using 1 a; 1 b"]);
        assert!(!p.all);
        let p = parse_plan("Plan: Step 1: a; Step 2: b").unwrap();
        assert!(p.all);
        assert!(!parse_plan(&render_plan(&p.steps, false)).unwrap().all);
        assert_eq!(parse_plan("go to desk 1"), None);
        let many = (1..=6)
            .map(|k| format!("Step {k}: s{k}"))
            .collect::<Vec<_>>()
            .join("; ");
        assert_eq!(parse_plan(&many).unwrap().steps.len(), MAX_PLAN_STEPS);
    }

    fn frame(phase: Phase, depth: usize) -> Frame {
        Frame {
            task: "t".into(),
            depth,
            phase,
        }
    }

    fn plan(n: usize, all: bool) -> Phase {
        Phase::Iterate {
            plan: Plan {
                steps: (0..n).map(|k| format!("s{k}")).collect(),
                all,
            },
            next: 0,
        }
    }

    #[test]
    fn results_combine_by_and_or_logic() {
        let exec = || execute("x".into(), 1, "o");
        // AND: a failed step fails the plan (and the root above it).
        let mut s = vec![frame(plan(2, true), 0), exec()];
        assert_eq!(finish_top(&mut s, false), Some(false));
        // AND: a success moves on to the next step; the last success succeeds.
        let mut s = vec![frame(plan(2, true), 0), exec()];
        assert_eq!(finish_top(&mut s, true), None);
        assert_eq!(s.len(), 1);
        s.push(exec());
        assert_eq!(finish_top(&mut s, true), Some(true));
        // OR: the first success is enough; all failures fail.
        let mut s = vec![frame(plan(3, false), 0), exec()];
        assert_eq!(finish_top(&mut s, true), Some(true));
        let mut s = vec![frame(plan(1, false), 0), exec()];
        assert_eq!(finish_top(&mut s, false), Some(false));
        // Nested: a depth-2 success completing an AND plan hands success to the OR above.
        let mut s = vec![
            frame(plan(2, false), 0),
            frame(plan(1, true), 1),
            execute("y".into(), 2, "o"),
        ];
        assert_eq!(finish_top(&mut s, true), Some(true));
        // A failed attempt below the limit plans; at the limit it fails.
        let mut s = vec![execute("r".into(), 0, "o")];
        assert_eq!(attempt_over(&mut s, false, 3), None);
        assert!(matches!(s[0].phase, Phase::Plan));
        let mut s = vec![frame(plan(1, true), 2), execute("z".into(), 3, "o")];
        assert_eq!(attempt_over(&mut s, false, 3), Some(false));
    }
}
