//! The Multi² agent (METHODS.md A) and its batched rollout: System 1 names a subgoal at the
//! start and whenever System 2 flags the current one done or its step budget runs out; System
//! 2 answers `<action>; True|False` each step. Many environments run together: every round,
//! the planners that are due are asked in one batched call, then every live executor in one
//! batched call, then the environments step in parallel.
//!
//! The roles are [`TextPolicy`]s — text in, text out, with token counts — so the same loop runs
//! the LoRA roles over one backbone ([`BackbonePolicy`]), scripted policies in tests, or any
//! other model. Every call's prompt and generated tokens are counted per episode.

use hier_backbone::{AdapterId, CausalLm, GenerationRequest, SamplingConfig, Tokenizer};
use hier_data::batch::{executor_prompt, planner_prompt};
use hier_data::build::Episode;
use hier_envs::{Env, Task, step_all};
use serde::{Deserialize, Serialize};

/// One reply of a role, with what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub text: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
}

/// A role: a batch of prompts in, one reply each out.
pub trait TextPolicy {
    fn reply(&mut self, prompts: &[String]) -> Result<Vec<Reply>, String>;

    /// Restarts the policy's sampling from `seed` (a resumable trainer reseeds per round so
    /// that a resumed run samples as an uninterrupted one). Deterministic policies ignore it.
    fn reseed(&mut self, seed: u64) {
        let _ = seed;
    }
}

/// A LoRA role over a shared backbone: one batched generation call per request batch.
pub struct BackbonePolicy<'a> {
    pub lm: &'a CausalLm,
    pub tokenizer: &'a Tokenizer,
    pub adapter: Option<AdapterId>,
    pub sampling: SamplingConfig,
    /// A reply ends at the first of these (the authors' roles answer one line).
    pub stop_strings: Vec<String>,
    pub stop_tokens: Vec<u32>,
    /// Prompts longer than this many tokens are cut by [`crate::roles::fit_prompt`] (as in
    /// training); `None` keeps them whole.
    pub max_prompt: Option<usize>,
    /// Render each prompt as one user message with the tokenizer's chat template (an
    /// instruct checkpoint playing as it is); `false` continues the raw text.
    pub chat: bool,
    /// Calls answered so far: call `k` samples with seed `sampling.seed + k`, so successive
    /// steps draw fresh randomness while a run stays reproducible.
    pub calls: u64,
}

impl<'a> BackbonePolicy<'a> {
    /// A role answering one line ([`crate::roles::STOP`]) with `adapter`.
    pub fn new(
        lm: &'a CausalLm,
        tokenizer: &'a Tokenizer,
        adapter: Option<AdapterId>,
        sampling: SamplingConfig,
    ) -> Self {
        Self {
            lm,
            tokenizer,
            adapter,
            sampling,
            stop_strings: vec![crate::roles::STOP.into()],
            stop_tokens: Vec::new(),
            max_prompt: None,
            chat: false,
            calls: 0,
        }
    }
}

impl TextPolicy for BackbonePolicy<'_> {
    fn reseed(&mut self, seed: u64) {
        self.sampling.seed = seed;
        self.calls = 0;
    }

    fn reply(&mut self, prompts: &[String]) -> Result<Vec<Reply>, String> {
        let requests = prompts
            .iter()
            .map(|p| {
                let text = if self.chat {
                    let user = [hier_backbone::Message::new("user", p)];
                    let chat = self.tokenizer.apply_chat_template(&user, true);
                    chat.map_err(|e| e.to_string())?
                } else {
                    p.clone()
                };
                let mut prompt = self
                    .tokenizer
                    .encode(&text, false)
                    .map_err(|e| e.to_string())?;
                if let Some(budget) = self.max_prompt {
                    crate::roles::fit_prompt(&mut prompt, budget);
                }
                Ok(GenerationRequest {
                    prompt,
                    stop_tokens: self.stop_tokens.clone(),
                    stop_strings: self.stop_strings.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let tok = self.tokenizer;
        let decode = |ids: &[u32]| tok.decode(ids, true).unwrap_or_default();
        let sampling = SamplingConfig {
            seed: self.sampling.seed.wrapping_add(self.calls),
            ..self.sampling.clone()
        };
        self.calls += 1;
        let outs = self
            .lm
            .generate(&requests, &sampling, self.adapter, Some(&decode))
            .map_err(|e| e.to_string())?;
        outs.into_iter()
            .map(|g| {
                let mut text = tok.decode(&g.tokens, true).map_err(|e| e.to_string())?;
                for s in &self.stop_strings {
                    if let Some(i) = text.find(s.as_str()) {
                        text.truncate(i);
                    }
                }
                Ok(Reply {
                    text,
                    prompt_tokens: g.prompt_tokens,
                    generated_tokens: g.tokens.len(),
                })
            })
            .collect()
    }
}

/// Parses System 2's `<action>; True|False` (the flag is case-insensitive; without one, the
/// subgoal is not done). Only the first line counts.
pub fn parse_action(reply: &str) -> (String, bool) {
    let line = reply.lines().next().unwrap_or("").trim();
    match line.rsplit_once(';') {
        Some((a, flag)) if flag.trim().eq_ignore_ascii_case("true") => (a.trim().to_owned(), true),
        Some((a, flag)) if flag.trim().eq_ignore_ascii_case("false") => {
            (a.trim().to_owned(), false)
        }
        _ => (line.to_owned(), false),
    }
}

/// Settings of a rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutConfig {
    /// Environment steps per episode at most (the authors: 50).
    pub max_steps: usize,
    /// Steps one subgoal may take before System 1 is asked again.
    pub subgoal_budget: usize,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            max_steps: 50,
            subgoal_budget: 10,
        }
    }
}

/// One episode as the agent played it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub episode: Episode,
    /// `(first step, subgoal)` for every System-1 call.
    pub subgoals: Vec<(usize, String)>,
    /// System 2's completion flag at every step.
    pub flags: Vec<bool>,
    pub sys1_calls: usize,
    pub sys2_calls: usize,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// `(step, text)` of what the prompted agents say besides actions: ReAct's thoughts,
    /// Reflexion's reflections, ADaPT's sub-tasks and plans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<(usize, String)>,
}

impl Trace {
    /// An episode of `task` on environment `env` that has just been reset to `reset`.
    pub fn start(env: &str, task: &hier_envs::Task, reset: hier_envs::Reset, origin: &str) -> Self {
        Self {
            episode: Episode {
                source: format!("{env}/{task}"),
                task: reset.description,
                observations: vec![reset.observation],
                actions: Vec::new(),
                rewards: Vec::new(),
                scores: Vec::new(),
                done: false,
                success: false,
                origin: origin.into(),
            },
            subgoals: Vec::new(),
            flags: Vec::new(),
            sys1_calls: 0,
            sys2_calls: 0,
            prompt_tokens: 0,
            generated_tokens: 0,
            notes: Vec::new(),
        }
    }

    pub fn tokens(&self) -> usize {
        self.prompt_tokens + self.generated_tokens
    }
}

struct Live {
    trace: Trace,
    subgoal: Option<String>,
    /// Actions under the current subgoal, and under the previous one (the planner's context).
    current: Vec<String>,
    previous: Vec<String>,
    finished: bool,
}

/// Plays `tasks[i]` on `envs[i]` with the two roles, all episodes in lock step.
pub fn rollout(
    envs: &mut [Box<dyn Env>],
    tasks: &[Task],
    planner: &mut dyn TextPolicy,
    executor: &mut dyn TextPolicy,
    cfg: &RolloutConfig,
    origin: &str,
) -> Result<Vec<Trace>, String> {
    if envs.len() != tasks.len() {
        return Err(format!(
            "{} environments for {} tasks",
            envs.len(),
            tasks.len()
        ));
    }
    let mut live: Vec<Live> = Vec::with_capacity(envs.len());
    for (env, task) in envs.iter_mut().zip(tasks) {
        let r = env.reset(task).map_err(|e| format!("reset {task}: {e}"))?;
        live.push(Live {
            trace: Trace::start(env.name(), task, r, origin),
            subgoal: None,
            current: Vec::new(),
            previous: Vec::new(),
            finished: false,
        });
    }
    let charge = |t: &mut Trace, r: &Reply| {
        t.prompt_tokens += r.prompt_tokens;
        t.generated_tokens += r.generated_tokens;
    };
    loop {
        // Planners that are due: no subgoal yet, or the last one ended.
        let due: Vec<usize> = (0..live.len())
            .filter(|&i| !live[i].finished && live[i].subgoal.is_none())
            .collect();
        if !due.is_empty() {
            let prompts: Vec<String> = due
                .iter()
                .map(|&i| {
                    let l = &live[i];
                    let obs = l
                        .trace
                        .episode
                        .observations
                        .last()
                        .expect("reset observation");
                    planner_prompt(&l.trace.episode.task, &l.previous, obs)
                })
                .collect();
            let replies = planner.reply(&prompts)?;
            for (&i, r) in due.iter().zip(&replies) {
                let l = &mut live[i];
                let g = r.text.lines().next().unwrap_or("").trim().to_owned();
                l.trace
                    .subgoals
                    .push((l.trace.episode.actions.len(), g.clone()));
                l.trace.sys1_calls += 1;
                charge(&mut l.trace, r);
                l.subgoal = Some(g);
            }
        }
        let active: Vec<usize> = (0..live.len()).filter(|&i| !live[i].finished).collect();
        if active.is_empty() {
            break;
        }
        let prompts: Vec<String> = active
            .iter()
            .map(|&i| {
                let l = &live[i];
                let obs = l.trace.episode.observations.last().expect("observation");
                executor_prompt(l.subgoal.as_deref().expect("planned above"), obs)
            })
            .collect();
        let replies = executor.reply(&prompts)?;
        let mut actions: Vec<Option<String>> = vec![None; live.len()];
        let mut flags = vec![false; live.len()];
        for (&i, r) in active.iter().zip(&replies) {
            let (a, done) = parse_action(&r.text);
            let l = &mut live[i];
            l.trace.sys2_calls += 1;
            charge(&mut l.trace, r);
            actions[i] = Some(a);
            flags[i] = done;
        }
        let refs: Vec<Option<&str>> = actions.iter().map(|a| a.as_deref()).collect();
        let steps = step_all(envs, &refs);
        for (i, s) in steps.into_iter().enumerate() {
            let Some(s) = s else { continue };
            let s = s.map_err(|e| format!("{}: step: {e}", live[i].trace.episode.source))?;
            let l = &mut live[i];
            let a = actions[i].take().expect("stepped");
            l.trace.episode.actions.push(a.clone());
            l.trace.episode.observations.push(s.observation);
            l.trace.episode.rewards.push(s.reward);
            l.trace.episode.scores.push(s.score);
            l.trace.flags.push(flags[i]);
            l.current.push(a);
            let n = l.trace.episode.actions.len();
            if s.done || n >= cfg.max_steps {
                l.finished = true;
                l.trace.episode.done = s.done;
                l.trace.episode.success = s.done && s.score >= 1.0;
            } else if flags[i] || l.current.len() >= cfg.subgoal_budget {
                l.previous = std::mem::take(&mut l.current);
                l.subgoal = None;
            }
        }
    }
    Ok(live.into_iter().map(|l| l.trace).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backbone_role_counts_tokens_stops_at_newline_and_is_seeded() {
        use crate::pretrain::TinyModelConfig;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../hier-backbone/tests/fixtures/tokenizer");
        let tokenizer = Tokenizer::load(&dir).unwrap();
        let cfg = TinyModelConfig {
            vocab_size: tokenizer.vocab_size(),
            hidden_size: 32,
            intermediate_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: 256,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-5,
            tie_word_embeddings: true,
        };
        let device = hier_backbone::burn::tensor::Device::flex();
        let lm = CausalLm::random(cfg.model_config().unwrap(), 7, &device).unwrap();
        let sampling = SamplingConfig {
            temperature: 0.7,
            top_p: Some(0.9),
            top_k: Some(50),
            seed: 3,
            ..SamplingConfig::greedy(12)
        };
        let mut role = BackbonePolicy::new(&lm, &tokenizer, None, sampling.clone());
        let prompts = vec![
            "Subtask: find mug\nObs: hello\nAction: ".to_owned(),
            "look".to_owned(),
        ];
        let a = role.reply(&prompts).unwrap();
        let a2 = role.reply(&prompts).unwrap();
        let mut again = BackbonePolicy::new(&lm, &tokenizer, None, sampling);
        let b = again.reply(&prompts).unwrap();
        assert_eq!(a, b, "same seed, same replies");
        assert_eq!(
            a2,
            again.reply(&prompts).unwrap(),
            "the k-th call is seeded too"
        );
        for (r, p) in a.iter().zip(&prompts) {
            assert_eq!(r.prompt_tokens, tokenizer.encode(p, false).unwrap().len());
            assert!(r.generated_tokens >= 1 && r.generated_tokens <= 12);
            assert!(!r.text.contains('\n'), "{:?}", r.text);
        }
        // A chat role answers exactly as a raw role given the chat-rendered prompt.
        let mut chat = BackbonePolicy::new(&lm, &tokenizer, None, again.sampling.clone());
        chat.chat = true;
        let rendered: Vec<String> = prompts
            .iter()
            .map(|p| {
                let user = [hier_backbone::Message::new("user", p)];
                tokenizer.apply_chat_template(&user, true).unwrap()
            })
            .collect();
        assert!(rendered[1].starts_with("<s>user: look"), "{}", rendered[1]);
        let mut raw = BackbonePolicy::new(&lm, &tokenizer, None, again.sampling.clone());
        let (c, r) = (chat.reply(&prompts).unwrap(), raw.reply(&rendered).unwrap());
        assert_eq!(c, r);
        assert_eq!(
            c[1].prompt_tokens,
            tokenizer.encode(&rendered[1], false).unwrap().len()
        );
        assert!(c[1].prompt_tokens > a[1].prompt_tokens);
    }

    #[test]
    fn executor_replies_parse() {
        assert_eq!(
            parse_action("go to desk 1; True"),
            ("go to desk 1".into(), true)
        );
        assert_eq!(
            parse_action(" open drawer 2 ; false\nmore"),
            ("open drawer 2".into(), false)
        );
        assert_eq!(parse_action("look"), ("look".into(), false));
        assert_eq!(
            parse_action("craft 1 x using 1 a; 1 b; TRUE"),
            ("craft 1 x using 1 a; 1 b".into(), true)
        );
    }
}
