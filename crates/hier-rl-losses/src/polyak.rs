//! Polyak averaging of target networks: `θ̄ ← (1 − ρ)·θ̄ + ρ·θ` (Multi²: ρ = 0.2).

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;

use crate::error::{LossError, Result};

/// Moves every float parameter of `target` towards the same-position parameter of `source` by
/// `rate` ρ ∈ [0, 1]. The two modules must have the same structure (a target is usually a
/// `clone()` of its source); a parameter-count or shape mismatch is an error and leaves nothing
/// half-updated. The result is detached (targets never receive gradients).
pub fn polyak_update<M: Module>(target: M, source: &M, rate: f32) -> Result<M> {
    if !(0.0..=1.0).contains(&rate) {
        return Err(LossError::Invalid(format!(
            "Polyak rate {rate} is outside [0, 1]"
        )));
    }
    struct Collect(Vec<(Vec<usize>, Tensor<1>)>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let t = param.val().detach();
            let dims = t.dims().to_vec();
            let n: usize = dims.iter().product();
            self.0.push((dims, t.reshape([n])));
        }
    }
    let mut src = Collect(Vec::new());
    source.visit(&mut src);
    let mut tgt = Collect(Vec::new());
    target.visit(&mut tgt);
    if src.0.len() != tgt.0.len() {
        return Err(LossError::Invalid(format!(
            "source has {} parameters, target {}",
            src.0.len(),
            tgt.0.len()
        )));
    }
    for (i, ((ds, _), (dt, _))) in src.0.iter().zip(&tgt.0).enumerate() {
        if ds != dt {
            return Err(LossError::Invalid(format!(
                "parameter #{i}: source shape {ds:?}, target shape {dt:?}"
            )));
        }
    }
    struct Blend {
        source: std::vec::IntoIter<(Vec<usize>, Tensor<1>)>,
        rate: f32,
    }
    impl ModuleMapper for Blend {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (_, s) = self.source.next().expect("counted above");
            let rate = self.rate;
            param.map(|t| {
                let dims = t.dims();
                let s: Tensor<D> = s.reshape(dims);
                (t.detach() * (1.0 - rate) + s * rate).detach()
            })
        }
    }
    Ok(target.map(&mut Blend {
        source: src.0.into_iter(),
        rate,
    }))
}
