//! Errors of `hier-data`: every one names the file, and the line (JSONL) or record (shards)
//! where it can.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A record or header that does not parse or does not fit its schema.
    #[error("{}:{line}: {msg}", path.display())]
    Line {
        path: PathBuf,
        line: u64,
        msg: String,
    },
    /// A file-level problem (missing, wrong kind, unreadable shard).
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    /// Bad arguments or inconsistent data not tied to a file.
    #[error("{0}")]
    Invalid(String),
    /// A tokenizer could not encode a text.
    #[error("encoding text: {0}")]
    Encode(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl DataError {
    pub fn line(path: &Path, line: u64, msg: impl Into<String>) -> Self {
        DataError::Line {
            path: path.to_owned(),
            line,
            msg: msg.into(),
        }
    }

    pub fn file(path: &Path, msg: impl Into<String>) -> Self {
        DataError::File {
            path: path.to_owned(),
            msg: msg.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, DataError>;
