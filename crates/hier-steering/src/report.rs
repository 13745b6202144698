//! Outputs of `reproduce steering`: `steering.json` (everything, per-episode results
//! included), `steering.md` (the tables, paired comparisons on the same (question, seed)
//! pairs, the paper's numbers beside ours, labelled, and a verdict per claim),
//! `steering.csv` (one row per evaluation) and figures: F1 overall and by hop count, cost
//! (interventions and executor turns per task), the τ sweep, and transfer to other
//! executors.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::profile::{ExecutorSpec, SteerMethod, SteeringProfile};
use crate::results::{Evaluation, SteeringRun};
use hier_train::SharedErrors as _;
use hier_train::charts::{
    Drawn, PALETTE, Series, draw_whiskers, ensure_font, grouped_bars, grouped_bars_bounded,
    headroom, series_top,
};
use hier_train::metrics::{PairedDifference, paired_by_key, show_paired};
use hier_train::stages::BackboneSpec;
use hier_train::stages::{StageRecord, write_json};

/// The paper's gains in F1 over no steering (METHODS.md B; Qwen2.5-7B-Instruct executor,
/// Qwen3-8B steering agent, ASearcher's seven QA benchmarks).
pub const PAPER_GAIN: [(SteerMethod, &str); 6] = [
    (SteerMethod::None, "0 (reference)"),
    (SteerMethod::ZeroShot, "+1.84"),
    (SteerMethod::Planning, "less than RL, or negative"),
    (SteerMethod::Verification, "less than RL, or negative"),
    (SteerMethod::FilteredBc, "below online RL"),
    (
        SteerMethod::Rl,
        "+6.66 at 0.93 interventions/task, fewest executor turns",
    ),
];

/// One evaluation, summarised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub method: SteerMethod,
    pub label: String,
    pub executor: String,
    pub tau: Option<f64>,
    pub episodes: usize,
    /// F1 and EM in percent; the half-width of the 95 % t-interval over the evaluation seeds'
    /// mean F1 (≥ 2 seeds).
    pub f1: f64,
    pub f1_ci95: Option<f64>,
    pub em: f64,
    /// F1 % by hop count (1–4; synthetic questions) and by test set (`[files]`).
    pub f1_by_hops: BTreeMap<usize, f64>,
    #[serde(default)]
    pub f1_by_set: BTreeMap<String, f64>,
    pub answered: f64,
    pub interventions_per_task: f64,
    /// Interventions per executor turn.
    pub intervention_rate: f64,
    pub turns_per_task: f64,
    /// Half-widths of the 95 % t-intervals over the seeds' means of executor turns and
    /// interventions per task (≥ 2 seeds).
    #[serde(default)]
    pub turns_ci95: Option<f64>,
    #[serde(default)]
    pub interventions_ci95: Option<f64>,
    pub slow_path_runs_per_task: f64,
    pub executor_tokens_per_task: f64,
    /// F1 points over no steering with the same executor.
    pub gain: Option<f64>,
    pub gain_per_intervention: Option<f64>,
    /// The same gain as a paired difference on the same (question, seed) pairs, with a 95 %
    /// bootstrap interval; executor turns per task the same way.
    #[serde(default)]
    pub gain_ci: Option<PairedDifference>,
    #[serde(default)]
    pub turns_change: Option<PairedDifference>,
}

/// Per (question, seed) values of `f` over an evaluation.
fn keyed(
    e: &Evaluation,
    f: impl Fn(&crate::results::QaResult) -> f64,
) -> BTreeMap<(String, u64), f64> {
    e.results
        .iter()
        .map(|r| ((r.task.to_string(), r.seed), f(r)))
        .collect()
}

/// F1 points of `b` over `a` on the same pairs.
pub(crate) fn f1_difference(a: &Evaluation, b: &Evaluation) -> Option<PairedDifference> {
    paired_by_key(&keyed(a, |r| 100.0 * r.f1), &keyed(b, |r| 100.0 * r.f1))
}

/// The mean, NaN (printed as such) when there is nothing to average.
pub(crate) fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    hier_train::metrics::mean(xs).unwrap_or(f64::NAN)
}

/// Half-width of the 95 % t-interval over the evaluation seeds' means of a per-episode
/// quantity: `t₀.₉₇₅(k−1) · s / √k` for `k` seeds (with 3 seeds t = 4.303, not the normal 1.96);
/// `None` with fewer than two seeds.
pub(crate) fn seed_interval<T>(
    episodes: &[T],
    seed: impl Fn(&T) -> u64,
    value: impl Fn(&T) -> f64,
) -> Option<f64> {
    let mut seeds: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for x in episodes {
        seeds.entry(seed(x)).or_default().push(value(x));
    }
    let seed_means: Vec<f64> = seeds.values().map(|v| mean(v.iter().copied())).collect();
    hier_train::metrics::estimate(&seed_means).half_width
}

/// Summarises one evaluation.
pub fn row(e: &Evaluation) -> Row {
    let r = &e.results;
    let n = r.len().max(1) as f64;
    let f1_ci95 = seed_interval(r, |x| x.seed, |x| 100.0 * x.f1);
    let mut by_hops: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut by_set: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for x in r {
        if let Some(h) = x.hops {
            by_hops.entry(h).or_default().push(100.0 * x.f1);
        }
        if let Some(s) = &x.test_set {
            by_set.entry(s.clone()).or_default().push(100.0 * x.f1);
        }
    }
    let turns: usize = r.iter().map(|x| x.turns).sum();
    let interventions: usize = r.iter().map(|x| x.interventions).sum();
    Row {
        method: e.method,
        label: e.method.label().into(),
        executor: e.executor.clone(),
        tau: e.tau,
        episodes: r.len(),
        f1: mean(r.iter().map(|x| 100.0 * x.f1)),
        f1_ci95,
        em: mean(r.iter().map(|x| 100.0 * x.em)),
        f1_by_hops: by_hops
            .into_iter()
            .map(|(h, v)| (h, mean(v.into_iter())))
            .collect(),
        f1_by_set: by_set
            .into_iter()
            .map(|(s, v)| (s, mean(v.into_iter())))
            .collect(),
        answered: mean(r.iter().map(|x| if x.answered { 100.0 } else { 0.0 })),
        interventions_per_task: interventions as f64 / n,
        intervention_rate: interventions as f64 / turns.max(1) as f64,
        turns_per_task: turns as f64 / n,
        turns_ci95: seed_interval(r, |x| x.seed, |x| x.turns as f64),
        interventions_ci95: seed_interval(r, |x| x.seed, |x| x.interventions as f64),
        slow_path_runs_per_task: e.slow_path_runs as f64 / n,
        executor_tokens_per_task: mean(r.iter().map(|x| x.executor_tokens as f64)),
        gain: None,
        gain_per_intervention: None,
        gain_ci: None,
        turns_change: None,
    }
}

/// Every row with its gain over no steering on the same executor.
pub fn rows(run: &SteeringRun) -> Vec<Row> {
    let mut rows: Vec<Row> = run.evaluations.iter().map(row).collect();
    for (r, e) in rows.iter_mut().zip(&run.evaluations) {
        let base = run
            .evaluations
            .iter()
            .find(|b| b.method == SteerMethod::None && b.executor == e.executor);
        if let Some(b) = base.filter(|_| e.method != SteerMethod::None) {
            r.gain_ci = f1_difference(b, e);
            let turns = |x: &crate::results::QaResult| x.turns as f64;
            r.turns_change = paired_by_key(&keyed(b, turns), &keyed(e, turns));
        }
    }
    let base: BTreeMap<String, f64> = rows
        .iter()
        .filter(|r| r.method == SteerMethod::None)
        .map(|r| (r.executor.clone(), r.f1))
        .collect();
    for r in &mut rows {
        if let Some(b) = base.get(&r.executor) {
            let g = r.f1 - b;
            r.gain = Some(g);
            r.gain_per_intervention =
                (r.interventions_per_task > 0.0).then(|| g / r.interventions_per_task);
        }
    }
    rows
}

fn fmt(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:+.digits$}"),
        _ => "–".into(),
    }
}

/// F1 % by hop count (the synthetic world; only the hop counts it asks questions of) or by
/// test set (`[files]`), labelled.
fn breakdown(p: &SteeringProfile, r: &Row) -> Vec<(String, Option<f64>)> {
    match &p.files {
        Some(f) => f
            .test
            .keys()
            .map(|k| (k.clone(), r.f1_by_set.get(k).copied()))
            .collect(),
        None => (1..=4)
            .filter(|h| {
                p.world
                    .as_ref()
                    .is_none_or(|w| w.questions_per_hop[h - 1] > 0)
            })
            .map(|h| {
                let label = if h == 1 {
                    "1 hop".into()
                } else {
                    format!("{h} hops")
                };
                (label, r.f1_by_hops.get(&h).copied())
            })
            .collect(),
    }
}

/// What an executor is, in words.
fn describe_executor(x: &ExecutorSpec) -> String {
    let backbone = match &x.backbone {
        None => "the shared backbone".to_string(),
        Some(BackboneSpec::Hf { path }) => format!("its own HF checkpoint `{}`", path.display()),
        Some(BackboneSpec::Pretrain { model, .. }) => format!(
            "its own tiny backbone pre-trained from scratch (hidden {}, {} layers)",
            model.hidden_size, model.num_hidden_layers
        ),
    };
    let adapter = match (&x.sft, &x.drift) {
        (Some(_), Some(d)) => format!(
            "with an SFT adapter on {} demonstrations with drift (over-search {}, early answer \
             {}, looping {}, seed {})",
            x.demos, d.over_search, d.early_answer, d.looping, d.seed
        ),
        _ => "with no adapter".to_string(),
    };
    let chat = if x.chat {
        ", prompted through its chat template"
    } else {
        ""
    };
    let example = if x.worked_example {
        ", shown a worked example, its replies started at a call"
    } else {
        ""
    };
    format!("`{}`: {backbone}, {adapter}{chat}{example}", x.name)
}

pub(crate) fn main_rows<'a>(rows: &'a [Row], p: &SteeringProfile) -> Vec<&'a Row> {
    SteerMethod::ALL
        .iter()
        .filter_map(|m| {
            rows.iter().find(|r| {
                r.method == *m && r.executor == "main" && r.tau.is_none_or(|t| t == p.steer.tau)
            })
        })
        .collect()
}

pub(crate) fn sweep_rows(rows: &[Row]) -> Vec<&Row> {
    let mut s: Vec<&Row> = rows
        .iter()
        .filter(|r| r.method == SteerMethod::Rl && r.executor == "main")
        .collect();
    s.sort_by(|a, b| b.tau.partial_cmp(&a.tau).expect("finite τ"));
    s
}

fn markdown(
    p: &SteeringProfile,
    run: &SteeringRun,
    rows: &[Row],
    stages: &[StageRecord],
) -> String {
    let data = match (&p.world, &p.files) {
        (Some(w), _) => format!(
            "Synthetic multi-hop world (seed {}), {} test questions",
            w.seed, p.eval.tasks
        ),
        (_, Some(f)) => format!(
            "Questions from files ({} per test set: {}), passages from {}",
            p.eval.tasks,
            f.test.keys().cloned().collect::<Vec<_>>().join(", "),
            match (&f.retriever_url, &f.corpus) {
                (Some(u), _) => format!("the retrieval server at {u}"),
                (None, Some(c)) => format!("a BM25 index over `{}`", c.display()),
                (None, None) => "?".into(),
            }
        ),
        (None, None) => "?".into(),
    };
    let mut md = format!(
        "# Steering (METHODS.md B) — profile `{}`\n\n\
         {data} × {} evaluation seed(s). The frozen training executor is {}; the steering \
         agent is its own adapter on the profile's backbone. F1/EM as ASearcher scores them, \
         in percent. Wall time of this invocation: {:.0} s.\n\n",
        p.name,
        p.eval.seeds.len(),
        describe_executor(&p.executor),
        run.wall_seconds
    );
    md.push_str(&format!(
        "## Main comparison (training executor, τ = {})\n\n\
         Δ: paired differences against no steering on the same (question, seed) pairs, with \
         a 95 % bootstrap interval.\n\n\
         | Method | F1 | Δ F1 vs none [95 %] | EM | answered % | interventions/task | executor turns/task | Δ turns [95 %] | slow-path runs/task | paper: Δ F1 |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        p.steer.tau
    ));
    for r in main_rows(rows, p) {
        let paper = PAPER_GAIN
            .iter()
            .find(|(m, _)| *m == r.method)
            .map(|(_, v)| *v)
            .unwrap_or("");
        let ci = r.f1_ci95.map(|c| format!(" ± {c:.1}")).unwrap_or_default();
        md.push_str(&format!(
            "| {} | {:.1}{ci} | {} | {:.1} | {:.0} | {:.2} | {:.2} | {} | {:.2} | {paper} |\n",
            r.label,
            r.f1,
            if r.gain_ci.is_some() {
                show_paired(&r.gain_ci, 1)
            } else {
                fmt(r.gain, 1)
            },
            r.em,
            r.answered,
            r.interventions_per_task,
            r.turns_per_task,
            show_paired(&r.turns_change, 2),
            r.slow_path_runs_per_task,
        ));
    }
    let mains = main_rows(rows, p);
    if let Some(first) = mains.first() {
        let heads: Vec<String> = breakdown(p, first).into_iter().map(|(h, _)| h).collect();
        md.push_str(&format!(
            "\n## F1 by {}\n\n| Method | {} |\n|---|{}\n",
            if p.files.is_some() {
                "test set"
            } else {
                "hop count"
            },
            heads.join(" | "),
            "---|".repeat(heads.len())
        ));
        for r in &mains {
            let cells: Vec<String> = breakdown(p, r)
                .into_iter()
                .map(|(_, v)| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into()))
                .collect();
            md.push_str(&format!("| {} | {} |\n", r.label, cells.join(" | ")));
        }
    }
    md.push_str(
        "\n## τ sweep of the trained agent (no retraining)\n\n\
         Paper: the highest intervention frequency gains +17.11 F1; gain per intervention is \
         highest at low frequency.\n\n\
         | τ | interventions/task | interventions/turn | F1 | total gain [95 %, paired] | gain/intervention |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in sweep_rows(rows) {
        md.push_str(&format!(
            "| {} | {:.2} | {:.3} | {:.1} | {} | {} |\n",
            r.tau.map(|t| t.to_string()).unwrap_or_default(),
            r.interventions_per_task,
            r.intervention_rate,
            r.f1,
            if r.gain_ci.is_some() {
                show_paired(&r.gain_ci, 1)
            } else {
                fmt(r.gain, 1)
            },
            fmt(r.gain_per_intervention, 2)
        ));
    }
    if !p.transfer.is_empty() {
        md.push_str(
            "\n## Transfer to other executors (no retraining)\n\n\
             Paper (other model families): Llama-3.1-8B-Instruct +15.78, \
             Mistral-7B-Instruct-v0.3 +12.01, Phi-4 +5.92. The executors here:\n\n",
        );
        for x in &p.transfer {
            md.push_str(&format!("- {}\n", describe_executor(x)));
        }
        md.push_str(
            "\n| Executor | Method | F1 | Δ F1 vs none [95 %] | interventions/task | executor turns/task |\n\
             |---|---|---|---|---|---|\n",
        );
        for x in &p.transfer {
            for r in rows.iter().filter(|r| r.executor == x.name) {
                md.push_str(&format!(
                    "| {} | {} | {:.1} | {} | {:.2} | {:.2} |\n",
                    x.name,
                    r.label,
                    r.f1,
                    if r.gain_ci.is_some() {
                        show_paired(&r.gain_ci, 1)
                    } else {
                        fmt(r.gain, 1)
                    },
                    r.interventions_per_task,
                    r.turns_per_task
                ));
            }
        }
    }
    md.push_str(
        "\n## The paper's claims, measured here\n\n| Claim | Ours | Verdict |\n|---|---|---|\n",
    );
    for (c, ours, v) in crate::claims::claims(p, run, rows) {
        md.push_str(&format!("| {c} | {ours} | {v} |\n"));
    }
    md.push_str(&training_table(&run.curve, run.bank_states));
    md.push_str(&stages_table(stages));
    md
}

fn csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "method,executor,tau,episodes,f1,f1_ci95,em,answered,interventions_per_task,\
         intervention_rate,turns_per_task,slow_path_runs_per_task,executor_tokens_per_task,gain\n",
    );
    let o = |x: Option<f64>| x.map(|v| format!("{v:.4}")).unwrap_or_default();
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.4},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.1},{}\n",
            r.method,
            r.executor,
            o(r.tau),
            r.episodes,
            r.f1,
            o(r.f1_ci95),
            r.em,
            r.answered,
            r.interventions_per_task,
            r.intervention_rate,
            r.turns_per_task,
            r.slow_path_runs_per_task,
            r.executor_tokens_per_task,
            o(r.gain)
        ));
    }
    out
}

/// Writes `steering.{json,md,csv}` and the figures into `out`.
pub fn write_all(
    out: &Path,
    p: &SteeringProfile,
    run: &SteeringRun,
    stages: &[StageRecord],
) -> Result<()> {
    let rows = rows(run);
    let json = serde_json::json!({
        "profile": p.name,
        "wall_seconds": run.wall_seconds,
        "rows": rows,
        "paper_gain": PAPER_GAIN.iter().map(|(m, v)| (m.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        "curve": run.curve,
        "bank_states": run.bank_states,
        "evaluations": run.evaluations,
        "stages": stages,
    });
    write_json(&out.join("steering.json"), &json)?;
    hier_backbone::write_atomic(
        &out.join("steering.md"),
        markdown(p, run, &rows, stages).as_bytes(),
    )?;
    hier_backbone::write_atomic(&out.join("steering.csv"), csv(&rows).as_bytes())?;
    draw(out, p, &rows)
}

/// What a report's JSON (`steering.json`, `steering-mas.json`) records of a run besides the
/// rows derived from it: enough to write the report again.
#[derive(Deserialize)]
#[serde(bound = "R: serde::de::DeserializeOwned")]
pub(crate) struct Recorded<R> {
    pub profile: String,
    #[serde(flatten)]
    pub run: R,
    pub stages: Vec<StageRecord>,
}

/// Reads `dir/<what>.json`, checking that the profile that recorded it is `name` (the one in
/// `dir/profile.resolved.toml`).
pub(crate) fn read_recorded<R: serde::de::DeserializeOwned>(
    dir: &Path,
    what: &str,
    name: &str,
) -> Result<Recorded<R>> {
    let json = dir.join(format!("{what}.json"));
    let recorded: Recorded<R> = hier_train::stages::read_json(&json)?;
    if recorded.profile != name {
        return Err(Error::profile(
            &json,
            format!(
                "recorded by profile `{}`, but {} is profile `{name}`",
                recorded.profile,
                dir.join(hier_train::stages::RESOLVED_PROFILE).display(),
            ),
        ));
    }
    Ok(recorded)
}

/// Writes the report of a finished run in `dir` again — `steering.{json,md,csv}` and the
/// figures — from its `steering.json` and `profile.resolved.toml`, with this version's report
/// code and without the run's stages (a committed result directory has none). The rows are
/// derived again from the per-episode results, so a table whose code has not changed comes out
/// byte for byte as it was.
pub fn rewrite(dir: &Path) -> Result<()> {
    let p = SteeringProfile::from_file(&dir.join(hier_train::stages::RESOLVED_PROFILE))?;
    let r: Recorded<SteeringRun> = read_recorded(dir, "steering", &p.name)?;
    write_all(dir, &p, &r.run, &r.stages)
}

/// The training curve as a Markdown section: per round the mean no-intervention return b,
/// the mean return after a slow-path output, the mean best gain, the mean q(s), the shares of
/// the outputs by kind, and RankNet's pairs.
pub(crate) fn training_table(
    curve: &[crate::steer_train::RoundPoint],
    bank_states: usize,
) -> String {
    let mut md = String::new();
    if curve.is_empty() {
        return md;
    }
    md.push_str(&format!(
        "\n## Training\n\n{bank_states} bank states; {} rounds. Per round: mean no-intervention \
         return b, mean return after a slow-path output, mean best gain max_j R̄ − b, mean \
         q(s), shares of stop / guide / reject / pass / unreadable outputs.\n\n\
         | round | b | R̄ | best gain | q | stop | guide | reject | pass | unreadable | rank pairs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        curve.len()
    ));
    for c in curve {
        md.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:+.3} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} |\n",
            c.round,
            c.mean_baseline,
            c.mean_return,
            c.mean_best_gain,
            c.mean_q,
            c.stop,
            c.guide,
            c.reject,
            c.pass,
            c.unreadable,
            c.rank_pairs
        ));
    }
    md
}

/// Every stage once (a stage several methods read is recorded once per reader), whether it
/// was reused, and how long it took when it ran.
pub(crate) fn stages_table(stages: &[StageRecord]) -> String {
    let mut md = String::new();
    md.push_str("\n## Stages\n\n| stage | reused | seconds (when it ran) |\n|---|---|---|\n");
    for s in hier_train::stages::distinct_stages(stages) {
        md.push_str(&format!(
            "| {} | {} | {} |\n",
            s.name,
            if s.cached { "yes" } else { "no" },
            s.ran_seconds
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "–".into())
        ));
    }
    md
}

/// `<out>/figures`, created — or `None` when no font can be found: then `NO_FONT.txt` there
/// says why and that the tables (`<what>.md/json/csv`) are complete, and no figure pretends
/// to be there.
pub(crate) fn figures_dir(out: &Path, what: &str) -> Result<Option<std::path::PathBuf>> {
    let dir = out.join("figures");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    if let Err(why) = ensure_font() {
        tracing::warn!("figures not drawn: {why}");
        let text = format!(
            "Figures were not drawn: {why}.\nThe tables ({what}.md/json/csv) are complete.\n"
        );
        hier_backbone::write_atomic(&dir.join("NO_FONT.txt"), text.as_bytes())?;
        return Ok(None);
    }
    Ok(Some(dir))
}

fn draw(out: &Path, p: &SteeringProfile, rows: &[Row]) -> Result<()> {
    let Some(dir) = figures_dir(out, "steering")? else {
        return Ok(());
    };
    let e = |e: Box<dyn std::error::Error>| Error::figure(e.to_string());
    let main = main_rows(rows, p);
    // F1 overall and by hops (or by test set).
    let mut groups = vec!["all".to_string()];
    if let Some(r) = main.first() {
        groups.extend(breakdown(p, r).into_iter().map(|(g, _)| g));
    }
    let series: Vec<Series> = main
        .iter()
        .map(|r| {
            let mut v = vec![(r.f1, r.f1_ci95)];
            v.extend(
                breakdown(p, r)
                    .into_iter()
                    .map(|(_, x)| (x.unwrap_or(f64::NAN), None)),
            );
            (r.label.clone(), v)
        })
        .collect();
    grouped_bars_bounded(
        &dir.join("f1.png"),
        &format!(
            "F1 by method, overall (95 % t-interval over seeds) and by {} (profile {})",
            if p.files.is_some() {
                "test set"
            } else {
                "hop count"
            },
            p.name
        ),
        "F1 %",
        headroom(&series, 100.0),
        100.0,
        &groups,
        &series,
    )
    .map_err(e)?;
    // Cost: interventions and executor turns per task.
    let series: Vec<Series> = main
        .iter()
        .map(|r| {
            (
                r.label.clone(),
                vec![
                    (r.interventions_per_task, r.interventions_ci95),
                    (r.turns_per_task, r.turns_ci95),
                ],
            )
        })
        .collect();
    grouped_bars(
        &dir.join("cost.png"),
        "Interventions and executor turns per task (95 % t-interval over seeds)",
        "per task",
        series_top(&series, f64::INFINITY).max(1.0) * 1.15,
        &[
            "interventions / task".to_string(),
            "executor turns / task".to_string(),
        ],
        &series,
    )
    .map_err(e)?;
    if p.transfer.is_empty() {
        return tau_sweep(&dir.join("tau_sweep.png"), &sweep_rows(rows)).map_err(e);
    }
    // Transfer.
    let executors: Vec<&str> = std::iter::once("main")
        .chain(p.transfer.iter().map(|x| x.name.as_str()))
        .collect();
    let series: Vec<Series> = [SteerMethod::None, SteerMethod::ZeroShot, SteerMethod::Rl]
        .iter()
        .map(|m| {
            let v = executors
                .iter()
                .map(|x| {
                    rows.iter()
                        .find(|r| {
                            r.method == *m
                                && r.executor == *x
                                && r.tau.is_none_or(|t| t == p.steer.tau)
                        })
                        .map(|r| (r.f1, r.f1_ci95))
                        .unwrap_or((f64::NAN, None))
                })
                .collect();
            (m.label().to_string(), v)
        })
        .collect();
    grouped_bars_bounded(
        &dir.join("transfer.png"),
        "Transfer without retraining: F1 on the training executor and others (95 % t-interval)",
        "F1 %",
        headroom(&series, 100.0),
        100.0,
        &std::iter::once("training executor".to_string())
            .chain(p.transfer.iter().map(|x| x.name.clone()))
            .collect::<Vec<_>>(),
        &series,
    )
    .map_err(e)?;
    tau_sweep(&dir.join("tau_sweep.png"), &sweep_rows(rows)).map_err(e)?;
    Ok(())
}

/// Total gain (left) and gain per intervention (right) against interventions per task, each
/// with the gain's 95 % paired bootstrap interval (per intervention: the interval divided by the
/// row's interventions per task, which the τ fixes).
fn tau_sweep(path: &Path, rows: &[&Row]) -> Drawn {
    let root = BitMapBackend::new(path, (1000, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(500);
    // (interventions per task, value, its interval, label) per τ.
    type Points = Vec<(f64, f64, Option<(f64, f64)>, String)>;
    let pts = |per_intervention: bool| -> Points {
        rows.iter()
            .filter_map(|r| {
                // Per intervention: the row's gain per intervention, its interval the gain's
                // divided by the interventions per task (fixed by the τ).
                let (y, scale) = if per_intervention {
                    (r.gain_per_intervention?, r.interventions_per_task)
                } else {
                    (r.gain?, 1.0)
                };
                let ci = r.gain_ci.map(|d| (d.lo / scale, d.hi / scale));
                y.is_finite().then(|| {
                    (
                        r.interventions_per_task,
                        y,
                        ci,
                        format!("τ={}", r.tau.unwrap_or(f64::NAN)),
                    )
                })
            })
            .collect()
    };
    let panels: [(&DrawingArea<_, _>, &str, Points); 2] = [
        (&left, "total gain (F1 points)", pts(false)),
        (&right, "gain per intervention", pts(true)),
    ];
    for (k, (area, what, p)) in panels.into_iter().enumerate() {
        let xmax = p.iter().map(|x| x.0).fold(0.1, f64::max) * 1.15;
        let (ymin, ymax) = p.iter().fold((-1.0f64, 1.0f64), |(a, b), x| {
            let (lo, hi) = x.2.unwrap_or((x.1, x.1));
            (a.min(lo).min(x.1), b.max(hi).max(x.1))
        });
        let pad = 0.15 * (ymax - ymin);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("τ sweep: {what}"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..xmax, (ymin - pad)..(ymax + pad))?;
        chart
            .configure_mesh()
            .x_desc("interventions per task")
            .y_desc(format!("{what}, 95 % paired interval"))
            .label_style(("sans-serif", 13))
            .draw()?;
        let color = PALETTE[k];
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 0.0), (xmax, 0.0)],
            BLACK.mix(0.4).stroke_width(1),
        )))?;
        let mut line: Vec<(f64, f64)> = p.iter().map(|x| (x.0, x.1)).collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
        draw_whiskers(
            &mut chart,
            p.iter().filter_map(|(x, _, ci, _)| {
                let (lo, hi) = (*ci)?;
                Some((*x, lo, hi))
            }),
            BLACK.stroke_width(1),
        )?;
        chart.draw_series(
            p.iter()
                .map(|(x, y, _, _)| Circle::new((*x, *y), 4, color.filled())),
        )?;
        // Labels beside their marks (6 px right, 16 px up), not on them.
        chart.draw_series(p.iter().map(|(x, y, _, l)| {
            EmptyElement::at((*x, *y)) + Text::new(l.clone(), (6, -16), ("sans-serif", 12))
        }))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::QaResult;

    /// Three seeds whose mean F1 is 20, 40 and 60 %: s = 20, so the 95 % t-interval's
    /// half-width is t₀.₉₇₅(2) · 20 / √3 = 4.303 · 11.547 = 49.69 (the normal 1.96 would give
    /// 22.63).
    #[test]
    fn the_f1_interval_is_a_t_interval_over_seeds() {
        let result = |seed: u64, f1: f64| QaResult {
            task: hier_envs::Task::new("qa", seed),
            seed,
            hops: Some(2),
            test_set: None,
            f1,
            em: 0.0,
            answered: true,
            turns: 1,
            interventions: 0,
            executor_tokens: 10,
        };
        let e = Evaluation {
            method: SteerMethod::None,
            executor: "main".into(),
            tau: None,
            // Seed 1 has two episodes (0.3 and 0.5, mean 0.4): the interval is over seed means.
            results: vec![
                result(0, 0.2),
                result(1, 0.3),
                result(1, 0.5),
                result(2, 0.6),
            ],
            slow_path_runs: 0,
        };
        let ci = row(&e).f1_ci95.unwrap();
        assert!((ci - 4.303 * 20.0 / 3f64.sqrt()).abs() < 1e-9, "{ci}");
        let one_seed = Evaluation {
            results: vec![result(0, 0.2), result(0, 0.4)],
            ..e
        };
        assert_eq!(row(&one_seed).f1_ci95, None);
    }

    /// Executor turns per task get the same t-interval over seeds: seed 0 plays 4 turns, seed 1
    /// 2 and 8 (mean 5), seed 2 6 — seed means 4, 5, 6, s = 1, half-width 4.303 / √3 = 2.484.
    /// Interventions are 1 in every episode: a zero-width interval, not a missing one.
    #[test]
    fn turns_and_interventions_get_t_intervals_over_seeds() {
        let result = |seed: u64, turns: usize| QaResult {
            task: hier_envs::Task::new("qa", seed),
            seed,
            hops: Some(1),
            test_set: None,
            f1: 0.0,
            em: 0.0,
            answered: false,
            turns,
            interventions: 1,
            executor_tokens: 10,
        };
        let e = Evaluation {
            method: SteerMethod::ZeroShot,
            executor: "main".into(),
            tau: Some(0.5),
            results: vec![result(0, 4), result(1, 2), result(1, 8), result(2, 6)],
            slow_path_runs: 0,
        };
        let r = row(&e);
        assert!((r.turns_per_task - 5.0).abs() < 1e-12);
        let ci = r.turns_ci95.unwrap();
        assert!((ci - 4.303 / 3f64.sqrt()).abs() < 1e-9, "{ci}");
        assert_eq!(r.interventions_ci95, Some(0.0));
    }
}
