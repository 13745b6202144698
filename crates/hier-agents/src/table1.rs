//! `reproduce table1`: the whole Multi² pipeline as cached stages — expert data per
//! environment, the backbone (a tiny one pre-trained from scratch on that text, or an HF
//! checkpoint), System-1 SFT, System-2 offline RL, System-2 online RL, the comparison methods
//! (flat SFT; Glider's shared-adapter hierarchy), evaluation on every split over seeds — then
//! `table1.{md,json,csv}`.
//!
//! Every stage runs in `<out>/stages/<name>-<hash>/`, where the hash covers the stage's own
//! settings and the hashes of the stages it reads, and is marked done by a `DONE` file written
//! last. A second run skips done stages; a stage interrupted half-way resumes from its own
//! checkpoint (the trainers are resumable). Changing a setting re-runs exactly the stages that
//! depend on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::tensor::Device;
use hier_backbone::{CausalLm, SamplingConfig, Tokenizer};
use hier_data::batch::{executor_prompt, flat_prompt, planner_prompt};
use hier_data::io::read_all;
use hier_data::schema::{FlatTrajectory, Sys1Record, Sys2Transition};
use hier_envs::{Env, Split, Task};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::demos::{BuildOptions, build_dataset};
use crate::eval::{EpisodeResult, Summary, expert_lengths, spread, summarise};
use crate::flat::rollout_flat;
use crate::multi2::{BackbonePolicy, RolloutConfig, rollout};
use crate::offline_rl::{OfflineRlConfig, RunOptions, train_offline_from};
use crate::online_rl::{CurvePoint, OnlineRlConfig, train_online};
use crate::pretrain::{PretrainConfig, PretrainOptions, pretrain};
use crate::roles::{executor_examples, executor_rl_examples, flat_examples, planner_examples};
use crate::sft::{SftConfig, SftOptions, train_adapter};
use crate::sys2::Heads;

/// Errors of the pipeline (each names its stage).
pub type Result<T> = std::result::Result<T, String>;

/// Where the backbone comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BackboneSpec {
    /// Pre-train the tiny model from scratch on the environments' text.
    Pretrain {
        model: crate::pretrain::TinyModelConfig,
        train: crate::pretrain::TrainConfig,
    },
    /// An HF checkpoint directory (`config.json`, safetensors, `tokenizer.json`).
    Hf { path: PathBuf },
}

/// Expert data per environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// Training tasks played by the expert, spread over the train split.
    pub train_episodes: usize,
    /// Tokens per example at most (over-long prompts lose their middle: `roles::fit_prompt`).
    pub max_len: usize,
}

/// LoRA SFT settings shared by System 1, flat SFT and Glider's SFT phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftSpec {
    pub r: usize,
    pub alpha: f64,
    pub target_modules: Vec<String>,
    pub steps: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub min_lr: f64,
    pub warmup_steps: usize,
}

/// Evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSpec {
    /// Tasks per split at most, spread over the split.
    pub tasks_per_split: usize,
    /// One full pass over the tasks per seed.
    pub seeds: Vec<u64>,
    /// Environments stepped together.
    pub parallel: usize,
    pub rollout: RolloutConfig,
    /// Decoding: System 1 greedy; System 2 and the flat policy sampled.
    pub planner_max_tokens: usize,
    pub executor_max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
}

/// A `reproduce table1` profile (`configs/table1/<name>.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub seed: u64,
    pub envs: Vec<String>,
    /// `multi2`, `flat-sft`, `glider`.
    pub methods: Vec<String>,
    pub backbone: BackboneSpec,
    pub data: DataSpec,
    pub sft: SftSpec,
    pub offline: OfflineRlConfig,
    pub online: OnlineRlConfig,
    pub eval: EvalSpec,
}

/// The methods this pipeline runs.
pub const METHODS: [&str; 3] = ["multi2", "flat-sft", "glider"];
/// The environments it knows.
pub const ENVS: [&str; 3] = ["textcraft", "scienceworld", "alfworld"];

impl Profile {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let p: Profile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        p.check().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(p)
    }

    pub fn check(&self) -> Result<()> {
        if let Some(e) = self.envs.iter().find(|e| !ENVS.contains(&e.as_str())) {
            return Err(format!(
                "unknown environment `{e}`: expected one of {ENVS:?}"
            ));
        }
        if let Some(m) = self.methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
            return Err(format!("unknown method `{m}`: expected one of {METHODS:?}"));
        }
        if self.envs.is_empty() || self.methods.is_empty() {
            return Err("no environments or no methods".into());
        }
        if self.eval.seeds.is_empty() || self.eval.parallel == 0 || self.eval.tasks_per_split == 0 {
            return Err("eval needs seeds, parallel > 0 and tasks_per_split > 0".into());
        }
        Ok(())
    }
}

/// Options of a run that do not change its results.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub out: PathBuf,
    /// An autodiff device.
    pub device: Device,
    pub progress: bool,
    /// Return after this many stages have *run* (cached ones do not count) — to test resuming.
    pub stop_after_stages: Option<usize>,
}

/// What happened to one stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    pub name: String,
    pub dir: String,
    pub cached: bool,
    /// Seconds spent in this invocation (≈0 when reused).
    pub seconds: f64,
    /// Seconds the stage took when it ran (from its `DONE` stamp; `None` for stamps written
    /// before the time was recorded).
    pub ran_seconds: Option<f64>,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub stages: Vec<StageRecord>,
    /// False when the run stopped early (`stop_after_stages`).
    pub complete: bool,
}

/// One cell of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub method: String,
    pub env: String,
    pub split: Split,
    pub summary: Summary,
}

struct Stages<'a> {
    cfg: &'a RunConfig,
    records: Vec<StageRecord>,
    ran: usize,
}

/// The stage stopped the run early (not an error).
const STOPPED: &str = "\u{0}stopped";

impl Stages<'_> {
    fn dir(&self, name: &str, key: &serde_json::Value) -> PathBuf {
        let mut h = Sha256::new();
        h.update(name.as_bytes());
        h.update(key.to_string().as_bytes());
        let hex: String = h
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        self.cfg.out.join("stages").join(format!("{name}-{hex}"))
    }

    /// Runs `work` in the stage's directory unless it is done; returns the directory.
    fn run(
        &mut self,
        name: &str,
        key: serde_json::Value,
        work: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<PathBuf> {
        let dir = self.dir(name, &key);
        let done = dir.join("DONE");
        let t = Instant::now();
        let cached = done.exists();
        if !cached {
            if self.cfg.stop_after_stages.is_some_and(|k| self.ran >= k) {
                return Err(STOPPED.into());
            }
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            tracing::info!("stage {name}: running in {}", dir.display());
            work(&dir).map_err(|e| format!("stage {name}: {e}"))?;
            let stamp = serde_json::json!({"key": key, "seconds": t.elapsed().as_secs_f64()});
            let stamp = serde_json::to_string_pretty(&stamp).expect("serialises");
            hier_backbone::write_atomic(&done, stamp.as_bytes()).map_err(|e| e.to_string())?;
            self.ran += 1;
        } else {
            tracing::info!("stage {name}: done before ({})", dir.display());
        }
        let ran_seconds = std::fs::read_to_string(&done)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["seconds"].as_f64());
        self.records.push(StageRecord {
            name: name.into(),
            ran_seconds,
            dir: dir
                .strip_prefix(&self.cfg.out)
                .unwrap_or(&dir)
                .display()
                .to_string(),
            cached,
            seconds: t.elapsed().as_secs_f64(),
        });
        Ok(dir)
    }

    /// The key of a stage that reads `dir` (a done stage): its name.
    fn upstream(dir: &Path) -> String {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Opens an environment by name.
pub fn open_env(name: &str) -> Result<Box<dyn Env>> {
    use hier_envs::alfworld::AlfWorld;
    use hier_envs::assets::Assets;
    use hier_envs::scienceworld::{Config, ScienceWorld};
    use hier_envs::textcraft::TextCraft;
    Ok(match name {
        "textcraft" => Box::new(TextCraft::from_assets().map_err(|e| e.to_string())?),
        "scienceworld" => Box::new(
            ScienceWorld::new(Config::from_assets().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?,
        ),
        "alfworld" => Box::new(
            AlfWorld::locate(&Assets::locate().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?,
        ),
        other => {
            return Err(format!(
                "unknown environment `{other}`: expected one of {ENVS:?}"
            ));
        }
    })
}

fn open_envs(name: &str, n: usize) -> Result<Vec<Box<dyn Env>>> {
    (0..n).map(|_| open_env(name)).collect()
}

/// The splits an environment evaluates on (TextCraft has no OOD split).
fn eval_splits(env: &dyn Env) -> Result<Vec<(Split, Vec<Task>)>> {
    let mut out = Vec::new();
    for s in [Split::Id, Split::Ood] {
        let tasks = env.tasks(s).map_err(|e| e.to_string())?;
        if !tasks.is_empty() {
            out.push((s, tasks));
        }
    }
    Ok(out)
}

/// One split's evaluation tasks and their experts' path lengths.
type SplitTasks = (Split, Vec<Task>, Vec<Option<usize>>);

struct EnvData {
    sys1: Vec<Sys1Record>,
    sys2: Vec<Sys2Transition>,
    flat: Vec<FlatTrajectory>,
}

fn read_data(dir: &Path) -> Result<EnvData> {
    let r = |e: hier_data::DataError| e.to_string();
    Ok(EnvData {
        sys1: read_all(dir.join("sys1.pcd")).map_err(r)?,
        sys2: read_all(dir.join("sys2.pcd")).map_err(r)?,
        flat: read_all(dir.join("flat.pcd")).map_err(r)?,
    })
}

/// The pre-training corpus: every prompt with its target, one document each.
fn corpus_text(data: &[EnvData]) -> String {
    let mut out = String::new();
    let mut doc = |s: String| {
        out.push_str(s.trim_end());
        out.push_str("\n\n");
    };
    for d in data {
        for r in &d.sys1 {
            doc(format!(
                "{}{}",
                planner_prompt(&r.task, &r.group_action, &r.observation),
                r.subgoal
            ));
        }
        for t in &d.sys2 {
            doc(format!(
                "{}{}",
                executor_prompt(&t.subgoal, &t.observation),
                t.target()
            ));
        }
        for f in &d.flat {
            for (k, a) in f.actions.iter().enumerate() {
                doc(format!(
                    "{}{a}",
                    flat_prompt(&f.task, &f.actions[..k], &f.observations[k])
                ));
            }
        }
    }
    out
}

fn sft_config(spec: &SftSpec, adapter: &str, seed: u64) -> SftConfig {
    SftConfig {
        adapter: adapter.into(),
        r: spec.r,
        alpha: spec.alpha,
        target_modules: spec.target_modules.clone(),
        steps: spec.steps,
        batch_size: spec.batch_size,
        lr: spec.lr,
        min_lr: spec.min_lr,
        warmup_steps: spec.warmup_steps,
        weight_decay: 0.01,
        grad_clip: 1.0,
        seed,
        checkpoint_every: spec.steps.div_ceil(4).max(1),
        log_every: (spec.steps / 20).max(1),
    }
}

/// Runs the pipeline of `profile` and writes `<out>/table1.{md,json,csv}`.
pub fn run(profile: &Profile, cfg: &RunConfig) -> Result<Report> {
    profile.check()?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| format!("{}: {e}", cfg.out.display()))?;
    let resolved = toml::to_string(profile).map_err(|e| e.to_string())?;
    hier_backbone::write_atomic(&cfg.out.join("profile.resolved.toml"), resolved.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut stages = Stages {
        cfg,
        records: Vec::new(),
        ran: 0,
    };
    match run_stages(profile, cfg, &mut stages) {
        Ok(()) => Ok(Report {
            stages: stages.records,
            complete: true,
        }),
        Err(e) if e == STOPPED => Ok(Report {
            stages: stages.records,
            complete: false,
        }),
        Err(e) => Err(e),
    }
}

fn run_stages(profile: &Profile, cfg: &RunConfig, st: &mut Stages<'_>) -> Result<()> {
    let started = Instant::now();
    // 1. Expert data and evaluation tasks per environment.
    let mut data_dirs = BTreeMap::new();
    let mut task_dirs = BTreeMap::new();
    for env_name in &profile.envs {
        let key = serde_json::json!({"env": env_name, "data": profile.data, "seed": profile.seed});
        let dir = st.run(&format!("data-{env_name}"), key, |dir| {
            let mut env = open_env(env_name)?;
            let train = env.tasks(Split::Train).map_err(|e| e.to_string())?;
            let tasks = spread(&train, profile.data.train_episodes);
            let opts = BuildOptions {
                seed: profile.seed,
                progress: cfg.progress,
                ..BuildOptions::default()
            };
            build_dataset(env.as_mut(), &tasks, "train", dir, &opts).map_err(|e| e.to_string())?;
            Ok(())
        })?;
        data_dirs.insert(env_name.clone(), dir);
        let key =
            serde_json::json!({"env": env_name, "tasks_per_split": profile.eval.tasks_per_split});
        let dir = st.run(&format!("tasks-{env_name}"), key, |dir| {
            let mut env = open_env(env_name)?;
            let mut all = Vec::new();
            for (split, tasks) in eval_splits(env.as_ref())? {
                let picked = spread(&tasks, profile.eval.tasks_per_split);
                let lengths = expert_lengths(env.as_mut(), &picked)?;
                all.push((split, picked, lengths));
            }
            write_json(&dir.join("tasks.json"), &all)
        })?;
        task_dirs.insert(env_name.clone(), dir);
    }
    let data: Vec<EnvData> = profile
        .envs
        .iter()
        .map(|e| read_data(&data_dirs[e]))
        .collect::<Result<_>>()?;

    // 2. The backbone.
    let backbone_dir = match &profile.backbone {
        BackboneSpec::Hf { path } => path.clone(),
        BackboneSpec::Pretrain { model, train } => {
            let upstream: Vec<String> = data_dirs.values().map(|d| Stages::upstream(d)).collect();
            let key = serde_json::json!({"backbone": profile.backbone, "data": upstream});
            st.run("backbone", key, |dir| {
                let corpus = dir.join("corpus.txt");
                hier_backbone::write_atomic(&corpus, corpus_text(&data).as_bytes())
                    .map_err(|e| e.to_string())?;
                let pc = PretrainConfig {
                    model: model.clone(),
                    train: train.clone(),
                };
                let opts = PretrainOptions {
                    progress: cfg.progress,
                    stop_after: None,
                };
                pretrain(&pc, &[corpus], &dir.join("model"), &cfg.device, &opts)
                    .map_err(|e| e.to_string())?;
                Ok(())
            })?
            .join("model")
        }
    };
    let backbone_key = match &profile.backbone {
        BackboneSpec::Hf { path } => path.display().to_string(),
        BackboneSpec::Pretrain { .. } => {
            Stages::upstream(backbone_dir.parent().expect("stage dir"))
        }
    };
    let tok =
        Tokenizer::load(&backbone_dir).map_err(|e| format!("{}: {e}", backbone_dir.display()))?;
    let mut lm = CausalLm::load(&backbone_dir, &cfg.device)
        .map_err(|e| format!("{}: {e}", backbone_dir.display()))?;
    let max_len = profile.data.max_len;

    // 3. Per environment: train every method, evaluate it.
    let mut cells = Vec::new();
    let mut curves: BTreeMap<String, Vec<CurvePoint>> = BTreeMap::new();
    for (env_name, d) in profile.envs.iter().zip(&data) {
        let data_key = Stages::upstream(&data_dirs[env_name]);
        let eval_tasks: Vec<SplitTasks> = read_json(&task_dirs[env_name].join("tasks.json"))?;
        let base =
            serde_json::json!({"backbone": backbone_key, "data": data_key, "max_len": max_len});
        for method in &profile.methods {
            let (planner, executor, trained) = match method.as_str() {
                "multi2" => {
                    let sys1 = format!("{env_name}-sys1");
                    let sft = sft_config(&profile.sft, &sys1, profile.seed);
                    let dir = sft_stage(
                        st,
                        &mut lm,
                        &format!("sft-sys1-{env_name}"),
                        serde_json::json!({"base": base, "sft": sft}),
                        &sft,
                        cfg.progress,
                        || planner_examples(&tok, &d.sys1, max_len),
                    )?;
                    let sys1_key = Stages::upstream(&dir);
                    let sys2 = format!("{env_name}-sys2");
                    let off = OfflineRlConfig {
                        adapter: sys2.clone(),
                        seed: profile.seed,
                        ..profile.offline.clone()
                    };
                    let dir = offline_stage(
                        st,
                        &mut lm,
                        &format!("offline-{env_name}"),
                        serde_json::json!({"base": base, "offline": off}),
                        &off,
                        cfg.progress,
                        &executor_rl_examples(&tok, &d.sys2, max_len)?,
                        None,
                    )?;
                    let off_dir = dir;
                    let sys2_on = format!("{env_name}-sys2-online");
                    let on = OnlineRlConfig {
                        adapter: sys2_on.clone(),
                        anchor: sys2.clone(),
                        planner: sys1.clone(),
                        max_len,
                        seed: profile.seed,
                        ..profile.online.clone()
                    };
                    let key = serde_json::json!({"base": base, "sys1": sys1_key, "offline": Stages::upstream(&off_dir), "online": on});
                    let dir = st.run(&format!("online-{env_name}"), key, |dir| {
                        let heads = Heads::load(
                            &off_dir.join("heads.safetensors"),
                            lm.config.hidden_size,
                            &cfg.device,
                        )
                        .map_err(|e| e.to_string())?;
                        let ex = executor_rl_examples(&tok, &d.sys2, max_len)?;
                        let mut envs = open_envs(env_name, on.episodes.min(profile.eval.parallel))?;
                        let train = envs[0].tasks(Split::Train).map_err(|e| e.to_string())?;
                        let (m, _, _) = train_online(
                            take(&mut lm),
                            heads,
                            &tok,
                            ex,
                            &mut envs,
                            &train,
                            &on,
                            dir,
                            &RunOptions {
                                progress: cfg.progress,
                                stop_after: None,
                            },
                        )
                        .map_err(|e| e.to_string())?;
                        lm = m;
                        Ok(())
                    })?;
                    load(&mut lm, &sys2_on, &dir.join("adapter"))?;
                    curves.insert(env_name.clone(), read_jsonl(&dir.join("curve.jsonl"))?);
                    (
                        Some(sys1),
                        sys2_on,
                        vec![sys1_key, Stages::upstream(&off_dir), Stages::upstream(&dir)],
                    )
                }
                "flat-sft" => {
                    let name = format!("{env_name}-flat");
                    let sft = sft_config(&profile.sft, &name, profile.seed);
                    let dir = sft_stage(
                        st,
                        &mut lm,
                        &format!("sft-flat-{env_name}"),
                        serde_json::json!({"base": base, "sft": sft}),
                        &sft,
                        cfg.progress,
                        || flat_examples(&tok, &d.flat, max_len),
                    )?;
                    (None, name, vec![Stages::upstream(&dir)])
                }
                "glider" => {
                    // One shared adapter for both levels, told apart by the prompt: SFT on both
                    // levels' data, then offline RL of the low level (advantage-weighted, no
                    // policy-anchored term) from the SFT weights.
                    let name = format!("{env_name}-glider");
                    let sft = sft_config(&profile.sft, &name, profile.seed);
                    let dir = sft_stage(
                        st,
                        &mut lm,
                        &format!("sft-glider-{env_name}"),
                        serde_json::json!({"base": base, "sft": sft}),
                        &sft,
                        cfg.progress,
                        || {
                            let mut ex = planner_examples(&tok, &d.sys1, max_len)?;
                            ex.extend(executor_examples(&tok, &d.sys2, max_len)?);
                            Ok(ex)
                        },
                    )?;
                    let sft_dir = dir;
                    let off = OfflineRlConfig {
                        adapter: name.clone(),
                        lambda: 0.0,
                        seed: profile.seed,
                        ..profile.offline.clone()
                    };
                    let key = serde_json::json!({"base": base, "sft": Stages::upstream(&sft_dir), "offline": off});
                    let dir = offline_stage(
                        st,
                        &mut lm,
                        &format!("offline-glider-{env_name}"),
                        key,
                        &off,
                        cfg.progress,
                        &executor_rl_examples(&tok, &d.sys2, max_len)?,
                        Some(&sft_dir.join("adapter")),
                    )?;
                    (
                        Some(name.clone()),
                        name,
                        vec![Stages::upstream(&sft_dir), Stages::upstream(&dir)],
                    )
                }
                other => return Err(format!("unknown method `{other}`")),
            };
            // Evaluation.
            let key = serde_json::json!({"base": base, "method": method, "planner": planner, "executor": executor,
                "trained": trained, "eval": profile.eval});
            let dir = st.run(&format!("eval-{method}-{env_name}"), key, |dir| {
                let (results, traces) = evaluate(
                    &lm,
                    &tok,
                    env_name,
                    planner.as_deref(),
                    &executor,
                    &eval_tasks,
                    &profile.eval,
                    max_len,
                    cfg.progress,
                )?;
                let text: String = results
                    .iter()
                    .map(|r| serde_json::to_string(r).expect("serialises") + "\n")
                    .collect();
                // Every played episode in full (subgoals, actions, observations), to look at.
                let played: String = traces
                    .iter()
                    .map(|t| serde_json::to_string(t).expect("serialises") + "\n")
                    .collect();
                hier_backbone::write_atomic(&dir.join("traces.jsonl"), played.as_bytes())
                    .map_err(|e| e.to_string())?;
                hier_backbone::write_atomic(&dir.join("episodes.jsonl"), text.as_bytes())
                    .map_err(|e| e.to_string())
            })?;
            let results: Vec<EpisodeResult> = read_jsonl(&dir.join("episodes.jsonl"))?;
            for (split, tasks, _) in &eval_tasks {
                let rs: Vec<EpisodeResult> = results
                    .iter()
                    .filter(|r| tasks.contains(&r.task))
                    .cloned()
                    .collect();
                cells.push(Cell {
                    method: method.clone(),
                    env: env_name.clone(),
                    split: *split,
                    summary: summarise(&rs),
                });
            }
        }
    }
    crate::table1_report::write(
        profile,
        cfg,
        &cells,
        &curves,
        &st.records,
        started.elapsed().as_secs_f64(),
    )
}

/// Plays every evaluation task once per seed.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    lm: &CausalLm,
    tok: &Tokenizer,
    env_name: &str,
    planner: Option<&str>,
    executor: &str,
    eval_tasks: &[SplitTasks],
    spec: &EvalSpec,
    max_len: usize,
    progress: bool,
) -> Result<(Vec<EpisodeResult>, Vec<crate::multi2::Trace>)> {
    let inference = lm.valid();
    let exec_id = inference.adapter_id(executor).map_err(|e| e.to_string())?;
    let plan_id = planner
        .map(|p| inference.adapter_id(p))
        .transpose()
        .map_err(|e| e.to_string())?;
    let all: Vec<(Task, Option<usize>)> = eval_tasks
        .iter()
        .flat_map(|(_, t, l)| t.iter().cloned().zip(l.iter().copied()))
        .collect();
    let mut envs = open_envs(env_name, spec.parallel.min(all.len()))?;
    let bar = crate::runlog::progress_bar(
        progress,
        all.len() * spec.seeds.len(),
        &format!("eval {executor}"),
    );
    let (mut out, mut played) = (Vec::new(), Vec::new());
    for &seed in &spec.seeds {
        let sampling = SamplingConfig {
            max_new_tokens: spec.executor_max_tokens,
            temperature: spec.temperature,
            top_k: Some(spec.top_k),
            top_p: Some(spec.top_p),
            seed,
            use_cache: true,
        };
        let mut exec = BackbonePolicy::new(&inference, tok, Some(exec_id), sampling);
        exec.max_prompt = Some(max_len.saturating_sub(spec.executor_max_tokens).max(1));
        let mut plan = plan_id.map(|id| {
            let mut p = BackbonePolicy::new(
                &inference,
                tok,
                Some(id),
                SamplingConfig::greedy(spec.planner_max_tokens),
            );
            p.max_prompt = Some(max_len.saturating_sub(spec.planner_max_tokens).max(1));
            p
        });
        for chunk in all.chunks(envs.len()) {
            let tasks: Vec<Task> = chunk.iter().map(|(t, _)| t.clone()).collect();
            let envs = &mut envs[..tasks.len()];
            let traces = match plan.as_mut() {
                Some(p) => rollout(envs, &tasks, p, &mut exec, &spec.rollout, "eval")?,
                None => rollout_flat(envs, &tasks, &mut exec, &spec.rollout, "eval")?,
            };
            for (tr, (task, len)) in traces.iter().zip(chunk) {
                out.push(EpisodeResult::of(tr, task, seed, *len));
            }
            played.extend(traces);
            bar.inc(tasks.len() as u64);
        }
    }
    bar.finish_and_clear();
    Ok((out, played))
}

/// An SFT stage: trains `sft.adapter` on `examples()` unless the stage is done, then installs
/// the stage's adapter.
fn sft_stage(
    st: &mut Stages<'_>,
    lm: &mut CausalLm,
    name: &str,
    key: serde_json::Value,
    sft: &SftConfig,
    progress: bool,
    examples: impl FnOnce() -> Result<Vec<crate::sft::SftExample>>,
) -> Result<PathBuf> {
    let dir = st.run(name, key, |dir| {
        let ex = examples()?;
        let opts = SftOptions {
            progress,
            stop_after: None,
        };
        *lm = train_adapter(take(lm), &ex, sft, dir, &opts)
            .map_err(|e| e.to_string())?
            .0;
        Ok(())
    })?;
    load(lm, &sft.adapter, &dir.join("adapter"))?;
    Ok(dir)
}

/// An offline-RL stage: trains `off.adapter` (from `init`, or fresh) unless the stage is
/// done, then installs the stage's adapter.
#[allow(clippy::too_many_arguments)]
fn offline_stage(
    st: &mut Stages<'_>,
    lm: &mut CausalLm,
    name: &str,
    key: serde_json::Value,
    off: &OfflineRlConfig,
    progress: bool,
    data: &[crate::roles::RlExample],
    init: Option<&Path>,
) -> Result<PathBuf> {
    let dir = st.run(name, key, |dir| {
        let opts = RunOptions {
            progress,
            stop_after: None,
        };
        *lm = train_offline_from(take(lm), data, off, dir, &opts, init)
            .map_err(|e| e.to_string())?
            .0;
        Ok(())
    })?;
    load(lm, &off.adapter, &dir.join("adapter"))?;
    Ok(dir)
}

fn take(lm: &mut CausalLm) -> CausalLm {
    // Trainers take the model by value; the placeholder is replaced before anyone reads it.
    std::mem::replace(lm, lm.clone())
}

/// Installs a done stage's adapter under `name` (replacing what the name held).
fn load(lm: &mut CausalLm, name: &str, dir: &Path) -> Result<()> {
    lm.load_adapter(name, dir)
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("serialises") + "\n";
    hier_backbone::write_atomic(path, text.as_bytes()).map_err(|e| e.to_string())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/table1")
    }

    #[test]
    fn every_profile_parses_and_bad_keys_name_the_file() {
        for name in ["smoke", "small", "paper"] {
            let p = Profile::from_file(&configs().join(format!("{name}.toml"))).unwrap();
            assert_eq!(p.name, name);
        }
        let paper = Profile::from_file(&configs().join("paper.toml")).unwrap();
        assert!(matches!(paper.backbone, BackboneSpec::Hf { .. }));
        assert_eq!(
            (paper.offline.actor_lr, paper.offline.critic_lr),
            (1e-4, 1e-5)
        );
        assert_eq!((paper.online.actor_lr, paper.online.eta), (1e-5, 0.02));
        assert_eq!(paper.offline.critic.tau, 0.7);

        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(configs().join("smoke.toml")).unwrap();
        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            text.replace("lambda = 7.0", "lambda = 7.0\nlamda = 1.0"),
        )
        .unwrap();
        let err = Profile::from_file(&bad).unwrap_err();
        assert!(err.contains("bad.toml") && err.contains("lamda"), "{err}");
        std::fs::write(&bad, text.replace("\"glider\"]", "\"glider\", \"react\"]")).unwrap();
        let err = Profile::from_file(&bad).unwrap_err();
        assert!(err.contains("unknown method `react`"), "{err}");
    }
}
