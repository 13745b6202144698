//! System 2 offline RL (METHODS.md A.1, phase 2) on subgoal-conditioned transitions
//! `(g, o, a, r, o', d)` with the intrinsic subgoal reward:
//!
//! ```text
//! critic  L_ω = E[(r + γ(1−d)·V̄_ψ(o') − Q_ω(o,a))²]
//! value   L_ψ = E[ |τ − 1{u<0}|·u² ],  u = Q̄_ω(o,a) − V_ψ(o)
//! actor   L_θ = −E_data[ min(e^{β·A}, w_max)·log π_θ(a|o,g) ] − λ·E_{a'∼π_θ}[ A(o,a')·log π_θ(a'|o,g) ]
//! targets Q̄ ← (1−ρ)Q̄ + ρQ,  V̄ ← (1−ρ)V̄ + ρV
//! ```
//!
//! with `A = Q̄ − V`. The actions `a'` of the policy-anchored term are **sampled from the
//! current adapter** (T 0.7, top-p 0.9, top-k 50, one per state) and scored by the critic; its
//! gradient is the score-function estimator (A detached). `λ = 0` is the `vanilla-iql`
//! ablation — what the authors' released code actually runs.
//!
//! The trained adapter starts from PEFT's initialisation (seeded), the heads from PyTorch's
//! `nn.Linear` initialisation (seeded). Runs are resumable exactly like [`hier_train::sft`]:
//! `<out>/checkpoint` holds adapter, heads, the three optimisers and the step; `<out>/adapter`
//! and `<out>/heads.safetensors` are written at the end.

use std::path::Path;

use hier_backbone::{CausalLm, GenerationRequest, LoraConfig, SamplingConfig, TargetModule};
use hier_rl_losses::{
    AnchorBaseline, Multi2Objectives, OfflineActorConfig, Reduction, Variant, offline_actor_loss,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::roles::RlExample;
use crate::sys2::{
    CriticConfig, Heads, Result, Sys2Optimizers, critic_step, forward_actions, next_state_values,
    nonfinite, save_checkpoint_parts,
};
use hier_train::SharedErrors as _;
use hier_train::optim::OptimConfig;
use hier_train::prompt::STOP;
use hier_train::runlog::RunOptions;
use hier_train::sft::SftExample;
use hier_train::trainer::{LoopSpec, TrainLoop};

/// An offline RL run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfflineRlConfig {
    /// Adapter trained (`sys2`).
    pub adapter: String,
    /// The adapter's rank, α, dropout and target modules (when not started from another).
    pub lora: LoraConfig,
    pub steps: usize,
    /// Transitions per step (drawn with replacement).
    pub batch_size: usize,
    /// AdamW, schedule and clipping of the adapter (actor) and of each head (critic).
    /// Authors: learning rates 1e-4 and 1e-5.
    pub actor_optim: OptimConfig,
    pub critic_optim: OptimConfig,
    pub critic: CriticConfig,
    /// β, w_max, batch-mean normalisation, λ.
    pub beta: f32,
    pub w_max: f32,
    pub normalise: bool,
    pub lambda: f32,
    /// Baseline of the policy-anchored term's score-function estimator: `none` (the plain
    /// estimator, the default) or `leave-one-out` over the batch's samples. Left out of the
    /// serialised config when `none`, so the keys of stages trained before it existed hold.
    #[serde(default, skip_serializing_if = "is_plain_estimator")]
    pub anchor_baseline: AnchorBaseline,
    /// Mean (the paper) or sum of the action's token log-probs.
    pub sum_logprobs: bool,
    /// Decoding of the policy samples.
    pub sample_temperature: f32,
    pub sample_top_p: f32,
    pub sample_top_k: usize,
    pub sample_max_tokens: usize,
    pub seed: u64,
    pub checkpoint_every: usize,
    pub log_every: usize,
}

impl OfflineRlConfig {
    /// The paper's settings for adapter `sys2` (steps and batch to be chosen by the profile).
    pub fn paper(steps: usize, batch_size: usize) -> Self {
        let actor = OfflineActorConfig::default();
        Self {
            adapter: "sys2".into(),
            lora: LoraConfig::new(
                16,
                32.0,
                &[
                    TargetModule::Q,
                    TargetModule::K,
                    TargetModule::V,
                    TargetModule::O,
                ],
            ),
            steps,
            batch_size,
            actor_optim: OptimConfig {
                weight_decay: 1e-2,
                grad_clip: Some(1.0),
                ..OptimConfig::constant(1e-4)
            },
            critic_optim: OptimConfig {
                weight_decay: 1e-2,
                ..OptimConfig::constant(1e-5)
            },
            critic: CriticConfig::default(),
            beta: actor.beta,
            w_max: actor.w_max,
            normalise: actor.normalise,
            lambda: actor.lambda,
            anchor_baseline: actor.anchor_baseline,
            sum_logprobs: false,
            sample_temperature: 0.7,
            sample_top_p: 0.9,
            sample_top_k: 50,
            sample_max_tokens: 24,
            seed: 0,
            checkpoint_every: 100,
            log_every: 10,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::invalid(format!("offline rl: {m}")));
        if self.steps == 0
            || self.batch_size == 0
            || self.checkpoint_every == 0
            || self.log_every == 0
        {
            return bad("steps, batch_size, checkpoint_every and log_every must be positive");
        }
        self.actor_optim.check("offline.actor_optim", self.steps)?;
        self.critic_optim
            .check("offline.critic_optim", self.steps)?;
        if !(0.0..1.0).contains(&self.critic.tau) || self.critic.tau == 0.0 {
            return bad("tau must be in (0, 1)");
        }
        if !(0.0..=1.0).contains(&self.critic.polyak) {
            return bad("polyak must be in [0, 1]");
        }
        if self.sample_max_tokens == 0 {
            return bad("sample_max_tokens must be positive");
        }
        Ok(self.lora.check("offline rl")?)
    }

    /// This config under `variant`'s objectives ([`Variant::apply`] on the settings it holds:
    /// γ, τ, Polyak and the actor's β/w_max/normalisation/λ).
    pub fn under(mut self, variant: Variant) -> Self {
        let o = variant.apply(Multi2Objectives {
            gamma: self.critic.gamma,
            tau: self.critic.tau,
            polyak: self.critic.polyak,
            offline: self.actor(),
            ..Multi2Objectives::paper()
        });
        (self.critic.gamma, self.critic.tau, self.critic.polyak) = (o.gamma, o.tau, o.polyak);
        (self.beta, self.w_max) = (o.offline.beta, o.offline.w_max);
        (self.normalise, self.lambda) = (o.offline.normalise, o.offline.lambda);
        self
    }

    fn actor(&self) -> OfflineActorConfig {
        OfflineActorConfig {
            beta: self.beta,
            w_max: self.w_max,
            normalise: self.normalise,
            lambda: self.lambda,
            anchor_baseline: self.anchor_baseline,
        }
    }

    fn reduction(&self) -> Reduction {
        if self.sum_logprobs {
            Reduction::Sum
        } else {
            Reduction::Mean
        }
    }
}

fn is_plain_estimator(b: &AnchorBaseline) -> bool {
    *b == AnchorBaseline::None
}

/// What a finished (or stopped) run reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OfflineRlReport {
    pub steps_done: usize,
    pub resumed_from: usize,
    /// Means over the first and the last logged window.
    pub first: Window,
    pub last: Window,
}

/// Means of the logged quantities over a window of steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Window {
    pub actor: f32,
    pub td: f32,
    pub value: f32,
    pub q_mean: f32,
    pub adv_data: f32,
    pub adv_policy: f32,
}

/// Trains (or resumes) adapter `cfg.adapter` and the critic heads on `data`; `lm` must live on
/// an autodiff device. Returns the model (with the adapter) and the heads.
pub fn train_offline(
    lm: CausalLm,
    data: &[RlExample],
    cfg: &OfflineRlConfig,
    out: &Path,
    opts: &RunOptions,
) -> Result<(CausalLm, Heads, OfflineRlReport)> {
    train_offline_from(lm, data, cfg, out, opts, None)
}

/// [`train_offline`], the adapter starting from the PEFT directory `init` (e.g. an SFT
/// adapter) instead of PEFT's fresh initialisation.
pub fn train_offline_from(
    mut lm: CausalLm,
    data: &[RlExample],
    cfg: &OfflineRlConfig,
    out: &Path,
    opts: &RunOptions,
    init: Option<&Path>,
) -> Result<(CausalLm, Heads, OfflineRlReport)> {
    cfg.validate()?;
    if data.is_empty() {
        return Err(Error::invalid("offline rl: no transitions".into()));
    }
    let spec = LoopSpec::json(
        format!("offline rl {}", cfg.adapter),
        "offline_rl.json",
        cfg,
        cfg.steps,
        cfg.checkpoint_every,
    );
    let mut run: TrainLoop<OfflineRlConfig> =
        TrainLoop::open(out, spec, cfg, opts)?.seed_backend_per_step(lm.device(), cfg.seed);
    let device = lm.device();
    let hidden = lm.config.hidden_size;
    let mut optim = Sys2Optimizers::adamw(&cfg.actor_optim, &cfg.critic_optim);
    let (id, mut heads) = if run.take_resumed().is_some() {
        let ckpt = run.checkpoint_dir();
        let id = lm.load_adapter(&cfg.adapter, &ckpt.join("adapter"))?;
        let heads = Heads::load(&ckpt.join("heads.safetensors"), hidden, &device)?;
        optim = optim.load(ckpt)?;
        (id, heads)
    } else {
        let id = match init {
            Some(dir) => {
                let id = lm.load_adapter(&cfg.adapter, dir)?;
                let found = &lm.adapters()[id.0].config;
                if found.r != cfg.lora.r {
                    return Err(Error::invalid(format!(
                        "offline rl: {} has rank {}, the config says {}",
                        dir.display(),
                        found.r,
                        cfg.lora.r
                    )));
                }
                id
            }
            None => lm.add_adapter(&cfg.adapter, cfg.lora.clone(), cfg.seed)?,
        };
        (id, Heads::seeded(hidden, cfg.seed, &device))
    };
    let stop_tokens: std::collections::BTreeSet<u32> = data
        .iter()
        .filter_map(|e| e.pair.target.last().copied())
        .collect();
    if stop_tokens.len() != 1 {
        return Err(Error::invalid(format!(
            "offline rl: the targets must all end with the one stop token of `{STOP:?}`; they end with {stop_tokens:?}"
        )));
    }
    let actor_cfg = cfg.actor();
    let mut windows: (Option<Window>, Window, usize) = (None, Window::default(), 0);
    let mut last = Window::default();
    while let Some(step) = run.next_step() {
        let mut rng =
            StdRng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step as u64);
        let batch: Vec<RlExample> = (0..cfg.batch_size)
            .map(|_| data[rng.random_range(0..data.len())].clone())
            .collect();
        let mut rows: Vec<SftExample> = batch.iter().map(|e| e.pair.clone()).collect();
        let with_samples = cfg.lambda != 0.0;
        if with_samples {
            let sampling = SamplingConfig {
                max_new_tokens: cfg.sample_max_tokens,
                temperature: cfg.sample_temperature,
                top_k: Some(cfg.sample_top_k),
                top_p: Some(cfg.sample_top_p),
                seed: rng.random(),
                use_cache: true,
            };
            rows.extend(sample_actions(&lm, id, &batch, &sampling)?);
        }
        let fwd = forward_actions(&lm, id, &rows, cfg.reduction(), true)?;
        let next: Vec<Option<Vec<u32>>> = batch.iter().map(|e| e.next_prompt.clone()).collect();
        let v_next = next_state_values(&lm, id, &heads.v_target, &next)?;
        let critic = critic_step(&heads, &fwd, &batch, v_next, &cfg.critic)?;
        let b = batch.len();
        let n = rows.len();
        let ones = |k: usize| hier_backbone::burn::tensor::Tensor::<1>::ones([k], &device);
        let adv_data = critic.advantage.clone().narrow(0, 0, b);
        let samples = with_samples.then(|| {
            (
                fwd.logp.clone().narrow(0, b, n - b),
                critic.advantage.clone().narrow(0, b, n - b),
                ones(n - b),
            )
        });
        let actor = offline_actor_loss(
            fwd.logp.clone().narrow(0, 0, b),
            adv_data.clone(),
            ones(b),
            samples,
            &actor_cfg,
        )?;
        for (quantity, out) in [
            ("actor", &actor),
            ("td", &critic.td),
            ("value", &critic.value),
        ] {
            run.count_nonfinite(quantity, nonfinite(out))?;
        }
        let total = actor.loss.clone() + critic.td.loss.clone() + critic.value.loss.clone();
        let values = [
            actor.loss.clone().into_scalar::<f32>(),
            critic.td.loss.clone().into_scalar::<f32>(),
            critic.value.loss.clone().into_scalar::<f32>(),
        ];
        if values.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "offline rl: a loss became non-finite at step {step} (actor, td, value = {values:?}); lower the learning rates"
            )));
        }
        let mut grads = total.backward();
        let at = (step, cfg.steps);
        let (m, grad_norm) = optim.step_lm(lm, &mut grads, &cfg.actor_optim, at);
        lm = m;
        heads = optim.step_heads(heads, &mut grads, &cfg.critic_optim, at, cfg.critic.polyak)?;
        let mean = |t: hier_backbone::burn::tensor::Tensor<1>| t.mean().into_scalar::<f32>();
        let w = &mut windows.1;
        w.actor += values[0];
        w.td += values[1];
        w.value += values[2];
        w.q_mean += critic.td.component("q_mean").unwrap_or(f32::NAN);
        w.adv_data += mean(adv_data);
        w.adv_policy += if with_samples {
            mean(critic.advantage.narrow(0, b, n - b))
        } else {
            0.0
        };
        windows.2 += 1;
        if run.logs_at(step, cfg.log_every) {
            let k = windows.2 as f32;
            let w = std::mem::take(&mut windows.1);
            windows.2 = 0;
            last = Window {
                actor: w.actor / k,
                td: w.td / k,
                value: w.value / k,
                q_mean: w.q_mean / k,
                adv_data: w.adv_data / k,
                adv_policy: w.adv_policy / k,
            };
            if windows.0.is_none() {
                windows.0 = Some(last.clone());
            }
            let mut line = serde_json::to_value(&last).expect("serialises");
            line["grad_norm"] = grad_norm.into();
            for (k, v) in actor.host() {
                line[format!("actor_{k}")] = v.into();
            }
            run.log(line)?;
            run.message(format!(
                "actor {:.3} td {:.4} A {:+.3}",
                last.actor, last.td, last.adv_data
            ));
        }
        run.end_step(
            || (),
            |dir| save_checkpoint_parts(dir, &lm, id, &heads, &optim),
        )?;
    }
    let (steps_done, resumed_from) = (run.steps_done(), run.start());
    if run.finish() {
        lm.save_adapter(id, &out.join("adapter"), None)?;
        heads.save(&out.join("heads.safetensors"))?;
    }
    let report = OfflineRlReport {
        steps_done,
        resumed_from,
        first: windows.0.unwrap_or_default(),
        last,
    };
    Ok((lm, heads, report))
}

/// One action per row of `batch` sampled from adapter `id` (on the model's inference copy,
/// so no graph is built), as `(prompt, sampled tokens)` rows. Generation yields at least one
/// token per row (`sample_max_tokens` ≥ 1 is checked); an empty sample would be a backbone bug
/// and is an error rather than a row silently scored on a stand-in.
pub(crate) fn sample_actions(
    lm: &CausalLm,
    id: hier_backbone::AdapterId,
    batch: &[RlExample],
    sampling: &SamplingConfig,
) -> Result<Vec<SftExample>> {
    let inference = hier_backbone::burn::module::Module::valid(lm);
    let stop_ids = newline_tokens(batch);
    let requests: Vec<GenerationRequest> = batch
        .iter()
        .map(|e| GenerationRequest {
            prompt: e.pair.prompt.clone(),
            stop_tokens: stop_ids.clone(),
            stop_strings: vec![],
        })
        .collect();
    let gens = inference.generate(&requests, sampling, Some(id), None)?;
    batch
        .iter()
        .zip(gens)
        .enumerate()
        .map(|(i, (e, g))| {
            if g.tokens.is_empty() {
                return Err(Error::invalid(format!(
                    "offline rl: the policy sample of batch row {i} has no token"
                )));
            }
            Ok(SftExample {
                prompt: e.pair.prompt.clone(),
                target: g.tokens,
            })
        })
        .collect()
}

/// The token(s) the targets end with ([`STOP`]): the last token of any target.
fn newline_tokens(batch: &[RlExample]) -> Vec<u32> {
    debug_assert_eq!(STOP, "\n");
    batch
        .iter()
        .filter_map(|e| e.pair.target.last().copied())
        .take(1)
        .collect()
}
