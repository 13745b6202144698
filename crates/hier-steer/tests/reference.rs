//! hier-steer against its PyTorch reference (`fixtures/reference.py`) to 1e-5, and the worked
//! examples of the specification.

use hier_steer::burn::tensor::{Device, Tensor, TensorData};
use hier_steer::*;
use serde_json::Value;

fn cases() -> Vec<Value> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cases.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(floats).collect(),
        x => vec![x.as_f64().unwrap() as f32],
    }
}

fn t2(v: &Value, d: &Device) -> Tensor<2> {
    let rows = v.as_array().unwrap().len();
    let data = floats(v);
    let cols = data.len() / rows;
    Tensor::from_data(TensorData::new(data, [rows, cols]), d)
}

fn t1(v: &Value, d: &Device) -> Tensor<1> {
    let data = floats(v);
    let n = data.len();
    Tensor::from_data(TensorData::new(data, [n]), d)
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

#[test]
fn ppo_clip_loss_matches_trl_conventions_for_every_normalisation() {
    let d = Device::flex().autodiff();
    let mut n = 0;
    for c in cases()
        .iter()
        .filter(|c| c["name"].as_str().unwrap().starts_with("ppo_"))
    {
        let i = &c["inputs"];
        let normalisation = match c["norm"].as_str().unwrap() {
            "grpo" => LossNormalisation::Grpo,
            "bnpo" => LossNormalisation::Bnpo,
            "dr_grpo" => LossNormalisation::DrGrpo {
                max_len: c["max_len"].as_u64().map(|x| x as usize),
            },
            "dapo" => LossNormalisation::Dapo {
                global_tokens: None,
            },
            other => panic!("{other}"),
        };
        let cfg = PpoConfig {
            eps_low: 0.2,
            eps_high: c["eps_high"].as_f64().unwrap() as f32,
            beta: c["beta"].as_f64().unwrap() as f32,
            normalisation,
        };
        let logp = t2(&i["logp"], &d).require_grad();
        let out = ppo_clip_loss(
            logp.clone(),
            t2(&i["old"], &d),
            t1(&i["adv"], &d),
            t2(&i["mask"], &d),
            Some(t2(&i["ref"], &d)),
            &cfg,
        )
        .unwrap();
        let name = c["name"].as_str().unwrap();
        close(
            &[out.loss.clone().into_scalar::<f32>()],
            &[c["loss"].as_f64().unwrap() as f32],
            name,
        );
        assert!(
            out.component("clip_frac").unwrap() > 0.0,
            "{name}: the fixture has clipped ratios"
        );
        let g = logp.grad(&out.loss.backward()).unwrap();
        close(
            &g.into_data().convert::<f32>().try_to_vec::<f32>().unwrap(),
            &floats(&c["grad"]),
            name,
        );
        n += 1;
    }
    assert_eq!(n, 16);
}

#[test]
fn ranknet_matches_reference() {
    let c = cases()
        .into_iter()
        .find(|c| c["name"] == "ranknet")
        .unwrap();
    let d = Device::flex().autodiff();
    let z = t1(&c["inputs"]["z"], &d).require_grad();
    let q = floats(&c["inputs"]["q"]);
    let task: Vec<usize> = c["inputs"]["task"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let out = ranknet_loss(z.clone(), &q, &task).unwrap();
    close(
        &[out.loss.clone().into_scalar::<f32>()],
        &[c["loss"].as_f64().unwrap() as f32],
        "ranknet",
    );
    // Pairs within tasks only, ties skipped: task 0 has (0,1), (0,2); task 1 has (3,4); task 2 none.
    assert_eq!(out.component("pairs"), Some(3.0));
    let g = z.grad(&out.loss.backward()).unwrap();
    close(
        &g.into_data().convert::<f32>().try_to_vec::<f32>().unwrap(),
        &floats(&c["grad"]),
        "ranknet grad",
    );
}

#[test]
fn trigger_probability_matches_and_never_overflows() {
    let c = cases()
        .into_iter()
        .find(|c| c["name"] == "trigger")
        .unwrap();
    let d = Device::flex();
    let z = t1(&c["inputs"]["z"], &d);
    for (k, tau) in c["inputs"]["tau"].as_array().unwrap().iter().enumerate() {
        let tau = tau.as_f64().unwrap();
        let p = trigger_probability(z.clone(), tau)
            .unwrap()
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .unwrap();
        assert!(p.iter().all(|x| x.is_finite()));
        close(&p, &floats(&c["output"][k]), "trigger");
    }
}

#[test]
fn worked_examples_of_the_specification() {
    let a = group_advantages(&[1.0, 0.0, 0.0, 1.0, 1.0], StdScaling::Group)
        .unwrap()
        .advantages;
    assert!(
        (a[0] - 0.730163).abs() < 1e-6 && (a[1] + 1.095245).abs() < 1e-6,
        "{a:?}"
    );
    let b = baseline_in_group_advantages(&[0.8, 0.4, 0.0, 1.0], 0.4, StdScaling::Group)
        .unwrap()
        .advantages;
    for (x, want) in b.iter().zip([0.718, -0.308, -1.334, 1.231]) {
        assert!((x - want).abs() < 1e-3, "{b:?}");
    }
    let same = baseline_in_group_advantages(&[0.5, 0.5], 0.5, StdScaling::Group).unwrap();
    assert!(same.zero_variance && same.advantages == vec![0.0, 0.0]);
    let nostd = group_advantages(&[1.0, 0.0], StdScaling::None)
        .unwrap()
        .advantages;
    assert_eq!(nostd, vec![0.5, -0.5]);
    assert!(group_advantages(&[1.0, f32::NAN], StdScaling::Group).is_err());
}
