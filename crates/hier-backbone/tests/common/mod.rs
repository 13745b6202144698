//! Helpers the reference tests share: reading the fixtures' raw f32 and id lists, and the
//! relative L2 error they are held to.

use std::path::Path;

use serde_json::Value;

/// Little-endian f32 values of a `.f32` fixture.
pub fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A JSON list of token ids.
pub fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// ‖ours − theirs‖₂ / ‖theirs‖₂.
pub fn rel_l2(ours: &[f32], theirs: &[f32]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    let num: f64 = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| ((a - b) as f64).powi(2))
        .sum();
    let den: f64 = theirs.iter().map(|b| (*b as f64).powi(2)).sum();
    (num / den).sqrt()
}
