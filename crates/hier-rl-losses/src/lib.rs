//! # hier-rl-losses
//!
//! The objectives of Multi²'s System 2 (offline → online RL) as pure functions on Burn
//! tensors and masks, usable on their own by any project: action-level log-probabilities,
//! the TD critic loss `(r + γ(1−d)·V̄(o') − Q(o,a))²`, the expectile value loss
//! `|τ − 1{u<0}|·u²`, Polyak target updates, the policy-anchored advantage-weighted actor,
//! the online advantage-weighted loss with its KL anchor to the frozen offline policy (exact
//! and sampled), and the named ablation variants. No model code, no I/O.
//!
//! Status: the crate exists so the workspace has its final shape; the losses are built by the
//! "RL objectives" issue and nothing here is usable yet.
