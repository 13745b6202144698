//! Fast-path targets and the pairwise ranking loss.
//!
//! `q(s) = mean_j |R̄_{s,j} − b_s|`: how much intervening at `s` changes the outcome. The fast
//! path's log-odds `z` are trained to order states by `q` within a task with RankNet:
//!
//! ```text
//! L_rank = mean_{(i,j): task_i = task_j, q_i > q_j} log(1 + exp(−(z_i − z_j)))
//! ```
//!
//! (ties skipped; `log(1 + eˣ)` computed as `max(x, 0) + log1p(e^{−|x|})`, finite for any z).

use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{Result, SteerError};
use crate::gate::softplus;
use crate::output::LossOutput;

/// `q(s) = mean_j |R̄_{s,j} − b_s|` for one state.
pub fn q_target(returns: &[f32], baseline: f32) -> Result<f32> {
    if returns.is_empty() {
        return Err(SteerError::Invalid(
            "q(s) needs at least one intervention return".into(),
        ));
    }
    Ok(returns.iter().map(|r| (r - baseline).abs()).sum::<f32>() / returns.len() as f32)
}

/// The ordered pairs `(i, j)` of states of the same task with `q_i > q_j`.
pub fn ranking_pairs(q: &[f32], task: &[usize]) -> Result<Vec<(usize, usize)>> {
    if q.len() != task.len() {
        return Err(SteerError::Invalid(format!(
            "{} targets but {} task ids",
            q.len(),
            task.len()
        )));
    }
    let mut pairs = Vec::new();
    for i in 0..q.len() {
        for j in 0..q.len() {
            if task[i] == task[j] && q[i] > q[j] {
                pairs.push((i, j));
            }
        }
    }
    Ok(pairs)
}

/// RankNet loss over same-task pairs of fast-path log-odds `z [N]`. With no comparable pair the
/// loss is 0 (component `pairs` = 0).
pub fn ranknet_loss(z: Tensor<1>, q: &[f32], task: &[usize]) -> Result<LossOutput> {
    let [n] = z.dims();
    if q.len() != n {
        return Err(SteerError::Shape {
            name: "q",
            expected: vec![n],
            got: vec![q.len()],
        });
    }
    if let Some(x) = q.iter().find(|x| !x.is_finite()) {
        return Err(SteerError::Invalid(format!(
            "non-finite ranking target {x}"
        )));
    }
    let pairs = ranking_pairs(q, task)?;
    let device = z.device();
    if pairs.is_empty() {
        return Ok(LossOutput {
            loss: z.sum() * 0.0,
            components: vec![("pairs", Tensor::zeros([1], &device))],
        });
    }
    let hi = Tensor::<1, Int>::from_data(
        TensorData::new(
            pairs.iter().map(|p| p.0 as i64).collect::<Vec<_>>(),
            [pairs.len()],
        ),
        &device,
    );
    let lo = Tensor::<1, Int>::from_data(
        TensorData::new(
            pairs.iter().map(|p| p.1 as i64).collect::<Vec<_>>(),
            [pairs.len()],
        ),
        &device,
    );
    let diff = z.clone().select(0, hi) - z.select(0, lo);
    let loss = softplus(diff.clone().neg()).mean();
    let acc = diff.greater_elem(0.0).float().mean();
    Ok(LossOutput {
        loss,
        components: vec![
            (
                "pairs",
                Tensor::from_data(TensorData::new(vec![pairs.len() as f32], [1]), &device),
            ),
            ("pair_accuracy", acc.detach()),
        ],
    })
}
