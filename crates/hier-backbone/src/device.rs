//! Runtime device choice: `cpu` (Burn's `flex` backend), `cuda[:N]`, `wgpu[:N]`.

use burn::tensor::Device;

use crate::error::{BackboneError, Result};

/// Parses `--device` values. GPU backends exist only when the crate was built with the
/// `cuda` / `wgpu` feature; asking for one otherwise is an error that says which feature to add.
pub fn parse_device(spec: &str) -> Result<Device> {
    let err = |msg: &str| BackboneError::Device {
        spec: spec.to_string(),
        msg: msg.to_string(),
    };
    let (kind, index) = match spec.split_once(':') {
        Some((k, i)) => (
            k,
            Some(
                i.parse::<usize>()
                    .map_err(|_| err("the index after `:` must be a number"))?,
            ),
        ),
        None => (spec, None),
    };
    match kind {
        "cpu" | "flex" => {
            if index.is_some() {
                return Err(err("cpu takes no index"));
            }
            Ok(Device::flex())
        }
        "cuda" => {
            #[cfg(feature = "cuda")]
            {
                Ok(Device::cuda(index.unwrap_or(0)))
            }
            #[cfg(not(feature = "cuda"))]
            {
                let _ = index;
                Err(err(
                    "this binary was built without CUDA: build with the `cuda` feature \
                     (`cargo xtask-cuda …`), which needs Burn's LLVM bundle downloaded from \
                     GitHub at build time; where that download is blocked, use \
                     `cargo xtask-wgpu … --device wgpu` (Vulkan, NVIDIA included)",
                ))
            }
        }
        "wgpu" => {
            #[cfg(feature = "wgpu")]
            {
                Ok(Device::wgpu(index.map_or(
                    burn::tensor::DeviceKind::DefaultDevice,
                    burn::tensor::DeviceKind::DiscreteGpu,
                )))
            }
            #[cfg(not(feature = "wgpu"))]
            {
                let _ = index;
                Err(err(
                    "this binary was built without WGPU; rebuild with `--features wgpu`",
                ))
            }
        }
        _ => Err(err("expected cpu, cuda[:N] or wgpu")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert!(parse_device("cpu").is_ok());
        assert!(
            parse_device("tpu")
                .unwrap_err()
                .to_string()
                .contains("expected cpu")
        );
        assert!(parse_device("cuda:x").is_err());
        #[cfg(not(feature = "cuda"))]
        {
            let e = parse_device("cuda:0").unwrap_err().to_string();
            assert!(
                e.contains("the `cuda` feature") && e.contains("--device wgpu"),
                "{e}"
            );
        }
    }
}
