//! The retrieval server side by side with the same API on `tiny_http` (a well-kept crate that
//! was the candidate to replace the hand-written server), under the same load and abuse
//! (`tests/load`), alternating, `ROUNDS` rounds each:
//!
//! ```bash
//! LOAD_CLIENTS=32 LOAD_REQUESTS=200 ROUNDS=3 \
//!     cargo run --release -p hier-envs --example http_server_compare
//! ```
//!
//! Both answer through the same [`hier_envs::qa::server::handle`] with 4 worker threads; the
//! `tiny_http` side refuses bodies over `max_body` (413) from the declared length, as ours does,
//! and gives up on a body still arriving at the request deadline (408), as ours does.
//! Results are in docs/RELIABILITY.md.

#[path = "../tests/load/mod.rs"]
mod load;

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use hier_envs::qa::index::{Bm25Index, Retriever};
use hier_envs::qa::server::{RetrievalServer, ServerConfig, handle};
use hier_envs::qa::world::{World, WorldConfig};

/// Reads the body, giving up (408) once `deadline` has passed: `tiny_http` 0.12 has no read
/// timeout of its own, so this is the best a user of it can do — it catches a client that
/// trickles bytes, but not one that sends nothing (a blocking read without a socket timeout).
fn read_until(
    mut r: impl Read,
    max: usize,
    deadline: std::time::Instant,
    out: &mut Vec<u8>,
) -> Result<(), (u16, String)> {
    let mut buf = [0u8; 4096];
    loop {
        if std::time::Instant::now() > deadline {
            return Err((408, "the body did not arrive in time".into()));
        }
        match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) if out.len() + n > max => return Err((413, "body too large".into())),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Err((400, e.to_string())),
        }
    }
}

/// The same API on `tiny_http`: `workers` threads take requests from its queue.
fn start_tiny_http(
    retriever: Arc<dyn Retriever>,
    cfg: ServerConfig,
) -> (Arc<tiny_http::Server>, Vec<std::thread::JoinHandle<()>>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("tiny_http listens"));
    let threads = (0..cfg.workers)
        .map(|_| {
            let (server, retriever, cfg) = (server.clone(), retriever.clone(), cfg.clone());
            std::thread::spawn(move || {
                while let Ok(mut req) = server.recv() {
                    let (status, body) = if req.body_length().unwrap_or(0) > cfg.max_body {
                        (413, serde_json::json!({"error": "body too large"}))
                    } else {
                        let mut body = Vec::new();
                        let deadline = std::time::Instant::now() + cfg.read_timeout;
                        match read_until(req.as_reader(), cfg.max_body, deadline, &mut body) {
                            Ok(_) => handle(
                                retriever.as_ref(),
                                &cfg,
                                req.method().as_str(),
                                req.url(),
                                &body,
                            ),
                            Err((status, e)) => (status, serde_json::json!({"error": e})),
                        }
                    };
                    let response = tiny_http::Response::from_string(body.to_string())
                        .with_status_code(status)
                        .with_header(
                            "Content-Type: application/json"
                                .parse::<tiny_http::Header>()
                                .expect("a valid header"),
                        );
                    let _ = req.respond(response);
                }
            })
        })
        .collect();
    (server, threads)
}

fn main() {
    let w = World::generate(&WorldConfig {
        seed: 5,
        ..WorldConfig::default()
    })
    .expect("world");
    let index: Arc<dyn Retriever> = Arc::new(Bm25Index::in_memory(&w.documents).expect("index"));
    let cfg = ServerConfig {
        workers: 4,
        read_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let questions: Vec<String> = w.questions.iter().map(|q| q.question.clone()).collect();
    let (clients, requests) = (load::env("LOAD_CLIENTS", 8), load::env("LOAD_REQUESTS", 15));
    for round in 0..load::env("ROUNDS", 1) {
        let ours = RetrievalServer::start("127.0.0.1:0", index.clone(), cfg.clone()).expect("ours");
        let r = load::run_load(ours.addr(), index.clone(), &questions, clients, requests);
        println!("round {round} hier (std):  {}", r.summary());
        ours.shutdown();

        let (tiny, threads) = start_tiny_http(index.clone(), cfg.clone());
        let addr = tiny.server_addr().to_ip().expect("an IP address");
        let r = load::run_load(addr, index.clone(), &questions, clients, requests);
        println!("round {round} tiny_http:   {}", r.summary());
        if let Some(f) = r.failures.first() {
            println!("  first failure: {f}");
        }
        tiny.unblock();
        for _ in 1..threads.len() {
            tiny.unblock();
        }
        for t in threads {
            let _ = t.join();
        }
    }
}
