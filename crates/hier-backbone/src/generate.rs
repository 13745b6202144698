//! Batched autoregressive generation with a KV cache.
//!
//! Prompts are left-padded (positions count from each row's first real token, as
//! `transformers.generate` does), every row stops on its own stop tokens or stop strings, and
//! sampling (greedy, temperature, top-k, top-p) runs on the host from a per-row generator seeded
//! by `(seed, row)`, so a seed fixes the output. The returned log-probability of each token is
//! that of the model's own distribution (temperature 1, no truncation), which is what
//! policy-gradient losses need.

use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::error::{BackboneError, Result};
use crate::kv_cache::KvCache;
use crate::llama::{AdapterId, Batch, CausalLm, Forward};
use crate::prefix_cache::PrefixCache;
use crate::weights::HostTensor;

/// Turns generated token ids into text (for stop strings).
pub type Decoder<'a> = &'a dyn Fn(&[u32]) -> String;

/// How to pick the next token.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingConfig {
    /// At most this many new tokens per row.
    pub max_new_tokens: usize,
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep only the k most likely tokens (before top-p).
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens whose probability reaches p.
    pub top_p: Option<f32>,
    /// Seed of the per-row generators.
    pub seed: u64,
    /// Use the KV cache (on by default; off recomputes the whole sequence every step).
    pub use_cache: bool,
}

impl SamplingConfig {
    /// Greedy decoding of up to `max_new_tokens`.
    pub fn greedy(max_new_tokens: usize) -> Self {
        Self {
            max_new_tokens,
            temperature: 0.0,
            top_k: None,
            top_p: None,
            seed: 0,
            use_cache: true,
        }
    }
}

/// One prompt and when to stop it.
#[derive(Debug, Clone, Default)]
pub struct GenerationRequest {
    /// Prompt token ids (non-empty).
    pub prompt: Vec<u32>,
    /// Stop when one of these is generated (it is kept in the output).
    pub stop_tokens: Vec<u32>,
    /// Stop when the decoded output contains one of these (needs a decoder).
    pub stop_strings: Vec<String>,
}

/// Why a row stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token.
    StopToken,
    /// A stop string.
    StopString,
    /// `max_new_tokens` reached.
    Length,
}

/// The output of one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Generated token ids (not including the prompt).
    pub tokens: Vec<u32>,
    /// `log π(token)` of each generated token.
    pub logprobs: Vec<f32>,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Of those, how many were read from a cached prefix instead of computed.
    pub reused_tokens: usize,
    /// Why it stopped.
    pub finish: FinishReason,
}

/// Picks a token from one row of logits; returns `(token, log-prob under the raw model)`.
fn pick(logits: &[f32], cfg: &SamplingConfig, rng: &mut StdRng) -> (u32, f32) {
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + logits.iter().map(|&l| (l - max).exp()).sum::<f32>().ln();
    let token = if cfg.temperature <= 0.0 {
        // First maximum, like torch.argmax.
        let mut best = 0;
        for (i, &l) in logits.iter().enumerate() {
            if l > logits[best] {
                best = i;
            }
        }
        best
    } else {
        // Highest logit first, ties by lower id: a total order, so the top k found by
        // selection and then sorted are exactly the first k of a full sort — at O(vocab)
        // instead of O(vocab log vocab) per row and token (49,152 ids for SmolLM2).
        let order = |&a: &usize, &b: &usize| logits[b].total_cmp(&logits[a]).then(a.cmp(&b));
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        match cfg.top_k {
            Some(k) if k.max(1) < idx.len() => {
                let k = k.max(1);
                idx.select_nth_unstable_by(k - 1, order);
                idx.truncate(k);
                idx.sort_by(order);
            }
            _ => idx.sort_by(order),
        }
        let scaled: Vec<f64> = idx
            .iter()
            .map(|&i| (((logits[i] - max) / cfg.temperature) as f64).exp())
            .collect();
        let total: f64 = scaled.iter().sum();
        let mut keep = scaled.len();
        if let Some(p) = cfg.top_p {
            let mut acc = 0.0;
            for (n, s) in scaled.iter().enumerate() {
                acc += s / total;
                if acc >= p as f64 {
                    keep = n + 1;
                    break;
                }
            }
        }
        let kept_total: f64 = scaled[..keep].iter().sum();
        let mut u = rng.random::<f64>() * kept_total;
        let mut choice = idx[keep - 1];
        for (n, s) in scaled[..keep].iter().enumerate() {
            if u < *s {
                choice = idx[n];
                break;
            }
            u -= s;
        }
        choice
    };
    (token as u32, logits[token] - lse)
}

impl CausalLm {
    /// Generates continuations of every request in one batch.
    ///
    /// With the KV cache, a prefix of at least 16 tokens that every prompt shares is prefilled
    /// once and copied to every row (same tokens and log-probabilities as prefilling each
    /// prompt whole, to float rounding). Nothing is kept after the call: to reuse context
    /// across calls, see [`CausalLm::generate_cached`].
    ///
    /// `decode` turns generated ids into text; it is needed only for stop strings.
    pub fn generate(
        &self,
        requests: &[GenerationRequest],
        cfg: &SamplingConfig,
        adapter: Option<AdapterId>,
        decode: Option<Decoder<'_>>,
    ) -> Result<Vec<Generation>> {
        let mut within_call = PrefixCache::new(usize::MAX);
        self.generate_inner(
            requests,
            cfg,
            adapter,
            decode,
            &mut within_call,
            false,
            None,
        )
    }

    /// [`CausalLm::generate`] reading and growing `cache`: each prompt prefills only what
    /// follows its longest cached prefix (an earlier prompt with its reply, shared few-shot
    /// examples, a state several samples continue), and every row's prompt and generated
    /// tokens are kept for later calls. Results equal recomputing to float rounding
    /// ([`crate::prefix_cache`] states the invariant). `cfg.use_cache = false` bypasses it.
    pub fn generate_cached(
        &self,
        requests: &[GenerationRequest],
        cfg: &SamplingConfig,
        adapter: Option<AdapterId>,
        decode: Option<Decoder<'_>>,
        cache: &mut PrefixCache,
    ) -> Result<Vec<Generation>> {
        self.generate_inner(requests, cfg, adapter, decode, cache, true, None)
    }

    /// The logits of the token after each prompt (`[prompts][vocab]`, on the host), reading
    /// and growing `cache` as [`CausalLm::generate_cached`] does: a later prompt that starts
    /// like one of these (the steering agent's slow path after its fast path has read the same
    /// observation) prefills only what follows. Equal to the last position of a plain
    /// forward pass to float rounding.
    pub fn next_logits_cached(
        &self,
        prompts: &[Vec<u32>],
        adapter: Option<AdapterId>,
        cache: &mut PrefixCache,
    ) -> Result<Vec<Vec<f32>>> {
        let requests: Vec<GenerationRequest> = prompts
            .iter()
            .map(|p| GenerationRequest {
                prompt: p.clone(),
                stop_tokens: Vec::new(),
                stop_strings: Vec::new(),
            })
            .collect();
        let mut host = Vec::new();
        self.generate_inner(
            &requests,
            &SamplingConfig::greedy(1),
            adapter,
            None,
            cache,
            true,
            Some(&mut host),
        )?;
        let vocab = self.config.vocab_size;
        Ok(host.chunks(vocab).map(<[f32]>::to_vec).collect())
    }

    // `first_logits`: where [`CausalLm::next_logits_cached`] reads the first step's logits.
    #[allow(clippy::too_many_arguments)]
    fn generate_inner(
        &self,
        requests: &[GenerationRequest],
        cfg: &SamplingConfig,
        adapter: Option<AdapterId>,
        decode: Option<Decoder<'_>>,
        prefixes: &mut PrefixCache,
        keep: bool,
        mut first_logits: Option<&mut Vec<f32>>,
    ) -> Result<Vec<Generation>> {
        if requests.is_empty() {
            return Ok(vec![]);
        }
        if let Some(i) = requests.iter().position(|r| r.prompt.is_empty()) {
            return Err(BackboneError::Invalid(format!(
                "request {i} has an empty prompt"
            )));
        }
        if decode.is_none() && requests.iter().any(|r| !r.stop_strings.is_empty()) {
            return Err(BackboneError::Invalid("stop strings need a decoder".into()));
        }
        let n = requests.len();
        let vocab = self.config.vocab_size;
        let pad = self.config.pad_token_id.unwrap_or(0);
        let mut rngs: Vec<StdRng> = (0..n)
            .map(|row| {
                StdRng::seed_from_u64(cfg.seed ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            })
            .collect();
        let prompts: Vec<Vec<u32>> = requests.iter().map(|r| r.prompt.clone()).collect();
        let opts = Forward::with(adapter);
        let weights = self.weights_key(adapter);
        let reuse = cfg.use_cache && self.reuses_prefixes();
        prefixes.count(n as u64, prompts.iter().map(|p| p.len() as u64).sum());

        // The prefix every prompt shares is computed once (on top of what the cache already
        // holds of it), so that every row finds it below.
        let shared = shared_prefix_len(&prompts);
        if reuse && n > 1 && shared >= MIN_SHARED_PREFIX {
            self.cache_prefix(prefixes, &prompts[0][..shared], opts)?;
        }
        // Each row's longest cached prefix: its keys and values are read, not computed.
        let mut hits = Vec::with_capacity(n);
        for p in &prompts {
            hits.push(if reuse {
                prefixes.lookup(weights, p)?
            } else {
                None
            });
        }
        let reused: Vec<usize> = hits.iter().map(|h| h.as_ref().map_or(0, |h| h.0)).collect();
        // Each row's prompt tokens still to compute.
        let new: Vec<usize> = prompts
            .iter()
            .zip(&reused)
            .map(|(p, r)| p.len() - r)
            .collect();
        prefixes.count_prefilled(new.iter().map(|&t| t as u64).sum());
        // The batch below pads every row to its longest row's new tokens; a row with many
        // more than the others is prefilled alone first, all but its last token.
        if reuse {
            for row in rows_to_prefill_alone(&new) {
                let (start, mut kv) = hits[row].take().unwrap_or_else(|| (0, self.new_cache(1)));
                let end = prompts[row].len() - 1;
                self.extend_row(&mut kv, &prompts[row][start..end], start, opts)?;
                prefixes.count_prefill_positions((end - start) as u64);
                hits[row] = Some((end, kv));
            }
        }
        // Where each row's batched prefill starts: its cached prefix, or what was prefilled
        // alone above.
        let starts: Vec<usize> = hits.iter().map(|h| h.as_ref().map_or(0, |h| h.0)).collect();
        let mut out: Vec<Generation> = requests
            .iter()
            .zip(&reused)
            .map(|(r, &reused)| Generation {
                tokens: vec![],
                logprobs: vec![],
                prompt_tokens: r.prompt.len(),
                reused_tokens: reused,
                finish: FinishReason::Length,
            })
            .collect();
        let mut done = vec![false; n];
        let mut cache = cfg.use_cache.then(|| self.new_cache(n));
        // The rows still decoding, as indices into `requests`: with a cache, a row that
        // finishes leaves the batch and its cache (its keys and values kept first, when
        // asked), so the rest decode without computing it. Not under LongRoPE, whose switch
        // recomputes every row from `full`.
        let mut active: Vec<usize> = (0..n).collect();
        let compacting = cfg.use_cache
            && !matches!(
                self.config.rope_scaling,
                Some(crate::config::RopeScaling::LongRope(_))
            );
        // With a cache each step feeds only the new column; without one the whole (growing)
        // batch is recomputed.
        let mut step_batch = Batch::left_padded(&prompts, pad);
        // Every column so far, to recompute from when a cache must be dropped.
        let mut full = step_batch.clone();
        if starts.iter().any(|&r| r > 0) {
            // Row i: [padding | its cached prefix | padding | the rest of its prompt]; the
            // padding is masked like any padding and positions continue from the prefix.
            let rows: Vec<Option<KvCache>> = hits.into_iter().map(|h| h.map(|h| h.1)).collect();
            cache = Some(KvCache::stack_left_padded(&rows, self.layers.len())?);
            let suffixes: Vec<Vec<u32>> = prompts
                .iter()
                .zip(&starts)
                .map(|(p, &r)| p[r..].to_vec())
                .collect();
            step_batch = Batch::left_padded(&suffixes, pad);
            let t = step_batch.len;
            for (row, &r) in starts.iter().enumerate() {
                for j in row * t..(row + 1) * t {
                    if step_batch.valid[j] {
                        step_batch.positions[j] += r as u32;
                    }
                }
            }
        }
        prefixes.count_prefill_positions((step_batch.batch * step_batch.len) as u64);
        for step in 0..cfg.max_new_tokens {
            if let Some(c) = &cache
                && self.longrope_switches(c.len(), step_batch.len)
            {
                cache = Some(self.new_cache(n));
                step_batch = full.clone();
            }
            // Only the last column's logits are read: project just its hidden state onto the
            // vocabulary (a prefill would otherwise compute `t × vocab` logits per row).
            let hidden = self.forward_hidden(&step_batch, opts, cache.as_mut())?;
            let [b, t, h] = hidden.dims();
            let last = self
                .lm_logits(hidden.slice([0..b, t - 1..t, 0..h]))
                .reshape([b, vocab]);
            let host = HostTensor::from_tensor(last).data;
            if let Some(first) = first_logits.take() {
                first.clone_from(&host);
            }
            let mut next = vec![pad; n];
            for (at, &row) in active.iter().enumerate() {
                if done[row] {
                    continue;
                }
                let (tok, lp) = pick(&host[at * vocab..(at + 1) * vocab], cfg, &mut rngs[row]);
                next[row] = tok;
                let g = &mut out[row];
                g.tokens.push(tok);
                g.logprobs.push(lp);
                let req = &requests[row];
                if req.stop_tokens.contains(&tok) {
                    g.finish = FinishReason::StopToken;
                    done[row] = true;
                } else if !req.stop_strings.is_empty() {
                    let text = decode.expect("checked above")(&g.tokens);
                    if req.stop_strings.iter().any(|s| text.contains(s.as_str())) {
                        g.finish = FinishReason::StopString;
                        done[row] = true;
                    }
                }
            }
            if done.iter().all(|&d| d) || step + 1 == cfg.max_new_tokens {
                break;
            }
            if compacting && active.iter().any(|&row| done[row]) {
                let c = cache.as_ref().expect("compacting decodes with a cache");
                let (mut stay, mut left) = (Vec::new(), Vec::new());
                for (at, &row) in active.iter().enumerate() {
                    if done[row] {
                        left.push(at)
                    } else {
                        stay.push(at)
                    }
                }
                if keep && reuse {
                    let rows: Vec<(usize, usize)> =
                        left.iter().map(|&at| (at, active[at])).collect();
                    self.keep_rows(prefixes, c, &rows, requests, &out, weights)?;
                }
                cache = Some(c.select_rows(&stay));
                active = stay.iter().map(|&at| active[at]).collect();
            }
            // Without compaction finished rows keep decoding a pad token that nothing reads
            // (keeps shapes uniform).
            let positions: Vec<u32> = active
                .iter()
                .map(|&row| (requests[row].prompt.len() + out[row].tokens.len() - 1) as u32)
                .collect();
            let new = Batch {
                ids: active.iter().map(|&row| next[row]).collect(),
                batch: active.len(),
                len: 1,
                positions,
                valid: vec![true; active.len()],
            };
            if !compacting {
                full = append_column(&full, &new);
            }
            step_batch = if cache.is_some() { new } else { full.clone() };
        }
        if keep
            && reuse
            && let Some(c) = &cache
        {
            let rows: Vec<(usize, usize)> = active.iter().copied().enumerate().collect();
            self.keep_rows(prefixes, c, &rows, requests, &out, weights)?;
        }
        Ok(out)
    }

    /// Makes sure `cache` holds `tokens` (one row), computing only what it lacks.
    fn cache_prefix(&self, cache: &mut PrefixCache, tokens: &[u32], opts: Forward) -> Result<()> {
        let weights = self.weights_key(opts.adapter);
        if cache.covers(weights, tokens) || !cache.fits(tokens.len()) {
            return Ok(());
        }
        let (start, mut kv) = match cache.lookup(weights, tokens)? {
            Some(hit) => hit,
            None => (0, self.new_cache(1)),
        };
        let rest = &tokens[start..];
        self.extend_row(&mut kv, rest, start, opts)?;
        cache.count_prefilled(rest.len() as u64);
        cache.count_prefill_positions(rest.len() as u64);
        cache.insert(weights, tokens.to_vec(), kv);
        Ok(())
    }

    /// Runs `tokens`, at positions `start..`, through the model on top of the one-row cache
    /// `kv` (which holds the `start` tokens before them).
    fn extend_row(
        &self,
        kv: &mut KvCache,
        tokens: &[u32],
        start: usize,
        opts: Forward,
    ) -> Result<()> {
        let batch = Batch {
            ids: tokens.to_vec(),
            batch: 1,
            len: tokens.len(),
            positions: (start as u32..(start + tokens.len()) as u32).collect(),
            valid: vec![true; tokens.len()],
        };
        self.forward_hidden(&batch, opts, Some(kv))?;
        Ok(())
    }

    /// Keeps the prompt and the generated tokens that went through the model (a row's last
    /// token never does) of each `(row of cache, index into requests)` in `rows`.
    fn keep_rows(
        &self,
        prefixes: &mut PrefixCache,
        cache: &KvCache,
        rows: &[(usize, usize)],
        requests: &[GenerationRequest],
        out: &[Generation],
        weights: crate::prefix_cache::WeightsKey,
    ) -> Result<()> {
        for &(row, i) in rows {
            let (req, g) = (&requests[i], &out[i]);
            let real = cache.key_valid[row].iter().filter(|&&v| v).count();
            let fed = real - req.prompt.len();
            let keep = req.prompt.len() + fed.min(g.tokens.len());
            if !prefixes.fits(keep) {
                continue;
            }
            let mut tokens = req.prompt.clone();
            tokens.extend_from_slice(&g.tokens[..keep - req.prompt.len()]);
            prefixes.insert(weights, tokens, cache.compact_row(row, keep)?);
        }
        Ok(())
    }
}

/// Prompts of a batch that share at least this many leading tokens have them prefilled once.
const MIN_SHARED_PREFIX: usize = crate::prefix_cache::MIN_REUSE;

/// What a separate one-row forward costs beyond its tokens, in prefill positions: its fixed
/// cost is one more pass over the weights, about a decode step — ≈ 30 prefill positions for
/// SmolLM2-135M on the 2-core CPU of docs/PERFORMANCE.md (an estimate from its decode and
/// forward rates, not tuned).
const ALONE_OVERHEAD: usize = 32;

/// Which rows to prefill one at a time before a batch whose rows have `new_tokens` prompt
/// tokens each still to compute, longest first.
///
/// A batched prefill runs every row over the longest row's new tokens (left padding): with
/// `s₁ ≥ s₂ ≥ … ≥ sₙ` it computes `n · s₁` positions. Prefilling the `k` longest alone first
/// (all but their last token, whose logits the batch reads) costs
/// `Σ_{i≤k} (sᵢ − 1 + ALONE_OVERHEAD) + n · max(s_{k+1}, 1)` (`s_{n+1} = 1`). The `k` that
/// minimises this is taken, the smallest on ties, so rows of equal length stay one batch.
pub(crate) fn rows_to_prefill_alone(new_tokens: &[usize]) -> Vec<usize> {
    let n = new_tokens.len();
    let mut order: Vec<usize> = (0..n).collect();
    // Stable: equally long rows keep their order.
    order.sort_by_key(|&row| std::cmp::Reverse(new_tokens[row]));
    let s = |i: usize| order.get(i).map_or(1, |&row| new_tokens[row].max(1));
    let (mut best, mut best_cost, mut alone) = (0, n * s(0), 0);
    for k in 1..=n {
        alone += s(k - 1) - 1 + ALONE_OVERHEAD;
        let cost = alone + n * s(k);
        if cost < best_cost {
            (best, best_cost) = (k, cost);
        }
    }
    order.truncate(best);
    order
}

/// The number of leading tokens every prompt shares, leaving each at least one token of its
/// own (the prefill must end on a real token of every row).
fn shared_prefix_len(prompts: &[Vec<u32>]) -> usize {
    let Some((first, rest)) = prompts.split_first() else {
        return 0;
    };
    let mut n = prompts
        .iter()
        .map(Vec::len)
        .min()
        .unwrap_or(0)
        .saturating_sub(1);
    for p in rest {
        n = n.min(first.iter().zip(p).take_while(|(a, b)| a == b).count());
    }
    n
}

impl CausalLm {
    /// Whether a cached step of `new` columns over `past` cached ones is the first to reach
    /// past LongRoPE's original context: the cached keys were rotated with the short factors,
    /// so transformers (`Phi3ForCausalLM.prepare_inputs_for_generation`) drops the cache there
    /// and recomputes the whole sequence with the long ones, and so do we.
    fn longrope_switches(&self, past: usize, new: usize) -> bool {
        match &self.config.rope_scaling {
            Some(crate::config::RopeScaling::LongRope(s)) => {
                let original = s.original_max_position_embeddings;
                past > 0 && past <= original && past + new > original
            }
            _ => false,
        }
    }
}

/// Appends a one-column batch to a batch.
fn append_column(a: &Batch, col: &Batch) -> Batch {
    let mut out = Batch {
        ids: vec![],
        batch: a.batch,
        len: a.len + 1,
        positions: vec![],
        valid: vec![],
    };
    for row in 0..a.batch {
        let r = row * a.len..(row + 1) * a.len;
        out.ids.extend_from_slice(&a.ids[r.clone()]);
        out.ids.push(col.ids[row]);
        out.positions.extend_from_slice(&a.positions[r.clone()]);
        out.positions.push(col.positions[row]);
        out.valid.extend_from_slice(&a.valid[r]);
        out.valid.push(col.valid[row]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed costs (positions, `ALONE_OVERHEAD` = 32): one 1,400-token row among seven
    /// of 20 costs 8 · 1,400 = 11,200 batched, 1,399 + 32 + 8 · 20 = 1,591 with it alone
    /// first, 1,591 + 51 = 1,642 with a second row alone too.
    #[test]
    fn only_rows_that_would_pad_the_batch_are_prefilled_alone() {
        let mut one_long = vec![20; 8];
        one_long[3] = 1400;
        assert_eq!(rows_to_prefill_alone(&one_long), [3]);
        // Two long rows among six short ones: 2 · (1,000 − 1 + 32) + 8 · 30 = 2,302 beats
        // 8 · 1,000, 1,031 + 8 · 1,000 and all eight alone (2,062 + 6 · 61 + 8 = 2,436).
        assert_eq!(
            rows_to_prefill_alone(&[30, 1000, 30, 30, 30, 1000, 30, 30]),
            [1, 5]
        );
        // Equal rows stay one batch (k = 1 costs 131 + 400 > 400), as does a single row.
        assert!(rows_to_prefill_alone(&[100; 4]).is_empty());
        assert!(rows_to_prefill_alone(&[5000]).is_empty());
        assert!(rows_to_prefill_alone(&[1, 1]).is_empty());
        assert!(rows_to_prefill_alone(&[]).is_empty());
        // Close lengths stay batched: 2 · 60 = 120 against 59 + 32 + 2 · 50 = 191.
        assert!(rows_to_prefill_alone(&[60, 50]).is_empty());
    }

    #[test]
    fn greedy_takes_first_max_and_reports_logprob() {
        let cfg = SamplingConfig::greedy(1);
        let mut rng = StdRng::seed_from_u64(0);
        let (t, lp) = pick(&[0.0, 2.0, 2.0, 1.0], &cfg, &mut rng);
        assert_eq!(t, 1);
        let lse = (1f32 + 2f32.exp() * 2.0 + 1f32.exp()).ln();
        assert!((lp - (2.0 - lse)).abs() < 1e-6);
    }

    #[test]
    fn top_k_one_is_greedy_and_top_p_truncates() {
        let mut cfg = SamplingConfig::greedy(1);
        cfg.temperature = 1.0;
        cfg.top_k = Some(1);
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..20 {
            assert_eq!(pick(&[0.0, 5.0, 1.0], &cfg, &mut rng).0, 1);
        }
        cfg.top_k = None;
        cfg.top_p = Some(0.5); // token 1 alone holds > 0.5
        for _ in 0..20 {
            assert_eq!(pick(&[0.0, 5.0, 1.0], &cfg, &mut rng).0, 1);
        }
    }

    /// Top-k keeps the k highest logits, ties to the lower id: logits 3, 1, 3, 2, 3 with k 2
    /// keep ids 0 and 2 (not 4), each drawn with probability ½ at any temperature; k 4 keeps
    /// 0, 2, 4, 3 with softmax weights e³ : e³ : e³ : e² (temperature 1), checked against the
    /// frequencies of 20,000 draws.
    #[test]
    fn top_k_keeps_the_highest_logits_with_ties_to_the_lower_id() {
        let logits = [3.0f32, 1.0, 3.0, 2.0, 3.0];
        let mut cfg = SamplingConfig::greedy(1);
        cfg.temperature = 0.7;
        cfg.top_k = Some(2);
        let mut rng = StdRng::seed_from_u64(5);
        let mut counts = [0usize; 5];
        for _ in 0..20_000 {
            counts[pick(&logits, &cfg, &mut rng).0 as usize] += 1;
        }
        assert_eq!((counts[1], counts[3], counts[4]), (0, 0, 0), "{counts:?}");
        assert!(
            (counts[0] as f64 / 20_000.0 - 0.5).abs() < 0.02,
            "{counts:?}"
        );
        cfg.temperature = 1.0;
        cfg.top_k = Some(4);
        let mut counts = [0usize; 5];
        for _ in 0..20_000 {
            counts[pick(&logits, &cfg, &mut rng).0 as usize] += 1;
        }
        let z = 3.0 * 3f64.exp() + 2f64.exp();
        assert_eq!(counts[1], 0);
        for (id, w) in [
            (0, 3f64.exp()),
            (2, 3f64.exp()),
            (3, 2f64.exp()),
            (4, 3f64.exp()),
        ] {
            let f = counts[id] as f64 / 20_000.0;
            assert!((f - w / z).abs() < 0.015, "id {id}: {f} vs {}", w / z);
        }
    }
}
