//! Summaries of a dataset file (`cargo xtask data stats <path>`): record and episode counts,
//! text lengths, and reward / return histograms.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::{DataError, Result};
use crate::io::{peek_kind, read};
use crate::schema::{FlatTrajectory, Schema, SteeringState, Sys1Record, Sys2Transition};

/// Min / mean / max of a quantity.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub n: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

impl Summary {
    fn of(xs: &[f64]) -> Self {
        if xs.is_empty() {
            return Self::default();
        }
        Self {
            n: xs.len() as u64,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            mean: xs.iter().sum::<f64>() / xs.len() as f64,
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Counts per equal-width bin over `[lo, hi]` (a constant quantity gets one bin).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Histogram {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

impl Histogram {
    pub fn of(xs: &[f64], bins: usize) -> Self {
        if xs.is_empty() {
            return Self::default();
        }
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let bins = if hi > lo { bins.max(1) } else { 1 };
        let mut counts = vec![0u64; bins];
        for &x in xs {
            let k = if hi > lo {
                (((x - lo) / (hi - lo)) * bins as f64).floor() as usize
            } else {
                0
            };
            counts[k.min(bins - 1)] += 1;
        }
        Self { lo, hi, counts }
    }

    /// One line per bin with a bar.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let top = self.counts.iter().copied().max().unwrap_or(0).max(1);
        let width = (self.hi - self.lo) / self.counts.len().max(1) as f64;
        for (k, c) in self.counts.iter().enumerate() {
            let a = self.lo + width * k as f64;
            let bar = "█".repeat(((c * 40) / top) as usize);
            let _ = writeln!(
                s,
                "  [{a:>8.3}, {:>8.3}{} {c:>7} {bar}",
                a + width,
                if k + 1 == self.counts.len() { "]" } else { ")" }
            );
        }
        s
    }
}

/// What `data stats` reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    pub kind: String,
    pub version: u32,
    pub records: u64,
    /// Distinct `source` values (episodes).
    pub episodes: u64,
    /// Length of the main input text in characters (observation / context).
    pub input_chars: Summary,
    /// Length of the target in words (subgoal / action).
    pub target_words: Summary,
    /// Per record reward (System 1, System 2) or per episode return (flat, steering).
    pub rewards: Summary,
    pub reward_histogram: Histogram,
    /// Flat trajectories: share that succeeded; System 2: share of subgoal-completing actions.
    pub positive_share: f64,
}

fn words(s: &str) -> f64 {
    s.split_whitespace().count() as f64
}

/// What one record contributes: (source, input length, target length, reward, positive).
type Measure = (String, f64, f64, f64, bool);

/// The per-record measures of a file, gathered.
#[derive(Default)]
struct Gathered {
    records: u64,
    episodes: u64,
    input: Vec<f64>,
    target: Vec<f64>,
    reward: Vec<f64>,
    positive: u64,
}

fn collect<T: Schema>(path: &Path, mut each: impl FnMut(&T) -> Measure) -> Result<Gathered> {
    let mut g = Gathered::default();
    let mut sources = BTreeSet::new();
    for r in read::<T>(path)? {
        let (src, i, t, rw, p) = each(&r?);
        sources.insert(src);
        g.input.push(i);
        g.target.push(t);
        g.reward.push(rw);
        g.positive += u64::from(p);
        g.records += 1;
    }
    g.episodes = sources.len() as u64;
    Ok(g)
}

/// Reads a dataset file of any kind and summarises it.
pub fn stats(path: &Path, bins: usize) -> Result<Stats> {
    let (kind, version) = peek_kind(path)?;
    let g = match kind.as_str() {
        Sys1Record::KIND => collect::<Sys1Record>(path, |r| {
            (
                r.source.clone(),
                r.context().len() as f64,
                words(&r.subgoal),
                r.reward,
                r.done,
            )
        })?,
        Sys2Transition::KIND => collect::<Sys2Transition>(path, |r| {
            (
                r.source.clone(),
                r.observation.len() as f64,
                words(&r.action),
                r.reward,
                r.subgoal_done,
            )
        })?,
        FlatTrajectory::KIND => collect::<FlatTrajectory>(path, |r| {
            (
                r.source.clone(),
                r.observations.iter().map(String::len).sum::<usize>() as f64,
                r.actions.len() as f64,
                r.rewards.iter().sum(),
                r.success,
            )
        })?,
        SteeringState::KIND => collect::<SteeringState>(path, |r| {
            (
                r.source.clone(),
                r.history.iter().map(|t| t.text.len()).sum::<usize>() as f64,
                r.interventions.len() as f64,
                r.no_intervention_return.unwrap_or(0.0),
                r.no_intervention_return.is_some_and(|x| x > 0.0),
            )
        })?,
        other => {
            return Err(DataError::file(
                path,
                format!("unknown record kind `{other}`"),
            ));
        }
    };
    Ok(Stats {
        kind,
        version,
        records: g.records,
        episodes: g.episodes,
        input_chars: Summary::of(&g.input),
        target_words: Summary::of(&g.target),
        rewards: Summary::of(&g.reward),
        reward_histogram: Histogram::of(&g.reward, bins),
        positive_share: if g.records == 0 {
            0.0
        } else {
            g.positive as f64 / g.records as f64
        },
    })
}

impl Stats {
    /// A human-readable report.
    pub fn render(&self) -> String {
        let (inp, tgt, rew, pos) = match self.kind.as_str() {
            "sys1" => (
                "context chars",
                "subgoal words",
                "segment reward",
                "episode-ending",
            ),
            "sys2" => (
                "observation chars",
                "action words",
                "intrinsic reward",
                "subgoal-completing",
            ),
            "flat" => (
                "observation chars / episode",
                "actions / episode",
                "return",
                "successful",
            ),
            _ => (
                "history chars",
                "interventions tried",
                "no-intervention return",
                "positive",
            ),
        };
        let line = |name: &str, s: &Summary| {
            format!(
                "{name:<30} min {:>10.2}  mean {:>10.2}  max {:>10.2}\n",
                s.min, s.mean, s.max
            )
        };
        let mut out = format!(
            "{} v{}: {} records from {} episodes\n",
            self.kind, self.version, self.records, self.episodes
        );
        out += &line(inp, &self.input_chars);
        out += &line(tgt, &self.target_words);
        out += &line(rew, &self.rewards);
        out += &format!("{pos:<30} {:.1} %\n", 100.0 * self.positive_share);
        out += &format!("{rew} histogram:\n{}", self.reward_histogram.render());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_bins_include_both_ends() {
        let h = Histogram::of(&[0.0, 0.1, 0.5, 1.0, 1.0], 2);
        assert_eq!(h.counts, [2, 3]);
        assert_eq!(Histogram::of(&[3.0, 3.0], 10).counts, [2]);
        assert!(Histogram::of(&[], 4).counts.is_empty());
        let s = Summary::of(&[1.0, 2.0, 6.0]);
        assert_eq!((s.min, s.mean, s.max), (1.0, 3.0, 6.0));
    }
}
