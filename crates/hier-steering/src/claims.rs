//! The paper's claims about steering the search executor (METHODS.md B), read from a run:
//! each with our numbers and a verdict (holds / does not hold / no power), from paired
//! differences on the same (question, seed) pairs where the claim compares two rows.

use crate::profile::{SteerMethod, SteeringProfile};
use crate::report::{Row, f1_difference, main_rows, sweep_rows};
use crate::results::{Evaluation, SteeringRun};
use hier_train::metrics::{show_paired, verdict, verdict_small};

/// "τ is monotone in interventions" over `(τ, interventions per task)` in ascending τ: each
/// higher τ intervenes no more often (point estimates).
pub(crate) fn tau_monotone_claim(points: &[(Option<f64>, f64)]) -> (String, String, String) {
    let monotone = points.windows(2).all(|w| w[1].1 <= w[0].1 + 1e-12);
    let numbers = points
        .iter()
        .map(|(t, n)| match t {
            Some(t) => format!("{t:.2}: {n:.2}"),
            None => format!("–: {n:.2}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let verdict = if monotone {
        "holds (point estimates)"
    } else {
        "does not hold (point estimates)"
    };
    (
        "τ is monotone in interventions (higher τ, fewer)".into(),
        numbers,
        verdict.into(),
    )
}

/// The claims of METHODS.md B about steering the search executor, each with our numbers and
/// a verdict. Differences are paired on the same (question, seed) pairs; a comparison where
/// both rows score 0 on every question has no power, whatever its interval.
pub(crate) fn claims(
    p: &SteeringProfile,
    run: &SteeringRun,
    rows: &[Row],
) -> Vec<(String, String, String)> {
    let main_tau = |t: Option<f64>| t.is_none_or(|t| t == p.steer.tau);
    let eval = |m: SteerMethod, x: &str| {
        run.evaluations
            .iter()
            .find(|e| e.method == m && e.executor == x && main_tau(e.tau))
    };
    let zero = |e: &Evaluation| e.results.iter().all(|r| r.f1 == 0.0);
    let compare = |a: Option<&Evaluation>, b: Option<&Evaluation>| match (a, b) {
        (Some(a), Some(b)) => Some((f1_difference(a, b), zero(a) && zero(b))),
        _ => None,
    };
    let judged = |a, b, positive: bool| -> (String, String) {
        match compare(a, b) {
            None => ("–".into(), "no power (not measured)".into()),
            Some((d, true)) => (show_paired(&d, 2), "no power (F1 is 0 in both)".into()),
            Some((d, false)) => (show_paired(&d, 2), verdict(&d, positive).into()),
        }
    };
    let tau = |r: &Row| r.tau.map_or("–".into(), |t| format!("{t:.2}"));
    let mut out = Vec::new();
    let mut claim = |c: String, (ours, v): (String, String)| out.push((c, ours, v));
    let none = eval(SteerMethod::None, "main");
    let rl = eval(SteerMethod::Rl, "main");
    let small = match compare(none, eval(SteerMethod::ZeroShot, "main")) {
        None => ("–".into(), "no power (not measured)".into()),
        Some((d, true)) => (show_paired(&d, 2), "no power (F1 is 0 in both)".into()),
        Some((d, false)) => (show_paired(&d, 2), verdict_small(&d, 3.0)),
    };
    claim(
        "Zero-shot steering gains little (paper +1.84; read: within ±3 points)".into(),
        small,
    );
    claim(
        "RL steering helps (paper +6.66)".into(),
        judged(none, rl, true),
    );
    for (m, what) in [
        (SteerMethod::ZeroShot, "zero-shot steering"),
        (SteerMethod::Planning, "the planning supervisor"),
        (SteerMethod::Verification, "the verification supervisor"),
        (SteerMethod::FilteredBc, "filtered BC"),
    ] {
        claim(
            format!("RL steering above {what} (F1, RL − it)"),
            judged(eval(m, "main"), rl, true),
        );
    }
    let mains = main_rows(rows, p);
    if let Some(r) = mains.iter().find(|r| r.method == SteerMethod::Rl) {
        // Strictly fewer than every other row: a tie is not "the fewest".
        let fewest = mains
            .iter()
            .filter(|o| o.method != SteerMethod::Rl)
            .all(|o| r.turns_per_task < o.turns_per_task);
        claim(
            "RL steering leaves the fewest executor turns".into(),
            (
                format!(
                    "{:.2} turns/task; Δ vs none {}",
                    r.turns_per_task,
                    show_paired(&r.turns_change, 2)
                ),
                if fewest {
                    "holds (point estimates)"
                } else {
                    "does not hold (point estimates)"
                }
                .into(),
            ),
        );
    }
    let mut sweep = sweep_rows(rows);
    sweep.reverse(); // ascending τ
    if sweep.len() >= 2 {
        let (c, ours, v) = tau_monotone_claim(
            &sweep
                .iter()
                .map(|r| (r.tau, r.interventions_per_task))
                .collect::<Vec<_>>(),
        );
        claim(c, (ours, v));
        let per: Vec<(&Row, f64)> = sweep
            .iter()
            .filter_map(|r| r.gain_per_intervention.map(|g| (*r, g)))
            .collect();
        let numbers = per
            .iter()
            .map(|(r, g)| format!("τ {}: {g:+.2}", tau(r)))
            .collect::<Vec<_>>()
            .join(", ");
        let floor = sweep.iter().all(|r| r.f1 == 0.0) && none.is_some_and(zero);
        let fewest = per.iter().min_by(|a, b| {
            a.0.interventions_per_task
                .total_cmp(&b.0.interventions_per_task)
        });
        let best = per.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        let v = match (fewest, best) {
            _ if floor => "no power (F1 is 0 everywhere)",
            (Some(f), Some(b)) if per.len() >= 2 => {
                if f.0.tau == b.0.tau {
                    "holds (point estimates)"
                } else {
                    "does not hold (point estimates)"
                }
            }
            _ => "no power (fewer than two τ with interventions)",
        };
        claim(
            "Gain per intervention is highest at the lowest intervention frequency".into(),
            (numbers, v.into()),
        );
    }
    for x in &p.transfer {
        claim(
            format!(
                "RL steering transfers to executor `{}` without retraining (paper +5.92 to +15.78)",
                x.name
            ),
            judged(
                eval(SteerMethod::None, &x.name),
                eval(SteerMethod::Rl, &x.name),
                true,
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::rows;
    use crate::results::QaResult;
    use std::path::Path;

    /// Verdicts follow the paired intervals (by hand: constant differences have a zero-width
    /// interval at the difference), rows at the floor have no power, and what was not run is
    /// said to be unmeasured.
    #[test]
    fn claims_read_the_paired_intervals() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let p = SteeringProfile::from_file(&crate::profile::profile_path(&root, "smoke")).unwrap();
        assert_eq!(p.steer.tau, 0.5);
        let eval = |method, executor: &str, tau: Option<f64>, f1: f64, turns, interventions| {
            let results = (0..2u64)
                .flat_map(|seed| {
                    (0..10).map(move |q| QaResult {
                        task: hier_envs::Task::new("test", q),
                        seed,
                        hops: Some(1),
                        test_set: None,
                        f1,
                        em: f1,
                        answered: true,
                        turns,
                        interventions,
                        executor_tokens: 10,
                    })
                })
                .collect();
            Evaluation {
                method,
                executor: executor.into(),
                tau,
                results,
                slow_path_runs: 0,
            }
        };
        use SteerMethod as M;
        let run = SteeringRun {
            evaluations: vec![
                eval(M::None, "main", None, 0.0, 6, 0),
                eval(M::ZeroShot, "main", Some(0.5), 0.0, 6, 1),
                eval(M::Planning, "main", None, 0.5, 5, 1),
                eval(M::Verification, "main", None, 1.0, 4, 1),
                eval(M::Rl, "main", Some(0.5), 1.0, 3, 1),
                eval(M::Rl, "main", Some(0.3), 1.0, 3, 2),
                eval(M::Rl, "main", Some(0.7), 0.8, 3, 0),
                eval(M::None, "transfer", None, 0.5, 6, 0),
                eval(M::Rl, "transfer", Some(0.5), 0.2, 6, 1),
            ],
            curve: Vec::new(),
            bank_states: 0,
            wall_seconds: 0.0,
        };
        // τ 0.7 with no interventions has no gain per intervention: only 0.3 and 0.5 compare.
        let rows = rows(&run);
        let c = claims(&p, &run, &rows);
        let find = |what: &str| {
            c.iter()
                .find(|(claim, _, _)| claim.contains(what))
                .unwrap_or_else(|| panic!("no claim {what}: {c:?}"))
        };
        assert_eq!(find("Zero-shot").2, "no power (F1 is 0 in both)");
        let helps = find("RL steering helps");
        assert_eq!(
            (helps.1.as_str(), helps.2.as_str()),
            ("+100.00 [+100.00, +100.00]", "holds")
        );
        assert_eq!(find("above the planning").1, "+50.00 [+50.00, +50.00]");
        assert_eq!(find("above the planning").2, "holds");
        assert_eq!(
            find("above the verification").2,
            "no power (the interval covers 0)"
        );
        assert_eq!(find("above filtered BC").2, "no power (not measured)");
        assert_eq!(find("fewest executor turns").2, "holds (point estimates)");
        assert!(
            find("fewest executor turns")
                .1
                .contains("-3.00 [-3.00, -3.00]")
        );
        assert_eq!(find("monotone").1, "0.30: 2.00, 0.50: 1.00, 0.70: 0.00");
        assert_eq!(find("monotone").2, "holds (point estimates)");
        // τ 0.3: +100 / 2 = 50 per intervention; τ 0.5: +100 / 1 = 100, the fewer.
        assert_eq!(
            find("Gain per intervention").1,
            "τ 0.30: +50.00, τ 0.50: +100.00"
        );
        assert_eq!(find("Gain per intervention").2, "holds (point estimates)");
        assert_eq!(find("executor `transfer`").1, "-30.00 [-30.00, -30.00]");
        assert_eq!(find("executor `transfer`").2, "does not hold");
        assert_eq!(find("executor `smaller`").2, "no power (not measured)");
    }
}
