//! The state bank of steering training and its ε-greedy top-k selection.
//!
//! States come from no-intervention rollouts, each scored with the fast path's priority. A round
//! picks up to `k` states **without replacement**; each pick is, with probability `1 − ε`, the
//! highest-priority state left, and otherwise a uniformly random one of those left.

use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::error::{Result, SteerError};

/// States with their current priorities.
#[derive(Debug, Clone, Default)]
pub struct StateBank<S> {
    states: Vec<S>,
    priorities: Vec<f32>,
}

impl<S> StateBank<S> {
    /// An empty bank.
    pub fn new() -> Self {
        Self {
            states: Vec::new(),
            priorities: Vec::new(),
        }
    }

    /// Adds a state with its priority (NaN is refused).
    pub fn push(&mut self, state: S, priority: f32) -> Result<()> {
        if priority.is_nan() {
            return Err(SteerError::Invalid("a state's priority is NaN".into()));
        }
        self.states.push(state);
        self.priorities.push(priority);
        Ok(())
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// State `i`.
    pub fn get(&self, i: usize) -> Option<&S> {
        self.states.get(i)
    }

    /// The current priorities, by state index.
    pub fn priorities(&self) -> &[f32] {
        &self.priorities
    }

    /// Replaces the priorities (after the fast path was retrained).
    pub fn rescore(&mut self, priorities: Vec<f32>) -> Result<()> {
        if priorities.len() != self.states.len() || priorities.iter().any(|p| p.is_nan()) {
            return Err(SteerError::Invalid(format!(
                "{} priorities (or a NaN) for {} states",
                priorities.len(),
                self.states.len()
            )));
        }
        self.priorities = priorities;
        Ok(())
    }

    /// Indices of up to `k` distinct states chosen ε-greedily; deterministic given `rng`.
    /// Ties in priority go to the lower index.
    pub fn select(&self, k: usize, epsilon: f64, rng: &mut impl Rng) -> Result<Vec<usize>> {
        if !(0.0..=1.0).contains(&epsilon) {
            return Err(SteerError::Invalid(format!(
                "epsilon {epsilon} is outside [0, 1]"
            )));
        }
        let mut left: Vec<usize> = (0..self.states.len()).collect();
        let mut picked = Vec::with_capacity(k.min(left.len()));
        while picked.len() < k && !left.is_empty() {
            let pos = if rng.random::<f64>() < epsilon {
                rng.random_range(0..left.len())
            } else {
                let mut best = 0;
                for (p, &i) in left.iter().enumerate() {
                    if self.priorities[i] > self.priorities[left[best]] {
                        best = p;
                    }
                }
                best
            };
            picked.push(left.remove(pos));
        }
        Ok(picked)
    }

    /// [`StateBank::select`] with a generator seeded by `seed`.
    pub fn select_seeded(&self, k: usize, epsilon: f64, seed: u64) -> Result<Vec<usize>> {
        self.select(k, epsilon, &mut StdRng::seed_from_u64(seed))
    }
}
