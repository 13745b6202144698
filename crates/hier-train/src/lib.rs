//! # hier-train
//!
//! What both papers' pipelines share, and nothing of either method: roles as text policies
//! and the episode trace ([`policy`]), prompts as token ids ([`prompt`]), LoRA SFT ([`sft`])
//! and causal-LM pre-training of tiny backbones ([`pretrain`]) with one run-options type,
//! one trainer skeleton ([`trainer`]: config pinning, resumable
//! checkpoints, metrics, progress, a per-step hook) with its bookkeeping ([`runlog`], [`optim`]), token batches
//! ([`batching`]), cached resumable pipeline stages ([`stages`]) with a journal for work that
//! resumes piece by piece ([`journal`]), profiles that extend another ([`profile_toml`]), evaluation arithmetic
//! ([`eval`], [`metrics`]) and chart primitives ([`charts`]). One error type, [`Error`].
//!
//! `hier-multi2` (Multi² and its baselines, Table 1) and `hier-steering` (the steering agent)
//! build on it and never on each other; it builds on `hier-backbone`, `hier-envs` and
//! `hier-data` (see `docs/design/ARCHITECTURE.md`).

pub mod batching;
pub mod charts;
pub mod error;
pub mod eval;
pub mod journal;
pub mod memory;
pub mod metrics;
pub mod optim;
pub mod policy;
pub mod pretrain;
pub mod profile_toml;
pub mod prompt;
pub mod runlog;
pub mod sft;
pub mod stages;
pub mod trainer;
pub mod upstream;

pub use error::{Error, Result, SharedErrors, StageError};
pub use policy::{BackbonePolicy, Reply, TextPolicy, Trace};
pub use runlog::RunOptions;
pub use trainer::{LoopSpec, StepEvent, StepHook, TrainLoop};
