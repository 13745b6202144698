//! Every loss matches the PyTorch reference implementation (`fixtures/reference.py`, written from
//! the equations) in value and gradient to 1e-5.

use hier_rl_losses::burn::tensor::{Device, Tensor, TensorData};
use hier_rl_losses::*;
use serde_json::Value;

const TOL: f32 = 1e-5;

fn cases() -> Vec<Value> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cases.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn case(name: &str) -> Value {
    cases()
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

fn flat(v: &Value, out: &mut Vec<f32>, shape: &mut Vec<usize>, depth: usize) {
    match v {
        Value::Array(a) => {
            if shape.len() == depth {
                shape.push(a.len());
            }
            a.iter().for_each(|x| flat(x, out, shape, depth + 1))
        }
        x => out.push(x.as_f64().unwrap() as f32),
    }
}

fn t<const D: usize>(v: &Value, dev: &Device) -> Tensor<D> {
    let (mut data, mut shape) = (vec![], vec![]);
    flat(v, &mut data, &mut shape, 0);
    Tensor::from_data(TensorData::new(data, shape), dev)
}

fn leaf<const D: usize>(v: &Value, dev: &Device) -> Tensor<D> {
    t::<D>(v, dev).require_grad()
}

fn host<const D: usize>(x: Tensor<D>) -> Vec<f32> {
    x.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

fn close(got: &[f32], want: &Value, what: &str) {
    let (mut w, mut s) = (vec![], vec![]);
    flat(want, &mut w, &mut s, 0);
    assert_eq!(got.len(), w.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= TOL * (1.0 + b.abs()),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

fn scalar(x: Tensor<1>) -> f32 {
    x.into_scalar::<f32>()
}

fn dev() -> Device {
    Device::flex().autodiff()
}

#[test]
fn action_logprobs_match() {
    for (red, name) in [
        (Reduction::Mean, "action_logprobs_mean"),
        (Reduction::Sum, "action_logprobs_sum"),
    ] {
        let c = case(name);
        let d = dev();
        let lp = leaf::<2>(&c["inputs"]["token_logprobs"], &d);
        let (out, dropped) = action_logprobs(lp.clone(), t(&c["inputs"]["mask"], &d), red).unwrap();
        close(&host(out.clone()), &c["output"], name);
        assert_eq!(scalar(dropped), 0.0);
        let g = (out * t::<1>(&c["inputs"]["weights"], &d)).sum().backward();
        close(
            &host(lp.grad(&g).unwrap()),
            &c["grads"]["token_logprobs"],
            name,
        );
    }
}

#[test]
fn td_loss_matches() {
    let c = case("td_loss");
    let (i, d) = (&c["inputs"], dev());
    let q = leaf::<1>(&i["q"], &d);
    let out = td_loss(
        q.clone(),
        t(&i["reward"], &d),
        t(&i["done"], &d),
        t(&i["v_next"], &d),
        t(&i["mask"], &d),
        0.99,
    )
    .unwrap();
    close(&[scalar(out.loss.clone())], &c["loss"], "td loss");
    let g = out.loss.backward();
    close(&host(q.grad(&g).unwrap()), &c["grads"]["q"], "td grad");
}

#[test]
fn expectile_matches_for_three_taus() {
    for tau in [0.7f32, 0.5, 0.9] {
        let c = case(&format!("expectile_{tau}"));
        let (i, d) = (&c["inputs"], dev());
        let v = leaf::<1>(&i["v"], &d);
        let out = expectile_loss(t(&i["q_target"], &d), v.clone(), t(&i["mask"], &d), tau).unwrap();
        close(&[scalar(out.loss.clone())], &c["loss"], "expectile loss");
        let g = out.loss.backward();
        close(
            &host(v.grad(&g).unwrap()),
            &c["grads"]["v"],
            "expectile grad",
        );
    }
}

#[test]
fn offline_actor_matches_with_and_without_normalisation() {
    for norm in [false, true] {
        let c = case(&format!("offline_actor_norm{}", norm as u8));
        let (i, d) = (&c["inputs"], dev());
        let lp = leaf::<1>(&i["logp"], &d);
        let lp_pi = leaf::<1>(&i["logp_pi"], &d);
        let cfg = OfflineActorConfig {
            beta: 10.0,
            w_max: 20.0,
            normalise: norm,
            lambda: 7.0,
            ..Default::default()
        };
        let out = offline_actor_loss(
            lp.clone(),
            t(&i["adv"], &d),
            t(&i["mask"], &d),
            Some((lp_pi.clone(), t(&i["adv_pi"], &d), t(&i["mask_pi"], &d))),
            &cfg,
        )
        .unwrap();
        close(&[scalar(out.loss.clone())], &c["loss"], "offline loss");
        assert!(
            out.component("w_clipped_frac").unwrap() > 0.0,
            "the fixture clips one weight"
        );
        let g = out.loss.backward();
        close(
            &host(lp.grad(&g).unwrap()),
            &c["grads"]["logp"],
            "offline grad data",
        );
        close(
            &host(lp_pi.grad(&g).unwrap()),
            &c["grads"]["logp_pi"],
            "offline grad policy",
        );
    }
}

#[test]
fn online_actor_with_exact_kl_matches() {
    let c = case("online_actor_exact_kl");
    let (i, d) = (&c["inputs"], dev());
    let lp = leaf::<1>(&i["logp"], &d);
    let on = leaf::<3>(&i["logits_on"], &d);
    let kl = KlAnchor::Exact {
        logits_on: on.clone(),
        logits_off: t(&i["logits_off"], &d),
        mask: t(&i["kl_mask"], &d),
    };
    let cfg = OnlineActorConfig {
        alpha: 1.0,
        w_max: 20.0,
        normalise: false,
        eta: 0.02,
    };
    let out = online_actor_loss(
        lp.clone(),
        t(&i["adv"], &d),
        t(&i["mask"], &d),
        Some(kl),
        &cfg,
    )
    .unwrap();
    close(&[scalar(out.loss.clone())], &c["loss"], "online loss");
    close(&[out.component("kl").unwrap()], &c["kl"], "kl");
    let g = out.loss.backward();
    close(
        &host(lp.grad(&g).unwrap()),
        &c["grads"]["logp"],
        "online grad logp",
    );
    close(
        &host(on.grad(&g).unwrap()),
        &c["grads"]["logits_on"],
        "online grad logits",
    );
}

#[test]
fn sampled_kl_estimators_match() {
    for name in ["k1", "k3"] {
        let c = case(name);
        let (i, d) = (&c["inputs"], dev());
        let a = leaf::<2>(&i["logp_on"], &d);
        let (b, m) = (t(&i["logp_off"], &d), t(&i["mask"], &d));
        let anchor = if name == "k1" {
            KlAnchor::K1 {
                logp_on: a.clone(),
                logp_off: b,
                mask: m,
            }
        } else {
            KlAnchor::K3 {
                logp_on: a.clone(),
                logp_off: b,
                mask: m,
            }
        };
        let (v, _) = anchor.value().unwrap();
        close(&[scalar(v.clone())], &c["loss"], name);
        let g = v.backward();
        close(&host(a.grad(&g).unwrap()), &c["grads"]["logp_on"], name);
    }
}
