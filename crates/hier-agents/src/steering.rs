//! `reproduce steering`: METHODS.md B end to end as cached stages ([`crate::stages`]) —
//! the synthetic multi-hop world and its retrieval environment, search demonstrations with
//! drift, the backbone (a tiny one pre-trained from scratch on the world's text, or an HF
//! checkpoint), the frozen executors (the training one and a second one for transfer), the
//! state bank, the format-only ("zero-shot") steering adapter, steering training (GRPO with the
//! baseline in the group + RankNet), filtered behaviour cloning, and evaluation of every method
//! on the test questions — then `steering.{md,json,csv}` and figures
//! ([`crate::steering_report`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::burn::module::Module;
use hier_backbone::{CausalLm, Tokenizer};
use hier_envs::qa::env::{Call, QaEnv, QaEnvConfig, parse_call};
use hier_envs::qa::world::{World, WorldConfig};
use hier_envs::{Env, Split, Task};
use serde::{Deserialize, Serialize};

use crate::eval::spread;
use crate::offline_rl::RunOptions;
use crate::runlog::write_jsonl;
use crate::search_agent::{DriftConfig, SearchDemo, demonstrations, rollout_search};
use crate::stages::{
    BackboneSpec, Report, Result, RunConfig, Stages, backbone_stage, load, read_json, read_jsonl,
    run_pipeline, sft_stage, take, write_json,
};
use crate::steer_agent::{Schedule, SteerConfig, SteeringAgent};
use crate::steer_train::{
    BankState, ExecutorSampling, StateRecord, SteerTrainConfig, collect_states, demo_states,
    executor_examples, filtered_bc_examples, format_examples, format_pairs, train_steering,
};
use crate::table1::{SftSpec, sft_config};

/// The retrieval environment's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QaSpec {
    /// Passages per search.
    pub topk: usize,
    /// Turn limits in training (demonstrations, the bank, continuations) and evaluation
    /// (ASearcher: 32 / 64).
    pub train_max_turns: usize,
    pub eval_max_turns: usize,
}

/// A frozen executor: demonstrations with drift, then LoRA SFT.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSpec {
    /// Training questions demonstrated (spread over the train split).
    pub demos: usize,
    pub drift: DriftConfig,
    pub sft: SftSpec,
    pub seed: u64,
}

/// Evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerEvalSpec {
    /// Test questions (spread over the test split).
    pub tasks: usize,
    /// One pass over the questions per seed (executor and steering sampling).
    pub seeds: Vec<u64>,
    /// Episodes played together.
    pub parallel: usize,
    /// The τ sweep of the trained agent (no retraining); `steer.tau` is the main table's τ.
    pub taus: Vec<f64>,
}

/// A `reproduce steering` profile (`configs/steering/<name>.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteeringProfile {
    pub name: String,
    pub seed: u64,
    pub world: WorldConfig,
    pub qa: QaSpec,
    pub backbone: BackboneSpec,
    /// Tokens per training sequence at most.
    pub max_len: usize,
    /// The executor the steering agent is trained with, and the one it transfers to.
    pub executor: ExecutorSpec,
    pub transfer: ExecutorSpec,
    pub executor_sampling: ExecutorSampling,
    /// The steering agent at deployment.
    pub steer: SteerConfig,
    /// The format-only ("zero-shot") adapter: SFT on random decisions in the protocol.
    pub format_sft: SftSpec,
    /// Training questions whose no-intervention rollouts fill the state bank.
    pub bank_tasks: usize,
    /// `adapter`, `reference`, `executor`, `steer`, `executor_sampling`, `max_len` and `seed`
    /// are set by the pipeline.
    pub train: SteerTrainConfig,
    /// Filtered behaviour cloning (SFT on the training run's outputs that beat no
    /// intervention).
    pub bc: SftSpec,
    pub eval: SteerEvalSpec,
}

impl SteeringProfile {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let p: Self = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        p.check().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(p)
    }

    pub fn check(&self) -> Result<()> {
        if self.eval.seeds.is_empty() || self.eval.tasks == 0 || self.eval.parallel == 0 {
            return Err("eval needs seeds, tasks > 0 and parallel > 0".into());
        }
        let tau_ok = |t: f64| t > 0.0 && t < 1.0;
        if !tau_ok(self.steer.tau) {
            return Err(format!("steer.tau = {} is outside (0, 1)", self.steer.tau));
        }
        if let Some(t) = self.eval.taus.iter().find(|t| !tau_ok(**t)) {
            return Err(format!("eval.taus holds {t}, outside (0, 1)"));
        }
        if self.qa.train_max_turns == 0 || self.qa.eval_max_turns == 0 || self.qa.topk == 0 {
            return Err("qa: topk and turn limits must be positive".into());
        }
        if self.bank_tasks == 0 || self.executor.demos == 0 || self.transfer.demos == 0 {
            return Err("bank_tasks and executor demos must be positive".into());
        }
        Ok(())
    }
}

/// The comparison methods of METHODS.md B, in table order.
pub const METHODS: [&str; 6] = [
    "none",
    "zero-shot",
    "planning",
    "verification",
    "filtered-bc",
    "rl",
];

/// What each method is, for tables and figures.
pub fn method_label(m: &str) -> &'static str {
    match m {
        "none" => "No steering",
        "zero-shot" => "Zero-shot steering",
        "planning" => "Planning supervisor",
        "verification" => "Verification supervisor",
        "filtered-bc" => "Filtered BC steering",
        "rl" => "RL steering (ours)",
        _ => "?",
    }
}

/// One evaluated episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QaResult {
    pub task: Task,
    pub seed: u64,
    pub hops: Option<usize>,
    pub f1: f64,
    pub em: f64,
    pub answered: bool,
    /// Executor turns (rejected answers included), interventions applied.
    pub turns: usize,
    pub interventions: usize,
    pub executor_tokens: usize,
}

/// One evaluation: a method with an executor at a τ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub method: String,
    /// `main` or `transfer`.
    pub executor: String,
    pub tau: Option<f64>,
    pub results: Vec<QaResult>,
    /// Slow-path runs of the supervisor over all episodes (planning, verification and every
    /// triggered gate).
    pub slow_path_runs: usize,
}

/// Everything a run measured (the report's input).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteeringRun {
    pub evaluations: Vec<Evaluation>,
    /// The steering training curve.
    pub curve: Vec<crate::steer_train::RoundPoint>,
    pub bank_states: usize,
    pub wall_seconds: f64,
}

fn qa_env(world: &World, spec: &QaSpec, max_turns: usize) -> Result<QaEnv> {
    QaEnv::synthetic(
        world,
        QaEnvConfig {
            topk: spec.topk,
            max_turns,
        },
    )
    .map_err(|e| format!("qa environment: {e}"))
}

fn forks(env: &QaEnv, n: usize) -> Vec<Box<dyn Env>> {
    (0..n.max(1))
        .map(|_| Box::new(env.fork()) as Box<dyn Env>)
        .collect()
}

/// The pre-training corpus: the world's documents, the demonstrations' prompts with turns, and
/// the steering protocol over the demonstrations' states (random decisions, as in
/// [`format_pairs`]) — an instruct model has seen such protocols before it is asked to follow
/// one; without it the tiny backbone never learns to emit the protocol's tokens (its output
/// embeddings for them stay untrained, and LoRA does not adapt them).
fn corpus_text(world: &World, demos: &[&[SearchDemo]], steer: &SteerConfig, seed: u64) -> String {
    let mut out = String::new();
    let mut doc = |s: &str| {
        out.push_str(s.trim_end());
        out.push_str("\n\n");
    };
    for d in &world.documents {
        doc(&d.contents());
    }
    for set in demos {
        for demo in set.iter() {
            for (p, t) in demo.pairs().into_iter().chain(demo.answer_now_pairs()) {
                doc(&format!("{p}{t}"));
            }
        }
    }
    let states: Vec<BankState> = demos
        .first()
        .into_iter()
        .flat_map(|set| set.iter().enumerate())
        .flat_map(|(g, demo)| demo_states(demo, g))
        .collect();
    for (p, t) in format_pairs(&states, steer, true, seed) {
        doc(&format!("{p}{t}"));
    }
    out
}

/// Runs the pipeline of `profile` and writes `<out>/steering.{md,json,csv}` and figures.
pub fn run(profile: &SteeringProfile, cfg: &RunConfig) -> Result<Report> {
    profile.check()?;
    run_pipeline(profile, cfg, |st| run_stages(profile, cfg, st))
}

fn run_stages(p: &SteeringProfile, cfg: &RunConfig, st: &mut Stages<'_>) -> Result<()> {
    let started = Instant::now();
    let world = World::generate(&p.world).map_err(|e| format!("world: {e}"))?;
    let train_env = qa_env(&world, &p.qa, p.qa.train_max_turns)?;
    let train_tasks = train_env.tasks(Split::Train).map_err(|e| e.to_string())?;

    // 1. Demonstrations for both executors.
    let mut demo_sets = Vec::new();
    for (name, spec) in [("demos", &p.executor), ("demos-transfer", &p.transfer)] {
        let key = serde_json::json!({"world": p.world, "qa": p.qa, "demos": spec.demos,
            "drift": spec.drift});
        let dir = st.run(name, key, |dir| {
            let mut env = train_env.fork();
            let demos = demonstrations(&mut env, &spread(&train_tasks, spec.demos), &spec.drift)?;
            write_jsonl(&dir.join("demos.jsonl"), &demos).map_err(|e| e.to_string())
        })?;
        demo_sets.push((
            dir.clone(),
            read_jsonl::<SearchDemo>(&dir.join("demos.jsonl"))?,
        ));
    }

    // 2. The backbone.
    let sets: Vec<&[SearchDemo]> = demo_sets.iter().map(|(_, d)| d.as_slice()).collect();
    let corpus = corpus_text(&world, &sets, &p.steer, p.seed);
    // The key covers the corpus itself (a hash), so any change to what goes into it retrains.
    let digest = {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(corpus.as_bytes());
        h.iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let key = serde_json::json!({"backbone": p.backbone, "corpus_sha256": digest});
    let (backbone_dir, backbone_key) = backbone_stage(st, &p.backbone, key, || Ok(corpus))?;
    let tok =
        Tokenizer::load(&backbone_dir).map_err(|e| format!("{}: {e}", backbone_dir.display()))?;
    let mut lm = CausalLm::load(&backbone_dir, &cfg.device)
        .map_err(|e| format!("{}: {e}", backbone_dir.display()))?;

    // 3. The frozen executors.
    let mut executor_dirs = Vec::new();
    for ((adapter, spec), (demo_dir, demos)) in [
        ("executor", &p.executor),
        ("executor-transfer", &p.transfer),
    ]
    .into_iter()
    .zip(&demo_sets)
    {
        let sft = sft_config(&spec.sft, adapter, spec.seed);
        let key = serde_json::json!({"backbone": backbone_key, "demos": Stages::upstream(demo_dir),
            "sft": sft, "max_len": p.max_len});
        let dir = sft_stage(st, &mut lm, adapter, key, &sft, cfg.progress, || {
            executor_examples(&tok, demos, p.max_len)
        })?;
        executor_dirs.push(Stages::upstream(&dir));
    }

    // 4. The state bank: the executor alone on training questions.
    let bank_key = serde_json::json!({"executor": executor_dirs[0], "tasks": p.bank_tasks,
        "sampling": p.executor_sampling, "seed": p.seed, "qa": p.qa});
    let bank_dir = st.run("bank", bank_key, |dir| {
        let frozen = lm.valid();
        let id = frozen.adapter_id("executor").map_err(|e| e.to_string())?;
        let mut executor = p.executor_sampling.policy(&frozen, &tok, Some(id), p.seed);
        let mut envs = forks(&train_env, p.train.parallel);
        let states = collect_states(
            &mut envs,
            &spread(&train_tasks, p.bank_tasks),
            &mut executor,
            p.seed,
        )
        .map_err(|e| e.to_string())?;
        write_jsonl(&dir.join("bank.jsonl"), &states).map_err(|e| e.to_string())
    })?;
    let bank: Vec<BankState> = read_jsonl(&bank_dir.join("bank.jsonl"))?;

    // 5. The format-only ("zero-shot") steering adapter.
    let zero = sft_config(&p.format_sft, "steer-zero", p.seed);
    let key = serde_json::json!({"bank": Stages::upstream(&bank_dir), "sft": zero,
        "steer": p.steer, "max_len": p.max_len});
    let zero_dir = sft_stage(st, &mut lm, "steer-zero", key, &zero, cfg.progress, || {
        format_examples(&tok, &bank, &p.steer, p.max_len, p.seed)
    })?;

    // 6. Steering training.
    let mut train = p.train.clone();
    train.adapter = "steer-rl".into();
    train.reference = "steer-zero".into();
    train.steer = p.steer.clone();
    train.max_len = p.max_len;
    train.seed = p.seed;
    let key = serde_json::json!({"zero": Stages::upstream(&zero_dir), "train": train,
        "executor": executor_dirs[0], "sampling": p.executor_sampling});
    let rl_dir = st.run("steer-rl", key, |dir| {
        let mut envs = forks(&train_env, train.parallel);
        let opts = RunOptions {
            progress: cfg.progress,
            stop_after: None,
        };
        // The executor is frozen: it plays from a copy of the model taken before training.
        let frozen = lm.valid();
        let id = frozen.adapter_id("executor").map_err(|e| e.to_string())?;
        let mut executor = p.executor_sampling.policy(&frozen, &tok, Some(id), p.seed);
        lm = train_steering(
            take(&mut lm),
            &tok,
            &mut envs,
            &mut executor,
            &bank,
            &train,
            dir,
            &opts,
        )
        .map_err(|e| e.to_string())?
        .0;
        Ok(())
    })?;
    load(&mut lm, "steer-rl", &rl_dir.join("adapter"))?;
    let curve = read_jsonl(&rl_dir.join("curve.jsonl"))?;

    // 7. Filtered behaviour cloning from the training run's samples.
    let bc = sft_config(&p.bc, "steer-bc", p.seed);
    let key = serde_json::json!({"rl": Stages::upstream(&rl_dir), "sft": bc});
    sft_stage(st, &mut lm, "steer-bc", key, &bc, cfg.progress, || {
        let records: Vec<StateRecord> = read_jsonl(&rl_dir.join("samples.jsonl"))?;
        let mut ex = filtered_bc_examples(&tok, &bank, &records, &p.steer, p.max_len)?;
        // The protocol as well, so that BC differs from the zero-shot agent only by its
        // filtered data.
        ex.extend(format_examples(&tok, &bank, &p.steer, p.max_len, p.seed)?);
        Ok(ex)
    })?;

    // 8. Evaluation.
    let eval_env = qa_env(&world, &p.qa, p.qa.eval_max_turns)?;
    let test = spread(
        &eval_env.tasks(Split::Id).map_err(|e| e.to_string())?,
        p.eval.tasks,
    );
    let mut jobs: Vec<(String, &str, Option<f64>)> = METHODS
        .iter()
        .map(|m| {
            let tau = matches!(*m, "zero-shot" | "filtered-bc" | "rl").then_some(p.steer.tau);
            (m.to_string(), "main", tau)
        })
        .collect();
    for &t in &p.eval.taus {
        if t != p.steer.tau {
            jobs.push(("rl".into(), "main", Some(t)));
        }
    }
    for m in ["none", "zero-shot", "rl"] {
        let tau = (m != "none").then_some(p.steer.tau);
        jobs.push((m.into(), "transfer", tau));
    }
    let mut evaluations = Vec::new();
    let upstream = |m: &str| match m {
        "none" => String::new(),
        "rl" => Stages::upstream(&rl_dir),
        "filtered-bc" => format!("bc-of-{}", Stages::upstream(&rl_dir)),
        _ => Stages::upstream(&zero_dir),
    };
    for (method, executor, tau) in jobs {
        let exec_dir = if executor == "main" {
            &executor_dirs[0]
        } else {
            &executor_dirs[1]
        };
        let key = serde_json::json!({"method": method, "executor": exec_dir, "tau": tau,
            "steer": upstream(&method), "eval": p.eval.tasks, "seeds": p.eval.seeds,
            "steer_config": p.steer, "sampling": p.executor_sampling, "qa": p.qa});
        let tau_tag = tau.map(|t| format!("-tau{t}")).unwrap_or_default();
        let name = format!("eval-{method}-{executor}{tau_tag}");
        let dir = st.run(&name, key, |dir| {
            let (results, slow_path_runs) =
                evaluate(&lm, &tok, &eval_env, &test, p, &method, executor, tau)?;
            let e = Evaluation {
                method: method.clone(),
                executor: executor.into(),
                tau,
                results,
                slow_path_runs,
            };
            write_json(&dir.join("evaluation.json"), &e)
        })?;
        evaluations.push(read_json(&dir.join("evaluation.json"))?);
    }
    let run = SteeringRun {
        evaluations,
        curve,
        bank_states: bank.len(),
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    crate::steering_report::write_all(&cfg.out, p, &run, &st.records)
}

/// Plays `tasks` once per evaluation seed with `method` steering the executor.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    lm: &CausalLm,
    tok: &Tokenizer,
    env: &QaEnv,
    tasks: &[Task],
    p: &SteeringProfile,
    method: &str,
    executor: &str,
    tau: Option<f64>,
) -> Result<(Vec<QaResult>, usize)> {
    let lm = lm.valid();
    let exec_name = if executor == "main" {
        "executor"
    } else {
        "executor-transfer"
    };
    let exec = lm.adapter_id(exec_name).map_err(|e| e.to_string())?;
    let steer_adapter = match method {
        "none" => None,
        "rl" => Some("steer-rl"),
        "filtered-bc" => Some("steer-bc"),
        "zero-shot" | "planning" | "verification" => Some("steer-zero"),
        other => return Err(format!("unknown steering method `{other}`")),
    };
    let schedule = match method {
        "planning" => Schedule::PlanFirst,
        "verification" => Schedule::Verify,
        _ => Schedule::Gated,
    };
    let mut envs = forks(env, p.eval.parallel);
    let mut out = Vec::new();
    let mut slow_runs = 0;
    for &seed in &p.eval.seeds {
        for (c, chunk) in tasks.chunks(p.eval.parallel).enumerate() {
            let s = seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
            let mut policy = p.executor_sampling.policy(&lm, tok, Some(exec), s);
            let envs = &mut envs[..chunk.len()];
            let episodes = match steer_adapter {
                None => rollout_search(envs, chunk, &mut policy, None, method)?,
                Some(a) => {
                    let mut config = p.steer.clone();
                    config.tau = tau.unwrap_or(p.steer.tau);
                    config.seed = p.steer.seed ^ s;
                    let id = lm.adapter_id(a).map_err(|e| e.to_string())?;
                    let mut agent =
                        SteeringAgent::new(&lm, tok, Some(id), config)?.with_schedule(schedule);
                    let eps = rollout_search(envs, chunk, &mut policy, Some(&mut agent), method)?;
                    slow_runs += agent.log.iter().filter(|r| r.output.is_some()).count();
                    eps
                }
            };
            for (task, ep) in chunk.iter().zip(episodes) {
                let q = env.task(task).map_err(|e| e.to_string())?;
                let answer = ep
                    .turns
                    .iter()
                    .rev()
                    .find_map(|(t, _)| match parse_call(t) {
                        Some(Call::Answer(a)) if ep.answered => Some(a),
                        _ => None,
                    });
                let (f1, em) = hier_envs::qa::score::score(answer.as_deref(), &q.answers);
                out.push(QaResult {
                    task: task.clone(),
                    seed,
                    hops: q.hops,
                    f1,
                    em,
                    answered: ep.answered,
                    turns: ep.turns.len(),
                    interventions: ep.interventions.len(),
                    executor_tokens: ep.trace.prompt_tokens + ep.trace.generated_tokens,
                });
            }
        }
    }
    Ok((out, slow_runs))
}

/// `configs/steering/<name>.toml` under the workspace root `root`.
pub fn profile_path(root: &Path, name: &str) -> PathBuf {
    root.join("configs")
        .join("steering")
        .join(format!("{name}.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parses_and_bad_input_names_the_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for name in ["smoke", "small", "paper"] {
            let p = SteeringProfile::from_file(&profile_path(&root, name)).unwrap();
            assert_eq!(p.name, name);
        }
        let tmp = tempfile::tempdir().unwrap();
        let bad = tmp.path().join("bad.toml");
        let text = std::fs::read_to_string(profile_path(&root, "smoke")).unwrap();
        std::fs::write(
            &bad,
            text.replace("tau = 0.5\nhistory", "tau = 1.5\nhistory"),
        )
        .unwrap();
        let e = SteeringProfile::from_file(&bad).unwrap_err();
        assert!(e.contains("bad.toml") && e.contains("steer.tau"), "{e}");
        std::fs::write(&bad, text.replace("bank_tasks = 3", "bank_taks = 3")).unwrap();
        let e = SteeringProfile::from_file(&bad).unwrap_err();
        assert!(e.contains("bad.toml") && e.contains("bank_taks"), "{e}");
    }
}
