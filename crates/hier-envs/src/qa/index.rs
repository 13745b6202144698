//! A BM25 index over a corpus (`tantivy`), answering ASearcher's two calls in process:
//! `retrieve` (top-k passages of each query, with scores) and `access` (the page at a URL).
//!
//! Titles and texts are analysed with tantivy's `en_stem` (lowercase, English Porter stemming;
//! pyserini's Lucene analyser also drops stop words). BM25 uses tantivy's k1 = 1.2, b = 0.75
//! (pyserini's defaults are 0.9 / 0.4). Queries are parsed leniently: any text is a valid
//! query (operators typed by an agent are read as words where they do not parse). Documents
//! live in the index's store, so a wiki-18-sized corpus is served from disk, not memory.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::{QueryParser, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term, doc};

use super::corpus::Document;
use crate::EnvError;

/// A passage as the server returns it: ASearcher's BM25 fields (`title`, `text`, `contents`)
/// plus `id` and `url`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    pub id: String,
    pub title: String,
    pub text: String,
    pub contents: String,
    pub url: String,
}

impl From<&Document> for Passage {
    fn from(d: &Document) -> Self {
        Self {
            id: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
            contents: d.contents(),
            url: d.url.clone(),
        }
    }
}

/// What a retrieval backend answers (in process, or over HTTP).
pub trait Retriever: Send + Sync {
    /// The top `k` passages of each query with their scores, best first.
    fn retrieve(&self, queries: &[String], k: usize) -> crate::Result<Vec<Vec<(Passage, f32)>>>;
    /// The page at each URL (`None` where there is none).
    fn access(&self, urls: &[String]) -> crate::Result<Vec<Option<Passage>>>;
}

struct Fields {
    id: Field,
    title: Field,
    text: Field,
    url: Field,
}

/// The BM25 index.
pub struct Bm25Index {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    parser: QueryParser,
    len: usize,
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index")
            .field("documents", &self.len)
            .finish()
    }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let stemmed = TextOptions::default().set_stored().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        id: b.add_text_field("id", STRING | STORED),
        title: b.add_text_field("title", stemmed.clone()),
        text: b.add_text_field("text", stemmed),
        url: b.add_text_field("url", STRING | STORED),
    };
    (b.build(), fields)
}

fn terr(what: &str) -> impl Fn(tantivy::TantivyError) -> EnvError + '_ {
    move |e| EnvError::Qa(format!("bm25 index: {what}: {e}"))
}

impl Bm25Index {
    /// Indexes `docs` in memory.
    pub fn in_memory(docs: &[Document]) -> crate::Result<Self> {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        Self::fill(index, fields, docs)
    }

    /// Indexes `docs` into `dir` (created; must not hold an index yet), or opens the index
    /// already there when `docs` is `None`.
    pub fn on_disk(dir: &Path, docs: Option<&[Document]>) -> crate::Result<Self> {
        let (schema, fields) = schema();
        match docs {
            Some(docs) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| EnvError::Qa(format!("{}: {e}", dir.display())))?;
                let index = Index::create_in_dir(dir, schema)
                    .map_err(|e| EnvError::Qa(format!("{}: {e}", dir.display())))?;
                Self::fill(index, fields, docs)
            }
            None => {
                let index = Index::open_in_dir(dir)
                    .map_err(|e| EnvError::Qa(format!("{}: {e}", dir.display())))?;
                Self::open(index, fields)
            }
        }
    }

    fn fill(index: Index, fields: Fields, docs: &[Document]) -> crate::Result<Self> {
        // One indexing thread: one segment with documents in corpus order, so equal BM25
        // scores rank the same way in every build (several threads split documents into
        // segments by timing, and tantivy breaks ties by segment). Recorded episodes replay.
        let mut writer: tantivy::IndexWriter = index
            .writer_with_num_threads(1, 100_000_000)
            .map_err(terr("writer"))?;
        for d in docs {
            writer
                .add_document(doc!(
                    fields.id => d.id.clone(),
                    fields.title => d.title.clone(),
                    fields.text => d.text.clone(),
                    fields.url => d.url.clone(),
                ))
                .map_err(terr("add"))?;
        }
        writer.commit().map_err(terr("commit"))?;
        Self::open(index, fields)
    }

    fn open(index: Index, fields: Fields) -> crate::Result<Self> {
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(terr("reader"))?;
        let parser = QueryParser::for_index(&index, vec![fields.title, fields.text]);
        let len = reader.searcher().num_docs() as usize;
        Ok(Self {
            index,
            reader,
            fields,
            parser,
            len,
        })
    }

    /// Documents indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn passage(&self, d: &TantivyDocument) -> Passage {
        let get = |f: Field| {
            d.get_first(f)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let (title, text) = (get(self.fields.title), get(self.fields.text));
        Passage {
            id: get(self.fields.id),
            contents: format!("\"{title}\"\n{text}"),
            title,
            text,
            url: get(self.fields.url),
        }
    }

    /// The top `k` passages of one query.
    pub fn search(&self, query: &str, k: usize) -> crate::Result<Vec<(Passage, f32)>> {
        let searcher = self.reader.searcher();
        let (q, _ignored) = self.parser.parse_query_lenient(query);
        let hits = searcher
            .search(&q, &TopDocs::with_limit(k.max(1)))
            .map_err(terr("search"))?;
        hits.into_iter()
            .map(|(score, addr)| {
                let d: TantivyDocument = searcher.doc(addr).map_err(terr("fetch"))?;
                Ok((self.passage(&d), score))
            })
            .collect()
    }

    /// The page whose URL is `url`.
    pub fn page(&self, url: &str) -> crate::Result<Option<Passage>> {
        let searcher = self.reader.searcher();
        let q = TermQuery::new(
            Term::from_field_text(self.fields.url, url),
            IndexRecordOption::Basic,
        );
        let hit = searcher
            .search(&q, &TopDocs::with_limit(1))
            .map_err(terr("access"))?;
        hit.first()
            .map(|(_, addr)| {
                let d: TantivyDocument = searcher.doc(*addr).map_err(terr("fetch"))?;
                Ok(self.passage(&d))
            })
            .transpose()
    }

    /// The index's schema and settings, for callers that want tantivy directly.
    pub fn tantivy(&self) -> &Index {
        &self.index
    }
}

impl Retriever for Bm25Index {
    fn retrieve(&self, queries: &[String], k: usize) -> crate::Result<Vec<Vec<(Passage, f32)>>> {
        queries.iter().map(|q| self.search(q, k)).collect()
    }

    fn access(&self, urls: &[String]) -> crate::Result<Vec<Option<Passage>>> {
        // ASearcher rewrites MediaWiki's `index.php/Title` form to `index.php?title=Title`.
        urls.iter()
            .map(|u| self.page(&u.replace("index.php/", "index.php?title=")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> Vec<Document> {
        let d = |id: &str, title: &str, text: &str| Document {
            id: id.into(),
            title: title.into(),
            text: text.into(),
            url: super::super::corpus::wiki_url(title),
        };
        vec![
            d(
                "0",
                "Korvath",
                "Korvath is a port city. Korvath is located in the country of Elmaria.",
            ),
            d(
                "1",
                "Elmaria",
                "Elmaria is a country. The capital of Elmaria is Drunis.",
            ),
            d(
                "2",
                "Aldo Veranti",
                "Aldo Veranti is a painter. Aldo Veranti was born in Korvath.",
            ),
            d(
                "3",
                "Survey of painters",
                "A survey listed painters and sculptors.",
            ),
        ]
    }

    #[test]
    fn bm25_ranks_the_matching_article_first_and_pages_open_by_url() {
        let idx = Bm25Index::in_memory(&docs()).unwrap();
        assert_eq!(idx.len(), 4);
        // Any query word matches (OR); more matched words rank higher.
        let hits = idx
            .search("Where was Aldo Veranti born? Korvath", 3)
            .unwrap();
        assert_eq!(
            hits.len(),
            2,
            "only two passages share a word with the query"
        );
        assert_eq!(
            (hits[0].0.title.as_str(), hits[1].0.title.as_str()),
            ("Aldo Veranti", "Korvath")
        );
        assert!(hits[0].1 > hits[1].1);
        let hits = idx.search("Where was Aldo Veranti born?", 2).unwrap();
        assert_eq!(
            hits[0].0.contents,
            "\"Aldo Veranti\"\nAldo Veranti is a painter. Aldo Veranti was born in Korvath."
        );
        // Stemming: "lists" and "sculptor" find "listed ... sculptors".
        let hits = idx.search("lists sculptor", 4).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0.title, "Survey of painters");
        // Operators typed by an agent do not break the query.
        assert!(
            idx.search("capital AND (Elmaria OR \"", 3).unwrap()[0]
                .0
                .title
                == "Elmaria"
        );
        assert!(idx.search("", 3).unwrap().is_empty());
        let urls = vec![
            "https://en.wikipedia.org/wiki/Elmaria".to_owned(),
            "https://en.wikipedia.org/wiki/Nowhere".to_owned(),
        ];
        let pages = idx.access(&urls).unwrap();
        assert_eq!(pages[0].as_ref().unwrap().id, "1");
        assert!(pages[1].is_none());
    }

    #[test]
    fn every_build_ranks_ties_the_same_way() {
        // Many documents with the same text: every hit ties, and the order must not depend on
        // which indexing thread took which document.
        let many: Vec<Document> = (0..400)
            .map(|i| Document {
                id: i.to_string(),
                title: format!("Twin {i}"),
                text: "The same river runs through the same valley.".into(),
                url: format!("https://en.wikipedia.org/wiki/Twin_{i}"),
            })
            .collect();
        let first = Bm25Index::in_memory(&many)
            .unwrap()
            .search("river valley", 10)
            .unwrap();
        for _ in 0..3 {
            let again = Bm25Index::in_memory(&many)
                .unwrap()
                .search("river valley", 10)
                .unwrap();
            assert_eq!(again, first);
        }
    }

    #[test]
    fn an_index_on_disk_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let built = Bm25Index::on_disk(&dir.path().join("bm25"), Some(&docs())).unwrap();
        let hits = built.search("Elmaria capital", 1).unwrap();
        drop(built);
        let reopened = Bm25Index::on_disk(&dir.path().join("bm25"), None).unwrap();
        assert_eq!(reopened.search("Elmaria capital", 1).unwrap(), hits);
        let err = Bm25Index::on_disk(&dir.path().join("missing"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
