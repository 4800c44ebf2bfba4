//! F5.6: the improvement of total time as the file size grows, over the emulated wired and
//! Wi-Fi links and with a power-saving client (thesis §5.2.4, Figure 5.6).

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
use crate::machine::Machine;
use crate::run::SendOptions;
use crate::scenario::{check_cgroup, check_root, WIFI, WIRED};

const ID: &str = "F5.6";
/// Fewer rounds where a point takes a second or more on the link (10 MB at 54 Mbit/s: 1.5 s).
const ROUNDS_SLOW: usize = 10;

fn conditions(with_cgroup: bool) -> Vec<Condition> {
    let mut v = vec![
        Condition {
            name: "wired",
            link: WIRED,
            cpu: None,
        },
        Condition {
            name: "wifi",
            link: WIFI,
            cpu: None,
        },
    ];
    if with_cgroup {
        v.push(Condition {
            name: "wifi+power-saving",
            link: WIFI,
            cpu: Some(0.8),
        });
    }
    v
}

/// The wired curve of F5.6 is the thesis's F5.2, with values at x = 1 and 10 MB for P = 0.1
/// from its F5.1 text; it gives none for Wi-Fi, only the shape.
fn thesis(name: &str) -> Vec<(f64, f64)> {
    match name {
        "wired" => vec![(1.0, 18.0), (10.0, 54.0)],
        _ => Vec::new(),
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    if let Err(why) = check_root() {
        return Ok(Report::skipped(&why));
    }
    let conds = conditions(check_cgroup().is_ok());
    let xs: &[u64] = if ctx.quick {
        &[1, 3]
    } else {
        &[1, 3, 5, 7, 10]
    };
    let pair = (&SendOptions::secure_only(), &SendOptions::default());
    let rounds = (ctx.reps(ROUNDS), ctx.reps(ROUNDS_SLOW));
    let mut recs = Vec::new();
    let mut checks = Vec::new();
    for c in &conds {
        let pts = points(ctx, c, xs, &[0.1], pair, rounds)?;
        recs.extend(over_link(ctx, c, &pts, &mut checks)?);
    }
    write_csv(&dir.join("data.csv"), &recs)?;
    write_checks(dir, &checks)?;
    let mut report = render(&recs, &ctx.machine, dir)?;
    report.emulated = emulated(&conds, &checks);
    Ok(report)
}

pub(crate) fn render(recs: &[Record], machine: &Machine, dir: &Path) -> Result<Report> {
    let along = Along {
        title: "file size x (MB)",
        symbol: "x",
        of: |r| r.x_mb,
        values: distinct(recs.iter().map(|r| r.x_mb)),
    };
    let names: Vec<&str> = ["wired", "wifi", "wifi+power-saving"]
        .into_iter()
        .filter(|n| recs.iter().any(|r| r.scenario == *n))
        .collect();
    let curves: Vec<Curve<'_>> = names
        .iter()
        .map(|&n| Curve {
            label: format!("{n}, P = 0.1"),
            key: Box::new(move |r: &Record| r.scenario == n),
            thesis_response: Vec::new(),
            thesis_total: thesis(n),
            thesis_label: format!("thesis, {n}, P = 0.1"),
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_6",
        "F5.6",
        &along,
        &curves,
        Metric::Total,
        &mut findings,
    )?;
    let aes = machine.speed("TLS 1.3 AES-128-GCM").unwrap_or(f64::NAN);
    // How many times faster than the Wi-Fi link the power-saving sender can encrypt.
    let headroom = aes * 1e9 * 0.8 * 8.0 / (WIFI.rate_mbit * 1e6);
    let body = fill(
        "f5_6.md",
        include_str!("f5_6.md"),
        json!({
            "rounds": rounds_of(recs),
            "rounds_slow": ROUNDS_SLOW,
            "table": table,
            "curves": described,
            "aes_gbps": format!("{aes:.1}"),
            "headroom": format!("{headroom:.0}"),
            "shares": cleartext_on_wire(recs, &names),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: Some("f5_6_total".into()),
    })
}
