//! The GGUF container: header, metadata, tensor infos and aligned tensor data.
//!
//! Layout (little-endian; versions 2 and 3, which differ only in v3 allowing big-endian files,
//! which we refuse):
//!
//! ```text
//! "GGUF" | version u32 | n_tensors u64 | n_kv u64
//! n_kv ×      key: string | value_type u32 | value
//! n_tensors × name: string | n_dims u32 | dims u64 × n_dims | type u32 | offset u64
//! padding to `general.alignment` (default 32) | tensor data
//! ```
//!
//! A string is `len u64` + UTF-8 bytes; an array is `elem_type u32 | count u64 | elems`.
//! `dims[0]` is the innermost (fastest-varying) dimension, so an HF `[out, in]` weight has
//! `dims = [in, out]`. Every length and offset is checked against the file's size before it is
//! used, so a truncated or corrupt file is an error naming the file and what was being read.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::quant::{GgmlType, SUPPORTED, dequantize};
use crate::error::{BackboneError, Result};

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7.
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9 (elements of one type).
    Array(Vec<MetaValue>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl MetaValue {
    /// The value as an integer, when it is one of the integer types.
    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            MetaValue::U8(v) => v.into(),
            MetaValue::I8(v) => v.into(),
            MetaValue::U16(v) => v.into(),
            MetaValue::I16(v) => v.into(),
            MetaValue::U32(v) => v.into(),
            MetaValue::I32(v) => v.into(),
            MetaValue::U64(v) => i64::try_from(v).ok()?,
            MetaValue::I64(v) => v,
            _ => return None,
        })
    }
    /// The value as a float (either float type, or an integer).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }
    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }
    /// The value as a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }
    /// The value as an array.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
    /// A short description for error messages (arrays by length, strings shortened).
    pub fn describe(&self) -> String {
        match self {
            MetaValue::Array(a) => format!("an array of {}", a.len()),
            MetaValue::String(s) if s.len() > 60 => {
                format!("{:?}…", &s[..s.floor_char_boundary(60)])
            }
            other => format!("{other:?}"),
        }
    }
}

/// One tensor's entry in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// The llama.cpp name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost first (ggml's `ne`).
    pub dims: Vec<usize>,
    /// Storage type.
    pub ty: GgmlType,
    /// Byte offset from the start of the data section.
    pub offset: usize,
}

impl TensorInfo {
    /// The shape in row-major (HF/PyTorch) order: `dims` reversed.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().copied().collect()
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }
    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A GGUF file read into memory.
#[derive(Debug)]
pub struct GgufFile {
    /// The path (labels errors).
    pub path: PathBuf,
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata in file order.
    pub metadata: IndexMap<String, MetaValue>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    bytes: Vec<u8>,
    data_start: usize,
}

/// A bounds-checked little-endian reader over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, msg: impl std::fmt::Display) -> BackboneError {
        BackboneError::Gguf {
            path: self.path.into(),
            msg: format!("at byte {}: {msg}", self.pos),
        }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                self.err(format!(
                    "file truncated: {what} needs {n} bytes, {} left",
                    self.bytes.len() - self.pos
                ))
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("took N bytes"))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    /// A count that must fit what is left of the file at `min_size` bytes per item, so a
    /// corrupt count cannot ask for a huge allocation.
    fn count(&mut self, what: &str, min_size: usize) -> Result<usize> {
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.pos) as u64;
        if n.saturating_mul(min_size as u64) > left {
            return Err(self.err(format!(
                "{what} is {n}, more than the {left} bytes left in the file can hold"
            )));
        }
        Ok(n as usize)
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.count(what, 1)?;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|e| self.err(format!("{what} is not UTF-8: {e}")))
    }
    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Result<MetaValue> {
        Ok(match ty {
            0 => MetaValue::U8(self.array::<1>(key)?[0]),
            1 => MetaValue::I8(self.array::<1>(key)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array(key)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array(key)?)),
            4 => MetaValue::U32(self.u32(key)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array(key)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array(key)?)),
            7 => match self.array::<1>(key)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(self.err(format!("`{key}`: boolean byte {b} is neither 0 nor 1"))),
            },
            8 => MetaValue::String(self.string(key)?),
            9 => {
                if depth > 0 {
                    return Err(self.err(format!("`{key}`: nested arrays are not supported")));
                }
                let elem = self.u32(key)?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    _ => 4,
                };
                let n = self.count(key, min)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(elem, key, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64(key)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array(key)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array(key)?)),
            other => return Err(self.err(format!("`{key}`: unknown value type {other}"))),
        })
    }
}

/// The magic number "GGUF" as a little-endian u32.
const MAGIC: &[u8; 4] = b"GGUF";
/// ggml's maximum number of dimensions.
const MAX_DIMS: u32 = 4;

impl GgufFile {
    /// Reads and checks a whole GGUF file.
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| BackboneError::io(path, e))?;
        Self::parse(path, bytes)
    }

    /// Parses GGUF bytes; `path` labels errors.
    pub fn parse(path: &Path, bytes: Vec<u8>) -> Result<Self> {
        let mut c = Cursor {
            bytes: &bytes,
            pos: 0,
            path,
        };
        let magic = c.take(4, "the magic number")?;
        if magic != MAGIC {
            return Err(c.err(format!(
                "not a GGUF file (magic {magic:02x?}, expected \"GGUF\")"
            )));
        }
        let version = c.u32("the version")?;
        match version {
            2 | 3 => {}
            1 => return Err(c.err("GGUF version 1 is not supported (only 2 and 3)")),
            v if v.swap_bytes() <= 3 => {
                return Err(c.err("big-endian GGUF files are not supported"));
            }
            v => return Err(c.err(format!("unknown GGUF version {v} (only 2 and 3)"))),
        }
        // A tensor info takes at least 8+4+8+4+8 bytes, a key/value 8+4+1.
        let n_tensors = c.count("the tensor count", 32)?;
        let n_kv = c.count("the metadata count", 13)?;
        let mut metadata = IndexMap::with_capacity(n_kv);
        for _ in 0..n_kv {
            let key = c.string("a metadata key")?;
            let ty = c.u32(&key)?;
            let v = c.value(ty, &key, 0)?;
            if metadata.insert(key.clone(), v).is_some() {
                return Err(c.err(format!("metadata key `{key}` appears twice")));
            }
        }
        let mut tensors = Vec::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name = c.string("a tensor name")?;
            let n_dims = c.u32(&name)?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(c.err(format!(
                    "tensor `{name}` has {n_dims} dimensions (1 to {MAX_DIMS})"
                )));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                let d = c.u64(&name)?;
                dims.push(
                    usize::try_from(d)
                        .map_err(|_| c.err(format!("tensor `{name}`: dimension {d} too large")))?,
                );
            }
            let id = c.u32(&name)?;
            let ty = GgmlType::from_id(id)
                .ok_or_else(|| c.err(format!("tensor `{name}`: unknown ggml type id {id}")))?;
            let offset = c.u64(&name)?;
            let offset = usize::try_from(offset)
                .map_err(|_| c.err(format!("tensor `{name}`: offset {offset} too large")))?;
            if tensors.iter().any(|t: &TensorInfo| t.name == name) {
                return Err(c.err(format!("tensor `{name}` appears twice")));
            }
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                offset,
            });
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => match v.as_i64() {
                Some(a) if a > 0 && (a as u64).is_power_of_two() => a as usize,
                _ => {
                    return Err(c.err(format!(
                        "`general.alignment` is {}, not a positive power of two",
                        v.describe()
                    )));
                }
            },
        };
        let data_start = c.pos.div_ceil(alignment) * alignment;
        let file = Self {
            path: path.into(),
            version,
            metadata,
            tensors,
            data_start: data_start.min(bytes.len()),
            bytes,
        };
        for t in &file.tensors {
            if !t.offset.is_multiple_of(alignment) {
                return Err(file.err(format!(
                    "tensor `{}`: offset {} is not a multiple of the alignment {alignment}",
                    t.name, t.offset
                )));
            }
            // Supported types are checked for size here; others fail when read.
            if t.ty.block().is_some() {
                file.tensor_bytes(t)?;
            }
        }
        Ok(file)
    }

    fn err(&self, msg: impl Into<String>) -> BackboneError {
        BackboneError::Gguf {
            path: self.path.clone(),
            msg: msg.into(),
        }
    }

    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// The info of tensor `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The stored bytes of a tensor (checked against the type's block size and the file's end).
    pub fn tensor_bytes(&self, t: &TensorInfo) -> Result<&[u8]> {
        let (per_block, block_bytes) = t.ty.block().ok_or_else(|| {
            self.err(format!(
                "tensor `{}` has quantisation type {}, which is not supported (supported: {SUPPORTED})",
                t.name,
                t.ty.name()
            ))
        })?;
        if !t.dims[0].is_multiple_of(per_block) {
            return Err(self.err(format!(
                "tensor `{}`: its rows of {} elements are not a whole number of {} blocks of {per_block}",
                t.name,
                t.dims[0],
                t.ty.name()
            )));
        }
        let size = t
            .dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| (n / per_block).checked_mul(block_bytes))
            .ok_or_else(|| self.err(format!("tensor `{}`: size overflows", t.name)))?;
        let start = self.data_start.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(size));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.bytes.len() => Ok(&self.bytes[s..e]),
            _ => Err(self.err(format!(
                "file truncated: tensor `{}` ({} bytes at offset {}) runs past the end of the file ({} bytes of data)",
                t.name,
                size,
                t.offset,
                self.bytes.len().saturating_sub(self.data_start)
            ))),
        }
    }

    /// Tensor `t` dequantised to f32, in row-major order of [`TensorInfo::shape`].
    pub fn dequantize(&self, t: &TensorInfo) -> Result<Vec<f32>> {
        let bytes = self.tensor_bytes(t)?;
        let mut out = vec![0f32; t.len()];
        // Two halves on two threads: a 135 M-parameter file is read in well under a second.
        let (per_block, block_bytes) = t.ty.block().expect("tensor_bytes checked the type");
        let blocks = bytes.len() / block_bytes;
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let chunk = blocks.div_ceil(threads).max(1);
        std::thread::scope(|s| {
            for (b, y) in bytes
                .chunks(chunk * block_bytes)
                .zip(out.chunks_mut(chunk * per_block))
            {
                s.spawn(move || dequantize(t.ty, b, y));
            }
        });
        if let Some(i) = out.iter().position(|v| !v.is_finite()) {
            return Err(self.err(format!(
                "tensor `{}` holds a non-finite value at element {i} (a corrupt file?)",
                t.name
            )));
        }
        Ok(out)
    }
}
