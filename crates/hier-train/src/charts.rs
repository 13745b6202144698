//! Chart primitives both pipelines draw with (plotters, bitmap backend): the font, the
//! palette, grouped bars with 95 % whiskers, capped whiskers for any chart.
//!
//! Text needs a TrueType font, read at run time (nothing is committed or downloaded): the file
//! named by `HIER_FONT`, else the first of the usual system locations of DejaVu Sans /
//! Liberation Sans / Arial. Without one, [`ensure_font`] says why and callers draw nothing.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// Why no figure can be drawn (no usable font).
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoFont(pub String);

const FONT_PATHS: [&str; 6] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

fn font_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HIER_FONT") {
        return Some(PathBuf::from(p));
    }
    FONT_PATHS.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Registers the font once per process; `Err` explains why figures cannot be drawn.
pub fn ensure_font() -> Result<(), NoFont> {
    static DONE: std::sync::OnceLock<Result<(), NoFont>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let path = font_path().ok_or_else(|| {
            NoFont(format!(
                "no TrueType font found (set HIER_FONT, or install one of {FONT_PATHS:?})"
            ))
        })?;
        let bytes = std::fs::read(&path).map_err(|e| NoFont(format!("{}: {e}", path.display())))?;
        // plotters keeps fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| NoFont(format!("{}: not a usable TrueType font", path.display())))
    })
    .clone()
}

/// Matplotlib's `tab10`.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One bar series: its name and `(value, 95 % half-width)` per group.
pub type Series = (String, Vec<(f64, Option<f64>)>);

pub type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

/// Half the width of a whisker's end caps, in pixels.
const CAP_PX: i32 = 5;

/// Draws each `(x, lo, hi)` as a vertical whisker from `(x, lo)` to `(x, hi)` with a cap at both
/// ends, `CAP_PX` (5) pixels either side of `x` whatever the axis (a log axis too). The caps are
/// why: an interval of width 0 (every seed alike) still shows as a tick on its mark, where a
/// bare line would leave a mark that looks as if it had no interval.
pub fn draw_whiskers<X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<X, Y>>,
    whiskers: impl IntoIterator<Item = (f64, f64, f64)>,
    style: ShapeStyle,
) -> Drawn {
    let whiskers: Vec<(f64, f64, f64)> = whiskers.into_iter().collect();
    chart.draw_series(
        (whiskers.iter()).map(|&(x, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], style)),
    )?;
    chart.draw_series(
        (whiskers.iter())
            .flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)])
            .map(|end| {
                EmptyElement::at(end) + PathElement::new(vec![(-CAP_PX, 0), (CAP_PX, 0)], style)
            }),
    )?;
    Ok(())
}

/// A box in pixels: left, top, right, bottom.
pub type PixelBox = (i32, i32, i32, i32);

fn overlaps(a: PixelBox, b: PixelBox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Where each label goes beside its mark: the top-left corner, in pixels, of a `sizes[i]` box
/// next to the disc of radius `radius` at `marks[i]` — at the mark's height, right of it, else
/// left of it, else one text row higher, lower, two rows higher, … — the first position inside
/// `frame` that covers no label placed before it, no mark and no `obstacles` (whiskers). Where
/// none is free, right of the mark at its height, moved inside the frame. Labels are placed in
/// the order given: earlier ones keep the best places.
pub fn place_labels(
    frame: PixelBox,
    marks: &[(i32, i32)],
    sizes: &[(u32, u32)],
    radius: i32,
    obstacles: &[PixelBox],
) -> Vec<(i32, i32)> {
    const GAP: i32 = 4;
    let discs: Vec<PixelBox> = (marks.iter())
        .map(|&(x, y)| (x - radius, y - radius, x + radius, y + radius))
        .collect();
    let inside = |b: PixelBox| b.0 >= frame.0 && b.1 >= frame.1 && b.2 <= frame.2 && b.3 <= frame.3;
    let mut placed: Vec<PixelBox> = Vec::new();
    let mut corners = Vec::new();
    for (&(x, y), &(w, h)) in marks.iter().zip(sizes) {
        let (w, h) = (w as i32, h as i32);
        let row = h + 2;
        let rows = (frame.3 - frame.1) / row.max(1) + 1;
        let right = x + radius + GAP;
        let left = x - radius - GAP - w;
        let top = y - h / 2;
        let free = |b: PixelBox| {
            inside(b) && !(placed.iter().chain(&discs).chain(obstacles)).any(|&o| overlaps(b, o))
        };
        let chosen = (0..2 * rows)
            .map(|k| if k % 2 == 0 { -(k / 2) } else { k / 2 + 1 } * row)
            .flat_map(|dy| [(right, top - dy), (left, top - dy)])
            .find(|&(bx, by)| free((bx, by, bx + w, by + h)))
            .unwrap_or((right.min(frame.2 - w).max(frame.0), top));
        placed.push((chosen.0, chosen.1, chosen.0 + w, chosen.1 + h));
        corners.push(chosen);
    }
    corners
}

/// Writes each label beside its mark (a disc of `radius` pixels at a data point), where
/// [`place_labels`] finds room: not on another label, mark or one of `whiskers` (`(x, lo, hi)`
/// in data coordinates, as [`draw_whiskers`] draws them), inside the plotting area.
pub fn draw_labels_beside<X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<X, Y>>,
    labels: &[((f64, f64), String, TextStyle<'_>)],
    radius: i32,
    whiskers: &[(f64, f64, f64)],
) -> Drawn {
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let frame = (xs.start, ys.start, xs.end, ys.end);
    let marks: Vec<(i32, i32)> = labels
        .iter()
        .map(|(at, _, _)| chart.backend_coord(at))
        .collect();
    let sizes = (labels.iter())
        .map(|(_, text, style)| chart.plotting_area().estimate_text_size(text, style))
        .collect::<Result<Vec<_>, _>>()?;
    let obstacles: Vec<PixelBox> = (whiskers.iter())
        .map(|&(x, lo, hi)| {
            let (px, top) = chart.backend_coord(&(x, hi));
            let (_, bottom) = chart.backend_coord(&(x, lo));
            (px - CAP_PX, top - 1, px + CAP_PX, bottom + 1)
        })
        .collect();
    let corners = place_labels(frame, &marks, &sizes, radius, &obstacles);
    chart.draw_series(labels.iter().zip(&marks).zip(corners).map(
        |(((at, text, style), &(mx, my)), (cx, cy))| {
            EmptyElement::at(*at) + Text::new(text.clone(), (cx - mx, cy - my), style.clone())
        },
    ))?;
    Ok(())
}

/// The highest bar or whisker end of `series` (whiskers capped at `bound`, as
/// [`grouped_bars_bounded`] draws them); 0 when no value is finite.
pub fn series_top(series: &[Series], bound: f64) -> f64 {
    series
        .iter()
        .flat_map(|(_, v)| v.iter())
        // A missing bar is NaN; `NaN.min(bound)` would be `bound`, so filter first.
        .filter(|(x, _)| x.is_finite())
        .map(|(x, h)| (x + h.unwrap_or(0.0)).min(bound))
        .fold(0.0, f64::max)
}

/// An axis top for bars of a quantity bounded by `bound`: a quarter above the highest bar or
/// whisker (room for the value labels above the bars), at least 5 so a frame of zeros still
/// has a scale.
pub fn headroom(series: &[Series], bound: f64) -> f64 {
    (1.25 * series_top(series, bound)).max(5.0)
}

/// A bar's value as its label: `0` for zero, whole numbers from 100 on, else three
/// significant digits at most (`5.0`, `12.2`, `0.25`).
fn bar_label(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Grouped bars: one group per name in `groups`, one bar per series, whiskers = the 95 %
/// half-widths, each bar's value written above it; a non-finite value draws no bar but a grey
/// "n/d" in its slot (the legend reads "n/d: not measured"), and a series with no bar at all
/// takes no slot (the legend, right of the frame, names it as not measured). When every bar
/// is 0 the frame says so in words.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    y_max: f64,
    groups: &[String],
    series: &[Series],
) -> Drawn {
    grouped_bars_bounded(path, title, y_desc, y_max, f64::INFINITY, groups, series)
}

/// [`grouped_bars`] of a quantity that cannot exceed `bound` (100 for a percentage): whiskers
/// stop there (and at 0) instead of reaching into impossible values.
pub fn grouped_bars_bounded(
    path: &Path,
    title: &str,
    y_desc: &str,
    y_max: f64,
    bound: f64,
    groups: &[String],
    series: &[Series],
) -> Drawn {
    let root = BitMapBackend::new(path, (1100, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, ("sans-serif", 22))?;
    // The legend gets its own strip right of the frame, so it covers no bar, whisker or label.
    let (plot, side) = body.split_horizontally(body.dim_in_pixel().0 - 170);
    let n = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..n, -0.08 * y_max..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .x_labels(0)
        .label_style(("sans-serif", 14))
        .draw()?;
    // Group names centred under their bars (below the zero line).
    let centred = TextStyle::from(("sans-serif", 14).into_font()).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    chart.draw_series(groups.iter().enumerate().map(|(g, name)| {
        Text::new(
            name.clone(),
            (g as f64 + 0.5, -0.04 * y_max),
            centred.clone(),
        )
    }))?;
    // Only series with a bar somewhere take a slot in the groups; each keeps its palette
    // colour by its position in `series`, so a method has one colour across figures.
    let (shown, empty): (Vec<usize>, Vec<usize>) =
        (0..series.len()).partition(|&s| series[s].1.iter().any(|(v, _)| v.is_finite()));
    let k = shown.len().max(1) as f64;
    let width = 0.8 / k;
    // The middle of series `s`'s bar in group `g` (its whisker and its label).
    let centre = |g: usize, s: usize| g as f64 + 0.1 + (s as f64 + 0.45) * width;
    // Every bar's value above its whisker, so that a bar at 0 reads as a measured 0 and not as
    // a missing bar, and a reader need not measure bars against the axis.
    let above = TextStyle::from(("sans-serif", if k * n > 16.0 { 10 } else { 12 }).into_font())
        .pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Bottom,
        ));
    for (s, &index) in shown.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        // The measured bars (non-finite values draw nothing), each with its whisker's ends
        // clamped to the quantity's bound and the frame.
        let bars: Vec<_> = (series[index].1.iter().enumerate())
            .filter(|(_, (v, _))| v.is_finite())
            .map(|(g, &(v, h))| {
                let whisker = h.map(|h| ((v - h).max(0.0), (v + h).min(bound).min(y_max)));
                (g, v, whisker)
            })
            .collect();
        chart.draw_series(bars.iter().map(|&(g, v, _)| {
            let x0 = g as f64 + 0.1 + s as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled())
        }))?;
        draw_whiskers(
            &mut chart,
            (bars.iter()).filter_map(|&(g, _, whisker)| {
                let (lo, hi) = whisker?;
                Some((centre(g, s), lo, hi))
            }),
            BLACK.stroke_width(2),
        )?;
        chart.draw_series(bars.iter().map(|&(g, v, whisker)| {
            let top = whisker.map_or(v, |(_, hi)| hi.max(v));
            Text::new(
                bar_label(v),
                (centre(g, s), top + 0.01 * y_max),
                above.clone(),
            )
        }))?;
    }
    // A slot whose bar is missing in a group where its series has bars elsewhere is marked
    // "n/d" in grey on the zero line: an unlabelled gap next to labelled zeros reads as a bar
    // lost in drawing, or as a zero. The legend says what the mark means.
    let gaps = missing_bars(series, &shown, groups.len());
    chart.draw_series(gaps.iter().map(|&(g, s)| {
        Text::new(
            "n/d".to_string(),
            (centre(g, s), 0.01 * y_max),
            above.clone().color(&NOT_MEASURED),
        )
    }))?;
    legend_strip(&side, series, &shown, &empty, !gaps.is_empty())?;
    // A frame of empty bars says so instead of looking like missing data.
    let finite: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|(x, _)| *x))
        .filter(|x| x.is_finite())
        .collect();
    if !finite.is_empty() && finite.iter().all(|&x| x == 0.0) {
        chart.draw_series(std::iter::once(Text::new(
            format!("all 0 ({y_desc}): every bar is at zero"),
            (n / 2.0, 0.5 * y_max),
            TextStyle::from(("sans-serif", 20).into_font()).pos(centred.pos),
        )))?;
    }
    root.present()?;
    Ok(())
}

/// The bars [`grouped_bars_bounded`] leaves out in a series that it draws: `(group, slot)` for
/// every non-finite value of `series[shown[slot]]` among the first `groups` groups, where
/// `slot` is the series' position among the drawn ones (the order its bars take in a group).
fn missing_bars(series: &[Series], shown: &[usize], groups: usize) -> Vec<(usize, usize)> {
    let mut gaps = Vec::new();
    for (slot, &s) in shown.iter().enumerate() {
        for (g, (v, _)) in series[s].1.iter().enumerate().take(groups) {
            if !v.is_finite() {
                gaps.push((g, slot));
            }
        }
    }
    gaps
}

/// The grey of what was not measured: a missing bar's `n/d` and the legend's lines about it.
const NOT_MEASURED: RGBColor = RGBColor(110, 110, 110);

/// Characters of a legend label that fit the legend strip on one line at 14 px.
const LEGEND_CHARS: usize = 18;

/// The legend of [`grouped_bars_bounded`] in its own strip: a swatch and name per drawn
/// series, then the series that have no bar at all, named, so that a missing method is not
/// mistaken for one at zero.
fn legend_strip<DB: DrawingBackend>(
    side: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    shown: &[usize],
    empty: &[usize],
    gaps: bool,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 14).into_font();
    let row = 22;
    let mut y = 24;
    // The strip is 170 px wide: a longer label's parenthesis goes on a line of its own.
    let detail = ("sans-serif", 12).into_font();
    for &s in shown {
        let color = PALETTE[s % PALETTE.len()];
        side.draw(&Rectangle::new([(4, y - 6), (16, y + 6)], color.filled()))?;
        let label = &series[s].0;
        match label.split_once(" (") {
            Some((name, rest)) if label.chars().count() > LEGEND_CHARS => {
                side.draw(&Text::new(name.to_string(), (24, y - 8), font.clone()))?;
                y += row - 4;
                side.draw(&Text::new(format!("({rest}"), (24, y - 8), detail.clone()))?;
            }
            _ => side.draw(&Text::new(label.clone(), (24, y - 8), font.clone()))?,
        }
        y += row;
    }
    let grey = font.clone().color(&NOT_MEASURED);
    if gaps {
        y += row / 2;
        side.draw(&Text::new("n/d: not measured", (4, y - 8), grey.clone()))?;
        y += row;
    }
    if !empty.is_empty() {
        y += row / 2;
        side.draw(&Text::new(
            "no bar (not measured):",
            (4, y - 8),
            grey.clone(),
        ))?;
        for &s in empty {
            y += row;
            side.draw(&Text::new(series[s].0.clone(), (14, y - 8), grey.clone()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: bars 40 ± 10 and 95 ± 20 (whisker capped at 100), a missing bar (NaN) that
    /// must not count as 100: the top is 100 under the bound, 115 without it.
    #[test]
    fn the_top_is_the_highest_bar_or_whisker_and_ignores_missing_bars() {
        let s: Vec<Series> = vec![
            ("a".into(), vec![(40.0, Some(10.0)), (f64::NAN, None)]),
            ("b".into(), vec![(95.0, Some(20.0)), (f64::NAN, Some(5.0))]),
        ];
        assert_eq!(series_top(&s, 100.0), 100.0);
        assert_eq!(series_top(&s, f64::INFINITY), 115.0);
        assert_eq!(headroom(&s, 100.0), 125.0);
        let missing: Vec<Series> = vec![("a".into(), vec![(f64::NAN, None)])];
        assert_eq!(series_top(&missing, 100.0), 0.0);
        assert_eq!(headroom(&missing, 100.0), 5.0);
    }

    /// By hand: series a has bars in both groups, b only in the second, c in none (so it is not
    /// drawn and `shown` is [a, b]): the one gap is b's slot (1) in group 0.
    #[test]
    fn a_drawn_series_missing_a_bar_leaves_a_gap_named_by_group_and_slot() {
        let s: Vec<Series> = vec![
            ("a".into(), vec![(1.0, None), (0.0, None)]),
            ("b".into(), vec![(f64::NAN, None), (2.0, Some(1.0))]),
            ("c".into(), vec![(f64::NAN, None), (f64::NAN, None)]),
        ];
        assert_eq!(missing_bars(&s, &[0, 1], 2), [(0, 1)]);
        assert_eq!(missing_bars(&s, &[0], 2), []);
    }

    /// By hand, a 200 × 100 frame, marks of radius 5, labels 40 × 10 (rows 12 px apart):
    /// right of the mark at its height where free, else left of it, else a row up, a row down,
    /// …; never on another mark, label or whisker, never outside the frame.
    #[test]
    fn labels_go_beside_their_marks_clear_of_each_other_and_the_frame() {
        let frame = (0, 0, 200, 100);
        let size = (40, 10);
        // Alone: x = 50 + 5 + 4, y = 50 − 5.
        assert_eq!(
            place_labels(frame, &[(50, 50)], &[size], 5, &[]),
            [(59, 45)]
        );
        // A second mark 20 px right: the first label's right place (59..99) would cover it, so
        // that label goes left (50 − 5 − 4 − 40 = 1); the second's right place is free.
        let got = place_labels(frame, &[(50, 50), (70, 50)], &[size; 2], 5, &[]);
        assert_eq!(got, [(1, 45), (79, 45)]);
        // Below the first and near the left edge: right (29..69 × 53..63) would cover the first
        // label, left is outside, a row up (41..51) covers it too: a row down, (29, 65).
        let got = place_labels(frame, &[(50, 50), (20, 58)], &[size; 2], 5, &[]);
        assert_eq!(got, [(59, 45), (29, 65)]);
        // At the right edge: on the left.
        let edge = place_labels(frame, &[(190, 50)], &[size], 5, &[]);
        assert_eq!(edge[0], (190 - 5 - 4 - 40, 45));
        // A whisker where the label would go: on the left.
        let whisker = place_labels(frame, &[(50, 50)], &[size], 5, &[(70, 0, 80, 100)]);
        assert_eq!(whisker[0], (50 - 5 - 4 - 40, 45));
        // No room anywhere: right of the mark, pulled inside the frame.
        let full = place_labels((0, 0, 30, 10), &[(20, 5)], &[size], 5, &[]);
        assert_eq!(full[0], (0, 0));
    }

    #[test]
    fn bar_labels_by_hand() {
        assert_eq!(bar_label(0.0), "0");
        assert_eq!(bar_label(5.0), "5.0");
        assert_eq!(bar_label(12.24), "12.2");
        assert_eq!(bar_label(100.0), "100");
        assert_eq!(bar_label(4481.7), "4482");
        assert_eq!(bar_label(0.254), "0.25");
        assert_eq!(bar_label(-3.0), "-3.0");
    }
}
