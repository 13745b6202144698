//! One error type for the crate. Every variant names the file, tensor or field at fault.

use std::path::PathBuf;

/// Errors of `hier-backbone`.
#[derive(Debug, thiserror::Error)]
pub enum BackboneError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A JSON file did not parse.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser error (with line and column).
        source: serde_json::Error,
    },
    /// A `config.json` (or `adapter_config.json`) field that is missing, malformed or not supported.
    #[error("{path}: field `{field}`: {msg}")]
    Config {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// The offending field.
        field: String,
        /// What is wrong with it.
        msg: String,
    },
    /// A tensor the model needs is not in the checkpoint.
    #[error("{path}: missing tensor `{name}`")]
    MissingTensor {
        /// The checkpoint file or index.
        path: PathBuf,
        /// HF name of the tensor.
        name: String,
    },
    /// The checkpoint holds tensors the model does not have.
    #[error("{path}: unexpected tensor(s) {names:?}")]
    UnexpectedTensors {
        /// The checkpoint file or index.
        path: PathBuf,
        /// Their HF names (sorted).
        names: Vec<String>,
    },
    /// A tensor has the wrong shape.
    #[error("{path}: tensor `{name}` has shape {got:?}, expected {expected:?}")]
    ShapeMismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// HF name of the tensor.
        name: String,
        /// Shape found in the file.
        got: Vec<usize>,
        /// Shape the config implies.
        expected: Vec<usize>,
    },
    /// A safetensors file is malformed or uses an unsupported dtype.
    #[error("{path}: {msg}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What went wrong (tensor name included where known).
        msg: String,
    },
    /// A GGUF file is malformed, truncated, or uses a feature this crate does not read.
    #[error("{path}: {msg}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What went wrong (the metadata key or tensor named).
        msg: String,
    },
    /// A LoRA adapter problem (unknown name, duplicate, unsupported PEFT option).
    #[error("adapter `{adapter}`: {msg}")]
    Adapter {
        /// The adapter name.
        adapter: String,
        /// What went wrong.
        msg: String,
    },
    /// A tokenizer could not be loaded, trained or used.
    #[error("tokenizer {path}: {msg}")]
    Tokenizer {
        /// The tokenizer file (or `<memory>`).
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
    /// A chat template failed to compile or render.
    #[error("chat template: {0}")]
    Template(String),
    /// Bad arguments to generation or scoring (shapes, empty prompts, ...).
    #[error("{0}")]
    Invalid(String),
    /// An unknown or unavailable device.
    #[error("device `{spec}`: {msg}")]
    Device {
        /// What the user asked for.
        spec: String,
        /// Why it cannot be had.
        msg: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, BackboneError>;

impl BackboneError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn config(
        path: impl Into<PathBuf>,
        field: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        Self::Config {
            path: path.into(),
            field: field.into(),
            msg: msg.into(),
        }
    }
    pub(crate) fn adapter(adapter: impl Into<String>, msg: impl Into<String>) -> Self {
        Self::Adapter {
            adapter: adapter.into(),
            msg: msg.into(),
        }
    }
}

/// Reads a JSON file into a value, with errors naming the file.
pub(crate) fn read_json(path: &std::path::Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| BackboneError::io(path, e))?;
    serde_json::from_str(&text).map_err(|source| BackboneError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes bytes atomically: a temporary file in the same folder (removed if anything fails),
/// synced, then renamed into place (`tempfile`'s `persist`), so a crash never leaves a
/// half-written file where a good one was.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| BackboneError::io(dir, e))?;
    let mut f = tempfile::NamedTempFile::new_in(dir).map_err(|e| BackboneError::io(dir, e))?;
    f.write_all(bytes)
        .and_then(|()| f.as_file().sync_all())
        .map_err(|e| BackboneError::io(f.path(), e))?;
    f.persist(path)
        .map(drop)
        .map_err(|e| BackboneError::io(path, e.error))
}
