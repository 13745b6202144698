//! Roles as text policies: a batch of prompts in, one reply each out, with what it cost. The
//! same rollout loops run LoRA roles over one backbone ([`BackbonePolicy`]), scripted policies
//! in tests, or any other model. [`Trace`] is one episode as an agent played it.

use hier_backbone::{
    AdapterId, CausalLm, GenerationRequest, PrefillStats, PrefixCache, SamplingConfig, Tokenizer,
};
use hier_data::build::Episode;
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// One reply of a role, with what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub text: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
}

/// A role: a batch of prompts in, one reply each out.
pub trait TextPolicy {
    fn reply(&mut self, prompts: &[String]) -> Result<Vec<Reply>>;

    /// Restarts the policy's sampling from `seed` (a resumable trainer reseeds per round so
    /// that a resumed run samples as an uninterrupted one). Deterministic policies ignore it.
    fn reseed(&mut self, seed: u64) {
        let _ = seed;
    }
}

/// Keys and values a [`BackbonePolicy`] keeps across its calls by default (MiB): room for ≈ 23 000
/// tokens of SmolLM2-135M, a few hundred thousand of the tiny backbone.
pub const DEFAULT_PREFIX_CACHE_MIB: usize = 1024;

/// A LoRA role over a shared backbone: one batched generation call per request batch.
///
/// The role keeps the keys and values of its prompts and replies ([`PrefixCache`]), so that a
/// prompt which repeats an earlier one's beginning — the instruction and few-shot examples of
/// every call, the episode so far, a state sampled several times — prefills only what is new.
/// Replies are those of recomputing every prompt, to float rounding. The cache lives as long
/// as the role, which borrows the model: the weights cannot change under it.
pub struct BackbonePolicy<'a> {
    pub lm: &'a CausalLm,
    pub tokenizer: &'a Tokenizer,
    pub adapter: Option<AdapterId>,
    pub sampling: SamplingConfig,
    /// A reply ends at the first of these (the authors' roles answer one line).
    pub stop_strings: Vec<String>,
    pub stop_tokens: Vec<u32>,
    /// Prompts longer than this many tokens are cut by [`crate::prompt::fit_prompt`] (as in
    /// training); `None` keeps them whole.
    pub max_prompt: Option<usize>,
    /// Render each prompt as one user message with the tokenizer's chat template (an
    /// instruct checkpoint playing as it is); `false` continues the raw text.
    pub chat: bool,
    /// Calls answered so far: call `k` samples with seed `sampling.seed + k`, so successive
    /// steps draw fresh randomness while a run stays reproducible.
    pub calls: u64,
    /// Context kept across calls ([`DEFAULT_PREFIX_CACHE_MIB`]; a budget of 0 recomputes every
    /// prompt).
    pub prefix_cache: PrefixCache,
}

impl<'a> BackbonePolicy<'a> {
    /// A role answering one line ([`crate::prompt::STOP`]) with `adapter`.
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
            stop_strings: vec![crate::prompt::STOP.into()],
            stop_tokens: Vec::new(),
            max_prompt: None,
            chat: false,
            calls: 0,
            prefix_cache: PrefixCache::with_mib(lm, DEFAULT_PREFIX_CACHE_MIB),
        }
    }

    /// The same role keeping at most `mib` MiB of context across calls (0: none).
    pub fn with_prefix_cache_mib(mut self, mib: usize) -> Self {
        self.prefix_cache = PrefixCache::with_mib(self.lm, mib);
        self
    }

    /// Prompt tokens seen and prefilled so far.
    pub fn prefill_stats(&self) -> PrefillStats {
        self.prefix_cache.stats()
    }
}

impl TextPolicy for BackbonePolicy<'_> {
    fn reseed(&mut self, seed: u64) {
        self.sampling.seed = seed;
        self.calls = 0;
    }

    fn reply(&mut self, prompts: &[String]) -> Result<Vec<Reply>> {
        // A chat-prompted reply is one assistant turn: it ends at the template's end-of-turn
        // token too (without it an instruct model writes the next user turn itself).
        let mut stop_tokens = self.stop_tokens.clone();
        if self.chat {
            stop_tokens.push(self.tokenizer.end_of_turn()?);
        }
        let requests = prompts
            .iter()
            .map(|p| {
                let text = if self.chat {
                    let user = [hier_backbone::Message::new("user", p)];
                    self.tokenizer.apply_chat_template(&user, true)?
                } else {
                    p.clone()
                };
                let mut prompt = self.tokenizer.encode(&text, false)?;
                if let Some(budget) = self.max_prompt {
                    crate::prompt::fit_prompt(&mut prompt, budget);
                }
                Ok(GenerationRequest {
                    prompt,
                    stop_tokens: stop_tokens.clone(),
                    stop_strings: self.stop_strings.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let tok = self.tokenizer;
        // Only to watch for stop strings while generating: ids that do not decode there cannot
        // hold one, and the final decode below reports them.
        let decode = |ids: &[u32]| tok.decode(ids, true).unwrap_or_default();
        let sampling = SamplingConfig {
            seed: self.sampling.seed.wrapping_add(self.calls),
            ..self.sampling.clone()
        };
        self.calls += 1;
        let outs = self.lm.generate_cached(
            &requests,
            &sampling,
            self.adapter,
            Some(&decode),
            &mut self.prefix_cache,
        )?;
        outs.into_iter()
            .map(|g| {
                let mut text = tok.decode(&g.tokens, true)?;
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

/// Writes `<dir>/prefill.json`: what the prompts of a stage cost — prompt tokens, those
/// prefilled, those read from the roles' prefix caches, the positions the prefills computed
/// (padding included) — with the cache budget and the stage's wall time, so that runs with and
/// without the cache can be compared.
pub fn write_prefill_report(
    dir: &std::path::Path,
    prefix_cache_mib: usize,
    stats: PrefillStats,
    seconds: f64,
) -> Result<()> {
    let report = serde_json::json!({
        "prefix_cache_mib": prefix_cache_mib,
        "prompts": stats.prompts,
        "prompt_tokens": stats.prompt_tokens,
        "prefilled_tokens": stats.prefilled_tokens,
        "reused_tokens": stats.reused_tokens(),
        "prefill_positions": stats.prefill_positions,
        "seconds": seconds,
    });
    let text = serde_json::to_string_pretty(&report).expect("a JSON value serialises");
    Ok(hier_backbone::write_atomic(
        &dir.join("prefill.json"),
        text.as_bytes(),
    )?)
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
            tie_word_embeddings: true,
            ..TinyModelConfig::for_tests(tokenizer.vocab_size(), 256)
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
}
