//! F5.4: the improvement of total time as the file size grows, for each cipher suite (thesis
//! §5.2.3, Figure 5.4).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, Report};
use crate::common::suites::{measure_suites, suite_label, suites};
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, ROUNDS};
use crate::machine::Machine;
use crate::run::THESIS_SUITES;

const ID: &str = "F5.4";

/// The thesis's 3DES curve of F5.4 is its F5.2, whose values at x = 1 and 10 MB its F5.1 text
/// gives: (P, [(x, total %)]). It gives no number for AES-256 here, only the shape.
fn thesis_total(cipher: &str, p: f64) -> Vec<(f64, f64)> {
    match (cipher, p) {
        ("3des-ede-cbc-sha", p) if same(p, 0.1) => vec![(1.0, 18.0), (10.0, 54.0)],
        ("3des-ede-cbc-sha", p) if same(p, 0.9) => vec![(1.0, 0.8), (10.0, 6.0)],
        _ => Vec::new(),
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let (xs, ps): (&[u64], &[f64]) = if ctx.quick {
        (&[1, 5], &[0.1])
    } else {
        (&[1, 3, 5, 7, 10], &[0.1, 0.9])
    };
    let recs = measure_suites(ctx, xs, ps, ctx.reps(ROUNDS))?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, &ctx.machine, dir)
}

pub(crate) fn render(recs: &[Record], machine: &Machine, dir: &Path) -> Result<Report> {
    let along = Along {
        title: "file size x (MB)",
        symbol: "x",
        of: |r| r.x_mb,
        values: distinct(recs.iter().map(|r| r.x_mb)),
    };
    let ps = distinct(recs.iter().map(|r| r.p));
    let ciphers = suites(recs);
    let curves: Vec<Curve<'_>> = ciphers
        .iter()
        .flat_map(|c| ps.iter().map(move |&p| (c, p)))
        .map(|(c, p)| Curve {
            label: format!("{}, P = {p}", suite_label(c)),
            key: Box::new(move |r: &Record| &r.cipher == c && same(r.p, p)),
            thesis_response: Vec::new(),
            thesis_total: thesis_total(c, p),
            thesis_label: format!("thesis, {}, P = {p}", suite_label(c)),
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_4",
        "F5.4",
        &along,
        &curves,
        Metric::Total,
        &mut findings,
    )?;
    let body = fill(
        "f5_4.md",
        include_str!("f5_4.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": table,
            "curves": described,
            "legacy": ciphers.iter().any(|c| THESIS_SUITES.contains(&c.as_str())),
            "speeds": machine.speeds.iter().map(|(w, s)| format!("{w} {s:.2} GB/s")).collect::<Vec<_>>(),
            "so_connect_ms": sample(recs, |r| r.is(Mode::SecureOnly), |r| r.connect_ms).num(2),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_4_total".into()),
    })
}
