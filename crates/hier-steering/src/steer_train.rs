//! Training the steering agent (METHODS.md B), the executor frozen:
//!
//! 1. **State bank**: the executor plays every training task without intervention; every
//!    state before one of its turns goes into a [`StateBank`], scored by the fast path's
//!    priority `v = σ(z)`.
//! 2. For `rounds` rounds: pick up to `k` states without replacement, ε-greedily by priority.
//! 3. For each picked state `s`: sample `G` slow-path outputs; from the state with each readable
//!    output applied, and from the state left alone, play `N` continuations each.
//!    `R̄_{s,j}` = mean final F1 after output `j`, `b_s` = mean F1 without intervention. An
//!    unreadable output (cut before `</action>`, malformed, or a `reject` — there is no message
//!    to send back before a turn) is not played, stays out of the group's statistics, gets no
//!    advantage, and is counted (`unreadable` in `curve.jsonl`).
//! 4. Fast path: `q(s) = mean_j |R̄_{s,j} − b_s|` over the readable outputs, RankNet on `z`
//!    over pairs of states of the same task among **every state scored so far** of the tasks
//!    picked this round — the round's own `k` states rarely share a task (`hier_steer::rank`).
//! 5. Slow path: GRPO with `b_s` in the group (`hier_steer::grpo::baseline_in_group_advantages`),
//!    per-token PPO-clip (`ppo_clip_loss`) on log-probabilities at the slow path's sampling
//!    temperature (as sampled; TRL scales the logits the same way), optional k3 KL to the start
//!    adapter.
//! 6. One optimiser step per epoch on `L_GRPO + w·L_rank`.
//!
//! The trained adapter starts as an exact copy of `reference` (the format-only "zero-shot"
//! adapter: [`crate::sft_examples::format_examples`]). Resumable per round: the checkpoint holds the adapter, the
//! optimiser, the bank's priorities and the round count; every round's samples go to
//! `samples.jsonl` (what filtered behaviour cloning learns from:
//! [`crate::sft_examples::filtered_bc_examples`]).

use std::collections::BTreeMap;
use std::path::Path;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::optim::GradientsParams;
use hier_backbone::burn::tensor::{Tensor, TensorData};
use hier_backbone::{CausalLm, Forward, SamplingConfig, Tokenizer};
use hier_envs::Env;
use hier_steer::bank::StateBank;
use hier_steer::grpo::{
    LossNormalisation, PpoConfig, StdScaling, baseline_in_group_advantages, ppo_clip_loss,
};
use hier_steer::rank::{q_target, ranknet_loss};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::search_agent::{ExecutorPrompting, Intervention};
use crate::steer_agent::{
    AnswerTokens, Protocol, SteerConfig, encode_prompt, log_odds, read_slow_path, sample_slow,
};
pub use crate::steered::{BankState, SearchProcess, SteeredProcess, collect_states};
use hier_train::SharedErrors as _;
use hier_train::metrics::mean;
use hier_train::optim::OptimConfig;
use hier_train::policy::{BackbonePolicy, TextPolicy};
use hier_train::prompt::encode_pair;
use hier_train::runlog::{RunOptions, append_line, write_jsonl};
use hier_train::sft::{SftExample, score_requests};
use hier_train::sft::{copy_adapter, padded, scores_of};
use hier_train::trainer::{LoopSpec, OPTIMIZER_FILE, TrainLoop, load_optimizer, save_optimizer};

/// How the frozen executor samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSampling {
    pub max_tokens: usize,
    pub max_prompt: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
}

impl ExecutorSampling {
    /// The executor as a policy over `lm` with adapter `adapter`, sampling from `seed`.
    pub fn policy<'a>(
        &self,
        lm: &'a CausalLm,
        tok: &'a Tokenizer,
        adapter: Option<hier_backbone::AdapterId>,
        seed: u64,
    ) -> BackbonePolicy<'a> {
        let mut p = BackbonePolicy::new(
            lm,
            tok,
            adapter,
            SamplingConfig {
                max_new_tokens: self.max_tokens,
                temperature: self.temperature,
                top_k: Some(self.top_k),
                top_p: Some(self.top_p),
                seed,
                use_cache: true,
            },
        );
        p.max_prompt = Some(self.max_prompt);
        p
    }
}

/// A steering training run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerTrainConfig {
    /// The trained adapter and the adapter it starts from, the KL reference
    /// (`reproduce steering` sets them: they may be left out there, as may `steer`, `max_len`
    /// and `seed`).
    #[serde(default)]
    pub adapter: String,
    #[serde(default)]
    pub reference: String,
    /// Rounds `m`, states per round `k`, selection ε.
    pub rounds: usize,
    pub states_per_round: usize,
    pub epsilon: f64,
    /// Slow-path samples per state `G`, continuations per branch `N`.
    pub samples: usize,
    pub continuations: usize,
    /// Optimiser steps per round (PPO epochs over the round's samples).
    pub epochs: usize,
    /// AdamW, schedule (over rounds) and clipping of the steering adapter.
    pub optim: OptimConfig,
    pub clip_eps: f32,
    /// k3 KL weight to `reference` (0: none).
    pub beta: f32,
    /// Weight of the ranking loss.
    pub rank_weight: f32,
    pub scale_std: bool,
    /// Re-score the bank's priorities with the current fast path every this many rounds.
    pub rescore_every: usize,
    /// Continuations played together.
    pub parallel: usize,
    /// Observation and slow-path sampling (`tau` is unused in training).
    #[serde(default)]
    pub steer: SteerConfig,
    /// Tokens per training sequence at most.
    #[serde(default)]
    pub max_len: usize,
    #[serde(default)]
    pub seed: u64,
}

impl SteerTrainConfig {
    fn validate(&self) -> Result<()> {
        if self.rounds == 0
            || self.states_per_round == 0
            || self.samples < 1
            || self.continuations == 0
            || self.epochs == 0
            || self.parallel == 0
            || self.rescore_every == 0
        {
            return Err(Error::invalid(
                "steering: rounds, states_per_round, samples, continuations, epochs, parallel \
                 and rescore_every must be positive"
                    .into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.epsilon) {
            return Err(Error::invalid(format!(
                "steering: epsilon {} is outside [0, 1]",
                self.epsilon
            )));
        }
        if self.adapter == self.reference {
            return Err(Error::invalid(
                "steering: the trained adapter must differ from its reference".into(),
            ));
        }
        if !(self.steer.temperature.is_finite() && self.steer.temperature > 0.0) {
            return Err(Error::invalid(format!(
                "steering: steer.temperature {} must be positive (training samples the slow \
                 path, and the PPO ratios are taken at that temperature)",
                self.steer.temperature
            )));
        }
        Ok(self.optim.check("train.optim", self.rounds)?)
    }
}

/// The fast path's `z` for each observation, in batches of `batch`.
pub fn fast_log_odds(
    lm: &CausalLm,
    tok: &Tokenizer,
    adapter: &str,
    protocol: &Protocol,
    observations: &[String],
    max_prompt: usize,
    batch: usize,
) -> Result<Vec<f32>> {
    let id = lm.adapter_id(adapter)?;
    let a = AnswerTokens::of(tok)?;
    let mut z = Vec::with_capacity(observations.len());
    for chunk in observations.chunks(batch.max(1)) {
        let prompts = chunk
            .iter()
            .map(|o| encode_prompt(tok, &protocol.fast_prompt(o, a.spaced), max_prompt))
            .collect::<Result<Vec<_>>>()?;
        let t = log_odds(lm, Some(id), &prompts, a.yes, a.no, false)?;
        z.extend(
            t.into_data()
                .try_to_vec::<f32>()
                .map_err(|e| Error::invalid(format!("{e:?}")))?,
        );
    }
    Ok(z)
}

/// One slow-path sample at a picked state, with its outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowSample {
    /// The generated text after the prompt's `<think>`.
    pub generated: String,
    pub intervention: Option<Intervention>,
    /// A rejection the host executed (pipeline handoffs; before a turn it is unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject: Option<String>,
    pub readable: bool,
    /// `R̄_{s,j}` (`None`: unreadable, so not played) and the GRPO advantage.
    pub mean_return: Option<f64>,
    pub advantage: f32,
}

/// What one round did at one picked state (a line of `samples.jsonl`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateRecord {
    pub round: usize,
    /// Index in the bank.
    pub state: usize,
    pub group: usize,
    pub turn: usize,
    pub z: f32,
    /// `b_s`, and `q(s)` over the readable samples (`None`: none was).
    pub baseline: f64,
    pub q: Option<f64>,
    pub samples: Vec<SlowSample>,
}

/// One round's summary (a line of `curve.jsonl`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundPoint {
    pub round: usize,
    pub states: usize,
    pub mean_baseline: f64,
    pub mean_return: f64,
    /// Mean over states of `max_j R̄_{s,j} − b_s`.
    pub mean_best_gain: f64,
    pub mean_q: f64,
    /// Shares of the slow path's samples: stop, guide, reject (hosts that execute one), pass,
    /// unreadable.
    pub stop: f64,
    pub guide: f64,
    #[serde(default)]
    pub reject: f64,
    pub pass: f64,
    pub unreadable: f64,
    pub rank_pairs: usize,
    pub grpo_loss: f64,
    pub rank_loss: f64,
}

/// Trains (or resumes) `cfg.adapter` on `bank_states` (from [`collect_states`]); `lm` must
/// live on an autodiff device and hold `cfg.reference`. The frozen `executor` plays the
/// continuations (reseeded every round); `envs` are forks of one environment (continuations
/// run `cfg.parallel` at a time).
#[allow(clippy::too_many_arguments)]
pub fn train_steering(
    lm: CausalLm,
    tok: &Tokenizer,
    envs: &mut [Box<dyn Env>],
    executor: &mut dyn TextPolicy,
    prompting: ExecutorPrompting<'_>,
    bank_states: &[BankState],
    cfg: &SteerTrainConfig,
    out: &Path,
    opts: &RunOptions,
) -> Result<(CausalLm, Vec<RoundPoint>)> {
    train_steering_with(
        lm,
        tok,
        envs,
        executor,
        prompting,
        bank_states,
        cfg,
        out,
        opts,
        None,
    )
}

/// Writes a round's slow-path texts (what follows each prompt's `<think>`) for the prompts
/// given, from the round's seed.
pub type SlowWriter<'a> = &'a mut dyn FnMut(&[String], u64) -> Result<Vec<String>>;

/// [`train_steering`] with the slow-path outputs written by `slow` instead of sampled from the
/// trained adapter (`None`: sampled, as in every real run). Everything else — which outputs
/// are readable, the continuations, advantages, targets, losses (the texts are scored by the
/// adapter) and checkpoints — is the same; tests use it to drive training through outputs a
/// random model never writes.
#[allow(clippy::too_many_arguments)]
pub fn train_steering_with(
    lm: CausalLm,
    tok: &Tokenizer,
    envs: &mut [Box<dyn Env>],
    executor: &mut dyn TextPolicy,
    prompting: ExecutorPrompting<'_>,
    bank_states: &[BankState],
    cfg: &SteerTrainConfig,
    out: &Path,
    opts: &RunOptions,
    slow: Option<SlowWriter<'_>>,
) -> Result<(CausalLm, Vec<RoundPoint>)> {
    if envs.len() < cfg.parallel {
        return Err(Error::invalid(format!(
            "steering: {} environments for parallel = {}",
            envs.len(),
            cfg.parallel
        )));
    }
    let mut process = SearchProcess {
        envs,
        executor,
        prompting,
        states: bank_states,
        steer: cfg.steer.clone(),
        parallel: cfg.parallel,
    };
    train_steering_on(lm, tok, &mut process, cfg, out, opts, slow)
}

/// The training loop over any host ([`SteeredProcess`]): the search executor
/// ([`SearchProcess`]) or the multi-agent pipeline ([`crate::mas::MasProcess`]).
pub fn train_steering_on<P: SteeredProcess>(
    mut lm: CausalLm,
    tok: &Tokenizer,
    process: &mut P,
    cfg: &SteerTrainConfig,
    out: &Path,
    opts: &RunOptions,
    mut slow: Option<SlowWriter<'_>>,
) -> Result<(CausalLm, Vec<RoundPoint>)> {
    cfg.validate()?;
    if process.states() == 0 {
        return Err(Error::invalid("steering: the state bank is empty".into()));
    }
    let protocol = process.protocol();
    let spec = LoopSpec::json(
        format!("steer {}", cfg.adapter),
        "steer_train.json",
        cfg,
        cfg.rounds,
        1,
    );
    // The checkpoint's extra state is the bank's priorities.
    let mut run: TrainLoop<SteerTrainConfig, Vec<f32>> =
        TrainLoop::open(out, spec, cfg, opts)?.seed_backend_per_step(lm.device(), cfg.seed);
    let reference = lm.adapter_id(&cfg.reference)?;
    let observations: Vec<String> = (0..process.states())
        .map(|i| process.observation(i))
        .collect();
    let mut optim = cfg.optim.adamw();
    // The bank's priorities v = σ(z) under the trained adapter's current fast path.
    let priorities = |lm: &CausalLm| -> Result<Vec<f32>> {
        let z = fast_log_odds(
            &lm.valid(),
            tok,
            &cfg.adapter,
            &protocol,
            &observations,
            cfg.steer.max_prompt,
            cfg.parallel,
        )?;
        Ok(z.iter().map(|&z| sigmoid(z)).collect())
    };
    let (id, start_priorities) = if let Some(p) = run.take_resumed() {
        let ckpt = run.checkpoint_dir();
        optim = load_optimizer(optim, ckpt, OPTIMIZER_FILE)?;
        (lm.load_adapter(&cfg.adapter, &ckpt.join("adapter"))?, p)
    } else {
        let id = copy_adapter(&mut lm, reference, &cfg.adapter, &out.join("init_adapter"))?;
        (id, priorities(&lm)?)
    };
    let start = run.start();
    let mut bank: StateBank<usize> = StateBank::new();
    for (i, &p) in start_priorities.iter().enumerate() {
        bank.push(i, p).map_err(|e| Error::invalid(e.to_string()))?;
    }
    if bank.len() != process.states() {
        return Err(Error::checkpoint(
            run.checkpoint_dir().join("state.json"),
            format!(
                "{} priorities for a bank of {} states",
                bank.len(),
                process.states()
            ),
        ));
    }
    let curve_path = out.join("curve.jsonl");
    let samples_path = out.join("samples.jsonl");
    let mut curve: Vec<RoundPoint> = read_lines(&curve_path)?
        .into_iter()
        .filter(|p: &RoundPoint| p.round <= start)
        .collect();
    let kept: Vec<StateRecord> = read_lines(&samples_path)?
        .into_iter()
        .filter(|r: &StateRecord| r.round <= start)
        .collect();
    // Every bank state scored so far: its task and latest q(s) (RankNet's targets).
    let mut scored: BTreeMap<usize, (usize, f32)> = BTreeMap::new();
    for r in &kept {
        if let Some(q) = r.q {
            scored.insert(r.state, (r.group, q as f32));
        }
    }
    write_jsonl(&curve_path, &curve)?;
    write_jsonl(&samples_path, &kept)?;
    let answers = AnswerTokens::of(tok)?;
    let scaling = if cfg.scale_std {
        StdScaling::Group
    } else {
        StdScaling::None
    };
    let ppo = PpoConfig {
        eps_low: cfg.clip_eps,
        eps_high: cfg.clip_eps,
        beta: cfg.beta,
        normalisation: LossNormalisation::Grpo,
    };
    while let Some(round) = run.next_step() {
        let mut rng =
            StdRng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round as u64);
        // 2. ε-greedy top-k.
        let picked = bank
            .select(cfg.states_per_round, cfg.epsilon, &mut rng)
            .map_err(|e| Error::invalid(e.to_string()))?;
        // 3. G slow-path samples per state, then N continuations per branch.
        let g = cfg.samples;
        let slow_prompts: Vec<String> = picked
            .iter()
            .flat_map(|&i| std::iter::repeat_n(protocol.slow_prompt(&observations[i]), g))
            .collect();
        let seed = cfg.seed ^ (round as u64).wrapping_mul(1_000_003);
        let outputs = match slow.as_mut() {
            Some(write) => {
                let texts = write(&slow_prompts, seed)?;
                if texts.len() != slow_prompts.len() {
                    return Err(Error::invalid(format!(
                        "steering round {round}: the slow-path writer gave {} texts for {} prompts",
                        texts.len(),
                        slow_prompts.len()
                    )));
                }
                texts.iter().map(|t| read_slow_path(t)).collect::<Vec<_>>()
            }
            None => {
                let inference = lm.valid();
                sample_slow(
                    &inference,
                    tok,
                    Some(inference.adapter_id(&cfg.adapter)?),
                    &slow_prompts,
                    &cfg.steer,
                    seed,
                    None,
                )?
            }
        }
        .into_iter()
        .map(|o| process.read(o))
        .collect::<Vec<_>>();
        // An unreadable sample is nothing the host can act on: it is not played (no
        // continuations), takes no part in its group's statistics and gets no advantage.
        let readable: Vec<bool> = outputs.iter().map(|o| o.parse_error.is_none()).collect();
        let n = cfg.continuations;
        let mut starts: Vec<P::Start> = Vec::new();
        for (p, &i) in picked.iter().enumerate() {
            for (j, o) in outputs[p * g..(p + 1) * g].iter().enumerate() {
                if readable[p * g + j] {
                    let start = process.start(i, Some(o));
                    starts.extend(std::iter::repeat_n(start, n));
                }
            }
            starts.extend(std::iter::repeat_n(process.start(i, None), n));
        }
        let returns = process.play(
            &starts,
            cfg.seed ^ (round as u64 + 1).wrapping_mul(0x5851_F42D),
        )?;
        if returns.len() != starts.len() {
            return Err(Error::invalid(format!(
                "steering round {round}: {} returns for {} continuations",
                returns.len(),
                starts.len()
            )));
        }
        let mut returns = returns.into_iter();
        let mut records = Vec::with_capacity(picked.len());
        let mut slow_rows: Vec<(SftExample, f32)> = Vec::new();
        for (p, &i) in picked.iter().enumerate() {
            let mut mean_of_next_n = || {
                (0..n)
                    .map(|_| returns.next().expect("one return per start"))
                    .sum::<f64>()
                    / n as f64
            };
            let rbar: Vec<Option<f32>> = (0..g)
                .map(|j| readable[p * g + j].then(|| mean_of_next_n() as f32))
                .collect();
            let b = mean_of_next_n() as f32;
            let (adv, q) = score_state(&rbar, b, scaling)?;
            let mut samples = Vec::with_capacity(g);
            for j in 0..g {
                let o = &outputs[p * g + j];
                let generated = o.text.trim_start_matches("<think>").to_owned();
                let a = adv[j];
                if a != 0.0 {
                    let what = format!("steering round {round} state {i} sample {j}");
                    slow_rows.push((
                        encode_pair(
                            tok,
                            &protocol.slow_prompt(&observations[i]),
                            &generated,
                            cfg.max_len,
                            &what,
                        )?,
                        a,
                    ));
                }
                samples.push(SlowSample {
                    generated,
                    intervention: o.intervention.clone(),
                    reject: o.reject.clone().filter(|_| readable[p * g + j]),
                    readable: readable[p * g + j],
                    mean_return: rbar[j].map(f64::from),
                    advantage: a,
                });
            }
            if let Some(q) = q {
                scored.insert(i, (process.group(i), q));
            }
            records.push(StateRecord {
                round: round + 1,
                state: i,
                group: process.group(i),
                turn: process.turn(i),
                z: logit(bank.priorities()[i]),
                baseline: b as f64,
                q: q.map(f64::from),
                samples,
            });
        }
        // 4–6. L_GRPO + w·L_rank, `epochs` steps. RankNet compares every scored state of the
        // tasks picked this round, from this round or earlier ones.
        let picked_groups: Vec<usize> = picked.iter().map(|&i| process.group(i)).collect();
        let (ranked, qs, groups) = rank_set(&scored, &picked_groups);
        let rank_pairs = hier_steer::rank::ranking_pairs(&qs, &groups)
            .map_err(|e| Error::invalid(e.to_string()))?
            .len();
        let fast_prompts = ranked
            .iter()
            .map(|&i| {
                encode_prompt(
                    tok,
                    &protocol.fast_prompt(&observations[i], answers.spaced),
                    cfg.steer.max_prompt,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let device = lm.device();
        let rows: Vec<SftExample> = slow_rows.iter().map(|(e, _)| e.clone()).collect();
        // Ratios under the distribution the slow path sampled from (TRL scales the logits by
        // the generation temperature for the old, current and reference policies).
        let temperature = cfg.steer.temperature;
        let (old, refs) = {
            let inference = lm.valid();
            let batch = rows.len().max(1);
            let old = scores_of(&inference, id, &rows, batch, temperature)?;
            let refs = if cfg.beta != 0.0 && !rows.is_empty() {
                Some(scores_of(&inference, reference, &rows, batch, temperature)?)
            } else {
                None
            };
            (old, refs)
        };
        let (mut grpo_loss, mut rank_loss) = (0.0, 0.0);
        if !rows.is_empty() || rank_pairs > 0 {
            for _ in 0..cfg.epochs {
                let mut total: Option<Tensor<1>> = None;
                if !rows.is_empty() {
                    let s = lm.score_at(
                        &score_requests(&rows),
                        Forward {
                            adapter: Some(id),
                            train: true,
                        },
                        temperature,
                    )?;
                    let [_, c] = s.logprobs.dims();
                    let adv: Vec<f32> = slow_rows.iter().map(|(_, a)| *a).collect();
                    let adv = Tensor::<1>::from_data(TensorData::new(adv, [rows.len()]), &device);
                    let out = ppo_clip_loss(
                        s.logprobs,
                        padded(&old.iter().collect::<Vec<_>>(), c, &device),
                        adv,
                        s.mask,
                        refs.as_ref()
                            .map(|r| padded(&r.iter().collect::<Vec<_>>(), c, &device)),
                        &ppo,
                    )?;
                    run.count_nonfinite(
                        "ppo",
                        out.component("nonfinite")
                            .expect("the PPO loss reports its dropped non-finite tokens"),
                    )?;
                    grpo_loss = out.loss.clone().into_scalar::<f32>() as f64;
                    total = Some(out.loss);
                }
                if rank_pairs > 0 {
                    let z = log_odds(&lm, Some(id), &fast_prompts, answers.yes, answers.no, true)?;
                    let out = ranknet_loss(z, &qs, &groups)?;
                    rank_loss = out.loss.clone().into_scalar::<f32>() as f64;
                    let l = out.loss.mul_scalar(cfg.rank_weight);
                    total = Some(match total {
                        Some(t) => t + l,
                        None => l,
                    });
                }
                let loss = total.expect("some loss");
                let value = loss.clone().into_scalar::<f32>();
                if !value.is_finite() {
                    return Err(Error::invalid(format!(
                        "steering {}: loss became {value}; lower optim.lr",
                        cfg.adapter
                    )));
                }
                let mut grads = GradientsParams::from_grads(loss.backward(), &lm);
                cfg.optim.clip(&lm, &mut grads);
                lm = optim.step(cfg.optim.lr_at(round, cfg.rounds), lm, grads);
            }
        }
        // Re-score the bank with the updated fast path.
        if (round + 1) % cfg.rescore_every == 0 {
            bank.rescore(priorities(&lm)?)
                .map_err(|e| Error::invalid(e.to_string()))?;
        }
        let all: Vec<&SlowSample> = records.iter().flat_map(|r| &r.samples).collect();
        let share = |f: &dyn Fn(&SlowSample) -> bool| {
            all.iter().filter(|s| f(s)).count() as f64 / all.len().max(1) as f64
        };
        let states = records.len().max(1) as f64;
        let point = RoundPoint {
            round: round + 1,
            states: records.len(),
            mean_baseline: records.iter().map(|r| r.baseline).sum::<f64>() / states,
            mean_return: mean(all.iter().filter_map(|s| s.mean_return)).unwrap_or(0.0),
            mean_best_gain: mean(records.iter().filter_map(|r| {
                r.samples
                    .iter()
                    .filter_map(|s| s.mean_return)
                    .reduce(f64::max)
                    .map(|best| best - r.baseline)
            }))
            .unwrap_or(0.0),
            mean_q: mean(records.iter().filter_map(|r| r.q)).unwrap_or(0.0),
            stop: share(&|s| s.intervention == Some(Intervention::StopAndAnswer)),
            guide: share(&|s| matches!(s.intervention, Some(Intervention::Guidance(_)))),
            reject: share(&|s| s.reject.is_some()),
            pass: share(&|s| s.readable && s.intervention.is_none() && s.reject.is_none()),
            unreadable: share(&|s| !s.readable),
            rank_pairs,
            grpo_loss,
            rank_loss,
        };
        for r in &records {
            append_line(
                &samples_path,
                &serde_json::to_string(r).expect("serialises"),
            )?;
        }
        curve.push(point);
        write_jsonl(&curve_path, &curve)?;
        run.end_step(
            || bank.priorities().to_vec(),
            |dir| -> Result<()> {
                lm.save_adapter(id, &dir.join("adapter"), None)?;
                Ok(save_optimizer(&optim, dir, OPTIMIZER_FILE)?)
            },
        )?;
    }
    if run.finish() {
        lm.save_adapter(id, &out.join("adapter"), None)?;
    }
    Ok((lm, curve))
}

/// One state's GRPO advantages and RankNet target from the mean returns `R̄_{s,j}` of its
/// samples (`None`: unreadable, not played) and the no-intervention baseline `b_s`: the
/// baseline-in-group advantages over the readable samples, 0 for the unreadable ones, and
/// `q(s)` over the readable ones — `None` when none was readable (the state then takes no part
/// in the ranking).
fn score_state(
    returns: &[Option<f32>],
    baseline: f32,
    scaling: StdScaling,
) -> Result<(Vec<f32>, Option<f32>)> {
    let readable: Vec<f32> = returns.iter().flatten().copied().collect();
    if readable.is_empty() {
        return Ok((vec![0.0; returns.len()], None));
    }
    let adv = baseline_in_group_advantages(&readable, baseline, scaling)
        .map_err(|e| Error::invalid(e.to_string()))?;
    let q = q_target(&readable, baseline).map_err(|e| Error::invalid(e.to_string()))?;
    // (A group without variance already has all-zero advantages.)
    let mut given = adv.advantages.into_iter();
    let advantages = returns
        .iter()
        .map(|r| match r {
            Some(_) => given.next().expect("one advantage per readable sample"),
            None => 0.0,
        })
        .collect();
    Ok((advantages, Some(q)))
}

/// The states RankNet compares this round: every scored bank state (`state → (task, q)`) of a
/// task among `picked_groups`, whichever round scored it. Returns their bank indices, targets
/// and tasks.
fn rank_set(
    scored: &BTreeMap<usize, (usize, f32)>,
    picked_groups: &[usize],
) -> (Vec<usize>, Vec<f32>, Vec<usize>) {
    let mut states = Vec::new();
    let mut qs = Vec::new();
    let mut groups = Vec::new();
    for (&state, &(group, q)) in scored {
        if picked_groups.contains(&group) {
            states.push(state);
            qs.push(q);
            groups.push(group);
        }
    }
    (states, qs, groups)
}

fn sigmoid(z: f32) -> f32 {
    // σ(z) = e^{min(z,0)} / (1 + e^{−|z|}): finite for any z.
    z.min(0.0).exp() / (1.0 + (-z.abs()).exp())
}

fn logit(p: f32) -> f32 {
    let p = p.clamp(1e-7, 1.0 - 1e-7);
    (p / (1.0 - p)).ln()
}

fn read_lines<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    std::fs::read_to_string(path)?
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(k, l)| {
            serde_json::from_str(l)
                .map_err(|e| Error::checkpoint(path.to_owned(), format!("line {}: {e}", k + 1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: readable R̄ = {1, 0}, b = 0.5 → the group {1, 0, 0.5} has mean 0.5 and
    /// unbiased std 0.5, so the advantages are ±0.5 / (0.5 + 1e-4); q = (0.5 + 0.5) / 2. The
    /// unreadable sample in between gets 0 and does not enter the statistics.
    #[test]
    fn unreadable_samples_get_no_advantage_and_stay_out_of_the_group() {
        let (adv, q) = score_state(&[Some(1.0), None, Some(0.0)], 0.5, StdScaling::Group).unwrap();
        let a = 0.5 / (0.5 + 1e-4);
        assert!((adv[0] - a).abs() < 1e-6 && adv[1] == 0.0 && (adv[2] + a).abs() < 1e-6);
        assert_eq!(q, Some(0.5));
        // Equal returns: no signal.
        let (adv, q) = score_state(&[Some(0.5), None, Some(0.5)], 0.5, StdScaling::Group).unwrap();
        assert_eq!((adv, q), (vec![0.0; 3], Some(0.0)));
        // Nothing readable: no advantage, no q(s).
        let (adv, q) = score_state(&[None, None], 0.3, StdScaling::Group).unwrap();
        assert_eq!((adv, q), (vec![0.0; 2], None));
    }

    /// A state scored in round 1 and another of the same task scored in round 2 form a RankNet
    /// pair in round 2 (the round's own states alone would give none).
    #[test]
    fn ranknet_pairs_states_of_one_task_from_different_rounds() {
        let mut scored = BTreeMap::new();
        scored.insert(4, (0, 0.8)); // round 1: task 0
        scored.insert(9, (1, 0.1)); // round 1: task 1
        scored.insert(2, (0, 0.2)); // round 2: task 0, the only state picked
        let (states, qs, groups) = rank_set(&scored, &[0]);
        assert_eq!((states, groups), (vec![2, 4], vec![0, 0]));
        let pairs = hier_steer::rank::ranking_pairs(&qs, &[0, 0]).unwrap();
        assert_eq!(pairs, vec![(1, 0)], "state 4 (q 0.8) above state 2 (q 0.2)");
        assert!(
            hier_steer::rank::ranking_pairs(&[0.2], &[0])
                .unwrap()
                .is_empty(),
            "the round's state alone forms no pair"
        );
    }
}
