//! Outcome-reward GRPO on whole episodes (the paper's fine-tuned flat baseline), and the same
//! update applied to the high level of a hierarchy (Glider's online phase, which updates the
//! planner's decisions only).
//!
//! Every iteration: `tasks_per_iteration` training tasks, each played `group_size` times with
//! the current adapter sampling; an episode's reward is its outcome,
//! `r = 1` on success, else its final score clipped to `[0, 1]` (ScienceWorld's partial
//! progress; 0 on TextCraft and ALFWorld failures). Advantages are TRL's group advantages
//! over the episodes of one task (`hier_steer::grpo::group_advantages`); groups whose rewards
//! are all equal carry no signal and are dropped. Every decision of an episode (each action of
//! the flat policy; each subgoal of the planner) is a sample with its episode's advantage, and
//! the adapter takes `epochs` passes of PPO-clip steps over them
//! (`hier_steer::grpo::ppo_clip_loss`: ratio to the policy that played, clip ε, optional k3 KL
//! to the frozen start with weight β).
//!
//! The trained adapter starts as an exact copy of `reference` (an SFT adapter). Resumable per
//! iteration: the checkpoint holds the adapter, the optimiser and the iteration count.

use std::path::Path;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::optim::{GradientsAccumulator, GradientsParams, ModuleOptimizer};
use hier_backbone::burn::tensor::{Tensor, TensorData};
use hier_backbone::{CausalLm, Forward, SamplingConfig, Tokenizer};
use hier_data::batch::{flat_prompt, planner_prompt};
use hier_envs::{Env, Task};
use hier_steer::grpo::{LossNormalisation, PpoConfig, StdScaling, group_advantages, ppo_clip_loss};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::agent::{RolloutConfig, rollout};
use crate::error::{Error, Result};
use hier_train::SharedErrors as _;
use hier_train::optim::OptimConfig;
use hier_train::policy::{BackbonePolicy, Trace};
use hier_train::prompt::encode_pair;
use hier_train::runlog::{RunOptions, write_jsonl};
use hier_train::sft::{SftExample, copy_adapter, padded, score_requests, scores_of};
use hier_train::trainer::{LoopSpec, OPTIMIZER_FILE, TrainLoop, load_optimizer, save_optimizer};

/// Which decisions GRPO trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// A flat agent: every action.
    Flat,
    /// A hierarchy's planner: every subgoal (the executor acts, its replies are not trained).
    Planner,
}

/// A GRPO run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpoConfig {
    /// The trained adapter, and the frozen adapter it starts from (the KL reference).
    pub adapter: String,
    pub reference: String,
    pub level: Level,
    /// Planner level: the executor's adapter (`None`: the trained adapter itself, as in
    /// Glider, where one adapter plays both levels).
    pub executor: Option<String>,
    pub iterations: usize,
    pub tasks_per_iteration: usize,
    /// Episodes per task (G).
    pub group_size: usize,
    /// Passes over an iteration's samples, in batches of `batch_size`.
    pub epochs: usize,
    pub batch_size: usize,
    /// Rows per forward/backward pass within a batch (`None`: the whole batch at once). A
    /// step's gradient is the sum of its micro-batches' gradients, each loss weighted by its
    /// share of the batch's sequences — the same step (the loss is a mean over sequences) at
    /// the memory of `micro_batch` rows, up to the order of floating-point sums. Left out of
    /// the serialised config (and so of stage keys) when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro_batch: Option<usize>,
    /// AdamW, schedule (over iterations) and clipping of the trained adapter.
    pub optim: OptimConfig,
    /// PPO clip ε, KL weight β (0: no reference pass), std scaling of advantages.
    pub clip_eps: f32,
    pub beta: f32,
    pub scale_std: bool,
    pub rollout: RolloutConfig,
    /// Sampling while playing (both levels).
    pub max_tokens: usize,
    pub planner_max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
    pub max_len: usize,
    pub seed: u64,
}

impl GrpoConfig {
    fn validate(&self) -> Result<()> {
        if self.iterations == 0
            || self.tasks_per_iteration == 0
            || self.group_size < 2
            || self.epochs == 0
            || self.batch_size == 0
        {
            return Err(Error::invalid(
                "grpo: iterations, tasks_per_iteration, epochs and batch_size must be positive \
                 and group_size at least 2"
                    .into(),
            ));
        }
        if let Some(m) = self.micro_batch
            && !(1..=self.batch_size).contains(&m)
        {
            return Err(Error::invalid(format!(
                "grpo: micro_batch {m} must be between 1 and batch_size {}",
                self.batch_size
            )));
        }
        if self.adapter == self.reference {
            return Err(Error::invalid(
                "grpo: the trained adapter must differ from its reference".into(),
            ));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(Error::invalid(format!(
                "grpo: temperature {} must be positive (a group needs sampled completions, and \
                 the ratios are taken at that temperature)",
                self.temperature
            )));
        }
        Ok(self.optim.check("grpo.optim", self.iterations)?)
    }

    fn sampling(&self, max_tokens: usize, seed: u64) -> SamplingConfig {
        SamplingConfig {
            max_new_tokens: max_tokens,
            temperature: self.temperature,
            top_k: Some(self.top_k),
            top_p: Some(self.top_p),
            seed,
            use_cache: true,
        }
    }
}

/// One iteration's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrpoPoint {
    pub iteration: usize,
    pub episodes: usize,
    pub mean_reward: f64,
    pub success: f64,
    /// Groups with any signal, samples trained, mean loss.
    pub groups_used: usize,
    pub samples: usize,
    pub loss: f64,
}

/// The outcome reward of an episode.
pub fn outcome_reward(trace: &Trace) -> f32 {
    let ep = &trace.episode;
    if ep.success {
        1.0
    } else {
        ep.scores.last().copied().unwrap_or(0.0).clamp(0.0, 1.0) as f32
    }
}

/// The trained decisions of an episode, as (prompt, target) text pairs.
pub fn decisions(trace: &Trace, level: Level) -> Vec<(String, String)> {
    let ep = &trace.episode;
    match level {
        Level::Flat => ep
            .actions
            .iter()
            .enumerate()
            .map(|(k, a)| {
                (
                    flat_prompt(&ep.task, &ep.actions[..k], &ep.observations[k]),
                    a.clone(),
                )
            })
            .collect(),
        Level::Planner => {
            let starts: Vec<usize> = trace.subgoals.iter().map(|(s, _)| *s).collect();
            trace
                .subgoals
                .iter()
                .enumerate()
                .map(|(k, (start, g))| {
                    // The planner saw the previous segment's actions (as in the rollout).
                    let prev = if k == 0 { 0 } else { starts[k - 1] };
                    let group = &ep.actions[prev.min(*start)..*start];
                    (
                        planner_prompt(&ep.task, group, &ep.observations[*start]),
                        g.clone(),
                    )
                })
                .collect()
        }
    }
}

/// `cfg.epochs` passes of PPO-clip steps (batches of `cfg.batch_size`, shuffled by `rng`,
/// each played in micro-batches of `cfg.micro_batch` rows) over `samples` — decisions with
/// their episode's advantage — on adapter `id` (`cfg.adapter`).
/// The ratio's denominator is the adapter before the first step (the policy that played);
/// with `cfg.beta > 0` the k3 KL to `cfg.reference` is added; every step takes learning rate
/// `lr`. Returns every step's loss and the non-finite tokens the loss dropped in all of them.
#[allow(clippy::too_many_arguments)]
pub fn ppo_passes(
    mut lm: CausalLm,
    id: hier_backbone::AdapterId,
    optim: &mut ModuleOptimizer,
    lr: f64,
    samples: &[(SftExample, f32)],
    cfg: &GrpoConfig,
    rng: &mut StdRng,
) -> Result<(CausalLm, Vec<f64>, f32)> {
    let mut losses = Vec::new();
    let mut dropped = 0.0;
    if samples.is_empty() {
        return Ok((lm, losses, dropped));
    }
    let device = lm.device();
    let ppo = PpoConfig {
        eps_low: cfg.clip_eps,
        eps_high: cfg.clip_eps,
        beta: cfg.beta,
        normalisation: LossNormalisation::Grpo,
    };
    let rows: Vec<SftExample> = samples.iter().map(|(e, _)| e.clone()).collect();
    let micro = cfg.micro_batch.unwrap_or(cfg.batch_size);
    // Ratios are taken under the distribution the samples were drawn from (TRL divides the
    // logits by the generation temperature for the old, current and reference policies).
    let t = cfg.temperature;
    let (old, refs) = {
        let inference = lm.valid();
        let old = scores_of(&inference, id, &rows, micro, t)?;
        let refs = if cfg.beta != 0.0 {
            let r = inference.adapter_id(&cfg.reference)?;
            Some(scores_of(&inference, r, &rows, micro, t)?)
        } else {
            None
        };
        (old, refs)
    };
    let mut order: Vec<usize> = (0..rows.len()).collect();
    for _ in 0..cfg.epochs {
        order.shuffle(rng);
        for batch in order.chunks(cfg.batch_size) {
            let mut accumulated = GradientsAccumulator::new();
            let mut value = 0.0f32;
            for part in batch.chunks(micro) {
                let chunk: Vec<SftExample> = part.iter().map(|&i| rows[i].clone()).collect();
                let s = lm.score_at(
                    &score_requests(&chunk),
                    Forward {
                        adapter: Some(id),
                        train: true,
                    },
                    t,
                )?;
                let [_, c] = s.logprobs.dims();
                let pick = |xs: &Vec<Vec<f32>>| {
                    padded(
                        &part.iter().map(|&i| &xs[i]).collect::<Vec<_>>(),
                        c,
                        &device,
                    )
                };
                let (old_t, ref_t) = (pick(&old), refs.as_ref().map(pick));
                let adv: Vec<f32> = part.iter().map(|&i| samples[i].1).collect();
                let adv = Tensor::<1>::from_data(TensorData::new(adv, [part.len()]), &device);
                let out = ppo_clip_loss(s.logprobs, old_t, adv, s.mask, ref_t, &ppo)
                    .map_err(|e| Error::invalid(e.to_string()))?;
                dropped += out
                    .component("nonfinite")
                    .expect("the PPO loss reports its dropped non-finite tokens");
                // GRPO's normalisation is a mean over sequences: the batch's loss is the
                // micro-batches' losses weighted by their shares of its sequences.
                let loss = out.loss * (part.len() as f32 / batch.len() as f32);
                value += loss.clone().into_scalar::<f32>();
                accumulated.accumulate(&lm, GradientsParams::from_grads(loss.backward(), &lm));
            }
            if !value.is_finite() {
                return Err(Error::invalid(format!(
                    "grpo {}: loss became {value}; lower optim.lr",
                    cfg.adapter
                )));
            }
            let mut grads = accumulated.grads();
            cfg.optim.clip(&lm, &mut grads);
            lm = optim.step(lr, lm, grads);
            losses.push(value as f64);
        }
    }
    Ok((lm, losses, dropped))
}

/// Trains (or resumes) `cfg.adapter` from `cfg.reference` by GRPO on `train_tasks`; `lm` must
/// live on an autodiff device and hold the reference (and, at the planner level, the executor).
#[allow(clippy::too_many_arguments)]
pub fn train_grpo(
    mut lm: CausalLm,
    tok: &Tokenizer,
    envs: &mut [Box<dyn Env>],
    train_tasks: &[Task],
    cfg: &GrpoConfig,
    out: &Path,
    opts: &RunOptions,
) -> Result<(CausalLm, Vec<GrpoPoint>)> {
    cfg.validate()?;
    if envs.is_empty() || train_tasks.is_empty() {
        return Err(Error::invalid(
            "grpo: no environments or no training tasks".into(),
        ));
    }
    let spec = LoopSpec::json(
        format!("grpo {}", cfg.adapter),
        "grpo.json",
        cfg,
        cfg.iterations,
        1,
    );
    // The checkpoint's extra state is the learning curve so far.
    let mut run: TrainLoop<GrpoConfig, Vec<GrpoPoint>> =
        TrainLoop::open(out, spec, cfg, opts)?.seed_backend_per_step(lm.device(), cfg.seed);
    let reference = lm.adapter_id(&cfg.reference)?;
    let mut optim = cfg.optim.adamw();
    let (id, mut curve) = if let Some(curve) = run.take_resumed() {
        let ckpt = run.checkpoint_dir();
        optim = load_optimizer(optim, ckpt, OPTIMIZER_FILE)?;
        (lm.load_adapter(&cfg.adapter, &ckpt.join("adapter"))?, curve)
    } else {
        // The trained adapter starts as an exact copy of the reference.
        let init = out.join("init_adapter");
        (
            copy_adapter(&mut lm, reference, &cfg.adapter, &init)?,
            Vec::new(),
        )
    };
    let curve_path = out.join("curve.jsonl");
    write_jsonl(&curve_path, &curve)?;
    let scaling = if cfg.scale_std {
        StdScaling::Group
    } else {
        StdScaling::None
    };
    while let Some(it) = run.next_step() {
        // 1. Play G episodes of each picked task with the current adapter.
        let mut rng =
            StdRng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ it as u64);
        let mut pool: Vec<&Task> = train_tasks.iter().collect();
        pool.shuffle(&mut rng);
        let picked: Vec<Task> = pool
            .into_iter()
            .take(cfg.tasks_per_iteration)
            .cloned()
            .collect();
        let episodes: Vec<Task> = picked
            .iter()
            .flat_map(|t| std::iter::repeat_n(t.clone(), cfg.group_size))
            .collect();
        let traces = {
            let inference = lm.valid();
            let me = inference.adapter_id(&cfg.adapter)?;
            let seed = cfg.seed.wrapping_add(1_000_003 * it as u64);
            let mut played = Vec::with_capacity(episodes.len());
            let mut policy = BackbonePolicy::new(
                &inference,
                tok,
                Some(me),
                cfg.sampling(cfg.max_tokens, seed),
            )
            .with_prefix_cache_mib(opts.prefix_cache_mib);
            policy.max_prompt = Some(cfg.max_len.saturating_sub(cfg.max_tokens).max(1));
            let mut planner = BackbonePolicy::new(
                &inference,
                tok,
                Some(me),
                cfg.sampling(cfg.planner_max_tokens, seed ^ 0x5EED),
            )
            .with_prefix_cache_mib(opts.prefix_cache_mib);
            planner.max_prompt = Some(cfg.max_len.saturating_sub(cfg.planner_max_tokens).max(1));
            if let (Level::Planner, Some(e)) = (cfg.level, &cfg.executor) {
                policy.adapter = Some(inference.adapter_id(e)?);
            }
            for chunk in episodes.chunks(envs.len()) {
                let envs = &mut envs[..chunk.len()];
                let t = match cfg.level {
                    Level::Flat => {
                        crate::flat::rollout_flat(envs, chunk, &mut policy, &cfg.rollout, "grpo")
                    }
                    Level::Planner => {
                        rollout(envs, chunk, &mut planner, &mut policy, &cfg.rollout, "grpo")
                    }
                }?;
                played.extend(t);
            }
            played
        };
        // 2. Group advantages per task.
        let rewards: Vec<f32> = traces.iter().map(outcome_reward).collect();
        let mut samples: Vec<(SftExample, f32)> = Vec::new();
        let mut groups_used = 0;
        for (g, group) in rewards.chunks(cfg.group_size).enumerate() {
            let adv =
                group_advantages(group, scaling).map_err(|e| Error::invalid(e.to_string()))?;
            if adv.zero_variance {
                continue;
            }
            groups_used += 1;
            for (k, a) in adv.advantages.iter().enumerate() {
                let tr = &traces[g * cfg.group_size + k];
                for (n, (prompt, target)) in decisions(tr, cfg.level).into_iter().enumerate() {
                    let what = format!(
                        "grpo iteration {it} episode {} decision {n}",
                        g * cfg.group_size + k
                    );
                    samples.push((encode_pair(tok, &prompt, &target, cfg.max_len, &what)?, *a));
                }
            }
        }
        // 3. PPO-clip passes.
        let (m, losses, dropped) = ppo_passes(
            lm,
            id,
            &mut optim,
            cfg.optim.lr_at(it, cfg.iterations),
            &samples,
            cfg,
            &mut rng,
        )?;
        lm = m;
        run.count_nonfinite("ppo", dropped)?;
        let point = GrpoPoint {
            iteration: it + 1,
            episodes: traces.len(),
            mean_reward: rewards.iter().map(|&r| r as f64).sum::<f64>()
                / rewards.len().max(1) as f64,
            success: 100.0 * traces.iter().filter(|t| t.episode.success).count() as f64
                / traces.len().max(1) as f64,
            groups_used,
            samples: samples.len(),
            loss: if losses.is_empty() {
                0.0
            } else {
                losses.iter().sum::<f64>() / losses.len() as f64
            },
        };
        run.log(serde_json::to_value(&point).expect("serialises"))?;
        curve.push(point);
        write_jsonl(&curve_path, &curve)?;
        run.end_step(
            || curve.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use hier_data::build::Episode;

    fn trace(actions: &[&str], scores: &[f64], success: bool, subgoals: &[(usize, &str)]) -> Trace {
        Trace {
            episode: Episode {
                source: "env/1".into(),
                task: "T".into(),
                observations: (0..=actions.len()).map(|k| format!("o{k}")).collect(),
                actions: actions.iter().map(|a| a.to_string()).collect(),
                rewards: vec![0.0; actions.len()],
                scores: scores.to_vec(),
                done: success,
                success,
                origin: "test".into(),
            },
            subgoals: subgoals.iter().map(|(s, g)| (*s, g.to_string())).collect(),
            flags: vec![false; actions.len()],
            sys1_calls: subgoals.len(),
            sys2_calls: actions.len(),
            prompt_tokens: 0,
            generated_tokens: 0,
            notes: Vec::new(),
        }
    }

    fn config() -> GrpoConfig {
        GrpoConfig {
            adapter: "grpo".into(),
            reference: "ref".into(),
            level: Level::Flat,
            executor: None,
            iterations: 1,
            tasks_per_iteration: 1,
            group_size: 2,
            epochs: 4,
            batch_size: 2,
            micro_batch: None,
            optim: OptimConfig {
                grad_clip: Some(10.0),
                ..OptimConfig::constant(2e-2)
            },
            clip_eps: 0.2,
            beta: 0.0,
            scale_std: true,
            rollout: RolloutConfig::default(),
            max_tokens: 8,
            planner_max_tokens: 8,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 50,
            max_len: 64,
            seed: 0,
        }
    }

    /// PPO-clip passes raise the likelihood of decisions with positive advantage and lower
    /// those with negative advantage, on the trained adapter only.
    #[test]
    fn updates_follow_the_sign_of_the_advantage() {
        use hier_backbone::{LoraConfig, TargetModule};
        use hier_train::pretrain::TinyModelConfig;
        let cfg = TinyModelConfig::for_tests(64, 64);
        let device = hier_backbone::burn::tensor::Device::flex().autodiff();
        let mut lm = CausalLm::random(cfg.model_config().unwrap(), 3, &device).unwrap();
        let lora = LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::V]);
        let id = lm.add_adapter("grpo", lora.clone(), 1).unwrap();
        let other = lm.add_adapter("ref", lora, 2).unwrap();
        let good = SftExample {
            prompt: vec![1, 5, 9, 11],
            target: vec![20, 21],
        };
        let bad = SftExample {
            prompt: vec![1, 5, 9, 11],
            target: vec![30, 31],
        };
        let logp = |lm: &CausalLm, adapter| {
            let v = scores_of(&lm.valid(), adapter, &[good.clone(), bad.clone()], 2, 1.0).unwrap();
            (v[0].iter().sum::<f32>(), v[1].iter().sum::<f32>())
        };
        let (g0, b0) = logp(&lm, id);
        let ref0 = logp(&lm, other);
        let mut optim = hier_backbone::burn::optim::AdamWConfig::new().init();
        let mut rng = StdRng::seed_from_u64(0);
        let samples = vec![(good.clone(), 1.0), (bad.clone(), -1.0)];
        let (lm, losses, dropped) =
            ppo_passes(lm, id, &mut optim, 2e-2, &samples, &config(), &mut rng).unwrap();
        assert_eq!(
            (losses.len(), dropped),
            (4, 0.0),
            "one step per batch per epoch"
        );
        let (g1, b1) = logp(&lm, id);
        assert!(g1 > g0 + 0.1, "positive advantage: {g0} → {g1}");
        assert!(b1 < b0 - 0.1, "negative advantage: {b0} → {b1}");
        assert_eq!(logp(&lm, other), ref0, "other adapters are untouched");
        // No sample, no step.
        let mut optim = hier_backbone::burn::optim::AdamWConfig::new().init();
        let (_, losses, _) =
            ppo_passes(lm, id, &mut optim, 2e-2, &[], &config(), &mut rng).unwrap();
        assert!(losses.is_empty());
    }

    /// A step taken in micro-batches is the step taken on the whole batch (the loss is a mean
    /// over sequences, so the weighted micro-batch gradients sum to the batch's): the same
    /// adapter after two epochs, up to the order of floating-point sums.
    #[test]
    fn micro_batches_take_the_whole_batch_step() {
        use hier_backbone::{LoraConfig, TargetModule};
        use hier_train::pretrain::TinyModelConfig;
        let cfg = TinyModelConfig::for_tests(64, 64);
        let device = hier_backbone::burn::tensor::Device::flex().autodiff();
        let rows = [
            (vec![1, 5, 9, 11], vec![20, 21], 1.0),
            (vec![1, 6], vec![30, 31, 32], -0.5),
            (vec![2, 7, 9], vec![40], 0.8),
            (vec![3, 4, 5, 6, 7], vec![22, 23], -1.3),
        ];
        let samples: Vec<(SftExample, f32)> = rows
            .iter()
            .map(|(p, t, a)| {
                let e = SftExample {
                    prompt: p.clone(),
                    target: t.clone(),
                };
                (e, *a)
            })
            .collect();
        let examples: Vec<SftExample> = samples.iter().map(|(e, _)| e.clone()).collect();
        let fresh = || {
            let mut lm = CausalLm::random(cfg.model_config().unwrap(), 3, &device).unwrap();
            let lora = LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::V]);
            let id = lm.add_adapter("grpo", lora, 1).unwrap();
            (lm, id)
        };
        let train = |micro_batch| {
            let (lm, id) = fresh();
            let c = GrpoConfig {
                epochs: 2,
                batch_size: 4,
                micro_batch,
                ..config()
            };
            c.validate().unwrap();
            let mut optim = hier_backbone::burn::optim::AdamWConfig::new().init();
            let mut rng = StdRng::seed_from_u64(0);
            let (lm, losses, _) =
                ppo_passes(lm, id, &mut optim, 2e-2, &samples, &c, &mut rng).unwrap();
            (
                scores_of(&lm.valid(), id, &examples, 4, 1.0).unwrap(),
                losses,
            )
        };
        let (whole, whole_losses) = train(None);
        for micro in [Some(1), Some(3)] {
            let (parts, losses) = train(micro);
            assert_eq!(losses.len(), 2, "one step per batch per epoch");
            for (a, b) in whole_losses.iter().zip(&losses) {
                assert!((a - b).abs() < 1e-5, "{micro:?}: loss {a} vs {b}");
            }
            for (w, p) in whole.iter().flatten().zip(parts.iter().flatten()) {
                assert!((w - p).abs() < 1e-4, "{micro:?}: log-prob {w} vs {p}");
            }
        }
        // The trained adapter moved (the test compares a step, not two no-ops).
        let (untrained, id) = fresh();
        let before = scores_of(&untrained.valid(), id, &examples, 4, 1.0).unwrap();
        let moved = before
            .iter()
            .flatten()
            .zip(whole.iter().flatten())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(moved > 1e-2, "the adapter did not move ({moved})");
        let bad = GrpoConfig {
            micro_batch: Some(5),
            batch_size: 4,
            ..config()
        };
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("micro_batch 5"), "{err}");
    }

    #[test]
    fn rewards_are_outcomes_and_decisions_follow_the_level() {
        assert_eq!(outcome_reward(&trace(&["a"], &[1.0], true, &[])), 1.0);
        assert_eq!(
            outcome_reward(&trace(&["a", "b"], &[0.2, 0.35], false, &[])),
            0.35
        );
        assert_eq!(outcome_reward(&trace(&["a"], &[-1.0], false, &[])), 0.0);
        assert_eq!(outcome_reward(&trace(&[], &[], false, &[])), 0.0);

        let t = trace(&["a", "b", "c"], &[0.0; 3], false, &[(0, "g1"), (2, "g2")]);
        let flat = decisions(&t, Level::Flat);
        assert_eq!(flat.len(), 3);
        assert_eq!(
            flat[2],
            (
                flat_prompt("T", &["a".into(), "b".into()], "o2"),
                "c".into()
            )
        );
        let plan = decisions(&t, Level::Planner);
        assert_eq!(
            plan,
            vec![
                (planner_prompt("T", &[], "o0"), "g1".into()),
                (
                    planner_prompt("T", &["a".into(), "b".into()], "o2"),
                    "g2".into()
                ),
            ]
        );
    }
}
