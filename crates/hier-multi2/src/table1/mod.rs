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

pub mod claims;
mod data;
mod eval_stage;
mod evaluate;
pub mod figures;
pub mod profile;
pub mod report;
pub mod results;
pub mod traces;

pub use profile::{
    Ablation, AblationSpec, DataOverride, DataSpec, EnvOverride, EvalOverride, EvalSpec,
    GrpoOverride, Method, Profile, RolloutOverride, SftOverride,
};
pub use results::{AblationCell, AblationRow, Cell, ablation_rows};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::{CausalLm, Tokenizer};
use hier_envs::{Env, Split, Task};
use hier_rl_losses::Variant;

use crate::demos::{BuildOptions, build_dataset};
use crate::grpo::{GrpoConfig, train_grpo};
use crate::offline_rl::{OfflineRlConfig, train_offline_from};
use crate::online_rl::{CurvePoint, OnlineRlConfig, train_online};
use crate::roles::{
    executor_examples, executor_rl_examples, flat_examples, planner_examples, planner_rl_examples,
};
use crate::sys2::Heads;
use hier_train::eval::{EpisodeResult, expert_lengths, spread};
use hier_train::sft::sft_config;

use crate::envs::EnvKind;
use crate::error::{Error, Result};
use data::{EnvData, corpus_text, read_data};
use evaluate::{Agent, SplitTasks, of_tasks, open_envs};
use hier_train::SharedErrors as _;
pub use hier_train::stages::{BackboneSpec, Report, RunConfig, StageRecord};
use hier_train::stages::{
    Stages, backbone_stage, load, read_json, read_jsonl, run_pipeline, sft_stage, take, write_json,
};

/// The splits an environment evaluates on (TextCraft has no OOD split), each kept to the
/// profile's task types there ([`of_types`]).
fn eval_splits(env: &dyn Env, types: &[String]) -> Result<Vec<(Split, Vec<Task>)>> {
    let mut out = Vec::new();
    for s in [Split::Id, Split::Ood] {
        let tasks = of_types(env.tasks(s)?, types);
        if !tasks.is_empty() {
            out.push((s, tasks));
        }
    }
    Ok(out)
}

/// `tasks` of the kinds `types` names ([`DataSpec::task_types`]); all of them when it is empty.
fn of_types(tasks: Vec<Task>, types: &[String]) -> Vec<Task> {
    if types.is_empty() {
        return tasks;
    }
    tasks
        .into_iter()
        .filter(|t| types.contains(&t.name))
        .collect()
}

/// The training tasks of `env` under `data` ([`DataSpec::task_types`]). A type that no
/// training task carries is a profile error (a misspelt name would otherwise shrink the task
/// set without a word).
fn train_tasks(env: &dyn Env, data: &DataSpec) -> Result<Vec<Task>> {
    let all = env.tasks(Split::Train)?;
    if let Some(unknown) = (data.task_types.iter()).find(|n| !all.iter().any(|t| &t.name == *n)) {
        let known: BTreeSet<&str> = all.iter().map(|t| t.name.as_str()).collect();
        // ALFWorld names every game apart: list a few, not thousands.
        let shown: Vec<&str> = known.iter().copied().take(30).collect();
        let more = known.len() - shown.len();
        return Err(Error::invalid(format!(
            "data.task_types: no training task of {} is `{unknown}` (its {} task names: {}{})",
            env.name(),
            known.len(),
            shown.join(", "),
            if more > 0 {
                format!(", … {more} more")
            } else {
                String::new()
            }
        )));
    }
    Ok(of_types(all, &data.task_types))
}

/// Runs the pipeline of `profile` and writes `<out>/table1.{md,json,csv}`.
pub fn run(profile: &Profile, cfg: &RunConfig) -> Result<Report> {
    profile.check()?;
    run_pipeline(profile, cfg, |st| run_stages(profile, cfg, st))
}

/// The key of an environment's expert-data stage, which every later stage of that environment
/// builds on: the data settings, the seed and — from version 2 on — the version of the text the
/// environment shows (version 1 leaves the key as it was, so unchanged environments keep their
/// stages).
fn data_key(profile: &Profile, env: EnvKind) -> serde_json::Value {
    let mut key = serde_json::json!({"env": env, "data": profile.data, "seed": profile.seed});
    if env.spec().text_version > 1 {
        key["text_version"] = env.spec().text_version.into();
    }
    key
}

fn run_stages(profile: &Profile, cfg: &RunConfig, st: &mut Stages<'_>) -> Result<()> {
    let started = Instant::now();
    // 1. Expert data and evaluation tasks per environment.
    let mut data_dirs = BTreeMap::new();
    let mut task_dirs = BTreeMap::new();
    // Each environment's view of the profile (`per_env`): its stages, from the data on, are
    // keyed by it.
    let env_profiles: BTreeMap<EnvKind, Profile> = (profile.envs.iter())
        .map(|e| (*e, profile.for_env(*e)))
        .collect();
    for env_name in &profile.envs {
        let env_profile = &env_profiles[env_name];
        let key = data_key(env_profile, *env_name);
        let dir = st.run(&format!("data-{env_name}"), key, |dir| -> Result<()> {
            let mut env = env_name.open()?;
            let train = train_tasks(env.as_ref(), &env_profile.data)?;
            let tasks = spread(&train, env_profile.data.train_episodes);
            let opts = BuildOptions {
                seed: profile.seed,
                progress: cfg.progress,
                ..BuildOptions::default()
            };
            build_dataset(env.as_mut(), &tasks, "train", dir, &opts)?;
            Ok(())
        })?;
        data_dirs.insert(*env_name, dir);
        let types = &env_profile.data.task_types;
        let mut key = serde_json::json!({"env": env_name, "tasks_per_split": env_profile.eval.tasks_per_split});
        if !types.is_empty() {
            key["task_types"] = serde_json::json!(types);
        }
        let dir = st.run(&format!("tasks-{env_name}"), key, |dir| -> Result<()> {
            let mut env = env_name.open()?;
            let mut all = Vec::new();
            for (split, tasks) in eval_splits(env.as_ref(), types)? {
                let picked = spread(&tasks, env_profile.eval.tasks_per_split);
                let lengths = expert_lengths(env.as_mut(), &picked)?;
                all.push((split, picked, lengths));
            }
            Ok(write_json(&dir.join("tasks.json"), &all)?)
        })?;
        task_dirs.insert(*env_name, dir);
    }
    let data: Vec<EnvData> = profile
        .envs
        .iter()
        .map(|e| read_data(&data_dirs[e]))
        .collect::<Result<_>>()?;

    // 2. The backbone.
    let upstream: Vec<String> = data_dirs.values().map(|d| Stages::upstream(d)).collect();
    let key = serde_json::json!({"backbone": profile.backbone, "data": upstream});
    let (backbone_dir, backbone_key) = backbone_stage(
        st,
        "backbone",
        &profile.backbone,
        key,
        || -> Result<String> { Ok(corpus_text(&data)) },
    )?;
    let tok = Tokenizer::load(&backbone_dir)?;
    let mut lm = CausalLm::load(&backbone_dir, &cfg.device)?;
    let max_len = profile.data.max_len;

    // 3. Per environment: train every method, evaluate it.
    let mut cells = Vec::new();
    let mut ablation_cells = Vec::new();
    let mut curves: BTreeMap<String, Vec<CurvePoint>> = BTreeMap::new();
    let mut sample_traces: Vec<traces::MethodTraces> = Vec::new();
    // The main table first, for every environment; then the ablations (most of the compute),
    // so that an interrupted run has its table's stages done.
    for (ablating, (env_name, d)) in [false, true]
        .into_iter()
        .flat_map(|a| profile.envs.iter().zip(&data).map(move |x| (a, x)))
    {
        let data_key = Stages::upstream(&data_dirs[env_name]);
        let profile = &env_profiles[env_name];
        let eval_tasks: Vec<SplitTasks> = read_json(&task_dirs[env_name].join("tasks.json"))?;
        let base =
            serde_json::json!({"backbone": backbone_key, "data": data_key, "max_len": max_len});
        let mut ctx = Ctx {
            st: &mut *st,
            lm: &mut lm,
            tok: &tok,
            profile,
            cfg,
            env: *env_name,
            d,
            base,
        };
        for method in profile.methods.iter().filter(|_| !ablating) {
            let stage = format!("eval-{method}");
            let Some(trained) = ctx.for_evaluation(&stage, method.name(), &profile.eval, |c| {
                c.method(*method, profile.seed)
            })?
            else {
                continue;
            };
            if let Some(c) = &trained.curve {
                curves.insert(env_name.to_string(), c.clone());
            }
            let parts =
                ctx.evaluate(&stage, method.name(), &trained, &eval_tasks, &profile.eval)?;
            if let Some((first, played)) = parts.first() {
                let reflexion = matches!(trained.agent, Agent::Reflexion);
                sample_traces.push(traces::MethodTraces {
                    method: *method,
                    env: *env_name,
                    stage: Stages::upstream(first),
                    samples: traces::pick(first, played, reflexion, &eval_tasks)?,
                });
            }
            let results: Vec<EpisodeResult> = parts.into_iter().flat_map(|(_, r)| r).collect();
            for (split, tasks, _) in &eval_tasks {
                cells.push(Cell::new(
                    *method,
                    *env_name,
                    *split,
                    of_tasks(&results, tasks),
                ));
            }
        }
        // Ablations: each variant trained with every seed, evaluated on a subset.
        let Some(ab) = profile
            .ablations
            .as_ref()
            .filter(|a| ablating && &a.env == env_name)
        else {
            continue;
        };
        let tasks: Vec<SplitTasks> = eval_tasks
            .iter()
            .map(|(s, t, l)| {
                let keep = spread(t, ab.tasks_per_split);
                let lens = keep
                    .iter()
                    .map(|k| l[t.iter().position(|x| x == k).expect("spread picks from t")])
                    .collect();
                (*s, keep, lens)
            })
            .collect();
        let spec = ablation_eval(&profile.eval, ab);
        for &seed in &ab.seeds {
            for &variant in &ab.variants {
                let stage = format!("ablation-{variant}-s{seed}");
                let Some(trained) = ctx
                    .for_evaluation(&stage, variant.name(), &spec, |c| c.variant(variant, seed))?
                else {
                    continue;
                };
                let results: Vec<EpisodeResult> =
                    (ctx.evaluate(&stage, variant.name(), &trained, &tasks, &spec)?)
                        .into_iter()
                        .flat_map(|(_, r)| r)
                        .collect();
                for (split, ts, _) in &tasks {
                    ablation_cells.push(AblationCell::new(
                        variant,
                        seed,
                        *env_name,
                        *split,
                        of_tasks(&results, ts),
                    ));
                }
            }
        }
    }
    crate::table1::report::write(
        profile,
        cfg,
        report::Measured {
            cells: &cells,
            ablation_cells: &ablation_cells,
            curves: &curves,
            traces: &sample_traces,
        },
        st.records(),
        started.elapsed().as_secs_f64(),
    )
}

/// The ablations' evaluation: the main evaluation's settings on `ab.tasks_per_split` of its
/// tasks per split (spread over them) and `ab.eval_seeds`; keyed with the main count too
/// (`subset_of`), which decides what they are spread over.
fn ablation_eval(main: &EvalSpec, ab: &AblationSpec) -> EvalSpec {
    EvalSpec {
        tasks_per_split: ab.tasks_per_split,
        seeds: ab.eval_seeds.clone(),
        subset_of: Some(main.tasks_per_split),
        ..main.clone()
    }
}

/// The online RL settings of a run on `env` under `variant`: the profile's (`base`) under the
/// variant's objectives ([`OnlineRlConfig::under`]); the released code's ScienceWorld trainer
/// also never samples the offline buffer (METHODS.md A.1, phase 3), so neither does
/// `released-code` there.
pub fn online_config(base: &OnlineRlConfig, variant: Variant, env: EnvKind) -> OnlineRlConfig {
    let mut on = base.clone().under(variant);
    if variant == Variant::ReleasedCode && env == EnvKind::Scienceworld {
        on.offline_in_replay = false;
    }
    on
}

/// A method ready to evaluate: its agent, the stages it came from, and its online curve.
struct Trained {
    agent: Agent,
    upstream: Vec<String>,
    curve: Option<Vec<CurvePoint>>,
}

/// Two roles (one name twice for a shared adapter) made by the stages `up`.
fn hier(planner: &Made, executor: &Made, up: Vec<&Made>) -> Trained {
    Trained {
        agent: Agent::Hierarchy {
            planner: planner.adapter.clone(),
            executor: executor.adapter.clone(),
        },
        upstream: up.into_iter().map(|m| m.key.clone()).collect(),
        curve: None,
    }
}

/// A trained adapter: its name and the stage that made it.
#[derive(Clone)]
struct Made {
    adapter: String,
    key: String,
    dir: PathBuf,
}

/// What one environment's stages share.
struct Ctx<'a, 'b> {
    st: &'a mut Stages<'b>,
    lm: &'a mut CausalLm,
    tok: &'a Tokenizer,
    profile: &'a Profile,
    cfg: &'a RunConfig,
    env: EnvKind,
    d: &'a EnvData,
    base: serde_json::Value,
}

impl Ctx<'_, '_> {
    /// Adapter names carry the training seed unless it is the profile's (whose stages the
    /// main table and the ablations share).
    fn name(&self, what: &str, seed: u64) -> String {
        if seed == self.profile.seed {
            format!("{}-{what}", self.env)
        } else {
            format!("{}-{what}-s{seed}", self.env)
        }
    }

    fn max_len(&self) -> usize {
        self.profile.data.max_len
    }

    /// LoRA SFT of one role: `sys1` (planner data), `sys2` (executor data), `flat`, or
    /// `glider` (both levels into one adapter).
    fn sft(&mut self, what: &str, seed: u64) -> Result<Made> {
        // System 2's SFT adapter must not take the name of its offline-RL adapter.
        let adapter = self.name(if what == "sys2" { "sys2-sft" } else { what }, seed);
        let sft = sft_config(&self.profile.sft, &adapter, seed);
        let (tok, d, max_len) = (self.tok, self.d, self.max_len());
        let dir = sft_stage(
            self.st,
            self.lm,
            &format!("sft-{what}-{}", self.env),
            serde_json::json!({"base": self.base, "sft": sft}),
            &sft,
            || match what {
                "sys1" => planner_examples(tok, &d.sys1, max_len),
                "sys2" => executor_examples(tok, &d.sys2, max_len),
                "flat" => flat_examples(tok, &d.flat, max_len),
                "glider" => {
                    let mut ex = planner_examples(tok, &d.sys1, max_len)?;
                    ex.extend(executor_examples(tok, &d.sys2, max_len)?);
                    Ok(ex)
                }
                other => Err(Error::invalid(format!("no SFT data for `{other}`"))),
            },
        )?;
        Ok(Made {
            adapter,
            key: Stages::upstream(&dir),
            dir,
        })
    }

    /// Offline RL: `sys2` (Multi²'s System 2), `iql` (λ = 0), `released` (the authors' code:
    /// expectile 0.5, λ = 0), `sys1` (the planner by RL), `shared` (one adapter, both levels'
    /// transitions, from the two-level SFT adapter), `glider` (λ = 0 from the two-level SFT
    /// adapter, the low level's transitions).
    fn offline(&mut self, what: &str, seed: u64) -> Result<Made> {
        let init = match what {
            "glider" | "shared" => Some(self.sft("glider", seed)?),
            _ => None,
        };
        // The planner by RL must not take the name of the planner by SFT; Glider's offline
        // phase keeps training its SFT adapter.
        let adapter = self.name(if what == "sys1" { "sys1-rl" } else { what }, seed);
        // Glider's offline phase is IQL without the anchor term, as vanilla-IQL's.
        let variant = match what {
            "iql" | "glider" => Variant::VanillaIql,
            "released" => Variant::ReleasedCode,
            "sys2" | "sys1" | "shared" => Variant::Multi2,
            other => return Err(Error::invalid(format!("no offline RL recipe `{other}`"))),
        };
        let off = OfflineRlConfig {
            adapter: adapter.clone(),
            seed,
            ..self.profile.offline.clone()
        }
        .under(variant);
        let (tok, d, max_len) = (self.tok, self.d, self.max_len());
        let data = match what {
            "sys1" => planner_rl_examples(tok, &d.sys1, max_len)?,
            "shared" => {
                let mut ex = planner_rl_examples(tok, &d.sys1, max_len)?;
                ex.extend(executor_rl_examples(tok, &d.sys2, max_len)?);
                ex
            }
            _ => executor_rl_examples(tok, &d.sys2, max_len)?,
        };
        let stage = match what {
            "sys2" => format!("offline-{}", self.env),
            other => format!("offline-{other}-{}", self.env),
        };
        let key = match &init {
            Some(i) => serde_json::json!({"base": self.base, "sft": i.key, "offline": off}),
            None => serde_json::json!({"base": self.base, "offline": off}),
        };
        let dir = offline_stage(
            self.st,
            self.lm,
            &stage,
            key,
            &off,
            &data,
            init.as_ref().map(|i| i.dir.join("adapter")).as_deref(),
        )?;
        Ok(Made {
            adapter,
            key: Stages::upstream(&dir),
            dir,
        })
    }

    /// Online RL of an offline System 2 under `planner`, trained under `variant`'s objectives
    /// ([`online_config`]); `what` names the stage and the adapter (`sys2` for Multi²).
    fn online(
        &mut self,
        what: &str,
        variant: Variant,
        seed: u64,
        planner: &Made,
        off: &Made,
    ) -> Result<(Made, Vec<CurvePoint>)> {
        let adapter = self.name(&format!("{what}-online"), seed);
        let on = OnlineRlConfig {
            adapter: adapter.clone(),
            anchor: off.adapter.clone(),
            planner: planner.adapter.clone(),
            max_len: self.max_len(),
            seed,
            ..online_config(&self.profile.online, variant, self.env)
        };
        let stage = match what {
            "sys2" => format!("online-{}", self.env),
            other => format!("online-{other}-{}", self.env),
        };
        let key = serde_json::json!({"base": self.base, "sys1": planner.key, "offline": off.key, "online": on});
        let (lm, tok, cfg, env, d) = (&mut *self.lm, self.tok, self.cfg, self.env, self.d);
        let (parallel, data) = (self.profile.eval.parallel, &self.profile.data);
        let dir = self.st.run(&stage, key, |dir| -> Result<()> {
            let heads = Heads::load(
                &off.dir.join("heads.safetensors"),
                lm.config.hidden_size,
                &cfg.device,
            )?;
            let ex = executor_rl_examples(tok, &d.sys2, on.max_len)?;
            let mut envs = open_envs(env, on.episodes.min(parallel))?;
            let train = train_tasks(envs[0].as_ref(), data)?;
            let (m, _, _) = train_online(
                take(lm),
                heads,
                tok,
                ex,
                &mut envs,
                &train,
                &on,
                dir,
                &cfg.run_options(),
            )?;
            *lm = m;
            Ok(())
        })?;
        // While planning, the stage may not exist here (only its evaluation, restored): its
        // curve is read when it is there.
        let curve_file = dir.join("curve.jsonl");
        let curve = if !self.st.planning() {
            load(self.lm, &adapter, &dir.join("adapter"))?;
            read_jsonl(&curve_file)?
        } else if curve_file.exists() {
            read_jsonl(&curve_file)?
        } else {
            Vec::new()
        };
        Ok((
            Made {
                adapter,
                key: Stages::upstream(&dir),
                dir,
            },
            curve,
        ))
    }

    /// GRPO from `reference`: `grpo` (flat, every action) or `glider-online` (the planner's
    /// subgoals of the shared adapter).
    fn grpo(&mut self, what: &str, seed: u64, reference: &Made) -> Result<Made> {
        let adapter = self.name(what, seed);
        let spec = match what {
            "grpo" => &self.profile.grpo,
            _ => &self.profile.glider_online,
        };
        let g = GrpoConfig {
            adapter: adapter.clone(),
            reference: reference.adapter.clone(),
            max_len: self.max_len(),
            seed,
            ..spec.clone()
        };
        let key = serde_json::json!({"base": self.base, "reference": reference.key, "grpo": g});
        let (lm, tok, cfg, env) = (&mut *self.lm, self.tok, self.cfg, self.env);
        let (parallel, data) = (self.profile.eval.parallel, &self.profile.data);
        let dir = self
            .st
            .run(&format!("{what}-{}", self.env), key, |dir| -> Result<()> {
                let mut envs =
                    open_envs(env, (g.tasks_per_iteration * g.group_size).min(parallel))?;
                let train = train_tasks(envs[0].as_ref(), data)?;
                let opts = cfg.run_options();
                *lm = train_grpo(take(lm), tok, &mut envs, &train, &g, dir, &opts)?.0;
                Ok(())
            })?;
        if !self.st.planning() {
            load(self.lm, &adapter, &dir.join("adapter"))?;
        }
        Ok(Made {
            adapter,
            key: Stages::upstream(&dir),
            dir,
        })
    }

    /// A Table-1 method.
    fn method(&mut self, method: Method, seed: u64) -> Result<Trained> {
        let prompted = |agent| Trained {
            agent,
            upstream: Vec::new(),
            curve: None,
        };
        Ok(match method {
            Method::Multi2 => {
                let sys1 = self.sft("sys1", seed)?;
                let off = self.offline("sys2", seed)?;
                let (on, curve) = self.online("sys2", Variant::Multi2, seed, &sys1, &off)?;
                Trained {
                    curve: (!curve.is_empty()).then_some(curve),
                    ..hier(&sys1, &on, vec![&sys1, &off, &on])
                }
            }
            Method::FlatSft => {
                let f = self.sft("flat", seed)?;
                Trained {
                    agent: Agent::Flat {
                        policy: f.adapter.clone(),
                    },
                    upstream: vec![f.key],
                    curve: None,
                }
            }
            Method::Glider => {
                let off = self.offline("glider", seed)?;
                let on = self.grpo("glider-online", seed, &off)?;
                hier(&on, &on, vec![&off, &on])
            }
            Method::Grpo => {
                let f = self.sft("flat", seed)?;
                let g = self.grpo("grpo", seed, &f)?;
                Trained {
                    agent: Agent::Flat {
                        policy: g.adapter.clone(),
                    },
                    upstream: vec![f.key, g.key],
                    curve: None,
                }
            }
            Method::React => prompted(Agent::React),
            Method::Reflexion => prompted(Agent::Reflexion),
            Method::Adapt => prompted(Agent::Adapt),
        })
    }

    /// An ablation (METHODS.md A.2), trained with `seed`.
    fn variant(&mut self, ablation: Ablation, seed: u64) -> Result<Trained> {
        Ok(match ablation {
            Ablation::Multi2 => self.method(Method::Multi2, seed)?,
            Ablation::Flat => self.method(Method::FlatSft, seed)?,
            Ablation::Multi2Offline => {
                let (s1, off) = (self.sft("sys1", seed)?, self.offline("sys2", seed)?);
                hier(&s1, &off, vec![&s1, &off])
            }
            Ablation::ParadigmSwap => {
                let (s1, s2) = (self.offline("sys1", seed)?, self.sft("sys2", seed)?);
                hier(&s1, &s2, vec![&s1, &s2])
            }
            Ablation::OnlySft => {
                let (s1, s2) = (self.sft("sys1", seed)?, self.sft("sys2", seed)?);
                hier(&s1, &s2, vec![&s1, &s2])
            }
            Ablation::OnlyRl => {
                let (s1, off) = (self.offline("sys1", seed)?, self.offline("sys2", seed)?);
                let (on, _) = self.online("only-rl", Variant::Multi2, seed, &s1, &off)?;
                hier(&s1, &on, vec![&s1, &off, &on])
            }
            Ablation::SharedAdapter => {
                let sh = self.offline("shared", seed)?;
                hier(&sh, &sh, vec![&sh])
            }
            Ablation::VanillaIql | Ablation::VanillaAwac | Ablation::ReleasedCode => {
                let variant = ablation.objectives().expect("an objectives ablation");
                let s1 = self.sft("sys1", seed)?;
                // Stage names of before the typed variants, so their stages are reused.
                let (off_what, on_what) = match variant {
                    Variant::VanillaIql => ("iql", "iql"),
                    Variant::VanillaAwac => ("sys2", "awac"),
                    _ => ("released", "released"),
                };
                let off = self.offline(off_what, seed)?;
                let (on, _) = self.online(on_what, variant, seed, &s1, &off)?;
                hier(&s1, &on, vec![&s1, &off, &on])
            }
        })
    }
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
    data: &[crate::roles::RlExample],
    init: Option<&Path>,
) -> Result<PathBuf> {
    let opts = st.cfg.run_options();
    let dir = st.run(name, key, |dir| -> Result<()> {
        *lm = train_offline_from(take(lm), data, off, dir, &opts, init)?.0;
        Ok(())
    })?;
    if !st.planning() {
        load(lm, &off.adapter, &dir.join("adapter"))?;
    }
    Ok(dir)
}

/// The integration tests' tiny model and environments (`tests/common`), for unit tests too.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../tests/common/mod.rs"]
mod test_common;

#[cfg(test)]
mod tests;
