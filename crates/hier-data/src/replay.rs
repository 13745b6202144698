//! The replay buffer of online RL (METHODS.md A.1 phase 3): offline data mixed with fresh
//! online segments.
//!
//! - Admission: every successful online segment is kept; a failed one is kept with
//!   probability `keep_failures` (0.1 in the paper), drawn from the buffer's own seeded RNG.
//! - Capacity: at most `capacity` online transitions; the oldest segments are evicted first.
//!   Offline data is never evicted.
//! - Sampling: a batch of `n` holds exactly `round(n · offline_ratio)` offline transitions and
//!   the rest online (all offline while nothing online is stored; all online when there is no
//!   offline data), drawn uniformly with replacement.
//! - The whole buffer, RNG state included, is serialisable: a resumed run samples exactly what
//!   the uninterrupted run would have.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};

/// SplitMix64: tiny, portable, and its whole state is one `u64` (so it serialises).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` (53 bits).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift with rejection; `n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "below(0)");
        let n = n as u64;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            let low = m as u64;
            if low >= n.wrapping_neg() % n {
                return (m >> 64) as usize;
            }
        }
    }
}

/// Settings of a [`ReplayBuffer`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// Share of each batch drawn from offline data, in `[0, 1]`.
    pub offline_ratio: f64,
    /// Online transitions kept at most.
    pub capacity: usize,
    /// Probability of keeping a failed online segment.
    pub keep_failures: f64,
    pub seed: u64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self {
            offline_ratio: 0.5,
            capacity: 100_000,
            keep_failures: 0.1,
            seed: 0,
        }
    }
}

impl ReplayConfig {
    pub fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.offline_ratio) {
            return Err(DataError::Invalid(format!(
                "replay: offline_ratio = {} is outside [0, 1]",
                self.offline_ratio
            )));
        }
        if !(0.0..=1.0).contains(&self.keep_failures) {
            return Err(DataError::Invalid(format!(
                "replay: keep_failures = {} is outside [0, 1]",
                self.keep_failures
            )));
        }
        if self.capacity == 0 {
            return Err(DataError::Invalid("replay: capacity must be > 0".into()));
        }
        Ok(())
    }
}

/// Where a sampled item came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Origin {
    Offline,
    Online,
}

/// Offline transitions plus a bounded FIFO of online segments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayBuffer<T> {
    config: ReplayConfig,
    offline: Vec<T>,
    online: VecDeque<Vec<T>>,
    online_len: usize,
    rng: SplitMix64,
    /// Segments offered / kept, successes / failures (for logs).
    pub offered: [u64; 2],
    pub kept: [u64; 2],
}

impl<T: Clone> ReplayBuffer<T> {
    pub fn new(config: ReplayConfig, offline: Vec<T>) -> Result<Self> {
        config.check()?;
        let rng = SplitMix64::new(config.seed);
        Ok(Self {
            config,
            offline,
            online: VecDeque::new(),
            online_len: 0,
            rng,
            offered: [0; 2],
            kept: [0; 2],
        })
    }

    pub fn config(&self) -> &ReplayConfig {
        &self.config
    }

    pub fn offline_len(&self) -> usize {
        self.offline.len()
    }

    pub fn online_len(&self) -> usize {
        self.online_len
    }

    /// Offers one online segment; returns whether it was kept.
    pub fn push_segment(&mut self, segment: Vec<T>, success: bool) -> bool {
        let k = usize::from(!success);
        self.offered[k] += 1;
        // The draw happens for every failure, kept or not, so the stream does not depend on
        // what was kept before.
        let keep = success || self.rng.unit() < self.config.keep_failures;
        if !keep || segment.is_empty() {
            return false;
        }
        self.kept[k] += 1;
        self.online_len += segment.len();
        self.online.push_back(segment);
        while self.online_len > self.config.capacity && self.online.len() > 1 {
            let old = self.online.pop_front().expect("len > 1");
            self.online_len -= old.len();
        }
        true
    }

    fn online_at(&self, mut i: usize) -> &T {
        for seg in &self.online {
            if i < seg.len() {
                return &seg[i];
            }
            i -= seg.len();
        }
        unreachable!("index below online_len")
    }

    /// A batch of `n` (item, origin) pairs; errors if the buffer is empty.
    pub fn sample(&mut self, n: usize) -> Result<Vec<(T, Origin)>> {
        let (off, on) = (self.offline.len(), self.online_len);
        if off + on == 0 {
            return Err(DataError::Invalid(
                "replay: sampling an empty buffer".into(),
            ));
        }
        let n_off = if on == 0 {
            n
        } else if off == 0 {
            0
        } else {
            (n as f64 * self.config.offline_ratio).round() as usize
        };
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            if k < n_off {
                let i = self.rng.below(off);
                out.push((self.offline[i].clone(), Origin::Offline));
            } else {
                let i = self.rng.below(on);
                out.push((self.online_at(i).clone(), Origin::Online));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(ratio: f64, capacity: usize, keep: f64) -> ReplayBuffer<u32> {
        ReplayBuffer::new(
            ReplayConfig {
                offline_ratio: ratio,
                capacity,
                keep_failures: keep,
                seed: 7,
            },
            (0..100).collect(),
        )
        .unwrap()
    }

    #[test]
    fn batches_hold_the_mixing_ratio_exactly() {
        let mut b = buffer(0.25, 1000, 1.0);
        // Nothing online yet: all offline.
        assert!(
            b.sample(8)
                .unwrap()
                .iter()
                .all(|(_, o)| *o == Origin::Offline)
        );
        b.push_segment(vec![1000, 1001, 1002], true);
        for n in [4, 8, 10, 64] {
            let batch = b.sample(n).unwrap();
            let off = batch.iter().filter(|(_, o)| *o == Origin::Offline).count();
            assert_eq!(off, (n as f64 * 0.25).round() as usize, "n = {n}");
            for (x, o) in batch {
                assert_eq!(o == Origin::Online, x >= 1000);
            }
        }
        let mut all_online = buffer(0.0, 1000, 1.0);
        all_online.push_segment(vec![5000], true);
        assert!(
            all_online
                .sample(5)
                .unwrap()
                .iter()
                .all(|(x, _)| *x == 5000)
        );
    }

    #[test]
    fn successes_are_kept_failures_at_their_rate() {
        let mut b = buffer(0.5, usize::MAX, 0.1);
        let mut kept = 0;
        for k in 0..10_000 {
            assert!(b.push_segment(vec![k], true));
            kept += usize::from(b.push_segment(vec![k], false));
        }
        // 10,000 draws at p = 0.1: 1000 ± 3σ (σ = 30).
        assert!((910..=1090).contains(&kept), "kept {kept} failures");
        assert_eq!(b.kept, [10_000, kept as u64]);
    }

    #[test]
    fn capacity_evicts_oldest_segments() {
        let mut b = buffer(0.5, 5, 1.0);
        b.push_segment(vec![1, 2], true);
        b.push_segment(vec![3, 4], true);
        b.push_segment(vec![5, 6], true);
        assert_eq!(b.online_len(), 4);
        let online: Vec<u32> = (0..4).map(|i| *b.online_at(i)).collect();
        assert_eq!(online, [3, 4, 5, 6]);
    }

    #[test]
    fn a_resumed_buffer_samples_what_the_original_would() {
        let mut a = buffer(0.5, 100, 0.5);
        for k in 0..20 {
            a.push_segment(vec![k, k + 1], k % 3 == 0);
        }
        a.sample(16).unwrap();
        let saved = serde_json::to_string(&a).unwrap();
        let mut b: ReplayBuffer<u32> = serde_json::from_str(&saved).unwrap();
        assert_eq!(a.sample(32).unwrap(), b.sample(32).unwrap());
        assert_eq!(
            a.push_segment(vec![9], false),
            b.push_segment(vec![9], false)
        );
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = ReplayConfig {
            offline_ratio: 1.5,
            ..ReplayConfig::default()
        };
        let err = ReplayBuffer::<u32>::new(bad, vec![])
            .unwrap_err()
            .to_string();
        assert!(err.contains("offline_ratio"), "{err}");
        let mut empty = ReplayBuffer::<u32>::new(ReplayConfig::default(), vec![]).unwrap();
        assert!(empty.sample(1).is_err());
    }
}
