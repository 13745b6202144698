//! ggml tensor types and their dequantisation to f32.
//!
//! Every quantised type stores a row in fixed-size blocks along the innermost dimension; a
//! block holds its scale(s) and packed integers. The layouts below are ggml's
//! (`ggml-common.h`), written out from the format's definition:
//!
//! | type | elems/block | bytes/block | value |
//! |---|---|---|---|
//! | `Q4_0` | 32 | 18 = d(f16) + 16 nibbles | `d·(q − 8)` |
//! | `Q4_1` | 32 | 20 = d, m(f16) + 16 nibbles | `d·q + m` |
//! | `Q5_0` | 32 | 22 = d + qh(u32) + 16 nibbles | `d·(q − 16)`, q's 5th bit in qh |
//! | `Q5_1` | 32 | 24 = d, m + qh + 16 nibbles | `d·q + m` |
//! | `Q8_0` | 32 | 34 = d + 32 i8 | `d·q` |
//! | `Q4_K` | 256 | 144 = d, dmin + 12 scale bytes + 128 nibbles | `d·sc_j·q − dmin·m_j` per 32-sub-block j (6-bit sc, m) |
//! | `Q5_K` | 256 | 176 = d, dmin + 12 scale bytes + qh(32) + 128 nibbles | as `Q4_K` with a 5th bit |
//! | `Q6_K` | 256 | 210 = ql(128) + qh(64) + 16 i8 scales + d | `d·sc_j·(q − 32)` per 16-sub-block j |
//!
//! Within a 32-element block of the `_0`/`_1` types, byte `j` holds element `j` in its low
//! nibble and element `j + 16` in its high nibble.

use half::f16;

/// A ggml tensor type, by its id in the GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit float (id 0).
    F32,
    /// IEEE half (id 1).
    F16,
    /// bfloat16 (id 30).
    Bf16,
    /// 4-bit, one scale per 32 (id 2).
    Q4_0,
    /// 4-bit, scale and minimum per 32 (id 3).
    Q4_1,
    /// 5-bit, one scale per 32 (id 6).
    Q5_0,
    /// 5-bit, scale and minimum per 32 (id 7).
    Q5_1,
    /// 8-bit, one scale per 32 (id 8).
    Q8_0,
    /// 4-bit K-quant, super-blocks of 256 (id 12).
    Q4K,
    /// 5-bit K-quant (id 13).
    Q5K,
    /// 6-bit K-quant (id 14).
    Q6K,
    /// A type ggml defines that this crate does not dequantise (its id and ggml's name).
    Unsupported(u32, &'static str),
}

/// The types [`dequantize`] reads, for error messages.
pub const SUPPORTED: &str = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K";

impl GgmlType {
    /// The type with GGUF id `id`; `None` when ggml defines no type with that id.
    pub fn from_id(id: u32) -> Option<Self> {
        use GgmlType::*;
        Some(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            12 => Q4K,
            13 => Q5K,
            14 => Q6K,
            30 => Bf16,
            9 => Unsupported(id, "Q8_1"),
            10 => Unsupported(id, "Q2_K"),
            11 => Unsupported(id, "Q3_K"),
            15 => Unsupported(id, "Q8_K"),
            16 => Unsupported(id, "IQ2_XXS"),
            17 => Unsupported(id, "IQ2_XS"),
            18 => Unsupported(id, "IQ3_XXS"),
            19 => Unsupported(id, "IQ1_S"),
            20 => Unsupported(id, "IQ4_NL"),
            21 => Unsupported(id, "IQ3_S"),
            22 => Unsupported(id, "IQ2_S"),
            23 => Unsupported(id, "IQ4_XS"),
            24 => Unsupported(id, "I8"),
            25 => Unsupported(id, "I16"),
            26 => Unsupported(id, "I32"),
            27 => Unsupported(id, "I64"),
            28 => Unsupported(id, "F64"),
            29 => Unsupported(id, "IQ1_M"),
            34 => Unsupported(id, "TQ1_0"),
            35 => Unsupported(id, "TQ2_0"),
            39 => Unsupported(id, "MXFP4"),
            _ => return None,
        })
    }

    /// ggml's name of the type.
    pub fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            Bf16 => "BF16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q5_1 => "Q5_1",
            Q8_0 => "Q8_0",
            Q4K => "Q4_K",
            Q5K => "Q5_K",
            Q6K => "Q6_K",
            Unsupported(_, n) => n,
        }
    }

    /// `(elements per block, bytes per block)`; `None` for unsupported types.
    pub fn block(self) -> Option<(usize, usize)> {
        use GgmlType::*;
        Some(match self {
            F32 => (1, 4),
            F16 | Bf16 => (1, 2),
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q4K => (256, 144),
            Q5K => (256, 176),
            Q6K => (256, 210),
            Unsupported(..) => return None,
        })
    }
}

#[inline(always)]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Dequantises `bytes` (a whole number of blocks of `ty`) into `out`, which has the matching
/// number of elements. The caller checks the sizes; this only decodes.
///
/// # Panics
/// If `ty` is unsupported or the lengths disagree (both are the caller's checks).
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) {
    let (n, size) = ty.block().expect("caller checked the type is supported");
    assert_eq!(
        bytes.len() / size * n,
        out.len(),
        "caller checked the sizes"
    );
    let blocks = bytes.chunks_exact(size).zip(out.chunks_exact_mut(n));
    match ty {
        GgmlType::F32 => {
            for (b, y) in blocks {
                y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 => {
            for (b, y) in blocks {
                y[0] = f16_at(b, 0);
            }
        }
        GgmlType::Bf16 => {
            for (b, y) in blocks {
                y[0] = half::bf16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        GgmlType::Q4_0 => blocks.for_each(|(b, y)| q4_0(fixed(b), fixed_mut(y))),
        GgmlType::Q4_1 => blocks.for_each(|(b, y)| q4_1(fixed(b), fixed_mut(y))),
        GgmlType::Q5_0 => blocks.for_each(|(b, y)| q5_0(b, y)),
        GgmlType::Q5_1 => blocks.for_each(|(b, y)| q5_1(b, y)),
        GgmlType::Q8_0 => blocks.for_each(|(b, y)| q8_0(fixed(b), fixed_mut(y))),
        GgmlType::Q4K => blocks.for_each(|(b, y)| q4_k(b, y)),
        GgmlType::Q5K => blocks.for_each(|(b, y)| q5_k(b, y)),
        GgmlType::Q6K => blocks.for_each(|(b, y)| q6_k(b, y)),
        GgmlType::Unsupported(..) => unreachable!("block() is None for unsupported types"),
    }
}

/// A block as the fixed-size array its decoder takes (`chunks_exact` made the size right).
#[inline(always)]
pub(crate) fn fixed<const N: usize>(b: &[u8]) -> &[u8; N] {
    b.try_into().expect("a block of the type's size")
}

/// The 32 outputs of a block as a fixed-size array.
#[inline(always)]
pub(crate) fn fixed_mut(y: &mut [f32]) -> &mut [f32; 32] {
    y.try_into().expect("a block's 32 elements")
}

/// One `Q4_0` block. Fixed sizes and `inline(always)` so that, inlined into a kernel compiled
/// for wider vectors ([`crate::packed`]), the loop is vectorised without bounds checks.
#[inline(always)]
pub(crate) fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = d * ((qs[j] & 0x0F) as i32 - 8) as f32;
        y[j + 16] = d * ((qs[j] >> 4) as i32 - 8) as f32;
    }
}

/// One `Q4_1` block (see [`q4_0`] for the fixed sizes).
#[inline(always)]
pub(crate) fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = d * (qs[j] & 0x0F) as f32 + m;
        y[j + 16] = d * (qs[j] >> 4) as f32 + m;
    }
}

/// The 5th bits of a `Q5_0`/`Q5_1` block: bit `j` of `qh` belongs to element `j`.
fn fifth_bits(qh: u32, j: usize) -> (u8, u8) {
    (
        (((qh >> j) << 4) & 0x10) as u8,
        ((qh >> (j + 12)) & 0x10) as u8,
    )
}

fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let (h0, h1) = fifth_bits(qh, j);
        y[j] = d * (((qs[j] & 0x0F) | h0) as i32 - 16) as f32;
        y[j + 16] = d * (((qs[j] >> 4) | h1) as i32 - 16) as f32;
    }
}

fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let (h0, h1) = fifth_bits(qh, j);
        y[j] = d * ((qs[j] & 0x0F) | h0) as f32 + m;
        y[j + 16] = d * ((qs[j] >> 4) | h1) as f32 + m;
    }
}

/// One `Q8_0` block (see [`q4_0`] for the fixed sizes).
#[inline(always)]
pub(crate) fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (j, q) in b[2..34].iter().enumerate() {
        y[j] = d * (*q as i8) as f32;
    }
}

/// Scale and minimum of sub-block `j` (0..8) of a `Q4_K`/`Q5_K` super-block: 6-bit values
/// packed into 12 bytes (ggml's `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    let (sc, m) = if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    };
    (sc as f32, m as f32)
}

fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..144];
    // Four chunks of 64: 32 low nibbles (sub-block 2c) then 32 high nibbles (2c + 1).
    for c in 0..4 {
        let (sc1, m1) = scale_min_k4(2 * c, scales);
        let (sc2, m2) = scale_min_k4(2 * c + 1, scales);
        let q = &qs[32 * c..32 * c + 32];
        let out = &mut y[64 * c..64 * c + 64];
        for l in 0..32 {
            out[l] = d * sc1 * (q[l] & 0x0F) as f32 - dmin * m1;
            out[l + 32] = d * sc2 * (q[l] >> 4) as f32 - dmin * m2;
        }
    }
}

fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for c in 0..4 {
        let (sc1, m1) = scale_min_k4(2 * c, scales);
        let (sc2, m2) = scale_min_k4(2 * c + 1, scales);
        // The 5th bits of chunk c sit in bits 2c and 2c + 1 of qh.
        let (u1, u2) = (1u8 << (2 * c), 2u8 << (2 * c));
        let q = &qs[32 * c..32 * c + 32];
        let out = &mut y[64 * c..64 * c + 64];
        for l in 0..32 {
            let hi1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let hi2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            out[l] = d * sc1 * ((q[l] & 0x0F) + hi1) as f32 - dmin * m1;
            out[l + 32] = d * sc2 * ((q[l] >> 4) + hi2) as f32 - dmin * m2;
        }
    }
}

fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 208);
    // Two halves of 128: ql 64 bytes, qh 32 bytes, 8 scales each.
    for h in 0..2 {
        let ql = &b[64 * h..64 * h + 64];
        let qh = &b[128 + 32 * h..128 + 32 * h + 32];
        let sc = &b[192 + 8 * h..192 + 8 * h + 8];
        let out = &mut y[128 * h..128 * h + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            out[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            out[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            out[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            out[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: one Q4_0 block with d = 0.5, element j = nibble j.
    #[test]
    fn q4_0_by_hand() {
        let mut b = vec![0u8; 18];
        b[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        b[2] = 0x3A; // element 0 = 0xA, element 16 = 0x3
        let mut y = vec![0f32; 32];
        dequantize(GgmlType::Q4_0, &b, &mut y);
        assert_eq!(y[0], 0.5 * (10.0 - 8.0));
        assert_eq!(y[16], 0.5 * (3.0 - 8.0));
        assert_eq!(y[1], 0.5 * -8.0);
    }

    #[test]
    fn names_and_ids() {
        assert_eq!(GgmlType::from_id(12), Some(GgmlType::Q4K));
        assert_eq!(GgmlType::from_id(10).unwrap().name(), "Q2_K");
        assert!(GgmlType::from_id(10).unwrap().block().is_none());
        assert_eq!(GgmlType::from_id(4), None);
    }
}
