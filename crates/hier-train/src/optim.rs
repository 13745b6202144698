//! Optimiser utilities every trainer shares.

use hier_backbone::burn::module::{Module, ModuleVisitor, Param};
use hier_backbone::burn::optim::GradientsParams;
use hier_backbone::burn::tensor::Tensor;

/// Clips gradients to a global L2 norm: with `n = √(Σ‖g‖²)` over all parameters of `module`
/// that have a gradient, every `g` becomes `g·min(1, max_norm / n)` (PyTorch's
/// `clip_grad_norm_`; Burn's own clipping is per tensor). Returns `n` before clipping.
pub fn clip_global_norm<M: Module>(module: &M, grads: &mut GradientsParams, max_norm: f32) -> f32 {
    struct SumSquares<'a> {
        grads: &'a GradientsParams,
        total: Option<Tensor<1>>,
    }
    impl ModuleVisitor for SumSquares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(g) = self.grads.get::<D>(param.id) {
                let s = g.square().sum();
                self.total = Some(match self.total.take() {
                    Some(t) => t + s,
                    None => s,
                });
            }
        }
    }
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        factor: f32,
    }
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(g) = self.grads.remove::<D>(param.id) {
                self.grads.register(param.id, g * self.factor);
            }
        }
    }
    let mut sum = SumSquares { grads, total: None };
    module.visit(&mut sum);
    let norm = sum.total.map_or(0.0, |t| t.into_scalar::<f32>().sqrt());
    if norm.is_finite() && norm > max_norm && norm > 0.0 {
        let mut scale = Scale {
            grads,
            factor: max_norm / norm,
        };
        module.visit(&mut scale);
    }
    norm
}

/// AdamW with β 0.9 / 0.999 and ε 1e-8 (PyTorch's defaults, the authors' setting), the
/// optimiser of every adapter and head trainer here (pre-training uses β₂ 0.95).
pub fn adamw(weight_decay: f32) -> hier_backbone::burn::optim::ModuleOptimizer {
    hier_backbone::burn::optim::AdamWConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.999)
        .with_epsilon(1e-8)
        .with_weight_decay(weight_decay)
        .init()
}

/// The optimiser settings of one parameter group — AdamW's learning rate and decoupled weight
/// decay, the learning-rate schedule, and the global gradient-norm bound — written the same way
/// in every trainer's config (`optim = { lr = 1e-4, weight_decay = 0.01, grad_clip = 1.0 }`).
///
/// The schedule: with `min_lr` set, linear warm-up to `lr` over `warmup_steps`, then cosine decay
/// to `min_lr` at the run's last step ([`crate::runlog::cosine_lr`]); without it, the linear
/// warm-up (if any) and then a constant `lr`. Omitted: no weight decay and no clipping, so a
/// profile that decays or clips says so.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimConfig {
    /// Peak learning rate.
    pub lr: f64,
    /// Floor of the cosine decay; absent: no decay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_lr: Option<f64>,
    /// Steps of linear warm-up from `lr / warmup_steps` to `lr`.
    #[serde(default, skip_serializing_if = "hier_backbone::serde_skip::is_default")]
    pub warmup_steps: usize,
    /// AdamW's decoupled weight decay.
    #[serde(default)]
    pub weight_decay: f32,
    /// Bound on the global L2 norm of the group's gradients ([`clip_global_norm`]); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_clip: Option<f32>,
}

impl OptimConfig {
    /// A constant learning rate, no weight decay, no clipping.
    pub fn constant(lr: f64) -> Self {
        Self {
            lr,
            min_lr: None,
            warmup_steps: 0,
            weight_decay: 0.0,
            grad_clip: None,
        }
    }

    /// Refuses settings no run can use, naming the setting as `what.field` (`steps`: the run's
    /// length, which the warm-up may not exceed).
    pub fn check(&self, what: &str, steps: usize) -> crate::error::Result<()> {
        let bad = |m: String| Err(crate::error::Error::Invalid(format!("{what}.{m}")));
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad(format!("lr must be a positive number, not {}", self.lr));
        }
        if let Some(min) = self.min_lr
            && !(min >= 0.0 && min <= self.lr)
        {
            return bad(format!(
                "min_lr must lie in [0, lr = {}], not {min}",
                self.lr
            ));
        }
        if self.warmup_steps > steps {
            return bad(format!(
                "warmup_steps ({}) exceeds the run's {steps} steps",
                self.warmup_steps
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad(format!(
                "weight_decay must be ≥ 0, not {}",
                self.weight_decay
            ));
        }
        if let Some(c) = self.grad_clip
            && !(c.is_finite() && c > 0.0)
        {
            return bad(format!("grad_clip must be positive, not {c}"));
        }
        Ok(())
    }

    /// The learning rate of step `step` (0-based) of a run of `steps` steps.
    /// (Without `min_lr` the cosine runs from `lr` to `lr`, which is exactly `lr`.)
    pub fn lr_at(&self, step: usize, steps: usize) -> f64 {
        let floor = self.min_lr.unwrap_or(self.lr);
        crate::runlog::cosine_lr(self.lr, floor, self.warmup_steps, steps, step)
    }

    /// AdamW with β 0.9 / 0.999 and ε 1e-8 and this group's weight decay ([`adamw`]).
    pub fn adamw(&self) -> hier_backbone::burn::optim::ModuleOptimizer {
        adamw(self.weight_decay)
    }

    /// Clips `grads` of `module` to `grad_clip` when one is set; returns the global norm before
    /// clipping (computed either way, for the metrics).
    pub fn clip<M: Module>(&self, module: &M, grads: &mut GradientsParams) -> f32 {
        clip_global_norm(module, grads, self.grad_clip.unwrap_or(f32::INFINITY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_warms_up_then_decays_or_holds() {
        // Hand-computed: warm-up 2 of 10 steps to 1e-3 → 5e-4, 1e-3; cosine to 1e-4 over the
        // remaining 8 steps, so step 6 (half-way) is the mean of the two, 5.5e-4.
        let cosine = OptimConfig {
            min_lr: Some(1e-4),
            warmup_steps: 2,
            ..OptimConfig::constant(1e-3)
        };
        let got: Vec<f64> = [0, 1, 6, 10].iter().map(|&s| cosine.lr_at(s, 10)).collect();
        for (g, want) in got.iter().zip([5e-4, 1e-3, 5.5e-4, 1e-4]) {
            assert!((g - want).abs() < 1e-12, "{got:?}");
        }
        let held = OptimConfig {
            warmup_steps: 4,
            ..OptimConfig::constant(2e-4)
        };
        assert_eq!(held.lr_at(0, 100), 5e-5);
        assert_eq!(held.lr_at(4, 100), 2e-4);
        assert_eq!(held.lr_at(99, 100), 2e-4);
    }

    #[test]
    fn a_profile_line_reads_and_bad_settings_are_named() {
        let c: OptimConfig = toml::from_str("lr = 1e-4\ngrad_clip = 1.0").unwrap();
        assert_eq!(
            (c.weight_decay, c.grad_clip, c.min_lr),
            (0.0, Some(1.0), None)
        );
        assert!(toml::from_str::<OptimConfig>("lr = 1e-4\nclip = 1.0").is_err());
        let e = OptimConfig {
            min_lr: Some(1e-3),
            ..OptimConfig::constant(1e-4)
        }
        .check("sft.optim", 10)
        .unwrap_err()
        .to_string();
        assert!(e.contains("sft.optim.min_lr"), "{e}");
        let e = OptimConfig {
            warmup_steps: 11,
            ..OptimConfig::constant(1e-4)
        }
        .check("grpo.optim", 10)
        .unwrap_err()
        .to_string();
        assert!(e.contains("grpo.optim.warmup_steps"), "{e}");
    }
}
