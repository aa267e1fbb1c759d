//! plot.svg: memory per turn, one panel per watched metric. The post-close series is the line the
//! analyzer judges; other sampling points (the generate peak, open, idle) are faint points; the
//! baseline is dashed; the band the expectations allow (tolerance plus warm-up budget) is shaded
//! green, the warm-up turns grey; reloads are red vertical lines between turns. Over the judged
//! series go the analyzer's fitted trend (its slope through the middle of the steady part) with
//! the slope's confidence interval as a shaded fan, the growth limit per turn as a dashed line
//! from the same start, and a `max` expectation as a horizontal line; each panel's caption says
//! whether the metric's expectations passed, in words and in colour.
//!
//! Only plotters' SVG backend is used: text is written as SVG `<text>` elements, so no system
//! font library is needed.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analyze::Verdict;
use crate::report::facts::metric_passed;
use crate::report::units::axis_unit_of;
use crate::report::ReportError;
use crate::runner::{Phase, RunRecord};

pub(super) const PANEL_HEIGHT: u32 = 320;
pub(super) const WIDTH: u32 = 960;
pub(super) const TITLE_HEIGHT: u32 = 40;
/// Room right of each chart for its legend, so the legend never hides data.
pub(super) const LEGEND_WIDTH: u32 = 250;
/// Columns a series is thinned to: about the chart's width in pixels. A column keeps its lowest
/// and highest point, so a long run's plot stays a few hundred KB and still shows every extreme.
const COLUMNS: usize = 640;
/// Above this many points a series is drawn without a marker per point.
const MARKED_POINTS: usize = 400;

pub(super) const CLOSE_COLOR: RGBColor = RGBColor(31, 100, 180);
pub(super) const PEAK_COLOR: RGBColor = RGBColor(230, 120, 20);
const OTHER_COLOR: RGBColor = RGBColor(120, 120, 120);
pub(super) const RELOAD_COLOR: RGBColor = RGBColor(200, 30, 30);
const BAND_COLOR: RGBColor = RGBColor(40, 160, 60);
const TREND_COLOR: RGBColor = RGBColor(110, 40, 160);
const LIMIT_COLOR: RGBColor = RGBColor(200, 30, 30);
const PASS_COLOR: RGBColor = RGBColor(20, 120, 40);
const FAIL_COLOR: RGBColor = RGBColor(190, 20, 20);

/// The analyzer's fitted trend over the steady part of a series, in plot units.
#[derive(Debug, Clone, PartialEq)]
struct Trend {
    /// The steady part's first and last turn.
    from: f64,
    to: f64,
    /// The fitted level at the middle of the steady part, where the slope pivots.
    pivot: (f64, f64),
    /// The slope and its confidence interval, per turn.
    slope: f64,
    interval: Option<(f64, f64)>,
    /// The `max_growth_per_turn` limit, per turn, drawn from the fitted level at `from`.
    limit: Option<f64>,
}

impl Trend {
    /// The fitted level at `x` with slope `slope` through the pivot.
    fn at(&self, x: f64, slope: f64) -> f64 {
        self.pivot.1 + slope * (x - self.pivot.0)
    }
}

/// One metric's panel, in plot units (turns on x, the axis unit on y).
#[derive(Debug)]
struct Panel {
    metric: String,
    caption: String,
    unit: &'static str,
    close: Vec<(f64, f64)>,
    peaks: Vec<(f64, f64)>,
    others: Vec<(f64, f64)>,
    reload_points: Vec<(f64, f64)>,
    baseline: Option<f64>,
    band: Option<(f64, f64)>,
    trend: Option<Trend>,
    /// A `max` expectation's ceiling, and whether it fits on the chart.
    ceiling: Option<(f64, bool)>,
    /// Whether the metric's expectations held (`None`: it has none).
    passed: Option<bool>,
    x_range: (f64, f64),
    y_range: (f64, f64),
}

/// Where within a turn each phase is drawn, so the points of one turn do not overlap.
fn x_of(turn: u32, phase: Phase) -> f64 {
    let t = f64::from(turn);
    match phase {
        Phase::Load | Phase::Close => t,
        Phase::Open => t - 0.6,
        Phase::Generate => t - 0.35,
        Phase::Idle => t - 0.15,
        Phase::Reload => t + 0.5,
    }
}

/// The metrics that get a panel: the watched ones that were sampled, else every analysed one,
/// else every sampled one.
fn plotted_metrics(record: &RunRecord, verdict: &Verdict) -> Vec<String> {
    let sampled = record.metric_names();
    let watched: Vec<String> = record
        .scenario
        .watched_metrics()
        .into_iter()
        .filter(|m| sampled.contains(m))
        .collect();
    if !watched.is_empty() {
        return watched;
    }
    let analysed: Vec<String> = verdict
        .metrics
        .keys()
        .filter(|m| sampled.contains(m))
        .cloned()
        .collect();
    if !analysed.is_empty() {
        return analysed;
    }
    sampled
}

fn build_panel(record: &RunRecord, verdict: &Verdict, metric: &str) -> Panel {
    let analysis = verdict.metrics.get(metric);
    // Read from the metric's column: a million-turn run's samples are not built one by one.
    let samples = &record.samples;
    let column = samples.metric(metric);
    let values = (0..samples.len()).filter_map(move |row| {
        let value = column?.get(row)?;
        Some((samples.turn(row)?, samples.phases()[row], value))
    });
    let baseline = analysis
        .map(|a| a.baseline)
        .or_else(|| record.post_close_series(metric).first().map(|(_, v)| *v));
    let band = baseline.and_then(|b| {
        let expect = record.scenario.expect.metrics.get(metric)?;
        if expect.tolerance.is_none() && expect.warmup_budget.is_none() {
            return None;
        }
        let tolerance = expect.tolerance.map_or(0, |t| t.bytes_for(b));
        let budget = expect.warmup_budget.unwrap_or(0);
        // Saturating: the figures may come from an edited report.json, and a band drawn up to
        // u64::MAX says the same.
        let high = b.saturating_add(budget).saturating_add(tolerance);
        Some((b.saturating_sub(tolerance), high))
    });
    let max = values
        .clone()
        .map(|(_, _, v)| v)
        .chain(baseline)
        .chain(band.map(|(_, high)| high))
        .max()
        .unwrap_or(0);
    let min = values
        .clone()
        .map(|(_, _, v)| v)
        .chain(baseline)
        .chain(band.map(|(low, _)| low))
        .min()
        .unwrap_or(0);
    let expectation = record.scenario.expect.metrics.get(metric);
    // A ceiling far above the data would flatten them: it is then named, not drawn.
    let ceiling = expectation
        .and_then(|e| e.max)
        .map(|m| (m, m <= max.saturating_mul(3)));
    let max = match ceiling {
        Some((m, true)) => max.max(m),
        _ => max,
    };
    let (divisor, unit) = axis_unit_of(metric, max);
    let scale = |v: u64| v as f64 / divisor;
    let passed = metric_passed(verdict, metric);
    let verdict_word = match passed {
        Some(true) => " (pass)",
        Some(false) => " (FAIL)",
        None => "",
    };
    let mut panel = Panel {
        metric: metric.to_owned(),
        caption: match analysis {
            Some(a) => format!("{metric}: {}{verdict_word}", a.classification.as_str()),
            None => format!("{metric}: not analysed{verdict_word}"),
        },
        trend: analysis.and_then(|a| trend_of(record, a, expectation, divisor)),
        ceiling: ceiling.map(|(m, fits)| (scale(m), fits)),
        passed,
        unit,
        close: Vec::new(),
        peaks: Vec::new(),
        others: Vec::new(),
        reload_points: Vec::new(),
        baseline: baseline.map(scale),
        band: band.map(|(l, h)| (scale(l), scale(h))),
        x_range: (
            -0.8,
            f64::from(super::facts::turns_planned(record).max(1)) + 0.8,
        ),
        y_range: (0.0, 1.0),
    };
    let mut last_turn = 0;
    for (turn, phase, value) in values {
        last_turn = last_turn.max(turn);
        let point = (x_of(turn, phase), scale(value));
        match phase {
            Phase::Load | Phase::Close => panel.close.push(point),
            Phase::Generate => panel.peaks.push(point),
            Phase::Reload => panel.reload_points.push(point),
            Phase::Open | Phase::Idle => panel.others.push(point),
        }
    }
    panel.x_range.1 = panel.x_range.1.max(f64::from(last_turn) + 0.8);
    for series in [
        &mut panel.close,
        &mut panel.peaks,
        &mut panel.others,
        &mut panel.reload_points,
    ] {
        *series = thin(std::mem::take(series), panel.x_range, COLUMNS);
    }
    // Start at zero unless the data sit far above it, so that a small drift is not blown up into
    // a cliff but a flat series near 1 GiB is still readable.
    let (mut low, mut high) = (scale(min), scale(max));
    // The fitted line belongs on the chart; its interval and the limit may leave it (clipped).
    if let Some(trend) = &panel.trend {
        for x in [trend.from, trend.to] {
            low = low.min(trend.at(x, trend.slope));
            high = high.max(trend.at(x, trend.slope));
        }
    }
    let span = (high - low).max(high * 0.02).max(1e-9);
    let bottom = if low > 0.5 * high {
        low - 0.15 * span
    } else {
        0.0
    };
    panel.y_range = (bottom.max(0.0), high + 0.15 * span);
    panel
}

/// The fitted trend of one analysis, in plot units (values divided by `divisor`): only for a
/// fitted series of one load epoch (across reloads each epoch has its own level).
fn trend_of(
    record: &RunRecord,
    analysis: &crate::analyze::MetricAnalysis,
    expectation: Option<&crate::scenario::MetricExpectation>,
    divisor: f64,
) -> Option<Trend> {
    let end = analysis.fitted_end_bytes?;
    if analysis.epochs > 1 || !analysis.slope_bytes_per_turn.is_finite() {
        return None;
    }
    let from = analysis.steady_from_turn? as f64;
    // The last turn sampled, not the stored count: an edited report.json may claim any count,
    // and the line must stay inside the chart's x range.
    let samples = &record.samples;
    let last_sampled = (0..samples.len())
        .filter_map(|row| samples.turn(row))
        .max()
        .unwrap_or(0);
    let to = f64::from(record.turns_completed.min(last_sampled).max(1));
    if to <= from {
        return None;
    }
    let slope = analysis.slope_bytes_per_turn / divisor;
    let middle = (from + to) / 2.0;
    Some(Trend {
        from,
        to,
        pivot: (middle, end / divisor - slope * (to - middle)),
        slope,
        interval: analysis
            .slope_interval
            .map(|(lo, hi)| (lo / divisor, hi / divisor)),
        limit: expectation
            .and_then(|e| e.max_growth_per_turn)
            .map(|l| l as f64 / divisor),
    })
}

/// Thins points in x order to at most two per column of `x_range` split into `columns`: the
/// lowest and the highest of each column, in x order (a min/max envelope). Short series are
/// kept as they are.
fn thin(points: Vec<(f64, f64)>, x_range: (f64, f64), columns: usize) -> Vec<(f64, f64)> {
    if points.len() <= 2 * columns {
        return points;
    }
    let width = (x_range.1 - x_range.0).max(1e-9);
    let column_of = |x: f64| (((x - x_range.0) / width * columns as f64) as usize).min(columns - 1);
    let mut out = Vec::with_capacity(2 * columns);
    let mut i = 0;
    while i < points.len() {
        let column = column_of(points[i].0);
        let (mut low, mut high) = (i, i);
        let mut j = i;
        while j < points.len() && column_of(points[j].0) == column {
            if points[j].1 < points[low].1 {
                low = j;
            }
            if points[j].1 > points[high].1 {
                high = j;
            }
            j += 1;
        }
        out.push(points[low.min(high)]);
        if low != high {
            out.push(points[low.max(high)]);
        }
        i = j;
    }
    out
}

/// At most one reload line per column of the chart.
fn thin_turns(turns: &[u32], x_range: (f64, f64)) -> Vec<u32> {
    let points: Vec<(f64, f64)> = turns.iter().map(|t| (f64::from(*t), 0.0)).collect();
    if points.len() <= COLUMNS {
        return turns.to_vec();
    }
    let width = (x_range.1 - x_range.0).max(1e-9);
    let mut kept: Vec<u32> = Vec::new();
    let mut last_column = None;
    for turn in turns {
        let column = ((f64::from(*turn) - x_range.0) / width * COLUMNS as f64) as usize;
        if last_column != Some(column) {
            kept.push(*turn);
            last_column = Some(column);
        }
    }
    kept
}

fn render_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> ReportError {
    ReportError::Render {
        artifact: "plot.svg",
        message: e.to_string(),
    }
}

/// How a legend entry is marked.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    Shade(RGBAColor),
    Line(RGBColor, u32),
    Dashed,
    Vertical(RGBColor),
    Dot(RGBAColor),
}

/// Draws the legend in its own area right of the chart, so it never hides data.
pub(super) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(&str, Mark)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, (label, mark)) in entries.iter().enumerate() {
        let y = 48 + 20 * i as i32;
        let (x0, x1) = (4, 26);
        match *mark {
            Mark::Shade(color) => {
                area.draw(&Rectangle::new([(x0, y - 6), (x1, y + 6)], color.filled()))?
            }
            Mark::Line(color, width) => area.draw(&PathElement::new(
                [(x0, y), (x1, y)],
                color.stroke_width(width),
            ))?,
            Mark::Dashed => {
                area.draw(&PathElement::new([(x0, y), (x0 + 8, y)], BLACK))?;
                area.draw(&PathElement::new([(x0 + 13, y), (x1, y)], BLACK))?;
            }
            Mark::Vertical(color) => {
                area.draw(&PathElement::new([(15, y - 7), (15, y + 7)], color))?
            }
            Mark::Dot(color) => area.draw(&Circle::new((15, y), 3, color.filled()))?,
        }
        area.draw(&Text::new(label.to_string(), (x1 + 8, y - 7), font.clone()))?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    warmup_turns: u32,
    reload_turns: &[u32],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (chart_area, legend_area) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut legend: Vec<(&str, Mark)> = Vec::new();
    let (y0, y1) = panel.y_range;
    let caption_color = match panel.passed {
        Some(true) => PASS_COLOR,
        Some(false) => FAIL_COLOR,
        None => BLACK,
    };
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(
            &panel.caption,
            ("sans-serif", 18).into_font().color(&caption_color),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(panel.x_range.0..panel.x_range.1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc("turn")
        .y_desc(format!("{} ({})", panel.metric, panel.unit))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;

    if warmup_turns > 0 {
        let shade = BLACK.mix(0.07);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.5, y0), (f64::from(warmup_turns) + 0.5, y1)],
            shade.filled(),
        )))?;
        legend.push(("warm-up turns", Mark::Shade(BLACK.mix(0.12))));
    }
    if let Some((low, high)) = panel.band {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(panel.x_range.0, low), (panel.x_range.1, high)],
            BAND_COLOR.mix(0.12).filled(),
        )))?;
        legend.push((
            "allowed: tolerance + warm-up budget",
            Mark::Shade(BAND_COLOR.mix(0.25)),
        ));
    }
    if let Some(baseline) = panel.baseline {
        chart.draw_series(DashedLineSeries::new(
            [(panel.x_range.0, baseline), (panel.x_range.1, baseline)],
            6,
            4,
            BLACK.stroke_width(1),
        ))?;
        // A time series has no load sample: its first point is the first turn's time.
        let timed = leakloop_metrics::metric(&panel.metric)
            .is_some_and(|m| m.unit == leakloop_metrics::Unit::Nanoseconds);
        let label = if timed {
            "first turn"
        } else {
            "baseline (after load)"
        };
        legend.push((label, Mark::Dashed));
    }
    for turn in thin_turns(reload_turns, panel.x_range) {
        let x = x_of(turn, Phase::Reload);
        chart.draw_series(LineSeries::new(
            [(x, y0), (x, y1)],
            RELOAD_COLOR.mix(0.7).stroke_width(1),
        ))?;
    }
    if !reload_turns.is_empty() {
        legend.push(("reload (unload + load)", Mark::Vertical(RELOAD_COLOR)));
    }
    if !panel.reload_points.is_empty() {
        chart.draw_series(
            panel
                .reload_points
                .iter()
                .map(|p| Circle::new(*p, 4, RELOAD_COLOR.mix(0.8).stroke_width(1))),
        )?;
    }
    if !panel.others.is_empty() {
        let color = OTHER_COLOR.mix(0.35);
        chart.draw_series(
            panel
                .others
                .iter()
                .map(|p| Circle::new(*p, 3, color.filled())),
        )?;
        legend.push(("after open / idle", Mark::Dot(color)));
    }
    if !panel.peaks.is_empty() {
        let color = PEAK_COLOR.mix(0.45);
        chart.draw_series(
            panel
                .peaks
                .iter()
                .map(|p| Circle::new(*p, 3, color.filled())),
        )?;
        legend.push(("after generate (turn peak)", Mark::Dot(color)));
    }
    chart.draw_series(LineSeries::new(
        panel.close.iter().copied(),
        CLOSE_COLOR.stroke_width(2),
    ))?;
    if panel.close.len() <= MARKED_POINTS {
        chart.draw_series(
            panel
                .close
                .iter()
                .map(|p| Circle::new(*p, 3, CLOSE_COLOR.filled())),
        )?;
    }
    legend.push(("after close (judged)", Mark::Line(CLOSE_COLOR, 2)));
    let clip = |(x, y): (f64, f64)| (x, y.clamp(y0, y1));
    if let Some(trend) = &panel.trend {
        if let Some((lo, hi)) = trend.interval {
            // The fan of slopes the interval allows, pivoting where the fit is surest.
            let mut fan: Vec<(f64, f64)> = [trend.from, trend.to]
                .iter()
                .map(|&x| clip((x, trend.at(x, hi))))
                .collect();
            fan.extend(
                [trend.to, trend.from]
                    .iter()
                    .map(|&x| clip((x, trend.at(x, lo)))),
            );
            chart.draw_series(std::iter::once(Polygon::new(
                fan,
                TREND_COLOR.mix(0.12).filled(),
            )))?;
            legend.push((
                "trend interval (slope CI)",
                Mark::Shade(TREND_COLOR.mix(0.2)),
            ));
        }
        chart.draw_series(LineSeries::new(
            [trend.from, trend.to].map(|x| clip((x, trend.at(x, trend.slope)))),
            TREND_COLOR.stroke_width(2),
        ))?;
        legend.push(("fitted trend", Mark::Line(TREND_COLOR, 2)));
        if let Some(limit) = trend.limit {
            let start = (trend.from, trend.at(trend.from, trend.slope));
            let end = (trend.to, start.1 + limit * (trend.to - trend.from));
            chart.draw_series(DashedLineSeries::new(
                [clip(start), clip(end)],
                8,
                5,
                LIMIT_COLOR.stroke_width(2),
            ))?;
            legend.push(("growth limit per turn", Mark::Line(LIMIT_COLOR, 1)));
        }
    }
    let ceiling_label;
    if let Some((ceiling, fits)) = panel.ceiling {
        if fits {
            chart.draw_series(DashedLineSeries::new(
                [(panel.x_range.0, ceiling), (panel.x_range.1, ceiling)],
                3,
                3,
                LIMIT_COLOR.stroke_width(2),
            ))?;
            legend.push(("maximum (expect max)", Mark::Line(LIMIT_COLOR, 2)));
        } else {
            ceiling_label = format!("maximum {ceiling:.1} {} (above)", panel.unit);
            legend.push((&ceiling_label, Mark::Line(LIMIT_COLOR, 2)));
        }
    }
    draw_legend(&legend_area, &legend)
}

/// Renders plot.svg; every foreign name in it is escaped by [`crate::report::escape::xml`].
pub fn render_plot_svg(record: &RunRecord, verdict: &Verdict) -> Result<String, ReportError> {
    let metrics = plotted_metrics(record, verdict);
    let panels: Vec<Panel> = metrics
        .iter()
        .map(|m| build_panel(record, verdict, m))
        .collect();
    let mut reload_turns: Vec<u32> = record
        .samples
        .iter()
        .filter(|s| s.phase == Phase::Reload)
        .map(|s| s.turn)
        .collect();
    reload_turns.dedup();
    let height = TITLE_HEIGHT + PANEL_HEIGHT * (panels.len().max(1) as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(render_error)?;
        let title = format!(
            "{}: memory per turn ({} {})",
            record.scenario.name, record.backend.backend, record.backend.version
        );
        let (title_area, body) = root.split_vertically(TITLE_HEIGHT);
        title_area
            .titled(&title, ("sans-serif", 20))
            .map_err(render_error)?;
        if panels.is_empty() {
            body.titled("no samples were taken", ("sans-serif", 16))
                .map_err(render_error)?;
        }
        for (area, panel) in body
            .split_evenly((panels.len().max(1), 1))
            .iter()
            .zip(&panels)
        {
            draw_panel(area, panel, record.scenario.warmup_turns, &reload_turns)
                .map_err(render_error)?;
        }
        root.present().map_err(render_error)?;
    }
    // Names from the run reach the SVG as text: whatever they hold, the file stays XML.
    Ok(crate::report::escape::xml(&svg).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, crashed_run, leak_run};

    /// The contents of every SVG `<text>` element.
    fn texts(svg: &str) -> Vec<String> {
        let re = regex::Regex::new(r"<text[^>]*>\s*([^<]*?)\s*</text>").unwrap();
        re.captures_iter(svg).map(|c| c[1].to_owned()).collect()
    }

    #[test]
    fn one_panel_per_watched_metric_with_captions_as_text() {
        let (record, verdict) = leak_run();
        let svg = render_plot_svg(&record, &verdict).unwrap();
        if let Ok(path) = std::env::var("LEAKLOOP_PLOT_DUMP") {
            std::fs::write(path, &svg).unwrap();
        }
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        let texts = texts(&svg);
        for expected in [
            "gpu: plateau (pass)",
            "gpu (GiB)",
            "native_heap: growth (FAIL)",
            "native_heap (MiB)",
            "warm-up turns",
            "reload (unload + load)",
            "allowed: tolerance + warm-up budget",
            "after close (judged)",
            "after generate (turn peak)",
        ] {
            assert!(
                texts.iter().any(|t| t == expected),
                "{expected} in {texts:?}"
            );
        }
    }

    /// A simulated run of `yaml` with its verdict.
    fn simulated(yaml: &str) -> (RunRecord, Verdict) {
        let scenario = crate::scenario::parse_scenario(yaml, "p.yaml".as_ref()).unwrap();
        let mut engine = crate::engine::build_engine(&scenario).unwrap();
        let record =
            crate::runner::run_scenario(&scenario, engine.as_mut(), &mut crate::runner::NoObserver);
        let verdict = crate::analyze::analyze_run(&record);
        (record, verdict)
    }

    #[test]
    fn the_fitted_trend_its_interval_and_the_limits_are_drawn_and_the_verdict_is_coloured() {
        let (record, verdict) = simulated(
            "name: p\nseed: 3\nengine: {backend: sim, profile: forgets-delete}\nturns: 16\n\
             turn: [open: {}, send: {prompt: hi}, generate: {max_output_tokens: 8}, close: {}]\n\
             expect: {native_heap: {max_growth_per_turn: 1MiB}, turn_time: {max: 2s}}\n",
        );
        let svg = render_plot_svg(&record, &verdict).unwrap();
        if let Ok(path) = std::env::var("LEAKLOOP_PLOT_DUMP") {
            std::fs::write(path, &svg).unwrap();
        }
        let texts = texts(&svg);
        for expected in [
            "native_heap: growth (FAIL)",
            "fitted trend",
            "trend interval (slope CI)",
            "growth limit per turn",
            "maximum (expect max)",
            "first turn",
            "turn_time (s)",
        ] {
            assert!(
                texts.iter().any(|t| t == expected),
                "{expected} in {texts:?}"
            );
        }
        let heap = build_panel(&record, &verdict, "native_heap");
        let trend = heap.trend.expect("a fitted trend");
        let (lo, hi) = trend.interval.unwrap();
        assert!(lo <= trend.slope && trend.slope <= hi);
        assert!(
            trend.limit.unwrap() < lo,
            "the leak's slope is beyond the limit"
        );
        // The caption's colour is the verdict's: the line before the caption's text opens it.
        let fill = |c: RGBColor| format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        let lines: Vec<&str> = svg.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains("native_heap: growth (FAIL)"))
            .unwrap();
        assert!(
            lines[at - 1].contains(&fill(FAIL_COLOR)),
            "{}",
            lines[at - 1]
        );
        let at = lines
            .iter()
            .position(|l| l.contains("turn_time: clean (pass)"))
            .unwrap();
        assert!(
            lines[at - 1].contains(&fill(PASS_COLOR)),
            "{}",
            lines[at - 1]
        );
        let time = build_panel(&record, &verdict, "turn_time");
        assert_eq!(time.passed, Some(true));
        assert_eq!(time.unit, "s", "the 2 s ceiling is on the chart");
    }

    #[test]
    fn the_heap_panel_climbs_and_the_gpu_panel_steps_once() {
        let (record, verdict) = leak_run();
        let heap = build_panel(&record, &verdict, "native_heap");
        let ys: Vec<f64> = heap.close.iter().map(|p| p.1).collect();
        assert!(ys.windows(2).all(|w| w[1] > w[0]), "ratchet: {ys:?}");
        let gpu = build_panel(&record, &verdict, "gpu");
        let ys: Vec<f64> = gpu.close.iter().map(|p| p.1).collect();
        assert!(ys[1] > 10.0 * ys[0], "one-time step: {ys:?}");
        assert!(
            ys[1..].windows(2).all(|w| w[0] == w[1]),
            "flat after the step: {ys:?}"
        );
        assert_eq!(gpu.reload_points, vec![(5.5, 60.0 / 1024.0)]);
        assert_eq!(gpu.peaks.len(), 9);
    }

    #[test]
    fn the_band_spans_tolerance_and_warmup_budget() {
        let (record, verdict) = leak_run();
        let gpu = build_panel(&record, &verdict, "gpu");
        let (low, high) = gpu.band.unwrap();
        let base = 60.0 / 1024.0;
        assert!((low - base * 0.98).abs() < 1e-9);
        assert!((high - (base * 1.02 + 2.0)).abs() < 1e-9);
    }

    #[test]
    fn clean_and_crashed_runs_render() {
        for (record, verdict) in [clean_run(), crashed_run()] {
            let svg = render_plot_svg(&record, &verdict).unwrap();
            assert!(svg.trim_end().ends_with("</svg>"));
        }
    }

    /// Issue 15: one circle per sample made plot.svg 58 MB at 100,000 turns.
    #[test]
    fn a_long_series_is_thinned_to_its_envelope_keeping_every_extreme() {
        let points: Vec<(f64, f64)> = (0..100_000)
            .map(|i| {
                (
                    f64::from(i),
                    if i == 77_777 { 9.0 } else { f64::from(i % 7) },
                )
            })
            .collect();
        let thinned = thin(points, (0.0, 100_000.0), 640);
        assert!(thinned.len() <= 2 * 640, "{}", thinned.len());
        assert!(thinned.contains(&(77_777.0, 9.0)));
        assert!(thinned.windows(2).all(|w| w[0].0 < w[1].0), "x order kept");
        let (record, verdict) = crate::report::examples::long_run(100_000, 1999);
        let svg = render_plot_svg(&record, &verdict).unwrap();
        assert!(svg.len() < 600_000, "plot.svg is {} bytes", svg.len());
    }

    #[test]
    fn a_run_without_samples_still_renders_a_page() {
        let (mut record, verdict) = crashed_run();
        record.samples.clear();
        let svg = render_plot_svg(&record, &verdict).unwrap();
        assert!(svg.contains("no samples were taken"));
    }

    /// Regression (issue 20): an ESC in a backend name made plot.svg malformed XML.
    #[test]
    fn hostile_names_keep_the_plot_well_formed() {
        let (record, verdict) = crate::report::test_support::hostile_run();
        let svg = render_plot_svg(&record, &verdict).unwrap();
        let problems = crate::report::escape::check::xml_problems(&svg);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(svg.contains("sim&lt;script&gt;"), "the title is missing");
        assert!(
            svg.contains("heap&lt;script&gt;"),
            "the metric panel is missing"
        );
    }
}
