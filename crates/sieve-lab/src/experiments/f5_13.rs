//! F5.13: the improvement of total time against the number of channels, per split (thesis
//! §5.3.3).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::improvement_figures;
use crate::common::record::{write_csv, Mode, Record};
use crate::common::report::{fill, Finding, Report};
use crate::common::words::{point_words, trend};
use crate::common::{rounds_of, Ctx, Metric, Point, ROUNDS};
use crate::plot::{Series, Style};
use crate::run::{no_wrap, SendOptions};

const ID: &str = "F5.13";
const NS: [u8; 4] = [1, 2, 3, 5];
const SPLITS: [&str; 3] = ["even", "segment", "dynamic"];

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let x = if ctx.quick { 5 } else { 10 };
    let f = ctx.work.xp(x, 0.5)?;
    let rounds = ctx.reps(ROUNDS);
    let pts: Vec<Point> = NS
        .iter()
        .map(|&n| {
            let mut variants = vec![SendOptions {
                n,
                ..SendOptions::secure_only()
            }];
            variants.extend(SPLITS.iter().map(|&s| SendOptions {
                split: s,
                n,
                m: n,
                ..SendOptions::default()
            }));
            Point {
                scenario: "loopback".into(),
                files_label: format!("{x}MB-50"),
                files: vec![f.clone()],
                x_mb: x as f64,
                p: 0.5,
                variants,
                rounds,
            }
        })
        .collect();
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, dir)
}

/// Improvement of the sieve with `split` over secure-only, both with N channels, paired by round.
fn at(recs: &[Record], n: u8, split: &str, metric: Metric) -> Estimate {
    let find = |rep: usize, sieve: bool| {
        recs.iter()
            .find(|r| {
                r.n == n
                    && r.rep == rep
                    && if sieve {
                        r.is(Mode::Sieve) && r.split == split
                    } else {
                        r.is(Mode::SecureOnly)
                    }
            })
            .map(|r| metric.of(r))
    };
    Estimate::improvement(
        (0..rounds_of(recs)).filter_map(|rep| find(rep, false).zip(find(rep, true))),
    )
}

pub(crate) fn render(recs: &[Record], dir: &Path) -> Result<Report> {
    let x = recs.first().map_or(10.0, |r| r.x_mb);
    let ns: Vec<u8> = NS
        .iter()
        .copied()
        .filter(|n| recs.iter().any(|r| r.n == *n))
        .collect();
    improvement_figures(
        dir,
        "f5_13",
        &format!("F5.13, x = {x} MB, P = 0.5"),
        "number of channels N = M",
        Metric::Total,
        |metric| {
            SPLITS
                .iter()
                .map(|&s| {
                    let e: Vec<Estimate> = ns.iter().map(|&n| at(recs, n, s, metric)).collect();
                    Series {
                        label: format!("ours, {s}"),
                        style: Style::Ours,
                        points: ns
                            .iter()
                            .zip(&e)
                            .map(|(&n, e)| (f64::from(n), e.point))
                            .collect(),
                        err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                    }
                })
                .collect()
        },
    )?;
    let mut findings = Vec::new();
    let mut t =
        String::from("| N = M | ES: improvement of total | SS | dynamic |\n|---|---|---|---|\n");
    for &n in &ns {
        let cells: Vec<String> = SPLITS
            .iter()
            .map(|&s| {
                let e = at(recs, n, s, Metric::Total);
                findings.push(Finding::new(
                    ID,
                    &format!("{s}, N = M = {n}, {x}MB-50"),
                    "total time",
                    &e,
                ));
                format!(
                    "{} ({})",
                    e.pct(),
                    crate::common::words::Outcome::of(&e).adjective()
                )
            })
            .collect();
        t.push_str(&format!("| {n} | {} |\n", cells.join(" | ")));
    }
    t.push_str(&crate::common::report::interval_note(rounds_of(recs)));
    let splits: Vec<_> = SPLITS
        .iter()
        .map(|&s| {
            let curve: Vec<Estimate> = ns.iter().map(|&n| at(recs, n, s, Metric::Total)).collect();
            json!({
                "split": s,
                "trend": trend(&curve),
                "first": point_words(curve.first().unwrap_or(&Estimate::NONE)),
                "last": point_words(curve.last().unwrap_or(&Estimate::NONE)),
            })
        })
        .collect();
    let ss_vs_es: Vec<_> = ns
        .iter()
        .map(|&n| {
            let (ss, es) = (
                at(recs, n, "segment", Metric::Total),
                at(recs, n, "even", Metric::Total),
            );
            json!({"n": n, "words": crate::common::words::compare(&ss, &es)})
        })
        .collect();
    let body = fill(
        "f5_13.md",
        include_str!("f5_13.md"),
        json!({
            "rounds": rounds_of(recs),
            "x": x,
            "table": t,
            "splits": splits,
            "ss_vs_es": ss_vs_es,
            "first_n": ns.first(),
            "last_n": ns.last(),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_13_total".into()),
    })
}
