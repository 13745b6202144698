//! ASearcher's retrieval server API over HTTP, for any [`Retriever`], and a client for it.
//!
//! - `POST /retrieve {"queries": [...], "topk": k?, "return_scores": bool?}` →
//!   `{"result": [[passage, ...], ...]}`, or with scores `[[{"document": passage, "score": s},
//!   ...], ...]`; `topk` defaults to the server's.
//! - `POST /access {"urls": [...]}` → `{"result": [passage | null, ...]}`.
//!
//! Malformed requests get a 4xx with `{"error": "..."}` naming what is wrong: 400 (not JSON,
//! missing or mistyped fields, `topk` outside `1..=max_topk`, too many queries), 404 (unknown
//! path), 405 (not POST), 408 (a request that stalls longer than `read_timeout`), 411 (chunked
//! bodies), 413 (body over `max_body`, refused before it is read), 431 (over-long head). A
//! fixed pool of `workers` threads answers requests, so at most that many are served at once;
//! the others wait. The server is plain `std` networking: one request per connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::index::{Passage, Retriever};
use crate::EnvError;

/// Server settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Requests served at once.
    pub workers: usize,
    /// `topk` when a request gives none, and the largest allowed.
    pub default_topk: usize,
    pub max_topk: usize,
    /// Queries or URLs per request at most.
    pub max_batch: usize,
    /// Request bodies larger than this are refused (413).
    pub max_body: usize,
    /// A request that has not fully arrived this long after its connection was taken up gets
    /// 408 and is closed (a deadline for the whole request, not per read).
    pub read_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            workers: 4,
            default_topk: 3,
            max_topk: 100,
            max_batch: 512,
            max_body: 1 << 20,
            read_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetrieveRequest {
    queries: Vec<String>,
    topk: Option<usize>,
    #[serde(default)]
    return_scores: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccessRequest {
    urls: Vec<String>,
}

/// A running server; dropping it (or [`RetrievalServer::shutdown`]) stops it.
pub struct RetrievalServer {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for RetrievalServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetrievalServer")
            .field("addr", &self.addr)
            .finish()
    }
}

/// One answer: status and JSON body.
type Answer = (u16, serde_json::Value);

fn bad(status: u16, msg: impl Into<String>) -> Answer {
    (status, json!({"error": msg.into()}))
}

/// Answers one request (path, method, body) — the whole API, without sockets.
pub fn handle(
    retriever: &dyn Retriever,
    cfg: &ServerConfig,
    method: &str,
    path: &str,
    body: &[u8],
) -> Answer {
    let path = path.split('?').next().unwrap_or(path);
    if path != "/retrieve" && path != "/access" {
        return bad(
            404,
            format!("no endpoint {path}: use POST /retrieve or POST /access"),
        );
    }
    if method != "POST" {
        return bad(405, format!("{path} takes POST, not {method}"));
    }
    let parsed: Result<serde_json::Value, _> = serde_json::from_slice(body);
    let Ok(value) = parsed else {
        return bad(400, "the body is not JSON");
    };
    if path == "/retrieve" {
        let req: RetrieveRequest = match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => return bad(400, format!("/retrieve: {e}")),
        };
        let k = req.topk.unwrap_or(cfg.default_topk);
        if k == 0 || k > cfg.max_topk {
            return bad(400, format!("topk = {k}: must be in 1..={}", cfg.max_topk));
        }
        if req.queries.len() > cfg.max_batch {
            return bad(
                400,
                format!("{} queries; at most {}", req.queries.len(), cfg.max_batch),
            );
        }
        match retriever.retrieve(&req.queries, k) {
            Ok(results) => {
                let result: Vec<serde_json::Value> = results
                    .into_iter()
                    .map(|hits| {
                        hits.into_iter()
                            .map(|(p, s)| {
                                if req.return_scores {
                                    json!({"document": p, "score": s})
                                } else {
                                    json!(p)
                                }
                            })
                            .collect()
                    })
                    .collect();
                (200, json!({ "result": result }))
            }
            Err(e) => bad(500, e.to_string()),
        }
    } else {
        let req: AccessRequest = match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => return bad(400, format!("/access: {e}")),
        };
        if req.urls.len() > cfg.max_batch {
            return bad(
                400,
                format!("{} urls; at most {}", req.urls.len(), cfg.max_batch),
            );
        }
        match retriever.access(&req.urls) {
            Ok(pages) => (200, json!({ "result": pages })),
            Err(e) => bad(500, e.to_string()),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

/// Longest request line or header line, and most header lines.
const MAX_LINE: u64 = 16 << 10;
const MAX_HEADERS: usize = 100;

/// Reads one request (HTTP/1.x, `Content-Length` bodies only) and answers it; the connection
/// closes after the answer.
fn serve_connection(retriever: &dyn Retriever, cfg: &ServerConfig, stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(cfg.read_timeout));
    let _ = stream.set_write_timeout(Some(cfg.read_timeout));
    let (status, value) = match read_request(&stream, cfg) {
        Ok((method, path, body)) => handle(retriever, cfg, &method, &path, &body),
        Err(answer) => answer,
    };
    let body = value.to_string();
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let mut out = &stream;
    if let Err(e) = out
        .write_all(head.as_bytes())
        .and_then(|()| out.write_all(body.as_bytes()))
        .and_then(|()| out.flush())
    {
        tracing::debug!("retrieval server: answer not sent: {e}");
    }
}

fn read_line(r: &mut impl BufRead) -> Result<String, Answer> {
    let mut line = String::new();
    match r.take(MAX_LINE).read_line(&mut line) {
        Ok(_) if !line.ends_with('\n') => Err(bad(431, "a line of the request is too long or cut")),
        Ok(_) => Ok(line.trim_end().to_owned()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(bad(408, "the request did not arrive in time"))
        }
        Err(e) => Err(bad(400, format!("reading the request: {e}"))),
    }
}

/// Reads from a socket until a deadline for the whole request: each read waits only for the
/// time left, so a client that trickles a byte at a time cannot hold a worker past
/// `read_timeout` (a per-read timeout alone would let it).
struct DeadlineReader<'a> {
    stream: &'a TcpStream,
    deadline: std::time::Instant,
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut s = self.stream;
        s.read(buf)
    }
}

fn read_request(
    stream: &TcpStream,
    cfg: &ServerConfig,
) -> Result<(String, String, Vec<u8>), Answer> {
    let mut r = BufReader::new(DeadlineReader {
        stream,
        deadline: std::time::Instant::now() + cfg.read_timeout,
    });
    let first = read_line(&mut r)?;
    let mut parts = first.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(bad(400, format!("not an HTTP request line: {first:?}")));
    };
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut length = None;
    for n in 0.. {
        if n == MAX_HEADERS {
            return Err(bad(431, "too many header lines"));
        }
        let line = read_line(&mut r)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(400, format!("not a header: {line:?}")));
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "transfer-encoding" && !value.eq_ignore_ascii_case("identity") {
            return Err(bad(
                411,
                "send the body with a Content-Length (no chunked encoding)",
            ));
        }
        if name == "content-length" {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| bad(400, format!("Content-Length {value:?}")))?,
            );
        }
    }
    let length = length.unwrap_or(0);
    if length > cfg.max_body {
        return Err(bad(
            413,
            format!("body of {length} bytes; at most {}", cfg.max_body),
        ));
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            bad(408, "the body did not arrive in time")
        }
        _ => bad(400, format!("reading the body: {e}")),
    })?;
    Ok((method, path, body))
}

impl RetrievalServer {
    /// Listens on `addr` (port 0: any free port) and serves `retriever` with `cfg.workers`
    /// threads; accepted connections wait in a queue of `4 × workers` (the listener's backlog
    /// holds the rest), so load slows clients down instead of dropping them.
    pub fn start(
        addr: &str,
        retriever: Arc<dyn Retriever>,
        cfg: ServerConfig,
    ) -> crate::Result<Self> {
        if cfg.workers == 0 {
            return Err(EnvError::Qa(
                "retrieval server: workers must be positive".into(),
            ));
        }
        let listener =
            TcpListener::bind(addr).map_err(|e| EnvError::Qa(format!("listen on {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| EnvError::Qa(format!("{addr}: {e}")))?;
        let stopping = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::sync_channel::<TcpStream>(4 * cfg.workers);
        let rx = Arc::new(Mutex::new(rx));
        let cfg = Arc::new(cfg);
        let mut threads: Vec<std::thread::JoinHandle<()>> = (0..cfg.workers)
            .map(|_| {
                let (rx, retriever, cfg) = (rx.clone(), retriever.clone(), cfg.clone());
                std::thread::spawn(move || {
                    loop {
                        // The lock is held only while waiting for the next connection.
                        let next = rx.lock().expect("queue lock").recv();
                        let Ok(stream) = next else { break };
                        serve_connection(retriever.as_ref(), &cfg, stream);
                    }
                })
            })
            .collect();
        let stop = stopping.clone();
        threads.push(std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                match stream {
                    Ok(s) => {
                        if tx.send(s).is_err() {
                            break;
                        }
                    }
                    Err(e) => tracing::debug!("retrieval server: accept: {e}"),
                }
            }
            // Dropping the sender ends the workers once the queue is served.
        }));
        Ok(Self {
            addr,
            stopping,
            threads,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, answers the connections already accepted, joins the threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor with a connection of our own.
        let _ = TcpStream::connect(self.addr);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for RetrievalServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client of any ASearcher-compatible server.
#[derive(Clone)]
pub struct HttpRetriever {
    base: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for HttpRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRetriever")
            .field("base", &self.base)
            .finish()
    }
}

#[derive(Deserialize)]
struct Scored {
    document: Passage,
    score: f32,
}

impl HttpRetriever {
    /// A client of the server at `base` (`http://host:port`), each call bounded by `timeout`.
    pub fn new(base: &str, timeout: Duration) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
        }
    }

    fn post(&self, path: &str, body: serde_json::Value) -> crate::Result<serde_json::Value> {
        let url = format!("{}{path}", self.base);
        let resp = match self.agent.post(&url).send_json(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                return Err(EnvError::Qa(format!("{url}: HTTP {code}: {text}")));
            }
            Err(e) => return Err(EnvError::Qa(format!("{url}: {e}"))),
        };
        resp.into_json()
            .map_err(|e| EnvError::Qa(format!("{url}: {e}")))
    }

    fn result<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        mut v: serde_json::Value,
    ) -> crate::Result<T> {
        serde_json::from_value(v["result"].take())
            .map_err(|e| EnvError::Qa(format!("{}{path}: unexpected response: {e}", self.base)))
    }
}

impl Retriever for HttpRetriever {
    fn retrieve(&self, queries: &[String], k: usize) -> crate::Result<Vec<Vec<(Passage, f32)>>> {
        let v = self.post(
            "/retrieve",
            json!({"queries": queries, "topk": k, "return_scores": true}),
        )?;
        let r: Vec<Vec<Scored>> = self.result("/retrieve", v)?;
        Ok(r.into_iter()
            .map(|hits| hits.into_iter().map(|s| (s.document, s.score)).collect())
            .collect())
    }

    fn access(&self, urls: &[String]) -> crate::Result<Vec<Option<Passage>>> {
        let v = self.post("/access", json!({ "urls": urls }))?;
        self.result("/access", v)
    }
}
