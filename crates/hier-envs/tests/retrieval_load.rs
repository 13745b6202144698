//! The retrieval server under load and abuse on loopback, bounded in clients and time: while
//! well-behaved clients send a stream of `/retrieve` requests, others trickle bytes (slowloris),
//! send oversized or malformed requests, or vanish half-way through. Every well-behaved request
//! must be answered 200 with the index's result (the slow clients hold workers only until the
//! request deadline, `read_timeout`, then get 408), every other abuser its 4xx, and the server
//! serves on. Prints requests/s and latency percentiles.
//!
//! CI size by default; `LOAD_CLIENTS=32 LOAD_REQUESTS=200 cargo test --release -p hier-envs
//! --test retrieval_load -- --nocapture` is the long version (numbers in docs/PERFORMANCE.md).

mod load;

use std::sync::Arc;
use std::time::Duration;

use hier_envs::qa::index::Bm25Index;
use hier_envs::qa::server::{RetrievalServer, ServerConfig};
use hier_envs::qa::world::{World, WorldConfig};
use load::{env, exchange, post, run_load};

#[test]
fn the_server_holds_under_load_and_abuse() {
    let w = World::generate(&WorldConfig {
        seed: 5,
        ..WorldConfig::default()
    })
    .unwrap();
    let index = Arc::new(Bm25Index::in_memory(&w.documents).unwrap());
    let cfg = ServerConfig {
        workers: 4,
        read_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let server = RetrievalServer::start("127.0.0.1:0", index.clone(), cfg).unwrap();
    let addr = server.addr();
    let (clients, requests) = (env("LOAD_CLIENTS", 8), env("LOAD_REQUESTS", 15));
    let questions: Vec<String> = w.questions.iter().map(|q| q.question.clone()).collect();

    let r = run_load(addr, index, &questions, clients, requests);
    eprintln!("{}", r.summary());
    assert!(
        r.failures.is_empty(),
        "{} failed: {:?}",
        r.failures.len(),
        &r.failures[..r.failures.len().min(5)]
    );
    assert_eq!(r.latencies.len(), clients * requests);
    assert_eq!(r.oversized.0, r.oversized.1, "oversized requests get 413");
    assert_eq!(r.malformed.0, r.malformed.1, "malformed requests get a 4xx");
    assert!(
        r.slowloris.1 > 0 && r.slowloris.0 == r.slowloris.1,
        "trickling clients get 408 at the request deadline"
    );
    assert!(r.trickled_bytes > 0);
    // And it still serves.
    let q = &questions[0];
    let body = serde_json::json!({"queries": [q]}).to_string();
    assert_eq!(exchange(addr, &post(&body)).map(|a| a.0), Some(200));
    server.shutdown();
}
