//! The System-2 critic: TD loss for `Q`, expectile loss for `V`, and the released code's
//! SARSA variant.

use burn::tensor::Tensor;

use crate::error::{LossError, Result, same_len};
use crate::finite::{all_finite, effective_mask, masked_mean, zero_where_bad};
use crate::output::LossOutput;

/// TD loss with terminal masking,
///
/// ```text
/// L_ω = E[(r + γ·(1 − d)·V̄(o') − Q(o, a))²]
/// ```
///
/// `q = Q(o,a)` carries the gradient; `v_next_target = V̄(o')` is detached here (it comes from
/// the target head). All inputs are `[B]`; `mask` (1 = use) may drop padding rows.
/// Components: `td_error_abs` (mean |δ|), `q_mean`, `nonfinite`.
pub fn td_loss(
    q: Tensor<1>,
    reward: Tensor<1>,
    done: Tensor<1>,
    v_next_target: Tensor<1>,
    mask: Tensor<1>,
    gamma: f32,
) -> Result<LossOutput> {
    let [b] = q.dims();
    same_len(
        b,
        &[
            ("reward", &reward),
            ("done", &done),
            ("v_next_target", &v_next_target),
            ("mask", &mask),
        ],
    )?;
    if !(0.0..=1.0).contains(&gamma) {
        return Err(LossError::Invalid(format!(
            "gamma {gamma} is outside [0, 1]"
        )));
    }
    let ok = all_finite(&[&q, &reward, &done, &v_next_target]);
    let (m, dropped) = effective_mask(mask, &ok);
    // The whole target y = r + γ(1−d)·V̄(o') is a constant of the step, whatever the caller
    // passes (tests/detached_targets.rs).
    let target = (zero_where_bad(reward, &ok)
        + (zero_where_bad(done, &ok).neg() + 1.0) * zero_where_bad(v_next_target, &ok) * gamma)
        .detach();
    let q = zero_where_bad(q, &ok);
    let delta = target - q.clone();
    let loss = masked_mean(delta.clone().square(), m.clone());
    Ok(LossOutput {
        loss,
        components: vec![
            ("td_error_abs", masked_mean(delta.abs(), m.clone()).detach()),
            ("q_mean", masked_mean(q, m).detach()),
            ("nonfinite", dropped),
        ],
    })
}

/// Expectile value loss,
///
/// ```text
/// L_ψ = E[ |τ − 1{u < 0}|·u² ],   u = Q̄(o, a) − V(o)
/// ```
///
/// `q_target = Q̄` is detached; `v` carries the gradient. τ ∈ (0, 1); τ = 0.5 is half the MSE,
/// τ → 1 approaches the maximum of Q̄ over the data's actions (Multi² uses 0.7).
/// Components: `v_mean`, `u_mean`, `nonfinite`.
pub fn expectile_loss(
    q_target: Tensor<1>,
    v: Tensor<1>,
    mask: Tensor<1>,
    tau: f32,
) -> Result<LossOutput> {
    let [b] = v.dims();
    same_len(b, &[("q_target", &q_target), ("mask", &mask)])?;
    if !(tau > 0.0 && tau < 1.0) {
        return Err(LossError::Invalid(format!(
            "expectile tau {tau} is outside (0, 1)"
        )));
    }
    let ok = all_finite(&[&q_target, &v]);
    let (m, dropped) = effective_mask(mask, &ok);
    let v = zero_where_bad(v, &ok);
    let u = zero_where_bad(q_target, &ok).detach() - v.clone();
    // |τ − 1{u<0}| is τ where u ≥ 0 and 1 − τ where u < 0.
    let weight = u.clone().lower_elem(0.0).float() * (1.0 - 2.0 * tau) + tau;
    let loss = masked_mean(weight * u.clone().square(), m.clone());
    Ok(LossOutput {
        loss,
        components: vec![
            ("v_mean", masked_mean(v, m.clone()).detach()),
            ("u_mean", masked_mean(u, m).detach()),
            ("nonfinite", dropped),
        ],
    })
}

/// The released code's online critic: SARSA on Q alone,
///
/// ```text
/// L = E[(r + γ·(1 − d)·Q̄(o', a') − Q(o, a))²]
/// ```
///
/// (same as [`td_loss`] with `Q̄(o', a')` in place of `V̄(o')`).
pub fn sarsa_loss(
    q: Tensor<1>,
    reward: Tensor<1>,
    done: Tensor<1>,
    q_next_target: Tensor<1>,
    mask: Tensor<1>,
    gamma: f32,
) -> Result<LossOutput> {
    td_loss(q, reward, done, q_next_target, mask, gamma)
}

/// The released code's advantage baseline: `A_i = Q_i − mean_{j ∈ traj(i)} Q_j`, the mean of Q
/// over the transitions of the same trajectory (`trajectory[i]` is its id). Detached.
pub fn trajectory_mean_advantage(q: Tensor<1>, trajectory: &[usize]) -> Result<Tensor<1>> {
    let [b] = q.dims();
    if trajectory.len() != b {
        return Err(LossError::Invalid(format!(
            "{} trajectory ids for a batch of {b}",
            trajectory.len()
        )));
    }
    let host = q
        .clone()
        .detach()
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .map_err(|e| LossError::Invalid(format!("{e:?}")))?;
    let mut sums: std::collections::HashMap<usize, (f64, usize)> = Default::default();
    for (&t, &v) in trajectory.iter().zip(&host) {
        let e = sums.entry(t).or_default();
        e.0 += v as f64;
        e.1 += 1;
    }
    let base: Vec<f32> = trajectory
        .iter()
        .map(|t| (sums[t].0 / sums[t].1 as f64) as f32)
        .collect();
    let base = Tensor::<1>::from_data(burn::tensor::TensorData::new(base, [b]), &q.device());
    Ok((q - base).detach())
}
