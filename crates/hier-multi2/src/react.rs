//! The prompted, flat ReAct agent (Yao et al., 2023) and the pieces Reflexion and ADaPT build
//! on: in-context demonstrations made from the training data, the chat-template prompt, the
//! one-line reply protocol and a batched rollout.
//!
//! Protocol: every turn the model answers one line — `think: <reasoning>` (the environment is
//! not stepped; the agent sees `OK.`), `finish: success|failure` (used by ADaPT's executor to
//! end a sub-task), or an action for the environment. Thoughts count as turns, as in ReAct's
//! ALFWorld setting, so an agent that only thinks runs out of turns.
//!
//! Demonstrations come from expert episodes of the training split: each action with the
//! observation it produced, and a `think:` line wherever the expert's subgoal changes (the
//! subgoal is the thought a ReAct annotator would write there). Where the environment tells
//! the kind of a task ([`Env::task_kind`]: ALFWorld's task type), a prompt shows
//! demonstrations of the task's own kind, as ReAct's ALFWorld prompts do (two of its type).
//! No weights are trained.
//!
//! The prompt is one user message rendered with the tokenizer's chat template (the tiny
//! backbone's own or an instruct checkpoint's): the instruction and demonstrations first, the
//! episode so far next, and the task restated last. A prompt too long for `max_prompt` shows
//! fewer demonstrations ([`Prompter::act_prompt`]); one too long without any is cut in the
//! middle ([`hier_train::prompt::fit_prompt`]), losing old turns, not the task. The assistant's
//! reply is started at [`REPLY_START`] (`>`), where every line of the demonstrations starts,
//! as ReAct's own prompts end: an instruct model otherwise answers in prose.

use std::collections::BTreeMap;

use hier_backbone::{Message, Tokenizer};
use hier_data::schema::{FlatTrajectory, Sys2Transition};
use hier_envs::{Env, Task, step_all};
use serde::{Deserialize, Serialize};

use crate::agent::{RolloutConfig, one_task_per_env};
use crate::error::{Error, Result};
use hier_train::policy::{Reply, TextPolicy, Trace};

/// Settings of the prompted agents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptedSpec {
    /// Demonstrations in every prompt.
    pub demos: usize,
    /// Characters kept of each observation inside a demonstration.
    pub demo_obs_chars: usize,
    /// Turns of the current episode shown (older ones are summarised by their count).
    pub history: usize,
    /// The shown window's start moves this many turns at a time ([`first_shown`]; 0 or 1:
    /// every turn), so that the prompt's beginning stays the same for several turns and the
    /// prefix cache reuses it.
    #[serde(default, skip_serializing_if = "hier_backbone::serde_skip::is_default")]
    pub history_stride: usize,
    /// Prompt tokens at most: demonstrations are left out to fit ([`Prompter::act_prompt`]),
    /// then the middle is cut ([`hier_train::prompt::fit_prompt`]).
    pub max_prompt: usize,
    /// Reflexion: trials per task (the paper reports pass@6) and reflections kept in memory.
    pub reflexion_trials: usize,
    pub reflexion_memory: usize,
    /// Evaluation seeds of Reflexion (each seed costs up to `reflexion_trials` episodes).
    pub reflexion_seeds: Vec<u64>,
    /// Reflexion's loop heuristic (Shinn et al., 2023, §4.1: self-reflect when "the agent
    /// executes the same action and receives the same response for more than 3 cycles"): a
    /// trial ends, failed, once more than this many of its last turns in a row wrote one line and
    /// saw one observation ([`trailing_repeats`]); 0: every trial runs to its limit. Only
    /// Reflexion reads it.
    #[serde(default, skip_serializing_if = "hier_backbone::serde_skip::is_default")]
    pub reflexion_loop_cycles: usize,
    /// ADaPT: deepest decomposition level (root = 0) and turns per executor attempt.
    pub adapt_max_depth: usize,
    pub adapt_executor_turns: usize,
    /// Sampling of every prompted call.
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
}

/// The index of the first of `len` turns a prompt shows: the last `history`, except that the
/// window's start moves `stride` turns at a time (0 or 1: every turn), so that between
/// `history − stride + 1` and `history` turns show and the text before the window's end — whose
/// keys and values the prefix cache keeps — changes once every `stride` turns instead of every
/// turn. `stride` is at most `history` ([`PromptedSpec`]'s profile check).
pub fn first_shown(len: usize, history: usize, stride: usize) -> usize {
    let over = len.saturating_sub(history);
    if stride <= 1 {
        return over;
    }
    (over.div_ceil(stride) * stride).min(len)
}

/// How many of `steps`' last turns in a row repeat the last one — the same line, the same
/// observation (a thought's is `OK.`) — counting the last itself; 0 for no turns.
pub fn trailing_repeats(steps: &[Step]) -> usize {
    let Some(last) = steps.last() else { return 0 };
    steps.iter().rev().take_while(|s| *s == last).count()
}

/// One parsed reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Turn {
    Think(String),
    Act(String),
    /// ADaPT's executor ends its sub-task, claiming success or failure.
    Finish(bool),
}

/// Parses the first line of a reply (a leading `>` is dropped, keywords are case-insensitive).
pub fn parse_turn(reply: &str) -> Turn {
    let line = reply.lines().next().unwrap_or("").trim();
    let line = line.strip_prefix('>').unwrap_or(line).trim();
    let lower = line.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("think:") {
        return Turn::Think(line[line.len() - rest.len()..].trim().to_owned());
    }
    if let Some(rest) = lower.strip_prefix("finish:") {
        return Turn::Finish(rest.trim().starts_with("success"));
    }
    Turn::Act(line.to_owned())
}

/// One turn of an episode as shown in prompts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// What the agent wrote (`think: …`, an action, `finish: …`).
    pub line: String,
    /// What it saw next (`OK.` after a thought).
    pub observation: String,
}

fn clip(s: &str, chars: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(chars) {
        Some((i, _)) => format!("{} …", &s[..i]),
        None => s.to_owned(),
    }
}

/// Renders an episode: `Task:` and the task's headline (the first observation shows the rest of
/// `K`, e.g. TextCraft's crafting commands), `Obs: o_0`, then `> line` / observation per turn.
pub fn render_episode(task: &str, first_obs: &str, steps: &[Step], obs_chars: usize) -> String {
    let mut out = format!(
        "Task: {}\nObs: {}\n",
        hier_envs::headline(task),
        clip(first_obs, obs_chars)
    );
    for s in steps {
        out.push_str(&format!(
            "> {}\n{}\n",
            s.line,
            clip(&s.observation, obs_chars)
        ));
    }
    out
}

/// A demonstration episode: the task, its first observation and its turns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Demo {
    pub task: String,
    pub first_obs: String,
    pub steps: Vec<Step>,
    /// The expert's subgoals in order (ADaPT's planner demonstrations).
    pub subgoals: Vec<String>,
    /// The task's kind ([`Env::task_kind`]), where the environment tells one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// `n` of `items` spread evenly over them (all of them if there are at most `n`).
fn spread<T: Copy>(items: &[T], n: usize) -> Vec<T> {
    let k = n.min(items.len());
    (0..k).map(|j| items[j * items.len() / k]).collect()
}

/// Up to `n` successful expert episodes of each kind of task (`kind_of` reads a task text;
/// one group where it tells no kind), spread over the data, as ReAct demonstrations: a
/// `think: <subgoal>` turn wherever the subgoal changes, then the actions with what they
/// produced. Episodes are matched to their task by `source`.
pub fn demos(
    flat: &[FlatTrajectory],
    sys2: &[Sys2Transition],
    n: usize,
    kind_of: &dyn Fn(&str) -> Option<&'static str>,
) -> Vec<Demo> {
    let mut by_source: BTreeMap<&str, Vec<&Sys2Transition>> = BTreeMap::new();
    for t in sys2 {
        by_source.entry(t.source.as_str()).or_default().push(t);
    }
    let usable: Vec<&FlatTrajectory> = flat
        .iter()
        .filter(|f| f.success && by_source.contains_key(f.source.as_str()))
        .collect();
    let mut by_kind: BTreeMap<Option<&'static str>, Vec<&FlatTrajectory>> = BTreeMap::new();
    for f in usable {
        by_kind.entry(kind_of(&f.task)).or_default().push(f);
    }
    by_kind
        .into_iter()
        .flat_map(|(kind, group)| spread(&group, n).into_iter().map(move |f| (kind, f)))
        .map(|(kind, f)| {
            let ts = &by_source[f.source.as_str()];
            let mut steps = Vec::new();
            let mut subgoals: Vec<String> = Vec::new();
            for t in ts {
                // The subgoal's own line: on TextCraft System 2's subtask also lists commands.
                let g = hier_envs::headline(&t.subgoal).to_owned();
                if subgoals.last() != Some(&g) {
                    subgoals.push(g.clone());
                    steps.push(Step {
                        line: format!("think: {g}"),
                        observation: "OK.".into(),
                    });
                }
                steps.push(Step {
                    line: t.action.clone(),
                    observation: t.next_observation.clone(),
                });
            }
            Demo {
                task: f.task.clone(),
                first_obs: f.observations.first().cloned().unwrap_or_default(),
                steps,
                subgoals,
                kind: kind.map(str::to_owned),
            }
        })
        .collect()
}

/// What the prompted agents share: the tokenizer (for its chat template), demonstrations and
/// settings.
pub struct Prompter<'a> {
    pub tokenizer: &'a Tokenizer,
    /// Every kind's demonstrations ([`demos`]); a prompt shows `spec.demos` of them.
    pub demos: Vec<Demo>,
    pub spec: &'a PromptedSpec,
}

/// Where the acting prompt leaves the assistant's reply: every line of the demonstrations
/// starts so (`> think: …`, `> go to …`), and ReAct's prompts end so.
pub const REPLY_START: &str = ">";

const ACT_RULES: &str = "You are an agent in a text environment. Each turn, answer with exactly \
one line: either `think: <your reasoning>` to think (nothing happens), or the next command for \
the environment.";

impl Prompter<'_> {
    /// One user message rendered with the chat template, ending where the assistant answers.
    pub fn chat(&self, text: String) -> Result<String> {
        self.tokenizer
            .apply_chat_template(&[Message::new("user", &text)], true)
            .map_err(|source| hier_train::Error::Tokenize {
                what: "prompted agent: chat template".into(),
                source,
            })
            .map_err(Error::from)
    }

    /// The demonstrations a task of `kind` is shown: `spec.demos` of its own kind where there
    /// are any, else `spec.demos` spread over all of them.
    pub fn demos_for(&self, kind: Option<&str>) -> Vec<&Demo> {
        let all: Vec<&Demo> = self.demos.iter().collect();
        let same: Vec<&Demo> = all
            .iter()
            .copied()
            .filter(|d| kind.is_some() && d.kind.as_deref() == kind)
            .collect();
        spread(if same.is_empty() { &all } else { &same }, self.spec.demos)
    }

    fn demo_block(&self, demos: &[&Demo], finish: bool) -> String {
        let mut out = String::new();
        for (k, d) in demos.iter().enumerate() {
            out.push_str(&format!("Example {}:\n", k + 1));
            out.push_str(&render_episode(
                &d.task,
                &d.first_obs,
                &d.steps,
                self.spec.demo_obs_chars,
            ));
            if finish {
                out.push_str("> finish: success\n");
            }
            out.push('\n');
        }
        out
    }

    /// The acting prompt: rules, demonstrations (of the task's `kind` where known), memory
    /// (Reflexion), the episode so far (its last `history` turns) and the task restated; the
    /// reply starts at [`REPLY_START`].
    ///
    /// Demonstrations are whole or absent: where the prompt would exceed `spec.max_prompt`
    /// tokens, the last demonstrations are left out, one at a time, until it fits (none
    /// left, the policy cuts its middle: [`hier_train::prompt::fit_prompt`]). A cut inside
    /// a demonstration would show the model half an example, and — since the cut moves with
    /// the episode's tail — change every prompt from the 96th token on, so that the prefix
    /// cache reused nothing; and a batch prefills every row to its longest row's length, so one
    /// such prompt costs the whole batch (on SmolLM2, a batch of 8 TextCraft goals with one
    /// 3,318-character crafting list ran over 70 minutes, the others 12–18 minutes). Prompts
    /// that fit are unchanged.
    pub fn act_prompt(
        &self,
        task: &str,
        kind: Option<&str>,
        first_obs: &str,
        steps: &[Step],
        memory: &[String],
        finish: bool,
    ) -> Result<String> {
        let demos = self.demos_for(kind);
        let mut shown = demos.len();
        loop {
            let prompt =
                self.act_prompt_with(&demos[..shown], task, first_obs, steps, memory, finish)?;
            if shown == 0 || self.prompt_tokens(&prompt)? <= self.spec.max_prompt {
                return Ok(prompt);
            }
            shown -= 1;
        }
    }

    /// Tokens of a rendered prompt, as the policy encodes it.
    fn prompt_tokens(&self, prompt: &str) -> Result<usize> {
        let ids =
            self.tokenizer
                .encode(prompt, false)
                .map_err(|source| hier_train::Error::Tokenize {
                    what: "prompted agent: acting prompt".into(),
                    source,
                })?;
        Ok(ids.len())
    }

    fn act_prompt_with(
        &self,
        demos: &[&Demo],
        task: &str,
        first_obs: &str,
        steps: &[Step],
        memory: &[String],
        finish: bool,
    ) -> Result<String> {
        let mut text = String::from(ACT_RULES);
        if finish {
            text.push_str(
                " When the task is done, answer `finish: success`; if it cannot be done, \
                 `finish: failure`.",
            );
        }
        text.push_str("\n\n");
        text.push_str(&self.demo_block(demos, finish));
        if !memory.is_empty() {
            text.push_str("Lessons from your earlier attempts at this task:\n");
            for m in memory {
                text.push_str(&format!("- {m}\n"));
            }
            text.push('\n');
        }
        let shown = first_shown(steps.len(), self.spec.history, self.spec.history_stride);
        text.push_str("Now your task.\n");
        if shown > 0 {
            text.push_str(&format!("({shown} earlier turns not shown)\n"));
        }
        text.push_str(&render_episode(
            task,
            first_obs,
            &steps[shown..],
            usize::MAX,
        ));
        text.push_str(&format!(
            "Your task: {}. Your next line:",
            hier_envs::headline(task)
        ));
        Ok(self.chat(text)? + REPLY_START)
    }

    /// Reflexion's self-reflection prompt after a failed trial.
    pub fn reflect_prompt(&self, task: &str, first_obs: &str, steps: &[Step]) -> Result<String> {
        let shown = steps.len().saturating_sub(self.spec.history);
        let text = format!(
            "You tried a task in a text environment and did not complete it. Your attempt \
             ({shown} early turns not shown):\n{}\nIn one line, say what went wrong and what \
             you will do differently next time. Reflection:",
            render_episode(task, first_obs, &steps[shown..], self.spec.demo_obs_chars)
        );
        self.chat(text)
    }
}

/// An episode played by a prompted agent, turn by turn.
pub struct PromptedEpisode {
    pub trace: Trace,
    /// The task's kind ([`Env::task_kind`] of its description).
    pub kind: Option<&'static str>,
    pub steps: Vec<Step>,
    pub turns: usize,
    pub finished: bool,
    /// Environment steps (and ReAct turns) the episode may take
    /// ([`RolloutConfig::episode_limit`]).
    pub limit: usize,
}

impl PromptedEpisode {
    pub fn first_obs(&self) -> &str {
        &self.trace.episode.observations[0]
    }

    /// Charges one reply's tokens.
    pub fn charge(&mut self, r: &Reply) {
        self.trace.prompt_tokens += r.prompt_tokens;
        self.trace.generated_tokens += r.generated_tokens;
        self.trace.sys2_calls += 1;
    }

    /// Records a step of the environment; returns whether the episode ended (the
    /// environment's end, or its [`limit`](Self::limit) of steps).
    pub fn record_step(&mut self, line: String, s: hier_envs::Step) -> bool {
        let ep = &mut self.trace.episode;
        ep.actions.push(line.clone());
        ep.observations.push(s.observation.clone());
        ep.rewards.push(s.reward);
        ep.scores.push(s.score);
        self.trace.flags.push(false);
        self.steps.push(Step {
            line,
            observation: s.observation,
        });
        if s.done || ep.actions.len() >= self.limit {
            ep.done = s.done;
            ep.success = s.done && s.score >= 1.0;
            self.finished = true;
        }
        self.finished
    }

    /// Records a thought (the environment is not stepped).
    pub fn record_thought(&mut self, thought: String) {
        let at = self.trace.episode.actions.len();
        self.trace.notes.push((at, format!("think: {thought}")));
        self.steps.push(Step {
            line: format!("think: {thought}"),
            observation: "OK.".into(),
        });
    }

    /// Ends the episode, failed, when more than `cycles` of its last turns in a row repeat one
    /// line and one observation ([`Trial::loop_cycles`]; 0: never), with a note saying why.
    fn end_if_looping(&mut self, cycles: usize) {
        // ReAct (cycles 0) and ended episodes skip the scan: this runs on every turn.
        if cycles == 0 || self.finished {
            return;
        }
        let repeats = trailing_repeats(&self.steps);
        if repeats <= cycles {
            return;
        }
        self.finished = true;
        let at = self.trace.episode.actions.len();
        self.trace.notes.push((
            at,
            format!("trial ended: the same line and observation {repeats} times in a row"),
        ));
    }
}

/// What Reflexion adds to a ReAct rollout; ReAct itself plays with `Trial::default()`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Trial<'a> {
    /// Reflections shown in episode `i`'s prompts (`memory[i]`; none where it is absent).
    pub memory: &'a [Vec<String>],
    /// End an episode, failed, once more than this many of its last turns in a row repeat one
    /// line and one observation ([`PromptedSpec::reflexion_loop_cycles`]); 0: never.
    pub loop_cycles: usize,
}

/// Resets `envs[i]` to `tasks[i]`, each episode limited by `rollout`.
pub fn start_episodes(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    rollout: &RolloutConfig,
    origin: &str,
) -> Result<Vec<PromptedEpisode>> {
    one_task_per_env(envs, tasks)?;
    envs.iter_mut()
        .zip(tasks)
        .map(|(env, task)| {
            let r = env
                .reset(task)
                .map_err(|e| hier_train::Error::env(format!("reset {task}"), e))?;
            let kind = env.task_kind(&r.description);
            Ok(PromptedEpisode {
                limit: rollout.episode_limit(env.as_ref(), task),
                kind,
                trace: Trace::start(env.name(), task, r, origin),
                steps: Vec::new(),
                turns: 0,
                finished: false,
            })
        })
        .collect()
}

/// Plays `tasks[i]` on `envs[i]` with ReAct, all in lock step: at most
/// [`RolloutConfig::episode_limit`] environment steps and as many turns. Reflexion's `trial`
/// shows episode `i` its reflections and may end a looping episode early; ReAct's is
/// `Trial::default()`.
pub fn rollout_react(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    policy: &mut dyn TextPolicy,
    prompter: &Prompter<'_>,
    trial: &Trial<'_>,
    rollout: &RolloutConfig,
    origin: &str,
) -> Result<Vec<PromptedEpisode>> {
    let mut eps = start_episodes(envs, tasks, rollout, origin)?;
    loop {
        let active: Vec<usize> = (0..eps.len()).filter(|&i| !eps[i].finished).collect();
        if active.is_empty() {
            break;
        }
        let prompts = active
            .iter()
            .map(|&i| {
                let e = &eps[i];
                prompter.act_prompt(
                    &e.trace.episode.task,
                    e.kind,
                    e.first_obs(),
                    &e.steps,
                    trial.memory.get(i).map(Vec::as_slice).unwrap_or(&[]),
                    false,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let replies = policy.reply(&prompts)?;
        let mut actions: Vec<Option<String>> = vec![None; eps.len()];
        for (&i, r) in active.iter().zip(&replies) {
            let e = &mut eps[i];
            e.charge(r);
            e.turns += 1;
            match parse_turn(&r.text) {
                Turn::Think(t) => {
                    e.record_thought(t);
                    e.end_if_looping(trial.loop_cycles);
                }
                // ReAct has no finish turn: the line goes to the environment as written.
                Turn::Finish(_) | Turn::Act(_) => {
                    let line = r.text.lines().next().unwrap_or("").trim();
                    actions[i] = Some(line.strip_prefix('>').unwrap_or(line).trim().to_owned());
                }
            }
            if actions[i].is_none() && e.turns >= e.limit {
                e.finished = true;
            }
        }
        let refs: Vec<Option<&str>> = actions.iter().map(|a| a.as_deref()).collect();
        for (i, s) in step_all(envs, &refs).into_iter().enumerate() {
            let Some(s) = s else { continue };
            let e = &mut eps[i];
            let s = s.map_err(|err| {
                hier_train::Error::env(format!("{}: step", e.trace.episode.source), err)
            })?;
            let line = actions[i].take().expect("stepped");
            e.record_step(line, s);
            if e.turns >= e.limit {
                e.finished = true;
            }
            e.end_if_looping(trial.loop_cycles);
        }
    }
    Ok(eps)
}

#[cfg(test)]
mod tests {
    /// By hand: history 8, stride 4 — turns 9–12 show from turn 4 (5 to 8 turns), 13–16 from
    /// 8; stride 0 or 1 slides every turn; nothing is hidden before the window fills.
    #[test]
    fn the_window_start_moves_by_its_stride() {
        let starts: Vec<usize> = (0..=17).map(|n| first_shown(n, 8, 4)).collect();
        assert_eq!(
            starts,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12]
        );
        for n in 0..20 {
            assert_eq!(first_shown(n, 8, 0), n.saturating_sub(8));
            assert_eq!(first_shown(n, 8, 1), n.saturating_sub(8));
            let shown = n - first_shown(n, 8, 4);
            assert!(shown == n || (5..=8).contains(&shown), "{n}: {shown}");
        }
    }

    /// By hand: the run of turns equal to the last (line and observation both) — a thought's
    /// `OK.` counts like any observation, an equal line with another observation breaks the run.
    #[test]
    fn trailing_repeats_counts_the_last_turns_run() {
        let step = |line: &str, obs: &str| super::Step {
            line: line.into(),
            observation: obs.into(),
        };
        let (a, b) = (
            step("get 1 stick", "Could not find stick"),
            step("think: x", "OK."),
        );
        assert_eq!(super::trailing_repeats(&[]), 0);
        assert_eq!(super::trailing_repeats(std::slice::from_ref(&a)), 1);
        let runs = [
            (vec![a.clone(), a.clone(), a.clone()], 3),
            (
                vec![b.clone(), a.clone(), a.clone(), a.clone(), a.clone()],
                4,
            ),
            (vec![a.clone(), a.clone(), b.clone(), b.clone()], 2),
            (
                vec![a.clone(), step("get 1 stick", "Got 1 stick"), a.clone()],
                1,
            ),
        ];
        for (steps, want) in runs {
            assert_eq!(super::trailing_repeats(&steps), want, "{steps:?}");
        }
    }

    use super::*;

    /// One successful expert episode per task (`env/<k>`), each a single transition.
    fn expert_episodes(tasks: &[String]) -> (Vec<FlatTrajectory>, Vec<Sys2Transition>) {
        let flat = (tasks.iter().enumerate())
            .map(|(k, task)| FlatTrajectory {
                source: format!("env/{k}"),
                task: task.clone(),
                observations: vec!["o0".into()],
                actions: vec![],
                rewards: vec![],
                score: 1.0,
                success: true,
                origin: "expert".into(),
            })
            .collect();
        let sys2 = (0..tasks.len())
            .map(|k| Sys2Transition {
                source: format!("env/{k}"),
                subgoal: "g".into(),
                observation: "o0".into(),
                action: "a".into(),
                subgoal_done: false,
                reward: 0.0,
                env_reward: 0.0,
                next_observation: "o1".into(),
                terminal: false,
                segment: 0,
                step: 0,
            })
            .collect();
        (flat, sys2)
    }

    fn fixture_tokenizer() -> Tokenizer {
        Tokenizer::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../hier-backbone/tests/fixtures/tokenizer"),
        )
        .unwrap()
    }

    /// Two demonstrations, a window of 4 turns, `max_prompt` tokens.
    fn spec(max_prompt: usize) -> PromptedSpec {
        PromptedSpec {
            demos: 2,
            demo_obs_chars: 100,
            history: 4,
            history_stride: 0,
            max_prompt,
            reflexion_trials: 1,
            reflexion_memory: 1,
            reflexion_seeds: vec![0],
            reflexion_loop_cycles: 0,
            adapt_max_depth: 1,
            adapt_executor_turns: 1,
            max_tokens: 8,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
        }
    }

    /// Demonstrations are drawn per kind, and a prompt shows those of its task's kind (all
    /// kinds, spread, where the kind is unknown or has none).
    #[test]
    fn prompts_show_demonstrations_of_the_tasks_kind() {
        let tasks: Vec<String> = (0..9)
            .map(|k| format!("{} {k}", ["heat", "cool", "look"][k % 3]))
            .collect();
        let (flat, sys2) = expert_episodes(&tasks);
        // `look` tasks have no kind here.
        let kind_of = |t: &str| match t.split(' ').next() {
            Some("heat") => Some("heat"),
            Some("cool") => Some("cool"),
            _ => None,
        };
        let d = demos(&flat, &sys2, 2, &kind_of);
        assert_eq!(d.len(), 6, "two per group: cool, heat and the kind-less");
        let tokenizer = fixture_tokenizer();
        let spec = spec(1024);
        let p = Prompter {
            tokenizer: &tokenizer,
            demos: d,
            spec: &spec,
        };
        let tasks =
            |kind| -> Vec<String> { p.demos_for(kind).iter().map(|d| d.task.clone()).collect() };
        // Three of each: the 0th and the (1·3/2 =) 1st.
        assert_eq!(tasks(Some("heat")), ["heat 0", "heat 3"]);
        assert_eq!(tasks(Some("cool")), ["cool 1", "cool 4"]);
        // Unknown or absent kinds: two spread over all six.
        assert_eq!(tasks(None).len(), 2);
        assert_eq!(tasks(None), tasks(Some("slice")));
        assert_ne!(
            p.demos_for(None)[0].kind,
            p.demos_for(None)[1].kind,
            "spread, not the first group"
        );
    }

    /// A prompt over `max_prompt` tokens leaves out its last demonstrations, whole, until it
    /// fits; without any it is returned as is (the policy cuts it); one that fits is unchanged.
    #[test]
    fn demonstrations_are_left_out_whole_until_the_prompt_fits() {
        let (flat, sys2) = expert_episodes(&["craft thing 0".into(), "craft thing 1".into()]);
        let tokenizer = fixture_tokenizer();
        let prompt_with = |max_prompt: usize| {
            let spec = spec(max_prompt);
            let p = Prompter {
                tokenizer: &tokenizer,
                demos: demos(&flat, &sys2, 2, &|_| None),
                spec: &spec,
            };
            let steps = [Step {
                line: "get 1 log".into(),
                observation: "Got 1 log".into(),
            }];
            let text = p
                .act_prompt("craft a boat", None, "o0", &steps, &[], false)
                .unwrap();
            let tokens = tokenizer.encode(&text, false).unwrap().len();
            (text, tokens)
        };
        let (both, both_len) = prompt_with(100_000);
        assert!(both.contains("Example 2:") && both.contains("craft thing 1"));
        // Exactly its length fits: unchanged.
        assert_eq!(prompt_with(both_len).0, both);
        // One token less: the second demonstration goes, whole, and the first stays whole.
        let (one, one_len) = prompt_with(both_len - 1);
        assert!(one.contains("Example 1:") && one.contains("craft thing 0"));
        assert!(!one.contains("Example 2:") && !one.contains("craft thing 1"));
        assert!(one_len < both_len);
        // A budget below every choice: no demonstration, the episode and task still there.
        let (none, _) = prompt_with(1);
        assert!(!none.contains("Example 1:"));
        assert!(
            none.contains("> get 1 log\nGot 1 log") && none.contains("Your task: craft a boat")
        );
    }

    #[test]
    fn replies_parse_into_turns() {
        assert_eq!(
            parse_turn("think: I need a mug\nmore"),
            Turn::Think("I need a mug".into())
        );
        assert_eq!(
            parse_turn("> Think: First X"),
            Turn::Think("First X".into())
        );
        assert_eq!(parse_turn("finish: Success"), Turn::Finish(true));
        assert_eq!(parse_turn("FINISH: failure"), Turn::Finish(false));
        assert_eq!(
            parse_turn(" > go to desk 1"),
            Turn::Act("go to desk 1".into())
        );
    }

    #[test]
    fn demos_put_a_thought_where_the_subgoal_changes() {
        let t = |g: &str, a: &str, o: &str, n: &str| Sys2Transition {
            source: "env/1".into(),
            subgoal: g.into(),
            observation: o.into(),
            action: a.into(),
            subgoal_done: false,
            reward: 0.0,
            env_reward: 0.0,
            next_observation: n.into(),
            terminal: false,
            segment: 0,
            step: 0,
        };
        let sys2 = vec![
            t("get wood", "get 1 log", "o0", "o1"),
            t("get wood", "craft 4 planks", "o1", "o2"),
            t("craft stick", "craft 4 sticks", "o2", "o3"),
        ];
        let flat = vec![FlatTrajectory {
            source: "env/1".into(),
            task: "craft stick".into(),
            observations: vec!["o0".into(), "o1".into(), "o2".into(), "o3".into()],
            actions: vec![],
            rewards: vec![],
            score: 1.0,
            success: true,
            origin: "expert".into(),
        }];
        let d = demos(&flat, &sys2, 3, &|_| None);
        assert_eq!(d.len(), 1);
        let lines: Vec<&str> = d[0].steps.iter().map(|s| s.line.as_str()).collect();
        assert_eq!(
            lines,
            [
                "think: get wood",
                "get 1 log",
                "craft 4 planks",
                "think: craft stick",
                "craft 4 sticks"
            ]
        );
        assert_eq!(d[0].subgoals, ["get wood", "craft stick"]);
        assert_eq!(
            render_episode("craft stick", "o0", &d[0].steps[..2], 10),
            "Task: craft stick\nObs: o0\n> think: get wood\nOK.\n> get 1 log\no1\n"
        );
    }
}
