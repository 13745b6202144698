//! ScienceWorld: the real simulator (`scienceworld==1.2.3`'s jar) driven from Rust over py4j.
//! No Python at run time: we spawn and own the JVM ([`jvm`]) and speak the gateway's text
//! protocol ([`py4j`]).
//!
//! ## Semantics (those of the Python wrapper `ScienceWorldEnv`)
//! - `reset(task)`: `load(name, variation, "easy", gold)`, `reset`, then the step
//!   `look around`, whose observation is returned;
//! - `step(a)`: `score = round(100·getScore())` (Python's round-half-even), reward = score delta
//!   — reported in `[−1, 1]` units (÷100); `done` = `getCompleted` or `moves > step limit` or
//!   `score < 0`;
//! - valid actions from `getValidActionObjectCombinationsJSON` (one round trip; the Python
//!   wrapper reads the list variant with one round trip per action); lists such as the gold
//!   action sequence are read with `String.join` in three round trips; gold actions need
//!   `gold_paths` (on by default).
//!
//! ## Determinism
//! The simulator iterates hash sets keyed by Java identity hash codes, which HotSpot draws from
//! a per-thread random stream: the order in which a place's objects are listed, and even which
//! gold path is generated (`find-plant` 5 focused on the apple tree in one episode and on the
//! pea plant in the next, in one JVM), depend on everything the JVM did before. With
//! [`Config::deterministic`] (the default) the JVM runs with `-XX:hashCode=2` (every identity
//! hash is 1, so iteration follows insertion order): the same task gives the same text and the
//! same gold path in any JVM, after any history — measured: two dataset builds in one JVM are
//! byte-identical. It costs ≈ 10 % of step + valid-action throughput (≈ 30 % of bare steps).
//! Without it, scores, rewards and moves are still reproducible, text only up to list order.
//!
//! ## Processes
//! A [`Pool`] owns `n` JVMs (≈0.9 GB each) and hands out environments round-robin. Several
//! environments can share a JVM, each on its own connection and its own `PythonInterface`
//! object — but the simulator keeps global state: measured here, four environments stepping
//! their gold paths *concurrently* in one JVM ended with wrong scores (0.25, −1, 0, 0.75 instead
//! of 1) in 3 of 8 episodes, while the same calls *interleaved one at a time* all scored 1.
//! So calls into one JVM are serialised by a lock, and parallel rollouts need one JVM per
//! concurrently stepping environment. Every call has a timeout. When a JVM dies or a call times out,
//! the running episode fails with [`EnvError::Crashed`]/[`EnvError::Timeout`] (it never hangs);
//! the next `reset` reconnects, starting a new JVM if the old one is gone. An unresponsive JVM
//! is killed, so the other environments on it fail their episodes too.
//!
//! ## Splits ([`splits`])
//! The 24-task protocol of ETO/WKM/GLIDER: ID ("seen") = up to 10 dev variations per task
//! drawn with a fixed seed, OOD ("unseen") = the first ≤ 10 test variations per task, per-task
//! step limits; committed in `data/scienceworld_splits.json` (checked against the jar by the
//! tests). The full dev/test sets are available through [`Splits::variations`].

pub mod jvm;
pub mod py4j;
pub mod splits;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;

pub use splits::Splits;

use crate::error::{EnvError, Result};
use crate::{Env, Reset, Split, Step, StepInfo, Task};
use jvm::Jvm;
use py4j::{Arg, Connection, Value};

const INTERFACE_CLASS: &str = "scienceworld.runtime.pythonapi.PythonInterface";
/// What the simulator answers to an action it cannot parse.
const UNKNOWN_ACTION: &str = "No known action matches that input.";

/// How environments are run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Folder holding `scienceworld.jar` and `object_type_ids.tsv`.
    pub asset_dir: PathBuf,
    pub java: PathBuf,
    /// Extra JVM options (e.g. `-Xmx2g`, which replaces [`DEFAULT_MAX_HEAP`]).
    pub java_opts: Vec<String>,
    /// `"easy"` in the agent papers; comma-separated simplifications otherwise.
    pub simplifications: String,
    /// Generate gold paths on load (needed by [`Env::gold_actions`]).
    pub gold_paths: bool,
    /// Timeout of one call (a step, a valid-action listing).
    pub call_timeout: Duration,
    /// Timeout of `load` (gold-path generation can take seconds).
    pub load_timeout: Duration,
    pub ready_timeout: Duration,
    /// Step limit for tasks the split file does not list.
    pub default_step_limit: u64,
    /// Run the JVM with constant identity hashes so text and gold paths do not depend on the
    /// JVM's history (see the module docs). `HIER_SCIENCEWORLD_DETERMINISTIC=0` turns it off.
    pub deterministic: bool,
}

/// The JVM options of [`Config::deterministic`].
pub const DETERMINISTIC_JAVA_OPTS: [&str; 2] =
    ["-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2"];

/// The JVM's heap cap unless [`Config::java_opts`] sets one (`-Xmx…`). At the JVM's own default
/// (a quarter of physical memory) each simulator grew to ≈ 2.8 GB, and concurrent evaluations
/// (one JVM per parallel environment, 8 each) beside a training run exhausted 24 GB; at 1.5 GB
/// data generation (240 episodes with gold paths) and evaluations of 200 episodes ran without
/// a heap error. The heap bounds memory only: the simulator's text does not depend on it.
pub const DEFAULT_MAX_HEAP: &str = "-Xmx1536m";

impl Config {
    /// Assets from [`crate::assets`] (fetched if missing), `java` from `JAVA_HOME`/`PATH`,
    /// extra JVM options from `HIER_SCIENCEWORLD_JAVA_OPTS` (whitespace-separated).
    pub fn from_assets() -> Result<Self> {
        let java_opts = std::env::var("HIER_SCIENCEWORLD_JAVA_OPTS")
            .map(|v| v.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(Self {
            asset_dir: crate::assets::Assets::locate()?.scienceworld()?,
            java: crate::assets::find_java()?,
            java_opts,
            simplifications: "easy".into(),
            gold_paths: true,
            call_timeout: Duration::from_secs(30),
            load_timeout: Duration::from_secs(120),
            ready_timeout: Duration::from_secs(60),
            default_step_limit: 100,
            deterministic: std::env::var("HIER_SCIENCEWORLD_DETERMINISTIC").as_deref() != Ok("0"),
        })
    }

    /// The options the JVM starts with: [`DETERMINISTIC_JAVA_OPTS`] when deterministic, the
    /// heap cap [`DEFAULT_MAX_HEAP`] unless `java_opts` sets its own, then `java_opts`.
    pub fn jvm_options(&self) -> Vec<String> {
        let mut opts: Vec<String> = Vec::new();
        if self.deterministic {
            opts.extend(DETERMINISTIC_JAVA_OPTS.map(String::from));
        }
        if !self.java_opts.iter().any(|o| o.starts_with("-Xmx")) {
            opts.push(DEFAULT_MAX_HEAP.into());
        }
        opts.extend(self.java_opts.iter().cloned());
        opts
    }
}

/// Locks a mutex, also after a panic in another holder (the guarded state stays valid: a
/// JVM slot or the call token).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One JVM slot of a pool: (re)started on demand.
#[derive(Debug)]
struct Host {
    config: Arc<Config>,
    jvm: Mutex<Option<Jvm>>,
    /// Held for every call into this JVM (the simulator is not thread-safe).
    calls: Mutex<()>,
    starts: AtomicU64,
}

impl Host {
    /// A fresh connection, starting the JVM if it is not running. Returns the JVM's pid.
    fn connect(&self) -> Result<(Connection, u32)> {
        let mut slot = lock(&self.jvm);
        if let Some(j) = slot.as_mut()
            && !j.is_alive()
        {
            tracing::warn!(
                "ScienceWorld JVM {} died; its output ended with:\n{}",
                j.pid(),
                j.tail()
            );
            *slot = None;
        }
        if slot.is_none() {
            let c = &self.config;
            let opts = c.jvm_options();
            *slot = Some(Jvm::spawn(&c.java, &c.asset_dir, &opts, c.ready_timeout)?);
            self.starts.fetch_add(1, Ordering::Relaxed);
        }
        let jvm = slot.as_ref().expect("started above");
        let conn = Connection::connect(jvm.port(), self.config.call_timeout)?;
        Ok((conn, jvm.pid()))
    }

    /// Kills the JVM `pid` if it is still the current one (it stopped answering).
    fn kill(&self, pid: u32) {
        let mut slot = lock(&self.jvm);
        if slot.as_ref().is_some_and(|j| j.pid() == pid)
            && let Some(mut j) = slot.take()
        {
            j.kill();
        }
    }

    /// Why the JVM `pid` is gone, with its last output, for error messages.
    fn diagnose(&self, pid: u32) -> String {
        let mut slot = lock(&self.jvm);
        match slot.as_mut() {
            Some(j) if j.pid() == pid => {
                if j.is_alive() {
                    "the JVM is still running".into()
                } else {
                    format!(
                        "the JVM (pid {pid}) died; its output ended with:\n{}",
                        j.tail()
                    )
                }
            }
            _ => format!("the JVM (pid {pid}) was replaced"),
        }
    }
}

/// A set of JVMs handing out environments.
#[derive(Clone, Debug)]
pub struct Pool {
    hosts: Arc<Vec<Arc<Host>>>,
    next: Arc<AtomicUsize>,
    splits: Arc<Splits>,
}

impl Pool {
    /// `jvms` JVM slots (started lazily, on the first reset of one of their environments).
    pub fn new(config: Config, jvms: usize) -> Result<Self> {
        if jvms == 0 {
            return Err(EnvError::InvalidArgument(
                "a pool needs at least one JVM".into(),
            ));
        }
        let config = Arc::new(config);
        let hosts = (0..jvms)
            .map(|_| {
                Arc::new(Host {
                    config: Arc::clone(&config),
                    jvm: Mutex::new(None),
                    calls: Mutex::new(()),
                    starts: AtomicU64::new(0),
                })
            })
            .collect();
        Ok(Self {
            hosts: Arc::new(hosts),
            next: Arc::new(AtomicUsize::new(0)),
            splits: Arc::new(Splits::committed()?),
        })
    }

    /// A new environment on the next JVM (round-robin).
    pub fn env(&self) -> ScienceWorld {
        let k = self.next.fetch_add(1, Ordering::Relaxed) % self.hosts.len();
        ScienceWorld {
            host: Arc::clone(&self.hosts[k]),
            splits: Arc::clone(&self.splits),
            session: None,
            episode: None,
        }
    }

    /// How many JVMs have been started so far (restarts included).
    pub fn jvm_starts(&self) -> u64 {
        self.hosts
            .iter()
            .map(|h| h.starts.load(Ordering::Relaxed))
            .sum()
    }

    pub fn splits(&self) -> &Splits {
        &self.splits
    }
}

#[derive(Debug)]
struct Session {
    conn: Connection,
    object: String,
    pid: u32,
}

#[derive(Clone, Debug)]
struct Episode {
    task: Task,
    last_score: i64,
    step_limit: u64,
    /// The JVM went away during this episode: it cannot continue.
    lost: bool,
}

/// One ScienceWorld environment (a `PythonInterface` object in one of the pool's JVMs).
#[derive(Debug)]
pub struct ScienceWorld {
    host: Arc<Host>,
    splits: Arc<Splits>,
    session: Option<Session>,
    episode: Option<Episode>,
}

/// What `ScienceWorld::raw_state` reports.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
pub struct RawState {
    pub score: f64,
    pub completed: bool,
    pub moves: i64,
}

impl ScienceWorld {
    /// A single environment with its own JVM.
    pub fn new(config: Config) -> Result<Self> {
        Ok(Pool::new(config, 1)?.env())
    }

    fn config(&self) -> &Config {
        &self.host.config
    }

    /// The pid of the JVM this environment is connected to, if connected.
    pub fn jvm_pid(&self) -> Option<u32> {
        self.session.as_ref().map(|s| s.pid)
    }

    fn ensure_session(&mut self) -> Result<&mut Session> {
        if self.session.as_ref().is_some_and(|s| s.conn.is_poisoned()) {
            self.session = None;
        }
        if self.session.is_none() {
            let (mut conn, pid) = self.host.connect()?;
            let timeout = self.config().call_timeout;
            let object = conn.construct(INTERFACE_CLASS, timeout)?;
            // (called with the JVM's `calls` lock held, by `with_connection`)
            self.session = Some(Session { conn, object, pid });
        }
        Ok(self.session.as_mut().expect("set above"))
    }

    /// Calls a method of this environment's simulator object, mapping transport failures to
    /// a lost episode.
    fn call(&mut self, method: &str, args: &[Arg<'_>], timeout: Option<Duration>) -> Result<Value> {
        self.with_connection(timeout, |conn, object, t| {
            conn.call(object, method, args, t)
        })
    }

    /// Runs `f` on this environment's connection (and simulator object) with the JVM's call
    /// lock held. Every exchange with the JVM goes through here, so a transport failure
    /// always loses the episode, and a JVM that stopped answering is always killed.
    fn with_connection<T>(
        &mut self,
        timeout: Option<Duration>,
        f: impl FnOnce(&mut Connection, &str, Duration) -> Result<T>,
    ) -> Result<T> {
        let timeout = timeout.unwrap_or(self.config().call_timeout);
        let host = Arc::clone(&self.host);
        let serial = lock(&host.calls);
        let session = self.ensure_session()?;
        let pid = session.pid;
        let reply = f(&mut session.conn, &session.object, timeout);
        drop(serial);
        match reply {
            Ok(v) => Ok(v),
            Err(e @ (EnvError::Crashed(_) | EnvError::Timeout { .. })) => {
                self.session = None;
                if let Some(ep) = self.episode.as_mut() {
                    ep.lost = true;
                }
                if matches!(e, EnvError::Timeout { .. }) {
                    // It stopped answering: nothing on it can be trusted any more.
                    self.host.kill(pid);
                    Err(e)
                } else {
                    Err(EnvError::Crashed(format!(
                        "{e}; {}",
                        self.host.diagnose(pid)
                    )))
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Calls a method returning a `java.util.List` and gives the list's id.
    fn call_for_list(&mut self, method: &str, args: &[Arg<'_>]) -> Result<String> {
        match self.call(method, args, None)? {
            Value::List(id) => Ok(id),
            other => Err(EnvError::Protocol(format!(
                "{method} returned {other:?}, expected a list"
            ))),
        }
    }

    fn call_str(&mut self, method: &str, args: &[Arg<'_>]) -> Result<String> {
        match self.call(method, args, None)? {
            Value::Str(s) => Ok(s),
            other => Err(EnvError::Protocol(format!(
                "{method} returned {other:?}, expected a string"
            ))),
        }
    }

    fn call_list(&mut self, method: &str, args: &[Arg<'_>]) -> Result<Vec<String>> {
        let id = self.call_for_list(method, args)?;
        self.with_connection(None, |conn, _, t| conn.string_list_joined(&id, t))
    }

    /// Score, completion and moves as the simulator reports them.
    pub fn raw_state(&mut self) -> Result<RawState> {
        let score = match self.call("getScore", &[], None)? {
            Value::Double(d) => d,
            other => return Err(EnvError::Protocol(format!("getScore returned {other:?}"))),
        };
        let completed = match self.call("getCompleted", &[], None)? {
            Value::Bool(b) => b,
            other => {
                return Err(EnvError::Protocol(format!(
                    "getCompleted returned {other:?}"
                )));
            }
        };
        let moves = match self.call("getNumMoves", &[], None)? {
            Value::Int(n) => n,
            other => {
                return Err(EnvError::Protocol(format!(
                    "getNumMoves returned {other:?}"
                )));
            }
        };
        Ok(RawState {
            score,
            completed,
            moves,
        })
    }

    /// The simulator's 30 task names.
    pub fn task_names(&mut self) -> Result<Vec<String>> {
        self.call_list("getTaskNames", &[])
    }

    /// Loads `task` without resetting (for split generation and inspection).
    pub fn load(&mut self, task: &Task, gold: bool) -> Result<()> {
        let simplifications = self.config().simplifications.clone();
        let timeout = self.config().load_timeout;
        let variation = i32::try_from(task.index).map_err(|_| {
            EnvError::InvalidArgument(format!("variation {} too large", task.index))
        })?;
        let reply = self.call(
            "load",
            &[
                Arg::Str(&task.name),
                Arg::Int(variation),
                Arg::Str(&simplifications),
                Arg::Bool(gold),
            ],
            Some(timeout),
        )?;
        match reply {
            Value::Str(s) if s.is_empty() => Ok(()),
            Value::Str(msg) => Err(EnvError::InvalidArgument(format!(
                "scienceworld load({task}): {msg}"
            ))),
            other => Err(EnvError::Protocol(format!("load returned {other:?}"))),
        }
    }

    /// `getVariationsTrain/Dev/Test` of the loaded task.
    pub fn variations(&mut self, which: &str) -> Result<Vec<i64>> {
        let method = match which {
            "train" => "getVariationsTrain",
            "dev" => "getVariationsDev",
            "test" => "getVariationsTest",
            other => {
                return Err(EnvError::InvalidArgument(format!(
                    "variation set `{other}`: expected train, dev or test"
                )));
            }
        };
        // A `List<Integer>`: read it element by element.
        let id = self.call_for_list(method, &[])?;
        self.with_connection(None, |conn, _, t| conn.list(&id, t))?
            .into_iter()
            .map(|v| match v {
                Value::Int(v) => Ok(v),
                other => Err(EnvError::Protocol(format!(
                    "{method}: element {other:?}, expected an integer"
                ))),
            })
            .collect()
    }

    /// `getValidActionObjectCombinations` (the list variant the Python wrapper calls every
    /// step), read in three round trips with `String.join` where the wrapper makes one per
    /// action. Kept to cross-check [`Env::valid_actions`], which uses the JSON variant.
    pub fn valid_actions_list(&mut self) -> Result<Vec<String>> {
        self.episode_mut()?;
        self.call_list("getValidActionObjectCombinations", &[])
    }

    fn episode_mut(&mut self) -> Result<&mut Episode> {
        let ep = self
            .episode
            .as_mut()
            .ok_or_else(|| EnvError::State("scienceworld: step before reset".into()))?;
        if ep.lost {
            return Err(EnvError::Crashed(format!(
                "the episode {} was lost with its JVM; reset to start a new one",
                ep.task
            )));
        }
        Ok(ep)
    }

    /// Python's `step`: the action, then score/completion/moves.
    fn do_step(&mut self, action: &str) -> Result<Step> {
        self.episode_mut()?;
        let observation = self.call_str("step", &[Arg::Str(action)])?;
        let raw = self.raw_state()?;
        let ep = self.episode_mut()?;
        let score = (100.0 * raw.score).round_ties_even() as i64;
        let reward = (score - ep.last_score) as f64 / 100.0;
        ep.last_score = score;
        let over = raw.moves > ep.step_limit as i64;
        let done = raw.completed || over || score < 0;
        let invalid = observation.trim_start().starts_with(UNKNOWN_ACTION);
        Ok(Step {
            observation,
            reward,
            done,
            score: score as f64 / 100.0,
            info: StepInfo {
                moves: raw.moves.max(0) as u64,
                invalid,
                truncated: over && !raw.completed && score >= 0,
            },
        })
    }
}

impl Env for ScienceWorld {
    fn name(&self) -> &'static str {
        "scienceworld"
    }

    fn tasks(&self, split: Split) -> Result<Vec<Task>> {
        Ok(self.splits.tasks(split))
    }

    /// ETO's limit of a protocol task ([`splits::eto_step_limit`]); `None` for the tasks the
    /// protocol leaves out.
    fn turn_limit(&self, task: &Task) -> Option<usize> {
        self.splits.step_limit(&task.name).map(|l| l as usize)
    }

    fn reset(&mut self, task: &Task) -> Result<Reset> {
        if !self.splits.tasks.iter().any(|t| t.name == task.name) {
            let names: Vec<&str> = self.splits.tasks.iter().map(|t| t.name.as_str()).collect();
            return Err(EnvError::InvalidArgument(format!(
                "unknown ScienceWorld task `{}`; the tasks are: {}",
                task.name,
                names.join(", ")
            )));
        }
        let variations = self.splits.variation_count(&task.name);
        if task.index >= variations {
            return Err(EnvError::InvalidArgument(format!(
                "ScienceWorld task `{}` has {variations} variations (0–{}); {} is out of range",
                task.name,
                variations.saturating_sub(1),
                task.index
            )));
        }
        let step_limit = self
            .splits
            .step_limit(&task.name)
            .unwrap_or(self.config().default_step_limit);
        // A lost episode is over; a new one may start.
        self.episode = None;
        let gold = self.config().gold_paths;
        self.load(task, gold)?;
        match self.call("reset", &[], None)? {
            Value::Str(_) | Value::Void => {}
            other => return Err(EnvError::Protocol(format!("reset returned {other:?}"))),
        }
        self.episode = Some(Episode {
            task: task.clone(),
            last_score: 0,
            step_limit,
            lost: false,
        });
        let first = self.do_step("look around")?;
        let description = self.call_str("getTaskDescription", &[])?;
        Ok(Reset {
            observation: first.observation,
            description,
        })
    }

    fn step(&mut self, action: &str) -> Result<Step> {
        self.do_step(action)
    }

    /// `getValidActionObjectCombinationsJSON`: one round trip. Inside the JVM it costs about
    /// what the list variant does (20–80 ms per call measured here, depending on the state),
    /// which bounds steps-with-valid-actions per second whatever the client does.
    fn valid_actions(&mut self) -> Result<Option<Vec<String>>> {
        self.episode_mut()?;
        let json = self.call_str("getValidActionObjectCombinationsJSON", &[])?;
        #[derive(Deserialize)]
        struct Valid {
            #[serde(rename = "validActions")]
            valid_actions: Vec<Action>,
        }
        #[derive(Deserialize)]
        struct Action {
            action: String,
        }
        let v: Valid = serde_json::from_str(&json).map_err(|e| {
            EnvError::Protocol(format!(
                "getValidActionObjectCombinationsJSON: invalid JSON: {e}"
            ))
        })?;
        Ok(Some(
            v.valid_actions.into_iter().map(|a| a.action).collect(),
        ))
    }

    fn gold_actions(&mut self) -> Result<Option<Vec<String>>> {
        self.episode_mut()?;
        if !self.config().gold_paths {
            return Err(EnvError::State(
                "scienceworld: gold paths were not generated (Config::gold_paths = false)".into(),
            ));
        }
        Ok(Some(self.call_list("getGoldActionSequence", &[])?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(java_opts: &[&str], deterministic: bool) -> Config {
        Config {
            asset_dir: PathBuf::from("assets"),
            java: PathBuf::from("java"),
            java_opts: java_opts.iter().map(|o| o.to_string()).collect(),
            simplifications: "easy".into(),
            gold_paths: true,
            call_timeout: Duration::from_secs(1),
            load_timeout: Duration::from_secs(1),
            ready_timeout: Duration::from_secs(1),
            default_step_limit: 100,
            deterministic,
        }
    }

    #[test]
    fn the_heap_is_capped_unless_the_user_sets_a_cap() {
        assert_eq!(
            config(&[], true).jvm_options(),
            [
                "-XX:+UnlockExperimentalVMOptions",
                "-XX:hashCode=2",
                "-Xmx1536m"
            ]
        );
        assert_eq!(
            config(&["-Xss4m"], false).jvm_options(),
            ["-Xmx1536m", "-Xss4m"]
        );
        // The user's cap replaces ours (the JVM takes the last -Xmx; ours is not there at all).
        assert_eq!(config(&["-Xmx4g"], false).jvm_options(), ["-Xmx4g"]);
    }
}
