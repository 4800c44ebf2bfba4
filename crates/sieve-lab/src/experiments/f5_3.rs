//! F5.3: the improvement of response time against P for each cipher suite: today's TLS 1.3
//! suites, and the thesis's own TLS 1.2 suites where the binary was built with them
//! (thesis §5.2.3).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, Report};
use crate::common::suites::{measure_suites, suite_label, suites};
use crate::common::words::compare;
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, ROUNDS};
use crate::machine::Machine;
use crate::run::THESIS_SUITES;

const ID: &str = "F5.3";

/// The thesis's F5.3 values (%), by our name of its suite.
fn thesis_response(cipher: &str) -> Vec<(f64, f64)> {
    match cipher {
        "3des-ede-cbc-sha" => vec![(0.1, 67.0), (0.9, 7.0)],
        "aes256-cbc-sha" => vec![(0.1, 30.0)],
        _ => Vec::new(),
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.9]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9]
    };
    let recs = measure_suites(ctx, &[1], ps, ctx.reps(ROUNDS))?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, &ctx.machine, dir)
}

pub(crate) fn render(recs: &[Record], machine: &Machine, dir: &Path) -> Result<Report> {
    let along = Along {
        title: "proportion of classified information P",
        symbol: "P",
        of: |r| r.p,
        values: distinct(recs.iter().map(|r| r.p)),
    };
    let ciphers = suites(recs);
    let curves: Vec<Curve<'_>> = ciphers
        .iter()
        .map(|c| Curve {
            label: suite_label(c),
            key: Box::new(move |r: &Record| &r.cipher == c),
            thesis_response: thesis_response(c),
            thesis_total: Vec::new(),
            thesis_label: format!("thesis, {}", suite_label(c)),
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_3",
        "F5.3",
        &along,
        &curves,
        Metric::Response,
        &mut findings,
    )?;
    // Secure-only response time of each suite at the lowest P, against the first suite's.
    let p0 = along.values.first().copied().unwrap_or(0.1);
    let secure_only_ms = |c: &str| {
        sample(
            recs,
            |r| r.cipher == c && r.is(Mode::SecureOnly) && same(r.p, p0),
            |r| r.response_ms,
        )
    };
    let base = ciphers.first().map(|c| secure_only_ms(c));
    let suites_json: Vec<_> = ciphers
        .iter()
        .map(|c| {
            let e = secure_only_ms(c);
            json!({
                "label": suite_label(c),
                "ms": e.num(2),
                "versus_first": base.map_or("–", |b| compare(&e, &b)),
            })
        })
        .collect();
    let legacy = ciphers.iter().any(|c| THESIS_SUITES.contains(&c.as_str()));
    let body = fill(
        "f5_3.md",
        include_str!("f5_3.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": table,
            "curves": described,
            "legacy": legacy,
            "p0": p0,
            "first": ciphers.first().map(|c| suite_label(c)),
            "suites": suites_json,
            "speeds": machine.speeds.iter().map(|(w, s)| format!("{w} {s:.2} GB/s")).collect::<Vec<_>>(),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_3_response".into()),
    })
}
