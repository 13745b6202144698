//! # hier-data
//!
//! The datasets of both methods: versioned schemas for System-1 records, System-2 transitions,
//! flat trajectories and steering states; builders from expert demonstrations; importers for
//! the authors' released JSON; JSONL and postcard shards with streaming readers; splits; the
//! replay buffer of online RL; and tokenised, length-bucketed batches with action masks.
//! No models.
//!
//! Status: the crate exists so the workspace has its final shape; its contents are built by
//! the data-pipeline issue and nothing here is usable yet.
