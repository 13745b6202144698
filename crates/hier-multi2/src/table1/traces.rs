//! A handful of whole episodes per method and environment, as Markdown
//! (`traces/<env>-<method>.md`), so that a reader can see the agents act: for every split of the
//! first evaluation stage, the first solved and the first failed episode in the order played —
//! a rule, not a choice of the nicest ones. The stages' `traces.jsonl` hold every episode.

use std::fmt::Write as _;
use std::path::Path;

use hier_envs::Split;
use hier_train::eval::EpisodeResult;
use hier_train::policy::Trace;
use hier_train::stages::read_jsonl;

use super::evaluate::SplitTasks;
use crate::envs::EnvKind;
use crate::error::{Error, Result};
use crate::table1::profile::Method;
use hier_train::SharedErrors as _;

/// Observations longer than this many characters are cut in the Markdown (whole in the stage).
pub const OBSERVATION_CHARS: usize = 1500;

/// One episode shown: its result and what was played — one trace, or Reflexion's trials.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub split: Split,
    pub result: EpisodeResult,
    pub trials: Vec<Trace>,
}

/// The samples of one method on one environment, and the stage they come from.
#[derive(Clone, Debug)]
pub struct MethodTraces {
    pub method: Method,
    pub env: EnvKind,
    /// The evaluation stage's directory name (`eval-multi2-textcraft-…`).
    pub stage: String,
    pub samples: Vec<Sample>,
}

/// The episodes of a done evaluation stage `dir` (`results`: its `episodes.jsonl`, as the
/// evaluation returned them), each with what it played: Reflexion's consecutive trials of one
/// task are one episode (its result is pass@trials), every other agent's traces match its
/// results one to one.
fn episodes<'r>(
    dir: &Path,
    results: &'r [EpisodeResult],
    reflexion: bool,
) -> Result<Vec<(&'r EpisodeResult, Vec<Trace>)>> {
    let traces: Vec<Trace> = read_jsonl(&dir.join("traces.jsonl"))?;
    let mut runs: Vec<Vec<Trace>> = Vec::new();
    for t in traces {
        match runs.last_mut() {
            Some(run) if reflexion && run[0].episode.source == t.episode.source => run.push(t),
            _ => runs.push(vec![t]),
        }
    }
    if runs.len() != results.len() {
        return Err(Error::invalid(format!(
            "{}: traces.jsonl holds {} episodes, episodes.jsonl {}",
            dir.display(),
            runs.len(),
            results.len()
        )));
    }
    Ok(results.iter().zip(runs).collect())
}

/// For every split, the first solved and the first failed episode of the stage's first seed,
/// in the order played; `results` are the stage's episodes (`episodes.jsonl`).
pub(super) fn pick(
    dir: &Path,
    results: &[EpisodeResult],
    reflexion: bool,
    splits: &[SplitTasks],
) -> Result<Vec<Sample>> {
    let played = episodes(dir, results, reflexion)?;
    let Some(seed) = played.iter().map(|(r, _)| r.seed).min() else {
        return Ok(Vec::new());
    };
    let mut samples = Vec::new();
    for (split, tasks, _) in splits {
        for solved in [true, false] {
            if let Some((r, trials)) = played
                .iter()
                .find(|(r, _)| r.seed == seed && r.success == solved && tasks.contains(&r.task))
            {
                samples.push(Sample {
                    split: *split,
                    result: (*r).clone(),
                    trials: trials.clone(),
                });
            }
        }
    }
    Ok(samples)
}

/// `text` cut to [`OBSERVATION_CHARS`] characters, saying how much was left out.
fn cut(text: &str) -> String {
    let n = text.chars().count();
    if n <= OBSERVATION_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(OBSERVATION_CHARS).collect();
    format!("{kept}\n… ({} more characters)", n - OBSERVATION_CHARS)
}

/// A fenced block whose fence is longer than any run of backticks inside `text`.
fn block(md: &mut String, text: &str) {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = write!(md, "{fence}text\n{text}\n{fence}\n\n");
}

/// One trace, step by step: System 1's subgoal where it spoke, the action with System 2's
/// completion flag (hierarchical agents), what the agent said besides actions (ReAct's
/// thoughts, Reflexion's reflections, ADaPT's plans), reward, score and the observation.
fn render_trace(md: &mut String, t: &Trace) {
    let ep = &t.episode;
    md.push_str("**Task.**\n\n");
    block(md, &ep.task);
    md.push_str("**Observation 0.**\n\n");
    block(md, &cut(ep.observations.first().map_or("", String::as_str)));
    for (i, action) in ep.actions.iter().enumerate() {
        render_said(md, t, |at| at == i);
        let flag = t
            .flags
            .get(i)
            .map_or(String::new(), |f| format!(" · System 2 says done: {f}"));
        let _ = write!(
            md,
            "**Step {}** · action `{}`{flag} · reward {} · score {:.2}\n\n",
            i + 1,
            action.replace('`', "'"),
            ep.rewards.get(i).copied().unwrap_or(0.0),
            ep.scores.get(i).copied().unwrap_or(0.0),
        );
        block(
            md,
            &cut(ep.observations.get(i + 1).map_or("", String::as_str)),
        );
    }
    // What was said after the last action — all of it where the agent took none (ADaPT's
    // executor can spend its turns on thoughts) — would otherwise be lost from the page.
    let n = ep.actions.len();
    if n > 0 && (t.subgoals.iter().chain(&t.notes)).any(|(at, _)| *at >= n) {
        md.push_str("*After the last action:*\n\n");
    }
    render_said(md, t, |at| at >= n);
    let _ = write!(
        md,
        "*End:* {} after {} actions (the environment {} the episode); {} System-1 calls, {} System-2 \
         calls, {} prompt + {} generated tokens.\n\n",
        if ep.success { "solved" } else { "not solved" },
        ep.actions.len(),
        if ep.done { "ended" } else { "did not end" },
        t.sys1_calls,
        t.sys2_calls,
        t.prompt_tokens,
        t.generated_tokens,
    );
}

/// System 1's subgoals, then the agent's other words (thoughts, reflections, plans), whose
/// position — the number of actions taken before they were said — `at` accepts.
fn render_said(md: &mut String, t: &Trace, at: impl Fn(usize) -> bool) {
    for (_, subgoal) in t.subgoals.iter().filter(|(i, _)| at(*i)) {
        let _ = write!(
            md,
            "*System 1, subgoal:* `{}`\n\n",
            subgoal.replace('\n', " ⏎ ")
        );
    }
    for (_, note) in t.notes.iter().filter(|(i, _)| at(*i)) {
        let _ = write!(md, "> {}\n\n", note.replace('\n', "\n> "));
    }
}

/// The Markdown of one method's samples on one environment.
pub fn render(profile_name: &str, traces: &MethodTraces) -> String {
    let mut md = format!(
        "# {} on {} — sample episodes (profile `{profile_name}`)\n\nFrom the evaluation stage \
         `stages/{}`: for every split, the first solved and the first failed episode of its \
         evaluation seed, in the order played (no solved one where it solved none). Observations \
         over {OBSERVATION_CHARS} characters are cut here; the stage's `traces.jsonl` holds every \
         episode whole.\n\n",
        traces.method.label(),
        traces.env.name(),
        traces.stage,
    );
    if traces.samples.is_empty() {
        md.push_str("The stage played no episode.\n");
    }
    for s in &traces.samples {
        let r = &s.result;
        let _ = write!(
            md,
            "## {} — {}: `{}` (seed {}, {} actions, final score {:.2}, {} tokens)\n\n",
            traces.env.column_label(s.split),
            if r.success { "solved" } else { "not solved" },
            r.task,
            r.seed,
            r.steps,
            r.score,
            r.tokens,
        );
        if s.trials.len() > 1 {
            for (k, t) in s.trials.iter().enumerate() {
                let _ = write!(md, "### Trial {} of {}\n\n", k + 1, s.trials.len());
                render_trace(&mut md, t);
            }
        } else if let Some(t) = s.trials.first() {
            render_trace(&mut md, t);
        }
    }
    md
}

/// Writes `traces/<env>-<method>.md` under `out` for every method and environment, atomically.
pub fn write(out: &Path, profile_name: &str, all: &[MethodTraces]) -> Result<()> {
    if all.is_empty() {
        return Ok(());
    }
    let dir = out.join("traces");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    for t in all {
        let path = dir.join(format!("{}-{}.md", t.env.name(), t.method.name()));
        hier_backbone::write_atomic(&path, render(profile_name, t).as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hier_data::build::Episode;
    use hier_envs::Task;

    fn trace(source: &str, actions: &[&str], success: bool) -> Trace {
        Trace {
            episode: Episode {
                source: source.into(),
                task: "craft stick".into(),
                observations: std::iter::once("start".to_owned())
                    .chain(actions.iter().map(|a| format!("after {a}")))
                    .collect(),
                actions: actions.iter().map(|a| a.to_string()).collect(),
                rewards: vec![0.0; actions.len()],
                scores: vec![if success { 1.0 } else { 0.0 }; actions.len()],
                done: success,
                success,
                origin: "eval".into(),
            },
            subgoals: vec![(0, "get planks".into())],
            flags: vec![true; actions.len()],
            sys1_calls: 1,
            sys2_calls: actions.len(),
            prompt_tokens: 10,
            generated_tokens: 2,
            notes: Vec::new(),
        }
    }

    fn result(task: &Task, seed: u64, success: bool) -> EpisodeResult {
        EpisodeResult {
            task: task.clone(),
            seed,
            success,
            score: if success { 1.0 } else { 0.0 },
            steps: 1,
            tokens: 12,
            sys1_calls: 1,
            expert_steps: None,
            pass1: None,
        }
    }

    fn stage(results: &[EpisodeResult], traces: &[Trace]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        hier_train::runlog::write_jsonl(&dir.path().join("episodes.jsonl"), results).unwrap();
        hier_train::runlog::write_jsonl(&dir.path().join("traces.jsonl"), traces).unwrap();
        dir
    }

    /// Tasks a, b, c on ID, d on OOD: seed 0 fails a, solves b and c, fails d; the picks are
    /// (ID, b) and (ID, a) — first solved, then first failed, in the order played — and
    /// (OOD, d); the later seed's solved d is not the stage's first seed.
    #[test]
    fn picks_the_first_solved_and_failed_episode_per_split() {
        let t: Vec<Task> = (0..4).map(|i| Task::new("craft", i)).collect();
        let results = [
            result(&t[0], 0, false),
            result(&t[1], 0, true),
            result(&t[2], 0, true),
            result(&t[3], 0, false),
            result(&t[3], 1, true),
        ];
        let traces: Vec<Trace> = results
            .iter()
            .map(|r| trace(&format!("textcraft/{}", r.task), &["x"], r.success))
            .collect();
        let dir = stage(&results, &traces);
        let splits: Vec<SplitTasks> = vec![
            (Split::Id, t[..3].to_vec(), vec![None; 3]),
            (Split::Ood, vec![t[3].clone()], vec![None]),
        ];
        let picked = pick(dir.path(), &results, false, &splits).unwrap();
        let got: Vec<(Split, &Task, u64)> = picked
            .iter()
            .map(|s| (s.split, &s.result.task, s.result.seed))
            .collect();
        assert_eq!(
            got,
            [
                (Split::Id, &t[1], 0),
                (Split::Id, &t[0], 0),
                (Split::Ood, &t[3], 0)
            ]
        );
        assert_eq!(picked[0].trials, vec![traces[1].clone()]);
    }

    /// Reflexion's trials of one task are one episode; a count that does not match names the
    /// stage.
    #[test]
    fn reflexion_trials_group_and_mismatches_are_refused() {
        let t = [Task::new("craft", 0), Task::new("craft", 1)];
        let results = [result(&t[0], 0, true), result(&t[1], 0, false)];
        let traces = [
            trace("textcraft/craft#0", &["a"], false),
            trace("textcraft/craft#0", &["b"], true),
            trace("textcraft/craft#1", &["c"], false),
        ];
        let dir = stage(&results, &traces);
        let splits: Vec<SplitTasks> = vec![(Split::Id, t.to_vec(), vec![None; 2])];
        let picked = pick(dir.path(), &results, true, &splits).unwrap();
        assert_eq!(picked[0].trials.len(), 2);
        assert_eq!(picked[1].trials, vec![traces[2].clone()]);
        let md = render(
            "p",
            &MethodTraces {
                method: Method::Reflexion,
                env: EnvKind::Textcraft,
                stage: "eval-reflexion-textcraft-0".into(),
                samples: picked,
            },
        );
        assert!(md.contains("### Trial 2 of 2"), "{md}");
        let err = pick(dir.path(), &results, false, &splits)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("traces.jsonl holds 3 episodes, episodes.jsonl 2"),
            "{err}"
        );
    }

    /// The page of one TextCraft sample, ID, seed 0: the episode `t` played by `method`.
    fn render_one(method: Method, t: Trace, success: bool) -> String {
        render(
            "p",
            &MethodTraces {
                method,
                env: EnvKind::Textcraft,
                stage: format!("eval-{}-textcraft-0", method.name()),
                samples: vec![Sample {
                    split: Split::Id,
                    result: result(&Task::new("craft", 0), 0, success),
                    trials: vec![t],
                }],
            },
        )
    }

    /// The Markdown walks the episode in order: subgoal before its step, action with the flag,
    /// then the observation; long observations are cut and say by how much.
    #[test]
    fn renders_steps_in_order_and_cuts_long_observations() {
        let mut t = trace(
            "textcraft/craft#0",
            &["get 1 planks", "craft 4 stick"],
            true,
        );
        t.episode.observations[2] = "o".repeat(OBSERVATION_CHARS + 7);
        let md = render_one(Method::Multi2, t, true);
        let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} not in {md}"));
        assert!(at("`get planks`") < at("**Step 1** · action `get 1 planks`"));
        assert!(at("after get 1 planks") < at("**Step 2** · action `craft 4 stick`"));
        assert!(md.contains("System 2 says done: true"));
        assert!(md.contains("… (7 more characters)"));
        assert!(md.contains("*End:* solved after 2 actions"));
        assert!(!md.contains("After the last action"), "{md}");
    }

    /// Words said after the last action, or in an episode without one, are on the page, in
    /// order, before its end.
    #[test]
    fn renders_what_was_said_after_the_last_action() {
        let render_one = |t: Trace| render_one(Method::Adapt, t, false);
        let mut t = trace("textcraft/craft#0", &[], false);
        t.notes = vec![(0, "think: get planks".into()), (0, "plan: Step 1".into())];
        let md = render_one(t);
        let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} not in {md}"));
        assert!(at("**Observation 0.**") < at("`get planks`"));
        assert!(at("`get planks`") < at("> think: get planks"));
        assert!(at("> think: get planks") < at("> plan: Step 1"));
        assert!(at("> plan: Step 1") < at("*End:* not solved after 0 actions"));
        assert!(!md.contains("After the last action"), "{md}");

        let mut t = trace("textcraft/craft#0", &["get 1 planks"], false);
        t.notes = vec![(1, "think: now craft".into())];
        let md = render_one(t);
        let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} not in {md}"));
        assert!(at("after get 1 planks") < at("*After the last action:*"));
        assert!(at("*After the last action:*") < at("> think: now craft"));
        assert!(at("> think: now craft") < at("*End:*"));
    }
}
