//! Products of a few rows with a large frozen weight on the CPU: `y = x·W (+ b)` for
//! `x: [m, k]` with `m ≤` [`MAX_ROWS`] — every projection of a decoding step.
//!
//! Why not the general matmul: a decoding step multiplies `batch` rows (8 in the evaluations)
//! by every weight matrix of the model, so its cost is reading those matrices (540 MB of f32
//! for SmolLM2-135M). Burn's `flex` backend hands such products to a GEMM that packs the
//! weight before a micro-kernel built for 16 rows: ≈ 2 GB/s of weights, a tenth of what the
//! memory delivers (docs/PERFORMANCE.md). Here each weight element is read once, in the order
//! it is stored, by one of the rayon pool's threads (the pool the backend already uses), on
//! the widest vectors the CPU has — `pulp` picks AVX2 + FMA (or AVX-512, NEON, …) at run time,
//! in safe code. Greedy generation of 8 × (64 + 64) tokens of SmolLM2-135M on 2 cores: 44 tok/s
//! against Burn's 32–37 (same binary, alternated, beside two other runs; 2026-12-05).
//!
//! | layout | stored | product |
//! |---|---|---|
//! | [`Layout::InOut`] | `W: [k, n]` row-major (a [`crate::lora::LoraLinear`] weight, an untied `lm_head`) | `y[r, j] = Σ_i x[r, i]·W[i, j]` |
//! | [`Layout::OutIn`] | `E: [n, k]` row-major (tied embeddings used as the output projection) | `y[r, j] = Σ_i x[r, i]·E[j, i]` |
//!
//! A weight a GGUF file stores in `Q4_0`/`Q4_1`/`Q8_0` blocks is also kept in them
//! ([`crate::packed::PackedWeight`]); [`linear_packed`] decodes a tile of its rows at a time
//! into the cache and runs the [`Layout::OutIn`] kernel there, reading a sixth of the bytes.
//!
//! Sums run in f32 in another order than the GEMM's, so results agree with it to rounding
//! (≈ 1e-6 relative), not bit for bit. Only plain (non-autodiff) tensors of the `flex`
//! backend take this path ([`linear`] returns `None` otherwise): gradients and GPUs go
//! through Burn.

use std::borrow::Cow;

use burn::tensor::{Tensor, TensorData};
use burn_flex::{Flex, FlexTensor};
use rayon::prelude::*;

use crate::packed::PackedWeight;

/// The most rows ([`linear`]'s `x` flattened to `[m, k]`) taken by this path; more go to the
/// GEMM, which is the better kernel once a block of 16 rows fills its micro-kernel.
pub const MAX_ROWS: usize = 16;

/// How the weight is stored (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[k, n]`: input features by output features.
    InOut,
    /// `[n, k]`: output features by input features.
    OutIn,
}

/// `x·W + b` for a plain `flex` tensor `x` of at most [`MAX_ROWS`] rows and a contiguous f32
/// `weight` stored as `layout`; `None` when the product is not one for this path (more rows,
/// another backend, autodiff, another dtype, shapes that do not fit — Burn then computes it,
/// and reports any shape error).
pub fn linear<const D: usize>(
    x: &Tensor<D>,
    weight: &Tensor<2>,
    bias: Option<&Tensor<1>>,
    layout: Layout,
) -> Option<Tensor<D>> {
    let k = x.dims()[D - 1];
    let [a, b] = weight.dims();
    let n = match layout {
        Layout::InOut if a == k => b,
        Layout::OutIn if b == k => a,
        _ => return None,
    };
    let w = flex(weight)?;
    let w = w.as_slice::<f32>()?;
    product(x, n, bias, |xs, rows| matmul(xs, rows, k, w, n, layout))
}

/// `x·Eᵀ + b` for a plain `flex` tensor `x` of at most [`MAX_ROWS`] rows and a weight kept in
/// its file's blocks ([`PackedWeight`]: `E: [n, k]`); `None` as for [`linear`].
pub fn linear_packed<const D: usize>(
    x: &Tensor<D>,
    weight: &PackedWeight,
    bias: Option<&Tensor<1>>,
) -> Option<Tensor<D>> {
    let [n, k] = weight.dims();
    if x.dims()[D - 1] != k {
        return None;
    }
    product(x, n, bias, |xs, rows| weight.matmul(xs, rows))
}

/// `times(x, rows) + b` reshaped like `x` with `n` last, for a plain `flex` `x` of
/// `1..=`[`MAX_ROWS`] rows and a plain f32 bias of `n` (or none); `None` otherwise.
fn product<const D: usize>(
    x: &Tensor<D>,
    n: usize,
    bias: Option<&Tensor<1>>,
    times: impl FnOnce(&[f32], usize) -> Vec<f32>,
) -> Option<Tensor<D>> {
    let dims = x.dims();
    let k = dims[D - 1];
    let rows: usize = dims[..D - 1].iter().product();
    if rows == 0 || rows > MAX_ROWS || k == 0 {
        return None;
    }
    let bias = match bias {
        Some(t) => Some(flex(t)?),
        None => None,
    };
    let b: &[f32] = match &bias {
        Some(t) => Some(t.as_slice::<f32>()?).filter(|s| s.len() == n)?,
        None => &[],
    };
    let xt = flex(x)?;
    let xs = host_values(x, &xt)?;
    let mut y = times(&xs, rows);
    if !b.is_empty() {
        for row in y.chunks_exact_mut(n) {
            row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
        }
    }
    let mut shape = dims;
    shape[D - 1] = n;
    Some(plain_tensor(y, shape))
}

/// The row-major f32 values of `t`, whose `flex` primitive is `prim`: its storage when
/// contiguous; a copy of its rows when it is a strided view (a slice, a swapped pair of
/// dimensions).
pub(crate) fn host_values<'a, const D: usize>(
    t: &Tensor<D>,
    prim: &'a FlexTensor,
) -> Option<Cow<'a, [f32]>> {
    match prim.as_slice::<f32>() {
        Some(s) => Some(Cow::Borrowed(s)),
        None => Some(Cow::Owned(t.clone().into_data().try_to_vec::<f32>().ok()?)),
    }
}

/// A plain `flex` tensor of `shape` holding `values` (row-major).
pub(crate) fn plain_tensor<const D: usize>(values: Vec<f32>, shape: [usize; D]) -> Tensor<D> {
    Tensor::from_primitive::<Flex>(FlexTensor::from_data(TensorData::new(values, shape)))
}

/// The `flex` primitive of `t`, if it is one and not tracked by autodiff (an O(1) clone of
/// its shared storage).
pub(crate) fn flex<const D: usize>(t: &Tensor<D>) -> Option<FlexTensor> {
    t.clone().try_into_primitive::<Flex>().ok()
}

/// `y = x·W` (see the module table) for `x: [rows, k]` row-major; returns `y: [rows, n]`.
///
/// The work is split over the rayon pool so that each task streams one contiguous part of the
/// weight from memory, in the order it is stored: [`Layout::InOut`] by rows of W (each task's
/// partial sums, `[rows, n]`, are added at the end), [`Layout::OutIn`] by rows of E (each task
/// writes its own columns). The loops run on the widest vectors the CPU has (AVX2 with FMA
/// here), chosen at run time by `pulp`, safely.
///
/// # Panics
/// If the slices' lengths are not `rows·k` and `k·n`.
pub fn matmul(x: &[f32], rows: usize, k: usize, w: &[f32], n: usize, layout: Layout) -> Vec<f32> {
    assert_eq!(x.len(), rows * k, "x is not [{rows}, {k}]");
    assert_eq!(w.len(), k * n, "the weight is not {k}·{n} long");
    if rows == 0 || n == 0 {
        return vec![0.0; rows * n];
    }
    let tasks = rayon::current_num_threads().max(1);
    let arch = pulp::Arch::new();
    match layout {
        Layout::InOut => {
            // Each task: a contiguous block of W's rows, streamed start to end.
            let per = k.div_ceil(tasks).max(1);
            let parts: Vec<Vec<f32>> = (0..k)
                .step_by(per)
                .collect::<Vec<_>>()
                .par_iter()
                .map(|&p0| {
                    let p1 = (p0 + per).min(k);
                    let mut part = vec![0.0f32; rows * n];
                    arch.dispatch(InOut {
                        x,
                        rows,
                        k,
                        w,
                        n,
                        block: p0..p1,
                        out: &mut part,
                    });
                    part
                })
                .collect();
            let mut parts = parts.into_iter();
            let mut y = parts.next().unwrap_or_else(|| vec![0.0; rows * n]);
            for part in parts {
                y.iter_mut().zip(&part).for_each(|(y, p)| *y += p);
            }
            y
        }
        Layout::OutIn => by_columns(rows, n, |cols, part| {
            let width = cols.len();
            arch.dispatch(OutIn {
                x,
                rows,
                k,
                e: w,
                cols,
                out: part,
                width,
                col0: 0,
            })
        }),
    }
}

/// `y: [rows, n]` from one task per block of its columns (as many blocks as the rayon pool has
/// threads): `task(cols, part)` fills `part: [rows, cols.len()]`.
pub(crate) fn by_columns(
    rows: usize,
    n: usize,
    task: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync,
) -> Vec<f32> {
    let tasks = rayon::current_num_threads().max(1);
    let per = n.div_ceil(tasks).max(1);
    let starts: Vec<usize> = (0..n).step_by(per).collect();
    let parts: Vec<Vec<f32>> = starts
        .par_iter()
        .map(|&c0| {
            let c1 = (c0 + per).min(n);
            let mut part = vec![0.0f32; rows * (c1 - c0)];
            task(c0..c1, &mut part);
            part
        })
        .collect();
    let mut y = vec![0.0f32; rows * n];
    for (&c0, part) in starts.iter().zip(&parts) {
        let width = part.len() / rows.max(1);
        for r in 0..rows {
            y[r * n + c0..r * n + c0 + width].copy_from_slice(&part[r * width..(r + 1) * width]);
        }
    }
    y
}

/// Rows of W read together in [`InOut`]: each partial sum of `y` is loaded and stored once per
/// four of them.
const W_ROWS: usize = 4;

/// `out[r, :] += Σ_{p ∈ block} x[r, p]·W[p, :]` for `W: [k, n]` (`out: [rows, n]`).
///
/// W's rows `block` are one contiguous run of memory, read front to back four rows at a time;
/// `out` (≤ 16 rows of n) stays in the cache.
struct InOut<'a> {
    x: &'a [f32],
    rows: usize,
    k: usize,
    w: &'a [f32],
    n: usize,
    block: std::ops::Range<usize>,
    out: &'a mut [f32],
}

impl pulp::WithSimd for InOut<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            x,
            rows,
            k,
            w,
            n,
            block,
            out,
        } = self;
        let row = |p: usize| &w[p * n..(p + 1) * n];
        let mut p = block.start;
        while p + W_ROWS <= block.end {
            let (w0, t0) = S::as_simd_f32s(row(p));
            let (w1, t1) = S::as_simd_f32s(row(p + 1));
            let (w2, t2) = S::as_simd_f32s(row(p + 2));
            let (w3, t3) = S::as_simd_f32s(row(p + 3));
            for (r, y) in out.chunks_exact_mut(n).take(rows).enumerate() {
                let xr = &x[r * k + p..r * k + p + W_ROWS];
                let (a, b, c, d) = (
                    simd.splat_f32s(xr[0]),
                    simd.splat_f32s(xr[1]),
                    simd.splat_f32s(xr[2]),
                    simd.splat_f32s(xr[3]),
                );
                let (yv, yt) = S::as_mut_simd_f32s(y);
                let ws = w0.iter().zip(w1).zip(w2).zip(w3);
                for (y, (((w0, w1), w2), w3)) in yv.iter_mut().zip(ws) {
                    let s = simd.mul_add_f32s(a, *w0, *y);
                    let s = simd.mul_add_f32s(b, *w1, s);
                    let s = simd.mul_add_f32s(c, *w2, s);
                    *y = simd.mul_add_f32s(d, *w3, s);
                }
                let ts = t0.iter().zip(t1).zip(t2).zip(t3);
                for (y, (((w0, w1), w2), w3)) in yt.iter_mut().zip(ts) {
                    *y += xr[0] * w0 + xr[1] * w1 + xr[2] * w2 + xr[3] * w3;
                }
            }
            p += W_ROWS;
        }
        for p in p..block.end {
            let (wv, wt) = S::as_simd_f32s(row(p));
            for (r, y) in out.chunks_exact_mut(n).take(rows).enumerate() {
                let a = x[r * k + p];
                let av = simd.splat_f32s(a);
                let (yv, yt) = S::as_mut_simd_f32s(y);
                for (y, w) in yv.iter_mut().zip(wv) {
                    *y = simd.mul_add_f32s(av, *w, *y);
                }
                yt.iter_mut().zip(wt).for_each(|(y, w)| *y += a * w);
            }
        }
    }
}

/// Rows of x per register group in [`OutIn`]: 4 rows × 2 columns = 8 vector accumulators.
const ROW_GROUP: usize = 4;

/// `out[r, col0 + j − cols.start] = Σ_i x[r, i]·E[j, i]` for `j ∈ cols`, `E: [n, k]`
/// (`out: [rows, width]`): E's rows are read front to back, two at a time, each pair once
/// for all rows of x (the second group of rows finds it in the cache).
pub(crate) struct OutIn<'a> {
    pub(crate) x: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) k: usize,
    pub(crate) e: &'a [f32],
    pub(crate) cols: std::ops::Range<usize>,
    pub(crate) out: &'a mut [f32],
    /// Columns of `out`.
    pub(crate) width: usize,
    /// The column of `out` that `cols.start` fills.
    pub(crate) col0: usize,
}

impl pulp::WithSimd for OutIn<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            x,
            rows,
            k,
            e,
            cols,
            out,
            width,
            col0,
        } = self;
        let erow = |j: usize| &e[j * k..(j + 1) * k];
        let mut j = cols.start;
        while j < cols.end {
            let pair = (j + 1 < cols.end).then(|| erow(j + 1));
            let mut r = 0;
            while r < rows {
                let g = (rows - r).min(ROW_GROUP);
                let at = Tile {
                    r,
                    c: col0 + j - cols.start,
                    columns: 1 + usize::from(pair.is_some()),
                    width,
                };
                match g {
                    1 => at.put(dots::<S, 1>(simd, x, r, k, erow(j), pair), out),
                    2 => at.put(dots::<S, 2>(simd, x, r, k, erow(j), pair), out),
                    3 => at.put(dots::<S, 3>(simd, x, r, k, erow(j), pair), out),
                    _ => at.put(dots::<S, 4>(simd, x, r, k, erow(j), pair), out),
                }
                r += g;
            }
            j += 2;
        }
    }
}

/// Where [`dots`]' sums go in [`OutIn`]'s `out: [rows, width]`: rows from `r`, `columns`
/// (1 or 2) columns from `c`.
struct Tile {
    r: usize,
    c: usize,
    columns: usize,
    width: usize,
}

impl Tile {
    #[inline(always)]
    fn put<const R: usize>(&self, sums: [[f32; R]; 2], out: &mut [f32]) {
        for (dc, column) in sums.iter().enumerate().take(self.columns) {
            for (i, v) in column.iter().enumerate() {
                out[(self.r + i) * self.width + self.c + dc] = *v;
            }
        }
    }
}

/// `[Σ_p x[r+i, p]·e0[p], Σ_p x[r+i, p]·e1[p]]` for `i < R` (`e1` absent: zeros), each over
/// vector lanes of partial sums, then the lanes and the tail.
#[inline(always)]
fn dots<S: pulp::Simd, const R: usize>(
    simd: S,
    x: &[f32],
    r: usize,
    k: usize,
    e0: &[f32],
    e1: Option<&[f32]>,
) -> [[f32; R]; 2] {
    // Arrays filled by loops, not `std::array::from_fn`, whose closures are functions of
    // their own compiled for the baseline CPU (5 % of a decoding step, measured).
    let mut xs: [&[f32]; R] = [&[]; R];
    let mut xv: [&[S::f32s]; R] = [&[]; R];
    for i in 0..R {
        xs[i] = &x[(r + i) * k..(r + i + 1) * k];
        xv[i] = S::as_simd_f32s(xs[i]).0;
    }
    let (v0, t0) = S::as_simd_f32s(e0);
    let zero = simd.splat_f32s(0.0);
    let mut acc0 = [zero; R];
    let mut acc1 = [zero; R];
    match e1 {
        Some(e1) => {
            let (v1, _) = S::as_simd_f32s(e1);
            for (q, (a, b)) in v0.iter().zip(v1).enumerate() {
                for i in 0..R {
                    let xq = xv[i][q];
                    acc0[i] = simd.mul_add_f32s(xq, *a, acc0[i]);
                    acc1[i] = simd.mul_add_f32s(xq, *b, acc1[i]);
                }
            }
        }
        None => {
            for (q, a) in v0.iter().enumerate() {
                for i in 0..R {
                    acc0[i] = simd.mul_add_f32s(xv[i][q], *a, acc0[i]);
                }
            }
        }
    }
    let body = k - t0.len();
    let tail = |xr: &[f32], e: &[f32]| -> f32 {
        let mut s = 0.0;
        for p in body..k {
            s += xr[p] * e[p];
        }
        s
    };
    let mut sums = [[0.0f32; R]; 2];
    for i in 0..R {
        sums[0][i] = simd.reduce_sum_f32s(acc0[i]) + tail(xs[i], e0);
        if let Some(e1) = e1 {
            sums[1][i] = simd.reduce_sum_f32s(acc1[i]) + tail(xs[i], e1);
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The product by its definition, in f64.
    fn reference(
        x: &[f32],
        rows: usize,
        k: usize,
        w: &[f32],
        n: usize,
        layout: Layout,
    ) -> Vec<f64> {
        let mut y = vec![0.0f64; rows * n];
        for r in 0..rows {
            for j in 0..n {
                y[r * n + j] = (0..k)
                    .map(|i| {
                        let wij = match layout {
                            Layout::InOut => w[i * n + j],
                            Layout::OutIn => w[j * k + i],
                        };
                        x[r * k + i] as f64 * wij as f64
                    })
                    .sum();
            }
        }
        y
    }

    fn random(rng: &mut rand::rngs::StdRng, len: usize) -> Vec<f32> {
        (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    #[test]
    fn linear_takes_few_plain_cpu_rows_and_leaves_the_rest_to_burn() {
        use burn::tensor::Device;
        let device = Device::flex();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (k, n) = (40, 70);
        let w = Tensor::<2>::from_data(TensorData::new(random(&mut rng, k * n), [k, n]), &device);
        let b = Tensor::<1>::from_data(TensorData::new(random(&mut rng, n), [n]), &device);
        let x = |rows: usize, rng: &mut rand::rngs::StdRng| {
            Tensor::<3>::from_data(
                TensorData::new(random(rng, rows * k), [rows, 1, k]),
                &device,
            )
        };
        let host = |t: Tensor<3>| t.into_data().try_to_vec::<f32>().unwrap();
        // Eight rows (a decoding step): this path, equal to Burn's product up to rounding;
        // likewise the transposed layout and a strided input (a slice of a wider tensor).
        let x8 = x(8, &mut rng);
        let ours = linear(&x8, &w, Some(&b), Layout::InOut).expect("8 plain rows");
        let burns = burn::tensor::module::linear(x8.clone(), w.clone(), Some(b.clone()));
        let close = |a: Vec<f32>, b: Vec<f32>| {
            assert_eq!(a.len(), b.len());
            a.iter()
                .zip(&b)
                .all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs()))
        };
        assert!(close(host(ours), host(burns)));
        let wt = w.clone().transpose().into_data();
        let wt = Tensor::<2>::from_data(wt, &device);
        let ours = linear(&x8, &wt, None, Layout::OutIn).expect("8 plain rows, [n, k]");
        let burns = burn::tensor::module::linear(x8.clone(), w.clone(), None);
        assert!(close(host(ours), host(burns)));
        let wide = Tensor::<3>::from_data(
            TensorData::new(random(&mut rng, 8 * (k + 5)), [8, 1, k + 5]),
            &device,
        );
        let strided = wide.slice([0..8, 0..1, 5..k + 5]);
        let ours = linear(&strided, &w, None, Layout::InOut).expect("a strided view");
        let burns = burn::tensor::module::linear(strided, w.clone(), None);
        assert!(close(host(ours), host(burns)));
        // Seventeen rows: the GEMM's.
        assert!(linear(&x(MAX_ROWS + 1, &mut rng), &w, None, Layout::InOut).is_none());
        // A tensor that records gradients: Burn's, so that the backward pass sees the product.
        let ad = device.autodiff();
        let tracked =
            Tensor::<3>::from_data(TensorData::new(random(&mut rng, 2 * k), [2, 1, k]), &ad)
                .require_grad();
        let w_ad = Tensor::<2>::from_data(w.into_data(), &ad);
        assert!(linear(&tracked, &w_ad, None, Layout::InOut).is_none());
        // A weight whose shape does not fit: left to Burn, which names the mismatch.
        assert!(linear(&x8, &wt, None, Layout::InOut).is_none());
    }

    #[test]
    fn products_match_their_definition_at_every_edge_of_the_tiles() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Rows across the 4-row groups, k across the 4 rows of W read together and the 8-lane
        // dot body, n across the 256-column tasks.
        for rows in [1, 3, 4, 5, 8, 16] {
            for k in [1, 7, 8, 9, 64, 577] {
                for n in [1, 15, 16, 17, 300, 513] {
                    let x = random(&mut rng, rows * k);
                    let w = random(&mut rng, k * n);
                    for layout in [Layout::InOut, Layout::OutIn] {
                        let got = matmul(&x, rows, k, &w, n, layout);
                        let want = reference(&x, rows, k, &w, n, layout);
                        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                            // f32 sums of k terms of size ≤ 1: error ≲ k·ε.
                            let tol = 1e-6 * k as f64 + 1e-6;
                            assert!(
                                (*g as f64 - e).abs() <= tol,
                                "{layout:?} rows {rows} k {k} n {n}: y[{i}] = {g}, defined {e}"
                            );
                        }
                    }
                }
            }
        }
    }
}
