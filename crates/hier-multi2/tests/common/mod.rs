//! What several of this crate's tests build: a tiny random model over the test tokenizer with
//! the planner's and the executor's adapters, and TextCraft environments with a few tasks.

use std::path::Path;

use hier_backbone::burn::tensor::Device;
use hier_backbone::{CausalLm, LoraConfig, TargetModule, Tokenizer};
use hier_envs::textcraft::TextCraft;
use hier_envs::{Env, Split, Task};
use hier_train::pretrain::TinyModelConfig;

/// A 2-layer, 32-wide random model (seed 9) with seeded `sys1` and `sys2` adapters.
pub fn tiny() -> (CausalLm, Tokenizer) {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../hier-backbone/tests/fixtures/tokenizer");
    let tok = Tokenizer::load(&dir).unwrap();
    let cfg = TinyModelConfig::for_tests(tok.vocab_size(), 512);
    let device = Device::flex().autodiff();
    let mut lm = CausalLm::random(cfg.model_config().unwrap(), 9, &device).unwrap();
    for (k, name) in ["sys1", "sys2"].into_iter().enumerate() {
        let lora = LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::V]);
        lm.add_adapter(name, lora, k as u64).unwrap();
    }
    (lm, tok)
}

/// `n` TextCraft environments and the first four training tasks.
pub fn textcraft(n: usize) -> (Vec<Box<dyn Env>>, Vec<Task>) {
    let envs: Vec<Box<dyn Env>> = (0..n)
        .map(|_| Box::new(TextCraft::from_assets().unwrap()) as Box<dyn Env>)
        .collect();
    let tasks = envs[0].tasks(Split::Train).unwrap()[..4].to_vec();
    (envs, tasks)
}
