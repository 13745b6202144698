//! The one error type of `hier-multi2`: what the shared layer reports (I/O, checkpoints,
//! settings, profiles, figures, the backbone, data, environments, an early stop) arrives whole as
//! [`Error::Train`] — one list of those cases, in `hier_train::Error`, not a copy per pipeline;
//! `Error::invalid(…)`, `Error::io(…)`, … come from [`hier_train::SharedErrors`] — beside this
//! crate's own objective errors and the stage wrapper. Sources are kept; an early stop
//! on request is `Train(hier_train::Error::Stopped)`, never a sentinel string.

/// Errors of Multi², its baselines and the Table-1 pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From the shared layer: training pieces, files, settings, the backbone, data, environments.
    #[error(transparent)]
    Train(#[from] hier_train::Error),
    /// From a System-2 objective.
    #[error(transparent)]
    Loss(#[from] hier_rl_losses::LossError),
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

hier_train::errors_through_train!(Error);

impl Error {
    /// [`hier_train::Error::is_transient_env`], through a stage's context.
    pub fn is_transient_env(&self) -> bool {
        match self {
            Error::Train(e) => e.is_transient_env(),
            Error::Stage { source, .. } => source.is_transient_env(),
            Error::Loss(_) => false,
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
