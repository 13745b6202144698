//! The one error type of `hier-train`. Every variant keeps its source or names the file, stage
//! or setting at fault; an early stop on request ([`Error::Stopped`]) is a variant, not a
//! sentinel string.

use std::path::PathBuf;

/// Errors of training, stages and evaluation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// From the backbone (model, tokenizer, adapter, generation).
    #[error(transparent)]
    Backbone(#[from] hier_backbone::BackboneError),
    /// From a dataset.
    #[error(transparent)]
    Data(#[from] hier_data::DataError),
    /// From an environment.
    #[error(transparent)]
    Env(#[from] hier_envs::EnvError),
    /// An environment failed on a task (`what` says which task and which call).
    #[error("{what}: {source}")]
    EnvTask {
        /// `reset <task>`, `step <task>`, …
        what: String,
        /// The environment's error.
        source: hier_envs::EnvError,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An I/O error whose file the caller names (a checkpoint swap, …).
    #[error(transparent)]
    IoBare(#[from] std::io::Error),
    /// A JSON (or JSON-lines) file did not parse.
    #[error("{}{}: {source}", path.display(), line.map_or(String::new(), |l| format!(":{l}")))]
    Json {
        /// The file.
        path: PathBuf,
        /// The line, for JSON lines.
        line: Option<usize>,
        /// The parser error.
        source: serde_json::Error,
    },
    /// A TOML config is malformed or holds an unknown key.
    #[error("{}: {msg}", path.display())]
    Config {
        /// The config file.
        path: PathBuf,
        /// Parser message (with line and column).
        msg: String,
    },
    /// The corpus cannot train anything.
    #[error("corpus: {0}")]
    Corpus(String),
    /// A checkpoint the run cannot resume from (another config, damaged files).
    #[error("{}: {msg}", path.display())]
    Checkpoint {
        /// The offending path.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A text could not be tokenised (`what` names the example and its part).
    #[error("{what}: {source}")]
    Tokenize {
        /// Which text.
        what: String,
        /// The tokenizer's error.
        source: hier_backbone::BackboneError,
    },
    /// A setting, an argument or a model output that cannot work (named in the message).
    #[error("{0}")]
    Invalid(String),
    /// Resident memory went past the run's limit (`what`: the stage, or the trainer and step,
    /// after which the run stopped — a trainer checkpoints first, so it resumes).
    #[error(
        "{what}: resident memory {resident_mib:.0} MiB exceeds the limit of {limit_mib} MiB; \
         the run stopped (it resumes from its last checkpoint; raise --max-rss-mib or free memory)"
    )]
    MemoryLimit {
        /// Where the run was.
        what: String,
        /// Resident set size then.
        resident_mib: f64,
        /// The limit.
        limit_mib: u64,
    },
    /// A loss dropped more non-finite elements of `quantity` than the run allows.
    #[error(
        "{what}: {count} non-finite element(s) of {quantity} by step {step} (limit {limit}); \
         the step was not checkpointed — lower the learning rate or look at the data"
    )]
    NonFinite {
        /// The trainer.
        what: String,
        /// The step (1-based) at which the limit was passed.
        step: usize,
        /// The loss or component (`actor`, `td`, `kl`, …).
        quantity: String,
        /// Elements dropped so far in this invocation.
        count: u64,
        /// The allowance.
        limit: u64,
    },
    /// A figure could not be drawn (the plotting library's message).
    #[error("drawing figures: {0}")]
    Figure(String),
    /// A report-only run ([`crate::stages::RunConfig::report_only`]) needs a stage that is
    /// not done.
    #[error(
        "stage {stage} is not done ({}) and a report-only run trains and plays nothing; run it \
         without --report-only first",
        dir.display()
    )]
    NotDone {
        /// The stage's name.
        stage: String,
        /// Its directory.
        dir: PathBuf,
    },
    /// Another process is running this stage (it holds the stage directory's `LOCK`).
    #[error(
        "{}: another process is running this stage (it holds LOCK); wait for it to finish, \
         or give this run another --out",
        dir.display()
    )]
    StageBusy {
        /// The stage directory.
        dir: PathBuf,
    },
    /// A done stage was made from an upstream stage's adapter that has since changed (trained
    /// again, e.g. after its run directory was lost, by other code): reusing it would report
    /// one adapter's results under another's name.
    #[error(
        "{}: made from the adapter of {upstream} with sha256 {recorded}, which now holds \
         {now}; remove this stage to evaluate the adapter there now, or restore the upstream \
         stage it was made from",
        dir.display()
    )]
    UpstreamChanged {
        /// The done stage.
        dir: PathBuf,
        /// The upstream stage's directory name.
        upstream: String,
        /// The digest recorded when the stage ran.
        recorded: String,
        /// The digest of the adapter there now.
        now: String,
    },
    /// A pipeline stage failed.
    #[error("stage {stage}: {source}")]
    Stage {
        /// The stage's name.
        stage: String,
        /// What went wrong in it.
        source: Box<Error>,
    },
    /// A pipeline stopped early on request (`RunConfig::stop_after_stages`, to test resuming):
    /// not a failure; the stage runner turns it into an incomplete report.
    #[error("stopped early on request")]
    Stopped,
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
    /// An environment's process died or stopped answering ([`hier_envs::EnvError::is_transient`]):
    /// what was played on it may be played again.
    pub fn is_transient_env(&self) -> bool {
        match self {
            Error::Env(e) | Error::EnvTask { source: e, .. } => e.is_transient(),
            _ => false,
        }
    }
    /// An environment error on a task, with what was being done (`reset <task>`, …).
    pub fn env(what: impl Into<String>, source: hier_envs::EnvError) -> Self {
        Self::EnvTask {
            what: what.into(),
            source,
        }
    }
    /// A checkpoint error naming `path`.
    pub fn checkpoint(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Self::Checkpoint {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

/// Constructors of the shared cases for every error type that carries this crate's [`Error`]
/// (the pipelines' errors wrap it whole): one list of the cases, here, not a copy per pipeline.
/// With the trait in scope, `PipelineError::invalid(…)` builds `Train(Error::Invalid(…))`.
pub trait SharedErrors: From<Error> {
    /// A setting, an argument or a model output that cannot work (named in `msg`).
    fn invalid(msg: String) -> Self {
        Error::Invalid(msg).into()
    }
    /// An I/O error naming `path`.
    fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::io(path, source).into()
    }
    /// A checkpoint at `path` the run cannot resume from or write, and why.
    fn checkpoint(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::checkpoint(path, msg).into()
    }
    /// A profile (TOML) at `path` that does not parse or holds an unknown key.
    fn profile(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Config {
            path: path.into(),
            msg: msg.into(),
        }
        .into()
    }
    /// A figure that could not be drawn (the plotting library's message).
    fn figure(msg: impl Into<String>) -> Self {
        Error::Figure(msg.into()).into()
    }
}

impl<E: From<Error>> SharedErrors for E {}

/// `From` the leaf crates' errors (backbone, data, environments, I/O) for a pipeline error
/// type `$error` with a `Train(hier_train::Error)` variant: each converts through [`Error`], so
/// `?` works on them and they are listed once. The calling crate depends on `hier-backbone`,
/// `hier-data` and `hier-envs` itself.
#[macro_export]
macro_rules! errors_through_train {
    ($error:ty) => {
        $crate::errors_through_train!(@each $error;
            ::hier_backbone::BackboneError, ::hier_data::DataError,
            ::hier_envs::EnvError, ::std::io::Error);
    };
    (@each $error:ty; $($source:ty),*) => {$(
        impl ::std::convert::From<$source> for $error {
            fn from(e: $source) -> Self {
                Self::Train(e.into())
            }
        }
    )*};
}

/// What a pipeline's error type must offer the stage runner ([`crate::stages`]): it takes this
/// crate's errors, wraps a failure with the stage's name, and tells an early stop apart.
pub trait StageError: From<Error> + std::fmt::Display {
    /// `self`, as the failure of stage `stage`.
    fn in_stage(self, stage: &str) -> Self;
    /// Whether this is an early stop on request rather than a failure.
    fn is_stopped(&self) -> bool;
}

impl StageError for Error {
    fn in_stage(self, stage: &str) -> Self {
        match self {
            Error::Stopped => Error::Stopped,
            other => Error::Stage {
                stage: stage.into(),
                source: Box::new(other),
            },
        }
    }
    fn is_stopped(&self) -> bool {
        matches!(self, Error::Stopped)
    }
}
