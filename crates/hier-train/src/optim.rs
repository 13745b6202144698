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
