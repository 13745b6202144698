//! An append-only JSON-lines journal of finished pieces of work, so that a long stage killed
//! half-way resumes after its last finished piece instead of from the start.
//!
//! Invariant: every record is one line written by one `write` and made durable (`fsync`)
//! before [`Journal::append`] returns, so a kill leaves at most a *torn tail* — a last line
//! without its newline. [`Journal::open`] drops that tail (truncating the file back to the
//! last whole line) and returns the whole records; a whole line that does not parse is
//! damage, not a kill, and is an error naming the file and line (nothing is discarded).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// A journal file open for appending.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
    records: usize,
}

impl Journal {
    /// Opens (or creates) the journal at `path` and reads its whole records, dropping a torn
    /// last line.
    pub fn open<T: DeserializeOwned>(path: &Path) -> Result<(Self, Vec<T>)> {
        let io = |e| Error::io(path, e);
        let text = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(e)),
        };
        // Everything after the last newline is a record whose write was cut short.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut records = Vec::new();
        for (i, line) in text[..whole].split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            records.push(serde_json::from_slice(line).map_err(|source| Error::Json {
                path: path.into(),
                line: Some(i + 1),
                source,
            })?);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        if whole < text.len() {
            tracing::warn!(
                "{}: dropping a torn last record ({} bytes) left by an interrupted run",
                path.display(),
                text.len() - whole
            );
            file.set_len(whole as u64).map_err(io)?;
        }
        let journal = Self {
            path: path.into(),
            file,
            records: records.len(),
        };
        Ok((journal, records))
    }

    /// Appends `record` as one line and makes it durable.
    pub fn append<T: Serialize>(&mut self, record: &T) -> Result<()> {
        let mut line = serde_json::to_vec(record).expect("a journal record serialises");
        line.push(b'\n');
        let io = |e| Error::io(&self.path, e);
        self.file.write_all(&line).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.records += 1;
        Ok(())
    }

    /// Whole records in the file (read at opening plus appended since).
    pub fn len(&self) -> usize {
        self.records
    }

    /// True when the journal holds no record.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopening_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let (mut j, none) = Journal::open::<Vec<u32>>(&path).unwrap();
        assert!(none.is_empty() && j.is_empty());
        j.append(&vec![1u32, 2]).unwrap();
        j.append(&vec![3u32]).unwrap();
        drop(j);
        // A kill in the middle of the third write: part of a line, no newline.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"[4, 5").unwrap();
        drop(f);
        let (mut j, got) = Journal::open::<Vec<u32>>(&path).unwrap();
        assert_eq!(got, vec![vec![1, 2], vec![3]]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1,2]\n[3]\n");
        j.append(&vec![6u32]).unwrap();
        assert_eq!(j.len(), 3);
        let (_, got) = Journal::open::<Vec<u32>>(&path).unwrap();
        assert_eq!(got, vec![vec![1, 2], vec![3], vec![6]]);
    }

    #[test]
    fn a_damaged_whole_line_is_an_error_naming_it_and_nothing_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        std::fs::write(&path, "[1]\n[2,\n[3]\n").unwrap();
        let err = Journal::open::<Vec<u32>>(&path).unwrap_err().to_string();
        assert!(err.contains("j.jsonl:2"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1]\n[2,\n[3]\n");
    }
}
