//! `hier-data`'s batching over `hier-backbone`'s tokenizers: the tiny backbone's trained BPE
//! and a checkpoint's HF `tokenizer.json` take the same path.

use hier_backbone::Tokenizer;
use hier_data::batch::Tokenize;

/// A backbone tokenizer seen through [`Tokenize`]. Prompt and target are encoded without
/// special tokens (the caller adds a BOS when the model wants one).
pub struct BackboneTokens<'a> {
    pub tokenizer: &'a Tokenizer,
    pub pad_id: u32,
}

impl Tokenize for BackboneTokens<'_> {
    fn encode(&self, text: &str) -> hier_data::Result<Vec<u32>> {
        self.tokenizer
            .encode(text, false)
            .map_err(|e| hier_data::DataError::Encode(Box::new(e)))
    }

    fn pad_id(&self) -> u32 {
        self.pad_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hier_data::batch::{bucket_batches, sys2_prompt, tokenize};
    use hier_data::schema::Sys2Transition;

    #[test]
    fn hf_tokenizer_batches_with_exact_target_boundaries() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../hier-backbone/tests/fixtures/tokenizer");
        let tokenizer = Tokenizer::load(&path).unwrap();
        let tok = BackboneTokens {
            tokenizer: &tokenizer,
            pad_id: 0,
        };
        let t = Sys2Transition {
            source: "x".into(),
            subgoal: "heat mug 1 with microwave 1".into(),
            observation: "You arrive at loc 3. The microwave 1 is closed.".into(),
            action: "heat mug 1 with microwave 1".into(),
            subgoal_done: true,
            reward: 1.0,
            env_reward: 0.0,
            next_observation: String::new(),
            terminal: true,
            segment: 0,
            step: 1,
        };
        let ex = tokenize(&tok, &sys2_prompt(&t), &t.target(), 512, "t").unwrap();
        let target: Vec<u32> = ex
            .ids
            .iter()
            .zip(&ex.action_mask)
            .filter(|(_, m)| **m)
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(tokenizer.decode(&target, false).unwrap().trim(), t.target());
        let batches = bucket_batches(&[ex.clone(), ex], 4096, 8, 0, 0);
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].ids[0], batches[0].ids[1]);
    }
}
