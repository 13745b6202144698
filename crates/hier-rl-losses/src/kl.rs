//! KL anchors between the online policy and the frozen offline policy at action tokens.

use burn::tensor::Tensor;
use burn::tensor::activation::log_softmax;

use crate::error::{LossError, Result};
use crate::finite::{all_finite, effective_mask, masked_mean, zero_where_bad};

/// How `KL(π_on ‖ π_off)` is computed.
#[derive(Debug, Clone)]
pub enum KlAnchor {
    /// Exact per-token KL over the vocabulary from both models' logits `[B, T, V]` at the
    /// action tokens selected by `mask [B, T]`:
    /// `KL_t = Σ_v p_on(v)·(log p_on(v) − log p_off(v))`, averaged over masked tokens. Always ≥ 0
    /// and 0 exactly when the two distributions agree. Gradient flows into `logits_on` only.
    Exact {
        /// Online policy logits (with gradient).
        logits_on: Tensor<3>,
        /// Frozen offline policy logits (detached here).
        logits_off: Tensor<3>,
        /// Action-token mask.
        mask: Tensor<2>,
    },
    /// k1 sample estimator at the taken tokens: `log π_on(a) − log π_off(a)` (unbiased under
    /// samples from π_on, can be negative).
    K1 {
        /// `log π_on` of the taken tokens `[B, T]`.
        logp_on: Tensor<2>,
        /// `log π_off` of the taken tokens `[B, T]`.
        logp_off: Tensor<2>,
        /// Action-token mask.
        mask: Tensor<2>,
    },
    /// k3 sample estimator: `exp(r) − r − 1` with `r = log π_off(a) − log π_on(a)` (≥ 0).
    K3 {
        /// `log π_on` of the taken tokens `[B, T]`.
        logp_on: Tensor<2>,
        /// `log π_off` of the taken tokens `[B, T]`.
        logp_off: Tensor<2>,
        /// Action-token mask.
        mask: Tensor<2>,
    },
}

impl KlAnchor {
    /// The token-mean KL `[1]` and the count of dropped non-finite tokens.
    pub fn value(self) -> Result<(Tensor<1>, Tensor<1>)> {
        match self {
            KlAnchor::Exact {
                logits_on,
                logits_off,
                mask,
            } => exact_kl(logits_on, logits_off, mask),
            KlAnchor::K1 {
                logp_on,
                logp_off,
                mask,
            } => sampled(logp_on, logp_off, mask, |r| r.neg()),
            KlAnchor::K3 {
                logp_on,
                logp_off,
                mask,
            } => sampled(logp_on, logp_off, mask, |r| r.clone().exp() - r - 1.0),
        }
    }
}

/// Per-token exact KL `[B, T]` (no mask applied).
pub fn exact_kl_per_token(logits_on: Tensor<3>, logits_off: Tensor<3>) -> Tensor<2> {
    let [b, t, _] = logits_on.dims();
    let lp_on = log_softmax(logits_on, 2);
    let lp_off = log_softmax(logits_off.detach(), 2);
    (lp_on.clone().exp() * (lp_on - lp_off))
        .sum_dim(2)
        .reshape([b, t])
}

fn exact_kl(
    logits_on: Tensor<3>,
    logits_off: Tensor<3>,
    mask: Tensor<2>,
) -> Result<(Tensor<1>, Tensor<1>)> {
    let [b, t, v] = logits_on.dims();
    if logits_off.dims() != [b, t, v] {
        return Err(LossError::shape(
            "logits_off",
            &[b, t, v],
            &logits_off.dims(),
        ));
    }
    if mask.dims() != [b, t] {
        return Err(LossError::shape("mask", &[b, t], &mask.dims()));
    }
    // A token is usable when both rows of logits are finite everywhere. A row sum is finite
    // exactly then (NaN and ±∞ propagate), so one cheap reduction per tensor finds them; only a
    // batch that has such a row pays for masking the full [B, T, V] tensors.
    let row_ok = |x: &Tensor<3>| x.clone().detach().sum_dim(2).reshape([b, t]).is_finite();
    let ok = row_ok(&logits_on).bool_and(row_ok(&logits_off));
    let (m, dropped) = effective_mask(mask, &ok);
    let all_ok = ok.clone().float().sum().into_scalar::<f32>() as usize == b * t;
    let (on, off) = if all_ok {
        (logits_on, logits_off)
    } else {
        let bad3 = ok.bool_not().unsqueeze_dim::<3>(2).expand([b, t, v]);
        (
            logits_on.mask_fill(bad3.clone(), 0.0),
            logits_off.mask_fill(bad3, 0.0),
        )
    };
    let kl = exact_kl_per_token(on, off).clamp_min(0.0);
    Ok((masked_mean(kl, m), dropped))
}

fn sampled(
    logp_on: Tensor<2>,
    logp_off: Tensor<2>,
    mask: Tensor<2>,
    f: impl Fn(Tensor<2>) -> Tensor<2>,
) -> Result<(Tensor<1>, Tensor<1>)> {
    let dims = logp_on.dims();
    if logp_off.dims() != dims {
        return Err(LossError::shape("logp_off", &dims, &logp_off.dims()));
    }
    if mask.dims() != dims {
        return Err(LossError::shape("mask", &dims, &mask.dims()));
    }
    let ok = all_finite(&[&logp_on, &logp_off]);
    let (m, dropped) = effective_mask(mask, &ok);
    let r = zero_where_bad(logp_off, &ok).detach() - zero_where_bad(logp_on, &ok);
    Ok((masked_mean(f(r), m), dropped))
}
