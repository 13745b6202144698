//! Adapter semantics: fresh adapters are the identity, calls route to the named adapter, only
//! adapter tensors receive gradients, and a training step changes only the chosen adapter.

use hier_backbone::burn::module::Module;
use hier_backbone::burn::tensor::{Device, Tensor};
use hier_backbone::{
    Batch, CausalLm, Family, Forward, LoraConfig, ModelConfig, ScoreRequest, TargetModule,
};

fn tiny_config() -> ModelConfig {
    let v = serde_json::json!({"model_type": "llama", "vocab_size": 50, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "max_position_embeddings": 64, "tie_word_embeddings": false});
    ModelConfig::from_json(std::path::Path::new("<test>"), &v).unwrap()
}

fn host(t: Tensor<3>) -> Vec<f32> {
    hier_backbone::weights::HostTensor::from_tensor(t).data
}

#[test]
fn fresh_adapter_is_identity_and_routing_is_per_call() {
    let device = Device::flex();
    let mut lm = CausalLm::random(tiny_config(), 7, &device).unwrap();
    assert_eq!(lm.config.family, Family::Llama);
    let batch = Batch::single(&[1, 5, 9, 3]);
    let base = host(lm.forward(&batch, Forward::default(), None).unwrap());
    let a = lm
        .add_adapter("sys1", LoraConfig::new(4, 8.0, &TargetModule::ALL), 0)
        .unwrap();
    let b = lm
        .add_adapter(
            "sys2",
            LoraConfig::new(2, 4.0, &[TargetModule::Q, TargetModule::V]),
            0,
        )
        .unwrap();
    assert_eq!(
        host(lm.forward(&batch, Forward::with(Some(a)), None).unwrap()),
        base
    );
    assert!(
        lm.add_adapter("sys1", LoraConfig::new(4, 8.0, &[TargetModule::Q]), 0)
            .is_err()
    );
    assert_eq!(lm.adapter_id("sys2").unwrap(), b);
    assert!(
        lm.adapter_id("nope")
            .unwrap_err()
            .to_string()
            .contains("sys1")
    );
    let mut wrong = lm.new_cache(2);
    let e = lm
        .forward(&batch, Forward::default(), Some(&mut wrong))
        .unwrap_err()
        .to_string();
    assert!(e.contains("KV cache holds 2 rows"), "{e}");
    let e = lm
        .forward(&Batch::single(&[99]), Forward::default(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("token id 99"), "{e}");
}

#[test]
fn only_the_chosen_adapter_gets_gradients() {
    let device = Device::flex().autodiff();
    let mut lm = CausalLm::random(tiny_config(), 3, &device).unwrap();
    let a = lm
        .add_adapter(
            "a",
            LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::Up]),
            0,
        )
        .unwrap();
    let _b = lm
        .add_adapter("b", LoraConfig::new(4, 8.0, &[TargetModule::Q]), 0)
        .unwrap();
    let out = lm
        .score(
            &[ScoreRequest {
                prompt: vec![1, 2, 3],
                continuation: vec![4, 5],
            }],
            Forward {
                adapter: Some(a),
                train: true,
            },
        )
        .unwrap();
    let loss = out.logprobs.sum().neg();
    let grads = loss.backward();
    let q = lm.layers[0].target(TargetModule::Q).unwrap();
    assert!(
        q.weight.val().grad(&grads).is_none(),
        "frozen base weight got a gradient"
    );
    assert!(
        lm.embed_tokens.val().grad(&grads).is_none(),
        "frozen embedding got a gradient"
    );
    // B starts at zero, so A's gradient is zero at init but B's is not.
    let gb = q.lora[0]
        .as_ref()
        .unwrap()
        .b
        .val()
        .grad(&grads)
        .expect("adapter B has a gradient");
    assert!(gb.abs().sum().into_scalar::<f32>() > 0.0);
    assert!(
        q.lora[1].as_ref().unwrap().b.val().grad(&grads).is_none(),
        "the other adapter got a gradient"
    );
    assert!(lm.num_params() > 0);
}

#[test]
fn value_head_reads_the_given_positions() {
    use hier_backbone::{ValueHead, gather_positions};
    let device = Device::flex();
    let lm = CausalLm::random(tiny_config(), 1, &device).unwrap();
    let hidden = lm
        .forward_hidden(
            &Batch::right_padded(&[vec![1, 2, 3, 4], vec![5, 6, 7, 8]], 0),
            Forward::default(),
            None,
        )
        .unwrap();
    let head = ValueHead::new(32, &device);
    let v = head.forward_at(hidden.clone(), &[3, 1]).unwrap();
    assert_eq!(v.dims(), [2]);
    // Row 1 read at position 1 equals the head applied to that hidden state alone.
    let row = hidden.clone().slice([1..2, 1..2, 0..32]).reshape([1, 32]);
    let alone = head.forward(row).into_scalar::<f32>();
    let got = hier_backbone::weights::HostTensor::from_tensor(v).data[1];
    assert!((alone - got).abs() < 1e-6, "{alone} vs {got}");
    assert!(
        gather_positions(hidden, &[4, 0])
            .unwrap_err()
            .to_string()
            .contains("position 4")
    );
}

/// Every `A` of the adapter, flattened, and whether every `B` is zero.
fn adapter_weights(lm: &CausalLm, slot: usize) -> (Vec<f32>, bool) {
    let (mut a, mut b_zero) = (Vec::new(), true);
    for layer in &lm.layers {
        for t in TargetModule::ALL {
            let Some(lin) = layer.target(t) else { continue };
            if let Some(Some(pair)) = lin.lora.get(slot) {
                a.extend(hier_backbone::weights::HostTensor::from_tensor(pair.a.val()).data);
                let b = hier_backbone::weights::HostTensor::from_tensor(pair.b.val()).data;
                b_zero &= b.iter().all(|&x| x == 0.0);
            }
        }
    }
    (a, b_zero)
}

#[test]
fn a_fresh_adapter_is_drawn_from_its_seed() {
    let device = Device::flex();
    let cfg = LoraConfig::new(4, 8.0, &[TargetModule::Q, TargetModule::Down]);
    let draw = |seed: u64| {
        // Draws from the backend's RNG in between must not matter.
        let _ = Tensor::<2>::random(
            [8, 8],
            hier_backbone::burn::tensor::Distribution::Default,
            &device,
        );
        let mut lm = CausalLm::random(tiny_config(), 7, &device).unwrap();
        lm.add_adapter("a", cfg.clone(), seed).unwrap();
        adapter_weights(&lm, 0)
    };
    let (a7, b_zero) = draw(7);
    assert!(b_zero, "B starts at zero");
    // 2 layers × (q: 32 × 4, down: 48 × 4).
    assert_eq!(a7.len(), 2 * (32 * 4 + 48 * 4));
    assert_eq!(draw(7).0, a7, "the same seed gives the same adapter");
    assert_ne!(draw(8).0, a7);
    // PEFT's bound 1/√in per module: q reads 32 features, down 48.
    let q = &a7[..32 * 4];
    let down = &a7[32 * 4..32 * 4 + 48 * 4];
    assert!(q.iter().all(|x| x.abs() < 1.0 / 32f32.sqrt()));
    assert!(down.iter().all(|x| x.abs() < 1.0 / 48f32.sqrt()));
    assert!(
        q.iter().any(|x| x.abs() > 0.8 / 32f32.sqrt()),
        "spans the bound"
    );
    assert!(
        down.iter().any(|x| x.abs() > 0.8 / 48f32.sqrt()),
        "spans the bound"
    );
}
