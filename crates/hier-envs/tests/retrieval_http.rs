//! The retrieval server over real sockets on loopback: ASearcher's request and response shapes,
//! 4xx answers to malformed requests, and a bounded concurrent load with nothing lost (every
//! answer equal to the in-process index's).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use hier_envs::qa::index::{Bm25Index, Retriever};
use hier_envs::qa::server::{HttpRetriever, RetrievalServer, ServerConfig};
use hier_envs::qa::world::{World, WorldConfig};

fn world() -> World {
    World::generate(&WorldConfig {
        seed: 3,
        people: 40,
        cities: 12,
        countries: 4,
        organizations: 10,
        works: 12,
        questions_per_hop: [20, 10, 5, 5],
        ..WorldConfig::default()
    })
    .unwrap()
}

fn start(cfg: ServerConfig) -> (World, Arc<Bm25Index>, RetrievalServer) {
    let w = world();
    let index = Arc::new(Bm25Index::in_memory(&w.documents).unwrap());
    let server = RetrievalServer::start("127.0.0.1:0", index.clone(), cfg).unwrap();
    (w, index, server)
}

/// Sends raw bytes, returns (status, body).
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, serde_json::Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status: u16 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split("\r\n\r\n").nth(1).unwrap();
    (status, serde_json::from_str(body).unwrap())
}

fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, serde_json::Value) {
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    raw(addr, req.as_bytes())
}

#[test]
fn valid_requests_get_asearchers_shapes() {
    let (w, index, server) = start(ServerConfig::default());
    let q = &w.questions[0];
    let (status, v) = post(
        server.addr(),
        "/retrieve",
        &serde_json::json!({"queries": [q.question, "capital"], "topk": 2}).to_string(),
    );
    assert_eq!(status, 200, "{v}");
    let result = v["result"].as_array().unwrap();
    assert_eq!(result.len(), 2);
    let first = &result[0][0];
    for field in ["title", "text", "contents", "url", "id"] {
        assert!(first[field].is_string(), "{first}");
    }
    let expected = index.search(&q.question, 2).unwrap();
    assert_eq!(first["title"], expected[0].0.title.as_str());
    // With scores: {"document", "score"}; without topk: the server's default.
    let (_, v) = post(
        server.addr(),
        "/retrieve",
        &serde_json::json!({"queries": [q.question], "return_scores": true}).to_string(),
    );
    let hits = v["result"][0].as_array().unwrap();
    assert_eq!(hits.len(), ServerConfig::default().default_topk);
    assert!((hits[0]["score"].as_f64().unwrap() - f64::from(expected[0].1)).abs() < 1e-4);
    assert_eq!(hits[0]["document"]["title"], expected[0].0.title.as_str());
    // Access: a page by URL, null where there is none.
    let url = &w.documents[5].url;
    let (status, v) = post(
        server.addr(),
        "/access",
        &serde_json::json!({"urls": [url, "https://en.wikipedia.org/wiki/Nope"]}).to_string(),
    );
    assert_eq!(status, 200);
    assert_eq!(v["result"][0]["title"], w.documents[5].title.as_str());
    assert!(v["result"][1].is_null());
    // The client sees what the index sees.
    let client = HttpRetriever::new(&server.url(), Duration::from_secs(10));
    let queries = vec![q.question.clone(), "founded".to_owned()];
    assert_eq!(
        client.retrieve(&queries, 4).unwrap(),
        index.retrieve(&queries, 4).unwrap()
    );
    assert_eq!(
        client.access(std::slice::from_ref(url)).unwrap(),
        index.access(std::slice::from_ref(url)).unwrap()
    );
    server.shutdown();
}

#[test]
fn malformed_requests_get_4xx_naming_the_problem() {
    let cfg = ServerConfig {
        max_body: 2048,
        read_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let (_, _, server) = start(cfg);
    let a = server.addr();
    let cases: Vec<(u16, (u16, serde_json::Value), &str)> = vec![
        (400, post(a, "/retrieve", "{not json"), "not JSON"),
        (400, post(a, "/retrieve", "{\"topk\": 3}"), "queries"),
        (
            400,
            post(a, "/retrieve", "{\"queries\": \"one\"}"),
            "/retrieve",
        ),
        (
            400,
            post(a, "/retrieve", "{\"queries\": [\"a\"], \"topk\": 0}"),
            "topk = 0",
        ),
        (
            400,
            post(a, "/retrieve", "{\"queries\": [\"a\"], \"topk\": 1000}"),
            "topk = 1000",
        ),
        (
            400,
            post(a, "/retrieve", "{\"queries\": [\"a\"], \"top_k\": 2}"),
            "top_k",
        ),
        (400, post(a, "/access", "{\"url\": [\"x\"]}"), "urls"),
        (404, post(a, "/search", "{}"), "/search"),
        (
            405,
            raw(a, b"GET /retrieve HTTP/1.1\r\nHost: x\r\n\r\n"),
            "takes POST",
        ),
        (
            413,
            raw(
                a,
                b"POST /retrieve HTTP/1.1\r\nContent-Length: 999999\r\n\r\n",
            ),
            "at most 2048",
        ),
        (
            411,
            raw(
                a,
                b"POST /retrieve HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            ),
            "Content-Length",
        ),
        (
            400,
            raw(a, b"POST /retrieve HTTP/1.1\r\nContent-Length: ten\r\n\r\n"),
            "Content-Length",
        ),
        // A body that never arrives: the connection is answered 408 after the read timeout.
        (
            408,
            raw(
                a,
                b"POST /retrieve HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"queries\"",
            ),
            "in time",
        ),
    ];
    for (want, (got, body), says) in cases {
        assert_eq!(got, want, "{body}");
        let msg = body["error"].as_str().unwrap();
        assert!(
            msg.contains(says),
            "{want}: {msg:?} should mention {says:?}"
        );
    }
    // The server still answers after all that.
    let (status, _) = post(a, "/retrieve", "{\"queries\": [\"capital\"]}");
    assert_eq!(status, 200);
}

#[test]
fn a_concurrent_load_on_loopback_loses_nothing() {
    let (w, index, server) = start(ServerConfig {
        workers: 2,
        ..ServerConfig::default()
    });
    let questions: Vec<String> = w.questions.iter().map(|q| q.question.clone()).collect();
    let (threads, per_thread) = (8, 40);
    let url = server.url();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (url, questions, index) = (url.clone(), questions.clone(), index.clone());
            std::thread::spawn(move || {
                let client = HttpRetriever::new(&url, Duration::from_secs(30));
                let mut answered = 0;
                for k in 0..per_thread {
                    let q = vec![questions[(t * per_thread + k) % questions.len()].clone()];
                    let got = client.retrieve(&q, 3).unwrap();
                    assert_eq!(got, index.retrieve(&q, 3).unwrap(), "{q:?}");
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, threads * per_thread);
    server.shutdown();
}
