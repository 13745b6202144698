//! The retrieval server under load and abuse on loopback, bounded in clients and time: while
//! well-behaved clients send a stream of `/retrieve` requests, others trickle bytes (slowloris),
//! send oversized or malformed requests, or vanish half-way through. Every well-behaved request
//! must be answered 200 with the index's result (the slow clients hold workers only until the
//! request deadline, `read_timeout`, then get 408), every other abuser its 4xx, and the server
//! serves on. Prints requests/s and latency percentiles.
//!
//! CI size by default; `LOAD_CLIENTS=32 LOAD_REQUESTS=200 cargo test --release -p hier-envs
//! --test retrieval_load -- --nocapture` is the long version (numbers in docs/PERFORMANCE.md).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hier_envs::qa::index::{Bm25Index, Retriever};
use hier_envs::qa::server::{RetrievalServer, ServerConfig};
use hier_envs::qa::world::{World, WorldConfig};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Status of the answer to `request` (`None`: the connection closed without one).
fn exchange(addr: SocketAddr, request: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(request).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        status,
        out.split("\r\n\r\n").nth(1).unwrap_or("").to_owned(),
    ))
}

fn post(body: &str) -> Vec<u8> {
    format!(
        "POST /retrieve HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

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

    let stop = Arc::new(AtomicBool::new(false));
    let abuse_seen = Arc::new(Mutex::new(Vec::<(&'static str, Option<u16>)>::new()));
    let trickled = Arc::new(AtomicUsize::new(0));
    let mut abusers = Vec::new();
    // Slowloris: a valid head, then one body byte every 50 ms — past the request deadline.
    for _ in 0..3 {
        let (stop, seen, trickled) = (stop.clone(), abuse_seen.clone(), trickled.clone());
        abusers.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect(addr) else {
                    continue;
                };
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let _ = s.write_all(b"POST /retrieve HTTP/1.1\r\nContent-Length: 400\r\n\r\n{");
                let started = Instant::now();
                let mut answer = String::new();
                s.set_nonblocking(true).unwrap();
                loop {
                    if s.write_all(b" ").is_err() {
                        break;
                    }
                    trickled.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                    let mut buf = [0u8; 512];
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => answer.push_str(&String::from_utf8_lossy(&buf[..n])),
                        Err(_) if started.elapsed() < Duration::from_secs(5) => continue,
                        Err(_) => break,
                    }
                }
                let status = answer
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok());
                seen.lock().unwrap().push(("slowloris", status));
            }
        }));
    }
    // Oversized, malformed and vanishing clients.
    for kind in ["oversized", "malformed", "vanishing"] {
        let (stop, seen) = (stop.clone(), abuse_seen.clone());
        abusers.push(std::thread::spawn(move || {
            let mut k = 0u32;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                let status = match kind {
                    "oversized" => exchange(
                        addr,
                        b"POST /retrieve HTTP/1.1\r\nContent-Length: 50000000\r\n\r\n{\"queries\":",
                    )
                    .map(|a| a.0),
                    "malformed" => {
                        exchange(addr, format!("GARBAGE {k}\r\n\r\n\x00\x7f").as_bytes())
                            .map(|a| a.0)
                    }
                    _ => {
                        if let Ok(mut s) = TcpStream::connect(addr) {
                            let _ = s.write_all(b"POST /retrieve HTTP/1.1\r\nContent-Len");
                        } // dropped here: the client is gone
                        None
                    }
                };
                seen.lock().unwrap().push((kind, status));
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }

    // The well-behaved load, once the abusers hold connections.
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (latencies, failures, questions, index) = (
                latencies.clone(),
                failures.clone(),
                questions.clone(),
                index.clone(),
            );
            std::thread::spawn(move || {
                for r in 0..requests {
                    let q = &questions[(c * requests + r) % questions.len()];
                    let body = serde_json::json!({"queries": [q], "topk": 3}).to_string();
                    let t = Instant::now();
                    let answer = exchange(addr, &post(&body));
                    let dt = t.elapsed();
                    match answer {
                        Some((200, text)) => {
                            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                            let want = index.retrieve(std::slice::from_ref(q), 3).unwrap();
                            let got: Vec<&str> = v["result"][0]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|p| p["id"].as_str().unwrap_or(""))
                                .collect();
                            let want: Vec<&str> =
                                want[0].iter().map(|(p, _)| p.id.as_str()).collect();
                            if got != want {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("{q}: {got:?} ≠ {want:?}"));
                            }
                            latencies.lock().unwrap().push(dt);
                        }
                        other => failures.lock().unwrap().push(format!("{q}: {other:?}")),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let wall = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for a in abusers {
        a.join().unwrap();
    }

    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let seen = abuse_seen.lock().unwrap();
    let count = |k: &str, ok: &dyn Fn(Option<u16>) -> bool| {
        let all: Vec<_> = seen.iter().filter(|(kind, _)| *kind == k).collect();
        let good = all.iter().filter(|(_, s)| ok(*s)).count();
        (good, all.len())
    };
    let slow = count("slowloris", &|s| s == Some(408));
    let big = count("oversized", &|s| s == Some(413));
    let bad = count("malformed", &|s| s.is_some_and(|c| (400..500).contains(&c)));
    eprintln!(
        "{} requests from {clients} clients in {:.2} s: {:.0} requests/s, latency p50 {:.1} ms, \
         p99 {:.1} ms, max {:.1} ms, 0 errors; abusers answered as expected: slowloris {}/{}, \
         oversized {}/{}, malformed {}/{}, vanishing {}",
        lat.len(),
        wall.as_secs_f64(),
        lat.len() as f64 / wall.as_secs_f64(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3,
        slow.0,
        slow.1,
        big.0,
        big.1,
        bad.0,
        bad.1,
        count("vanishing", &|_| true).1
    );
    assert_eq!(lat.len(), clients * requests);
    assert_eq!(big.0, big.1, "oversized requests get 413");
    assert_eq!(bad.0, bad.1, "malformed requests get a 4xx");
    assert!(
        slow.1 > 0 && slow.0 == slow.1,
        "trickling clients get 408 at the request deadline"
    );
    assert!(trickled.load(Ordering::Relaxed) > 0);
    // And it still serves.
    let q = &questions[0];
    let body = serde_json::json!({"queries": [q]}).to_string();
    assert_eq!(exchange(addr, &post(&body)).map(|a| a.0), Some(200));
    server.shutdown();
}
