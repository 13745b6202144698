//! Errors of this crate: shape mismatches and invalid settings, named.

/// Errors of `hier-rl-losses`.
#[derive(Debug, thiserror::Error)]
pub enum LossError {
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
}

impl LossError {
    pub(crate) fn shape(name: &'static str, expected: &[usize], got: &[usize]) -> Self {
        Self::Shape {
            name,
            expected: expected.to_vec(),
            got: got.to_vec(),
        }
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, LossError>;

/// Checks that every `[B]` input has length `b`.
pub(crate) fn same_len(
    b: usize,
    inputs: &[(&'static str, &burn::tensor::Tensor<1>)],
) -> Result<()> {
    for (name, t) in inputs {
        if t.dims() != [b] {
            return Err(LossError::shape(name, &[b], &t.dims()));
        }
    }
    Ok(())
}
