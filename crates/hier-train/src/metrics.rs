//! Evaluation arithmetic of the Multi² tables and figures: success rates with a 95 % interval
//! over seeds, success by difficulty (terciles of expert path length), and token efficiency
//! (success per token, normalised to a reference method = 1).

use serde::{Deserialize, Serialize};

/// Two-sided 97.5 % quantiles of Student's t for 1–30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Two-sided 97.5 % quantile of Student's t with `df ≥ 1` degrees of freedom: the table for
/// 1–30, beyond it the Cornish–Fisher expansion in `1/ν` about the normal quantile
/// `z = 1.959964` (Abramowitz & Stegun 26.7.5, four terms; within 2e-6 of the exact quantile
/// from 31 on). No degrees of freedom, no quantile: `NaN`.
pub fn t975(df: usize) -> f64 {
    if df == 0 {
        return f64::NAN;
    }
    if let Some(&t) = T975.get(df - 1) {
        return t;
    }
    let z = 1.959_963_984_540_054_f64;
    let v = df as f64;
    let g1 = (z.powi(3) + z) / 4.0;
    let g2 = (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / 96.0;
    let g3 = (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / 384.0;
    let g4 = (79.0 * z.powi(9) + 776.0 * z.powi(7) + 1482.0 * z.powi(5)
        - 1920.0 * z.powi(3)
        - 945.0 * z)
        / 92160.0;
    z + g1 / v + g2 / v.powi(2) + g3 / v.powi(3) + g4 / v.powi(4)
}

/// The mean of `values`; `None` when there are none.
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Mean and 95 % confidence half-width of per-seed values: `t₀.₉₇₅(n−1) · s / √n` with the
/// sample standard deviation `s` ([`t975`]). One value has no interval (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub mean: f64,
    pub half_width: Option<f64>,
    pub n: usize,
}

pub fn estimate(values: &[f64]) -> Estimate {
    let n = values.len();
    if n == 0 {
        return Estimate {
            mean: f64::NAN,
            half_width: None,
            n,
        };
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let half_width = (n > 1).then(|| {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let t = t975(n - 1);
        t * var.sqrt() / (n as f64).sqrt()
    });
    Estimate {
        mean,
        half_width,
        n,
    }
}

/// A paired comparison: the mean of per-item differences `b − a` (the same tasks and seeds
/// under two methods) with a 95 % percentile-bootstrap interval (items resampled with
/// replacement, `resamples` times, from `seed`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
}

impl PairedDifference {
    /// Whether the interval excludes 0.
    pub fn significant(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }

    /// `+mean [lo, hi]` with `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        format!(
            "{:+.digits$} [{:+.digits$}, {:+.digits$}]",
            self.mean, self.lo, self.hi
        )
    }
}

/// Bootstrap resamples of the reports' paired comparisons.
pub const PAIRED_RESAMPLES: usize = 2000;

/// [`PairedDifference`] of `b` over `a` on the keys (task, seed, …) both hold, from
/// [`PAIRED_RESAMPLES`] resamples with seed 0; `None` when they do not hold the same keys.
pub fn paired_by_key<K: Ord>(
    a: &std::collections::BTreeMap<K, f64>,
    b: &std::collections::BTreeMap<K, f64>,
) -> Option<PairedDifference> {
    if a.len() != b.len() || a.keys().ne(b.keys()) {
        return None;
    }
    paired_on_shared_keys(a, b)
}

/// [`PairedDifference`] of `b` over `a` on the keys both hold (`None` when they share none).
/// For methods that played different parts of one (task, seed) grid — Reflexion's two
/// evaluation seeds against the others' three — the pairs are the episodes both played, and
/// the result's `n` says how many. [`PAIRED_RESAMPLES`] resamples with seed 0.
pub fn paired_on_shared_keys<K: Ord>(
    a: &std::collections::BTreeMap<K, f64>,
    b: &std::collections::BTreeMap<K, f64>,
) -> Option<PairedDifference> {
    let (xs, ys): (Vec<f64>, Vec<f64>) = a
        .iter()
        .filter_map(|(k, x)| b.get(k).map(|y| (*x, *y)))
        .unzip();
    paired_bootstrap(&xs, &ys, PAIRED_RESAMPLES, 0)
}

/// A paired difference as `+m [lo, hi]`, `–` when there is none.
pub fn show_paired(d: &Option<PairedDifference>, digits: usize) -> String {
    d.map_or_else(|| "–".into(), |d| d.show(digits))
}

/// How a paired interval reads against a claimed direction (`positive`: b above a): the
/// claim holds when the interval excludes 0 on its side, does not when it excludes 0 on the
/// other, and has no power otherwise.
pub fn verdict(d: &Option<PairedDifference>, positive: bool) -> &'static str {
    match d {
        None => "no power (not measured)",
        Some(d) if (positive && d.lo > 0.0) || (!positive && d.hi < 0.0) => "holds",
        Some(d) if (positive && d.hi < 0.0) || (!positive && d.lo > 0.0) => "does not hold",
        Some(_) => "no power (the interval covers 0)",
    }
}

/// How a paired interval reads against "changes little": holds within ±`bound`, does not
/// beyond it, no power when the interval is wider.
pub fn verdict_small(d: &Option<PairedDifference>, bound: f64) -> String {
    match d {
        None => "no power (not measured)".into(),
        Some(d) if d.lo >= -bound && d.hi <= bound => "holds".into(),
        Some(d) if d.hi < -bound || d.lo > bound => "does not hold".into(),
        Some(_) => format!("no power (the interval is wider than ±{bound})"),
    }
}

/// [`PairedDifference`] of `b` over `a` (`None` when they differ in length or are empty).
pub fn paired_bootstrap(
    a: &[f64],
    b: &[f64],
    resamples: usize,
    seed: u64,
) -> Option<PairedDifference> {
    if a.len() != b.len() {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let n = d.len() as f64;
    bootstrap_interval(d.len(), resamples, seed, |idx| {
        idx.iter().map(|&i| d[i]).sum::<f64>() / n
    })
}

/// A statistic of `n` items with a 95 % percentile-bootstrap interval: `stat(0..n)` as the
/// estimate, `stat` of `resamples` draws of `n` indices with replacement (from `seed`) for the
/// interval (nearest-rank 2.5 % and 97.5 % order statistics). Items are the units resampled
/// together, e.g. (task, seed) pairs that several methods share. `None` when `n` or
/// `resamples` is 0.
pub fn bootstrap_interval(
    n: usize,
    resamples: usize,
    seed: u64,
    stat: impl Fn(&[usize]) -> f64,
) -> Option<PairedDifference> {
    use rand::{Rng, SeedableRng};
    if n == 0 || resamples == 0 {
        return None;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut idx = vec![0; n];
    let mut stats: Vec<f64> = (0..resamples)
        .map(|_| {
            idx.iter_mut().for_each(|i| *i = rng.random_range(0..n));
            stat(&idx)
        })
        .collect();
    let (lo, hi) = central_95(&mut stats);
    let all: Vec<usize> = (0..n).collect();
    Some(PairedDifference {
        mean: stat(&all),
        lo,
        hi,
        n,
    })
}

/// The nearest-rank 2.5 % and 97.5 % order statistics of bootstrap draws (sorted here).
fn central_95(draws: &mut [f64]) -> (f64, f64) {
    draws.sort_by(|x, y| x.total_cmp(y));
    let r = draws.len();
    let at = |q: f64| draws[((q * r as f64).ceil() as usize).clamp(1, r) - 1];
    (at(0.025), at(0.975))
}

/// `mean(b) − mean(a)` of two independent samples (different tasks, e.g. ID against OOD)
/// with a 95 % percentile-bootstrap interval, each sample resampled on its own
/// ([`PAIRED_RESAMPLES`] times, seed 0); `n` is the number of items in both. `None` when
/// either is empty.
pub fn two_sample_bootstrap(a: &[f64], b: &[f64]) -> Option<PairedDifference> {
    use rand::{Rng, SeedableRng};
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let m = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut draw = |xs: &[f64]| {
        (0..xs.len())
            .map(|_| xs[rng.random_range(0..xs.len())])
            .sum::<f64>()
            / xs.len() as f64
    };
    let mut diffs: Vec<f64> = (0..PAIRED_RESAMPLES)
        .map(|_| {
            let x = draw(a);
            draw(b) - x
        })
        .collect();
    let (lo, hi) = central_95(&mut diffs);
    Some(PairedDifference {
        mean: m(b) - m(a),
        lo,
        hi,
        n: a.len() + b.len(),
    })
}

/// The mean of per-unit differences `b − a` (e.g. per training seed, the same seeds) with its
/// 95 % t-interval ([`estimate`]); `None` with fewer than two units or unequal lengths.
pub fn paired_t(a: &[f64], b: &[f64]) -> Option<PairedDifference> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    let e = estimate(&d);
    let h = e.half_width?;
    Some(PairedDifference {
        mean: e.mean,
        lo: e.mean - h,
        hi: e.mean + h,
        n: d.len(),
    })
}

/// Share of successes, in percent.
pub fn success_percent(successes: &[bool]) -> f64 {
    if successes.is_empty() {
        return f64::NAN;
    }
    100.0 * successes.iter().filter(|&&s| s).count() as f64 / successes.len() as f64
}

/// Success % with its 95 % t-interval from `(successes, episodes)` per evaluation seed, and
/// whether the interval is over episodes.
///
/// Over seeds (the mean of per-seed rates) when there are two or more; with a single seed that
/// interval is undefined, and it is the t-interval over the seed's episodes (each 0 or 100)
/// instead — `true` says so, so that no reader takes it for the seed interval.
pub fn success_over_seeds(per_seed: &[(usize, usize)]) -> (Estimate, bool) {
    if let [(k, n)] = per_seed {
        let per_episode: Vec<f64> = (0..*n).map(|i| if i < *k { 100.0 } else { 0.0 }).collect();
        return (estimate(&per_episode), true);
    }
    let rates: Vec<f64> = per_seed
        .iter()
        .map(|(k, n)| 100.0 * *k as f64 / *n as f64)
        .collect();
    (estimate(&rates), false)
}

/// Easy / Medium / Hard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Difficulty {
    Easy,
    Medium,
    Hard,
}

/// Tercile cut points of expert path lengths: a task of length `ℓ` is Easy if `ℓ ≤ a`,
/// Hard if `ℓ > b`, else Medium, where `a`, `b` are the lengths at ranks ⌈n/3⌉ and ⌈2n/3⌉ of
/// the sorted lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terciles {
    pub easy_max: usize,
    pub medium_max: usize,
}

impl Terciles {
    /// `None` for an empty list.
    pub fn of(lengths: &[usize]) -> Option<Self> {
        let mut v = lengths.to_vec();
        v.sort_unstable();
        let n = v.len();
        if n == 0 {
            return None;
        }
        let at = |k: usize| v[(k.max(1) - 1).min(n - 1)];
        Some(Self {
            easy_max: at(n.div_ceil(3)),
            medium_max: at((2 * n).div_ceil(3)),
        })
    }

    pub fn classify(&self, length: usize) -> Difficulty {
        if length <= self.easy_max {
            Difficulty::Easy
        } else if length <= self.medium_max {
            Difficulty::Medium
        } else {
            Difficulty::Hard
        }
    }
}

/// Success per token of a method divided by that of a reference method (the paper normalises
/// to ReAct = 1). `tokens` are mean tokens per episode.
pub fn token_efficiency(success: f64, tokens: f64, ref_success: f64, ref_tokens: f64) -> f64 {
    (success / tokens) / (ref_success / ref_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against normal theory (the CLT, independent of the code): for 400 differences with
    /// mean 0.3 and sample sd s, the bootstrap interval of the mean is ≈ 0.3 ± 1.96·s/√400 —
    /// within a few percent of its width; constant differences give a zero-width interval.
    #[test]
    fn verdicts_read_the_interval_against_the_claimed_direction() {
        let d = |lo, hi| {
            Some(PairedDifference {
                mean: (lo + hi) / 2.0,
                lo,
                hi,
                n: 10,
            })
        };
        assert_eq!(verdict(&d(0.5, 2.0), true), "holds");
        assert_eq!(verdict(&d(0.5, 2.0), false), "does not hold");
        assert_eq!(verdict(&d(-2.0, -0.5), false), "holds");
        assert_eq!(
            verdict(&d(-1.0, 1.0), true),
            "no power (the interval covers 0)"
        );
        assert_eq!(verdict(&None, true), "no power (not measured)");
        assert_eq!(verdict_small(&d(-2.0, 2.5), 3.0), "holds");
        assert_eq!(verdict_small(&d(3.5, 6.0), 3.0), "does not hold");
        assert_eq!(
            verdict_small(&d(-1.0, 4.0), 3.0),
            "no power (the interval is wider than ±3)"
        );
        assert_eq!(d(-1.0, 4.0).unwrap().show(1), "+1.5 [-1.0, +4.0]");
        // Keyed pairs: only the same keys compare.
        let a: std::collections::BTreeMap<u32, f64> = [(1, 0.0), (2, 1.0)].into();
        let b: std::collections::BTreeMap<u32, f64> = [(1, 1.0), (2, 2.0)].into();
        let c: std::collections::BTreeMap<u32, f64> = [(1, 1.0), (3, 2.0)].into();
        let same = paired_by_key(&a, &b).unwrap();
        assert_eq!((same.mean, same.lo, same.hi, same.n), (1.0, 1.0, 1.0, 2));
        assert_eq!(paired_by_key(&a, &c), None);
        // On shared keys: a and c share key 1 only (c − a = 1 there); b and d none.
        let shared = paired_on_shared_keys(&a, &c).unwrap();
        assert_eq!(
            (shared.mean, shared.lo, shared.hi, shared.n),
            (1.0, 1.0, 1.0, 1)
        );
        let d: std::collections::BTreeMap<u32, f64> = [(5, 1.0)].into();
        assert_eq!(paired_on_shared_keys(&b, &d), None);
        // Three shared of four: differences 1, 0, −1 (mean 0), key 4 left out.
        let e: std::collections::BTreeMap<u32, f64> =
            [(1, 0.0), (2, 1.0), (3, 1.0), (4, 9.0)].into();
        let f: std::collections::BTreeMap<u32, f64> = [(1, 1.0), (2, 1.0), (3, 0.0)].into();
        let three = paired_on_shared_keys(&e, &f).unwrap();
        assert_eq!((three.mean, three.n), (0.0, 3));
        assert!(three.lo < 0.0 && three.hi > 0.0, "{three:?}");
    }

    #[test]
    fn the_paired_bootstrap_interval_matches_normal_theory() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let a: Vec<f64> = (0..400).map(|_| rng.random::<f64>()).collect();
        let b: Vec<f64> = a
            .iter()
            .map(|x| x + 0.3 + (rng.random::<f64>() - 0.5))
            .collect();
        let d: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y - x).collect();
        let e = estimate(&d);
        let p = paired_bootstrap(&a, &b, 4000, 1).unwrap();
        let h = e.half_width.unwrap();
        assert!((p.mean - e.mean).abs() < 1e-12);
        assert!(((p.hi - p.lo) / 2.0 - h).abs() < 0.1 * h, "{p:?} vs ±{h}");
        assert!(((p.hi + p.lo) / 2.0 - e.mean).abs() < 0.1 * h, "{p:?}");
        assert!(p.significant());
        let same = paired_bootstrap(&[0.0, 1.0], &[0.5, 1.5], 100, 0).unwrap();
        assert_eq!((same.mean, same.lo, same.hi), (0.5, 0.5, 0.5));
        assert!(paired_bootstrap(&[0.0], &[], 100, 0).is_none());
    }

    /// By hand: constant differences have a zero-width interval; a t-interval over three
    /// seeds is the mean ± t(2)·s/√3; two samples resampled apart bracket their mean gap, and
    /// against normal theory (gap 0.3, sd √(s²/n + s²/m)) the interval's width is within 10 %.
    #[test]
    fn unpaired_and_per_seed_differences() {
        use rand::{Rng, SeedableRng};
        let c = two_sample_bootstrap(&[1.0, 1.0], &[3.0, 3.0, 3.0]).unwrap();
        assert_eq!((c.mean, c.lo, c.hi, c.n), (2.0, 2.0, 2.0, 5));
        assert!(two_sample_bootstrap(&[], &[1.0]).is_none());
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let a: Vec<f64> = (0..300).map(|_| rng.random::<f64>()).collect();
        let b: Vec<f64> = (0..500).map(|_| 0.3 + rng.random::<f64>()).collect();
        let d = two_sample_bootstrap(&a, &b).unwrap();
        let var =
            |xs: &[f64]| estimate(xs).half_width.unwrap().powi(2) / t975(xs.len() - 1).powi(2);
        let h = 1.96 * (var(&a) + var(&b)).sqrt();
        assert!(((d.hi - d.lo) / 2.0 - h).abs() < 0.1 * h, "{d:?} vs ±{h}");
        assert!(d.significant());
        // Seeds: differences 10, 20, 30 → mean 20, s = 10, t(2) = 4.303.
        let t = paired_t(&[0.0, 0.0, 0.0], &[10.0, 20.0, 30.0]).unwrap();
        assert_eq!(t.mean, 20.0);
        assert!((t.hi - 20.0 - 4.303 * 10.0 / 3f64.sqrt()).abs() < 1e-9);
        assert!(paired_t(&[0.0], &[1.0]).is_none());
        // Any statistic: the ratio of sums over shared items.
        let (s, k) = ([1.0, 0.0, 1.0, 1.0], [10.0, 10.0, 20.0, 20.0]);
        let r = bootstrap_interval(4, 500, 0, |idx| {
            idx.iter().map(|&i| s[i]).sum::<f64>() / idx.iter().map(|&i| k[i]).sum::<f64>()
        })
        .unwrap();
        assert_eq!(r.mean, 3.0 / 60.0);
        assert!(r.lo <= r.mean && r.mean <= r.hi && r.lo >= 0.0 && r.hi <= 0.1);
    }

    /// Against `scipy.stats.t.ppf(0.975, ν)` (printed to 6 decimals): the table (3 decimals)
    /// to 5e-4, the expansion from 31 on to 2e-6.
    #[test]
    fn t_quantiles_match_scipy() {
        for (df, want) in [
            (1, 12.706205),
            (2, 4.302653),
            (30, 2.042272),
            (31, 2.039513),
            (40, 2.021075),
            (60, 2.000298),
            (99, 1.984217),
            (120, 1.97993),
            (299, 1.96793),
            (1000, 1.962339),
        ] {
            let got = t975(df);
            let tolerance = if df <= 30 { 5e-4 } else { 2e-6 };
            assert!(
                (got - want).abs() < tolerance,
                "t({df}) = {got}, scipy {want}"
            );
        }
        assert!(t975(0).is_nan());
    }

    #[test]
    fn the_mean_of_nothing_is_none() {
        assert_eq!(mean([1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean(std::iter::empty()), None);
    }

    #[test]
    fn intervals_by_hand() {
        // mean 60, s = 10 (values 50, 60, 70), t(2) = 4.303: 4.303 · 10 / √3 = 24.843.
        let e = estimate(&[50.0, 60.0, 70.0]);
        assert_eq!(e.mean, 60.0);
        assert!((e.half_width.unwrap() - 24.8434).abs() < 1e-3);
        assert_eq!(estimate(&[42.0]).half_width, None);
        assert!(estimate(&[]).mean.is_nan());
        // 39 degrees of freedom: t = 2.022691 (scipy.stats.t.ppf(0.975, 39)).
        let many: Vec<f64> = (0..40).map(|i| f64::from(i % 2)).collect();
        let e = estimate(&many);
        let s = (40.0f64 * 0.25 / 39.0).sqrt();
        assert!((e.half_width.unwrap() - 2.022691 * s / 40f64.sqrt()).abs() < 1e-6);
        assert_eq!(success_percent(&[true, false, true, true]), 75.0);
    }

    #[test]
    fn terciles_split_path_lengths() {
        let t = Terciles::of(&[9, 3, 5, 4, 12, 7]).unwrap();
        // sorted 3 4 5 7 9 12: ranks 2 and 4 → 4 and 7.
        assert_eq!((t.easy_max, t.medium_max), (4, 7));
        assert_eq!(t.classify(4), Difficulty::Easy);
        assert_eq!(t.classify(5), Difficulty::Medium);
        assert_eq!(t.classify(8), Difficulty::Hard);
        assert_eq!(Terciles::of(&[]), None);
        assert_eq!(Terciles::of(&[6]).unwrap().classify(6), Difficulty::Easy);
    }

    #[test]
    fn efficiency_is_relative_success_per_token() {
        // Twice the success with the same tokens: 2; same success with half the tokens: 2.
        assert_eq!(token_efficiency(40.0, 1000.0, 20.0, 1000.0), 2.0);
        assert_eq!(token_efficiency(20.0, 500.0, 20.0, 1000.0), 2.0);
    }
}
