//! Shared by the steering smoke tests.

use std::path::Path;

use hier_train::stages::Report;
use hier_train::upstream::ADAPTER_WEIGHTS;

/// Stands for the steering adapter trained again under the same settings: flips the lowest
/// mantissa bit of one weight of the `steer-rl` stage of `report` (run in `out`). The last
/// tensor's last element ends the file, so 4 bytes from the end is a mantissa's lowest byte for
/// f32, f16 and bf16 alike: the adapter stays loadable and finite.
pub fn flip_a_steer_rl_weight(report: &Report, out: &Path) {
    let stage = report.stages.iter().find(|s| s.name == "steer-rl").unwrap();
    let weights = out.join(&stage.dir).join(ADAPTER_WEIGHTS);
    let mut bytes = std::fs::read(&weights).unwrap();
    let n = bytes.len();
    bytes[n - 4] ^= 1;
    std::fs::write(&weights, bytes).unwrap();
}
