//! F5.7: Wi-Fi with additional processing AP = 500 ms per secure MB, the thesis's emulation of a
//! slower client (§5.2.4.1): the sender sleeps x·AP (secure-only) or x·P·AP (sieve).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::links::{
    cleartext_on_wire, emulated, over_link, points, write_checks, Condition,
};
use crate::common::record::{write_csv, Record};
use crate::common::report::{fill, Report};
use crate::common::{distinct, rounds_of, Ctx, Metric, ROUNDS};
use crate::run::SendOptions;
use crate::scenario::{check_root, WIFI};

const ID: &str = "F5.7";
const AP_MS_PER_MB: f64 = 500.0;

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    if let Err(why) = check_root() {
        return Ok(Report::skipped(&why));
    }
    if !ctx.tools.emulates_processing {
        return Ok(Report::not_run(&format!(
            "**Skipped: {} has no `--emulate-processing-ms-per-mb`.** The additional processing \
             time is a laboratory knob, only in a `sieve` built with its `lab` feature: \
             `cargo build --release -p sieve-cli -p sieve-lab --features sieve-cli/lab` (or \
             `cargo build-lab`).\n",
            ctx.tools.sieve.display()
        )));
    }
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.5]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9]
    };
    let rounds = ctx.reps(ROUNDS);
    let plain = Condition {
        name: "wifi",
        link: WIFI,
        cpu: None,
    };
    let with_ap = Condition {
        name: "wifi+AP",
        link: WIFI,
        cpu: None,
    };
    let (so, sv) = (SendOptions::secure_only(), SendOptions::default());
    let mut recs = Vec::new();
    let mut checks = Vec::new();
    let pts = points(ctx, &plain, &[1], ps, (&so, &sv), (rounds, rounds))?;
    recs.extend(over_link(ctx, &plain, &pts, &mut checks)?);
    let ap = |o: SendOptions| SendOptions {
        processing_ms_per_mb: AP_MS_PER_MB,
        ..o
    };
    let (so, sv) = (ap(so), ap(sv));
    let pts = points(ctx, &with_ap, &[1], ps, (&so, &sv), (rounds, rounds))?;
    recs.extend(over_link(ctx, &with_ap, &pts, &mut checks)?);
    write_csv(&dir.join("data.csv"), &recs)?;
    write_checks(dir, &checks)?;
    let mut report = render(&recs, dir)?;
    report.emulated = format!(
        "{} Additional processing: the sender sleeps {AP_MS_PER_MB} ms per MB of classified \
         data in the wifi+AP rows.",
        emulated(&[plain, with_ap], &checks)
    );
    Ok(report)
}

pub(crate) fn render(recs: &[Record], dir: &Path) -> Result<Report> {
    let along = Along {
        title: "proportion of classified information P",
        symbol: "P",
        of: |r| r.p,
        values: distinct(recs.iter().map(|r| r.p)),
    };
    let curves: Vec<Curve<'_>> = [("wifi", 8.0), ("wifi+AP", 49.0)]
        .into_iter()
        .map(|(n, t)| Curve {
            label: n.to_string(),
            key: Box::new(move |r: &Record| r.scenario == n),
            thesis_response: vec![(0.1, t)],
            thesis_total: Vec::new(),
            thesis_label: format!("thesis, {n}"),
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_7",
        "F5.7",
        &along,
        &curves,
        Metric::Response,
        &mut findings,
    )?;
    let body = fill(
        "f5_7.md",
        include_str!("f5_7.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": table,
            "curves": described,
            "ap": AP_MS_PER_MB,
            "shares": cleartext_on_wire(recs, &["wifi", "wifi+AP"]),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: Some("f5_7_response".into()),
    })
}
