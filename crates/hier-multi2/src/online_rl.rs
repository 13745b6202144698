//! System 2 online RL (METHODS.md A.1, phase 3). System 1 and `π_off` are frozen; `π_on` is a
//! new adapter initialised from `π_off`. Each iteration plays Multi² on training tasks (System
//! 1 greedy, System 2 = `π_on` sampled), offers every subgoal segment to a replay buffer that
//! **mixes offline transitions with the online ones** (all successful episodes' segments are
//! kept, failures with probability `keep_failures`), then takes gradient steps on
//!
//! ```text
//! L_on = −E_B[ min(e^{A/α}, w_max)·log π_on(a_t|o_t,g) ] + η·KL(π_on ‖ π_off)(·|o_t,g)
//! ```
//!
//! with `A = Q̄ − V` from the critic (carried over from the offline phase and, by default,
//! trained on by TD + expectile on the replay batches), and the KL **exact over the
//! vocabulary** at the action tokens (k1/k3 sample estimates as options). Online transitions
//! carry the environment's reward (ScienceWorld: the score change, in `[−1, 1]`).
//!
//! Every iteration is checkpointed (adapter, heads, optimisers, replay buffer); its success
//! rate is the learning curve (`curve.jsonl`, iteration 0 = the offline policy).

use std::path::Path;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::tensor::Tensor;
use hier_backbone::{CausalLm, SamplingConfig, Tokenizer};
use hier_data::replay::Origin;
use hier_data::replay::{ReplayBuffer, ReplayConfig};
use hier_data::schema::Sys2Transition;
use hier_envs::{Env, Task};
use hier_rl_losses::{
    KlAnchor, KlKind, Multi2Objectives, OnlineActorConfig, OnlineCritic, Reduction, Variant,
    online_actor_loss,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::agent::{RolloutConfig, rollout};
use crate::error::Error;
use crate::roles::{RlExample, executor_rl_examples};
use crate::sys2::{
    CriticConfig, Heads, Result, Sys2Optimizers, critic_step, forward_actions, next_state_values,
    nonfinite, sarsa_critic_step, save_checkpoint_parts,
};
use hier_train::SharedErrors as _;
use hier_train::optim::OptimConfig;
use hier_train::policy::{BackbonePolicy, Trace};
use hier_train::runlog::{RunOptions, write_jsonl};
use hier_train::sft::copy_adapter;
use hier_train::trainer::{LoopSpec, TrainLoop};

/// An online RL run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnlineRlConfig {
    /// The trained adapter (`sys2_online`), the frozen anchor it starts from (`sys2`), and the
    /// frozen planner (`sys1`).
    pub adapter: String,
    pub anchor: String,
    pub planner: String,
    pub iterations: usize,
    /// Episodes played per iteration (all in one batched rollout).
    pub episodes: usize,
    /// Gradient steps per iteration.
    pub updates: usize,
    pub batch_size: usize,
    /// AdamW, schedule (over iterations) and clipping of the adapter (actor; authors' learning
    /// rate 1e-5) and of each head (critic).
    pub actor_optim: OptimConfig,
    pub critic_optim: OptimConfig,
    /// Keep training the critic on replay batches.
    pub train_critic: bool,
    pub critic: CriticConfig,
    /// α, w_max, normalisation, η of the actor.
    pub alpha: f32,
    pub w_max: f32,
    pub normalise: bool,
    pub eta: f32,
    /// The KL estimator: `exact` (the paper), `k1` or `k3`.
    pub kl: KlKind,
    /// The critic's form: `q-and-v` (the paper, default) or `sarsa-trajectory-mean` (the
    /// authors' released code, [`crate::sys2::sarsa_critic_step`]).
    #[serde(default, skip_serializing_if = "hier_backbone::serde_skip::is_default")]
    pub critic_form: OnlineCritic,
    pub sum_logprobs: bool,
    pub replay: ReplayConfig,
    /// Whether the replay buffer holds the offline transitions (default) or only online
    /// segments, as the authors' ScienceWorld trainer does (it loads the offline buffer and
    /// never samples it); iterations whose buffer is still empty then take no update.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub offline_in_replay: bool,
    pub rollout: RolloutConfig,
    /// Decoding: System 1 greedy; System 2 sampled.
    pub planner_max_tokens: usize,
    pub executor_temperature: f32,
    pub executor_top_p: f32,
    pub executor_top_k: usize,
    pub executor_max_tokens: usize,
    /// Tokens per example at most (over-long prompts lose their middle: `roles::fit_prompt`).
    pub max_len: usize,
    pub seed: u64,
}

fn yes() -> bool {
    true
}
fn is_true(x: &bool) -> bool {
    *x
}

impl OnlineRlConfig {
    /// This config under `variant`'s objectives ([`Variant::apply`] on the settings it holds:
    /// γ, τ, Polyak, the actor's α/w_max/normalisation/η, the KL estimator, the critic's form).
    pub fn under(mut self, variant: Variant) -> Self {
        let o = variant.apply(Multi2Objectives {
            gamma: self.critic.gamma,
            tau: self.critic.tau,
            polyak: self.critic.polyak,
            online: self.actor(),
            kl: self.kl,
            online_critic: self.critic_form,
            ..Multi2Objectives::paper()
        });
        (self.critic.gamma, self.critic.tau, self.critic.polyak) = (o.gamma, o.tau, o.polyak);
        (self.alpha, self.w_max) = (o.online.alpha, o.online.w_max);
        (self.normalise, self.eta) = (o.online.normalise, o.online.eta);
        (self.kl, self.critic_form) = (o.kl, o.online_critic);
        self
    }

    fn actor(&self) -> OnlineActorConfig {
        OnlineActorConfig {
            alpha: self.alpha,
            w_max: self.w_max,
            normalise: self.normalise,
            eta: self.eta,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::invalid(format!("online rl: {m}")));
        if self.iterations == 0 || self.episodes == 0 || self.batch_size == 0 {
            return bad("iterations, episodes and batch_size must be positive");
        }
        if self.adapter == self.anchor || self.adapter == self.planner {
            return bad("the online adapter must differ from the anchor and the planner");
        }
        self.actor_optim
            .check("online.actor_optim", self.iterations)?;
        self.critic_optim
            .check("online.critic_optim", self.iterations)?;
        Ok(self.replay.check()?)
    }

    /// Decoding of System 2 during rollouts, with the iteration's seed.
    pub fn executor_sampling(&self, seed: u64) -> SamplingConfig {
        SamplingConfig {
            max_new_tokens: self.executor_max_tokens,
            temperature: self.executor_temperature,
            top_k: Some(self.executor_top_k),
            top_p: Some(self.executor_top_p),
            seed,
            use_cache: true,
        }
    }
}

/// One point of the learning curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// 0 = before any online update (the offline policy).
    pub iteration: usize,
    pub episodes: usize,
    pub success_rate: f64,
    pub mean_score: f64,
}

/// What a finished (or stopped) run reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OnlineRlReport {
    pub iterations_done: usize,
    pub resumed_from: usize,
    pub curve: Vec<CurvePoint>,
}

/// Online segments' trajectory ids start here, above any offline data's.
const ONLINE_TRAJECTORIES: u64 = 1 << 40;

/// What an online checkpoint holds beyond the tensors.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Progress {
    replay: ReplayBuffer<RlExample>,
    curve: Vec<CurvePoint>,
}

/// The System-2 transitions of one played episode, one `Vec` per subgoal segment, with the
/// environment's rewards; a segment ends where System 1 was asked again or the episode ended.
/// Each carries the subtask as System 2 was shown it (`executor_subtask` of the subgoal).
pub fn online_segments(trace: &Trace) -> Vec<Vec<Sys2Transition>> {
    let ep = &trace.episode;
    let n = ep.actions.len();
    let mut out = Vec::new();
    for (k, (start, goal)) in trace.subgoals.iter().enumerate() {
        let end = trace.subgoals.get(k + 1).map_or(n, |(s, _)| *s).min(n);
        if *start >= end {
            continue;
        }
        let subtask = hier_data::subtask::executor_subtask(&ep.task, goal);
        out.push(
            (*start..end)
                .map(|t| Sys2Transition {
                    source: ep.source.clone(),
                    subgoal: subtask.clone(),
                    observation: ep.observations[t].clone(),
                    action: ep.actions[t].clone(),
                    subgoal_done: trace.flags.get(t).copied().unwrap_or(false),
                    reward: ep.rewards[t],
                    env_reward: ep.rewards[t],
                    next_observation: ep.observations[t + 1].clone(),
                    terminal: t + 1 == end,
                    segment: k as u32,
                    step: (t - start) as u32,
                })
                .collect(),
        );
    }
    out
}

/// Online RL of `cfg.adapter` from `cfg.anchor` (both in `lm`, which lives on an autodiff
/// device), playing `train_tasks` on `envs` (one episode per environment at a time).
#[allow(clippy::too_many_arguments)]
pub fn train_online(
    mut lm: CausalLm,
    mut heads: Heads,
    tok: &Tokenizer,
    offline: Vec<RlExample>,
    envs: &mut [Box<dyn Env>],
    train_tasks: &[Task],
    cfg: &OnlineRlConfig,
    out: &Path,
    opts: &RunOptions,
) -> Result<(CausalLm, Heads, OnlineRlReport)> {
    cfg.validate()?;
    if envs.is_empty() || train_tasks.is_empty() {
        return Err(Error::invalid(
            "online rl: no environments or no training tasks".into(),
        ));
    }
    let spec = LoopSpec::json(
        format!("online rl {}", cfg.adapter),
        "online_rl.json",
        cfg,
        cfg.iterations,
        1,
    );
    let mut run: TrainLoop<OnlineRlConfig, Progress> =
        TrainLoop::open(out, spec, cfg, opts)?.seed_backend_per_step(lm.device(), cfg.seed);
    let device = lm.device();
    let hidden = lm.config.hidden_size;
    let planner = lm.adapter_id(&cfg.planner)?;
    let anchor = lm.adapter_id(&cfg.anchor)?;
    let mut optim = Sys2Optimizers::adamw(&cfg.actor_optim, &cfg.critic_optim);
    let (
        id,
        Progress {
            mut replay,
            mut curve,
        },
    ) = if let Some(p) = run.take_resumed() {
        let ckpt = run.checkpoint_dir();
        let id = lm.load_adapter(&cfg.adapter, &ckpt.join("adapter"))?;
        heads = Heads::load(&ckpt.join("heads.safetensors"), hidden, &device)?;
        optim = optim.load(ckpt)?;
        (id, p)
    } else {
        // π_on starts as an exact copy of π_off (through its PEFT files).
        let id = copy_adapter(&mut lm, anchor, &cfg.adapter, &out.join("init_adapter"))?;
        let offline = if cfg.offline_in_replay {
            offline
        } else {
            Vec::new()
        };
        let replay = ReplayBuffer::new(cfg.replay.clone(), offline)?;
        (
            id,
            Progress {
                replay,
                curve: Vec::new(),
            },
        )
    };
    let curve_path = out.join("curve.jsonl");
    let kl_kind = cfg.kl;
    let actor_cfg = cfg.actor();
    let reduction = if cfg.sum_logprobs {
        Reduction::Sum
    } else {
        Reduction::Mean
    };
    while let Some(iteration) = run.next_step() {
        let mut rng =
            StdRng::seed_from_u64(cfg.seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ iteration as u64);
        // 1. Play: System 1 greedy, System 2 = π_on sampled, on the inference copy.
        let mut traces = Vec::new();
        {
            let inference = lm.valid();
            let mut sys1 = BackbonePolicy::new(
                &inference,
                tok,
                Some(planner),
                SamplingConfig::greedy(cfg.planner_max_tokens),
            )
            .with_prefix_cache_mib(opts.prefix_cache_mib);
            let mut sys2 = BackbonePolicy::new(
                &inference,
                tok,
                Some(id),
                cfg.executor_sampling(rng.random()),
            )
            .with_prefix_cache_mib(opts.prefix_cache_mib);
            // Prompts are cut exactly as the training examples are.
            sys1.max_prompt = Some(cfg.max_len.saturating_sub(cfg.planner_max_tokens).max(1));
            sys2.max_prompt = Some(cfg.max_len.saturating_sub(cfg.executor_max_tokens).max(1));
            let mut left = cfg.episodes;
            while left > 0 {
                let k = left.min(envs.len());
                let tasks: Vec<Task> = (0..k)
                    .map(|_| train_tasks[rng.random_range(0..train_tasks.len())].clone())
                    .collect();
                traces.extend(rollout(
                    &mut envs[..k],
                    &tasks,
                    &mut sys1,
                    &mut sys2,
                    &cfg.rollout,
                    "online",
                )?);
                left -= k;
            }
        }
        let successes = traces.iter().filter(|t| t.episode.success).count();
        let mean_score = traces
            .iter()
            .map(|t| t.episode.scores.last().copied().unwrap_or(0.0))
            .sum::<f64>()
            / traces.len() as f64;
        let point = CurvePoint {
            iteration,
            episodes: traces.len(),
            success_rate: successes as f64 / traces.len() as f64,
            mean_score,
        };
        curve.push(point.clone());
        for t in &traces {
            for seg in online_segments(t) {
                let mut ex = executor_rl_examples(tok, &seg, cfg.max_len)?;
                // Trajectory ids of online segments follow the offline data's, one per
                // segment ever offered (the count lives in the checkpointed buffer).
                let trajectory = ONLINE_TRAJECTORIES + replay.offered.iter().sum::<u64>();
                ex.iter_mut().for_each(|e| e.trajectory = trajectory);
                replay.push_segment(ex, t.episode.success);
            }
        }
        // 2. Learn from the mixed buffer.
        let mut sums = [0f32; 5];
        // Transitions drawn from the offline data and from online segments; updates skipped.
        let (mut drawn, mut skipped) = ([0usize; 2], 0usize);
        for _ in 0..cfg.updates {
            if replay.offline_len() + replay.online_len() == 0 {
                // Only without offline data: nothing kept online yet.
                skipped += 1;
                continue;
            }
            let mut batch = Vec::with_capacity(cfg.batch_size);
            for (e, origin) in replay.sample(cfg.batch_size)? {
                drawn[usize::from(origin == Origin::Online)] += 1;
                batch.push(e);
            }
            let pairs: Vec<_> = batch.iter().map(|e| e.pair.clone()).collect();
            let fwd = forward_actions(&lm, id, &pairs, reduction, true)?;
            let critic = match cfg.critic_form {
                OnlineCritic::QAndV => {
                    let next: Vec<Option<Vec<u32>>> =
                        batch.iter().map(|e| e.next_prompt.clone()).collect();
                    let v_next = next_state_values(&lm, id, &heads.v_target, &next)?;
                    critic_step(&heads, &fwd, &batch, v_next, &cfg.critic)?
                }
                OnlineCritic::SarsaTrajectoryMean => {
                    sarsa_critic_step(&lm, id, &heads, &fwd, &batch, &cfg.critic)?
                }
            };
            // The anchor's pass on the inference copy: a pass over tracked weights that is never
            // back-propagated keeps its whole graph alive as long as those weights live (the
            // anchor lives for the whole pipeline), ≈ 15 MB per online stage at smoke size.
            let off = forward_actions(&lm.valid(), anchor, &pairs, reduction, false)?;
            let kl = match kl_kind {
                KlKind::Exact => KlAnchor::Exact {
                    logits_on: fwd.logits.clone(),
                    logits_off: off.logits.detach(),
                    mask: fwd.mask.clone(),
                },
                KlKind::K1 => KlAnchor::K1 {
                    logp_on: fwd.token_logprobs.clone(),
                    logp_off: off.token_logprobs.detach(),
                    mask: fwd.mask.clone(),
                },
                KlKind::K3 => KlAnchor::K3 {
                    logp_on: fwd.token_logprobs.clone(),
                    logp_off: off.token_logprobs.detach(),
                    mask: fwd.mask.clone(),
                },
            };
            let b = batch.len();
            let actor = online_actor_loss(
                fwd.logp.clone(),
                critic.advantage.clone(),
                Tensor::<1>::ones([b], &device),
                Some(kl),
                &actor_cfg,
            )?;
            run.count_nonfinite("actor", nonfinite(&actor))?;
            if cfg.train_critic {
                run.count_nonfinite("td", nonfinite(&critic.td))?;
                run.count_nonfinite("value", nonfinite(&critic.value))?;
            }
            let mut total = actor.loss.clone();
            if cfg.train_critic {
                total = total + critic.td.loss.clone() + critic.value.loss.clone();
            }
            let values = [
                actor.loss.clone().into_scalar::<f32>(),
                actor.component("kl").unwrap_or(f32::NAN),
                critic.td.loss.clone().into_scalar::<f32>(),
                critic.value.loss.clone().into_scalar::<f32>(),
                critic.advantage.clone().mean().into_scalar::<f32>(),
            ];
            if values[..4].iter().any(|v| !v.is_finite()) {
                return Err(Error::invalid(format!(
                    "online rl: a loss became non-finite at iteration {iteration} (actor, kl, td, value = {:?})",
                    &values[..4]
                )));
            }
            for (s, v) in sums.iter_mut().zip(values) {
                *s += v;
            }
            let mut grads = total.backward();
            let at = (iteration, cfg.iterations);
            lm = optim.step_lm(lm, &mut grads, &cfg.actor_optim, at).0;
            if cfg.train_critic {
                heads = optim.step_heads(
                    heads,
                    &mut grads,
                    &cfg.critic_optim,
                    at,
                    cfg.critic.polyak,
                )?;
            }
        }
        let k = (cfg.updates - skipped).max(1) as f32;
        run.log(serde_json::json!({
            "critic": cfg.critic_form, "drawn_offline": drawn[0], "drawn_online": drawn[1],
            "skipped_updates": skipped,
            "success_rate": point.success_rate, "mean_score": point.mean_score,
            "actor": sums[0] / k, "kl": sums[1] / k, "td": sums[2] / k, "value": sums[3] / k, "adv": sums[4] / k,
            "replay_online": replay.online_len(), "replay_offline": replay.offline_len(),
            "kept_success": replay.kept[0], "kept_failure": replay.kept[1],
        }))?;
        run.message(format!(
            "success {:.2} kl {:.4}",
            point.success_rate,
            sums[1] / k
        ));
        run.end_step(
            || Progress {
                replay: replay.clone(),
                curve: curve.clone(),
            },
            |dir| save_checkpoint_parts(dir, &lm, id, &heads, &optim),
        )?;
    }
    let (iterations_done, start) = (run.steps_done(), run.start());
    if run.finish() {
        lm.save_adapter(id, &out.join("adapter"), None)?;
        heads.save(&out.join("heads.safetensors"))?;
        write_jsonl(&curve_path, &curve)?;
    }
    Ok((
        lm,
        heads,
        OnlineRlReport {
            iterations_done,
            resumed_from: start,
            curve,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hier_data::build::Episode;

    #[test]
    fn online_segments_follow_the_planner_calls_with_env_rewards() {
        let trace = Trace {
            episode: Episode {
                source: "textcraft/craft#1".into(),
                task: "craft x".into(),
                observations: ["o0", "o1", "o2", "o3"].map(String::from).to_vec(),
                actions: ["a0", "a1", "a2"].map(String::from).to_vec(),
                rewards: vec![0.0, 0.0, 1.0],
                scores: vec![0.0, 0.0, 1.0],
                done: true,
                success: true,
                origin: "online".into(),
            },
            subgoals: vec![(0, "g0".into()), (2, "g1".into())],
            flags: vec![false, true, true],
            sys1_calls: 2,
            sys2_calls: 3,
            prompt_tokens: 0,
            generated_tokens: 0,
            notes: Vec::new(),
        };
        let segs = online_segments(&trace);
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].len(), 2);
        let (a, b, c) = (&segs[0][0], &segs[0][1], &segs[1][0]);
        assert_eq!(
            (
                a.subgoal.as_str(),
                a.observation.as_str(),
                a.next_observation.as_str()
            ),
            ("g0", "o0", "o1")
        );
        assert!(!a.terminal && b.terminal && b.subgoal_done && c.terminal);
        assert_eq!(
            (c.subgoal.as_str(), c.action.as_str(), c.reward, c.step),
            ("g1", "a2", 1.0, 0)
        );
        assert_eq!(b.target(), "a1; True");
    }
}
