//! # hier-steer
//!
//! The steering agent's objectives and decision logic, independent of any executor or
//! environment: the fast path's yes/no log-odds priority and τ gate, GRPO advantages with the
//! no-intervention baseline inside the group, the token-level PPO-clip loss and its
//! normalisations, the pairwise (RankNet) ranking loss on `q(s)` targets, the state bank with
//! ε-greedy top-k selection, and the parser of slow-path intervention outputs.
//!
//! Status: the crate exists so the workspace has its final shape; its contents are built by
//! the "RL objectives" issue and nothing here is usable yet.
