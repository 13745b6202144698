//! # hier-steer
//!
//! The steering agent's objectives and decision logic, independent of any executor or
//! environment; pure functions on Burn tensors (any device) and plain Rust values.
//!
//! | piece | what |
//! |---|---|
//! | [`gate`] | `z = log p(yes) − log p(no)`, priority `σ(z)`, trigger `σ(z − logit τ)` (no overflow), seeded Bernoulli gate |
//! | [`grpo`] | group advantages (TRL: unbiased std, ε = 1e-4, or no std), **baseline-in-group** advantages, token-level PPO-clip loss with ε_low/ε_high, k3 KL to a reference, `grpo`/`bnpo`/`dr_grpo`/`dapo` normalisations |
//! | [`rank`] | `q(s) = mean_j \|R̄_{s,j} − b_s\|`, RankNet over same-task pairs |
//! | [`bank`] | the state bank and its ε-greedy top-k selection without replacement |
//! | [`parse`] | `<think>…</think><action>pass \| guide: … \| reject: …</action>` → typed intervention |

pub mod bank;
pub mod error;
pub mod gate;
pub mod grpo;
pub mod output;
pub mod parse;
pub mod rank;

pub use bank::StateBank;
pub use error::{Result, SteerError};
pub use gate::{Gate, priority, trigger_probability, trigger_probability_f64, yes_no_log_odds};
pub use grpo::{
    GroupAdvantages, LossNormalisation, PpoConfig, StdScaling, baseline_in_group_advantages,
    group_advantages, ppo_clip_loss,
};
pub use output::LossOutput;
pub use parse::{Intervention, SlowPathOutput, parse_slow_path};
pub use rank::{q_target, ranking_pairs, ranknet_loss};

/// Re-export of Burn, so dependants name the same tensor types.
pub use burn;
