//! The simulator's JVM: spawned, watched and killed by us.
//!
//! `java -cp scienceworld.jar scienceworld.runtime.pythonapi.PythonInterface <port>` in the
//! folder holding `object_type_ids.tsv`. Its stdout and stderr are drained by threads for the
//! whole life of the process (the JVM blocks once a 64 KiB pipe fills — gold-path generation is
//! chatty) and the last lines are kept for error messages. Ready when it prints
//! `Server started`. It does not exit when its stdin closes, so [`Drop`] kills it — and since
//! `Drop` does not run when our process is killed by a signal, a small `sh` watchdog kills
//! the JVM once our process is gone (no orphaned 0.9 GB JVMs after Ctrl-C or `kill`).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{EnvError, Result};

const MAIN_CLASS: &str = "scienceworld.runtime.pythonapi.PythonInterface";
const TAIL_LINES: usize = 40;

/// A running simulator process.
#[derive(Debug)]
pub struct Jvm {
    child: Child,
    port: u16,
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl Jvm {
    /// Starts a JVM on a free loopback port and waits until it serves.
    pub fn spawn(
        java: &Path,
        asset_dir: &Path,
        java_opts: &[String],
        ready_timeout: Duration,
    ) -> Result<Self> {
        let mut last_err = None;
        // A free port can be taken by someone else between our probe and the JVM's bind:
        // try a few.
        for _ in 0..3 {
            let port = free_port()?;
            match Self::spawn_on(java, asset_dir, java_opts, port, ready_timeout) {
                Ok(jvm) => return Ok(jvm),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.expect("at least one attempt"))
    }

    fn spawn_on(
        java: &Path,
        asset_dir: &Path,
        java_opts: &[String],
        port: u16,
        ready_timeout: Duration,
    ) -> Result<Self> {
        let jar = asset_dir.join("scienceworld.jar");
        if !jar.exists() {
            return Err(EnvError::file(&jar, "missing (run `cargo xtask setup`)"));
        }
        let mut child = Command::new(java)
            .args(java_opts)
            .arg("-cp")
            .arg(&jar)
            .arg(MAIN_CLASS)
            .arg(port.to_string())
            .current_dir(asset_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| EnvError::Asset(format!("cannot start {}: {e}", java.display())))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        drain(child.stdout.take().expect("piped"), &tail, Some(ready_tx));
        drain(child.stderr.take().expect("piped"), &tail, None);
        watch_parent(child.id());
        let mut jvm = Jvm { child, port, tail };
        match ready_rx.recv_timeout(ready_timeout) {
            Ok(()) => Ok(jvm),
            Err(_) => {
                let status = jvm.child.try_wait().ok().flatten();
                let msg = match status {
                    Some(s) => format!("the ScienceWorld JVM exited ({s}) before serving"),
                    None => format!(
                        "the ScienceWorld JVM did not print `Server started` within {:.0} s",
                        ready_timeout.as_secs_f64()
                    ),
                };
                Err(EnvError::Crashed(format!(
                    "{msg}; its output ended with:\n{}",
                    jvm.tail()
                )))
            }
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines the JVM printed.
    pub fn tail(&self) -> String {
        let t = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Kills the process and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `sh` polling every second: when this process is gone, it kills the JVM; when the
/// JVM is gone, it exits. Reaped by a thread.
fn watch_parent(jvm: u32) {
    let me = std::process::id();
    let script = format!(
        "while kill -0 {me} 2>/dev/null && kill -0 {jvm} 2>/dev/null; do sleep 1; done; \
         kill -9 {jvm} 2>/dev/null"
    );
    match Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(mut watchdog) => {
            let _ = std::thread::Builder::new()
                .name("scienceworld-jvm-watchdog".into())
                .spawn(move || watchdog.wait());
        }
        Err(e) => tracing::warn!("no watchdog for the ScienceWorld JVM (it may outlive us): {e}"),
    }
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(l.local_addr()?.port())
}

/// Reads `pipe` line by line until it closes, keeping the last lines; signals readiness.
fn drain(
    pipe: impl Read + Send + 'static,
    tail: &Arc<Mutex<VecDeque<String>>>,
    ready: Option<mpsc::Sender<()>>,
) {
    let tail = Arc::clone(tail);
    std::thread::Builder::new()
        .name("scienceworld-jvm-output".into())
        .spawn(move || {
            let mut reader = BufReader::new(pipe);
            let mut ready = ready;
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                        if line.contains("Server started")
                            && let Some(tx) = ready.take()
                        {
                            let _ = tx.send(());
                        }
                        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                        if t.len() == TAIL_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            }
        })
        .expect("spawn output drain thread");
}
