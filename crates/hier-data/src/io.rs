//! Dataset files: JSONL for people, postcard shards for speed. Both start with a header naming
//! the record kind and version ([`Schema`]); both are written atomically (a temp file renamed
//! into place by `finish`, removed if the writer is dropped unfinished) and read as streams.
//!
//! - JSONL: line 1 is `{"hier_data": "<kind>", "version": N}`, then one record per line.
//!   A malformed line is an error naming the file and the line.
//! - Postcard shard (`.pcd`): the 8 bytes `HIERDATA`, then frames — a `u32` little-endian
//!   length followed by postcard bytes — first the header, then one frame per record. Errors
//!   name the file and the record number. Same records → same bytes.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::schema::Schema;

const MAGIC: &[u8; 8] = b"HIERDATA";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    hier_data: String,
    version: u32,
}

impl Header {
    fn of<T: Schema>() -> Self {
        Header {
            hier_data: T::KIND.into(),
            version: T::VERSION,
        }
    }

    fn check<T: Schema>(&self, path: &Path) -> Result<()> {
        if self.hier_data != T::KIND {
            return Err(DataError::file(
                path,
                format!("holds `{}` records, expected `{}`", self.hier_data, T::KIND),
            ));
        }
        if self.version > T::VERSION {
            return Err(DataError::file(
                path,
                format!(
                    "`{}` version {} is newer than this build reads ({})",
                    T::KIND,
                    self.version,
                    T::VERSION
                ),
            ));
        }
        Ok(())
    }
}

/// A file being written under a temporary name in its folder; [`finish`](Self::finish)
/// syncs it and renames it into place (`tempfile`'s `persist`, as the backbone's
/// `write_atomic` does), dropping it unfinished removes it (`tempfile`'s drop).
struct Staged {
    path: PathBuf,
    out: BufWriter<tempfile::NamedTempFile>,
}

impl Staged {
    fn create(path: &Path) -> Result<Self> {
        if path.file_name().is_none() {
            return Err(DataError::file(path, "not a file path"));
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .map_err(|e| DataError::file(dir, format!("cannot create: {e}")))?;
        let f = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| DataError::file(dir, format!("cannot create a temporary file: {e}")))?;
        Ok(Self {
            path: path.to_owned(),
            out: BufWriter::new(f),
        })
    }

    fn out(&mut self) -> &mut BufWriter<tempfile::NamedTempFile> {
        &mut self.out
    }

    fn finish(self) -> Result<PathBuf> {
        let f = self
            .out
            .into_inner()
            .map_err(|e| DataError::file(&self.path, format!("cannot flush: {e}")))?;
        f.as_file()
            .sync_all()
            .map_err(|e| DataError::file(&self.path, format!("cannot sync: {e}")))?;
        f.persist(&self.path).map_err(|e| {
            DataError::file(&self.path, format!("cannot rename into place: {}", e.error))
        })?;
        Ok(self.path)
    }
}

/// Writes a JSONL dataset.
pub struct JsonlWriter<T: Schema> {
    file: Staged,
    count: u64,
    _t: PhantomData<T>,
}

impl<T: Schema> JsonlWriter<T> {
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let mut file = Staged::create(path.as_ref())?;
        let header = serde_json::to_string(&Header::of::<T>()).expect("header serialises");
        writeln!(file.out(), "{header}")?;
        Ok(Self {
            file,
            count: 0,
            _t: PhantomData,
        })
    }

    pub fn write(&mut self, record: &T) -> Result<()> {
        let line = serde_json::to_string(record)
            .map_err(|e| DataError::Invalid(format!("record {}: {e}", self.count)))?;
        writeln!(self.file.out(), "{line}")?;
        self.count += 1;
        Ok(())
    }

    /// Renames the file into place; returns its path and the record count.
    pub fn finish(self) -> Result<(PathBuf, u64)> {
        Ok((self.file.finish()?, self.count))
    }
}

/// Streams the records of a JSONL dataset.
pub struct JsonlReader<T: Schema> {
    path: PathBuf,
    lines: std::io::Lines<BufReader<File>>,
    line: u64,
    _t: PhantomData<T>,
}

impl<T: Schema> JsonlReader<T> {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let f =
            File::open(&path).map_err(|e| DataError::file(&path, format!("cannot open: {e}")))?;
        let mut lines = BufReader::new(f).lines();
        let first = lines
            .next()
            .ok_or_else(|| DataError::file(&path, "empty file (no hier-data header)"))?
            .map_err(|e| DataError::line(&path, 1, e.to_string()))?;
        let header: Header = serde_json::from_str(&first).map_err(|e| {
            DataError::line(
                &path,
                1,
                format!("expected the header {{\"hier_data\": kind, \"version\": n}}: {e}"),
            )
        })?;
        header.check::<T>(&path)?;
        Ok(Self {
            path,
            lines,
            line: 1,
            _t: PhantomData,
        })
    }
}

impl<T: Schema> Iterator for JsonlReader<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        loop {
            let line = match self.lines.next()? {
                Ok(l) => l,
                Err(e) => {
                    return Some(Err(DataError::line(
                        &self.path,
                        self.line + 1,
                        e.to_string(),
                    )));
                }
            };
            self.line += 1;
            if line.trim().is_empty() {
                continue;
            }
            return Some(
                serde_json::from_str(&line).map_err(|e| {
                    DataError::line(&self.path, self.line, format!("{}: {e}", T::KIND))
                }),
            );
        }
    }
}

/// Writes one postcard shard.
pub struct ShardWriter<T: Schema> {
    file: Staged,
    count: u64,
    _t: PhantomData<T>,
}

fn frame(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len()).map_err(|_| std::io::Error::other("record over 4 GiB"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(bytes)
}

impl<T: Schema> ShardWriter<T> {
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let mut file = Staged::create(path.as_ref())?;
        file.out().write_all(MAGIC)?;
        let header = postcard::to_stdvec(&Header::of::<T>()).expect("header serialises");
        frame(file.out(), &header)?;
        Ok(Self {
            file,
            count: 0,
            _t: PhantomData,
        })
    }

    pub fn write(&mut self, record: &T) -> Result<()> {
        let bytes = postcard::to_stdvec(record)
            .map_err(|e| DataError::Invalid(format!("record {}: {e}", self.count)))?;
        frame(self.file.out(), &bytes)?;
        self.count += 1;
        Ok(())
    }

    pub fn finish(self) -> Result<(PathBuf, u64)> {
        Ok((self.file.finish()?, self.count))
    }
}

/// Streams the records of a postcard shard.
pub struct ShardReader<T: Schema> {
    path: PathBuf,
    input: BufReader<File>,
    record: u64,
    buf: Vec<u8>,
    _t: PhantomData<T>,
}

impl<T: Schema> ShardReader<T> {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let f =
            File::open(&path).map_err(|e| DataError::file(&path, format!("cannot open: {e}")))?;
        let mut input = BufReader::new(f);
        let mut magic = [0u8; 8];
        input
            .read_exact(&mut magic)
            .ok()
            .filter(|_| &magic == MAGIC)
            .ok_or_else(|| DataError::file(&path, "not a hier-data shard (no HIERDATA magic)"))?;
        let mut r = Self {
            path,
            input,
            record: 0,
            buf: Vec::new(),
            _t: PhantomData,
        };
        let header: Header = match r.read_frame() {
            Some(Ok(bytes)) => postcard::from_bytes(&bytes)
                .map_err(|e| DataError::file(&r.path, format!("bad shard header: {e}")))?,
            Some(Err(e)) => return Err(e),
            None => return Err(DataError::file(&r.path, "truncated: no shard header")),
        };
        header.check::<T>(&r.path)?;
        Ok(r)
    }

    fn read_frame(&mut self) -> Option<Result<Vec<u8>>> {
        let mut len = [0u8; 4];
        match self.input.read(&mut len[..1]) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(e.into())),
        }
        if let Err(e) = self.input.read_exact(&mut len[1..]) {
            return Some(Err(self.truncated(e)));
        }
        let n = u32::from_le_bytes(len) as usize;
        // Read what is there rather than allocating what the length field claims: a damaged
        // length (up to 4 GiB) must not allocate more than the file holds.
        self.buf.clear();
        match (&mut self.input).take(n as u64).read_to_end(&mut self.buf) {
            Err(e) => return Some(Err(self.truncated(e))),
            Ok(got) if got < n => {
                let e = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("a frame of {n} bytes, {got} left in the file"),
                );
                return Some(Err(self.truncated(e)));
            }
            Ok(_) => {}
        }
        Some(Ok(std::mem::take(&mut self.buf)))
    }

    fn truncated(&self, e: std::io::Error) -> DataError {
        DataError::file(
            &self.path,
            format!("record {}: truncated shard ({e})", self.record),
        )
    }
}

impl<T: Schema> Iterator for ShardReader<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        let bytes = match self.read_frame()? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let rec = postcard::from_bytes(&bytes).map_err(|e| {
            DataError::file(
                &self.path,
                format!("record {}: not a `{}` record: {e}", self.record, T::KIND),
            )
        });
        self.record += 1;
        self.buf = bytes;
        Some(rec)
    }
}

/// Streams a dataset file of either format, chosen by extension (`.jsonl` or `.pcd`).
pub fn read<T: Schema>(path: impl AsRef<Path>) -> Result<Box<dyn Iterator<Item = Result<T>>>> {
    let path = path.as_ref();
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl") => Ok(Box::new(JsonlReader::<T>::open(path)?)),
        Some("pcd") => Ok(Box::new(ShardReader::<T>::open(path)?)),
        _ => Err(DataError::file(
            path,
            "unknown dataset format: expected .jsonl or .pcd",
        )),
    }
}

/// The kind and version in a dataset file's header, without reading records.
pub fn peek_kind(path: &Path) -> Result<(String, u32)> {
    let header: Header = match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl") => {
            let f =
                File::open(path).map_err(|e| DataError::file(path, format!("cannot open: {e}")))?;
            let mut first = String::new();
            BufReader::new(f)
                .read_line(&mut first)
                .map_err(|e| DataError::line(path, 1, e.to_string()))?;
            serde_json::from_str(&first)
                .map_err(|e| DataError::line(path, 1, format!("not a hier-data header: {e}")))?
        }
        Some("pcd") => {
            let mut f = BufReader::new(
                File::open(path).map_err(|e| DataError::file(path, format!("cannot open: {e}")))?,
            );
            let mut magic = [0u8; 8];
            f.read_exact(&mut magic)
                .map_err(|e| DataError::file(path, format!("no shard header: {e}")))?;
            if &magic != MAGIC {
                return Err(DataError::file(
                    path,
                    "not a hier-data shard (no HIERDATA magic)",
                ));
            }
            let mut len = [0u8; 4];
            f.read_exact(&mut len)?;
            let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
            f.read_exact(&mut buf)?;
            postcard::from_bytes(&buf)
                .map_err(|e| DataError::file(path, format!("bad shard header: {e}")))?
        }
        _ => {
            return Err(DataError::file(
                path,
                "unknown dataset format: expected .jsonl or .pcd",
            ));
        }
    };
    Ok((header.hier_data, header.version))
}

/// Writes records as both formats: `<stem>.jsonl` and `<stem>.pcd`; returns the count.
pub fn write_both<T: Schema>(stem: &Path, records: &[T]) -> Result<u64> {
    let mut j = JsonlWriter::<T>::create(stem.with_extension("jsonl"))?;
    let mut s = ShardWriter::<T>::create(stem.with_extension("pcd"))?;
    for r in records {
        j.write(r)?;
        s.write(r)?;
    }
    j.finish()?;
    Ok(s.finish()?.1)
}

/// Reads all records of a file (either format).
pub fn read_all<T: Schema>(path: impl AsRef<Path>) -> Result<Vec<T>> {
    read::<T>(path)?.collect()
}
