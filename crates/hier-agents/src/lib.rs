//! # hier-agents
//!
//! Where the pieces meet: the agents (Multi²'s two-system hierarchy, the baselines, the
//! steering supervisor), the batched rollout engine, the trainers (causal-LM pre-training of
//! tiny backbones, SFT, offline RL, online RL, GRPO) and evaluation. It composes
//! `hier-backbone`, `hier-rl-losses`, `hier-steer`, `hier-envs` and `hier-data`, and owns no
//! environment internals and no loss mathematics.
//!
//! Status: the causal-LM pre-training of tiny backbones ([`pretrain`]), the shared optimiser
//! and run bookkeeping ([`optim`], [`runlog`]), datasets from expert demonstrations
//! ([`demos`]), model batches over backbone tokenizers ([`batching`]), LoRA fine-tuning of a
//! named adapter ([`sft`]), the Multi² two-system batched rollout ([`multi2`]) and the
//! evaluation arithmetic ([`metrics`]: 95 % intervals over seeds, difficulty terciles, token
//! efficiency) exist; the
//! System-2 RL trainers, evaluation and `reproduce table1` come with the Multi² issue.

pub mod batching;
pub mod demos;
pub mod metrics;
pub mod multi2;
pub mod optim;
pub mod pretrain;
pub mod runlog;
pub mod sft;
