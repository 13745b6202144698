//! `reproduce steering-mas`: steering the five-role pipeline ([`crate::mas`]) at its handoffs,
//! as cached stages — the data and retrieval environment (as `reproduce steering`), the
//! backbone every role and the steering agent share (frozen for the roles), the state bank
//! (the handoffs of unsteered episodes on training questions), the format-only ("zero-shot")
//! steering adapter, steering training (GRPO with the baseline in the group + RankNet over the
//! handoff bank), and evaluation of every row on the same test questions and seeds — then
//! `steering-mas.{md,json,csv}` and figures ([`crate::mas_report`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::burn::module::Module;
use hier_backbone::{CausalLm, PrefillStats, Tokenizer};
use hier_envs::qa::world::WorldConfig;
use hier_envs::{Env, Split, Task};
use hier_train::SharedErrors as _;
use hier_train::eval::spread;
use hier_train::policy::{BackbonePolicy, write_prefill_report};
use hier_train::runlog::write_jsonl;
use hier_train::sft::{SftSpec, sft_config};
use hier_train::stages::{
    BackboneSpec, Report, RunConfig, Stages, backbone_stage, load, read_json, read_jsonl,
    run_pipeline, sft_stage, take, write_json,
};
use hier_train::upstream;
use serde::{Deserialize, Serialize};

use crate::data::{QaData, hex};
use crate::error::{Error, Result};
use crate::mas::{
    FORCED_PROTOCOL, HANDOFF_PROTOCOL, HandoffRecorder, MasConfig, MasProcess, MasState, Render,
    run_mas, score,
};
use crate::pipeline::forks;
use crate::profile::{QaFiles, QaSpec, Shared, SteerEvalSpec, check_shared};
use crate::search_agent::CALL_TAGS;
use crate::sft_examples::handoff_format_examples;
use crate::steer_agent::{Schedule, SteerConfig, SteeringAgent};
use crate::steer_train::{ExecutorSampling, SteerTrainConfig, train_steering_on};

/// A `reproduce steering-mas` profile (`configs/steering-mas/<name>.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MasProfile {
    pub name: String,
    pub seed: u64,
    /// The data: the synthetic world, or files (exactly one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<QaFiles>,
    pub qa: QaSpec,
    /// Every role's model (frozen, no adapter) and the steering agent's base.
    pub backbone: BackboneSpec,
    /// Tokens per training sequence at most.
    pub max_len: usize,
    /// Prompt the roles through the chat template (an instruct checkpoint); `false` continues
    /// the raw text, a reply ending at the end of its line.
    pub chat: bool,
    /// How every role samples.
    pub agent_sampling: ExecutorSampling,
    pub mas: MasConfig,
    /// The steering agent at deployment (`history` and `info_chars` are unused here: the
    /// observation is the handoff message, cut to `mas.message_chars`).
    pub steer: SteerConfig,
    pub format_sft: SftSpec,
    /// Training questions whose unsteered episodes' handoffs fill the state bank.
    pub bank_tasks: usize,
    /// `adapter`, `reference`, `steer`, `max_len` and `seed` are set by the pipeline.
    pub train: SteerTrainConfig,
    pub eval: SteerEvalSpec,
}

impl MasProfile {
    /// Reads and checks the profile at `path`, following `extends` ([`hier_train::profile_toml`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let p: Self = hier_train::profile_toml::read_profile(path)?;
        p.check().map_err(|e| Error::profile(path, e.to_string()))?;
        Ok(p)
    }

    pub fn check(&self) -> Result<()> {
        check_shared(&Shared {
            world: self.world.as_ref(),
            files: self.files.as_ref(),
            qa: &self.qa,
            steer: &self.steer,
            eval: &self.eval,
            bank_tasks: self.bank_tasks,
            pretrains: self.pretrains(),
        })?;
        self.mas.check()
    }

    /// Whether the backbone is pre-trained from scratch (on the corpus's text).
    pub fn pretrains(&self) -> bool {
        matches!(self.backbone, BackboneSpec::Pretrain { .. })
    }
}

/// `configs/steering-mas/<name>.toml` under the workspace root `root`.
pub fn profile_path(root: &Path, name: &str) -> PathBuf {
    root.join("configs")
        .join("steering-mas")
        .join(format!("{name}.toml"))
}

/// A row of the pipeline comparison (METHODS.md B, multi-agent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MasMethod {
    /// The pipeline alone.
    None,
    /// The format-only steering adapter, gated by its fast path.
    ZeroShot,
    /// The same adapter at every handoff, no gate, asked to intervene.
    Forced,
    /// The steering agent trained by GRPO + RankNet over the handoff bank.
    Rl,
}

impl MasMethod {
    pub const ALL: [MasMethod; 4] = [
        MasMethod::None,
        MasMethod::ZeroShot,
        MasMethod::Forced,
        MasMethod::Rl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MasMethod::None => "none",
            MasMethod::ZeroShot => "zero-shot",
            MasMethod::Forced => "forced",
            MasMethod::Rl => "rl",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            MasMethod::None => "No steering",
            MasMethod::ZeroShot => "Zero-shot steering",
            MasMethod::Forced => "Forced intervention at every handoff",
            MasMethod::Rl => "RL steering (ours)",
        }
    }

    /// The steering adapter it runs (`None`: no steering agent).
    pub fn adapter(self) -> Option<&'static str> {
        match self {
            MasMethod::None => None,
            MasMethod::ZeroShot | MasMethod::Forced => Some("steer-zero"),
            MasMethod::Rl => Some("steer-rl"),
        }
    }

    /// Whether the fast path gates it (so it runs at a threshold τ).
    pub fn gated(self) -> bool {
        matches!(self, MasMethod::ZeroShot | MasMethod::Rl)
    }
}

impl std::fmt::Display for MasMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One evaluated pipeline episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasResult {
    pub task: Task,
    pub seed: u64,
    pub hops: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_set: Option<String>,
    pub f1: f64,
    pub em: f64,
    pub answer: Option<String>,
    /// Replies of the roles (every call of the model).
    pub agent_turns: usize,
    /// Interventions applied (notes, and rejections executed), and the rejections refused
    /// past `mas.max_retries`.
    pub interventions: usize,
    pub rejects_executed: usize,
    pub rejects_refused: usize,
    /// The verifier's send-backs executed, and those past `mas.max_sendbacks`.
    pub sendbacks: usize,
    pub sendbacks_refused: usize,
    pub tokens: usize,
}

/// One evaluation: a row at a τ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasEvaluation {
    pub method: MasMethod,
    pub tau: Option<f64>,
    pub results: Vec<MasResult>,
    /// Handoffs the steering agent saw, slow-path runs among them, and unreadable outputs.
    pub handoffs: usize,
    pub slow_path_runs: usize,
    pub unreadable: usize,
}

/// Everything a run measured (the report's input).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasRun {
    pub evaluations: Vec<MasEvaluation>,
    pub curve: Vec<crate::steer_train::RoundPoint>,
    pub bank_states: usize,
    /// Agent turns per task of the bank's unsteered episodes.
    pub bank_turns_per_task: f64,
    pub wall_seconds: f64,
}

/// Every role as one sampling policy over the frozen base (no adapter), and how its prompts
/// are rendered. Chat-rendered replies end at the end-of-turn token or a call's closing tag;
/// raw ones at the end of their line.
fn agents<'a>(
    p: &MasProfile,
    lm: &'a CausalLm,
    tok: &'a Tokenizer,
    seed: u64,
    cache_mib: usize,
) -> Result<(BackbonePolicy<'a>, Render<'a>)> {
    let mut policy = p
        .agent_sampling
        .policy(lm, tok, None, seed)
        .with_prefix_cache_mib(cache_mib);
    if !p.chat {
        return Ok((policy, Render::Raw));
    }
    policy.stop_strings = CALL_TAGS.iter().map(|t| format!("</{t}>")).collect();
    policy.stop_tokens = vec![tok.end_of_turn()?];
    Ok((policy, Render::Chat(tok)))
}

fn fresh_states(env: &hier_envs::qa::env::QaEnv, tasks: &[Task]) -> Result<Vec<MasState>> {
    tasks
        .iter()
        .map(|t| Ok(MasState::fresh(t, &env.task(t)?.question)))
        .collect()
}

/// Runs the pipeline of `profile` and writes `<out>/steering-mas.{md,json,csv}` and figures.
pub fn run(profile: &MasProfile, cfg: &RunConfig) -> Result<Report> {
    profile.check()?;
    run_pipeline(profile, cfg, |st| run_stages(profile, cfg, st))
}

fn run_stages(p: &MasProfile, cfg: &RunConfig, st: &mut Stages<'_>) -> Result<()> {
    let started = Instant::now();
    let data = QaData::load(p.world.as_ref(), p.files.as_ref(), &p.qa, p.pretrains())?;
    let train_env = &data.train_env;
    let train_tasks = train_env.tasks(Split::Train)?;

    // 1. The backbone: a tiny one pre-trained on the passages (smoke), or a checkpoint.
    let corpus = p.pretrains().then(|| {
        let mut text = String::new();
        for d in &data.documents {
            text.push_str(d.contents().trim_end());
            text.push_str("\n\n");
        }
        text
    });
    let digest = corpus.as_ref().map(|c| {
        use sha2::{Digest, Sha256};
        hex(&Sha256::digest(c.as_bytes()))
    });
    let corpus_of = || {
        corpus
            .clone()
            .ok_or_else(|| Error::invalid("no pre-training corpus".into()))
    };
    let key = serde_json::json!({"backbone": p.backbone, "corpus_sha256": digest});
    let (backbone_dir, backbone_key) = backbone_stage(st, "backbone", &p.backbone, key, corpus_of)?;
    let tok = Tokenizer::load(&backbone_dir)?;
    let mut lm = CausalLm::load(&backbone_dir, &cfg.device)?;

    // 2. The state bank: every handoff of unsteered episodes on training questions.
    let agents_key = serde_json::json!({"backbone": backbone_key, "chat": p.chat,
        "sampling": p.agent_sampling, "mas": p.mas, "qa": p.qa, "data": data.key});
    let bank_key = serde_json::json!({"agents": agents_key, "tasks": p.bank_tasks,
        "seed": p.seed, "parallel": p.train.parallel});
    let bank_dir = st.run("bank", bank_key, |dir| -> Result<()> {
        let frozen = lm.valid();
        let (mut roles, render) = agents(p, &frozen, &tok, p.seed, cfg.prefix_cache_mib)?;
        let tasks = spread(&train_tasks, p.bank_tasks);
        let mut envs = forks(train_env, p.train.parallel);
        let mut recorder = HandoffRecorder::default();
        let mut turns = 0;
        for chunk in tasks.chunks(p.train.parallel) {
            let starts = fresh_states(train_env, chunk)?;
            let done = run_mas(
                &mut envs,
                starts,
                &mut roles,
                render,
                Some(&mut recorder),
                &p.mas,
            )?;
            turns += done.iter().map(|s| s.agent_turns).sum::<usize>();
        }
        write_json(
            &dir.join("bank_stats.json"),
            &serde_json::json!({"tasks": tasks.len(),
                "agent_turns_per_task": turns as f64 / tasks.len().max(1) as f64}),
        )?;
        Ok(write_jsonl(&dir.join("bank.jsonl"), &recorder.states)?)
    })?;
    let bank: Vec<MasState> = read_jsonl(&bank_dir.join("bank.jsonl"))?;
    if bank.is_empty() {
        return Err(Error::invalid(format!(
            "{}: the pipeline's episodes left no handoffs to steer",
            bank_dir.display()
        )));
    }
    if let Some(k) = bank.iter().position(|s| s.pending.is_none()) {
        return Err(Error::invalid(format!(
            "{}: line {}: a bank state without a waiting handoff",
            bank_dir.join("bank.jsonl").display(),
            k + 1
        )));
    }
    let bank_stats: serde_json::Value = read_json(&bank_dir.join("bank_stats.json"))?;
    let observations: Vec<String> = bank.iter().map(|s| s.observation()).collect();

    // 3. The format-only ("zero-shot") steering adapter.
    let zero = sft_config(&p.format_sft, "steer-zero", p.seed);
    let key = serde_json::json!({"bank": Stages::upstream(&bank_dir), "sft": zero,
        "max_len": p.max_len, "steer_max_prompt": p.steer.max_prompt});
    let zero_dir = sft_stage(st, &mut lm, "steer-zero", key, &zero, || {
        handoff_format_examples(&tok, &observations, p.max_len, p.seed)
    })?;

    // 4. Steering training over the handoff bank.
    let mut train = p.train.clone();
    train.adapter = "steer-rl".into();
    train.reference = "steer-zero".into();
    train.steer = p.steer.clone();
    train.max_len = p.max_len;
    train.seed = p.seed;
    let key = serde_json::json!({"zero": Stages::upstream(&zero_dir), "train": train,
        "agents": agents_key});
    let rl_dir = st.run("steer-rl", key, |dir| -> Result<()> {
        let started = Instant::now();
        let frozen = lm.valid();
        let (mut roles, render) = agents(p, &frozen, &tok, p.seed, cfg.prefix_cache_mib)?;
        let mut envs = forks(train_env, train.parallel);
        let mut process = MasProcess {
            states: &bank,
            envs: &mut envs,
            agents: &mut roles,
            render,
            golds: train_env,
            mas: p.mas.clone(),
            parallel: train.parallel,
        };
        let opts = cfg.run_options();
        lm = train_steering_on(take(&mut lm), &tok, &mut process, &train, dir, &opts, None)?.0;
        let stats = roles.prefill_stats();
        Ok(write_prefill_report(
            dir,
            cfg.prefix_cache_mib,
            stats,
            started.elapsed().as_secs_f64(),
        )?)
    })?;
    load(&mut lm, "steer-rl", &rl_dir.join("adapter"))?;
    let curve = read_jsonl(&rl_dir.join("curve.jsonl"))?;

    // 5. Evaluation: every row on the same questions and seeds, then the τ sweep.
    let test = data.test_tasks(p.eval.tasks)?;
    let mut jobs: Vec<(MasMethod, Option<f64>)> = MasMethod::ALL
        .iter()
        .map(|&m| (m, m.gated().then_some(p.steer.tau)))
        .collect();
    jobs.extend(
        p.eval
            .taus
            .iter()
            .filter(|t| **t != p.steer.tau)
            .map(|t| (MasMethod::Rl, Some(*t))),
    );
    // The steering adapters evaluations play, by content (keys name them by their settings
    // only), each hashed once.
    let steer_names = [&rl_dir, &zero_dir].map(|d| Stages::upstream(d));
    let steer_digests = upstream::adapter_digests(&cfg.out.join("stages"), &steer_names)?;
    let mut evaluations = Vec::new();
    for (method, tau) in jobs {
        let steer = match method {
            MasMethod::None => String::new(),
            MasMethod::Rl => Stages::upstream(&rl_dir),
            MasMethod::ZeroShot | MasMethod::Forced => Stages::upstream(&zero_dir),
        };
        let digests: upstream::Digests = (steer_digests.get_key_value(&steer).into_iter())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let key = serde_json::json!({"method": method, "tau": tau, "steer": steer,
            "agents": agents_key, "eval": p.eval.tasks, "parallel": p.eval.parallel,
            "seeds": p.eval.seeds, "steer_config": p.steer});
        let tau_tag = tau.map(|t| format!("-tau{t}")).unwrap_or_default();
        let dir = st.run(
            &format!("eval-{method}{tau_tag}"),
            key,
            |dir| -> Result<()> {
                upstream::record(dir, &digests)?;
                let started = Instant::now();
                let (e, prefill, traces) = evaluate(
                    &lm,
                    &tok,
                    &data,
                    &test,
                    p,
                    method,
                    tau,
                    cfg.prefix_cache_mib,
                )?;
                // Whole episodes (every message, note and rejection) of the first questions.
                write_jsonl(&dir.join("traces.jsonl"), &traces)?;
                write_prefill_report(
                    dir,
                    cfg.prefix_cache_mib,
                    prefill,
                    started.elapsed().as_secs_f64(),
                )?;
                Ok(write_json(&dir.join("evaluation.json"), &e)?)
            },
        )?;
        // Refuses an evaluation of an adapter trained again since under the same name.
        upstream::check(&dir, &digests)?;
        evaluations.push(read_json(&dir.join("evaluation.json"))?);
    }
    let run = MasRun {
        evaluations,
        curve,
        bank_states: bank.len(),
        bank_turns_per_task: bank_stats["agent_turns_per_task"]
            .as_f64()
            .unwrap_or(f64::NAN),
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    crate::mas_report::write_all(&cfg.out, p, &run, st.records())
}

/// Plays `tasks` once per evaluation seed through the pipeline with `method` at the handoffs.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    lm: &CausalLm,
    tok: &Tokenizer,
    data: &QaData,
    tasks: &[Task],
    p: &MasProfile,
    method: MasMethod,
    tau: Option<f64>,
    cache_mib: usize,
) -> Result<(MasEvaluation, PrefillStats, Vec<MasState>)> {
    let lm = lm.valid();
    let env = &data.eval_env;
    let mut envs = forks(env, p.eval.parallel);
    let mut results = Vec::new();
    let (mut handoffs, mut slow_runs, mut unreadable) = (0, 0, 0);
    let mut prefill = PrefillStats::default();
    let mut traces = Vec::new();
    for &seed in &p.eval.seeds {
        for (c, chunk) in tasks.chunks(p.eval.parallel).enumerate() {
            let s = seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
            // The roles sample the same way in every row: only the steering differs.
            let (mut roles, render) = agents(p, &lm, tok, s, cache_mib)?;
            let starts = fresh_states(env, chunk)?;
            let envs = &mut envs[..chunk.len()];
            let done = match method.adapter() {
                None => run_mas(envs, starts, &mut roles, render, None, &p.mas)?,
                Some(a) => {
                    let mut config = p.steer.clone();
                    config.tau = tau.unwrap_or(p.steer.tau);
                    config.seed = p.steer.seed ^ s;
                    let id = lm.adapter_id(a)?;
                    let mut agent = SteeringAgent::new(&lm, tok, Some(id), config)?
                        .with_prefix_cache_mib(cache_mib);
                    agent = match method {
                        MasMethod::Forced => agent
                            .with_schedule(Schedule::Every)
                            .with_protocol(FORCED_PROTOCOL),
                        _ => agent.with_protocol(HANDOFF_PROTOCOL),
                    };
                    let done = run_mas(envs, starts, &mut roles, render, Some(&mut agent), &p.mas)?;
                    handoffs += agent.log.len();
                    slow_runs += agent.log.iter().filter(|r| r.output.is_some()).count();
                    unreadable += agent
                        .log
                        .iter()
                        .filter(|r| r.output.is_some() && r.parse_error.is_some())
                        .count();
                    done
                }
            };
            prefill.add(roles.prefill_stats());
            if traces.is_empty() {
                traces = done.clone();
            }
            for s in done {
                let q = env.task(&s.task)?;
                let (f1, em) = score(&s, env)?;
                results.push(MasResult {
                    task: s.task.clone(),
                    seed,
                    hops: q.hops,
                    test_set: data.test_set(&s.task),
                    f1,
                    em,
                    answer: s.answer.clone(),
                    agent_turns: s.agent_turns,
                    interventions: s.interventions.len(),
                    rejects_executed: s.rejects_executed,
                    rejects_refused: s.rejects_refused,
                    sendbacks: s.sendbacks,
                    sendbacks_refused: s.sendbacks_refused,
                    tokens: s.prompt_tokens + s.generated_tokens,
                });
            }
        }
    }
    Ok((
        MasEvaluation {
            method,
            tau,
            results,
            handoffs,
            slow_path_runs: slow_runs,
            unreadable,
        },
        prefill,
        traces,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parses_and_bad_input_names_the_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for entry in std::fs::read_dir(root.join("configs/steering-mas")).unwrap() {
            let path = entry.unwrap().path();
            let p = MasProfile::from_file(&path).unwrap();
            assert_eq!(
                Some(p.name.as_str()),
                path.file_stem().and_then(|s| s.to_str())
            );
        }
        let tmp = tempfile::tempdir().unwrap();
        let bad = tmp.path().join("bad.toml");
        let text = std::fs::read_to_string(profile_path(&root, "smoke")).unwrap();
        std::fs::write(&bad, text.replace("search_turns = 2", "search_turns = 0")).unwrap();
        let e = MasProfile::from_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.toml") && e.contains("search_turns"), "{e}");
        std::fs::write(&bad, text.replace("max_retries", "max_retry")).unwrap();
        let e = MasProfile::from_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.toml") && e.contains("max_retry"), "{e}");
    }
}
