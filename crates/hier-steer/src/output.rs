//! What every loss returns: the scalar to differentiate and its logged components.

use burn::tensor::Tensor;

/// A loss and named, detached scalar components (`[1]` tensors, read on demand).
#[derive(Debug, Clone)]
pub struct LossOutput {
    /// The scalar loss `[1]`, carrying the autodiff graph.
    pub loss: Tensor<1>,
    /// Named detached components.
    pub components: Vec<(&'static str, Tensor<1>)>,
}

impl LossOutput {
    /// One component by name, read to the host.
    pub fn component(&self, name: &str) -> Option<f32> {
        self.components
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, t)| t.clone().detach().into_scalar::<f32>())
    }
}
