//! Axes: ranges, ticks and tick labels, chosen here rather than by plotters.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use super::{Figure, Series};

/// One axis: its range, and the tick positions computed here (plotters' own tick choice for f64
/// cannot label categories or pick 1-2-5 ticks on a log axis, and its `WithKeyPoints` wrapper
/// loses the f64 label formatter).
#[derive(Debug, Clone)]
pub(super) struct Axis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    log: bool,
    /// Labelled ticks with a bold grid line.
    pub(super) ticks: Vec<f64>,
    /// Unlabelled light grid lines.
    minor: Vec<f64>,
    /// Decimal places for tick labels on a linear axis.
    decimals: usize,
}

impl Axis {
    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`.
    fn frac(&self, v: f64) -> f64 {
        let (v, lo, hi) = if self.log {
            if v <= 0.0 {
                return -1.0;
            }
            (v.log10(), self.lo.log10(), self.hi.log10())
        } else {
            (v, self.lo, self.hi)
        };
        if hi == lo {
            0.5
        } else {
            (v - lo) / (hi - lo)
        }
    }

    pub(super) fn label(&self, v: f64) -> String {
        if self.log {
            format_log_tick(v)
        } else {
            format_number(v, self.decimals)
        }
    }
}

impl Ranged for Axis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        // Clamped so that a stray value cannot overflow the pixel arithmetic.
        let t = self.frac(*v).clamp(-1.0, 2.0);
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.max_num_points() == 0 {
            Vec::new()
        } else if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// A "nice" step (1, 2, 2.5 or 5 times a power of ten) giving about `target` steps over `span`.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = span / target.max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Multiples of `step` within `[lo, hi]`, snapped so that 0.1 + 0.2 prints as 0.3.
fn multiples(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    if last < first || last - first > 1000 {
        return Vec::new();
    }
    (first..=last)
        .map(|k| {
            let v = k as f64 * step;
            if v == 0.0 {
                0.0 // no "-0"
            } else {
                v
            }
        })
        .collect()
}

/// Decimal places needed to print multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    let e = step.log10().floor();
    let lead = step / 10f64.powf(e);
    let mut d = (-e).max(0.0) as usize;
    if (lead - 2.5).abs() < 1e-6 {
        d += 1;
    }
    d
}

/// `v` with `decimals` places; scientific notation for very large or tiny magnitudes.
fn format_number(v: f64, decimals: usize) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e6).contains(&a) {
        return format!("{v:e}");
    }
    let s = format!("{v:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// A 1-2-5 tick on a log axis, with just the decimals it needs (0.002, 50, 1e6).
fn format_log_tick(v: f64) -> String {
    let decimals = (-(v.log10() + 1e-9).floor()).max(0.0) as usize;
    format_number(v, decimals)
}

/// A linear axis over the data range `[lo, hi]` (already padded), with about `target` ticks.
fn linear_axis(lo: f64, hi: f64, target: f64) -> Axis {
    let step = nice_step(hi - lo, target);
    let ticks = multiples(lo, hi, step);
    let minor = multiples(lo, hi, step / 2.0)
        .into_iter()
        .filter(|m| !ticks.iter().any(|t| (t - m).abs() < step * 1e-6))
        .collect();
    Axis {
        lo,
        hi,
        log: false,
        ticks,
        minor,
        decimals: decimals_for(step),
    }
}

/// A log axis over `[lo, hi]` (both > 0): decades, plus 2 and 5 when fewer than three decades
/// are visible, plus linear ticks when even that gives fewer than two labels.
fn log_axis(lo: f64, hi: f64) -> Axis {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let decades: Vec<f64> = (a..=b).map(|e| 10f64.powi(e)).collect();
    let inside = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
    let mut ticks: Vec<f64> = decades.iter().copied().filter(inside).collect();
    if ticks.len() < 3 {
        ticks = decades
            .iter()
            .flat_map(|d| [*d, 2.0 * d, 5.0 * d])
            .filter(inside)
            .collect();
    }
    if ticks.len() < 2 {
        ticks = linear_axis(lo, hi, 5.0)
            .ticks
            .into_iter()
            .filter(|t| *t > 0.0)
            .collect();
    }
    // If there are very many decades, label every k-th so the labels stay readable.
    let every = ticks.len().div_ceil(12).max(1);
    let ticks: Vec<f64> = ticks.into_iter().step_by(every).collect();
    let minor = if b - a <= 12 {
        decades
            .iter()
            .flat_map(|d| (1..10).map(move |k| f64::from(k) * d))
            .filter(inside)
            .filter(|m| !ticks.iter().any(|t| ((t - m) / m).abs() < 1e-9))
            .collect()
    } else {
        Vec::new()
    };
    Axis {
        lo,
        hi,
        log: true,
        ticks,
        minor,
        decimals: 0,
    }
}

/// True if a point can be drawn on this figure's axes.
pub(super) fn drawable(x: f64, y: f64, log_y: bool) -> bool {
    x.is_finite() && y.is_finite() && !(log_y && y <= 0.0)
}

/// Finite error-bar bounds of point `i` of `s`, ordered (low, high).
pub(super) fn err_of(s: &Series, i: usize) -> Option<(f64, f64)> {
    let (l, h) = *s.err.as_ref()?.get(i)?;
    (l.is_finite() && h.is_finite()).then(|| (l.min(h), l.max(h)))
}

/// The x axis: categories at 0..n with half a slot either side, else the data range padded 5 %.
pub(super) fn x_axis(fig: &Figure, plot_w: f64) -> Axis {
    let xs: Vec<f64> = fig
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| drawable(*x, *y, fig.log_y))
        .map(|p| p.0)
        .collect();
    let (dlo, dhi) = min_max(&xs);
    if let Some(cats) = &fig.x_categories {
        let n = cats.len() as f64;
        let lo = dlo.map_or(0.0, |v| v.min(0.0)) - 0.5;
        let hi = dhi.map_or(n - 1.0, |v| v.max(n - 1.0)).max(0.0) + 0.5;
        let ticks: Vec<f64> = (0..cats.len()).map(|i| i as f64).collect();
        return Axis {
            lo,
            hi,
            log: false,
            ticks,
            minor: Vec::new(),
            decimals: 0,
        };
    }
    let (lo, hi) = match (dlo, dhi) {
        (Some(lo), Some(hi)) if hi > lo => {
            let pad = 0.05 * (hi - lo);
            (lo - pad, hi + pad)
        }
        (Some(v), _) => {
            let d = if v == 0.0 { 1.0 } else { 0.1 * v.abs() };
            (v - d, v + d)
        }
        _ => (0.0, 1.0),
    };
    linear_axis(lo, hi, (plot_w / 90.0).clamp(3.0, 12.0))
}

/// The y axis: every drawable value and error bound; on a linear axis also 0, then 5 % padding
/// on each side that is not pinned at 0 (an axis starting at −5 under positive times looks like
/// a bug); on a log axis 5 % padding in log space.
pub(super) fn y_axis(fig: &Figure, plot_h: f64) -> Axis {
    let mut ys = Vec::new();
    for s in &fig.series {
        for (i, &(x, y)) in s.points.iter().enumerate() {
            if !drawable(x, y, fig.log_y) {
                continue;
            }
            ys.push(y);
            if let Some((l, h)) = err_of(s, i) {
                ys.push(h);
                if !fig.log_y || l > 0.0 {
                    ys.push(l);
                }
            }
        }
    }
    let (dlo, dhi) = min_max(&ys);
    let target = (plot_h / 55.0).clamp(3.0, 10.0);
    if fig.log_y {
        let (lo, hi) = match (dlo, dhi) {
            (Some(lo), Some(hi)) if hi > lo => (lo, hi),
            (Some(v), _) => (v / 2.0, v * 2.0),
            _ => (1.0, 10.0),
        };
        let (l, h) = (lo.log10(), hi.log10());
        let pad = 0.05 * (h - l);
        return log_axis(10f64.powf(l - pad), 10f64.powf(h + pad));
    }
    let lo = dlo.unwrap_or(0.0).min(0.0);
    let hi = dhi.unwrap_or(0.0).max(0.0);
    if hi == lo {
        return linear_axis(0.0, 1.0, target);
    }
    let pad = 0.05 * (hi - lo);
    let lo = if lo < 0.0 { lo - pad } else { lo };
    let hi = if hi > 0.0 { hi + pad } else { hi };
    linear_axis(lo, hi, target)
}

fn min_max(v: &[f64]) -> (Option<f64>, Option<f64>) {
    let lo = v.iter().copied().reduce(f64::min);
    let hi = v.iter().copied().reduce(f64::max);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::super::Style;
    use super::*;

    fn s(label: &str, style: Style, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            style,
            points,
            err: None,
        }
    }

    #[test]
    fn y_axis_includes_zero_and_pads_five_percent() {
        let fig = Figure {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            series: vec![Series {
                err: Some(vec![(90.0, 110.0), (f64::NAN, 1.0)]),
                ..s("a", Style::Ours, vec![(0.0, 100.0), (1.0, 50.0)])
            }],
            log_y: false,
            x_categories: None,
        };
        let y = y_axis(&fig, 400.0);
        assert_eq!(y.lo, 0.0);
        assert!((y.hi - 115.5).abs() < 1e-9, "{}", y.hi);
        assert_eq!(y.ticks.first(), Some(&0.0));
        let x = x_axis(&fig, 600.0);
        assert!((x.lo + 0.05).abs() < 1e-9 && (x.hi - 1.05).abs() < 1e-9);

        let neg = Figure {
            series: vec![s("b", Style::Ours, vec![(0.0, -10.0), (1.0, 30.0)])],
            ..fig.clone()
        };
        let y = y_axis(&neg, 400.0);
        assert!((y.lo + 12.0).abs() < 1e-9 && (y.hi - 32.0).abs() < 1e-9);
    }

    #[test]
    fn ticks_and_labels() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(1.0, 4.0), 0.25);
        let a = linear_axis(0.0, 1.0, 10.0);
        assert_eq!(
            a.ticks.iter().map(|t| a.label(*t)).collect::<Vec<_>>(),
            ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"]
        );
        let l = log_axis(0.004, 3000.0);
        assert_eq!(
            l.ticks.iter().map(|t| l.label(*t)).collect::<Vec<_>>(),
            ["0.01", "0.1", "1", "10", "100", "1000"]
        );
        let l = log_axis(15.0, 80.0);
        assert_eq!(
            l.ticks.iter().map(|t| l.label(*t)).collect::<Vec<_>>(),
            ["20", "50"]
        );
        assert_eq!(format_number(2.5e9, 0), "2.5e9");
        assert_eq!(format_number(-0.00001, 1), "-1e-5");
        assert_eq!(format_number(-0.01, 1), "0.0");
    }
}
