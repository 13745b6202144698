//! Scoring given continuations: per-token `log π(y_t | x, y_<t)` and the logits behind them.
//!
//! Prompts are left-padded and continuations right-padded so every continuation starts in the
//! same column `P` (the longest prompt); the logits at columns `P−1 … P+C−2` predict the
//! continuation tokens. On an autodiff device the outputs carry the graph, so the same call
//! serves training losses (gradients reach only the selected adapter's tensors).

use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{BackboneError, Result};
use crate::llama::{AdapterId, Batch, CausalLm, Forward};

/// One prompt and the continuation to score.
#[derive(Debug, Clone)]
pub struct ScoreRequest {
    /// Context tokens (non-empty).
    pub prompt: Vec<u32>,
    /// Tokens whose log-probabilities are wanted (non-empty).
    pub continuation: Vec<u32>,
}

/// Scores of a batch, `C` = the longest continuation.
#[derive(Debug, Clone)]
pub struct ScoreOutput {
    /// `log π` of each continuation token, `[b, C]` (0 where padded), at the temperature
    /// scored at ([`CausalLm::score_at`]).
    pub logprobs: Tensor<2>,
    /// 1 for real continuation tokens, 0 for padding, `[b, C]`.
    pub mask: Tensor<2>,
    /// Logits that predict each continuation token, `[b, C, vocab]` (unscaled).
    pub logits: Tensor<3>,
    /// Final hidden states of the whole padded sequence `[b, P + C, H]`.
    pub hidden: Tensor<3>,
    /// Column of the first continuation token in `hidden` (`P`).
    pub continuation_start: usize,
}

impl CausalLm {
    /// Scores continuations under `opts` (adapter, train mode).
    pub fn score(&self, requests: &[ScoreRequest], opts: Forward) -> Result<ScoreOutput> {
        self.score_at(requests, opts, 1.0)
    }

    /// Scores continuations under the distribution sampled at `temperature`:
    /// `log π_T(y_t) = log_softmax(logits_t / T)[y_t]`. Policy-gradient ratios must use the
    /// distribution the samples came from; TRL's GRPO/PPO trainers divide the logits by the
    /// generation temperature before `selective_log_softmax`, for the old, current and
    /// reference policies alike.
    pub fn score_at(
        &self,
        requests: &[ScoreRequest],
        opts: Forward,
        temperature: f32,
    ) -> Result<ScoreOutput> {
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(BackboneError::Invalid(format!(
                "scoring temperature {temperature} must be positive and finite"
            )));
        }
        if requests.is_empty() {
            return Err(BackboneError::Invalid("nothing to score".into()));
        }
        if let Some(i) = requests
            .iter()
            .position(|r| r.prompt.is_empty() || r.continuation.is_empty())
        {
            return Err(BackboneError::Invalid(format!(
                "score request {i} has an empty prompt or continuation"
            )));
        }
        let b = requests.len();
        let p = requests.iter().map(|r| r.prompt.len()).max().unwrap_or(0);
        let c = requests
            .iter()
            .map(|r| r.continuation.len())
            .max()
            .unwrap_or(0);
        let pad = self.config.pad_token_id.unwrap_or(0);
        let mut batch = Batch {
            ids: vec![],
            batch: b,
            len: p + c,
            positions: vec![],
            valid: vec![],
        };
        let mut targets = Vec::with_capacity(b * c);
        let mut mask = Vec::with_capacity(b * c);
        for r in requests {
            let lead = p - r.prompt.len();
            let tail = c - r.continuation.len();
            let real = r.prompt.len() + r.continuation.len();
            batch.ids.extend(
                std::iter::repeat_n(pad, lead)
                    .chain(r.prompt.iter().copied())
                    .chain(r.continuation.iter().copied())
                    .chain(std::iter::repeat_n(pad, tail)),
            );
            batch.positions.extend(
                std::iter::repeat_n(0, lead)
                    .chain(0..real as u32)
                    .chain(std::iter::repeat_n(0, tail)),
            );
            batch.valid.extend(
                std::iter::repeat_n(false, lead)
                    .chain(std::iter::repeat_n(true, real))
                    .chain(std::iter::repeat_n(false, tail)),
            );
            targets.extend(
                r.continuation
                    .iter()
                    .map(|&t| t as i64)
                    .chain(std::iter::repeat_n(0, tail)),
            );
            mask.extend(
                std::iter::repeat_n(1f32, r.continuation.len())
                    .chain(std::iter::repeat_n(0.0, tail)),
            );
        }
        let hidden = self.forward_hidden(&batch, opts, None)?;
        let h = self.config.hidden_size;
        let predicting = hidden.clone().slice([0..b, p - 1..p - 1 + c, 0..h]);
        let logits = self.lm_logits(predicting);
        let device = self.device();
        let logp = if temperature == 1.0 {
            log_softmax(logits.clone(), 2)
        } else {
            log_softmax(logits.clone().div_scalar(temperature), 2)
        };
        let idx = Tensor::<3, Int>::from_data(TensorData::new(targets, [b, c, 1]), &device);
        let mask = Tensor::<2>::from_data(TensorData::new(mask, [b, c]), &device);
        let logprobs = logp.gather(2, idx).reshape([b, c]) * mask.clone();
        Ok(ScoreOutput {
            logprobs,
            mask,
            logits,
            hidden,
            continuation_start: p,
        })
    }

    /// Convenience: the adapter given by id, inference mode.
    pub fn score_with(
        &self,
        requests: &[ScoreRequest],
        adapter: Option<AdapterId>,
    ) -> Result<ScoreOutput> {
        self.score(requests, Forward::with(adapter))
    }
}
