//! Retrieval question answering, the steering paper's setting (METHODS.md B.1): a BM25 index
//! over a corpus in wiki-18's form ([`index`]), ASearcher's retrieval HTTP API with a server
//! and a client ([`server`]), the corpus and question formats ([`corpus`]), ASearcher's answer
//! scoring ([`score`]), the tag-protocol environment ([`env`]), and a deterministic synthetic
//! multi-hop world to play in when no answerable corpus can be downloaded ([`world`]).

pub mod corpus;
pub mod env;
pub mod index;
pub mod score;
pub mod server;
pub mod world;
