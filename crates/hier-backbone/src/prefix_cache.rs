//! Keys and values kept across generation calls, so that a prompt which starts like an earlier
//! one prefills only the tokens that differ.
//!
//! An agent's prompts repeat themselves: step `k + 1` of a ReAct episode is step `k`'s prompt,
//! its reply and one new observation; every prompt of an evaluation opens with the same
//! instruction and few-shot examples; the `G` samples of a GRPO group, or the `N`
//! continuations of a steering state, start from one state. Recomputing that context every
//! call makes an episode of `S` steps cost `O(S²)` prefill tokens.
//!
//! A [`PrefixCache`] holds, per entry, a token sequence and the keys/values of one row that
//! read it (compacted: no padding columns). A new prompt reuses the longest entry sharing a
//! prefix with it — any entry, cut to the shared length, since with causal attention the keys
//! and values of position `i` depend on tokens `0..=i` alone — and prefills the rest on top.
//! The invariant that makes this exact: reused columns are those of **the same tokens at the
//! same positions through the same weights** (base + the same adapter revision); the result
//! differs from recomputing only by float rounding (the test holds logits to 1e-5).
//!
//! Entries are keyed by adapter slot and revision ([`crate::AdapterSpec::revision`]); a cache
//! belongs to one model and must not be used with another. Memory is bounded by a token budget
//! (least recently used entries go first); a budget of 0 keeps nothing, which recomputes every
//! prompt (and still counts what it prefilled). LongRoPE models (Phi-3 128k) rotate every key
//! with factors that depend on the whole sequence's length, so nothing computed for a shorter
//! sequence may be reused there: a cache neither stores nor reuses anything for them.

use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{BackboneError, Result};
use crate::kv_cache::{KvCache, LayerKv};
use crate::llama::{AdapterId, CausalLm};

/// Reuse a cached prefix only from this many tokens on: shorter ones save less than stacking
/// the rows' caches costs.
pub const MIN_REUSE: usize = 16;

/// Which weights computed an entry: the adapter's slot and revision (`None` for the bare base).
pub(crate) type WeightsKey = Option<(usize, u64)>;

/// What a cache has saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PrefillStats {
    /// Prompts generated from.
    pub prompts: u64,
    /// Their tokens.
    pub prompt_tokens: u64,
    /// Prompt tokens run through the model (the rest were read from the cache).
    pub prefilled_tokens: u64,
    /// Positions the prefills ran through the model, padding included: a batch pads every row
    /// to its longest row's new tokens, so this is at least `prefilled_tokens` (absent, 0, in
    /// records written before it was counted).
    #[serde(default)]
    pub prefill_positions: u64,
}

impl PrefillStats {
    /// Prompt tokens read from the cache instead of computed.
    pub fn reused_tokens(&self) -> u64 {
        self.prompt_tokens.saturating_sub(self.prefilled_tokens)
    }

    /// Adds another cache's counts.
    pub fn add(&mut self, other: PrefillStats) {
        self.prompts += other.prompts;
        self.prompt_tokens += other.prompt_tokens;
        self.prefilled_tokens += other.prefilled_tokens;
        self.prefill_positions += other.prefill_positions;
    }
}

struct Entry {
    weights: WeightsKey,
    tokens: Vec<u32>,
    kv: KvCache,
    last_used: u64,
}

/// Keys and values of earlier prompts (and their generated tokens), reused by later prompts
/// that start the same way. See the module docs for the invariant.
pub struct PrefixCache {
    entries: Vec<Entry>,
    max_tokens: usize,
    clock: u64,
    stats: PrefillStats,
}

impl std::fmt::Debug for PrefixCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixCache")
            .field("entries", &self.entries.len())
            .field("cached_tokens", &self.cached_tokens())
            .field("max_tokens", &self.max_tokens)
            .field("stats", &self.stats)
            .finish()
    }
}

impl PrefixCache {
    /// A cache holding at most `max_tokens` cached positions over all entries (0: keep nothing).
    pub fn new(max_tokens: usize) -> Self {
        Self {
            entries: Vec::new(),
            max_tokens,
            clock: 0,
            stats: PrefillStats::default(),
        }
    }

    /// A cache of at most `mib` MiB of keys and values of `lm` (f32: `2 · layers · kv_heads ·
    /// head_dim · 4` bytes per token; SmolLM2-135M ≈ 45 KiB, so 1 GiB ≈ 23 000 tokens).
    pub fn with_mib(lm: &CausalLm, mib: usize) -> Self {
        let c = &lm.config;
        let per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 4;
        Self::new(mib.saturating_mul(1 << 20) / per_token.max(1))
    }

    /// What has been prefilled and reused so far.
    pub fn stats(&self) -> PrefillStats {
        self.stats
    }

    /// Positions held over all entries.
    pub fn cached_tokens(&self) -> usize {
        self.entries.iter().map(|e| e.tokens.len()).sum()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops every entry (the statistics stay).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Whether an entry computed by `weights` starts with all of `tokens`.
    pub(crate) fn covers(&self, weights: WeightsKey, tokens: &[u32]) -> bool {
        self.entries
            .iter()
            .any(|e| e.weights == weights && e.tokens.starts_with(tokens))
    }

    /// Whether a sequence of `tokens` may be kept at all.
    pub(crate) fn fits(&self, tokens: usize) -> bool {
        (MIN_REUSE..=self.max_tokens).contains(&tokens)
    }

    pub(crate) fn count(&mut self, prompts: u64, prompt_tokens: u64) {
        self.stats.prompts += prompts;
        self.stats.prompt_tokens += prompt_tokens;
    }

    pub(crate) fn count_prefilled(&mut self, tokens: u64) {
        self.stats.prefilled_tokens += tokens;
    }

    pub(crate) fn count_prefill_positions(&mut self, positions: u64) {
        self.stats.prefill_positions += positions;
    }

    /// The longest cached prefix of `tokens` computed by `weights`, leaving at least one token
    /// of `tokens` to prefill (its logits are needed), as a one-row cache of that length; `None`
    /// below [`MIN_REUSE`] tokens.
    pub(crate) fn lookup(
        &mut self,
        weights: WeightsKey,
        tokens: &[u32],
    ) -> Result<Option<(usize, KvCache)>> {
        let limit = tokens.len().saturating_sub(1);
        let best = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.weights == weights)
            .map(|(i, e)| (i, common_prefix(&e.tokens, tokens).min(limit)))
            .max_by_key(|&(i, n)| (n, std::cmp::Reverse(i)));
        match best {
            Some((i, n)) if n >= MIN_REUSE => {
                self.clock += 1;
                let e = &mut self.entries[i];
                e.last_used = self.clock;
                Ok(Some((n, e.kv.truncated(n)?)))
            }
            _ => Ok(None),
        }
    }

    /// Keeps the one-row cache `kv` of `tokens`. Entries that are a prefix of `tokens` are
    /// dropped (the new one answers everything they did), then the least recently used go
    /// until the budget holds. A sequence longer than the whole budget is not kept.
    pub(crate) fn insert(&mut self, weights: WeightsKey, tokens: Vec<u32>, kv: KvCache) {
        debug_assert_eq!(kv.len(), tokens.len());
        if !self.fits(tokens.len()) || self.covers(weights, &tokens) {
            return;
        }
        self.entries
            .retain(|e| !(e.weights == weights && tokens.starts_with(&e.tokens)));
        self.clock += 1;
        self.entries.push(Entry {
            weights,
            tokens,
            kv,
            last_used: self.clock,
        });
        while self.cached_tokens() > self.max_tokens {
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i)
                .expect("over budget means non-empty");
            self.entries.swap_remove(oldest);
        }
    }
}

/// Leading tokens `a` and `b` share.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl KvCache {
    /// The first `n` cached columns.
    pub(crate) fn truncated(&self, n: usize) -> Result<Self> {
        if n > self.len() {
            return Err(BackboneError::Invalid(format!(
                "cannot cut a KV cache of {} columns to {n}",
                self.len()
            )));
        }
        Ok(Self {
            layers: self
                .layers
                .iter()
                .map(|l| {
                    l.as_ref().map(|c| {
                        let (k, v) = (c.keys(), c.values());
                        let [b, h, _, d] = k.dims();
                        LayerKv::new(
                            k.slice([0..b, 0..h, 0..n, 0..d]),
                            v.slice([0..b, 0..h, 0..n, 0..d]),
                        )
                    })
                })
                .collect(),
            key_valid: self.key_valid.iter().map(|r| r[..n].to_vec()).collect(),
        })
    }

    /// The rows `rows` of the cache, in that order (every column kept).
    pub(crate) fn select_rows(&self, rows: &[usize]) -> Self {
        let layers = self
            .layers
            .iter()
            .map(|l| {
                l.as_ref().map(|c| {
                    let (k, v) = (c.keys(), c.values());
                    let ids: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
                    let idx = Tensor::<1, Int>::from_data(
                        TensorData::new(ids, [rows.len()]),
                        &k.device(),
                    );
                    LayerKv::new(k.select(0, idx.clone()), v.select(0, idx))
                })
            })
            .collect();
        Self {
            layers,
            key_valid: rows.iter().map(|&r| self.key_valid[r].clone()).collect(),
        }
    }

    /// Row `row` as a one-row cache of its first `keep` real columns (padding dropped).
    pub(crate) fn compact_row(&self, row: usize, keep: usize) -> Result<Self> {
        let valid = self.key_valid.get(row).ok_or_else(|| {
            BackboneError::Invalid(format!("KV cache has no row {row} of {}", self.rows()))
        })?;
        let cols: Vec<i64> = valid
            .iter()
            .enumerate()
            .filter(|(_, v)| **v)
            .map(|(j, _)| j as i64)
            .take(keep)
            .collect();
        if cols.len() < keep {
            return Err(BackboneError::Invalid(format!(
                "KV cache row {row} has {} real columns, not {keep}",
                cols.len()
            )));
        }
        let layers = self
            .layers
            .iter()
            .map(|l| {
                l.as_ref().map(|c| {
                    let idx = Tensor::<1, Int>::from_data(
                        TensorData::new(cols.clone(), [cols.len()]),
                        &c.keys().device(),
                    );
                    let one = |x: Tensor<4>| {
                        let [_, h, t, d] = x.dims();
                        x.slice([row..row + 1, 0..h, 0..t, 0..d])
                            .select(2, idx.clone())
                    };
                    LayerKv::new(one(c.keys()), one(c.values()))
                })
            })
            .collect();
        Ok(Self {
            layers,
            key_valid: vec![vec![true; keep]],
        })
    }

    /// One row per element of `rows` (one-row caches, `None` for a row with nothing cached),
    /// left-padded with masked zero columns to the longest.
    pub(crate) fn stack_left_padded(rows: &[Option<KvCache>], num_layers: usize) -> Result<Self> {
        let width = rows.iter().flatten().map(KvCache::len).max().unwrap_or(0);
        let Some(template) = rows.iter().flatten().find(|c| !c.is_empty()) else {
            return Ok(KvCache::new(num_layers, rows.len()));
        };
        if let Some(bad) = rows.iter().flatten().find(|c| c.rows() != 1) {
            return Err(BackboneError::Invalid(format!(
                "only one-row caches can be stacked; one has {} rows",
                bad.rows()
            )));
        }
        let mut layers = Vec::with_capacity(num_layers);
        for li in 0..num_layers {
            let tk = template.layers[li].as_ref().ok_or_else(|| {
                BackboneError::Invalid(format!("cached prefix has no keys for layer {li}"))
            })?;
            let tk = tk.keys();
            let [_, h, _, d] = tk.dims();
            let device = tk.device();
            let (mut ks, mut vs) = (Vec::new(), Vec::new());
            for r in rows {
                let have = r.as_ref().map_or(0, KvCache::len);
                let pad = width - have;
                let zeros = || Tensor::<4>::zeros([1, h, pad, d], &device);
                match r.as_ref().and_then(|c| c.layers[li].as_ref()) {
                    Some(c) if pad == 0 => {
                        ks.push(c.keys());
                        vs.push(c.values());
                    }
                    Some(c) => {
                        ks.push(Tensor::cat(vec![zeros(), c.keys()], 2));
                        vs.push(Tensor::cat(vec![zeros(), c.values()], 2));
                    }
                    None => {
                        ks.push(zeros());
                        vs.push(zeros());
                    }
                }
            }
            layers.push(Some(LayerKv::new(Tensor::cat(ks, 0), Tensor::cat(vs, 0))));
        }
        let key_valid = rows
            .iter()
            .map(|r| {
                let have = r.as_ref().map_or(0, KvCache::len);
                let mut v = vec![false; width - have];
                v.resize(width, true);
                v
            })
            .collect();
        Ok(Self { layers, key_valid })
    }
}

impl CausalLm {
    /// The key of the weights a call with `adapter` runs through.
    pub(crate) fn weights_key(&self, adapter: Option<AdapterId>) -> WeightsKey {
        adapter.map(|a| (a.0, self.adapters()[a.0].revision))
    }

    /// Whether keys computed for a shorter sequence stay valid in a longer one (not under
    /// LongRoPE, whose factors depend on the whole length).
    pub(crate) fn reuses_prefixes(&self) -> bool {
        !matches!(
            self.config.rope_scaling,
            Some(crate::config::RopeScaling::LongRope(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llama::{Batch, Forward};
    use crate::weights::HostTensor;

    fn max_abs_difference(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    }

    /// Logits of prompts whose prefixes come from the cache (two rows of different cached
    /// lengths and a row with none, stacked with padding) equal a full forward of each prompt
    /// to 1e-5.
    #[test]
    fn logits_over_cached_prefixes_equal_a_full_forward() {
        let device = burn::tensor::Device::flex();
        let lm = CausalLm::random(crate::ModelConfig::bench(), 3, &device).unwrap();
        let prompt =
            |seed: u32, n: u32| -> Vec<u32> { (0..n).map(|i| (i * 31 + seed) % 2000).collect() };
        let prompts = [prompt(1, 40), prompt(2, 33), prompt(3, 12)];
        let mut cache = PrefixCache::new(1000);
        for (p, cut) in prompts.iter().zip([30usize, 17, 0]) {
            if cut > 0 {
                let mut kv = lm.new_cache(1);
                lm.forward_hidden(&Batch::single(&p[..cut]), Forward::default(), Some(&mut kv))
                    .unwrap();
                cache.insert(None, p[..cut].to_vec(), kv);
            }
        }
        let hits: Vec<_> = prompts
            .iter()
            .map(|p| cache.lookup(None, p).unwrap())
            .collect();
        let reused: Vec<usize> = hits.iter().map(|h| h.as_ref().map_or(0, |h| h.0)).collect();
        assert_eq!(reused, [30, 17, 0]);
        let rows: Vec<Option<KvCache>> = hits.into_iter().map(|h| h.map(|h| h.1)).collect();
        let mut kv = KvCache::stack_left_padded(&rows, lm.layers.len()).unwrap();
        let suffixes: Vec<Vec<u32>> = prompts
            .iter()
            .zip(&reused)
            .map(|(p, &r)| p[r..].to_vec())
            .collect();
        let mut batch = Batch::left_padded(&suffixes, 0);
        for (row, &r) in reused.iter().enumerate() {
            for j in row * batch.len..(row + 1) * batch.len {
                if batch.valid[j] {
                    batch.positions[j] += r as u32;
                }
            }
        }
        let logits = lm
            .forward(&batch, Forward::default(), Some(&mut kv))
            .unwrap();
        let [_, t, v] = logits.dims();
        let got = HostTensor::from_tensor(logits).data;
        for (row, p) in prompts.iter().enumerate() {
            let full = lm
                .forward(&Batch::single(p), Forward::default(), None)
                .unwrap();
            let want = HostTensor::from_tensor(full).data;
            let n = p.len() - reused[row];
            for k in 0..n {
                // Suffix token k of this row sits in column t − n + k.
                let ours = &got[(row * t + t - n + k) * v..][..v];
                let theirs = &want[(reused[row] + k) * v..][..v];
                let worst = max_abs_difference(ours, theirs);
                assert!(
                    worst <= 1e-5,
                    "row {row} token {k}: logits differ by {worst}"
                );
            }
        }
        // The stacked cache now holds every row's whole prompt, padding aside.
        for (row, p) in prompts.iter().enumerate() {
            assert_eq!(kv.compact_row(row, p.len()).unwrap().len(), p.len());
        }
        assert!(
            kv.compact_row(2, 13).is_err(),
            "row 2 has only 12 real columns"
        );
    }

    /// The next-token logits read over the cache equal the last position of a full forward
    /// pass of each prompt (to 1e-5), and a later generation from prompts that extend them
    /// prefills only the extension.
    #[test]
    fn next_logits_over_the_cache_equal_a_full_forward_and_are_kept() {
        let device = burn::tensor::Device::flex();
        let lm = CausalLm::random(crate::ModelConfig::bench(), 5, &device).unwrap();
        let prompt =
            |seed: u32, n: u32| -> Vec<u32> { (0..n).map(|i| (i * 37 + seed) % 2000).collect() };
        let prompts = vec![prompt(1, 40), prompt(2, 25)];
        let mut cache = PrefixCache::new(10_000);
        let got = lm.next_logits_cached(&prompts, None, &mut cache).unwrap();
        for (row, p) in prompts.iter().enumerate() {
            let full = lm
                .forward(&Batch::single(p), Forward::default(), None)
                .unwrap();
            let want = HostTensor::from_tensor(full).data;
            let v = got[row].len();
            let last = &want[(p.len() - 1) * v..][..v];
            let worst = max_abs_difference(&got[row], last);
            assert!(worst <= 1e-5, "row {row}: logits differ by {worst}");
        }
        let before = cache.stats();
        assert_eq!(before.prefilled_tokens, 65, "nothing was cached before");
        // The same observations with another instruction after them (the slow path).
        let longer: Vec<crate::GenerationRequest> = prompts
            .iter()
            .map(|p| crate::GenerationRequest {
                prompt: [p.as_slice(), &[7, 8, 9]].concat(),
                stop_tokens: vec![],
                stop_strings: vec![],
            })
            .collect();
        lm.generate_cached(
            &longer,
            &crate::SamplingConfig::greedy(2),
            None,
            None,
            &mut cache,
        )
        .unwrap();
        let after = cache.stats();
        assert_eq!(after.prompt_tokens - before.prompt_tokens, 71);
        assert_eq!(
            after.prefilled_tokens - before.prefilled_tokens,
            6,
            "only the three new tokens of each row"
        );
    }

    #[test]
    fn common_prefix_counts_leading_agreement() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 3]), 2);
        assert_eq!(common_prefix(&[], &[1]), 0);
    }
}
