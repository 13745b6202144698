//! # hier-data
//!
//! The datasets of both methods, with no models and no environments (those live in
//! `hier-envs`; `hier-multi2` plays the experts and hands the episodes here):
//!
//! - [`schema`]: versioned records — System-1 examples ([`schema::Sys1Record`]), System-2
//!   transitions ([`schema::Sys2Transition`]), flat trajectories for the flat baselines, and
//!   steering states;
//! - [`io`]: JSONL for people and postcard shards for speed, atomic writers, streaming
//!   readers; a malformed record is an error naming the file and line (or record);
//! - [`segment`]: subgoal segmentation rules for TextCraft, ScienceWorld and ALFWorld
//!   demonstrations (plus the authors' two TextCraft templates);
//! - [`build`]: an episode and its segments → the three datasets;
//! - [`import`]: the authors' released `high_data/expert.json` / `low_data/expert.json`;
//! - [`replay`]: the online replay buffer (offline/online mixing, keep-successes /
//!   keep-a-fraction-of-failures, capacity, seeded, serialisable);
//! - [`stats`]: counts, lengths and reward histograms (`cargo xtask data stats`);
//! - [`batch`]: tokenised prompt + target sequences with action masks and state/action end
//!   positions, length-bucketed under a token budget (any tokenizer, via [`batch::Tokenize`]).
//!
//! ```
//! use hier_data::build::{Episode, build};
//! use hier_data::segment;
//!
//! let ep = Episode {
//!     source: "textcraft/craft#0".into(),
//!     task: "craft stick".into(),
//!     observations: vec!["o0".into(), "o1".into(), "o2".into()],
//!     actions: vec!["get 2 bamboo".into(), "craft 1 stick using 2 bamboo".into()],
//!     rewards: vec![0.0, 1.0],
//!     scores: vec![0.0, 1.0],
//!     done: true,
//!     success: true,
//!     origin: "expert".into(),
//! };
//! let built = build(&ep, &segment::textcraft(&ep.actions)).unwrap();
//! assert_eq!(built.sys1[1].subgoal, "craft 1 stick");
//! assert_eq!(built.sys2[1].target(), "craft 1 stick using 2 bamboo; True");
//! ```

pub mod batch;
pub mod build;
pub mod error;
pub mod import;
pub mod io;
pub mod replay;
pub mod schema;
pub mod segment;
pub mod stats;
pub mod subtask;

pub use error::{DataError, Result};
