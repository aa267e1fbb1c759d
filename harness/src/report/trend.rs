//! trend.svg: one figure across engine builds (what `leakloop bisect` measured), in plot.svg's
//! style. Each build's runs are dots, their mean a line through the builds, their range a
//! vertical bar (the run-to-run spread); the first changed build is marked red.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::plot::{
    draw_legend, Mark, CLOSE_COLOR, LEGEND_WIDTH, PANEL_HEIGHT, PEAK_COLOR, RELOAD_COLOR,
    TITLE_HEIGHT, WIDTH,
};
use crate::report::units::axis_unit;
use crate::report::ReportError;

/// One build on the trend plot.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// The build's name (a version, a profile).
    pub label: String,
    /// One figure per run that measured it (none: the build did not run or measured nothing).
    pub values: Vec<f64>,
}

/// What the plot shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    /// The title (scenario and metric).
    pub title: String,
    /// The y axis: what is measured.
    pub metric: String,
    /// Whether the figures are bytes (scaled to KiB/MiB/GiB) or plain counts.
    pub bytes: bool,
    /// The builds, oldest first.
    pub points: Vec<TrendPoint>,
    /// The index of the first changed build, if one was found.
    pub first_change: Option<usize>,
}

fn render_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> ReportError {
    ReportError::Render {
        artifact: "trend.svg",
        message: e.to_string(),
    }
}

/// Renders trend.svg.
pub fn render_trend_svg(trend: &Trend) -> Result<String, ReportError> {
    render_trends_svg(std::slice::from_ref(trend))
}

/// Renders several trends into one SVG, one panel under the other, each with its own title
/// (`leakloop history`: one panel per metric and figure of a scenario).
pub fn render_trends_svg(trends: &[Trend]) -> Result<String, ReportError> {
    let panel = TITLE_HEIGHT + PANEL_HEIGHT + 40;
    let panels = trends.len().max(1);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, panel * panels as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(render_error)?;
        for (area, trend) in root.split_evenly((panels, 1)).iter().zip(trends) {
            draw_trend(area, trend)?;
        }
        root.present().map_err(render_error)?;
    }
    // Scenario, metric and build labels come from report files: the file stays XML.
    Ok(crate::report::escape::xml(&svg).into_owned())
}

/// Draws one trend (title, chart, legend) into `area`.
fn draw_trend(area: &DrawingArea<SVGBackend<'_>, Shift>, trend: &Trend) -> Result<(), ReportError> {
    let all: Vec<f64> = trend
        .points
        .iter()
        .flat_map(|p| p.values.iter().copied())
        .collect();
    let largest = all.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let (scale, unit) = if trend.bytes {
        axis_unit(largest as u64)
    } else {
        (1.0, "count")
    };
    let lo = all.iter().copied().fold(0.0_f64, f64::min) / scale;
    let hi = all.iter().copied().fold(0.0_f64, f64::max) / scale;
    let pad = ((hi - lo) * 0.1).max(1.0);
    let (y0, y1) = (lo - pad, hi + pad);
    let n = trend.points.len().max(1);
    let labels: Vec<String> = trend.points.iter().map(|p| p.label.clone()).collect();

    let (title_area, body) = area.split_vertically(TITLE_HEIGHT);
    title_area
        .titled(&trend.title, ("sans-serif", 20))
        .map_err(render_error)?;
    let (chart_area, legend_area) = body.split_horizontally(WIDTH - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(12)
        .x_label_area_size(64)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), y0..y1)
        .map_err(render_error)?;
    chart
        .configure_mesh()
        .x_desc("build")
        .y_desc(format!("{} ({unit})", trend.metric))
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.1}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(render_error)?;

    let mut means = Vec::new();
    for (i, p) in trend.points.iter().enumerate() {
        let x = i as f64;
        if p.values.is_empty() {
            continue;
        }
        let (min, max) = p
            .values
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
        let mean = p.values.iter().sum::<f64>() / p.values.len() as f64;
        means.push((x, mean / scale));
        chart
            .draw_series(std::iter::once(PathElement::new(
                [(x, min / scale), (x, max / scale)],
                PEAK_COLOR.stroke_width(3),
            )))
            .map_err(render_error)?;
        chart
            .draw_series(
                p.values
                    .iter()
                    .map(|v| Circle::new((x, v / scale), 3, BLACK.mix(0.45).filled())),
            )
            .map_err(render_error)?;
    }
    chart
        .draw_series(LineSeries::new(means.clone(), CLOSE_COLOR.stroke_width(2)))
        .map_err(render_error)?;
    chart
        .draw_series(
            means
                .iter()
                .map(|p| Circle::new(*p, 4, CLOSE_COLOR.filled())),
        )
        .map_err(render_error)?;
    let mut legend = vec![
        ("mean of the runs", Mark::Line(CLOSE_COLOR, 2)),
        ("runs' range (spread)", Mark::Line(PEAK_COLOR, 3)),
        ("one run", Mark::Dot(BLACK.mix(0.45))),
    ];
    if let Some(i) = trend.first_change {
        let x = i as f64 - 0.5;
        chart
            .draw_series(LineSeries::new(
                [(x, y0), (x, y1)],
                RELOAD_COLOR.mix(0.8).stroke_width(2),
            ))
            .map_err(render_error)?;
        legend.push(("first change", Mark::Vertical(RELOAD_COLOR)));
    }
    draw_legend(&legend_area, &legend).map_err(render_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_is_labelled_and_the_change_is_marked() {
        let trend = Trend {
            title: "bisect: growth".into(),
            metric: "native_heap growth per turn".into(),
            bytes: true,
            points: vec![
                TrendPoint {
                    label: "1.0".into(),
                    values: vec![100.0, 200.0],
                },
                TrendPoint {
                    label: "1.1".into(),
                    values: vec![],
                },
                TrendPoint {
                    label: "1.2".into(),
                    values: vec![90_000.0, 95_000.0],
                },
            ],
            first_change: Some(2),
        };
        let svg = render_trend_svg(&trend).unwrap();
        assert!(svg.starts_with("<svg"));
        let texts: Vec<&str> = svg.lines().map(str::trim).collect();
        for text in [
            "1.0",
            "1.1",
            "1.2",
            "first change",
            "native_heap growth per turn (KiB)",
        ] {
            assert!(texts.contains(&text), "{text} missing");
        }
    }

    /// Regression (issue 20): build labels and scenario names from report files are text.
    #[test]
    fn hostile_labels_keep_the_trend_well_formed() {
        let hostile = crate::report::test_support::HOSTILE;
        let point = |label: &str| TrendPoint {
            label: label.to_owned(),
            values: vec![1000.0],
        };
        let trend = Trend {
            title: format!("scenario{hostile}"),
            metric: format!("heap{hostile}"),
            bytes: true,
            points: vec![point("1.0"), point(&format!("1.1{hostile}"))],
            first_change: Some(1),
        };
        let svg = render_trends_svg(&[trend.clone(), trend]).unwrap();
        let problems = crate::report::escape::check::xml_problems(&svg);
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(svg.contains("1.1&lt;script&gt;"), "{svg}");
    }
}
