//! The paper's Table-1 claims read against a run: each with the numbers measured here and a
//! verdict — *holds*, *does not hold*, or *no power* — from an interval, never from means
//! alone.
//!
//! | Claim | Units resampled | Interval |
//! |---|---|---|
//! | (a) Multi² > Glider > flat (SFT, GRPO) > prompting (ReAct, Reflexion, ADaPT), per ID column | (task, seed) pairs both levels of a link played | paired bootstrap of each link's Δ success (a level is the mean of its methods on the pairs all of them played) |
//! | (b) OOD below ID, per environment | tasks (mean over methods and seeds), ID and OOD apart | two-sample bootstrap of OOD − ID |
//! | (c) Multi² flat over Easy → Hard; the others fall | (column, task) of the ID columns, Easy and Hard apart | two-sample bootstrap of Hard − Easy; "flat" = within ±[`FLAT_BOUND`] points |
//! | (d) token efficiency Multi² > Glider > GRPO > Reflexion > ADaPT | (task, seed) pairs of the efficiency column that every method played | joint bootstrap of each link's Δ (successes per 1000 tokens) |
//! | (e) ablations: swap worst, vanilla-IQL lower tail, vanilla-AWAC more variance, released code below Multi², per split | training seeds | paired t over seeds; the tail by bootstrap over ≥ 5 seeds; variance by the F ratio |
//!
//! A comparison whose every episode fails on both sides has no power, whatever its interval.

use std::collections::BTreeMap;

use hier_envs::Split;
use hier_train::metrics::{
    PAIRED_RESAMPLES, PairedDifference, Terciles, bootstrap_interval, paired_on_shared_keys,
    paired_t, show_paired, two_sample_bootstrap, verdict, verdict_small,
};
use serde::Serialize;

use crate::envs::{EnvKind, split_label};
use crate::table1::profile::{Ablation, Method};
use crate::table1::results::{AblationCell, Cell, success_points as success};

/// "Flat across difficulty": Hard − Easy within this many success points.
pub const FLAT_BOUND: f64 = 10.0;

/// One claim: what the paper says, what we measured, and how the interval reads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Claim {
    /// The paper's claim, with the column or split it is read on.
    pub claim: String,
    pub measured: String,
    pub verdict: String,
}

/// Every claim the run's cells can speak to (none for methods or columns that did not run:
/// their rows say "not measured").
pub fn claims(cells: &[Cell], ablations: &[AblationCell]) -> Vec<Claim> {
    let mut out = Vec::new();
    for (env, split) in crate::envs::columns().filter(|(_, s)| *s == Split::Id) {
        if cells.iter().any(|c| c.env == env && c.split == split) {
            out.push(ordering(cells, env, split));
        }
    }
    for (env, _) in crate::envs::columns().filter(|(_, s)| *s == Split::Ood) {
        if cells.iter().any(|c| c.env == env && c.split == Split::Ood) {
            out.push(ood_below_id(cells, env));
        }
    }
    out.extend(difficulty(cells));
    if let Some(c) = efficiency(cells) {
        out.push(c);
    }
    for split in [Split::Id, Split::Ood] {
        if ablations.iter().any(|c| c.split == split) {
            out.extend(ablation_claims(ablations, split));
        }
    }
    out
}

/// The claims as a markdown section.
pub fn section(claims: &[Claim]) -> String {
    let mut md = String::from(
        "\n## The paper's claims against this run\n\nEach verdict reads a 95 % interval (see the notes under the table): *holds* when it excludes the other side, *does not hold* when it lies on the other side, *no power* otherwise.\n\n| Claim | Measured | Verdict |\n|---|---|---|\n",
    );
    for c in claims {
        md.push_str(&format!(
            "| {} | {} | {} |\n",
            c.claim, c.measured, c.verdict
        ));
    }
    md.push_str(&format!(
        "\nIntervals: (a) paired bootstrap over the (task, seed) pairs both levels of a link played, a level being the mean of its methods on the pairs all of them played; (b) two-sample bootstrap over tasks (each task's success averaged over methods and seeds); (c) two-sample bootstrap over (column, task) units of the ID columns, difficulty = tercile of the expert's path length in the column, \"flat\" = Hard − Easy within ±{FLAT_BOUND} points; (d) bootstrap over the (task, seed) pairs every method of the chain played, of successes per 1000 tokens; (e) t-intervals over training seeds paired by seed, the lower tail (25 % quantile) by bootstrap over seeds (≥ 5 seeds), the variance by the one-sided 95 % F ratio. {PAIRED_RESAMPLES} resamples, seed 0.\n"
    ));
    md
}

/// Success (0 / 100) of every episode of `m` on a column, keyed by (task, seed).
fn success_of(cells: &[Cell], m: Method, env: EnvKind, split: Split) -> Option<Keyed> {
    cells
        .iter()
        .find(|c| c.method == m && c.env == env && c.split == split)
        .map(|c| c.keyed(success))
}

type Keyed = BTreeMap<(String, u64), f64>;

/// The keys every map holds, in key order (Reflexion plays two of the others' three
/// evaluation seeds, so methods' (task, seed) sets can differ).
fn shared_keys<K: Ord, V>(maps: &[BTreeMap<K, V>]) -> Vec<&K> {
    maps.first().map_or(Vec::new(), |first| {
        (first.keys())
            .filter(|k| maps.iter().all(|m| m.contains_key(*k)))
            .collect()
    })
}

/// The mean of the methods' values on each key all of them hold; `None` when none ran or
/// they share no key.
fn group(maps: &[Keyed]) -> Option<Keyed> {
    let mean: Keyed = (shared_keys(maps).into_iter())
        .map(|k| {
            let v = maps.iter().map(|m| m[k]).sum::<f64>() / maps.len() as f64;
            (k.clone(), v)
        })
        .collect();
    (!mean.is_empty()).then_some(mean)
}

fn all_zero<'a>(maps: impl IntoIterator<Item = &'a Keyed>) -> bool {
    maps.into_iter().all(|m| m.values().all(|&v| v == 0.0))
}

/// Several links' verdicts as one: holds when every link holds, does not hold when any link
/// does not (named), no power otherwise.
fn chain(links: &[(&str, &Option<PairedDifference>)]) -> String {
    let reads: Vec<(&str, &str)> = links.iter().map(|(n, d)| (*n, verdict(d, true))).collect();
    if let Some((name, _)) = reads.iter().find(|(_, v)| *v == "does not hold") {
        return format!("does not hold ({name} is reversed)");
    }
    if reads.iter().all(|(_, v)| *v == "holds") {
        return "holds".into();
    }
    let weak: Vec<&str> = reads
        .iter()
        .filter(|(_, v)| *v != "holds")
        .map(|(n, _)| *n)
        .collect();
    format!(
        "no power ({} covers 0 or was not measured)",
        weak.join(", ")
    )
}

/// (a) Multi² > Glider > flat methods > prompting on one ID column. A level some of whose
/// methods have not run is the mean of those that have, and says which are missing; the claim
/// then cannot hold (it is about every method), but a reversed link among those that ran
/// still refutes it.
fn ordering(cells: &[Cell], env: EnvKind, split: Split) -> Claim {
    let level = |name: &str, ms: &[Method]| {
        let (mut ran, mut maps, mut missing) = (Vec::new(), Vec::new(), Vec::new());
        for &m in ms {
            match success_of(cells, m, env, split) {
                Some(keyed) => {
                    ran.push(m.label());
                    maps.push(keyed);
                }
                None => missing.push(m),
            }
        }
        let label = if missing.is_empty() || ran.is_empty() {
            name.to_owned()
        } else {
            format!("{name} [{} only]", ran.join(", "))
        };
        (label, group(&maps), missing)
    };
    let levels = [
        level("Multi²", &[Method::Multi2]),
        level("Glider", &[Method::Glider]),
        level("flat", &[Method::FlatSft, Method::Grpo]),
        level(
            "prompting",
            &[Method::React, Method::Reflexion, Method::Adapt],
        ),
    ];
    let links: Vec<(String, Option<PairedDifference>)> = levels
        .windows(2)
        .map(|w| {
            let d = match (&w[0].1, &w[1].1) {
                (Some(hi), Some(lo)) => paired_on_shared_keys(lo, hi),
                _ => None,
            };
            (format!("{} − {}", w[0].0, w[1].0), d)
        })
        .collect();
    let measured = links
        .iter()
        .map(|(n, d)| format!("{n}: {}", show_paired(d, 1)))
        .collect::<Vec<_>>()
        .join("; ");
    let missing: Vec<&str> = levels
        .iter()
        .flat_map(|(_, _, m)| m.iter().map(|m| m.label()))
        .collect();
    let ran: Vec<&Keyed> = levels.iter().filter_map(|(_, m, _)| m.as_ref()).collect();
    let verdict = if missing.is_empty() && all_zero(ran) {
        "no power (every method at 0 %)".to_owned()
    } else {
        let named: Vec<(&str, &Option<PairedDifference>)> =
            links.iter().map(|(n, d)| (n.as_str(), d)).collect();
        let read = chain(&named);
        if missing.is_empty() || read.starts_with("does not hold") {
            read
        } else {
            format!("no power ({} not run)", missing.join(", "))
        }
    };
    Claim {
        claim: format!(
            "(a) Multi² > Glider > flat (SFT, GRPO) > prompting (ReAct, Reflexion, ADaPT) on {}",
            env.column_label(split)
        ),
        measured: format!("Δ success points [95 %] — {measured}"),
        verdict,
    }
}

/// Per task of a column: success averaged over every method and seed that played it.
fn task_means<'a>(cells: impl Iterator<Item = &'a Cell>) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for r in cells.flat_map(|c| &c.results) {
        let e = sums.entry(r.task.to_string()).or_default();
        e.0 += success(r);
        e.1 += 1;
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .collect()
}

/// (b) OOD below ID on one environment, over every method.
fn ood_below_id(cells: &[Cell], env: EnvKind) -> Claim {
    let at = |split| task_means(cells.iter().filter(|c| c.env == env && c.split == split));
    let (id, ood) = (at(Split::Id), at(Split::Ood));
    let (id, ood): (Vec<f64>, Vec<f64>) = (id.into_values().collect(), ood.into_values().collect());
    let d = two_sample_bootstrap(&id, &ood);
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    let floor = id.iter().chain(&ood).all(|&v| v == 0.0);
    Claim {
        claim: format!("(b) OOD below ID on {env} (every method)"),
        measured: format!(
            "ID {:.1} % ({} tasks), OOD {:.1} % ({} tasks); OOD − ID {}",
            mean(&id),
            id.len(),
            mean(&ood),
            ood.len(),
            show_paired(&d, 1)
        ),
        verdict: if floor {
            "no power (every method at 0 %)".into()
        } else {
            verdict(&d, false).into()
        },
    }
}

/// (c) Per (column, task) of the ID columns, the mean success of `methods` by difficulty
/// (the tercile of the task's expert path length within its column).
fn by_difficulty(cells: &[Cell], methods: &[Method]) -> [Vec<f64>; 3] {
    let mut out: [Vec<f64>; 3] = Default::default();
    for (env, split) in crate::envs::columns().filter(|(_, s)| *s == Split::Id) {
        let here: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.env == env && c.split == split && methods.contains(&c.method))
            .collect();
        let lengths: BTreeMap<String, usize> = here
            .iter()
            .flat_map(|c| &c.results)
            .filter_map(|r| Some((r.task.to_string(), r.expert_steps?)))
            .collect();
        let Some(t) = Terciles::of(&lengths.values().copied().collect::<Vec<_>>()) else {
            continue;
        };
        for (task, mean) in task_means(here.into_iter()) {
            if let Some(&len) = lengths.get(&task) {
                out[t.classify(len) as usize].push(mean);
            }
        }
    }
    out
}

/// (c) Multi² stays flat from Easy to Hard; the other methods fall.
fn difficulty(cells: &[Cell]) -> Vec<Claim> {
    let others: Vec<Method> = Method::ALL
        .iter()
        .copied()
        .filter(|m| *m != Method::Multi2 && cells.iter().any(|c| c.method == *m))
        .collect();
    let mut out = Vec::new();
    for (who, methods, flat) in [
        ("Multi²", vec![Method::Multi2], true),
        ("the other methods", others, false),
    ] {
        let [easy, medium, hard] = by_difficulty(cells, &methods);
        if easy.is_empty() && hard.is_empty() {
            continue;
        }
        let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
        let d = two_sample_bootstrap(&easy, &hard);
        let floor = easy.iter().chain(&medium).chain(&hard).all(|&v| v == 0.0);
        // "Flat" within ±FLAT_BOUND says nothing when Easy itself is below the bound: a fall
        // to 0 would read as flat too.
        let below_bound = mean(&easy) < FLAT_BOUND;
        out.push(Claim {
            claim: if flat {
                format!("(c) {who} flat from Easy to Hard (ID columns)")
            } else {
                format!("(c) {who} fall from Easy to Hard (ID columns, pooled)")
            },
            measured: format!(
                "Easy / Medium / Hard {:.1} / {:.1} / {:.1} % ({} / {} / {} tasks); Hard − Easy {}",
                mean(&easy),
                mean(&medium),
                mean(&hard),
                easy.len(),
                medium.len(),
                hard.len(),
                show_paired(&d, 1)
            ),
            verdict: match (floor, flat) {
                (true, _) => "no power (0 % at every difficulty)".into(),
                (false, true) if below_bound => format!(
                    "no power (Easy below the ±{FLAT_BOUND}-point bound: a fall to 0 would read as flat)"
                ),
                (false, true) => verdict_small(&d, FLAT_BOUND),
                (false, false) => verdict(&d, false).into(),
            },
        });
    }
    out
}

/// (d) The token-efficiency ordering of the paper's figure (ScienceWorld ID; else the first ID
/// column that ran): each link's difference in successes per 1000 tokens, all methods
/// resampled on the (task, seed) pairs every one of them played.
fn efficiency(cells: &[Cell]) -> Option<Claim> {
    const ORDER: [Method; 5] = [
        Method::Multi2,
        Method::Glider,
        Method::Grpo,
        Method::Reflexion,
        Method::Adapt,
    ];
    let (env, split) = crate::envs::columns()
        .filter(|(_, s)| *s == Split::Id)
        .find(|(e, s)| cells.iter().any(|c| c.env == *e && c.split == *s))?;
    let ran: Vec<(Method, &Cell)> = ORDER
        .iter()
        .filter_map(|m| {
            cells
                .iter()
                .find(|c| c.method == *m && c.env == env && c.split == split)
                .map(|c| (*m, c))
        })
        .collect();
    // Per method, (success, tokens) of each (task, seed) pair it played.
    let keyed: Vec<BTreeMap<(String, u64), (f64, f64)>> = ran
        .iter()
        .map(|(_, c)| {
            c.results
                .iter()
                .map(|r| {
                    let v = (if r.success { 1.0 } else { 0.0 }, r.tokens as f64);
                    ((r.task.to_string(), r.seed), v)
                })
                .collect()
        })
        .collect();
    // The pairs every method played, in one key order: row i of every method is one pair.
    let shared = shared_keys(&keyed);
    let rows: Vec<Vec<(f64, f64)>> = keyed
        .iter()
        .map(|m| shared.iter().map(|k| m[*k]).collect())
        .collect();
    let per_k = |xs: &[(f64, f64)], idx: &[usize]| {
        let (s, t) = idx
            .iter()
            .fold((0.0, 0.0), |(s, t), &i| (s + xs[i].0, t + xs[i].1));
        if t > 0.0 { 1000.0 * s / t } else { 0.0 }
    };
    let all: Vec<usize> = (0..rows.first().map_or(0, Vec::len)).collect();
    let mut links = Vec::new();
    let mut measured = Vec::new();
    for (i, (m, _)) in ran.iter().enumerate() {
        measured.push(format!("{} {:.3}", m.label(), per_k(&rows[i], &all)));
    }
    for i in 1..ran.len() {
        let d = bootstrap_interval(all.len(), PAIRED_RESAMPLES, 0, |idx| {
            per_k(&rows[i - 1], idx) - per_k(&rows[i], idx)
        });
        links.push((
            format!("{} − {}", ran[i - 1].0.label(), ran[i].0.label()),
            d,
        ));
    }
    let floor = rows.iter().flatten().all(|(s, _)| *s == 0.0);
    let named: Vec<(&str, &Option<PairedDifference>)> =
        links.iter().map(|(n, d)| (n.as_str(), d)).collect();
    Some(Claim {
        claim: format!(
            "(d) token efficiency Multi² > Glider > GRPO > Reflexion > ADaPT on {} (paper: 4.48 / 3.36 / 1.89 / 1.01 / 0.66 × ReAct)",
            env.column_label(split)
        ),
        measured: if ran.is_empty() {
            "none of these methods ran".into()
        } else {
            format!(
                "successes per 1000 tokens: {}{}",
                measured.join(", "),
                if links.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; Δ {}",
                        links
                            .iter()
                            .map(|(n, d)| format!("{n} {}", show_paired(d, 3)))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                }
            )
        },
        verdict: if ran.len() < ORDER.len() {
            "no power (not every method ran)".into()
        } else if floor {
            "no power (every method at 0 %)".into()
        } else {
            chain(&named)
        },
    })
}

/// One-sided 95 % quantiles of F(k, k) for k = 1..=9 (`F(k, k)` with equal degrees of freedom:
/// the variance ratio of two variants over the same number of seeds).
const F95_EQUAL_DF: [f64; 9] = [
    161.45, 19.0, 9.277, 6.388, 5.050, 4.284, 3.787, 3.438, 3.179,
];

/// (e) The ablation claims on one split, over training seeds.
fn ablation_claims(cells: &[AblationCell], split: Split) -> Vec<Claim> {
    // Per variant: success per training seed, in seed order.
    let mut per: BTreeMap<Ablation, BTreeMap<u64, f64>> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.split == split) {
        per.entry(c.variant)
            .or_default()
            .insert(c.seed, c.summary.success.mean);
    }
    let seeds_of = |v: Ablation| per.get(&v).map(|m| m.values().copied().collect::<Vec<_>>());
    let same_seeds = |a: Ablation, b: Ablation| match (per.get(&a), per.get(&b)) {
        (Some(x), Some(y)) => x.keys().eq(y.keys()),
        _ => false,
    };
    let paired = |a: Ablation, b: Ablation| -> Option<PairedDifference> {
        same_seeds(a, b)
            .then(|| paired_t(&seeds_of(a)?, &seeds_of(b)?))
            .flatten()
    };
    let show = |v: Ablation| {
        seeds_of(v).map_or("not run".into(), |xs| {
            xs.iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let floor = per.values().flat_map(|m| m.values()).all(|&v| v == 0.0);
    let at_floor = |v: String| {
        if floor {
            "no power (every variant at 0 %)".into()
        } else {
            v
        }
    };
    let mut out = Vec::new();

    // Paradigm swap worst: every other variant above it.
    let others: Vec<Ablation> = per
        .keys()
        .copied()
        .filter(|v| *v != Ablation::ParadigmSwap)
        .collect();
    let links: Vec<(String, Option<PairedDifference>)> = others
        .iter()
        .map(|v| {
            (
                format!("{} − swap", v.name()),
                paired(Ablation::ParadigmSwap, *v),
            )
        })
        .collect();
    let named: Vec<(&str, &Option<PairedDifference>)> =
        links.iter().map(|(n, d)| (n.as_str(), d)).collect();
    out.push(Claim {
        claim: format!(
            "(e) paradigm swap is the worst variant ({})",
            split_label(split)
        ),
        measured: format!(
            "swap per seed {}; {}",
            show(Ablation::ParadigmSwap),
            links
                .iter()
                .map(|(n, d)| format!("{n} {}", show_paired(d, 1)))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        verdict: if per.contains_key(&Ablation::ParadigmSwap) && !others.is_empty() {
            at_floor(chain(&named))
        } else {
            "no power (not measured)".into()
        },
    });

    // Vanilla IQL: a lower tail (25 % quantile over seeds) than Multi².
    let tail = match (seeds_of(Ablation::Multi2), seeds_of(Ablation::VanillaIql)) {
        (Some(m), Some(i)) if same_seeds(Ablation::Multi2, Ablation::VanillaIql) => {
            let q = |xs: &[f64], idx: &[usize]| {
                let mut v: Vec<f64> = idx.iter().map(|&k| xs[k]).collect();
                v.sort_by(f64::total_cmp);
                v[(v.len() - 1) / 4]
            };
            let d = bootstrap_interval(m.len(), PAIRED_RESAMPLES, 0, |idx| q(&i, idx) - q(&m, idx));
            let v = if m.len() < 5 {
                format!("no power ({} training seeds; a tail needs ≥ 5)", m.len())
            } else {
                verdict(&d, false).into()
            };
            (show_paired(&d, 1), at_floor(v))
        }
        _ => ("–".into(), "no power (not measured)".into()),
    };
    out.push(Claim {
        claim: format!(
            "(e) vanilla-IQL has a lower tail than Multi² ({})",
            split_label(split)
        ),
        measured: format!(
            "per seed: Multi² {}, vanilla-IQL {}; Δ 25 % quantile {}",
            show(Ablation::Multi2),
            show(Ablation::VanillaIql),
            tail.0
        ),
        verdict: tail.1,
    });

    // Vanilla AWAC: more variance over seeds than Multi² (one-sided F ratio).
    let var = |xs: &[f64]| {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64
    };
    let spread = match (seeds_of(Ablation::Multi2), seeds_of(Ablation::VanillaAwac)) {
        (Some(m), Some(a))
            if same_seeds(Ablation::Multi2, Ablation::VanillaAwac) && m.len() >= 2 =>
        {
            let (vm, va) = (var(&m), var(&a));
            let f = F95_EQUAL_DF.get(m.len() - 2).copied();
            let v = match f {
                _ if vm == 0.0 && va == 0.0 => "no power (no variance in either)".to_owned(),
                None => "no power (more seeds than the F table holds)".to_owned(),
                Some(f) if vm == 0.0 || va / vm > f => "holds".to_owned(),
                Some(f) if va == 0.0 || vm / va > f => "does not hold".to_owned(),
                Some(f) => format!("no power (ratio within [1/{f:.1}, {f:.1}])"),
            };
            (
                format!("sd Multi² {:.1}, vanilla-AWAC {:.1}", vm.sqrt(), va.sqrt()),
                at_floor(v),
            )
        }
        _ => ("–".into(), "no power (not measured)".into()),
    };
    out.push(Claim {
        claim: format!(
            "(e) vanilla-AWAC varies more over seeds than Multi² ({})",
            split_label(split)
        ),
        measured: format!(
            "per seed: Multi² {}, vanilla-AWAC {}; {}",
            show(Ablation::Multi2),
            show(Ablation::VanillaAwac),
            spread.0
        ),
        verdict: spread.1,
    });

    // The released code's behaviour below Multi².
    let d = paired(Ablation::Multi2, Ablation::ReleasedCode);
    out.push(Claim {
        claim: format!(
            "(e) the released code's behaviour below Multi² ({})",
            split_label(split)
        ),
        measured: format!(
            "per seed: Multi² {}, released-code {}; released − Multi² {}",
            show(Ablation::Multi2),
            show(Ablation::ReleasedCode),
            show_paired(&d, 1)
        ),
        verdict: at_floor(verdict(&d, false).into()),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hier_envs::Task;
    use hier_train::eval::{EpisodeResult, summarise};

    /// Episodes of `method` on a column: tasks 0..n, seeds 0..2, success and tokens by hand.
    fn cell(
        method: Method,
        env: EnvKind,
        split: Split,
        n: usize,
        won: impl Fn(usize, u64) -> bool,
        tokens: usize,
    ) -> Cell {
        let results: Vec<EpisodeResult> = (0..n)
            .flat_map(|t| (0..2u64).map(move |s| (t, s)))
            .map(|(t, s)| EpisodeResult {
                task: Task::new(format!("{split:?}-{t}"), t as u64),
                seed: s,
                success: won(t, s),
                score: 0.0,
                steps: 1,
                tokens,
                sys1_calls: 0,
                // Lengths 1..=n: terciles split the tasks in order.
                expert_steps: Some(t + 1),
                pass1: None,
            })
            .collect();
        Cell::new(method, env, split, results)
    }

    fn find<'a>(cs: &'a [Claim], start: &str) -> &'a Claim {
        cs.iter()
            .find(|c| c.claim.starts_with(start))
            .unwrap_or_else(|| panic!("no claim `{start}` in {cs:#?}"))
    }

    /// By hand: on 30 tasks × 2 seeds Multi² wins every pair, Glider the first 20 tasks,
    /// the flat methods the first 10, prompting none: every link is +33.3 points with a
    /// positive interval, so (a) holds; reversing Glider and Multi² makes it not hold.
    /// Multi² wins everywhere (flat over difficulty: holds); the others win only easy tasks
    /// (they fall: holds). OOD (every method 0 %) lies below ID.
    #[test]
    fn claims_read_by_hand_computed_cells() {
        let (e, id) = (EnvKind::Textcraft, Split::Id);
        let mk = |m, won: fn(usize, u64) -> bool| cell(m, e, id, 30, won, 100);
        let mut cells = vec![
            mk(Method::Multi2, |_, _| true),
            mk(Method::Glider, |t, _| t < 20),
            mk(Method::FlatSft, |t, _| t < 10),
            mk(Method::Grpo, |t, _| t < 10),
            mk(Method::React, |_, _| false),
            mk(Method::Reflexion, |_, _| false),
            mk(Method::Adapt, |_, _| false),
        ];
        let cs = claims(&cells, &[]);
        let a = find(&cs, "(a)");
        assert_eq!(a.verdict, "holds", "{a:?}");
        assert!(a.measured.contains("Multi² − Glider: +33.3"), "{a:?}");
        assert!(a.measured.contains("Glider − flat: +33.3"), "{a:?}");
        assert!(a.measured.contains("flat − prompting: +33.3"), "{a:?}");
        let c = find(&cs, "(c) Multi²");
        assert_eq!(c.verdict, "holds", "{c:?}");
        assert!(c.measured.contains("100.0 / 100.0 / 100.0"), "{c:?}");
        // The others, pooled per task over six methods: Easy (tasks 0–9) won by Glider, SFT
        // and GRPO: 3/6 = 50 %; Medium (10–19) by Glider alone: 16.7 %; Hard (20–29): 0 %.
        let o = find(&cs, "(c) the other");
        assert!(
            o.measured
                .contains("Easy / Medium / Hard 50.0 / 16.7 / 0.0"),
            "{o:?}"
        );
        assert_eq!(o.verdict, "holds");
        // (d): every method spends 100 tokens per episode: per 1000 tokens, Multi² 10,
        // Glider 6.667, GRPO 3.333, Reflexion 0, ADaPT 0: the last link is 0 (no power).
        let d = find(&cs, "(d)");
        assert!(d.measured.contains("Multi² 10.000"), "{d:?}");
        assert!(
            d.verdict.starts_with("no power (Reflexion − ADaPT"),
            "{d:?}"
        );

        cells[0] = mk(Method::Multi2, |t, _| t < 5);
        let a = find(&claims(&cells, &[]), "(a)").clone();
        assert_eq!(a.verdict, "does not hold (Multi² − Glider is reversed)");

        // Without GRPO and ADaPT: the flat level is flat SFT's (wins tasks 0–9: +33.3 over
        // prompting), the prompting level ReAct's and Reflexion's; the links are read among
        // those, but the claim cannot hold with methods missing — and a reversed link still
        // refutes it.
        let partial: Vec<Cell> = (cells.iter())
            .filter(|c| !matches!(c.method, Method::Grpo | Method::Adapt))
            .cloned()
            .collect();
        let a = find(&claims(&partial, &[]), "(a)").clone();
        assert!(
            a.measured
                .contains("flat [Flat SFT only] − prompting [ReAct, Reflexion only]: +33.3"),
            "{a:?}"
        );
        assert_eq!(a.verdict, "does not hold (Multi² − Glider is reversed)");
        let mut partial = partial;
        partial[0] = mk(Method::Multi2, |_, _| true);
        let a = find(&claims(&partial, &[]), "(a)").clone();
        assert_eq!(a.verdict, "no power (GRPO, ADaPT not run)", "{a:?}");

        // Reflexion on seed 0 only (its two evaluation seeds against the others' three),
        // winning tasks 0–9 there: the prompting level is the mean of ReAct, Reflexion and
        // ADaPT on the 30 seed-0 pairs all three played (1/3 on tasks 0–9, else 0); the flat
        // level wins tasks 0–9 on both seeds, so flat − prompting on the 30 pairs both levels
        // played is 10 · (1 − 1/3) / 30 = +22.2 points, while Multi² − Glider keeps its 60.
        let mut subset = cells.clone();
        subset[0] = mk(Method::Multi2, |_, _| true);
        let only_seed0 = mk(Method::Reflexion, |t, s| s == 0 && t < 10);
        let results = only_seed0.results.into_iter().filter(|r| r.seed == 0);
        subset[5] = Cell::new(Method::Reflexion, e, id, results.collect());
        let cs = claims(&subset, &[]);
        let a = find(&cs, "(a)");
        assert!(a.measured.contains("Multi² − Glider: +33.3"), "{a:?}");
        assert!(a.measured.contains("flat − prompting: +22.2"), "{a:?}");
        assert_eq!(a.verdict, "holds", "{a:?}");
        // (d) on the 30 pairs every method played: Reflexion 10 of 30 at 100 tokens each.
        let d = find(&cs, "(d)");
        assert!(d.measured.contains("Reflexion 3.333"), "{d:?}");
        assert!(d.measured.contains("Multi² 10.000"), "{d:?}");

        // (b): ScienceWorld with Multi² alone: ID solves half the tasks, OOD none.
        let s = EnvKind::Scienceworld;
        let b = claims(
            &[
                cell(Method::Multi2, s, Split::Id, 20, |t, _| t % 2 == 0, 10),
                cell(Method::Multi2, s, Split::Ood, 20, |_, _| false, 10),
            ],
            &[],
        );
        let b = find(&b, "(b)");
        assert!(
            b.measured
                .starts_with("ID 50.0 % (20 tasks), OOD 0.0 % (20 tasks); OOD − ID -50.0"),
            "{b:?}"
        );
        assert_eq!(b.verdict, "holds");
        // Multi² solves task 0 once (Easy, tasks 0–9: 5 %) and nothing else: within ±10
        // points, but Easy itself is below the bound, so a fall could not show: no power, not
        // "holds".
        let low = claims(&[mk(Method::Multi2, |t, s| t == 0 && s == 0)], &[]);
        assert_eq!(
            find(&low, "(c) Multi²").verdict,
            "no power (Easy below the ±10-point bound: a fall to 0 would read as flat)"
        );
        // Every method at 0 %: no power, whatever the (zero-width) interval says.
        let zero = claims(&[mk(Method::Multi2, |_, _| false)], &[]);
        assert_eq!(
            find(&zero, "(c) Multi²").verdict,
            "no power (0 % at every difficulty)"
        );
        // (d) with ReAct alone (the normaliser, not in the chain): says so, no empty lists;
        // with Multi² alone: its number, no links.
        let react = claims(&[mk(Method::React, |_, _| false)], &[]);
        let d = find(&react, "(d)");
        assert_eq!(d.measured, "none of these methods ran");
        assert_eq!(d.verdict, "no power (not every method ran)");
        let d = find(&zero, "(d)");
        assert_eq!(
            d.measured, "successes per 1000 tokens: Multi² 0.000",
            "{d:?}"
        );
    }

    /// By hand over three training seeds: swap 0, 0, 0 and Multi² 50, 60, 70 (differences 50,
    /// 60, 70: mean 60 ± 4.303·10/√3 = ±24.8, positive) — the swap is worst; released code
    /// 10, 20, 30 lies below Multi² by exactly 40 on every seed (zero-width interval): holds;
    /// AWAC 0, 60, 120 has sd 60 against Multi²'s 10: F = 36 > 19.0, holds; the tail needs ≥ 5
    /// seeds.
    #[test]
    fn ablation_claims_read_over_training_seeds() {
        let ab = |variant, seed: u64, success: f64| {
            let mut summary = summarise(&[]);
            summary.success.mean = success;
            AblationCell {
                variant,
                seed,
                env: EnvKind::Scienceworld,
                split: Split::Id,
                summary,
                results: Vec::new(),
            }
        };
        let mut cells = Vec::new();
        for (s, (m2, rel, awac)) in [(50.0, 10.0, 0.0), (60.0, 20.0, 60.0), (70.0, 30.0, 120.0)]
            .into_iter()
            .enumerate()
        {
            let s = s as u64;
            cells.push(ab(Ablation::Multi2, s, m2));
            cells.push(ab(Ablation::ParadigmSwap, s, 0.0));
            cells.push(ab(Ablation::ReleasedCode, s, rel));
            cells.push(ab(Ablation::VanillaAwac, s, awac));
            cells.push(ab(Ablation::VanillaIql, s, m2));
        }
        let cs = claims(&[], &cells);
        let swap = find(&cs, "(e) paradigm swap");
        assert!(
            swap.measured.contains("multi2 − swap +60.0 [+35.2, +84.8]"),
            "{swap:?}"
        );
        // AWAC − swap: 0, 60, 120 → mean 60, s 60: 60 ± 4.303·60/√3 covers 0.
        assert!(
            swap.verdict.starts_with("no power (vanilla-awac − swap"),
            "{swap:?}"
        );
        assert_eq!(find(&cs, "(e) the released").verdict, "holds");
        assert!(
            find(&cs, "(e) the released")
                .measured
                .ends_with("-40.0 [-40.0, -40.0]")
        );
        let awac = find(&cs, "(e) vanilla-AWAC");
        assert_eq!(awac.verdict, "holds", "{awac:?}");
        assert!(
            awac.measured.ends_with("sd Multi² 10.0, vanilla-AWAC 60.0"),
            "{awac:?}"
        );
        assert_eq!(
            find(&cs, "(e) vanilla-IQL").verdict,
            "no power (3 training seeds; a tail needs ≥ 5)"
        );
    }
}
