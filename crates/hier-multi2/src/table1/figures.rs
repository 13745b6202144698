//! PNG figures of `reproduce table1` (plotters, bitmap backend): success per column and
//! method with 95 % intervals, success by difficulty, the offline → online learning curve,
//! token efficiency (success and mean score against tokens per episode, bubbles labelled with
//! success per token relative to ReAct) and the ablation box plots.
//!
//! Text needs a TrueType font, read at run time (nothing is committed or downloaded): the file
//! named by `HIER_FONT`, else the first of the usual system locations of DejaVu Sans /
//! Liberation Sans / Arial. Without one, no figure is drawn and `figures/NO_FONT.txt` says why
//! (the tables are complete either way).

use std::collections::BTreeMap;
use std::path::Path;

use hier_envs::Split;
use plotters::prelude::*;

use hier_train::charts::{Drawn, PALETTE, Series, ensure_font, grouped_bars};

use crate::envs::EnvKind;
use crate::error::{Error, Result};
use crate::online_rl::CurvePoint;
use crate::table1::profile::Profile;
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
                            (c.summary.success.mean, c.summary.success.half_width)
                        })
                })
                .collect();
            (m.label().to_string(), v)
        })
        .collect();
    grouped_bars(
        path,
        &format!(
            "Success per split (profile {}), 95% intervals over seeds",
            profile.name
        ),
        "success %",
        100.0,
        &groups,
        &series,
    )
}

fn difficulty_bars(path: &Path, profile: &Profile, cells: &[Cell]) -> Drawn {
    let groups: Vec<String> = ["Easy", "Medium", "Hard"].map(String::from).to_vec();
    let series: Vec<Series> = profile
        .methods
        .iter()
        .map(|m| {
            let v = groups
                .iter()
                .map(|d| {
                    let xs: Vec<f64> = cells
                        .iter()
                        .filter(|c| &c.method == m)
                        .filter_map(|c| c.summary.by_difficulty.get(d).copied())
                        .collect();
                    if xs.is_empty() {
                        (f64::NAN, None)
                    } else {
                        (xs.iter().sum::<f64>() / xs.len() as f64, None)
                    }
                })
                .collect();
            (m.label().to_string(), v)
        })
        .collect();
    grouped_bars(
        path,
        "Success by difficulty (terciles of expert path length; mean over splits)",
        "success %",
        100.0,
        &groups,
        &series,
    )
}

fn learning_curve(path: &Path, curves: &BTreeMap<String, Vec<CurvePoint>>) -> Drawn {
    let root = BitMapBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = curves.values().map(Vec::len).max().unwrap_or(1).max(2);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Multi² offline → online: success % (solid), mean score × 100 (dashed)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..(n - 1) as f64, -20f64..100f64)?;
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
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Success (left) and mean final score (right) against tokens per episode on the first column
/// the paper's figure would use (ScienceWorld ID when it ran); each bubble is a method, labelled
/// with its success per token relative to ReAct (`n/a` where undefined).
fn token_efficiency(
    path: &Path,
    profile: &Profile,
    cells: &[Cell],
    efficiency: &BTreeMap<String, f64>,
) -> Drawn {
    let Some((env, split)) = crate::envs::REGISTRY
        .iter()
        .map(|s| (s.kind, Split::Id))
        .find(|(e, s)| cells.iter().any(|c| c.env == *e && c.split == *s))
    else {
        return Ok(());
    };
    let here: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.env == env && c.split == split)
        .collect();
    let root = BitMapBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(600);
    // Tokens span orders of magnitude (Reflexion pays for six trials): a log axis, in
    // thousands.
    let kilo: Vec<f64> = here
        .iter()
        .map(|c| c.summary.mean_tokens / 1000.0)
        .collect();
    let (x_lo, x_hi) = (
        kilo.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3) / 1.6,
        kilo.iter().copied().fold(0.0, f64::max).max(1e-3) * 3.0,
    );
    let scores: Vec<f64> = here.iter().map(|c| c.summary.mean_score).collect();
    let s_lo = scores.iter().copied().fold(0.0, f64::min) - 0.05;
    let s_hi = scores.iter().copied().fold(0.0, f64::max) + 0.1;
    let panels: [(&DrawingArea<_, _>, &str, f64, f64); 2] = [
        (&left, "success %", -5.0, 105.0),
        (&right, "mean final score", s_lo, s_hi),
    ];
    for (k, (area, what, lo, hi)) in panels.into_iter().enumerate() {
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
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_desc(what)
            .label_style(("sans-serif", 13))
            .draw()?;
        for (i, m) in profile.methods.iter().enumerate() {
            let Some(c) = here.iter().find(|c| &c.method == m) else {
                continue;
            };
            let color = PALETTE[i % PALETTE.len()];
            let y = if k == 0 {
                c.summary.success.mean
            } else {
                c.summary.mean_score
            };
            let x = c.summary.mean_tokens / 1000.0;
            let e = efficiency
                .get(&format!("{m}/{env}/{split:?}"))
                .map_or("n/a".to_owned(), |v| format!("{v:.2}"));
            chart.draw_series(std::iter::once(Circle::new(
                (x, y),
                9,
                color.mix(0.6).filled(),
            )))?;
            // Labels of nearby bubbles are stacked at different heights.
            chart.draw_series(std::iter::once(Text::new(
                format!("{} ({e})", m.label()),
                (x * 1.05, y + (hi - lo) * (0.03 + 0.045 * (i % 5) as f64)),
                ("sans-serif", 13).into_font().color(&color),
            )))?;
        }
    }
    root.present()?;
    Ok(())
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

/// Box plots over training seeds, one box per variant (each seed's value is the mean over the
/// splits): success % (top) and mean final score (bottom); whiskers span min–max, dots are
/// the seeds.
fn ablation_boxes(path: &Path, rows: &[AblationRow]) -> Drawn {
    let mut pooled: Vec<AblationRow> = Vec::new();
    for r in rows {
        match pooled.iter_mut().find(|p| p.variant == r.variant) {
            Some(p) => {
                for (i, s) in r.seeds.iter().enumerate() {
                    if let Some(j) = p.seeds.iter().position(|x| x == s) {
                        p.success[j] = (p.success[j] + r.success[i]) / 2.0;
                        p.mean_score[j] = (p.mean_score[j] + r.mean_score[i]) / 2.0;
                    }
                }
            }
            None => pooled.push(r.clone()),
        }
    }
    let rows = &pooled[..];
    let root = BitMapBackend::new(path, (1200, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(400);
    let n = rows.len() as f64;
    for (k, area) in [top, bottom].iter().enumerate() {
        let (what, lo, hi) = if k == 0 {
            ("success %", -5.0, 105.0)
        } else {
            ("mean final score", -1.05, 1.05)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("Ablations: {what} over training seeds"),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..n, (lo - (hi - lo) * 0.1)..hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(what)
            .label_style(("sans-serif", 13))
            .draw()?;
        let below = TextStyle::from(("sans-serif", 11).into_font()).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ),
        );
        for (i, r) in rows.iter().enumerate() {
            let values = if k == 0 { &r.success } else { &r.mean_score };
            let mut v = values.clone();
            v.sort_by(f64::total_cmp);
            let color = PALETTE[i % PALETTE.len()];
            let x = i as f64 + 0.5;
            let (q1, q2, q3) = (quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75));
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x - 0.3, q1), (x + 0.3, q3)],
                color.mix(0.35).filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x - 0.3, q1), (x + 0.3, q3)],
                color.stroke_width(1),
            )))?;
            for seg in [
                vec![(x - 0.3, q2), (x + 0.3, q2)],
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
            chart.draw_series(std::iter::once(Text::new(
                r.variant.name(),
                (x, lo - (hi - lo) * 0.01),
                below.clone(),
            )))?;
        }
    }
    root.present()?;
    Ok(())
}
