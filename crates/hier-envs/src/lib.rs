//! # hier-envs
//!
//! One `Env` trait and the environments behind it: TextCraft (a native Rust port), ScienceWorld
//! (the real simulator's jar driven over py4j from Rust), ALFWorld (native, checked against
//! TextWorld), retrieval QA (a BM25 index and an ASearcher-compatible HTTP server) and the
//! multi-agent pipeline. Observations are the text the original environments print; every
//! environment is deterministic given a seed. No models, no training.
//!
//! Status: the crate exists so the workspace has its final shape; the environments are built
//! by the environment issues and nothing here is usable yet.
