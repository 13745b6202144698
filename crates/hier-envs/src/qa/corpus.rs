//! Corpora and question sets in the public formats, so a user with wiki-18 and the seven
//! benchmarks runs the real setting with the same code:
//!
//! - corpus rows (wiki-18, JSONL): `{"id": "...", "contents": "\"Title\"\ntext"}`, optionally
//!   with `"url"` (otherwise made from the title) — ASearcher splits `contents` at its first
//!   line into title (quotes stripped) and text;
//! - questions (JSONL): `{"question": "...", "answer": "..." | [...]}` or `"gt"` /
//!   `"golden_answers"` instead of `"answer"`, optional `"id"`.
//!
//! Errors name the file and line.

use std::io::BufRead;
use std::path::Path;

use crate::EnvError;
use serde::{Deserialize, Serialize};

/// A passage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    pub id: String,
    pub title: String,
    pub text: String,
    pub url: String,
}

impl Document {
    /// wiki-18's `contents`: the quoted title, a newline, the text.
    pub fn contents(&self) -> String {
        format!("\"{}\"\n{}", self.title, self.text)
    }

    /// The corpus row (`id`, `contents`, `url`).
    pub fn row(&self) -> serde_json::Value {
        serde_json::json!({"id": self.id, "contents": self.contents(), "url": self.url})
    }

    /// Parses a corpus row; `what` names it in errors.
    pub fn from_row(v: &serde_json::Value, what: &str) -> crate::Result<Self> {
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
        let contents = field("contents")
            .ok_or_else(|| EnvError::Qa(format!("{what}: no string `contents`")))?;
        let id = match v.get("id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => return Err(EnvError::Qa(format!("{what}: no `id`"))),
        };
        let (first, rest) = contents.split_once('\n').unwrap_or((contents, ""));
        let title = first.trim().trim_matches('"').to_owned();
        Ok(Self {
            url: field("url")
                .map(str::to_owned)
                .unwrap_or_else(|| wiki_url(&title)),
            id,
            title,
            text: rest.to_owned(),
        })
    }
}

/// The Wikipedia URL of a title (spaces as underscores).
pub fn wiki_url(title: &str) -> String {
    format!("https://en.wikipedia.org/wiki/{}", title.replace(' ', "_"))
}

/// The JSON value of every non-blank line, with `file:line` to name it in errors.
fn json_lines(path: &Path) -> crate::Result<Vec<(String, serde_json::Value)>> {
    let f =
        std::fs::File::open(path).map_err(|e| EnvError::Qa(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let what = format!("{}:{}", path.display(), i + 1);
        let line = line.map_err(|e| EnvError::Qa(format!("{what}: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(&line).map_err(|e| EnvError::Qa(format!("{what}: {e}")))?;
        out.push((what, v));
    }
    Ok(out)
}

/// Reads a corpus JSONL file (blank lines skipped).
pub fn load_corpus(path: &Path) -> crate::Result<Vec<Document>> {
    json_lines(path)?
        .iter()
        .map(|(what, v)| Document::from_row(v, what))
        .collect()
}

/// Writes `text` to a temporary file beside `path` (removed if anything fails), synced, then
/// renamed into place (`tempfile`'s `persist`, as `hier_backbone::write_atomic` does; the leaf
/// crates do not depend on each other), so a reader never sees half a file.
pub fn write_atomic(path: &Path, text: &str) -> crate::Result<()> {
    let err = |e: std::io::Error| EnvError::file(path, e.to_string());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut f = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .and_then(|()| f.as_file().sync_all())
        .map_err(err)?;
    f.persist(path).map(drop).map_err(|e| err(e.error))
}

/// Writes documents as corpus rows, atomically.
pub fn write_corpus(path: &Path, docs: &[Document]) -> crate::Result<()> {
    let text: String = docs.iter().map(|d| d.row().to_string() + "\n").collect();
    write_atomic(path, &text)
}

/// A benchmark question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaItem {
    pub id: String,
    pub question: String,
    pub answers: Vec<String>,
}

/// Reads a question JSONL file; ids default to the question's position (from 1).
pub fn load_questions(path: &Path) -> crate::Result<Vec<QaItem>> {
    let mut out = Vec::new();
    for (n, (what, v)) in json_lines(path)?.into_iter().enumerate() {
        let question = v
            .get("question")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| EnvError::Qa(format!("{what}: no string `question`")))?
            .to_owned();
        let gold = ["answer", "gt", "golden_answers"]
            .iter()
            .find_map(|k| v.get(*k))
            .ok_or_else(|| {
                EnvError::Qa(format!("{what}: no `answer`, `gt` or `golden_answers`"))
            })?;
        let answers = match gold {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(xs) => xs
                .iter()
                .map(|x| match x {
                    serde_json::Value::String(s) => Ok(s.clone()),
                    serde_json::Value::Number(n) => Ok(n.to_string()),
                    other => Err(EnvError::Qa(format!(
                        "{what}: answer {other} is not a string"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            serde_json::Value::Number(n) => vec![n.to_string()],
            other => {
                return Err(EnvError::Qa(format!(
                    "{what}: answer {other} is not a string or list"
                )));
            }
        };
        if answers.is_empty() {
            return Err(EnvError::Qa(format!("{what}: empty answer list")));
        }
        let id = match v.get("id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => (n + 1).to_string(),
        };
        out.push(QaItem {
            id,
            question,
            answers,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_rows_round_trip_and_bad_lines_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("corpus.jsonl");
        std::fs::write(
            &p,
            "{\"id\": \"1\", \"contents\": \"\\\"Paris\\\"\\nParis is the capital of France.\"}\n\n{\"id\": 2, \"contents\": \"\\\"Lyon\\\"\\nA city.\", \"url\": \"u2\"}\n",
        )
        .unwrap();
        let docs = load_corpus(&p).unwrap();
        assert_eq!(docs[0].title, "Paris");
        assert_eq!(docs[0].text, "Paris is the capital of France.");
        assert_eq!(docs[0].url, "https://en.wikipedia.org/wiki/Paris");
        assert_eq!((docs[1].id.as_str(), docs[1].url.as_str()), ("2", "u2"));
        write_corpus(&p, &docs).unwrap();
        assert_eq!(load_corpus(&p).unwrap(), docs);
        std::fs::write(&p, "{\"id\": \"1\"}\n").unwrap();
        let err = load_corpus(&p).unwrap_err().to_string();
        assert!(
            err.contains("corpus.jsonl:1") && err.contains("contents"),
            "{err}"
        );
    }

    #[test]
    fn questions_take_answer_gt_or_golden_answers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.jsonl");
        std::fs::write(
            &p,
            "{\"question\": \"a?\", \"answer\": \"x\"}\n{\"id\": \"b\", \"question\": \"b?\", \"gt\": [\"y\", 3]}\n{\"question\": \"c?\", \"golden_answers\": [\"z\"]}\n",
        )
        .unwrap();
        let qs = load_questions(&p).unwrap();
        assert_eq!(qs[0].answers, ["x"]);
        assert_eq!(
            (qs[1].id.as_str(), qs[1].answers.clone()),
            ("b", vec!["y".into(), "3".into()])
        );
        assert_eq!(qs[2].id, "3");
        std::fs::write(&p, "{\"question\": \"a?\"}\n").unwrap();
        assert!(
            load_questions(&p)
                .unwrap_err()
                .to_string()
                .contains("q.jsonl:1")
        );
    }
}
