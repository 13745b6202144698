//! The non-finite policy shared by every loss in this crate.
//!
//! A NaN or ±∞ in any input element that the loss would use (where the mask is 1) **drops that
//! element**: it is treated as masked out, its contribution is exactly zero (no NaN reaches the
//! gradient, because it is replaced *before* any multiplication), and the number of dropped
//! elements is reported as the `nonfinite` component. A loss whose every element was dropped is
//! 0 with `nonfinite` equal to the element count. Callers that prefer to fail can check
//! `nonfinite > 0`; silently averaging a NaN into a loss is never possible.

use burn::tensor::{Bool, Tensor};

/// `true` where every given tensor is finite.
pub(crate) fn all_finite<const D: usize>(parts: &[&Tensor<D>]) -> Tensor<D, Bool> {
    let mut ok = parts[0].clone().is_finite();
    for p in &parts[1..] {
        ok = ok.bool_and((*p).clone().is_finite());
    }
    ok
}

/// Replaces non-finite entries by 0 (safe to multiply by a 0 mask afterwards).
pub(crate) fn zero_where_bad<const D: usize>(x: Tensor<D>, ok: &Tensor<D, Bool>) -> Tensor<D> {
    x.mask_fill(ok.clone().bool_not(), 0.0)
}

/// The effective mask `m·1{finite}` and the count of masked-in, non-finite elements.
pub(crate) fn effective_mask<const D: usize>(
    mask: Tensor<D>,
    ok: &Tensor<D, Bool>,
) -> (Tensor<D>, Tensor<1>) {
    let bad = mask.clone().is_finite().bool_not();
    let mask = mask.mask_fill(bad, 0.0);
    let eff = mask.clone() * ok.clone().float();
    let dropped = (mask - eff.clone()).sum();
    (eff, dropped)
}

/// `Σ x·m / max(Σ m, 1)`: a masked mean that is 0 (not NaN) for an empty mask.
pub(crate) fn masked_mean<const D: usize>(x: Tensor<D>, mask: Tensor<D>) -> Tensor<1> {
    let n = mask.clone().sum().clamp_min(1.0);
    (x * mask).sum() / n
}
