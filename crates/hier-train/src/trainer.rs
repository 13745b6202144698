//! The one skeleton every trainer runs on: config pinning, resumption, the metrics file, the
//! progress bar, checkpoint cadence, early stops and a per-step hook.
//!
//! A trainer opens a [`TrainLoop`], takes what it resumes from, and drives the loop itself —
//! the body (what one step computes) is the only part that differs between trainers:
//!
//! ```text
//! let mut run = TrainLoop::open(out, spec, cfg, opts)?;      // pins the config, reads the checkpoint
//! let extra = match run.take_resumed() { Some(x) => /* load parts from run.checkpoint_dir() */,
//!                                        None => /* fresh init */ };
//! while let Some(step) = run.next_step() {                   // 0-based index of the step to do
//!     /* compute, update */
//!     run.log(json!({"loss": …}))?;                          // optional; "step" is added
//!     run.end_step(|| extra.clone(), |dir| save_parts(dir))?; // checkpoints when due
//! }
//! if run.finish() { /* all steps done: write the final artefacts */ }
//! ```
//!
//! Invariants: `<out>/<pin file>` holds the config the directory was started with (another
//! config is refused); `<out>/checkpoint/` is replaced whole ([`swap_in_dir`]; a swap killed
//! half-way is undone on open by [`recover_swapped_dir`]) and its
//! `state.json` holds `{step, config, extra}`; `metrics.jsonl` never holds a line of a step
//! after the checkpoint a run resumes from; a stop on request (`stop_after`, or the hook)
//! happens only right after a checkpoint.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::runlog::{
    Recovery, RunOptions, append_line, keep_metrics_up_to, pin_config, progress_bar,
    recover_swapped_dir, resume_state, swap_in_dir,
};

/// What a step hook sees after each step (before the checkpoint decision).
#[derive(Clone, Copy, Debug)]
pub struct StepEvent<'a> {
    /// The trainer's label (`sft sys1`, `online rl sys2_on`, …).
    pub what: &'a str,
    /// Steps done, this one included.
    pub step: usize,
    /// Steps of the whole run.
    pub total: usize,
    /// The metric line logged at this step, if any.
    pub metrics: Option<&'a serde_json::Value>,
}

/// Called after every step of every trainer; `ControlFlow::Break` stops the run after
/// checkpointing this step (as `stop_after` does) — for memory watchdogs, time budgets, tests.
pub type StepHook = Arc<dyn Fn(StepEvent<'_>) -> ControlFlow<()> + Send + Sync>;

/// How a trainer lays out its run.
#[derive(Clone, Debug)]
pub struct LoopSpec {
    /// Label of the progress bar, the hook's events and errors (`sft sys1`).
    pub what: String,
    /// The file in `out` that pins the config (`sft.json`, `pretrain.toml`).
    pub pin_file: &'static str,
    /// The config as pinned (`serde_json::to_string_pretty(cfg)`, or TOML).
    pub pinned: String,
    /// Steps (iterations, rounds) of the whole run; positive.
    pub total: usize,
    /// Checkpoint after every this many steps (and after the last, and at a stop); positive.
    pub checkpoint_every: usize,
}

impl LoopSpec {
    /// A run labelled `what` of `total` steps whose config is pinned as pretty JSON in
    /// `pin_file`.
    pub fn json<C: Serialize>(
        what: String,
        pin_file: &'static str,
        config: &C,
        total: usize,
        checkpoint_every: usize,
    ) -> Self {
        Self {
            what,
            pin_file,
            pinned: serde_json::to_string_pretty(config).expect("a config serialises"),
            total,
            checkpoint_every,
        }
    }
}

/// The resumable state every checkpoint holds: steps done, the config that wrote it, what
/// the trainer needs beyond its tensors (`extra`: a replay buffer, bank priorities, `()`), and
/// the seconds the run had spent when it wrote it, over all its invocations (absent in
/// checkpoints written before it was kept: 0).
#[derive(Debug, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainState<C, X> {
    step: usize,
    config: C,
    extra: X,
    #[serde(default)]
    seconds: f64,
}

/// One trainer run in `out` (see the module docs).
pub struct TrainLoop<C, X = ()> {
    spec: LoopSpec,
    config: C,
    ckpt: PathBuf,
    metrics: PathBuf,
    hook: Option<StepHook>,
    memory_limit_mib: Option<u64>,
    stop_after: Option<usize>,
    bar: indicatif::ProgressBar,
    start: usize,
    step: usize,
    stopped: bool,
    resumed: Option<X>,
    last_line: Option<serde_json::Value>,
    nonfinite: std::collections::BTreeMap<String, NonFiniteTally>,
    max_nonfinite: u64,
    /// The device whose random source [`TrainLoop::next_step`] seeds, and the run's seed.
    backend_seed: Option<(hier_backbone::burn::tensor::Device, u64)>,
    /// Seconds spent by the invocations before this one, up to the checkpoint it resumed.
    earlier_seconds: f64,
    opened: std::time::Instant,
}

/// The backend seed of step `step` of a run seeded with `seed` (a SplitMix64 finaliser of
/// the pair, so neighbouring steps and seeds get unrelated streams).
pub fn step_seed(seed: u64, step: usize) -> u64 {
    let mut z = seed
        ^ (step as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Non-finite elements dropped from one quantity.
#[derive(Clone, Copy, Debug, Default)]
struct NonFiniteTally {
    since_log: u64,
    total: u64,
}

impl<C, X> TrainLoop<C, X>
where
    C: Serialize + DeserializeOwned + PartialEq + Clone,
    X: Serialize + DeserializeOwned,
{
    /// Creates `out`, pins the config (refusing a directory of another config), reads the
    /// checkpoint written by this config if there is one, and trims `metrics.jsonl` to it.
    ///
    /// A resumed run writes the seconds its checkpoint had cost as `<out>/`
    /// [`EARLIER_SECONDS`](crate::stages::EARLIER_SECONDS) (a fresh one removes that file), so
    /// that a stage trained in pieces stamps what all its pieces cost, as an evaluation played
    /// in pieces does (the work of a killed invocation after its last checkpoint is not counted:
    /// it is done again).
    pub fn open(out: &Path, spec: LoopSpec, config: &C, opts: &RunOptions) -> Result<Self> {
        if spec.total == 0 || spec.checkpoint_every == 0 {
            return Err(Error::Invalid(format!(
                "{}: the number of steps and the checkpoint interval must be positive",
                spec.what
            )));
        }
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        pin_config(&out.join(spec.pin_file), &spec.pinned)?;
        let ckpt = out.join("checkpoint");
        if recover_swapped_dir(&ckpt).map_err(|e| Error::io(&ckpt, e))? == Recovery::RestoredOld {
            tracing::warn!(
                "{}: a checkpoint swap was interrupted; resuming from the previous checkpoint, \
                 restored from {}",
                spec.what,
                ckpt.with_extension("old").display()
            );
        }
        let state: Option<TrainState<C, X>> =
            resume_state(&ckpt.join("state.json"), config, |s: &TrainState<C, X>| {
                &s.config
            })?;
        let earlier_seconds = state.as_ref().map_or(0.0, |s| s.seconds);
        let (start, resumed) = match state {
            Some(s) if s.step > spec.total => {
                return Err(Error::checkpoint(
                    ckpt.join("state.json"),
                    format!("{} steps done, the run has {}", s.step, spec.total),
                ));
            }
            Some(s) => (s.step, Some(s.extra)),
            None => (0, None),
        };
        crate::stages::write_earlier_seconds(out, earlier_seconds)?;
        let metrics = out.join("metrics.jsonl");
        keep_metrics_up_to(&metrics, start).map_err(|e| Error::io(&metrics, e))?;
        // The steps done before a resume count in the position, not in the rate.
        let bar = progress_bar(opts.progress, start, spec.total, &spec.what);
        Ok(Self {
            config: config.clone(),
            ckpt,
            metrics,
            hook: opts.on_step.clone(),
            memory_limit_mib: opts.memory_limit_mib,
            stop_after: opts.stop_after,
            bar,
            start,
            step: start,
            stopped: false,
            resumed,
            last_line: None,
            nonfinite: std::collections::BTreeMap::new(),
            max_nonfinite: opts.max_nonfinite,
            backend_seed: None,
            earlier_seconds,
            opened: std::time::Instant::now(),
            spec,
        })
    }

    /// What the checkpoint held beyond the tensors (`None`: a fresh run). The tensors and
    /// optimiser states are in [`TrainLoop::checkpoint_dir`].
    pub fn take_resumed(&mut self) -> Option<X> {
        self.resumed.take()
    }

    /// `<out>/checkpoint`, where [`TrainLoop::end_step`]'s `save` wrote the trainer's parts.
    pub fn checkpoint_dir(&self) -> &Path {
        &self.ckpt
    }

    /// Steps done when this invocation started (0 unless resumed).
    pub fn start(&self) -> usize {
        self.start
    }

    /// Steps done so far.
    pub fn steps_done(&self) -> usize {
        self.step
    }

    /// Seeds `device`'s random source before every step from `seed` and the step's index, so
    /// that what a step draws there (LoRA dropout masks) is the same in every run and in a run
    /// resumed at that step. On the CPU backend that source is one per process: two trainers
    /// stepping at once in one process (the pipelines run one at a time) would share it.
    pub fn seed_backend_per_step(
        mut self,
        device: hier_backbone::burn::tensor::Device,
        seed: u64,
    ) -> Self {
        self.backend_seed = Some((device, seed));
        self
    }

    /// The 0-based index of the next step, or `None` when the run is complete or stopped.
    pub fn next_step(&mut self) -> Option<usize> {
        let next = (!self.stopped && self.step < self.spec.total).then_some(self.step)?;
        if let Some((device, seed)) = &self.backend_seed {
            device.seed(step_seed(*seed, next));
        }
        Some(next)
    }

    /// Whether the step being done (0-based `step`) is the last of a logging window of
    /// `every` steps (or the run's last step).
    pub fn logs_at(&self, step: usize, every: usize) -> bool {
        (step + 1).is_multiple_of(every.max(1)) || step + 1 == self.spec.total
    }

    /// Appends `line` (a JSON object) to `metrics.jsonl` with `"step"` set to the steps done
    /// once this step ends.
    ///
    /// Every quantity counted by [`TrainLoop::count_nonfinite`] so far appears as
    /// `"nonfinite": {quantity: elements dropped since the previous line}`.
    pub fn log(&mut self, mut line: serde_json::Value) -> Result<()> {
        line["step"] = (self.step + 1).into();
        if !self.nonfinite.is_empty() {
            let mut counts = serde_json::Map::new();
            for (quantity, tally) in &mut self.nonfinite {
                counts.insert(
                    quantity.clone(),
                    std::mem::take(&mut tally.since_log).into(),
                );
            }
            line["nonfinite"] = counts.into();
        }
        append_line(&self.metrics, &line.to_string()).map_err(|e| Error::io(&self.metrics, e))?;
        self.last_line = Some(line);
        Ok(())
    }

    /// Counts `count` non-finite elements that a loss dropped from `quantity` (its `nonfinite`
    /// component) at the current step. The counts go into the metric lines ([`TrainLoop::log`]);
    /// once this invocation's total for `quantity` exceeds [`RunOptions::max_nonfinite`]
    /// (default 0: any), the run stops with [`Error::NonFinite`] naming the step and the
    /// quantity, without checkpointing the suspect step.
    pub fn count_nonfinite(&mut self, quantity: &str, count: f32) -> Result<()> {
        let n = if count.is_finite() && count >= 0.0 {
            count.round() as u64
        } else {
            u64::MAX // a count that is itself not a number: treat as over any limit
        };
        let tally = self.nonfinite.entry(quantity.to_owned()).or_default();
        tally.since_log = tally.since_log.saturating_add(n);
        tally.total = tally.total.saturating_add(n);
        if tally.total > self.max_nonfinite {
            return Err(Error::NonFinite {
                what: self.spec.what.clone(),
                step: self.step + 1,
                quantity: quantity.to_owned(),
                count: tally.total,
                limit: self.max_nonfinite,
            });
        }
        Ok(())
    }

    /// Sets the progress bar's message.
    pub fn message(&self, msg: impl Into<std::borrow::Cow<'static, str>>) {
        self.bar.set_message(msg);
    }

    /// Ends the current step: counts it, calls the hook, and — when a checkpoint is due (every
    /// `checkpoint_every` steps, after the last one, or before a stop) — fills a fresh
    /// checkpoint directory with `save` and `{step, config, extra()}` and swaps it in.
    /// Returns whether the run stops here on request.
    pub fn end_step<E>(
        &mut self,
        extra: impl FnOnce() -> X,
        save: impl FnOnce(&Path) -> std::result::Result<(), E>,
    ) -> std::result::Result<bool, E>
    where
        E: From<Error> + From<std::io::Error>,
    {
        self.step += 1;
        self.bar.inc(1);
        let line = self.last_line.take();
        let hook_stop = self.hook.as_ref().is_some_and(|h| {
            h(StepEvent {
                what: &self.spec.what,
                step: self.step,
                total: self.spec.total,
                metrics: line.as_ref(),
            })
            .is_break()
        });
        let memory = crate::memory::check_limit(self.memory_limit_mib, || {
            format!("{} at step {}", self.spec.what, self.step)
        });
        let stop = hook_stop || self.stop_after.is_some_and(|s| self.step >= s) || memory.is_err();
        let due =
            self.step.is_multiple_of(self.spec.checkpoint_every) || self.step == self.spec.total;
        if due || stop {
            let state = TrainState {
                step: self.step,
                config: &self.config,
                extra: extra(),
                seconds: self.earlier_seconds + self.opened.elapsed().as_secs_f64(),
            };
            let json = serde_json::to_string(&state).expect("a train state serialises");
            swap_in_dir(&self.ckpt, |dir| -> std::result::Result<(), E> {
                save(dir)?;
                hier_backbone::write_atomic(&dir.join("state.json"), json.as_bytes())
                    .map_err(Error::from)?;
                Ok(())
            })?;
        }
        memory?;
        self.stopped = stop && self.step < self.spec.total;
        Ok(self.stopped)
    }

    /// Clears the bar; `true` when every step is done (write the final artefacts then),
    /// `false` when the run stopped on request.
    pub fn finish(self) -> bool {
        self.bar.finish_and_clear();
        self.step == self.spec.total
    }
}

/// Saves an optimiser's state as `<dir>/<file>`.
pub fn save_optimizer(
    optim: &hier_backbone::burn::optim::ModuleOptimizer,
    dir: &Path,
    file: &str,
) -> Result<()> {
    let p = dir.join(file);
    optim
        .save(&p)
        .map_err(|e| Error::checkpoint(&p, format!("{e:?}")))
}

/// Loads the optimiser state saved by [`save_optimizer`] into `optim`.
pub fn load_optimizer(
    optim: hier_backbone::burn::optim::ModuleOptimizer,
    dir: &Path,
    file: &str,
) -> Result<hier_backbone::burn::optim::ModuleOptimizer> {
    let p = dir.join(file);
    optim
        .load(&p)
        .map_err(|e| Error::checkpoint(&p, format!("{e:?}")))
}

/// The file every single-optimiser trainer keeps its optimiser state in.
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn spec(total: usize, every: usize) -> LoopSpec {
        LoopSpec {
            what: "test".into(),
            pin_file: "test.json",
            pinned: "{\"a\": 1}".into(),
            total,
            checkpoint_every: every,
        }
    }

    /// A toy trainer: sums the step indices, checkpointing the running sum as `extra`.
    fn run(out: &Path, opts: &RunOptions, total: usize) -> (usize, bool, Vec<usize>) {
        let mut run: TrainLoop<u32, usize> =
            TrainLoop::open(out, spec(total, 3), &1, opts).unwrap();
        let mut sum = run.take_resumed().unwrap_or(0);
        let mut saved = Vec::new();
        while let Some(step) = run.next_step() {
            sum += step;
            if run.logs_at(step, 2) {
                run.log(serde_json::json!({"sum": sum})).unwrap();
            }
            let s = sum;
            run.end_step(
                || s,
                |_dir| -> Result<()> {
                    saved.push(step + 1);
                    Ok(())
                },
            )
            .unwrap();
        }
        (sum, run.finish(), saved)
    }

    #[test]
    fn a_stopped_run_resumes_to_the_uninterrupted_result() {
        let tmp = tempfile::tempdir().unwrap();
        let (full, done, saved) = run(&tmp.path().join("a"), &RunOptions::default(), 7);
        assert_eq!((full, done), ((0..7).sum(), true));
        assert_eq!(saved, vec![3, 6, 7], "every 3 steps and after the last");

        let b = tmp.path().join("b");
        let stop = RunOptions {
            stop_after: Some(4),
            ..Default::default()
        };
        let (part, done, saved) = run(&b, &stop, 7);
        assert_eq!((part, done), ((0..4).sum(), false));
        assert_eq!(saved, vec![3, 4], "a stop checkpoints first");
        // A metric line past the checkpoint (a crash after logging) is dropped on resume.
        append_line(&b.join("metrics.jsonl"), r#"{"step": 5, "sum": -1}"#).unwrap();
        let (resumed, done, _) = run(&b, &RunOptions::default(), 7);
        assert_eq!((resumed, done), (full, true));
        let steps: Vec<u64> = std::fs::read_to_string(b.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(steps, vec![2, 4, 6, 7]);
    }

    #[test]
    fn a_resumed_run_writes_the_seconds_its_checkpoint_cost() {
        let tmp = tempfile::tempdir().unwrap();
        let earlier = tmp.path().join(crate::stages::EARLIER_SECONDS);
        // Each step of the first piece takes ≥ 20 ms (the hook sleeps); it stops at step 4.
        let slow = RunOptions {
            stop_after: Some(4),
            on_step: Some(Arc::new(|_: StepEvent<'_>| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                ControlFlow::Continue(())
            })),
            ..Default::default()
        };
        run(tmp.path(), &slow, 7);
        assert!(!earlier.exists(), "a fresh run has no earlier pieces");
        let state: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("checkpoint/state.json")).unwrap(),
        )
        .unwrap();
        let at_stop = state["seconds"].as_f64().unwrap();
        assert!(
            at_stop >= 0.08,
            "4 steps of ≥ 20 ms, checkpoint says {at_stop}"
        );
        // The second piece starts from that checkpoint and says what it cost.
        let (sum, done, _) = run(tmp.path(), &RunOptions::default(), 7);
        assert_eq!((sum, done), ((0..7).sum(), true));
        let written: f64 = std::fs::read_to_string(&earlier)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(written, at_stop);
        // With the checkpoint gone, a run starts afresh there and clears the file.
        std::fs::remove_dir_all(tmp.path().join("checkpoint")).unwrap();
        run(tmp.path(), &RunOptions::default(), 7);
        assert!(!earlier.exists());
    }

    #[test]
    fn the_hook_sees_every_step_and_can_stop_the_run() {
        let tmp = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let opts = RunOptions {
            on_step: Some(Arc::new(move |e: StepEvent<'_>| {
                log.lock().unwrap().push((e.step, e.metrics.is_some()));
                if e.step == 5 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })),
            ..Default::default()
        };
        let (_, done, saved) = run(tmp.path(), &opts, 7);
        assert!(!done);
        assert_eq!(saved, vec![3, 5]);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(1, false), (2, true), (3, false), (4, true), (5, false)]
        );
    }

    #[test]
    fn a_checkpoint_of_another_config_or_past_the_end_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = RunOptions::default();
        run(tmp.path(), &opts, 7);
        let other: Result<TrainLoop<u32, usize>> =
            TrainLoop::open(tmp.path(), spec(7, 3), &2, &opts);
        assert!(matches!(other, Err(Error::Checkpoint { .. })));
        let mut shorter = spec(5, 3);
        shorter.pinned = "{\"a\": 1}".into();
        let past: Result<TrainLoop<u32, usize>> = TrainLoop::open(tmp.path(), shorter, &1, &opts);
        match past {
            Err(Error::Checkpoint { msg, .. }) => assert!(msg.contains("7 steps done"), "{msg}"),
            _ => panic!("a checkpoint past the end must be refused"),
        }
    }

    #[test]
    fn a_swap_killed_between_its_renames_resumes_from_the_previous_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let stop = RunOptions {
            stop_after: Some(4),
            ..Default::default()
        };
        run(tmp.path(), &stop, 7);
        // What a kill between `checkpoint → checkpoint.old` and `checkpoint.tmp → checkpoint`
        // leaves: the step-4 checkpoint as `.old`, and a newer, complete `.tmp`.
        let ckpt = tmp.path().join("checkpoint");
        std::fs::rename(&ckpt, ckpt.with_extension("old")).unwrap();
        std::fs::create_dir(ckpt.with_extension("tmp")).unwrap();
        let mut reopened: TrainLoop<u32, usize> =
            TrainLoop::open(tmp.path(), spec(7, 3), &1, &RunOptions::default()).unwrap();
        assert_eq!(reopened.start(), 4);
        assert_eq!(reopened.take_resumed(), Some((0..4).sum()));
        assert!(!ckpt.with_extension("old").exists() && !ckpt.with_extension("tmp").exists());
    }

    #[test]
    fn a_run_past_its_memory_limit_checkpoints_then_stops_with_an_error() {
        if crate::memory::resident_mib().is_none() {
            return; // the platform reports no resident memory: nothing to limit
        }
        let tmp = tempfile::tempdir().unwrap();
        let tight = RunOptions {
            memory_limit_mib: Some(1),
            ..Default::default()
        };
        let mut run: TrainLoop<u32, usize> =
            TrainLoop::open(tmp.path(), spec(7, 3), &1, &tight).unwrap();
        assert_eq!(run.next_step(), Some(0));
        let err = run
            .end_step(|| 0, |_| -> Result<()> { Ok(()) })
            .unwrap_err();
        match err {
            Error::MemoryLimit {
                what, limit_mib, ..
            } => {
                assert_eq!((what.as_str(), limit_mib), ("test at step 1", 1))
            }
            other => panic!("expected a memory-limit error, got {other}"),
        }
        // The step was checkpointed first, so the run resumes there under a sane limit.
        let reopened: TrainLoop<u32, usize> =
            TrainLoop::open(tmp.path(), spec(7, 3), &1, &RunOptions::default()).unwrap();
        assert_eq!(reopened.start(), 1);
    }

    #[test]
    fn non_finite_counts_are_logged_and_stop_the_run_past_the_allowance() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = RunOptions {
            max_nonfinite: 2,
            ..Default::default()
        };
        let mut run: TrainLoop<u32, usize> =
            TrainLoop::open(tmp.path(), spec(7, 3), &1, &opts).unwrap();
        run.next_step();
        run.count_nonfinite("td", 2.0).unwrap();
        run.count_nonfinite("actor", 0.0).unwrap();
        run.log(serde_json::json!({})).unwrap();
        run.end_step(|| 0, |_| -> Result<()> { Ok(()) }).unwrap();
        run.next_step();
        run.count_nonfinite("actor", 0.0).unwrap();
        run.log(serde_json::json!({})).unwrap();
        let lines: Vec<serde_json::Value> =
            std::fs::read_to_string(tmp.path().join("metrics.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        assert_eq!(
            lines[0]["nonfinite"],
            serde_json::json!({"actor": 0, "td": 2})
        );
        assert_eq!(
            lines[1]["nonfinite"],
            serde_json::json!({"actor": 0, "td": 0})
        );
        // A third td element passes the allowance of 2: the error names step and quantity.
        match run.count_nonfinite("td", 1.0) {
            Err(Error::NonFinite {
                step,
                quantity,
                count,
                limit,
                ..
            }) => assert_eq!((step, quantity.as_str(), count, limit), (2, "td", 3, 2)),
            other => panic!("expected a non-finite stop, got {other:?}"),
        }
        assert!(
            run.count_nonfinite("kl", f32::NAN).is_err(),
            "a NaN count is over any limit"
        );
    }
}
