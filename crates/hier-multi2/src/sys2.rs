//! What System 2's offline and online RL trainers share: the critic heads and their targets,
//! one scoring pass that yields action log-probabilities together with the hidden states the
//! heads read, the next-state values, and the critic losses.
//!
//! Heads (METHODS.md A): `Q_ω` reads System 2's last hidden state at the **last token of the
//! action**; `V_ψ` reads it at the last token of the **state** (the prompt) — or, as the
//! authors' code does, at the action's end ([`ValueReads::ActionEnd`]). The heads read
//! *detached* hidden states: the critic losses train the heads only, the actor loss trains the
//! adapter only, so the two learning rates of the paper (actor 1e-4, critic 1e-5) are exactly
//! those of two disjoint parameter sets.

use std::path::Path;

use hier_backbone::burn::module::Module;
use hier_backbone::burn::optim::{GradientsParams, ModuleOptimizer};
use hier_backbone::burn::tensor::{Device, Gradients, Tensor, TensorData};
use hier_backbone::weights::HostTensor;
use hier_backbone::{AdapterId, Batch, CausalLm, Forward, ValueHead, gather_positions};
use hier_rl_losses::{
    LossOutput, Reduction, action_logprobs, expectile_loss, polyak_update, td_loss,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::roles::RlExample;
use hier_train::SharedErrors as _;
use hier_train::optim::OptimConfig;
use hier_train::sft::SftExample;

pub use crate::error::{Error, Result};

/// Where `V(o)` is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueReads {
    /// The state's last token (the paper's `V(o)`).
    #[default]
    StateEnd,
    /// The action's last token, like `Q` (the authors' code; `V` then sees the action).
    ActionEnd,
}

/// Host tensors of a head named `prefix`, `U(±1/√in)` (PyTorch's `nn.Linear` default) from `rng`.
fn seeded_head_tensors(
    prefix: &str,
    hidden: usize,
    rng: &mut StdRng,
) -> std::collections::BTreeMap<String, HostTensor> {
    let bound = 1.0 / (hidden as f32).sqrt();
    let mut draw =
        |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-bound..bound)).collect() };
    let mut tensors = std::collections::BTreeMap::new();
    for (k, dout) in [(0usize, hidden), (2, 1)] {
        let w = HostTensor {
            shape: vec![dout, hidden],
            data: draw(dout * hidden),
        };
        let b = HostTensor {
            shape: vec![dout],
            data: draw(dout),
        };
        tensors.insert(format!("{prefix}.{k}.weight"), w);
        tensors.insert(format!("{prefix}.{k}.bias"), b);
    }
    tensors
}

/// `Q`, `V` and their Polyak-averaged targets `Q̄`, `V̄`.
#[derive(Debug)]
pub struct Heads {
    pub q: ValueHead,
    pub v: ValueHead,
    pub q_target: ValueHead,
    pub v_target: ValueHead,
}

const HEAD_NAMES: [&str; 4] = ["q", "v", "q_target", "v_target"];

impl Heads {
    /// Fresh heads of width `hidden` drawn from `seed`; the targets start as copies. Every
    /// head's parameters are named by its prefix (`q`, `v`, `q_target`, `v_target`), exactly
    /// as [`Heads::load`] names them, so a resumed run finds its optimizer state.
    pub fn seeded(hidden: usize, seed: u64, device: &Device) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xC217_1C00);
        let mut all = seeded_head_tensors("q", hidden, &mut rng);
        all.extend(seeded_head_tensors("v", hidden, &mut rng));
        let copies: Vec<(String, HostTensor)> = all
            .iter()
            .map(|(k, t)| (k.replacen('.', "_target.", 1), t.clone()))
            .collect();
        all.extend(copies);
        let build = |p: &str| {
            ValueHead::from_host_tensors(&all, p, hidden, Path::new("<seeded init>"), device)
                .expect("shapes are built to match")
        };
        Self {
            q: build("q"),
            v: build("v"),
            q_target: build("q_target"),
            v_target: build("v_target"),
        }
    }

    /// Writes all four heads to one safetensors file (PyTorch `nn.Sequential` names).
    pub fn save(&self, path: &Path) -> Result<()> {
        ValueHead::save_all(
            &[
                ("q", &self.q),
                ("v", &self.v),
                ("q_target", &self.q_target),
                ("v_target", &self.v_target),
            ],
            path,
        )?;
        Ok(())
    }

    /// Reads heads written by [`Heads::save`].
    pub fn load(path: &Path, hidden: usize, device: &Device) -> Result<Self> {
        let mut h = ValueHead::load_all(&HEAD_NAMES, hidden, path, device)?.into_iter();
        let mut next = || h.next().expect("four heads");
        Ok(Self {
            q: next(),
            v: next(),
            q_target: next(),
            v_target: next(),
        })
    }

    /// `θ̄ ← (1−ρ)θ̄ + ρθ` for both targets.
    pub fn update_targets(self, rate: f32) -> Result<Self> {
        Ok(Self {
            q_target: polyak_update(self.q_target, &self.q, rate)?,
            v_target: polyak_update(self.v_target, &self.v, rate)?,
            q: self.q,
            v: self.v,
        })
    }
}

/// One scoring pass over `(prompt, action)` rows.
#[derive(Debug)]
pub struct ActionForward {
    /// `log π(a|o,g)` per row `[n]` (with gradient on an autodiff device).
    pub logp: Tensor<1>,
    /// Per-token log-probs, mask and logits of the action tokens `[n, C(, V)]`.
    pub token_logprobs: Tensor<2>,
    pub mask: Tensor<2>,
    pub logits: Tensor<3>,
    /// Detached hidden states at the state's last token and at the action's last token `[n, H]`.
    pub h_state: Tensor<2>,
    pub h_action: Tensor<2>,
}

/// Scores `rows` under adapter `id` (`train` turns LoRA dropout on).
pub fn forward_actions(
    lm: &CausalLm,
    id: AdapterId,
    rows: &[SftExample],
    reduction: Reduction,
    train: bool,
) -> Result<ActionForward> {
    let requests = hier_train::sft::score_requests(rows);
    let out = lm.score(
        &requests,
        Forward {
            adapter: Some(id),
            train,
        },
    )?;
    let p = out.continuation_start;
    let (logp, _) = action_logprobs(out.logprobs.clone(), out.mask.clone(), reduction)?;
    let hidden = out.hidden.detach();
    let state_pos = vec![p - 1; rows.len()];
    let action_pos: Vec<usize> = rows.iter().map(|e| p + e.target.len() - 1).collect();
    Ok(ActionForward {
        logp,
        token_logprobs: out.logprobs,
        mask: out.mask,
        logits: out.logits,
        h_state: gather_positions(hidden.clone(), &state_pos)?,
        h_action: gather_positions(hidden, &action_pos)?,
    })
}

/// `V̄(o')` of each row under the target value head, 0 where there is no next state. Detached.
pub fn next_state_values(
    lm: &CausalLm,
    id: AdapterId,
    v_target: &ValueHead,
    next: &[Option<Vec<u32>>],
) -> Result<Tensor<1>> {
    let device = lm.device();
    let live: Vec<(usize, &Vec<u32>)> = next
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
        .collect();
    let mut values = vec![0f32; next.len()];
    if !live.is_empty() {
        let rows: Vec<Vec<u32>> = live.iter().map(|(_, n)| (*n).clone()).collect();
        let pad = lm.config.pad_token_id.unwrap_or(0);
        let batch = Batch::left_padded(&rows, pad);
        // On the inference copy: a pass over tracked adapter weights that is never
        // back-propagated keeps its graph alive as long as those weights live.
        let hidden = lm
            .valid()
            .forward_hidden(&batch, Forward::with(Some(id)), None)?;
        let last = vec![batch.len - 1; rows.len()];
        let v = HostTensor::from_tensor(v_target.forward_at(hidden, &last)?).data;
        for ((i, _), x) in live.iter().zip(v) {
            values[*i] = x;
        }
    }
    Ok(Tensor::from_data(
        TensorData::new(values, [next.len()]),
        &device,
    ))
}

/// The critic's losses on the first `rows.len()` rows of `fwd` and the detached advantage
/// `A = Q̄(o,a) − V(o)` of every row of `fwd` (rows past the data are policy samples).
#[derive(Debug)]
pub struct CriticStep {
    pub td: LossOutput,
    pub value: LossOutput,
    /// `[n]` advantages of all rows of the forward pass, detached.
    pub advantage: Tensor<1>,
}

/// Settings of the critic.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriticConfig {
    /// Discount per environment step.
    pub gamma: f32,
    /// Expectile τ of the value loss (0.5 is a plain MSE).
    pub tau: f32,
    /// Polyak rate of the targets.
    pub polyak: f32,
    pub value_reads: ValueReads,
}

impl Default for CriticConfig {
    /// The paper: γ 0.99, τ 0.7, Polyak 0.2, V at the state's end.
    fn default() -> Self {
        Self {
            gamma: 0.99,
            tau: 0.7,
            polyak: 0.2,
            value_reads: ValueReads::StateEnd,
        }
    }
}

/// TD loss of `Q` against `r + γ(1−d)V̄(o')` and expectile loss of `V` against `Q̄`, over the
/// data rows `rows` (the first `rows.len()` rows of `fwd`).
pub fn critic_step(
    heads: &Heads,
    fwd: &ActionForward,
    rows: &[RlExample],
    v_next: Tensor<1>,
    cfg: &CriticConfig,
) -> Result<CriticStep> {
    let [n, h] = fwd.h_state.dims();
    let b = rows.len();
    if b == 0 || b > n {
        return Err(Error::invalid(format!(
            "{b} data rows in a forward pass of {n}"
        )));
    }
    let device = fwd.h_state.device();
    let data = |t: Tensor<2>| t.slice([0..b, 0..h]);
    let q = heads.q.forward(data(fwd.h_action.clone()));
    let v_all = match cfg.value_reads {
        ValueReads::StateEnd => heads.v.forward(fwd.h_state.clone()),
        ValueReads::ActionEnd => heads.v.forward(fwd.h_action.clone()),
    };
    let q_bar_all = heads.q_target.forward(fwd.h_action.clone()).detach();
    let v = v_all.clone().narrow(0, 0, b);
    let reward = Tensor::<1>::from_data(
        TensorData::new(rows.iter().map(|r| r.reward).collect::<Vec<_>>(), [b]),
        &device,
    );
    let done = Tensor::<1>::from_data(
        TensorData::new(
            rows.iter()
                .map(|r| f32::from(u8::from(r.terminal)))
                .collect::<Vec<_>>(),
            [b],
        ),
        &device,
    );
    let ones = Tensor::<1>::ones([b], &device);
    let td = td_loss(q, reward, done, v_next, ones.clone(), cfg.gamma)?;
    let value = expectile_loss(q_bar_all.clone().narrow(0, 0, b), v, ones, cfg.tau)?;
    // Policy samples share their state with data row `i mod b`, so they share its V(o).
    let v_det = v_all.detach();
    let v_rows = if n == b {
        v_det
    } else {
        let idx: Vec<usize> = (0..n)
            .map(|i| if i < b { i } else { (i - b) % b })
            .collect();
        let host = HostTensor::from_tensor(v_det).data;
        let picked: Vec<f32> = idx.iter().map(|&i| host[i]).collect();
        Tensor::from_data(TensorData::new(picked, [n]), &device)
    };
    Ok(CriticStep {
        td,
        value,
        advantage: q_bar_all - v_rows,
    })
}

/// The authors' released online critic ([`hier_rl_losses::OnlineCritic::SarsaTrajectoryMean`]):
/// `Q` by SARSA, `L = E[(r + γ(1−d)·Q̄(o', a') − Q(o, a))²]` with `a'` the action the data took
/// at `o'` ([`hier_rl_losses::sarsa_loss`]), no value head (its loss is 0), and the advantage
/// `A_i = Q_i − mean_{j ∈ traj(i)} Q_j` over the transitions of `i`'s trajectory in the batch
/// ([`hier_rl_losses::trajectory_mean_advantage`]). Every row of `fwd` is a data row.
pub fn sarsa_critic_step(
    lm: &CausalLm,
    id: AdapterId,
    heads: &Heads,
    fwd: &ActionForward,
    rows: &[RlExample],
    cfg: &CriticConfig,
) -> Result<CriticStep> {
    let [n, _] = fwd.h_action.dims();
    let b = rows.len();
    if b == 0 || b != n {
        return Err(Error::invalid(format!(
            "the SARSA critic takes data rows only: {b} rows in a forward pass of {n}"
        )));
    }
    let device = fwd.h_action.device();
    // Q̄(o', a') of every non-terminal row, from one scoring pass over the next pairs.
    let mut live = Vec::new();
    let mut next_rows = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.terminal {
            continue;
        }
        match (&r.next_prompt, &r.next_target) {
            (Some(p), Some(a)) => {
                live.push(i);
                next_rows.push(SftExample {
                    prompt: p.clone(),
                    target: a.clone(),
                });
            }
            _ => {
                return Err(Error::invalid(format!(
                    "the SARSA critic needs the next state and action of every non-terminal \
                     transition; batch row {i} lacks them"
                )));
            }
        }
    }
    let mut q_next = vec![0f32; b];
    if !next_rows.is_empty() {
        // On the inference copy (no graph kept alive; see `next_state_values`).
        let next = forward_actions(
            &lm.valid(),
            id,
            &next_rows,
            hier_rl_losses::Reduction::Mean,
            false,
        )?;
        let q = HostTensor::from_tensor(heads.q_target.forward(next.h_action).detach()).data;
        for (&i, v) in live.iter().zip(q) {
            q_next[i] = v;
        }
    }
    let host = |v: Vec<f32>| Tensor::<1>::from_data(TensorData::new(v, [b]), &device);
    let q = heads.q.forward(fwd.h_action.clone());
    let reward = host(rows.iter().map(|r| r.reward).collect());
    let done = host(
        rows.iter()
            .map(|r| f32::from(u8::from(r.terminal)))
            .collect(),
    );
    let ones = Tensor::<1>::ones([b], &device);
    let td = hier_rl_losses::sarsa_loss(q.clone(), reward, done, host(q_next), ones, cfg.gamma)?;
    let trajectory: Vec<usize> = rows.iter().map(|r| r.trajectory as usize).collect();
    let advantage = hier_rl_losses::trajectory_mean_advantage(q, &trajectory)?;
    Ok(CriticStep {
        td,
        value: LossOutput {
            loss: Tensor::<1>::zeros([1], &device),
            components: vec![("nonfinite", Tensor::<1>::zeros([1], &device))],
        },
        advantage,
    })
}

/// The non-finite elements a System-2 loss dropped (its `nonfinite` component, which every
/// one of them reports), for [`hier_train::TrainLoop::count_nonfinite`].
pub fn nonfinite(out: &LossOutput) -> f32 {
    out.component("nonfinite")
        .expect("every System-2 loss reports its dropped non-finite elements")
}

/// The three AdamW optimisers of System 2's RL (β 0.9/0.999, ε 1e-8): the adapter's (the
/// actor's settings) and the two heads' (the critic's). Each phase saves and reloads them with its
/// checkpoint.
pub struct Sys2Optimizers {
    pub lm: ModuleOptimizer,
    pub q: ModuleOptimizer,
    pub v: ModuleOptimizer,
}

const OPTIM_FILES: [&str; 3] = ["optim_lm.bpk", "optim_q.bpk", "optim_v.bpk"];

impl Sys2Optimizers {
    pub fn adamw(actor: &OptimConfig, critic: &OptimConfig) -> Self {
        Self {
            lm: actor.adamw(),
            q: critic.adamw(),
            v: critic.adamw(),
        }
    }

    /// Reloads the states saved by [`Sys2Optimizers::save`] in `dir`.
    pub fn load(self, dir: &Path) -> Result<Self> {
        let load = |o: ModuleOptimizer, name: &str| {
            let p = dir.join(name);
            o.load(&p)
                .map_err(|e| Error::checkpoint(p, format!("{e:?}")))
        };
        Ok(Self {
            lm: load(self.lm, OPTIM_FILES[0])?,
            q: load(self.q, OPTIM_FILES[1])?,
            v: load(self.v, OPTIM_FILES[2])?,
        })
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        for (o, name) in [&self.lm, &self.q, &self.v].into_iter().zip(OPTIM_FILES) {
            let p = dir.join(name);
            o.save(&p)
                .map_err(|e| Error::checkpoint(p, format!("{e:?}")))?;
        }
        Ok(())
    }

    /// One step of the adapter on its gradients in `grads` under the actor's settings (clipping,
    /// the learning rate of step `step` of `steps`); returns the model and the gradients' global
    /// norm before clipping.
    pub fn step_lm(
        &mut self,
        lm: CausalLm,
        grads: &mut Gradients,
        actor: &OptimConfig,
        (step, steps): (usize, usize),
    ) -> (CausalLm, f32) {
        let mut g_lm = GradientsParams::from_module(grads, &lm);
        let norm = actor.clip(&lm, &mut g_lm);
        (self.lm.step(actor.lr_at(step, steps), lm, g_lm), norm)
    }

    /// One step of both heads on their gradients in `grads` under the critic's settings (the
    /// learning rate of step `step` of `steps`; each head's gradients clipped on their own when
    /// `critic.grad_clip` is set), then the Polyak update of the targets.
    pub fn step_heads(
        &mut self,
        heads: Heads,
        grads: &mut Gradients,
        critic: &OptimConfig,
        (step, steps): (usize, usize),
        polyak: f32,
    ) -> Result<Heads> {
        let lr = critic.lr_at(step, steps);
        let mut g_q = GradientsParams::from_module(grads, &heads.q);
        let mut g_v = GradientsParams::from_module(grads, &heads.v);
        if critic.grad_clip.is_some() {
            critic.clip(&heads.q, &mut g_q);
            critic.clip(&heads.v, &mut g_v);
        }
        let Heads {
            q,
            v,
            q_target,
            v_target,
        } = heads;
        Heads {
            q: self.q.step(lr, q, g_q),
            v: self.v.step(lr, v, g_v),
            q_target,
            v_target,
        }
        .update_targets(polyak)
    }
}

/// Writes a trainer's checkpoint contents: adapter `id`, heads, optimisers.
pub fn save_checkpoint_parts(
    dir: &Path,
    lm: &CausalLm,
    id: AdapterId,
    heads: &Heads,
    optim: &Sys2Optimizers,
) -> Result<()> {
    lm.save_adapter(id, &dir.join("adapter"), None)?;
    heads.save(&dir.join("heads.safetensors"))?;
    optim.save(dir)
}
