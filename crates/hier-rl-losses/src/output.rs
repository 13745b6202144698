//! What every loss returns: the scalar to differentiate and its logged components.

use burn::tensor::Tensor;

/// A loss and named, detached scalar components (`[1]` tensors, read with [`LossOutput::host`]
/// only when logging, so no device sync happens per step unless asked for).
#[derive(Debug, Clone)]
pub struct LossOutput {
    /// The scalar loss `[1]`, carrying the autodiff graph.
    pub loss: Tensor<1>,
    /// Named components (detached), e.g. `("td_error_abs", …)`, `("nonfinite", …)`.
    pub components: Vec<(&'static str, Tensor<1>)>,
}

impl LossOutput {
    /// The loss value and the components as host floats (one sync).
    pub fn host(&self) -> Vec<(&'static str, f32)> {
        std::iter::once(("loss", self.loss.clone()))
            .chain(self.components.iter().cloned())
            .map(|(k, t)| (k, t.detach().into_scalar::<f32>()))
            .collect()
    }

    /// One component by name.
    pub fn component(&self, name: &str) -> Option<f32> {
        self.components
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, t)| t.clone().detach().into_scalar::<f32>())
    }
}
