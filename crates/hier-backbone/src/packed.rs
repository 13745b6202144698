//! Frozen weights kept as a GGUF file stores them, for the products of a decoding step.
//!
//! A decoding step multiplies a few rows by every weight of the model, so its time is the time
//! to read the weights: 540 MB of f32 for SmolLM2-135M, at the few GB/s two cores get here.
//! The file itself holds them in 32-element blocks of a scale (and minimum) with small
//! integers — SmolLM2's projections in `Q4_1`, its embeddings in `Q8_0`: 96 MB in all. A
//! [`PackedWeight`] keeps those bytes; its product decodes a few rows of blocks at a time into
//! a buffer that stays in the cache and multiplies them there, so a step reads ≈ a sixth of the
//! memory.
//!
//! | type | bytes per 32 weights | weight |
//! |---|---|---|
//! | `Q4_0` | 18 | `d·(q − 8)` |
//! | `Q4_1` | 20 | `d·q + m` |
//! | `Q8_0` | 34 | `d·q` |
//!
//! Each block is decoded by the function that dequantises the file at load time
//! ([`crate::gguf::quant`]), so the weights multiplied are bit for bit the model's f32 weights;
//! only the order of the sums differs from the dense product (they agree to rounding). The
//! dense weights stay: prefill, training and GPUs multiply those. Other types (the K-quants,
//! f16, f32) are not kept packed — their layers take the dense path.

use std::fmt;
use std::ops::Range;

use crate::error::{BackboneError, Result};
use crate::few_rows::OutIn;
use crate::gguf::GgmlType;
use crate::gguf::quant::{self, fixed, fixed_mut};

/// Elements per block of every type kept packed.
const BLOCK: usize = 32;

/// Floats of decoded weight rows held at a time by one task (16 KB: with the few rows of `x`,
/// within a core's first-level cache).
const TILE_FLOATS: usize = 4096;

/// A frozen weight `E: [rows, cols]` (output features by input features, as GGUF and HF store
/// a linear layer) in the blocks of its file: row `j` is `cols / 32` consecutive blocks.
#[derive(Clone, PartialEq)]
pub struct PackedWeight {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    bytes: Vec<u8>,
}

impl fmt::Debug for PackedWeight {
    // The blocks themselves would fill a screen per layer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PackedWeight({} [{}, {}], {} bytes)",
            self.ty.name(),
            self.rows,
            self.cols,
            self.bytes.len()
        )
    }
}

impl PackedWeight {
    /// Whether weights of type `ty` are kept packed (see the module table).
    pub fn supports(ty: GgmlType) -> bool {
        matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0)
    }

    /// `rows × cols` weights of type `ty` from their blocks, row after row; `what` names the
    /// tensor in errors (a type without a kernel, rows that are not whole blocks, a byte count
    /// that does not match).
    pub fn new(ty: GgmlType, rows: usize, cols: usize, bytes: Vec<u8>, what: &str) -> Result<Self> {
        let bad = |m: String| Err(BackboneError::Invalid(format!("{what}: {m}")));
        if !Self::supports(ty) {
            return bad(format!(
                "type {} is not kept packed (Q4_0, Q4_1 and Q8_0 are)",
                ty.name()
            ));
        }
        if cols == 0 || !cols.is_multiple_of(BLOCK) {
            return bad(format!(
                "rows of {cols} weights are not whole blocks of {BLOCK}"
            ));
        }
        let (_, block_bytes) = ty.block().expect("a supported type has blocks");
        let want = rows * (cols / BLOCK) * block_bytes;
        if bytes.len() != want {
            return bad(format!(
                "{} bytes for [{rows}, {cols}] of {} (want {want})",
                bytes.len(),
                ty.name()
            ));
        }
        Ok(Self {
            ty,
            rows,
            cols,
            bytes,
        })
    }

    /// The storage type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// `[rows, cols]`: output features by input features.
    pub fn dims(&self) -> [usize; 2] {
        [self.rows, self.cols]
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.bytes.len() / self.rows.max(1)
    }

    /// Row `j` decoded to f32 (exactly the values [`crate::gguf::GgufFile::dequantize`] gives).
    pub fn row(&self, j: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.cols];
        self.decode_row(j, &mut out);
        out
    }

    #[inline(always)]
    fn decode_row(&self, j: usize, out: &mut [f32]) {
        // Index loops, not iterator adapters: the adapters' folds are functions of their own,
        // compiled for the baseline CPU, where these loops must inline into the caller's
        // wide-vector code (measured: the adapters cost an eighth of a decoding step).
        let rb = self.row_bytes();
        let row = &self.bytes[j * rb..(j + 1) * rb];
        let blocks = self.cols / BLOCK;
        match self.ty {
            GgmlType::Q4_0 => {
                for b in 0..blocks {
                    let block = fixed::<18>(&row[b * 18..(b + 1) * 18]);
                    quant::q4_0(block, fixed_mut(&mut out[b * BLOCK..(b + 1) * BLOCK]));
                }
            }
            GgmlType::Q4_1 => {
                for b in 0..blocks {
                    let block = fixed::<20>(&row[b * 20..(b + 1) * 20]);
                    quant::q4_1(block, fixed_mut(&mut out[b * BLOCK..(b + 1) * BLOCK]));
                }
            }
            GgmlType::Q8_0 => {
                for b in 0..blocks {
                    let block = fixed::<34>(&row[b * 34..(b + 1) * 34]);
                    quant::q8_0(block, fixed_mut(&mut out[b * BLOCK..(b + 1) * BLOCK]));
                }
            }
            _ => unreachable!("new() keeps only the supported types"),
        }
    }

    /// `y = x·Eᵀ` for `x: [rows, cols]` row-major (`rows` ≤ a few: a decoding step's); returns
    /// `y: [rows, self.rows]`. The output features are split over the rayon pool; each task
    /// decodes its rows of blocks a tile at a time into a buffer in the cache and takes the
    /// dot products there ([`crate::few_rows`]' kernel for `E: [n, k]`).
    ///
    /// # Panics
    /// If `x` is not `rows·cols` long.
    pub fn matmul(&self, x: &[f32], rows: usize) -> Vec<f32> {
        assert_eq!(
            x.len(),
            rows * self.cols,
            "x is not [{rows}, {}]",
            self.cols
        );
        let arch = pulp::Arch::new();
        crate::few_rows::by_columns(rows, self.rows, |cols, part| {
            arch.dispatch(Decoded {
                w: self,
                x,
                rows,
                cols,
                out: part,
            })
        })
    }
}

/// One task of [`PackedWeight::matmul`]: `out[r, j − cols.start] = Σ_i x[r, i]·E[j, i]` for
/// `j ∈ cols` (`out: [rows, cols.len()]`).
struct Decoded<'a> {
    w: &'a PackedWeight,
    x: &'a [f32],
    rows: usize,
    cols: Range<usize>,
    out: &'a mut [f32],
}

impl pulp::WithSimd for Decoded<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            w,
            x,
            rows,
            cols,
            out,
        } = self;
        let k = w.cols;
        let width = cols.len();
        // At least two rows: the kernel reads E's rows in pairs.
        let tile = (TILE_FLOATS / k).max(2);
        let mut buf = vec![0.0f32; tile.min(width) * k];
        let mut c0 = cols.start;
        while c0 < cols.end {
            let c1 = (c0 + tile).min(cols.end);
            let e = &mut buf[..(c1 - c0) * k];
            // Decoded here, inlined, the block loops run on the same wide vectors as the dots.
            for (j, row) in (c0..c1).zip(e.chunks_exact_mut(k)) {
                w.decode_row(j, row);
            }
            OutIn {
                x,
                rows,
                k,
                e,
                cols: 0..c1 - c0,
                out: &mut *out,
                width,
                col0: c0 - cols.start,
            }
            .with_simd(simd);
            c0 = c1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_shapes_and_types_are_errors_naming_the_tensor() {
        let err = |r: Result<PackedWeight>| r.unwrap_err().to_string();
        let e = err(PackedWeight::new(
            GgmlType::Q4K,
            1,
            256,
            vec![0; 144],
            "blk.0.attn_q",
        ));
        assert!(e.contains("blk.0.attn_q") && e.contains("Q4_K"), "{e}");
        let e = err(PackedWeight::new(GgmlType::Q8_0, 1, 48, vec![0; 51], "t"));
        assert!(e.contains("whole blocks of 32"), "{e}");
        let e = err(PackedWeight::new(GgmlType::Q8_0, 2, 32, vec![0; 34], "t"));
        assert!(e.contains("want 68"), "{e}");
        let ok = PackedWeight::new(GgmlType::Q4_1, 2, 64, vec![0; 80], "t").unwrap();
        assert_eq!((ok.dims(), ok.row_bytes()), ([2, 64], 40));
    }
}
