//! PNG figures of `reproduce table1` (plotters, bitmap backend): success per column and
//! method with 95 % intervals, success by difficulty, the offline → online learning curve,
//! token efficiency (success and mean score against tokens per episode, bubbles labelled with
//! success per token relative to ReAct) and the ablation box plots.
//!
//! Text needs a TrueType font, read at run time (nothing is committed or downloaded): the file
//! named by `HIER_FONT`, else the first of the usual system locations of DejaVu Sans /
//! Liberation Sans / Arial. Without one, no figure is drawn and `figures/NO_FONT.txt` says why
//! (the tables are complete either way).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hier_envs::Split;
use plotters::prelude::*;

use hier_train::charts::{
    Drawn, PALETTE, Series, draw_labels_beside, draw_whiskers, ensure_font, grouped_bars_bounded,
    headroom,
};
use hier_train::metrics::{Terciles, estimate, success_over_seeds};

use crate::envs::{EnvKind, split_label};
use crate::error::{Error, Result};
use crate::online_rl::CurvePoint;
use crate::table1::profile::{Method, Profile};
use crate::table1::results::{AblationRow, Cell};
use hier_train::SharedErrors as _;

/// Draws every figure into `<out>/figures/`.
pub fn draw_all(
    out: &Path,
    profile: &Profile,
    cells: &[Cell],
    curves: &BTreeMap<String, Vec<CurvePoint>>,
    efficiency: &BTreeMap<String, f64>,
    ablations: &[AblationRow],
) -> Result<()> {
    let dir = out.join("figures");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    if let Err(why) = ensure_font() {
        tracing::warn!("figures not drawn: {why}");
        let text = format!(
            "Figures were not drawn: {why}.\nThe tables (table1.md/json/csv) are complete.\n"
        );
        return Ok(hier_backbone::write_atomic(
            &dir.join("NO_FONT.txt"),
            text.as_bytes(),
        )?);
    }
    let e = |e: Box<dyn std::error::Error>| Error::figure(e.to_string());
    success_bars(&dir.join("success.png"), profile, cells).map_err(e)?;
    difficulty_bars(&dir.join("difficulty.png"), profile, cells).map_err(e)?;
    if !curves.is_empty() {
        learning_curve(&dir.join("learning_curve.png"), curves).map_err(e)?;
    }
    token_efficiency(
        &dir.join("token_efficiency.png"),
        profile,
        cells,
        efficiency,
    )
    .map_err(e)?;
    if !ablations.is_empty() {
        ablation_boxes(&dir.join("ablations.png"), ablations).map_err(e)?;
    }
    Ok(())
}

fn success_bars(path: &Path, profile: &Profile, cells: &[Cell]) -> Drawn {
    let mut cols: Vec<(EnvKind, Split)> = Vec::new();
    for c in cells {
        if !cols.iter().any(|(e, s)| *e == c.env && *s == c.split) {
            cols.push((c.env, c.split));
        }
    }
    let groups: Vec<String> = cols.iter().map(|(e, s)| e.column_label(*s)).collect();
    let series: Vec<Series> = profile
        .methods
        .iter()
        .map(|m| {
            let v = cols
                .iter()
                .map(|(e, s)| {
                    cells
                        .iter()
                        .find(|c| &c.method == m && &c.env == e && c.split == *s)
                        .map_or((f64::NAN, None), |c| {
                            let (e, _) = c.success_interval();
                            (e.mean, e.half_width)
                        })
                })
                .collect();
            (m.label().to_string(), v)
        })
        .collect();
    grouped_bars_bounded(
        path,
        &format!(
            "Success per split (profile {}), 95% t-intervals {}",
            profile.name,
            interval_over(cells)
        ),
        "success %",
        headroom(&series, 100.0),
        100.0,
        &groups,
        &series,
    )
}

/// What the bars' intervals are taken over, read from the cells (`Cell::success_interval`):
/// evaluation seeds, or — for a method evaluated with one seed (Reflexion's own seeds may be
/// fewer than the others') — that seed's episodes, named.
fn interval_over(cells: &[Cell]) -> String {
    let mut single: Vec<&str> = Vec::new();
    for c in cells {
        if c.success_interval().1 && !single.contains(&c.method.label()) {
            single.push(c.method.label());
        }
    }
    let methods = cells
        .iter()
        .map(|c| c.method.label())
        .collect::<BTreeSet<_>>();
    match single.len() {
        0 => "over seeds".into(),
        n if n == methods.len() => "over episodes (1 seed)".into(),
        _ => format!("over seeds; {} over episodes (1 seed)", single.join(", ")),
    }
}

/// Success % of `cell`'s episodes per seed at each difficulty (terciles of the expert's path
/// length over the cell's tasks): `[easy, medium, hard]`, each seed → (successes, episodes).
fn by_difficulty_per_seed(cell: &Cell) -> [BTreeMap<u64, (usize, usize)>; 3] {
    let mut out: [BTreeMap<u64, (usize, usize)>; 3] = Default::default();
    let lengths: Vec<usize> = cell.results.iter().filter_map(|r| r.expert_steps).collect();
    let Some(t) = Terciles::of(&lengths) else {
        return out;
    };
    for r in &cell.results {
        let Some(l) = r.expert_steps else { continue };
        let e = out[t.classify(l) as usize].entry(r.seed).or_default();
        e.0 += usize::from(r.success);
        e.1 += 1;
    }
    out
}

fn difficulty_bars(path: &Path, profile: &Profile, cells: &[Cell]) -> Drawn {
    // ID and OOD apart: difficulty is read per column, the columns of one split pooled.
    let splits: Vec<Split> = [Split::Id, Split::Ood]
        .into_iter()
        .filter(|s| cells.iter().any(|c| c.split == *s))
        .collect();
    let groups: Vec<String> = splits
        .iter()
        .flat_map(|s| {
            let split = split_label(*s);
            ["Easy", "Medium", "Hard"].map(|d| format!("{split} {d} (pooled)"))
        })
        .collect();
    // Each method is pooled over the environments it ran; where those differ between
    // methods, its legend entry names them, so that a pool of three environments is not read
    // as comparable with a pool of one.
    let envs_of = |m: &Method| -> Vec<&'static str> {
        let mut envs: Vec<&'static str> = Vec::new();
        for c in cells.iter().filter(|c| &c.method == m) {
            let label = c.env.spec().label;
            if !envs.contains(&label) {
                envs.push(label);
            }
        }
        envs
    };
    let covered: Vec<Vec<&str>> = profile.methods.iter().map(envs_of).collect();
    let ran: Vec<&Vec<&str>> = covered.iter().filter(|e| !e.is_empty()).collect();
    let coverage_differs = ran.windows(2).any(|w| w[0] != w[1]);
    let series: Vec<Series> = (profile.methods.iter().zip(&covered))
        .map(|(m, envs)| {
            let label = if coverage_differs && !envs.is_empty() {
                format!("{} ({})", m.label(), envs.join(", "))
            } else {
                m.label().to_string()
            };
            let v = splits
                .iter()
                .flat_map(|split| (0..3).map(move |d| (*split, d)))
                .map(|(split, d)| {
                    let mut per_seed: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
                    for c in cells.iter().filter(|c| &c.method == m && c.split == split) {
                        for (seed, (k, n)) in &by_difficulty_per_seed(c)[d] {
                            let e = per_seed.entry(*seed).or_default();
                            e.0 += k;
                            e.1 += n;
                        }
                    }
                    if per_seed.is_empty() {
                        (f64::NAN, None)
                    } else {
                        let (e, _) =
                            success_over_seeds(&per_seed.into_values().collect::<Vec<_>>());
                        (e.mean, e.half_width)
                    }
                })
                .collect();
            (label, v)
        })
        .collect();
    grouped_bars_bounded(
        path,
        &format!(
            "Success by difficulty (expert-length terciles), 95% t-intervals {}",
            interval_over(cells)
        ),
        "success %",
        headroom(&series, 100.0),
        100.0,
        &groups,
        &series,
    )
}

/// The 95 % Wilson interval of a success rate `p` from `n` episodes, as (lo, hi).
fn wilson(p: f64, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (z, n) = (1.96f64, n as f64);
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn learning_curve(path: &Path, curves: &BTreeMap<String, Vec<CurvePoint>>) -> Drawn {
    let root = BitMapBackend::new(path, (960, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = curves.values().map(Vec::len).max().unwrap_or(1).max(2);
    // The y axis fits the whiskers and the scores (a fixed −20–100 frame flattens a curve of
    // a few points), at least 0–10, at most the 100 % bound.
    let (mut y_lo, mut y_hi) = (0.0f64, 10.0f64);
    for p in curves.values().flatten() {
        let (_, hi) = wilson(p.success_rate, p.episodes);
        y_hi = y_hi.max(100.0 * hi).max(100.0 * p.mean_score);
        y_lo = y_lo.min(100.0 * p.mean_score);
    }
    let (y_lo, y_hi) = (y_lo - 0.05 * (y_hi - y_lo), (1.1 * y_hi).min(105.0));
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Multi² offline → online: success % (solid, 95% Wilson intervals), mean score × 100 (dashed)",
            ("sans-serif", 17),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        // Padded so the first iteration's whisker is not cut by the frame, and on the right
        // so the legend (upper right) sits beside the last iteration's whisker, not over it.
        .build_cartesian_2d(
            -0.15f64..(n - 1) as f64 * 1.3 + 0.3,
            y_lo..y_hi,
        )?;
    chart
        .configure_mesh()
        .x_desc("online iteration (0 = offline policy)")
        .x_labels(n)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("success % / score × 100")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, (env, points)) in curves.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                points
                    .iter()
                    .map(|p| (p.iteration as f64, 100.0 * p.success_rate)),
                color.stroke_width(2),
            ))?
            .label(env.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        // Each iteration's success with its 95 % Wilson interval over its episodes.
        draw_whiskers(
            &mut chart,
            points.iter().map(|p| {
                let (lo, hi) = wilson(p.success_rate, p.episodes);
                (p.iteration as f64, 100.0 * lo, 100.0 * hi)
            }),
            color.stroke_width(2),
        )?;
        // A mark on every iteration, so a curve lying on 0 is still seen to be there.
        chart.draw_series(points.iter().map(|p| {
            Circle::new(
                (p.iteration as f64, 100.0 * p.success_rate),
                4,
                color.filled(),
            )
        }))?;
        chart.draw_series(DashedLineSeries::new(
            points
                .iter()
                .map(|p| (p.iteration as f64, 100.0 * p.mean_score)),
            6,
            4,
            color.stroke_width(2),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

/// A point's mean and 95 % half-width (none for a single seed).
type Point = (f64, Option<f64>);

/// One panel of [`token_efficiency`]: its area, quantity, the values the quantity can take,
/// y range and points.
type Panel<'a, DB> = (
    &'a DrawingArea<DB, plotters::coord::Shift>,
    &'a str,
    (f64, f64),
    f64,
    f64,
    &'a [Point],
);

/// Success (left) and mean final score (right) against tokens per episode on the ID column
/// where most methods ran (ScienceWorld ID, the paper's figure, on ties); each bubble is a
/// method, labelled with its success per token relative to ReAct (`n/a` where undefined).
fn token_efficiency(
    path: &Path,
    profile: &Profile,
    cells: &[Cell],
    efficiency: &BTreeMap<String, f64>,
) -> Drawn {
    // The ID column where most methods ran; on ties the registry's first (ScienceWorld, the
    // paper's figure).
    let Some((env, split)) = (crate::envs::REGISTRY.iter().enumerate())
        .map(|(i, s)| {
            let ran = (cells.iter())
                .filter(|c| c.env == s.kind && c.split == Split::Id)
                .count();
            (ran, std::cmp::Reverse(i), (s.kind, Split::Id))
        })
        .filter(|(ran, _, _)| *ran > 0)
        .max_by_key(|(ran, i, _)| (*ran, *i))
        .map(|(_, _, column)| column)
    else {
        return Ok(());
    };
    let here: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.env == env && c.split == split)
        .collect();
    let root = BitMapBackend::new(path, (1200, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let (panels_area, note_area) = root.split_vertically(516);
    let (left, right) = panels_area.split_horizontally(600);
    // Tokens span orders of magnitude (Reflexion pays for six trials): a log axis, in
    // thousands. It starts at a power of ten — plotters labels a log axis from the first one in
    // its range, so a range starting above it would leave its lowest bubbles without numbers —
    // which also leaves room for labels left of them; it ends a little above the last bubble.
    let kilo: Vec<f64> = here
        .iter()
        .map(|c| c.summary.mean_tokens / 1000.0)
        .collect();
    let lowest = kilo.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3);
    let (x_lo, x_hi) = (
        10f64.powf((lowest / 1.5).log10().floor()),
        kilo.iter().copied().fold(0.0, f64::max).max(1e-3) * 1.5,
    );
    // Each panel's points first (mean, 95 % t half-width over seeds: the cell's own for
    // success, the per-seed mean scores' for the score), so its axis fits them and their bars.
    let success: Vec<Point> = here
        .iter()
        .map(|c| (c.summary.success.mean, c.summary.success.half_width))
        .collect();
    let score: Vec<Point> = here
        .iter()
        .map(|c| {
            let mut per_seed: BTreeMap<u64, (f64, usize)> = BTreeMap::new();
            for r in &c.results {
                let e = per_seed.entry(r.seed).or_default();
                e.0 += r.score;
                e.1 += 1;
            }
            let means: Vec<f64> = per_seed.values().map(|(s, n)| s / *n as f64).collect();
            (c.summary.mean_score, estimate(&means).half_width)
        })
        .collect();
    let (s_lo, s_hi) = success_axis(&success);
    let (sc_lo, sc_hi) = score_axis(&score);
    let panels: [Panel<'_, _>; 2] = [
        (&left, "success %", (0.0, 100.0), s_lo, s_hi, &success),
        (
            &right,
            "mean final score",
            env.score_range(),
            sc_lo,
            sc_hi,
            &score,
        ),
    ];
    for (area, what, bounds, lo, hi, points) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} vs tokens ({})", what, env.column_label(split)),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), lo..hi)?;
        chart
            .configure_mesh()
            .x_desc("thousand tokens per episode (log scale)")
            .x_labels(12)
            .x_label_formatter(&log_tick_label)
            .y_desc(what)
            .label_style(("sans-serif", 13))
            .draw()?;
        let mut labels = Vec::new();
        let mut whiskers = Vec::new();
        for (i, m) in profile.methods.iter().enumerate() {
            let Some(j) = here.iter().position(|c| &c.method == m) else {
                continue;
            };
            let c = here[j];
            let color = PALETTE[i % PALETTE.len()];
            let (y, half) = points[j];
            let x = c.summary.mean_tokens / 1000.0;
            if let Some(h) = half {
                // Clamped to what the quantity can be (a success rate lies in 0–100 %, a score
                // in the environment's range) and to the frame.
                let (floor, ceiling) = bounds;
                let whisker = (x, (y - h).max(floor).max(lo), (y + h).min(ceiling).min(hi));
                draw_whiskers(&mut chart, [whisker], color.stroke_width(2))?;
                whiskers.push(whisker);
            }
            chart.draw_series(std::iter::once(Circle::new(
                (x, y),
                BUBBLE_PX,
                color.mix(0.6).filled(),
            )))?;
            // Success per token relative to ReAct; undefined (the note below says so) where
            // either solved nothing.
            let label = match efficiency.get(&format!("{m}/{env}/{split:?}")) {
                Some(v) => format!("{}: {v:.2} × ReAct", m.label()),
                None => format!("{}: n/a", m.label()),
            };
            labels.push(((x, y), label, ("sans-serif", 13).into_font().color(&color)));
        }
        draw_labels_beside(&mut chart, &labels, BUBBLE_PX, &whiskers)?;
    }
    note_area.draw(&Text::new(
        "Labels: success per token relative to ReAct's (n/a where ReAct or the method solved \
         nothing). Whiskers: 95 % t-intervals over evaluation seeds.",
        (14, 2),
        ("sans-serif", 13).into_font().color(&BLACK.mix(0.7)),
    ))?;
    root.present()?;
    Ok(())
}

/// A log axis's tick label: 1, 2, 3 and 5 times a power of ten (`0.5`, `2`, `30`), nothing at
/// the ticks between (their labels would run into each other at the top of each decade).
fn log_tick_label(x: &f64) -> String {
    let decade = 10f64.powf(x.log10().floor());
    let lead = x / decade;
    if ![1.0, 2.0, 3.0, 5.0].iter().any(|m| (lead - m).abs() < 1e-6) {
        return String::new();
    }
    // As many decimals as the decade needs: 0.3, not 0.30000000000000004.
    let decimals = (-decade.log10()).round().max(0.0) as usize;
    format!("{x:.decimals$}")
}

/// The radius of a method's bubble in [`token_efficiency`], in pixels.
const BUBBLE_PX: i32 = 9;

/// The highest whisker top and lowest whisker bottom of `(mean, 95 % half-width)` points, with 0
/// inside the range.
fn whisker_span(points: &[Point]) -> (f64, f64) {
    points.iter().fold((0.0, 0.0), |(lo, hi), (y, h)| {
        let h = h.unwrap_or(0.0);
        (f64::min(lo, y - h), f64::max(hi, y + h))
    })
}

/// A success-% axis for points: the bar charts' [`headroom`] above the highest whisker, at most
/// the 100 % bound (a 0–100 frame for cells of 0–8 % hides their differences), with a margin
/// so marks at 0 and at the top are not cut.
fn success_axis(points: &[Point]) -> (f64, f64) {
    let hi = headroom(&[(String::new(), points.to_vec())], 100.0).min(100.0) + 2.0;
    (-0.04 * hi, hi)
}

/// A score axis for points: their whiskers' span (at least 0.04 wide), a quarter of it above
/// (labels sit beside the marks) and a tenth below.
fn score_axis(points: &[Point]) -> (f64, f64) {
    let (lo, hi) = whisker_span(points);
    let span = (hi - lo).max(0.04);
    (lo - 0.1 * span, hi + 0.25 * span)
}

/// Quartiles by linear interpolation (NumPy's default).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, pos.fract());
    if i + 1 < sorted.len() {
        sorted[i] * (1.0 - f) + sorted[i + 1] * f
    } else {
        sorted[i]
    }
}

/// Box plots over training seeds, per variant two boxes side by side — ID (left) and OOD
/// (right), never averaged: success % (top) and mean final score (bottom); whiskers span
/// min–max, dots are the seeds.
fn ablation_boxes(path: &Path, rows: &[AblationRow]) -> Drawn {
    let mut variants: Vec<crate::table1::profile::Ablation> = Vec::new();
    for r in rows {
        if !variants.contains(&r.variant) {
            variants.push(r.variant);
        }
    }
    let root = BitMapBackend::new(path, (1200, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(400);
    let n = variants.len() as f64;
    let top_success = rows
        .iter()
        .flat_map(|r| r.success.iter().copied())
        .fold(0.0, f64::max);
    for (k, area) in [top, bottom].iter().enumerate() {
        let (what, lo, hi) = if k == 0 {
            (
                "success %",
                -0.05 * top_success.max(5.0),
                (1.15 * top_success).max(5.0),
            )
        } else {
            let (lo, hi) = padded_span(rows.iter().flat_map(|r| r.mean_score.iter().copied()));
            ("mean final score", lo, hi)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("Ablations: {what} over training seeds (left box ID, right box OOD)"),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..n, (lo - (hi - lo) * 0.1)..hi)?;
        // Two decimals on both panels, and a 0 that does not read "-0.0" (a tick computed a hair
        // below zero).
        let tick = |y: &f64| format!("{:.2}", if y.abs() < 1e-9 { 0.0 } else { *y });
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(what)
            .y_label_formatter(&tick)
            .label_style(("sans-serif", 13))
            .draw()?;
        let below = TextStyle::from(("sans-serif", 11).into_font()).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ),
        );
        for r in rows {
            let i = variants
                .iter()
                .position(|v| *v == r.variant)
                .expect("collected above");
            let values = if k == 0 { &r.success } else { &r.mean_score };
            let mut v = values.clone();
            v.sort_by(f64::total_cmp);
            let (x, color) = match r.split {
                Split::Id => (i as f64 + 0.3, PALETTE[0]),
                _ => (i as f64 + 0.7, PALETTE[1]),
            };
            let w = 0.16;
            let (q1, q2, q3) = (quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75));
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x - w, q1), (x + w, q3)],
                color.mix(0.35).filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x - w, q1), (x + w, q3)],
                color.stroke_width(1),
            )))?;
            for seg in [
                vec![(x - w, q2), (x + w, q2)],
                vec![(x, v[0]), (x, q1)],
                vec![(x, q3), (x, v[v.len() - 1])],
            ] {
                chart.draw_series(std::iter::once(PathElement::new(
                    seg,
                    BLACK.stroke_width(2),
                )))?;
            }
            chart.draw_series(
                values
                    .iter()
                    .map(|&y| Circle::new((x, y), 3, BLACK.filled())),
            )?;
        }
        chart.draw_series(variants.iter().enumerate().map(|(i, v)| {
            Text::new(
                v.name(),
                (i as f64 + 0.5, lo - (hi - lo) * 0.01),
                below.clone(),
            )
        }))?;
    }
    root.present()?;
    Ok(())
}

/// A y range that fits `values` and 0 with a tenth of their span spare on each side (at least
/// 0.05, so equal values still get a scale): mean scores lie in [−1, 1] but a run's spread is a
/// small part of that, and a fixed [−1, 1] axis flattens every box into a line. 0 stays inside,
/// since a score's sign is part of what it says. (A NaN is passed over: `f64::min`/`max` keep
/// the other operand.)
fn padded_span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let points: Vec<Point> = values.map(|v| (v, None)).collect();
    let (lo, hi) = whisker_span(&points);
    let pad = (0.1 * (hi - lo)).max(0.05);
    (lo - pad, hi + pad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table1::profile::{Ablation, Method};
    use hier_train::eval::EpisodeResult;

    /// Episodes of 12 tasks × 3 seeds on one column; `won(task, seed)`.
    fn cell(method: Method, env: EnvKind, split: Split, won: impl Fn(u64, u64) -> bool) -> Cell {
        let results: Vec<EpisodeResult> = (0..12u64)
            .flat_map(|t| (0..3u64).map(move |s| (t, s)))
            .map(|(t, s)| EpisodeResult {
                task: hier_envs::Task::new(format!("{split:?}"), t),
                seed: s,
                success: won(t, s),
                score: if won(t, s) {
                    1.0
                } else {
                    0.1 * t as f64 / 12.0
                },
                steps: 5,
                tokens: 200 + 50 * t as usize,
                sys1_calls: 1,
                expert_steps: Some(1 + t as usize),
                pass1: None,
            })
            .collect();
        Cell::new(method, env, split, results)
    }

    /// The score panel's axis is scaled to the data (by hand: scores in [−0.8, 0.2] span 1, so
    /// 0.1 spare on each side; in [−0.25, 0.1] a tenth is 0.035, below the 0.05 floor), keeps 0
    /// in view, and never collapses.
    #[test]
    fn the_score_axis_fits_the_data_and_zero() {
        let (lo, hi) = padded_span([-0.8, 0.2, f64::NAN, 0.05].into_iter());
        assert!(
            (lo + 0.9).abs() < 1e-12 && (hi - 0.3).abs() < 1e-12,
            "{lo} {hi}"
        );
        let (lo, hi) = padded_span([-0.25, 0.1].into_iter());
        assert!(
            (lo + 0.3).abs() < 1e-12 && (hi - 0.15).abs() < 1e-12,
            "{lo} {hi}"
        );
        let (lo, hi) = padded_span([0.2, 0.3].into_iter());
        assert!(
            (lo + 0.05).abs() < 1e-12 && (hi - 0.35).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(padded_span(std::iter::empty()), (-0.05, 0.05));
    }

    /// The titles say what the intervals are over, from the cells: seeds; one seed's
    /// episodes; or seeds with the one-seed methods named (Reflexion with fewer seeds).
    #[test]
    fn the_interval_wording_follows_the_cells() {
        let (env, split) = (EnvKind::Textcraft, Split::Id);
        let three = |m| cell(m, env, split, |t, _| t < 3);
        let one = |m| {
            let mut c = three(m);
            c.results.retain(|r| r.seed == 0);
            c
        };
        let (m2, rf) = (Method::Multi2, Method::Reflexion);
        assert_eq!(interval_over(&[three(m2), three(rf)]), "over seeds");
        assert_eq!(interval_over(&[one(m2), one(rf)]), "over episodes (1 seed)");
        assert_eq!(
            interval_over(&[three(m2), one(rf)]),
            "over seeds; Reflexion over episodes (1 seed)"
        );
    }

    /// Every figure draws from hand-made cells (ID and OOD, an all-zero method, ablations over
    /// seeds, a learning curve); `HIER_FIGURES_OUT=<dir>` keeps them to look at.
    #[test]
    fn every_figure_draws_from_hand_made_cells() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let profile = Profile::from_file(&root.join("configs/table1/smoke.toml")).unwrap();
        let mut cells = Vec::new();
        for (env, split) in crate::envs::columns() {
            for (i, m) in profile.methods.iter().enumerate() {
                let k = i as u64;
                cells.push(cell(*m, env, split, move |t, s| {
                    (t + s + k) % 7 < 7 - k.min(6) && t < 9
                }));
            }
        }
        let curves: BTreeMap<String, Vec<CurvePoint>> = [(
            "textcraft".to_owned(),
            (0..4)
                .map(|i| CurvePoint {
                    iteration: i,
                    episodes: 8,
                    success_rate: 0.1 * i as f64,
                    mean_score: 0.2 * i as f64,
                })
                .collect(),
        )]
        .into();
        let ablations: Vec<AblationRow> = [Ablation::Multi2, Ablation::ParadigmSwap]
            .into_iter()
            .flat_map(|v| {
                [Split::Id, Split::Ood].map(|split| AblationRow {
                    variant: v,
                    split,
                    seeds: vec![0, 1, 2],
                    success: vec![10.0, 20.0, 35.0],
                    mean_score: vec![0.1, 0.3, 0.2],
                })
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let out = std::env::var_os("HIER_FIGURES_OUT")
            .map_or_else(|| dir.path().to_path_buf(), std::path::PathBuf::from);
        draw_all(
            &out,
            &profile,
            &cells,
            &curves,
            &BTreeMap::new(),
            &ablations,
        )
        .unwrap();
        let figures = out.join("figures");
        if figures.join("NO_FONT.txt").exists() {
            return;
        }
        for f in [
            "success.png",
            "difficulty.png",
            "learning_curve.png",
            "token_efficiency.png",
            "ablations.png",
        ] {
            assert!(figures.join(f).metadata().unwrap().len() > 1000, "{f}");
        }
        // A frame where every bar is 0 still draws (and says so).
        let zero: Vec<Cell> = cells
            .iter()
            .map(|c| cell(c.method, c.env, c.split, |_, _| false))
            .collect();
        success_bars(&figures.join("zero.png"), &profile, &zero).unwrap();
    }

    #[test]
    fn axes_fit_their_points_and_whiskers() {
        // Cells of 3 % and 5.3 ± 2.9 %: whisker top 8.2 → 1.25 × 8.2 + 2 = 12.25.
        let (lo, hi) = success_axis(&[(3.0, Some(0.0)), (5.3, Some(2.9)), (0.0, None)]);
        assert!(
            (hi - 12.25).abs() < 1e-9 && (lo + 0.49).abs() < 1e-9,
            "{lo} {hi}"
        );
        // All zero: still a 0–5 frame (plus margin); near 100: capped at the bound.
        assert_eq!(success_axis(&[(0.0, None)]).1, 7.0);
        assert_eq!(success_axis(&[(90.0, Some(8.0))]).1, 102.0);
        // Scores −0.1 ± 0.05 and 0.05: span [−0.15, 0.05] = 0.2 → [−0.17, 0.10].
        let (lo, hi) = score_axis(&[(-0.1, Some(0.05)), (0.05, None)]);
        assert!(
            (lo + 0.17).abs() < 1e-9 && (hi - 0.10).abs() < 1e-9,
            "{lo} {hi}"
        );
    }

    /// By hand: 8 of 10 → centre (0.8 + 0.192) / 1.384 = 0.7168, half-width
    /// 1.96·√(0.016 + 0.0096)/1.384 = 0.2266: [0.4902, 0.9433]; none of 0 is [0, 1].
    #[test]
    fn log_ticks_are_labelled_at_1_2_3_5_per_decade() {
        let labels: Vec<String> = [
            0.5,
            0.7,
            1.0,
            2.0,
            3.0,
            4.0,
            5.0,
            6.0,
            10.0,
            20.0,
            30.0,
            70.0,
            0.1 * 3.0,
        ]
        .iter()
        .map(log_tick_label)
        .collect();
        assert_eq!(
            labels,
            [
                "0.5", "", "1", "2", "3", "", "5", "", "10", "20", "30", "", "0.3"
            ]
        );
    }

    #[test]
    fn wilson_intervals_by_hand() {
        let (lo, hi) = wilson(0.8, 10);
        assert!(
            (lo - 0.4902).abs() < 1e-3 && (hi - 0.9433).abs() < 1e-3,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0.0, 0), (0.0, 1.0));
    }
}
