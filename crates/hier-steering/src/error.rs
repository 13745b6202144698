//! The one error type of `hier-steering`. Sources are kept (`#[from]`); a failure inside a
//! pipeline stage is wrapped with the stage's name; an early stop on request is
//! `Train(hier_train::Error::Stopped)`, never a sentinel string.

use std::path::PathBuf;

/// Errors of the search executor, the steering agent, its training and the steering pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From the shared training pieces (SFT, stages, policies, checkpoints).
    #[error(transparent)]
    Train(#[from] hier_train::Error),
    /// From the backbone.
    #[error(transparent)]
    Backbone(#[from] hier_backbone::BackboneError),
    /// From a steering objective.
    #[error(transparent)]
    Steer(#[from] hier_steer::SteerError),
    /// From a dataset.
    #[error(transparent)]
    Data(#[from] hier_data::DataError),
    /// From an environment.
    #[error(transparent)]
    Env(#[from] hier_envs::EnvError),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An I/O error whose file the caller names (a checkpoint swap).
    #[error(transparent)]
    IoBare(#[from] std::io::Error),
    /// A checkpoint the run cannot resume from.
    #[error("{}: {msg}", path.display())]
    Checkpoint {
        /// The offending path.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A setting, an argument or a model output that cannot work (named in the message).
    #[error("{0}")]
    Invalid(String),
    /// A profile (TOML) that does not parse or holds an unknown key.
    #[error("{}: {msg}", path.display())]
    Profile {
        /// The profile file.
        path: PathBuf,
        /// The parser's message.
        msg: String,
    },
    /// A figure could not be drawn (plotters' message).
    #[error("drawing figures: {0}")]
    Figure(String),
    /// A pipeline stage failed.
    #[error("stage {stage}: {source}")]
    Stage {
        /// The stage's name.
        stage: String,
        /// What went wrong in it.
        source: Box<Error>,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error naming `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

impl hier_train::StageError for Error {
    fn in_stage(self, stage: &str) -> Self {
        if self.is_stopped() {
            return self;
        }
        Error::Stage {
            stage: stage.into(),
            source: Box::new(self),
        }
    }
    fn is_stopped(&self) -> bool {
        match self {
            Error::Train(e) => e.is_stopped(),
            Error::Stage { source, .. } => source.is_stopped(),
            _ => false,
        }
    }
}
