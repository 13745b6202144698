//! # hier-rl-losses
//!
//! The objectives of Multi²'s System 2 (offline → online RL) as pure functions on Burn tensors
//! and masks. Usable alone: no model code, no environment, no I/O; every function works on any
//! Burn device (CPU `flex`, CUDA, WGPU; with or without autodiff).
//!
//! | piece | equation |
//! |---|---|
//! | [`action::action_logprobs`] | `log π(a) = Σ_t m_t ℓ_t / Σ_t m_t` (or the sum) |
//! | [`critic::td_loss`] | `E[(r + γ(1−d)·V̄(o') − Q(o,a))²]` |
//! | [`critic::expectile_loss`] | `E[\|τ − 1{u<0}\|·u²]`, `u = Q̄ − V` |
//! | [`polyak::polyak_update`] | `θ̄ ← (1−ρ)θ̄ + ρθ` |
//! | [`actor::offline_actor_loss`] | `−E_data[w(A)·log π(a)] − λ·E_{a'∼π}[(A(o,a') − b)·log π(a')]`, `w = min(e^{βA}, w_max)`, `b` an [`actor::AnchorBaseline`] |
//! | [`actor::online_actor_loss`] | `−E_B[min(e^{A/α}, w_max)·log π_on(a)] + η·KL(π_on‖π_off)` |
//! | [`kl::KlAnchor`] | exact `Σ_v p_on(log p_on − log p_off)`, or k1 / k3 sample estimates |
//! | [`variants::Variant`] | `multi2`, `vanilla-iql` (λ=0), `vanilla-awac` (η=0), `released-code` |
//!
//! Every loss returns a [`LossOutput`]: the scalar loss and named detached components.
//! **Non-finite inputs** never pass silently: masked-in elements with NaN/∞ are dropped from the
//! loss (replaced before any multiplication, so no NaN reaches a gradient) and counted in the
//! `nonfinite` component (see [`finite`]).

pub mod action;
pub mod actor;
pub mod critic;
pub mod error;
pub mod finite;
pub mod kl;
pub mod output;
pub mod polyak;
pub mod variants;

pub use action::{Reduction, action_logprobs, gather_at};
pub use actor::{
    AnchorBaseline, OfflineActorConfig, OnlineActorConfig, advantage_weights, offline_actor_loss,
    online_actor_loss,
};
pub use critic::{expectile_loss, sarsa_loss, td_loss, trajectory_mean_advantage};
pub use error::{LossError, Result};
pub use kl::{KlAnchor, exact_kl_per_token};
pub use output::LossOutput;
pub use polyak::polyak_update;
pub use variants::{KlKind, Multi2Objectives, OnlineCritic, Variant};

/// Re-export of Burn, so dependants name the same tensor types.
pub use burn;
