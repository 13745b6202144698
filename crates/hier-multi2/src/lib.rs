//! # hier-multi2
//!
//! Multi² (`docs/design/METHODS.md` A): a System-1 planner and a System-2 executor as LoRA
//! adapters over one frozen backbone, and everything its Table 1 compares it with.
//!
//! - the environments of Table 1, one typed registry ([`envs`]);
//! - the agent and its batched rollout ([`agent`]), each role's examples ([`roles`]), expert
//!   demonstrations cut into subgoals ([`demos`]);
//! - System-2 offline RL and online RL ([`offline_rl`], [`online_rl`]) sharing the critic
//!   pieces of [`sys2`]; outcome-reward GRPO ([`grpo`]: the GRPO baseline and Glider's online
//!   phase); the flat agent ([`flat`]); the prompted baselines ([`react`], [`reflexion`],
//!   [`adapt`]);
//! - `reproduce table1` with its ablations, report and figures ([`table1`]).
//!
//! Built on `hier-train`; never on `hier-steering`. One error type, [`Error`].

pub mod adapt;
pub mod agent;
pub mod demos;
pub mod envs;
pub mod error;
pub mod flat;
pub mod grpo;
pub mod offline_rl;
pub mod online_rl;
pub mod react;
pub mod reflexion;
pub mod roles;
pub mod sys2;
pub mod table1;

pub use envs::EnvKind;
pub use error::{Error, Result};
