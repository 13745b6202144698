//! Errors of this crate.

/// Errors of `hier-steer`.
#[derive(Debug, thiserror::Error)]
pub enum SteerError {
    /// An input has the wrong shape.
    #[error("input `{name}` has shape {got:?}, expected {expected:?}")]
    Shape {
        /// The argument.
        name: &'static str,
        /// What it should be.
        expected: Vec<usize>,
        /// What it is.
        got: Vec<usize>,
    },
    /// A setting or argument outside its domain.
    #[error("{0}")]
    Invalid(String),
    /// A slow-path output that is not `<think>…</think><action>…</action>`.
    #[error("malformed intervention output: {reason} (in {excerpt:?})")]
    Parse {
        /// What is wrong.
        reason: String,
        /// The start of the offending text.
        excerpt: String,
    },
}

/// Result alias.
pub type Result<T> = std::result::Result<T, SteerError>;
