//! Errors of the environments.

use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, EnvError>;

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A third-party asset is missing and could not be fetched; the message says what to install.
    #[error("asset: {0}")]
    Asset(String),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// `step` before `reset`, or a task the environment does not know.
    #[error("{0}")]
    State(String),
    /// The simulator process died or stopped answering; the running episode is lost.
    #[error("environment crashed: {0}")]
    Crashed(String),
    /// A call to the simulator took longer than its timeout.
    #[error("environment call timed out after {seconds:.1} s: {call}")]
    Timeout { call: String, seconds: f64 },
    /// The simulator answered something this client does not understand.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Retrieval QA: a corpus or question row, the index, a retrieval server's answer, or a
    /// world configuration that cannot be built (the file, line or field is named).
    #[error("{0}")]
    Qa(String),
    /// ALFWorld: a PDDL problem, game or data file (`constants.py`, …) that does not parse,
    /// or a game its expert cannot solve — what and where.
    #[error("{0}")]
    Alfworld(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl EnvError {
    /// The simulator's process died or stopped answering ([`Crashed`](Self::Crashed),
    /// [`Timeout`](Self::Timeout)): the episode is lost, but the environment restarts it on its
    /// next call, so playing the episode again may succeed (e.g. a JVM starved of memory by
    /// another process). Any other error would recur.
    pub fn is_transient(&self) -> bool {
        matches!(self, EnvError::Crashed(_) | EnvError::Timeout { .. })
    }

    pub(crate) fn file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        EnvError::File {
            path: path.into(),
            message: message.into(),
        }
    }
}
