//! Attention of a decoding step over its KV cache on the CPU, each key/value head read once
//! for the query heads that share it (grouped-query attention).
//!
//! For `t ≤` [`crate::few_rows::MAX_ROWS`] new queries per row and the cached keys and values
//! `K, V`, the first `total` columns of buffers `[b, kv_heads, capacity, d]` (the KV cache's,
//! [`crate::kv_cache`]), query head `h` attends with key/value head
//! `h / (heads / kv_heads)` (HF's `repeat_kv`):
//!
//! ```text
//! s_j = scale·(q_h · K_g[j]) + bias[i, j],   p = softmax(s),   y_h = Σ_j p_j·V_g[j]
//! ```
//!
//! Why: the general path expands K and V to `[b, heads, total, d]` — a copy of the whole cache,
//! `heads / kv_heads` times over (3 for SmolLM2), at every layer of every step — before Burn's
//! attention reads them again. With ReAct's 1,100-token prompts that copy and the cache's
//! growth were a third of an evaluation's time (`perf record`, 2026-12-05). Here each row of K
//! and V is read once per step for all the heads of its group. Sums run in f32 in another order
//! than Burn's, so results agree to rounding. Only plain (non-autodiff) `flex` tensors take this
//! path ([`decode`] returns `None` otherwise).

use burn::tensor::Tensor;
use rayon::prelude::*;

use crate::few_rows::{MAX_ROWS, flex, host_values, plain_tensor};

/// How keys are hidden from queries (the additive mask of [`decode`]).
#[derive(Debug, Clone, Copy)]
pub enum KeyMask<'a> {
    /// Every key is visible to every query (a one-token step without padding).
    None,
    /// Query `i` of `t` (position `total − t + i`) sees the keys up to its own position.
    Causal,
    /// An additive bias `[b, t, total]` (0 or a large negative number).
    Bias(&'a [f32]),
}

/// `[b, t, heads·d]`: the attention output of `q: [b, heads, t, d]` over the first `total`
/// columns of `k, v: [b, kv_heads, capacity, d]` (see the module equation; the columns past
/// `total` are never read), laid out as the output projection takes it; `None` when the
/// tensors are not plain `flex` f32 ones, `t` is more than a decoding step's, or the shapes do
/// not fit (Burn's path then runs, and names any error).
pub fn decode(
    q: &Tensor<4>,
    k: &Tensor<4>,
    v: &Tensor<4>,
    total: usize,
    mask: KeyMask<'_>,
    scale: f32,
) -> Option<Tensor<3>> {
    let [b, heads, t, d] = q.dims();
    let [kb, kv_heads, capacity, kd] = k.dims();
    if t == 0
        || t > MAX_ROWS
        || t > total
        || total > capacity
        || kb != b
        || kd != d
        || v.dims() != k.dims()
    {
        return None;
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return None;
    }
    if let KeyMask::Bias(m) = mask
        && m.len() != b * t * total
    {
        return None;
    }
    let (qt, kt, vt) = (flex(q)?, flex(k)?, flex(v)?);
    let qs = host_values(q, &qt)?;
    let ks = host_values(k, &kt)?;
    let vs = host_values(v, &vt)?;
    let groups = heads / kv_heads;
    let shape = Shape {
        t,
        total,
        d,
        groups,
    };
    let arch = pulp::Arch::new();
    // One task per (row, key/value head): it writes the `groups` heads of that head, for
    // every query of the row, into its own part.
    let parts: Vec<Vec<f32>> = (0..b * kv_heads)
        .into_par_iter()
        .map(|task| {
            let (row, g) = (task / kv_heads, task % kv_heads);
            let mut out = vec![0.0f32; t * groups * d];
            let at = (row * kv_heads + g) * capacity * d;
            let kv = at..at + total * d;
            let q0 = (row * heads + g * groups) * t * d;
            let bias = match mask {
                KeyMask::Bias(m) => Some(&m[row * t * total..(row + 1) * t * total]),
                _ => None,
            };
            arch.dispatch(Group {
                shape,
                q: &qs[q0..q0 + groups * t * d],
                k: &ks[kv.clone()],
                v: &vs[kv],
                causal: matches!(mask, KeyMask::Causal),
                bias,
                scale,
                out: &mut out,
            });
            out
        })
        .collect();
    // parts[row·kv_heads + g] is [groups, t, d]; the output is [b, t, heads·d].
    let mut y = vec![0.0f32; b * t * heads * d];
    for (task, part) in parts.iter().enumerate() {
        let (row, g) = (task / kv_heads, task % kv_heads);
        for r in 0..groups {
            let h = g * groups + r;
            for i in 0..t {
                let src = &part[(r * t + i) * d..(r * t + i + 1) * d];
                let at = ((row * t + i) * heads + h) * d;
                y[at..at + d].copy_from_slice(src);
            }
        }
    }
    Some(plain_tensor(y, [b, t, heads * d]))
}

#[derive(Debug, Clone, Copy)]
struct Shape {
    t: usize,
    total: usize,
    d: usize,
    groups: usize,
}

/// One (row, key/value head) of [`decode`]: `q: [groups, t, d]`, `k, v: [total, d]`,
/// `out: [groups, t, d]`.
struct Group<'a> {
    shape: Shape,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    causal: bool,
    bias: Option<&'a [f32]>,
    scale: f32,
    out: &'a mut [f32],
}

impl pulp::WithSimd for Group<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            shape,
            q,
            k,
            v,
            causal,
            bias,
            scale,
            out,
        } = self;
        let Shape {
            t,
            total,
            d,
            groups,
        } = shape;
        let past = total - t;
        let mut scores = vec![0.0f32; total];
        for r in 0..groups {
            for i in 0..t {
                let qi = &q[(r * t + i) * d..(r * t + i + 1) * d];
                // Keys a causal query cannot see are left out rather than masked.
                let seen = if causal { past + i + 1 } else { total };
                let mut max = f32::NEG_INFINITY;
                for j in 0..seen {
                    let mut s = scale * dot(simd, qi, &k[j * d..(j + 1) * d]);
                    if let Some(m) = bias {
                        s += m[i * total + j];
                    }
                    scores[j] = s;
                    max = max.max(s);
                }
                let mut sum = 0.0f32;
                for s in &mut scores[..seen] {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                let y = &mut out[(r * t + i) * d..(r * t + i + 1) * d];
                y.fill(0.0);
                for j in 0..seen {
                    axpy(simd, scores[j] / sum, &v[j * d..(j + 1) * d], y);
                }
            }
        }
    }
}

/// `Σ a_i·b_i` on the CPU's vectors.
#[inline(always)]
fn dot<S: pulp::Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let (av, at) = S::as_simd_f32s(a);
    let (bv, bt) = S::as_simd_f32s(b);
    let mut acc = simd.splat_f32s(0.0);
    for i in 0..av.len() {
        acc = simd.mul_add_f32s(av[i], bv[i], acc);
    }
    let mut s = simd.reduce_sum_f32s(acc);
    for i in 0..at.len() {
        s += at[i] * bt[i];
    }
    s
}

/// `y += a·x` on the CPU's vectors.
#[inline(always)]
fn axpy<S: pulp::Simd>(simd: S, a: f32, x: &[f32], y: &mut [f32]) {
    let av = simd.splat_f32s(a);
    let (xv, xt) = S::as_simd_f32s(x);
    let (yv, yt) = S::as_mut_simd_f32s(y);
    for i in 0..xv.len() {
        yv[i] = simd.mul_add_f32s(av, xv[i], yv[i]);
    }
    for i in 0..xt.len() {
        yt[i] += a * xt[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::module::attention;
    use burn::tensor::ops::AttentionModuleOptions;
    use burn::tensor::{Device, TensorData};
    use rand::{Rng, SeedableRng};

    /// Against Burn's attention on K and V expanded to every head (the general path), with
    /// padding hidden by a bias, causally, and with every key visible.
    #[test]
    fn grouped_decoding_matches_burns_attention_on_expanded_heads() {
        let device = Device::flex();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (b, heads, kv_heads, d) = (3, 6, 2, 20);
        for (t, total) in [(1, 1), (1, 37), (3, 37), (16, 40)] {
            let mut tensor = |dims: [usize; 4]| {
                let n = dims.iter().product();
                let v: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                Tensor::<4>::from_data(TensorData::new(v, dims), &device)
            };
            let q = tensor([b, heads, t, d]);
            let k = tensor([b, kv_heads, total, d]);
            let v = tensor([b, kv_heads, total, d]);
            let groups = heads / kv_heads;
            let expand = |x: Tensor<4>| {
                x.unsqueeze_dim::<5>(2)
                    .expand([b, kv_heads, groups, total, d])
                    .reshape([b, heads, total, d])
            };
            // Row 1 hides its first 5 keys (left padding); every query sees its own position.
            let past = total - t;
            let mut bias = vec![0.0f32; b * t * total];
            for i in 0..t {
                for j in 0..total {
                    if j > past + i || (j < 5 && j != past + i && total > 5) {
                        bias[(t + i) * total + j] = -1e9;
                    }
                }
            }
            let bias_t =
                Tensor::<4>::from_data(TensorData::new(bias.clone(), [b, 1, t, total]), &device)
                    .expand([b, heads, t, total]);
            let scale = 1.0 / (d as f32).sqrt();
            let burns = |mask: Option<Tensor<4>>, causal: bool| {
                attention(
                    q.clone(),
                    expand(k.clone()),
                    expand(v.clone()),
                    None,
                    mask,
                    AttentionModuleOptions {
                        scale: Some(scale as f64),
                        softcap: None,
                        is_causal: causal,
                    },
                )
                .swap_dims(1, 2)
                .reshape([b, t, heads * d])
                .into_data()
                .try_to_vec::<f32>()
                .unwrap()
            };
            let ours = |mask: KeyMask<'_>| {
                decode(&q, &k, &v, total, mask, scale)
                    .expect("plain tensors, a decoding step")
                    .into_data()
                    .try_to_vec::<f32>()
                    .unwrap()
            };
            let close = |a: Vec<f32>, e: Vec<f32>, what: &str| {
                for (i, (a, e)) in a.iter().zip(&e).enumerate() {
                    assert!(
                        (a - e).abs() <= 1e-5,
                        "t {t} total {total} {what}: [{i}] {a} vs {e}"
                    );
                }
            };
            close(
                ours(KeyMask::Bias(&bias)),
                burns(Some(bias_t), false),
                "bias",
            );
            // Buffers with spare columns past `total` (a KV cache's): those are never read.
            let spare = Tensor::<4>::full([b, kv_heads, 7, d], 1.0e6, &device);
            let (kb, vb) = (
                Tensor::cat(vec![k.clone(), spare.clone()], 2),
                Tensor::cat(vec![v.clone(), spare], 2),
            );
            let in_buffers = decode(&q, &kb, &vb, total, KeyMask::Bias(&bias), scale)
                .expect("buffers with spare columns")
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            assert_eq!(
                in_buffers,
                ours(KeyMask::Bias(&bias)),
                "t {t} total {total}"
            );
            if t == total || t == 1 {
                close(ours(KeyMask::None), burns(None, false), "none");
            }
            if past == 0 {
                close(ours(KeyMask::Causal), burns(None, true), "causal");
            }
        }
        // More than a decoding step's queries: Burn's.
        let q = Tensor::<4>::zeros([1, 2, MAX_ROWS + 1, 4], &device);
        let k = Tensor::<4>::zeros([1, 1, MAX_ROWS + 1, 4], &device);
        assert!(decode(&q, &k, &k, MAX_ROWS + 1, KeyMask::None, 1.0).is_none());
    }
}
