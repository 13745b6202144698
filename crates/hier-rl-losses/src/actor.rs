//! The System-2 actor losses: offline (policy-anchored advantage-weighted regression) and
//! online (advantage-weighted with a KL anchor to the frozen offline policy).

use burn::tensor::Tensor;

use crate::error::{LossError, Result, same_len};
use crate::finite::{all_finite, effective_mask, masked_mean, zero_where_bad};
use crate::kl::KlAnchor;
use crate::output::LossOutput;

/// Advantage weights `w = min(exp(A/temperature), w_max)`, optionally divided by their masked
/// batch mean. Detached. (Offline: `temperature = 1/β`; online: `temperature = α`.)
pub fn advantage_weights(
    adv: Tensor<1>,
    mask: Tensor<1>,
    temperature: f32,
    w_max: f32,
    normalise: bool,
) -> Tensor<1> {
    // exp is monotone: clamp the exponent first so no intermediate overflows.
    let w = (adv.detach() / temperature).clamp_max(w_max.ln()).exp();
    if normalise {
        let mean = masked_mean(w.clone(), mask).clamp_min(1e-12);
        w / mean.unsqueeze::<1>()
    } else {
        w
    }
}

/// The baseline `b` subtracted from the critic's advantages in the score-function estimator of
/// the policy-anchored term, `λ·(A(o,a') − b)·∇log π_θ(a'|o,g)` (`none`, `leave-one-out` in
/// configs, with the `serde` feature).
///
/// Any `b` independent of the sample `a'` leaves the estimator's expectation, `∇E_{a'∼π}[A]`,
/// unchanged; it changes only its variance. It matters because `V` is an upper expectile
/// (τ = 0.7), so the critic's `A` of the policy's own samples is mostly negative: without a
/// baseline every step pushes down the log-probability of whatever the policy sampled, which
/// with one sample per state and a noisy critic drives System 2 away from every action it
/// knows (measured on SmolLM2-135M, ALFWorld: non-commands from the first step).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum AnchorBaseline {
    /// `b = 0`: the plain estimator `λ·A(o,a')·∇log π_θ(a')`.
    #[default]
    None,
    /// `b_i = mean_{j≠i} A(o_j,a'_j)` over the other (masked-in, finite) samples of the batch;
    /// independent of `a'_i`, so unbiased (RLOO). `b = 0` where fewer than two samples remain.
    LeaveOneOut,
}

/// Settings of the offline actor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OfflineActorConfig {
    /// Inverse temperature β of `w = min(exp(β·A), w_max)`.
    pub beta: f32,
    /// Weight clip `w_max`.
    pub w_max: f32,
    /// Divide the weights by their batch mean.
    pub normalise: bool,
    /// Weight λ of the policy-anchored term (0 gives `vanilla-iql`).
    pub lambda: f32,
    /// Baseline of the policy-anchored term's estimator.
    pub anchor_baseline: AnchorBaseline,
}

impl Default for OfflineActorConfig {
    /// Multi²'s settings: β = 10, w_max = 20, no normalisation, λ = 7, the plain estimator.
    fn default() -> Self {
        Self {
            beta: 10.0,
            w_max: 20.0,
            normalise: false,
            lambda: 7.0,
            anchor_baseline: AnchorBaseline::None,
        }
    }
}

/// Policy-anchored offline actor loss,
///
/// ```text
/// L_θ = −E_data[ w(A(o,a))·log π_θ(a|o,g) ] − λ·E_{a'∼π_θ}[ (A(o,a') − b)·log π_θ(a'|o,g) ]
/// w(A) = min(exp(β·A), w_max)   (optionally / batch mean)
/// ```
///
/// with `b` the [`AnchorBaseline`] (0 by default).
///
/// Inputs: `logp_data [B]` = log π_θ of the dataset actions (with gradient), `adv_data [B]` =
/// their advantages `Q − V`; `logp_policy [M]` = log π_θ of actions **sampled from the current
/// policy** at the same states, `adv_policy [M]` = the critic's advantages for them. Both
/// advantages are detached, so the second term's gradient is the score-function estimator
/// `λ·A(o,a')·∇log π_θ(a'|o,g)` of `∇E_{a'∼π}[A]`. With `λ = 0` (or `M = 0`) this is plain
/// advantage-weighted regression. Components: `awr`, `anchor`, `w_mean`, `w_clipped_frac`,
/// `nonfinite`.
pub fn offline_actor_loss(
    logp_data: Tensor<1>,
    adv_data: Tensor<1>,
    mask_data: Tensor<1>,
    policy_samples: Option<(Tensor<1>, Tensor<1>, Tensor<1>)>,
    cfg: &OfflineActorConfig,
) -> Result<LossOutput> {
    let [b] = logp_data.dims();
    same_len(b, &[("adv_data", &adv_data), ("mask_data", &mask_data)])?;
    if cfg.beta <= 0.0 || cfg.w_max <= 0.0 {
        return Err(LossError::Invalid(format!(
            "beta {} and w_max {} must be positive",
            cfg.beta, cfg.w_max
        )));
    }
    let ok = all_finite(&[&logp_data, &adv_data]);
    let (m, mut dropped) = effective_mask(mask_data, &ok);
    let adv = zero_where_bad(adv_data, &ok);
    let w = advantage_weights(
        adv.clone(),
        m.clone(),
        1.0 / cfg.beta,
        cfg.w_max,
        cfg.normalise,
    );
    let clipped = masked_mean(
        adv.detach()
            .greater_equal_elem(cfg.w_max.ln() / cfg.beta)
            .float(),
        m.clone(),
    );
    let awr = masked_mean(w.clone() * zero_where_bad(logp_data, &ok), m.clone()).neg();
    let mut loss = awr.clone();
    let mut anchor_value = Tensor::<1>::zeros([1], &loss.device());
    if let Some((logp_pi, adv_pi, mask_pi)) = policy_samples {
        let [n] = logp_pi.dims();
        same_len(n, &[("adv_policy", &adv_pi), ("mask_policy", &mask_pi)])?;
        let ok_pi = all_finite(&[&logp_pi, &adv_pi]);
        let (m_pi, dropped_pi) = effective_mask(mask_pi, &ok_pi);
        dropped = dropped + dropped_pi;
        let adv_pi = zero_where_bad(adv_pi, &ok_pi).detach();
        let adv_pi = match cfg.anchor_baseline {
            AnchorBaseline::None => adv_pi,
            AnchorBaseline::LeaveOneOut => adv_pi.clone() - leave_one_out_mean(adv_pi, &m_pi),
        };
        let anchor = masked_mean(adv_pi * zero_where_bad(logp_pi, &ok_pi), m_pi).neg() * cfg.lambda;
        anchor_value = anchor.clone().detach();
        loss = loss + anchor;
    }
    Ok(LossOutput {
        loss,
        components: vec![
            ("awr", awr.detach()),
            ("anchor", anchor_value),
            ("w_mean", masked_mean(w, m).detach()),
            ("w_clipped_frac", clipped),
            ("nonfinite", dropped),
        ],
    })
}

/// `b_i = (Σ_j m_j x_j − m_i x_i) / (Σ_j m_j − m_i)`, the mean of the other masked-in
/// elements; 0 where fewer than one other remains (`x` must be finite where `m` is 0 or 1).
fn leave_one_out_mean(x: Tensor<1>, m: &Tensor<1>) -> Tensor<1> {
    let total = (x.clone() * m.clone()).sum();
    let count = m.clone().sum();
    let others = count.unsqueeze::<1>() - m.clone();
    let sum_others = total.unsqueeze::<1>() - x * m.clone();
    let has_others = others.clone().greater_equal_elem(1.0).float();
    sum_others / others.clamp_min(1.0) * has_others
}

/// Settings of the online actor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OnlineActorConfig {
    /// Temperature α of `w = exp(A/α)`.
    pub alpha: f32,
    /// Weight clip.
    pub w_max: f32,
    /// Divide the weights by their batch mean.
    pub normalise: bool,
    /// Weight η of the KL anchor (0 gives `vanilla-awac`).
    pub eta: f32,
}

impl Default for OnlineActorConfig {
    /// Multi²'s settings: α = 1, clip 20, no normalisation, η = 0.02.
    fn default() -> Self {
        Self {
            alpha: 1.0,
            w_max: 20.0,
            normalise: false,
            eta: 0.02,
        }
    }
}

/// Online actor loss with the KL anchor to the frozen offline policy,
///
/// ```text
/// L_on = −E_B[ w_t·log π_on(a_t|o_t,g) ] + η·KL(π_on ‖ π_off)(·|o_t,g),   w_t = min(exp(A/α), w_max)
/// ```
///
/// `logp [B]` and `adv [B]` are for replay actions; the KL term is given by a [`KlAnchor`]
/// (exact over the vocabulary by default, or the k1/k3 sample estimators).
/// Components: `awr`, `kl`, `w_mean`, `nonfinite`.
pub fn online_actor_loss(
    logp: Tensor<1>,
    adv: Tensor<1>,
    mask: Tensor<1>,
    kl: Option<KlAnchor>,
    cfg: &OnlineActorConfig,
) -> Result<LossOutput> {
    let [b] = logp.dims();
    same_len(b, &[("adv", &adv), ("mask", &mask)])?;
    if cfg.alpha <= 0.0 || cfg.w_max <= 0.0 {
        return Err(LossError::Invalid(format!(
            "alpha {} and w_max {} must be positive",
            cfg.alpha, cfg.w_max
        )));
    }
    let ok = all_finite(&[&logp, &adv]);
    let (m, mut dropped) = effective_mask(mask, &ok);
    let w = advantage_weights(
        zero_where_bad(adv, &ok),
        m.clone(),
        cfg.alpha,
        cfg.w_max,
        cfg.normalise,
    );
    let awr = masked_mean(w.clone() * zero_where_bad(logp, &ok), m.clone()).neg();
    let mut loss = awr.clone();
    let mut kl_value = Tensor::<1>::zeros([1], &loss.device());
    if let Some(kl) = kl {
        let out = kl.value()?;
        dropped = dropped + out.1;
        kl_value = out.0.clone().detach();
        if cfg.eta != 0.0 {
            loss = loss + out.0 * cfg.eta;
        }
    }
    Ok(LossOutput {
        loss,
        components: vec![
            ("awr", awr.detach()),
            ("kl", kl_value),
            ("w_mean", masked_mean(w, m).detach()),
            ("nonfinite", dropped),
        ],
    })
}
