//! Outputs of `reproduce steering-mas`: `steering-mas.json` (everything, per-episode results
//! included), `steering-mas.md` (the rows with 95 % t-intervals over seeds, paired comparisons
//! against no steering on the same questions and seeds, the τ sweep, the paper's numbers
//! beside ours — labelled — and a verdict per claim), `steering-mas.csv` (one row per
//! evaluation) and figures: F1 per row, cost per row (agent turns and interventions per task),
//! and the τ sweep.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::claims::tau_monotone_claim;
use crate::error::{Error, Result};
use crate::mas_pipeline::{MasEvaluation, MasMethod, MasProfile, MasRun};
use crate::report::{mean, seed_interval};
use hier_train::SharedErrors as _;
use hier_train::charts::{Drawn, PALETTE, Series, draw_whiskers, grouped_bars, series_top};
use hier_train::metrics::{PairedDifference, paired_by_key, show_paired, verdict, verdict_small};
use hier_train::stages::{BackboneSpec, StageRecord, write_json};

/// The paper's pipeline results (METHODS.md B; F1 points over no steering; agent turns per
/// task), in its setting (Qwen2.5-7B-Instruct roles, a Qwen3-8B steering agent, the seven
/// QA benchmarks).
pub const PAPER: [(MasMethod, &str); 4] = [
    (MasMethod::None, "0 (reference), 9.2 agent turns/task"),
    (MasMethod::ZeroShot, "−1.04"),
    (MasMethod::Forced, "−7.14, 24.1 agent turns/task"),
    (
        MasMethod::Rl,
        "+3.90 and +5.34 (two settings), interventions on ≈ 25 % of turns",
    ),
];

/// The share of agent turns the paper's interventions cover.
pub const PAPER_COVERAGE: f64 = 0.25;

/// One evaluation, summarised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasRow {
    pub method: MasMethod,
    pub label: String,
    pub tau: Option<f64>,
    pub episodes: usize,
    /// F1 and EM in percent; the half-width of the 95 % t-interval over the seeds' means.
    pub f1: f64,
    pub f1_ci95: Option<f64>,
    pub em: f64,
    pub f1_by_hops: BTreeMap<usize, f64>,
    #[serde(default)]
    pub f1_by_set: BTreeMap<String, f64>,
    pub answered: f64,
    pub agent_turns_per_task: f64,
    pub interventions_per_task: f64,
    /// Half-widths of the 95 % t-intervals over the seeds' means of agent turns and
    /// interventions per task (≥ 2 seeds).
    #[serde(default)]
    pub agent_turns_ci95: Option<f64>,
    #[serde(default)]
    pub interventions_ci95: Option<f64>,
    /// Interventions per agent turn.
    pub coverage: f64,
    pub rejects_per_task: f64,
    pub rejects_refused_per_task: f64,
    pub sendbacks_per_task: f64,
    pub slow_path_runs_per_task: f64,
    /// Unreadable slow-path outputs among its runs.
    pub unreadable_share: Option<f64>,
    pub tokens_per_task: f64,
    /// F1 points over no steering on the same (question, seed) pairs, with a 95 % paired
    /// bootstrap interval; agent turns the same way.
    pub gain: Option<PairedDifference>,
    pub turns_change: Option<PairedDifference>,
}

/// Per (question, seed) values of `f`, in a fixed order.
fn paired<'a>(
    e: &'a MasEvaluation,
    f: impl Fn(&crate::mas_pipeline::MasResult) -> f64 + 'a,
) -> BTreeMap<(String, u64), f64> {
    e.results
        .iter()
        .map(|r| ((r.task.to_string(), r.seed), f(r)))
        .collect()
}

fn difference(
    base: &MasEvaluation,
    e: &MasEvaluation,
    f: impl Fn(&crate::mas_pipeline::MasResult) -> f64 + Copy,
) -> Option<PairedDifference> {
    paired_by_key(&paired(base, f), &paired(e, f))
}

/// Summarises one evaluation against the no-steering one (`base`).
pub fn row(e: &MasEvaluation, base: Option<&MasEvaluation>) -> MasRow {
    let r = &e.results;
    let n = r.len().max(1) as f64;
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
    let sum =
        |f: fn(&crate::mas_pipeline::MasResult) -> usize| r.iter().map(f).sum::<usize>() as f64;
    let turns = sum(|x| x.agent_turns);
    let interventions = sum(|x| x.interventions);
    let base = base.filter(|b| e.method != MasMethod::None || b.tau != e.tau);
    MasRow {
        method: e.method,
        label: e.method.label().into(),
        tau: e.tau,
        episodes: r.len(),
        f1: mean(r.iter().map(|x| 100.0 * x.f1)),
        f1_ci95: seed_interval(r, |x| x.seed, |x| 100.0 * x.f1),
        em: mean(r.iter().map(|x| 100.0 * x.em)),
        f1_by_hops: by_hops
            .into_iter()
            .map(|(h, v)| (h, mean(v.into_iter())))
            .collect(),
        f1_by_set: by_set
            .into_iter()
            .map(|(s, v)| (s, mean(v.into_iter())))
            .collect(),
        answered: mean(r.iter().map(|x| {
            if x.answer.as_deref().is_some_and(|a| !a.is_empty()) {
                100.0
            } else {
                0.0
            }
        })),
        agent_turns_per_task: turns / n,
        agent_turns_ci95: seed_interval(r, |x| x.seed, |x| x.agent_turns as f64),
        interventions_per_task: interventions / n,
        interventions_ci95: seed_interval(r, |x| x.seed, |x| x.interventions as f64),
        coverage: interventions / turns.max(1.0),
        rejects_per_task: sum(|x| x.rejects_executed) / n,
        rejects_refused_per_task: sum(|x| x.rejects_refused) / n,
        sendbacks_per_task: sum(|x| x.sendbacks) / n,
        slow_path_runs_per_task: e.slow_path_runs as f64 / n,
        unreadable_share: (e.slow_path_runs > 0)
            .then(|| e.unreadable as f64 / e.slow_path_runs as f64),
        tokens_per_task: sum(|x| x.tokens) / n,
        gain: base.and_then(|b| difference(b, e, |x| 100.0 * x.f1)),
        turns_change: base.and_then(|b| difference(b, e, |x| x.agent_turns as f64)),
    }
}

/// Every row, gains against the no-steering evaluation.
pub fn rows(run: &MasRun) -> Vec<MasRow> {
    let base = run.evaluations.iter().find(|e| e.method == MasMethod::None);
    run.evaluations.iter().map(|e| row(e, base)).collect()
}

fn fmt(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".into(),
    }
}

fn main_rows<'a>(rows: &'a [MasRow], p: &MasProfile) -> Vec<&'a MasRow> {
    rows.iter()
        .filter(|r| !r.method.gated() || r.tau == Some(p.steer.tau))
        .collect()
}

fn sweep_rows(rows: &[MasRow]) -> Vec<&MasRow> {
    let mut s: Vec<&MasRow> = rows.iter().filter(|r| r.method == MasMethod::Rl).collect();
    s.sort_by(|a, b| a.tau.partial_cmp(&b.tau).expect("finite τ"));
    s
}

/// The claims of METHODS.md B about the pipeline, with our numbers and a verdict.
fn claims(p: &MasProfile, rows: &[MasRow]) -> Vec<(String, String, String)> {
    let at = |m: MasMethod| {
        rows.iter()
            .find(|r| r.method == m && (!m.gated() || r.tau == Some(p.steer.tau)))
    };
    let mut out = Vec::new();
    // With every F1 at 0 no difference in F1 can show.
    let floor = at(MasMethod::None).is_some_and(|b| b.f1 == 0.0);
    let verdict = |d: &Option<PairedDifference>, positive: bool, f1: f64| -> String {
        if floor && f1 == 0.0 {
            "no power (F1 is 0 with and without)".into()
        } else {
            verdict(d, positive).into()
        }
    };
    if let Some(f) = at(MasMethod::Forced) {
        out.push((
            "Forced intervention at every handoff hurts (paper −7.14 F1)".into(),
            show_paired(&f.gain, 2),
            verdict(&f.gain, false, f.f1),
        ));
        out.push((
            "… and raises agent turns (paper 9.2 → 24.1 per task)".into(),
            show_paired(&f.turns_change, 2),
            self::verdict(&f.turns_change, true).into(),
        ));
    }
    if let Some(z) = at(MasMethod::ZeroShot) {
        let v = match &z.gain {
            _ if floor && z.f1 == 0.0 => "no power (F1 is 0 with and without)".into(),
            d => verdict_small(d, 3.0),
        };
        out.push((
            "Zero-shot steering changes little (paper −1.04; read: within ±3 points)".into(),
            show_paired(&z.gain, 2),
            v,
        ));
    }
    if let Some(r) = at(MasMethod::Rl) {
        out.push((
            "RL steering helps (paper +3.90 / +5.34)".into(),
            show_paired(&r.gain, 2),
            verdict(&r.gain, true, r.f1),
        ));
        out.push((
            format!(
                "Interventions on ≈ {:.0} % of agent turns at the main τ",
                100.0 * PAPER_COVERAGE
            ),
            format!("{:.1} % at τ = {}", 100.0 * r.coverage, p.steer.tau),
            "measured (τ is a deployment knob: see the sweep)".into(),
        ));
    }
    let sweep = sweep_rows(rows);
    if sweep.len() >= 2 {
        out.push(tau_monotone_claim(
            &sweep
                .iter()
                .map(|r| (r.tau, r.interventions_per_task))
                .collect::<Vec<_>>(),
        ));
    }
    out
}

fn describe_backbone(b: &BackboneSpec) -> String {
    match b {
        BackboneSpec::Hf { path } => format!("`{}`", path.display()),
        BackboneSpec::Pretrain { model, train } => format!(
            "a {}-layer, {}-wide Llama-style model pre-trained from scratch on the passages ({} steps)",
            model.num_hidden_layers, model.hidden_size, train.steps
        ),
    }
}

fn markdown(p: &MasProfile, run: &MasRun, rows: &[MasRow], stages: &[StageRecord]) -> String {
    let mut md = format!(
        "# Steering the multi-agent pipeline — profile `{}`\n\n\
         Five roles (planner → searcher → researcher → verifier → summariser), each {} as it is \
         ({}); the steering agent is a LoRA adapter on the same base, acting at every handoff: \
         pass, a note added to the message, or a rejection the sender redoes (at most {} per \
         task; the verifier sends work back at most {} times). {} questions × {} seeds, the same \
         for every row. Wall time {:.1} min. F1 ± the 95 % t-interval over seeds; gains are \
         paired differences against no steering on the same (question, seed) pairs with a 95 % \
         bootstrap interval.\n\n",
        p.name,
        describe_backbone(&p.backbone),
        if p.chat { "chat template" } else { "raw text" },
        p.mas.max_retries,
        p.mas.max_sendbacks,
        rows.first()
            .map_or(0, |r| r.episodes / p.eval.seeds.len().max(1)),
        p.eval.seeds.len(),
        run.wall_seconds / 60.0,
    );
    md.push_str("| Row | τ | F1 | EM | Gain in F1 [95 %] | Agent turns/task | Δ turns [95 %] | Interventions/task | Share of turns | Rejections/task (refused) | Unreadable | Tokens/task |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in main_rows(rows, p) {
        md.push_str(&format!(
            "| {} | {} | {:.2} ± {} | {:.2} | {} | {:.2} | {} | {:.2} | {:.1} % | {:.2} ({:.2}) | {} | {:.0} |\n",
            r.label,
            fmt(r.tau, 2),
            r.f1,
            fmt(r.f1_ci95, 2),
            r.em,
            show_paired(&r.gain, 2),
            r.agent_turns_per_task,
            show_paired(&r.turns_change, 2),
            r.interventions_per_task,
            100.0 * r.coverage,
            r.rejects_per_task,
            r.rejects_refused_per_task,
            r.unreadable_share.map_or("–".into(), |u| format!("{:.0} %", 100.0 * u)),
            r.tokens_per_task,
        ));
    }
    let sweep = sweep_rows(rows);
    if !sweep.is_empty() {
        let nearest = sweep
            .iter()
            .min_by(|a, b| {
                (a.coverage - PAPER_COVERAGE)
                    .abs()
                    .total_cmp(&(b.coverage - PAPER_COVERAGE).abs())
            })
            .and_then(|r| r.tau);
        md.push_str("\n## τ sweep of the RL agent (no retraining)\n\n| τ | F1 | Gain [95 %] | Interventions/task | Share of turns | Gain per intervention |\n|---|---|---|---|---|---|\n");
        for r in sweep {
            let per = r
                .gain
                .filter(|_| r.interventions_per_task > 0.0)
                .map(|g| g.mean / r.interventions_per_task);
            md.push_str(&format!(
                "| {}{} | {:.2} ± {} | {} | {:.2} | {:.1} % | {} |\n",
                fmt(r.tau, 2),
                if r.tau == nearest && r.coverage > 0.0 {
                    " (≈ 25 %)"
                } else {
                    ""
                },
                r.f1,
                fmt(r.f1_ci95, 2),
                show_paired(&r.gain, 2),
                r.interventions_per_task,
                100.0 * r.coverage,
                fmt(per, 2),
            ));
        }
    }
    let hops: Vec<usize> = rows
        .iter()
        .flat_map(|r| r.f1_by_hops.keys().copied())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let sets: Vec<String> = rows
        .iter()
        .flat_map(|r| r.f1_by_set.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !hops.is_empty() || !sets.is_empty() {
        md.push_str("\n## F1 by hop count / test set\n\n| Row | τ |");
        for h in &hops {
            md.push_str(&format!(" {h}-hop |"));
        }
        for s in &sets {
            md.push_str(&format!(" {s} |"));
        }
        md.push_str(&format!(
            "\n|---|---|{}\n",
            "---|".repeat(hops.len() + sets.len())
        ));
        for r in main_rows(rows, p) {
            md.push_str(&format!("| {} | {} |", r.label, fmt(r.tau, 2)));
            for h in &hops {
                md.push_str(&format!(" {} |", fmt(r.f1_by_hops.get(h).copied(), 1)));
            }
            for s in &sets {
                md.push_str(&format!(" {} |", fmt(r.f1_by_set.get(s).copied(), 1)));
            }
            md.push('\n');
        }
    }
    md.push_str(
        "\n## The paper's claims, measured here\n\n| Claim | Ours | Verdict |\n|---|---|---|\n",
    );
    for (c, ours, v) in claims(p, rows) {
        md.push_str(&format!("| {c} | {ours} | {v} |\n"));
    }
    md.push_str("\n## The paper's numbers (its setting, not ours)\n\n| Row | Paper |\n|---|---|\n");
    for (m, v) in PAPER {
        md.push_str(&format!("| {} | {v} |\n", m.label()));
    }
    md.push_str(&format!(
        "\nThe bank's unsteered episodes took {:.1} agent turns per task.\n",
        run.bank_turns_per_task
    ));
    md.push_str(&crate::report::training_table(&run.curve, run.bank_states));
    md.push_str(&crate::report::stages_table(stages));
    md
}

fn csv(rows: &[MasRow]) -> String {
    let mut s = String::from(
        "method,tau,episodes,f1,f1_ci95,em,gain,gain_lo,gain_hi,agent_turns_per_task,turns_change,interventions_per_task,coverage,rejects_per_task,rejects_refused_per_task,sendbacks_per_task,slow_path_runs_per_task,unreadable_share,tokens_per_task\n",
    );
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.4}"));
    for r in rows {
        s.push_str(&format!(
            "{},{},{},{:.4},{},{:.4},{},{},{},{:.4},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{},{:.1}\n",
            r.method,
            o(r.tau),
            r.episodes,
            r.f1,
            o(r.f1_ci95),
            r.em,
            o(r.gain.map(|g| g.mean)),
            o(r.gain.map(|g| g.lo)),
            o(r.gain.map(|g| g.hi)),
            r.agent_turns_per_task,
            o(r.turns_change.map(|g| g.mean)),
            r.interventions_per_task,
            r.coverage,
            r.rejects_per_task,
            r.rejects_refused_per_task,
            r.sendbacks_per_task,
            r.slow_path_runs_per_task,
            o(r.unreadable_share),
            r.tokens_per_task,
        ));
    }
    s
}

/// Writes `steering-mas.{json,md,csv}` and the figures into `out`.
pub fn write_all(out: &Path, p: &MasProfile, run: &MasRun, stages: &[StageRecord]) -> Result<()> {
    let rows = rows(run);
    let json = serde_json::json!({
        "profile": p.name,
        "wall_seconds": run.wall_seconds,
        "rows": rows,
        "claims": claims(p, &rows),
        "paper": PAPER.iter().map(|(m, v)| (m.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        "curve": run.curve,
        "bank_states": run.bank_states,
        "bank_turns_per_task": run.bank_turns_per_task,
        "evaluations": run.evaluations,
        "stages": stages,
    });
    write_json(&out.join("steering-mas.json"), &json)?;
    hier_backbone::write_atomic(
        &out.join("steering-mas.md"),
        markdown(p, run, &rows, stages).as_bytes(),
    )?;
    hier_backbone::write_atomic(&out.join("steering-mas.csv"), csv(&rows).as_bytes())?;
    draw(out, p, &rows)
}

/// Writes the report of a finished run in `dir` again — `steering-mas.{json,md,csv}` and the
/// figures — from its `steering-mas.json` and `profile.resolved.toml`
/// ([`crate::report::rewrite`]'s counterpart).
pub fn rewrite(dir: &Path) -> Result<()> {
    let p = MasProfile::from_file(&dir.join(hier_train::stages::RESOLVED_PROFILE))?;
    let r: crate::report::Recorded<MasRun> =
        crate::report::read_recorded(dir, "steering-mas", &p.name)?;
    write_all(dir, &p, &r.run, &r.stages)
}

fn draw(out: &Path, p: &MasProfile, rows: &[MasRow]) -> Result<()> {
    let Some(dir) = crate::report::figures_dir(out, "steering-mas")? else {
        return Ok(());
    };
    let main = main_rows(rows, p);
    let groups: Vec<String> = main.iter().map(|r| r.method.name().to_owned()).collect();
    let f1_max = main
        .iter()
        .map(|r| r.f1 + r.f1_ci95.unwrap_or(0.0))
        .fold(0.0f64, f64::max);
    let title = if f1_max <= 0.0 {
        "F1 per row (all 0 %)".to_owned()
    } else {
        "F1 per row (95 % t-interval over seeds)".to_owned()
    };
    let series: Vec<Series> = vec![(
        "F1 %".into(),
        main.iter().map(|r| (r.f1, r.f1_ci95)).collect(),
    )];
    let drawn = grouped_bars(
        &dir.join("f1.png"),
        &title,
        "F1 (%)",
        (f1_max * 1.25).max(5.0),
        &groups,
        &series,
    );
    drawn.map_err(|e| Error::figure(format!("{}: {e}", dir.join("f1.png").display())))?;
    let series: Vec<Series> = vec![
        (
            "agent turns / task".into(),
            main.iter()
                .map(|r| (r.agent_turns_per_task, r.agent_turns_ci95))
                .collect(),
        ),
        (
            "interventions / task".into(),
            main.iter()
                .map(|r| (r.interventions_per_task, r.interventions_ci95))
                .collect(),
        ),
    ];
    grouped_bars(
        &dir.join("cost.png"),
        "Cost per task (95 % t-interval over seeds)",
        "per task",
        (series_top(&series, f64::INFINITY) * 1.25).max(1.0),
        &groups,
        &series,
    )
    .map_err(|e| Error::figure(format!("{}: {e}", dir.join("cost.png").display())))?;
    let sweep = sweep_rows(rows);
    if sweep.len() >= 2 {
        tau_sweep(&dir.join("tau_sweep.png"), &sweep)
            .map_err(|e| Error::figure(format!("{}: {e}", dir.join("tau_sweep.png").display())))?;
    }
    Ok(())
}

/// Gain in F1 (with its paired interval) against the share of agent turns intervened on, one
/// point per τ, labelled.
fn tau_sweep(path: &Path, rows: &[&MasRow]) -> Drawn {
    let root = BitMapBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let pts: Vec<(f64, PairedDifference, String)> = rows
        .iter()
        .filter_map(|r| Some((100.0 * r.coverage, r.gain?, format!("τ={}", fmt(r.tau, 2)))))
        .collect();
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.2;
    let (lo, hi) = pts.iter().fold((-1.0f64, 1.0f64), |(a, b), p| {
        (a.min(p.1.lo), b.max(p.1.hi))
    });
    let pad = 0.1 * (hi - lo);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "τ sweep: gain over no steering (95 % paired interval)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..xmax, (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .x_desc("interventions, % of agent turns")
        .y_desc("gain in F1 (points)")
        .label_style(("sans-serif", 13))
        .draw()?;
    let color = PALETTE[0];
    let mut line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1.mean)).collect();
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
    draw_whiskers(
        &mut chart,
        pts.iter().map(|(x, d, _)| (*x, d.lo, d.hi)),
        BLACK.stroke_width(1),
    )?;
    chart.draw_series(
        pts.iter()
            .map(|(x, d, _)| Circle::new((*x, d.mean), 4, color.filled())),
    )?;
    // Labels beside their marks (6 px right, 16 px up), not on them.
    chart.draw_series(pts.iter().map(|(x, d, l)| {
        EmptyElement::at((*x, d.mean)) + Text::new(l.clone(), (6, -16), ("sans-serif", 12))
    }))?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 0.0), (xmax, 0.0)],
        BLACK.mix(0.4).stroke_width(1),
    )))?;
    root.present()?;
    Ok(())
}
