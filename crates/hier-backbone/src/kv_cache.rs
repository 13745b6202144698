//! The key/value cache of a batch that is being decoded.
//!
//! Per layer, keys and values are held in buffers `[b, kv_heads, capacity, d]` (before the GQA
//! expansion) of which the first `len` columns are cached positions; which of those columns
//! are real tokens (left padding is not) is kept per row.
//!
//! Invariant: columns `len..capacity` of a buffer are never read — attention takes the buffers
//! with `len` ([`crate::grouped_attention::decode`]) or the view [`LayerKv::keys`].
//!
//! Why buffers: appending a step's column by concatenation copied the whole cache at every
//! layer of every decoding step (7 % of a ReAct evaluation's time, `perf`, 2026-12-05). An
//! append now writes its columns in place (`slice_assign` on a buffer no one else holds — Burn's
//! CPU backend copies one that is shared, so a cache cloned into the prefix cache is never
//! written through) and reallocates only when the capacity runs out, [`GROW`] columns beyond
//! the need, so a decoded token costs an amortised `1 / GROW` of a copy.

use burn::tensor::Tensor;

/// Columns a buffer gets beyond the need when it grows. At SmolLM2's size (30 layers, 3
/// key/value heads of 64) that is ≈ 12 MB per row; the copy of a growth comes once per
/// `GROW` decoded tokens.
pub const GROW: usize = 256;

/// The first `len` columns (dimension 2) of `buf: [b, h, capacity, d]`: `buf` itself when
/// that is all of it, else a view.
pub(crate) fn first_columns(buf: Tensor<4>, len: usize) -> Tensor<4> {
    let [b, h, cap, d] = buf.dims();
    if cap == len {
        buf
    } else {
        buf.slice([0..b, 0..h, 0..len, 0..d])
    }
}

/// One layer's cached keys and values.
#[derive(Debug, Clone)]
pub struct LayerKv {
    k: Tensor<4>,
    v: Tensor<4>,
    len: usize,
}

impl LayerKv {
    /// A cache of exactly `k, v: [b, kv_heads, len, d]` (no spare capacity).
    pub(crate) fn new(k: Tensor<4>, v: Tensor<4>) -> Self {
        let len = k.dims()[2];
        Self { k, v, len }
    }

    /// Cached columns.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no column is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Columns the buffers hold, cached or not.
    pub fn capacity(&self) -> usize {
        self.k.dims()[2]
    }

    /// The buffers `[b, kv_heads, capacity, d]`, of which the first [`Self::len`] columns are
    /// cached.
    pub(crate) fn buffers(&self) -> (&Tensor<4>, &Tensor<4>) {
        (&self.k, &self.v)
    }

    /// The cached keys `[b, kv_heads, len, d]` (a view of the buffer).
    pub fn keys(&self) -> Tensor<4> {
        self.cached(&self.k)
    }

    /// The cached values `[b, kv_heads, len, d]` (a view of the buffer).
    pub fn values(&self) -> Tensor<4> {
        self.cached(&self.v)
    }

    fn cached(&self, buf: &Tensor<4>) -> Tensor<4> {
        first_columns(buf.clone(), self.len)
    }

    /// `self` with `k, v: [b, kv_heads, t, d]` appended after its cached columns.
    ///
    /// # Panics
    /// If `k` and `v` differ in shape, or their rows, heads or width are not the cache's
    /// (a caller's bug: the layer that made the cache makes the columns).
    pub(crate) fn appended(self, k: Tensor<4>, v: Tensor<4>) -> Self {
        let [b, h, t, d] = k.dims();
        let [cb, ch, cap, cd] = self.k.dims();
        assert_eq!(
            k.dims(),
            v.dims(),
            "keys and values of one step differ in shape"
        );
        assert_eq!(
            (b, h, d),
            (cb, ch, cd),
            "a step's keys do not fit the KV cache's rows, heads or width"
        );
        let (len, need) = (self.len, self.len + t);
        if need <= cap {
            // Consumes the buffers: written in place when this cache is their only holder.
            let k = self.k.slice_assign([0..b, 0..h, len..need, 0..d], k);
            let v = self.v.slice_assign([0..b, 0..h, len..need, 0..d], v);
            return Self { k, v, len: need };
        }
        let device = k.device();
        let grow = |cached: Tensor<4>, new: Tensor<4>| {
            Tensor::cat(
                vec![cached, new, Tensor::zeros([b, h, GROW, d], &device)],
                2,
            )
        };
        let (ck, cv) = (self.keys(), self.values());
        Self {
            k: grow(ck, k),
            v: grow(cv, v),
            len: need,
        }
    }
}

/// The key/value cache of a batch: per layer a [`LayerKv`] (`None` before the first call),
/// plus which cached columns are real tokens (left padding is not).
#[derive(Debug, Clone)]
pub struct KvCache {
    pub(crate) layers: Vec<Option<LayerKv>>,
    pub(crate) key_valid: Vec<Vec<bool>>,
}

impl KvCache {
    /// An empty cache for `num_layers` layers and `batch` rows.
    pub fn new(num_layers: usize, batch: usize) -> Self {
        Self {
            layers: vec![None; num_layers],
            key_valid: vec![Vec::new(); batch],
        }
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.key_valid.first().map_or(0, Vec::len)
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows cached.
    pub fn rows(&self) -> usize {
        self.key_valid.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    fn values(t: Tensor<4>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    /// Appending step by step, across growths, holds what one concatenation of every step
    /// holds; the spare columns are not part of what is read.
    #[test]
    fn appended_columns_equal_their_concatenation() {
        let device = Device::flex();
        let (b, h, d) = (2, 3, 4);
        let step = |t: usize, from: usize| {
            let n = b * h * t * d;
            let v: Vec<f32> = (0..n).map(|i| (from * 1000 + i) as f32).collect();
            Tensor::<4>::from_data(TensorData::new(v, [b, h, t, d]), &device)
        };
        let first = step(5, 0);
        let mut cache = LayerKv::new(first.clone(), first.clone() * -1.0);
        let mut all = vec![first];
        // A prefill, then single tokens well past one growth.
        let mut lens = vec![7];
        lens.extend(std::iter::repeat_n(1, GROW + 3));
        for (i, t) in lens.into_iter().enumerate() {
            let s = step(t, i + 1);
            cache = cache.appended(s.clone(), s.clone() * -1.0);
            all.push(s);
        }
        let expected = Tensor::cat(all, 2);
        assert_eq!(cache.len(), expected.dims()[2]);
        assert!(
            cache.capacity() > cache.len(),
            "spare capacity after a growth"
        );
        assert_eq!(values(cache.keys()), values(expected.clone()));
        assert_eq!(values(cache.values()), values(expected * -1.0));
    }

    /// A clone taken before an append (as the prefix cache keeps one) still holds what it
    /// held: the append copies a shared buffer instead of writing through it.
    #[test]
    fn an_append_does_not_write_through_a_clone() {
        let device = Device::flex();
        let first = Tensor::<4>::ones([1, 1, 3, 2], &device);
        let grown = LayerKv::new(first.clone(), first.clone()).appended(first.clone(), first);
        assert!(grown.capacity() > grown.len());
        let kept = grown.clone();
        let before = values(kept.keys());
        let twos = Tensor::<4>::ones([1, 1, 1, 2], &device) * 2.0;
        let after = grown.appended(twos.clone(), twos);
        assert_eq!(values(kept.keys()), before);
        assert_eq!(after.len(), 7);
        assert_eq!(values(after.keys())[12..], [2.0, 2.0]);
    }
}
