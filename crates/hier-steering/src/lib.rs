//! # hier-steering
//!
//! The steering method (`docs/design/METHODS.md` B): an external steering agent that watches
//! a frozen executor and intervenes when it drifts.
//!
//! - the search executor on retrieval QA, its drifted demonstrations and batched rollouts
//!   resumable from any state ([`search_agent`]), prompted as an SFT executor or as an instruct
//!   model playing as it is ([`prompting`]);
//! - the steering agent: observation, one-pass fast path, τ gate, slow path, and the planning
//!   and verification supervisors ([`steer_agent`]);
//! - its training (GRPO with the no-intervention baseline in the group plus RankNet) over any
//!   host that says what a state is and how to continue from it
//!   ([`steered`]), and filtered BC ([`steer_train`], [`sft_examples`]);
//! - `reproduce steering` ([`pipeline`]) on a synthetic world or on files ([`data`]), with
//!   its tables and figures ([`report`]) and the paper's claims with verdicts ([`claims`]);
//! - the five-role pipeline (planner → searcher → researcher → verifier → summariser) with a
//!   supervisor at every handoff ([`mas`]), and `reproduce steering-mas` ([`mas_pipeline`],
//!   [`mas_report`]).
//!
//! Built on `hier-train` and the `hier-steer` objectives; never on `hier-multi2`. One error
//! type, [`Error`].

pub mod claims;
pub mod data;
pub mod error;
pub mod mas;
pub mod mas_pipeline;
pub mod mas_report;
pub mod pipeline;
pub mod profile;
pub mod prompting;
pub mod report;
pub mod results;
pub mod search_agent;
pub mod sft_examples;
pub mod steer_agent;
pub mod steer_train;
pub mod steered;

pub use error::{Error, Result};
