//! # hier-agents
//!
//! Where the pieces meet: the agents (Multi²'s two-system hierarchy, the baselines, the
//! steering supervisor), the batched rollout engine, the trainers (causal-LM pre-training of
//! tiny backbones, SFT, offline RL, online RL, GRPO) and evaluation. It composes
//! `hier-backbone`, `hier-rl-losses`, `hier-steer`, `hier-envs` and `hier-data`, and owns no
//! environment internals and no loss mathematics.
//!
//! Pieces: causal-LM pre-training of tiny backbones ([`pretrain`]), datasets from expert
//! demonstrations ([`demos`]) and each role's tokenised examples ([`roles`]), LoRA SFT
//! ([`sft`]), System-2 offline and online RL ([`offline_rl`], [`online_rl`], sharing the
//! critic pieces of [`sys2`]), the Multi² and flat rollouts ([`multi2`], [`flat`]), the prompted
//! baselines ([`react`], [`reflexion`], [`adapt`]), outcome-reward GRPO ([`grpo`]: the GRPO
//! baseline and Glider's online phase), evaluation ([`eval`], [`metrics`]), and the
//! `reproduce table1` pipeline with its ablations and outputs ([`table1`], [`table1_report`],
//! [`figures`]). Steering: the search executor ([`search_agent`]), the steering agent
//! ([`steer_agent`]), its training and filtered BC ([`steer_train`]), and the
//! `reproduce steering` pipeline with its outputs ([`steering`], [`steering_report`]); both
//! pipelines share cached, resumable [`stages`].

pub mod adapt;
pub mod batching;
pub mod demos;
pub mod eval;
pub mod figures;
pub mod flat;
pub mod grpo;
pub mod metrics;
pub mod multi2;
pub mod offline_rl;
pub mod online_rl;
pub mod optim;
pub mod pretrain;
pub mod react;
pub mod reflexion;
pub mod roles;
pub mod runlog;
pub mod search_agent;
pub mod sft;
pub mod stages;
pub mod steer_agent;
pub mod steer_train;
pub mod steering;
pub mod steering_data;
pub mod steering_report;
pub mod sys2;
pub mod table1;
pub mod table1_report;
