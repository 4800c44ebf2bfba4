//! F5.2: the improvement as the file size x varies, P = 0.1, 0.5, 0.9 (thesis §5.2.2).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, Report};
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, ROUNDS};
use crate::run::{no_wrap, SendOptions};

const ID: &str = "F5.2";
/// (x in MB, improvement in %) at the two sizes the thesis's text gives.
type AtSizes = [(f64, f64); 2];

/// The thesis's improvements (%) at x = 1 and 10 MB, per P, from its F5.1 text (F5.2 shares
/// those points): (P, response, total).
const THESIS: [(f64, AtSizes, AtSizes); 2] = [
    (
        0.1,
        [(1.0, 67.0), (10.0, 68.0)],
        [(1.0, 18.0), (10.0, 54.0)],
    ),
    (0.9, [(1.0, 7.0), (10.0, 8.0)], [(1.0, 0.8), (10.0, 6.0)]),
];

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let xs: &[u64] = if ctx.quick {
        &[1, 5]
    } else {
        &[1, 3, 5, 7, 10]
    };
    let pair = (&SendOptions::secure_only(), &SendOptions::default());
    let pts = ctx.xp_points("loopback", xs, &[0.1, 0.5, 0.9], pair, ctx.reps(ROUNDS))?;
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, dir)
}

pub(crate) fn render(recs: &[Record], dir: &Path) -> Result<Report> {
    let along = Along {
        title: "file size x (MB)",
        symbol: "x",
        of: |r| r.x_mb,
        values: distinct(recs.iter().map(|r| r.x_mb)),
    };
    let curves: Vec<Curve<'_>> = distinct(recs.iter().map(|r| r.p))
        .into_iter()
        .map(|p| {
            let t = THESIS.iter().find(|t| same(t.0, p));
            Curve {
                label: format!("P = {p}"),
                key: Box::new(move |r: &Record| same(r.p, p)),
                thesis_response: t.map_or(Vec::new(), |t| t.1.to_vec()),
                thesis_total: t.map_or(Vec::new(), |t| t.2.to_vec()),
                thesis_label: format!("thesis, P = {p}"),
            }
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_2",
        "F5.2",
        &along,
        &curves,
        Metric::Total,
        &mut findings,
    )?;
    let connect = |m: Mode| sample(recs, |r| r.is(m), |r| r.connect_ms).num(2);
    let body = fill(
        "f5_2.md",
        include_str!("f5_2.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": table,
            "curves": described,
            "so_connect_ms": connect(Mode::SecureOnly),
            "sv_connect_ms": connect(Mode::Sieve),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_2_total".into()),
    })
}
