//! The shape most of the thesis's figures share: the improvement of the sieve over secure-only
//! along one axis (P or x), one curve per condition (file size, cipher, link), in both times,
//! with the thesis's values at its points. One function draws the figures, tables the data and
//! puts every curve into words by the rules of [`super::words`].

use std::path::Path;

use anyhow::Result;
use serde_json::{json, Value};

use super::figures::{improvement_figures, improvement_series, thesis_series};
use super::record::{same, Record};
use super::report::{pair_table, Finding, Row};
use super::words::{agreement, point_words, trend, Outcome};
use super::{improvement, Metric};

/// One condition: which records, and what the thesis says for it.
pub(crate) struct Curve<'a> {
    /// Legend and table label, e.g. "x = 1 MB", "TLS 1.3 aes128gcm", "wifi".
    pub(crate) label: String,
    pub(crate) key: Box<dyn Fn(&Record) -> bool + 'a>,
    /// The thesis's improvements (%) of response and total time at its points (axis value, %).
    pub(crate) thesis_response: Vec<(f64, f64)>,
    pub(crate) thesis_total: Vec<(f64, f64)>,
    /// How the thesis's condition is named in the legend, e.g. "thesis, 3DES".
    pub(crate) thesis_label: String,
}

/// The axis the curves run along.
pub(crate) struct Along {
    /// "proportion of classified information P" or "file size x (MB)".
    pub(crate) title: &'static str,
    /// "P" or "x".
    pub(crate) symbol: &'static str,
    pub(crate) of: fn(&Record) -> f64,
    pub(crate) values: Vec<f64>,
}

/// Draw `stem_response` and `stem_total`, table every (curve, axis value), and describe each
/// curve. Returns the table and one JSON object per curve for the template:
/// `{label, response: {...}, total: {...}}`, each metric with `points` (value, pct, adjective,
/// thesis), `trend`, `wins`, `losses`, `n`, `best` and, where the thesis gives values, `low`,
/// `high` (our estimates at its first and last point) and `agreement`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn describe(
    experiment: &str,
    recs: &[Record],
    dir: &Path,
    stem: &str,
    title: &str,
    along: &Along,
    curves: &[Curve<'_>],
    thesis_metric: Metric,
    findings: &mut Vec<Finding>,
) -> Result<(String, Vec<Value>)> {
    let thesis_of = |c: &Curve<'_>, m: Metric| match m {
        Metric::Response => c.thesis_response.clone(),
        Metric::Total => c.thesis_total.clone(),
    };
    improvement_figures(dir, stem, title, along.title, thesis_metric, |metric| {
        let mut s: Vec<_> = curves
            .iter()
            .map(|c| {
                improvement_series(
                    recs,
                    &format!("ours, {}", c.label),
                    &c.key,
                    &along.values,
                    along.of,
                    metric,
                )
            })
            .collect();
        for c in curves {
            let t = thesis_of(c, metric);
            if !t.is_empty() {
                s.push(thesis_series(&c.thesis_label, t));
            }
        }
        s
    })?;
    let rows: Vec<Row<'_>> = curves
        .iter()
        .flat_map(|c| along.values.iter().map(move |&v| (c, v)))
        .map(|(c, v)| -> Row<'_> {
            let of = along.of;
            (
                format!("{}, {} = {v}", c.label, along.symbol),
                Box::new(move |r: &Record| (c.key)(r) && same(of(r), v)),
            )
        })
        .collect();
    let table = pair_table(experiment, recs, &rows, findings);
    let mut described = Vec::new();
    for c in curves {
        let mut per = serde_json::Map::new();
        per.insert("label".into(), json!(c.label));
        for metric in [Metric::Response, Metric::Total] {
            let at = |v: f64| {
                improvement(
                    recs,
                    |r| (c.key)(r) && same((along.of)(r), v),
                    |r| metric.of(r),
                )
            };
            let curve: Vec<_> = along.values.iter().map(|&v| at(v)).collect();
            let thesis = thesis_of(c, metric);
            let ours_at_thesis: Vec<_> = thesis.iter().map(|t| at(t.0)).collect();
            let values: Vec<f64> = thesis.iter().map(|t| t.1).collect();
            let best = curve
                .iter()
                .zip(&along.values)
                .filter(|(e, _)| e.known())
                .max_by(|a, b| a.0.point.total_cmp(&b.0.point));
            let points: Vec<Value> = curve
                .iter()
                .zip(&along.values)
                .map(|(e, v)| {
                    let t = thesis.iter().find(|t| same(t.0, *v)).map(|t| t.1);
                    let mut w = point_words(e);
                    w["value"] = json!(format!("{v}"));
                    w["thesis"] = json!(t.map(|t| format!("{t}")));
                    w
                })
                .collect();
            let mut m = json!({
                "points": points,
                "trend": trend(&curve),
                "wins": curve.iter().filter(|e| Outcome::of(e) == Outcome::Wins).count(),
                "losses": curve.iter().filter(|e| Outcome::of(e) == Outcome::Loses).count(),
                "n": curve.len(),
                "best": best.map_or(json!(null), |b| json!({"value": format!("{}", b.1), "pct": b.0.pct()})),
                "has_thesis": !thesis.is_empty(),
                "agreement": agreement(&ours_at_thesis, &values).words(),
            });
            if let (Some(f), Some(l)) = (ours_at_thesis.first(), ours_at_thesis.last()) {
                m["low"] = point_words(f);
                m["low"]["value"] = json!(format!("{}", thesis[0].0));
                m["low"]["thesis"] = json!(format!("{}", thesis[0].1));
                m["high"] = point_words(l);
                m["high"]["value"] = json!(format!("{}", thesis[thesis.len() - 1].0));
                m["high"]["thesis"] = json!(format!("{}", thesis[thesis.len() - 1].1));
            }
            per.insert(metric.short().into(), m);
        }
        described.push(Value::Object(per));
    }
    Ok((table, described))
}
