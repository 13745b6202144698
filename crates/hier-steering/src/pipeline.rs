//! `reproduce steering`: METHODS.md B end to end as cached stages ([`hier_train::stages`]) —
//! the synthetic multi-hop world and its retrieval environment, search demonstrations with
//! drift, the backbone (a tiny one pre-trained from scratch on the world's text, or an HF
//! checkpoint), the frozen executors (the training one and a second one for transfer), the
//! state bank, the format-only ("zero-shot") steering adapter, steering training (GRPO with the
//! baseline in the group + RankNet), filtered behaviour cloning, and evaluation of every method
//! on the test questions — then `steering.{md,json,csv}` and figures
//! ([`crate::report`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::tensor::Device;
use hier_backbone::{CausalLm, PrefillStats, Tokenizer};
use hier_envs::qa::corpus::Document;
use hier_envs::qa::env::{Call, QaEnv, parse_call};
use hier_envs::{Env, Split, Task};

use crate::data::{QaData, hex};
use crate::error::{Error, Result};
pub use crate::profile::{
    ExecutorSpec, QaFiles, QaSpec, SteerEvalSpec, SteerMethod, SteeringProfile, profile_path,
};
use crate::prompting::Render;
pub use crate::results::{Evaluation, QaResult, SteeringRun};
use crate::search_agent::{
    CALL_TAGS, ExecutorPrompting, SearchDemo, WORKED_EXAMPLE, demonstrations, rollout_search,
};
use crate::sft_examples::{
    demo_states, executor_examples, filtered_bc_examples, format_examples, format_pairs,
};
use crate::steer_agent::{Schedule, SteerConfig, SteeringAgent};
use crate::steer_train::{
    BankState, ExecutorSampling, StateRecord, collect_states, train_steering,
};
use hier_train::SharedErrors as _;
use hier_train::eval::spread;
use hier_train::policy::{BackbonePolicy, write_prefill_report};
use hier_train::runlog::write_jsonl;
use hier_train::sft::sft_config;
use hier_train::sft::train_adapter;
use hier_train::stages::{
    Report, RunConfig, Stages, backbone_stage, load, read_json, read_jsonl, run_pipeline,
    sft_stage, take, write_json,
};
use hier_train::upstream;

/// `n` forks of `env` (at least one), for episodes played side by side.
pub(crate) fn forks(env: &QaEnv, n: usize) -> Vec<Box<dyn Env>> {
    (0..n.max(1))
        .map(|_| Box::new(env.fork()) as Box<dyn Env>)
        .collect()
}

/// The pre-training corpus of a tiny backbone: the passages, the demonstrations' prompts with
/// turns, and the steering protocol over the first demonstration set's states (random
/// decisions, as in [`format_pairs`]) — an instruct model has seen such protocols before it is
/// asked to follow one; without it the tiny backbone never learns to emit the protocol's tokens
/// (its output embeddings for them stay untrained, and LoRA does not adapt them).
fn corpus_text(
    documents: &[Document],
    demos: &[&[SearchDemo]],
    steer: &SteerConfig,
    seed: u64,
) -> String {
    let mut out = String::new();
    let mut doc = |s: &str| {
        out.push_str(s.trim_end());
        out.push_str("\n\n");
    };
    for d in documents {
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

/// A frozen executor of the run: where its model and adapter are. Executors on their own
/// backbones are loaded only while they play, so that several large checkpoints are not in
/// memory at once.
struct Executor {
    name: String,
    /// Its own backbone's directory; `None`: the shared backbone.
    backbone: Option<PathBuf>,
    /// Its SFT adapter's name and directory, if any (on the shared backbone it is installed
    /// in the shared model already).
    adapter: Option<(String, PathBuf)>,
    chat: bool,
    /// Shown [`crate::search_agent::WORKED_EXAMPLE`], its replies started at a call.
    worked_example: bool,
    /// What later stages' keys say of it.
    key: serde_json::Value,
}

/// An executor ready to play: its own model (an inference copy) when it has one.
struct Player<'e> {
    executor: &'e Executor,
    own: Option<(CausalLm, Tokenizer)>,
}

impl Executor {
    fn load(&self, device: &Device) -> Result<Player<'_>> {
        let own = match &self.backbone {
            None => None,
            Some(dir) => {
                let (mut lm, tok) = load_model(dir, device)?;
                if let Some((name, adapter)) = &self.adapter {
                    load(&mut lm, name, adapter)?;
                }
                Some((lm.valid(), tok))
            }
        };
        Ok(Player {
            executor: self,
            own,
        })
    }
}

impl Player<'_> {
    /// Its sampling policy, keeping `cache_mib` MiB of context across calls; `shared` is an
    /// inference copy of the shared backbone.
    fn policy<'a>(
        &'a self,
        shared: &'a CausalLm,
        shared_tok: &'a Tokenizer,
        sampling: &ExecutorSampling,
        seed: u64,
        cache_mib: usize,
    ) -> Result<BackbonePolicy<'a>> {
        let (lm, tok) = match &self.own {
            Some((lm, tok)) => (lm, tok),
            None => (shared, shared_tok),
        };
        let id = match &self.executor.adapter {
            Some((a, _)) => Some(lm.adapter_id(a)?),
            None => None,
        };
        let mut policy = sampling
            .policy(lm, tok, id, seed)
            .with_prefix_cache_mib(cache_mib);
        if self.executor.chat {
            // Rendered by `prompting`: one assistant turn, ending at a call's closing tag or
            // the template's end of turn.
            policy.stop_strings = CALL_TAGS.iter().map(|t| format!("</{t}>")).collect();
            policy.stop_tokens.push(tok.end_of_turn()?);
        }
        Ok(policy)
    }

    /// How its prompts are written and rendered (`shared_tok`: the shared backbone's
    /// tokenizer, used when it has no backbone of its own).
    fn prompting<'a>(&'a self, shared_tok: &'a Tokenizer) -> ExecutorPrompting<'a> {
        let tok = self.own.as_ref().map_or(shared_tok, |(_, t)| t);
        ExecutorPrompting {
            worked_example: self.executor.worked_example,
            render: match self.executor.chat {
                true => Render::Chat(tok),
                false => Render::Raw,
            },
        }
    }
}

/// The executor's player in `slot`, loaded first if it is not yet.
fn ready<'s, 'e>(
    slot: &'s mut Option<Player<'e>>,
    executor: &'e Executor,
    device: &Device,
) -> Result<&'s Player<'e>> {
    if slot.is_none() {
        *slot = Some(executor.load(device)?);
    }
    Ok(slot.as_ref().expect("loaded above"))
}

fn load_model(dir: &Path, device: &Device) -> Result<(CausalLm, Tokenizer)> {
    let tok = Tokenizer::load(dir)?;
    let lm = CausalLm::load(dir, device)?;
    Ok((lm, tok))
}

/// Runs the pipeline of `profile` and writes `<out>/steering.{md,json,csv}` and figures.
pub fn run(profile: &SteeringProfile, cfg: &RunConfig) -> Result<Report> {
    profile.check()?;
    run_pipeline(profile, cfg, |st| run_stages(profile, cfg, st))
}

fn run_stages(p: &SteeringProfile, cfg: &RunConfig, st: &mut Stages<'_>) -> Result<()> {
    let started = Instant::now();
    let data = QaData::load(p.world.as_ref(), p.files.as_ref(), &p.qa, p.pretrains())?;
    let train_env = &data.train_env;
    let train_tasks = train_env.tasks(Split::Train)?;

    // 1. Demonstrations for the executors trained by SFT (the synthetic world's gold paths).
    let mut demo_sets: Vec<Option<(PathBuf, Vec<SearchDemo>)>> = Vec::new();
    for spec in p.executors() {
        let (Some(_), Some(drift)) = (&spec.sft, &spec.drift) else {
            demo_sets.push(None);
            continue;
        };
        let name = spec.tagged("demos");
        let key = serde_json::json!({"world": p.world, "qa": p.qa, "demos": spec.demos,
            "drift": drift});
        let dir = st.run(&name, key, |dir| -> Result<()> {
            let mut env = train_env.fork();
            let demos = demonstrations(&mut env, &spread(&train_tasks, spec.demos), drift)?;
            Ok(write_jsonl(&dir.join("demos.jsonl"), &demos)?)
        })?;
        let demos = read_jsonl::<SearchDemo>(&dir.join("demos.jsonl"))?;
        demo_sets.push(Some((dir, demos)));
    }

    // 2. The backbone (the steering agent's, and the executors' unless they have their own).
    let sets: Vec<&[SearchDemo]> = demo_sets
        .iter()
        .flatten()
        .map(|(_, d)| d.as_slice())
        .collect();
    let corpus = p
        .pretrains()
        .then(|| corpus_text(&data.documents, &sets, &p.steer, p.seed));
    // Pre-training keys cover the corpus itself (a hash), so any change to it retrains.
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
    let (mut lm, tok) = load_model(&backbone_dir, &cfg.device)?;

    // 3. The frozen executors.
    let mut executors = Vec::new();
    for (spec, demos) in p.executors().zip(&demo_sets) {
        let adapter = spec.adapter();
        let own = match &spec.backbone {
            None => None,
            Some(b) => {
                let key = serde_json::json!({"backbone": b, "corpus_sha256": digest});
                let stage = format!("backbone-{adapter}");
                Some(backbone_stage(st, &stage, b, key, corpus_of)?)
            }
        };
        let model_key = own
            .as_ref()
            .map_or(backbone_key.clone(), |(_, k)| k.clone());
        let (key, sft_dir) = match (&spec.sft, demos) {
            (Some(s), Some((demo_dir, demos))) => {
                let sft = sft_config(s, &adapter, spec.seed);
                let key = serde_json::json!({"backbone": model_key, "demos": Stages::upstream(demo_dir),
                    "sft": sft, "max_len": p.max_len});
                let dir = match &own {
                    None => sft_stage(st, &mut lm, &adapter, key, &sft, || {
                        executor_examples(&tok, demos, p.max_len)
                    })?,
                    // Its own backbone: loaded only if the stage runs (and again when it plays).
                    Some((model_dir, _)) => st.run(&adapter, key, |dir| -> Result<()> {
                        let (own_lm, own_tok) = load_model(model_dir, &cfg.device)?;
                        let ex = executor_examples(&own_tok, demos, p.max_len)?;
                        let opts = cfg.run_options();
                        train_adapter(own_lm, &ex, &sft, dir, &opts)?;
                        Ok(())
                    })?,
                };
                (serde_json::json!(Stages::upstream(&dir)), Some(dir))
            }
            _ => (serde_json::json!({"backbone": model_key}), None),
        };
        let key = match (spec.chat, spec.worked_example) {
            (false, false) => key,
            (true, false) => serde_json::json!({"executor": key, "chat": true}),
            (chat, true) => serde_json::json!({"executor": key, "chat": chat,
                "worked_example": WORKED_EXAMPLE}),
        };
        executors.push(Executor {
            name: spec.name.clone(),
            backbone: own.map(|(dir, _)| dir),
            adapter: sft_dir.map(|d| (adapter, d.join("adapter"))),
            chat: spec.chat,
            worked_example: spec.worked_example,
            key,
        });
    }
    // Loaded when a stage that plays them runs.
    let mut players: Vec<Option<Player<'_>>> = executors.iter().map(|_| None).collect();

    // 4. The state bank: the executor alone on training questions.
    // Episodes played together share the executor's sampling calls, so `parallel` is part of
    // what the bank is (as it is of the evaluations below).
    let bank_key = serde_json::json!({"executor": executors[0].key, "tasks": p.bank_tasks,
        "sampling": p.executor_sampling, "seed": p.seed, "qa": p.qa, "data": data.key,
        "parallel": p.train.parallel});
    let bank_dir = st.run("bank", bank_key, |dir| -> Result<()> {
        let frozen = lm.valid();
        let main = ready(&mut players[0], &executors[0], &cfg.device)?;
        let mut executor = main.policy(
            &frozen,
            &tok,
            &p.executor_sampling,
            p.seed,
            cfg.prefix_cache_mib,
        )?;
        let mut envs = forks(train_env, p.train.parallel);
        let states = collect_states(
            &mut envs,
            &spread(&train_tasks, p.bank_tasks),
            &mut executor,
            main.prompting(&tok),
            p.seed,
        )?;
        Ok(write_jsonl(&dir.join("bank.jsonl"), &states)?)
    })?;
    let bank: Vec<BankState> = read_jsonl(&bank_dir.join("bank.jsonl"))?;
    if bank.is_empty() {
        return Err(Error::invalid(format!(
            "{}: the executor's rollouts left no states to steer",
            bank_dir.display()
        )));
    }

    // 5. The format-only ("zero-shot") steering adapter.
    let zero = sft_config(&p.format_sft, "steer-zero", p.seed);
    let key = serde_json::json!({"bank": Stages::upstream(&bank_dir), "sft": zero,
        "steer": p.steer, "max_len": p.max_len});
    let zero_dir = sft_stage(st, &mut lm, "steer-zero", key, &zero, || {
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
        "executor": executors[0].key, "sampling": p.executor_sampling});
    let rl_dir = st.run("steer-rl", key, |dir| -> Result<()> {
        let started = std::time::Instant::now();
        let mut envs = forks(train_env, train.parallel);
        let opts = cfg.run_options();
        // The executor is frozen: it plays from a copy of the model taken before training.
        let frozen = lm.valid();
        let main = ready(&mut players[0], &executors[0], &cfg.device)?;
        let mut executor = main.policy(
            &frozen,
            &tok,
            &p.executor_sampling,
            p.seed,
            cfg.prefix_cache_mib,
        )?;
        lm = train_steering(
            take(&mut lm),
            &tok,
            &mut envs,
            &mut executor,
            main.prompting(&tok),
            &bank,
            &train,
            dir,
            &opts,
        )?
        .0;
        let seconds = started.elapsed().as_secs_f64();
        let stats = executor.prefill_stats();
        Ok(write_prefill_report(
            dir,
            cfg.prefix_cache_mib,
            stats,
            seconds,
        )?)
    })?;
    load(&mut lm, "steer-rl", &rl_dir.join("adapter"))?;
    let curve = read_jsonl(&rl_dir.join("curve.jsonl"))?;

    // 7. Filtered behaviour cloning from the training run's samples.
    let bc = sft_config(&p.bc, "steer-bc", p.seed);
    let key = serde_json::json!({"rl": Stages::upstream(&rl_dir), "sft": bc});
    let bc_dir = sft_stage(st, &mut lm, "steer-bc", key, &bc, || -> Result<_> {
        let records: Vec<StateRecord> = read_jsonl(&rl_dir.join("samples.jsonl"))?;
        let mut ex = filtered_bc_examples(&tok, &bank, &records, &p.steer, p.max_len)?;
        // The protocol as well, so that BC differs from the zero-shot agent only by its
        // filtered data.
        ex.extend(format_examples(&tok, &bank, &p.steer, p.max_len, p.seed)?);
        Ok(ex)
    })?;

    // 8. Evaluation: every method with the training executor, the τ sweep, and transfer.
    let test = data.test_tasks(p.eval.tasks)?;
    // The stage of the steering adapter each method plays (none: no steering).
    let steer_stage = |m: SteerMethod| match m {
        SteerMethod::None => None,
        SteerMethod::Rl => Some(&rl_dir),
        SteerMethod::FilteredBc => Some(&bc_dir),
        SteerMethod::ZeroShot | SteerMethod::Planning | SteerMethod::Verification => {
            Some(&zero_dir)
        }
    };
    // What an evaluation's key says of it: filtered BC's names the RL stage it was filtered
    // from, as its keys always have.
    let steer_key = |m: SteerMethod| match m {
        SteerMethod::FilteredBc => format!("bc-of-{}", Stages::upstream(&rl_dir)),
        _ => steer_stage(m).map_or_else(String::new, |d| Stages::upstream(d)),
    };
    // The adapters evaluations play, by content (keys name them by their settings only),
    // each hashed once.
    let stages_root = cfg.out.join("stages");
    let steer_names = [&rl_dir, &bc_dir, &zero_dir].map(|d| Stages::upstream(d));
    let steer_digests = upstream::adapter_digests(&stages_root, &steer_names)?;
    let mut evaluations = Vec::new();
    for (x, (executor, player)) in executors.iter().zip(&mut players).enumerate() {
        let executor_stage: Vec<String> = (executor.adapter.iter())
            .filter_map(|(_, adapter)| adapter.parent())
            .map(Stages::upstream)
            .collect();
        let executor_digests = upstream::adapter_digests(&stages_root, &executor_stage)?;
        let jobs: Vec<(SteerMethod, Option<f64>)> = if x == 0 {
            let mut jobs: Vec<(SteerMethod, Option<f64>)> = SteerMethod::ALL
                .iter()
                .map(|&m| (m, m.gated().then_some(p.steer.tau)))
                .collect();
            jobs.extend(
                p.eval
                    .taus
                    .iter()
                    .filter(|t| **t != p.steer.tau)
                    .map(|t| (SteerMethod::Rl, Some(*t))),
            );
            jobs
        } else {
            vec![
                (SteerMethod::None, None),
                (SteerMethod::ZeroShot, Some(p.steer.tau)),
                (SteerMethod::Rl, Some(p.steer.tau)),
            ]
        };
        for (method, tau) in jobs {
            let mut key = serde_json::json!({"method": method, "executor": executor.key,
                "tau": tau, "steer": steer_key(method), "eval": p.eval.tasks,
                "parallel": p.eval.parallel, "seeds": p.eval.seeds, "steer_config": p.steer, "sampling": p.executor_sampling,
                "qa": p.qa});
            if data.world.is_none() {
                // The world is in the executor's key through its demonstrations; files are not.
                key["data"] = data.key.clone();
            }
            let tau_tag = tau.map(|t| format!("-tau{t}")).unwrap_or_default();
            let name = format!("eval-{method}-{}{tau_tag}", executor.name);
            let mut digests = executor_digests.clone();
            if let Some(d) = steer_stage(method).map(|d| Stages::upstream(d))
                && let Some(hex) = steer_digests.get(&d)
            {
                digests.insert(d, hex.clone());
            }
            let dir = st.run(&name, key, |dir| -> Result<()> {
                upstream::record(dir, &digests)?;
                let player = ready(player, executor, &cfg.device)?;
                let started = std::time::Instant::now();
                let (results, slow_path_runs, prefill) = evaluate(
                    &lm,
                    &tok,
                    &data,
                    &test,
                    p,
                    method,
                    player,
                    tau,
                    cfg.prefix_cache_mib,
                )?;
                let e = Evaluation {
                    method,
                    executor: executor.name.clone(),
                    tau,
                    results,
                    slow_path_runs,
                };
                let seconds = started.elapsed().as_secs_f64();
                write_prefill_report(dir, cfg.prefix_cache_mib, prefill, seconds)?;
                Ok(write_json(&dir.join("evaluation.json"), &e)?)
            })?;
            // Refuses an evaluation of adapters trained again since under the same names.
            upstream::check(&dir, &digests)?;
            evaluations.push(read_json(&dir.join("evaluation.json"))?);
        }
        // Done with this executor: free its model before the next one loads.
        *player = None;
    }
    let run = SteeringRun {
        evaluations,
        curve,
        bank_states: bank.len(),
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    crate::report::write_all(&cfg.out, p, &run, st.records())
}

/// Plays `tasks` once per evaluation seed with `method` steering `executor`; returns the
/// results, the slow path's runs and what the executor's prompts cost.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    lm: &CausalLm,
    tok: &Tokenizer,
    data: &QaData,
    tasks: &[Task],
    p: &SteeringProfile,
    method: SteerMethod,
    executor: &Player<'_>,
    tau: Option<f64>,
    cache_mib: usize,
) -> Result<(Vec<QaResult>, usize, PrefillStats)> {
    let lm = lm.valid();
    let env = &data.eval_env;
    let steer_adapter = method.adapter();
    let schedule = match method {
        SteerMethod::Planning => Schedule::PlanFirst,
        SteerMethod::Verification => Schedule::Verify,
        _ => Schedule::Gated,
    };
    let mut envs = forks(env, p.eval.parallel);
    let mut out = Vec::new();
    let mut slow_runs = 0;
    let mut prefill = PrefillStats::default();
    for &seed in &p.eval.seeds {
        for (c, chunk) in tasks.chunks(p.eval.parallel).enumerate() {
            let s = seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
            let mut policy = executor.policy(&lm, tok, &p.executor_sampling, s, cache_mib)?;
            let prompting = executor.prompting(tok);
            let envs = &mut envs[..chunk.len()];
            let episodes = match steer_adapter {
                None => rollout_search(envs, chunk, &mut policy, prompting, None, method.name())?,
                Some(a) => {
                    let mut config = p.steer.clone();
                    config.tau = tau.unwrap_or(p.steer.tau);
                    config.seed = p.steer.seed ^ s;
                    let id = lm.adapter_id(a)?;
                    let mut agent = SteeringAgent::new(&lm, tok, Some(id), config)?
                        .with_schedule(schedule)
                        .with_prefix_cache_mib(cache_mib);
                    let eps = rollout_search(
                        envs,
                        chunk,
                        &mut policy,
                        prompting,
                        Some(&mut agent),
                        method.name(),
                    )?;
                    slow_runs += agent.log.iter().filter(|r| r.output.is_some()).count();
                    eps
                }
            };
            prefill.add(policy.prefill_stats());
            for (task, ep) in chunk.iter().zip(episodes) {
                let q = env.task(task)?;
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
                    test_set: data.test_set(task),
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
    Ok((out, slow_runs, prefill))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parses_and_bad_input_names_the_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for name in ["smoke", "small", "small-tiny", "paper", "paper-synthetic"] {
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
        let e = SteeringProfile::from_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.toml") && e.contains("steer.tau"), "{e}");
        std::fs::write(&bad, text.replace("bank_tasks = 3", "bank_taks = 3")).unwrap();
        let e = SteeringProfile::from_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.toml") && e.contains("bank_taks"), "{e}");
        // A worked example is for an executor playing as it is, not one SFT taught the plain
        // prompt.
        std::fs::write(
            &bad,
            text.replace("[executor]\n", "[executor]\nworked_example = true\n"),
        )
        .unwrap();
        let e = SteeringProfile::from_file(&bad).unwrap_err().to_string();
        assert!(
            e.contains("executor.worked_example") && e.contains("sft"),
            "{e}"
        );
    }
}
