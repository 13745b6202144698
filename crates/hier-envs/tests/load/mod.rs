//! The load-and-abuse driver, shared by the server's test and the side-by-side example
//! (`examples/http_server_compare.rs`), so both servers face exactly the same traffic.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hier_envs::qa::index::Retriever;

pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Status of the answer to `request` (`None`: the connection closed without one).
pub fn exchange(addr: SocketAddr, request: &[u8]) -> Option<(u16, String)> {
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

pub fn post(body: &str) -> Vec<u8> {
    format!(
        "POST /retrieve HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What one load run saw.
pub struct LoadReport {
    pub clients: usize,
    pub requests: usize,
    /// Latencies of the well-behaved requests answered 200 with the index's result.
    pub latencies: Vec<Duration>,
    /// Well-behaved requests that failed (wrong status, wrong result, no answer).
    pub failures: Vec<String>,
    pub wall: Duration,
    /// (answered as expected, all) per abuse kind.
    pub slowloris: (usize, usize),
    pub oversized: (usize, usize),
    pub malformed: (usize, usize),
    pub vanishing: usize,
    pub trickled_bytes: usize,
}

impl LoadReport {
    pub fn percentile(&self, p: f64) -> Duration {
        let mut lat = self.latencies.clone();
        lat.sort();
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    }

    pub fn summary(&self) -> String {
        format!(
            "{} of {} requests from {} clients answered correctly in {:.2} s: {:.0} requests/s, \
             latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {} errors; abusers answered as \
             expected: slowloris (408) {}/{}, oversized (413) {}/{}, malformed (4xx) {}/{}, vanishing {}; {} bytes trickled",
            self.latencies.len(),
            self.clients * self.requests,
            self.clients,
            self.wall.as_secs_f64(),
            self.latencies.len() as f64 / self.wall.as_secs_f64(),
            self.percentile(0.5).as_secs_f64() * 1e3,
            self.percentile(0.99).as_secs_f64() * 1e3,
            self.percentile(1.0).as_secs_f64() * 1e3,
            self.failures.len(),
            self.slowloris.0,
            self.slowloris.1,
            self.oversized.0,
            self.oversized.1,
            self.malformed.0,
            self.malformed.1,
            self.vanishing,
            self.trickled_bytes
        )
    }
}

/// Runs `clients × requests` well-behaved `/retrieve` requests (checked against `index`) at the
/// server on `addr` while three slowloris clients, an oversized, a malformed and a vanishing
/// client abuse it.
pub fn run_load(
    addr: SocketAddr,
    index: Arc<dyn Retriever>,
    questions: &[String],
    clients: usize,
    requests: usize,
) -> LoadReport {
    let questions: Vec<String> = questions.to_vec();
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
                let _ = s.write_all(
                    b"POST /retrieve HTTP/1.1\r\nConnection: close\r\nContent-Length: 400\r\n\r\n{",
                );
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
                        b"POST /retrieve HTTP/1.1\r\nConnection: close\r\nContent-Length: 50000000\r\n\r\n{\"queries\":",
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

    let seen = abuse_seen.lock().unwrap();
    let count = |k: &str, ok: &dyn Fn(Option<u16>) -> bool| {
        let all: Vec<_> = seen.iter().filter(|(kind, _)| *kind == k).collect();
        let good = all.iter().filter(|(_, s)| ok(*s)).count();
        (good, all.len())
    };
    LoadReport {
        clients,
        requests,
        latencies: latencies.lock().unwrap().clone(),
        failures: failures.lock().unwrap().clone(),
        wall,
        slowloris: count("slowloris", &|s| s == Some(408)),
        oversized: count("oversized", &|s| s == Some(413)),
        malformed: count("malformed", &|s| s.is_some_and(|c| (400..500).contains(&c))),
        vanishing: count("vanishing", &|_| true).1,
        trickled_bytes: trickled.load(Ordering::Relaxed),
    }
}
