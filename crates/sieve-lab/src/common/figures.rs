//! Figures every experiment draws the same way: improvement curves from the one estimator (the
//! marker is the median, the bar its interval) and the thesis's values as markers at its points.

use std::path::Path;

use anyhow::Result;

use super::record::Record;
use super::{improvement, Metric};
use crate::plot::{self, Figure, Series, Style};

/// Improvement of `metric` against the x values `xs` (matched by `x_of`) over the records `key`
/// selects.
pub(crate) fn improvement_series(
    recs: &[Record],
    label: &str,
    key: impl Fn(&Record) -> bool,
    xs: &[f64],
    x_of: impl Fn(&Record) -> f64,
    metric: Metric,
) -> Series {
    let mut points = Vec::new();
    let mut err = Vec::new();
    for &x in xs {
        let e = improvement(
            recs,
            |r| key(r) && (x_of(r) - x).abs() < 1e-9,
            |r| metric.of(r),
        );
        if e.known() {
            points.push((x, e.point));
            err.push((e.lo, e.hi));
        }
    }
    Series {
        label: label.into(),
        style: Style::Ours,
        points,
        err: Some(err),
    }
}

/// The thesis's values at the points its text gives: markers only.
pub(crate) fn thesis_series(label: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        style: Style::Thesis,
        points,
        err: None,
    }
}

pub(crate) fn fig(title: &str, x: &str, y: &str, series: Vec<Series>) -> Figure {
    Figure {
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        series,
        log_y: false,
        x_categories: None,
    }
}

/// The figure of an improvement in both times, the thesis's metric first: `stem_response` and
/// `stem_total`, each titled with whether it is the thesis's metric. `series(metric)` gives the
/// curves (ours and, for the thesis's metric only, the thesis's markers). Returns the file
/// stems written, thesis's metric first.
pub(crate) fn improvement_figures(
    dir: &Path,
    stem: &str,
    title: &str,
    x_label: &str,
    thesis_metric: Metric,
    series: impl Fn(Metric) -> Vec<Series>,
) -> Result<Vec<String>> {
    let other = match thesis_metric {
        Metric::Response => Metric::Total,
        Metric::Total => Metric::Response,
    };
    let mut written = Vec::new();
    for (metric, whose) in [
        (thesis_metric, "the thesis's metric"),
        (other, "ours beside it"),
    ] {
        let name = format!("{stem}_{}", metric.short());
        plot::render(
            &fig(
                &format!("{title}: improvement of {} ({whose})", metric.name()),
                x_label,
                &format!("improvement of {} (%)", metric.name()),
                series(metric),
            ),
            &dir.join(&name),
        )?;
        written.push(name);
    }
    Ok(written)
}
