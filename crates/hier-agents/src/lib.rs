//! # hier-agents
//!
//! Where the pieces meet: the agents (Multi²'s two-system hierarchy, the baselines, the
//! steering supervisor), the batched rollout engine, the trainers (causal-LM pre-training of
//! tiny backbones, SFT, offline RL, online RL, GRPO) and evaluation. It composes
//! `hier-backbone`, `hier-rl-losses`, `hier-steer`, `hier-envs` and `hier-data`, and owns no
//! environment internals and no loss mathematics.
//!
//! Status: the causal-LM pre-training of tiny backbones ([`pretrain`]), the shared optimiser
//! utilities ([`optim`]), datasets from expert demonstrations ([`demos`]) and model batches
//! over backbone tokenizers ([`batching`]) exist; agents, rollouts and the RL trainers come
//! with later issues.

pub mod batching;
pub mod demos;
pub mod optim;
pub mod pretrain;
pub mod runlog;
pub mod sft;
