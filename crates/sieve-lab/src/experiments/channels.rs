//! F5.8-5.9 and F5.10-5.11: several channels at once, in the secure-only system and in the
//! sieve: response, total and connection time against N, and total time against x (thesis §5.3,
//! PO1). Both figure groups are the same sweep with a different system, so they share this file;
//! each has its own template.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::{fig, thesis_series};
use crate::common::record::{same, write_csv, Record};
use crate::common::report::{fill, interval_note, Report};
use crate::common::words::{compare, Outcome};
use crate::common::{distinct, rounds_of, sample, xp_label, Ctx, Metric, Point, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, SendOptions};

const NS: [u8; 4] = [1, 2, 3, 5];

pub(crate) fn f5_8(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let recs = measure(ctx, false)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, dir, false)
}

pub(crate) fn f5_10(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let recs = measure(ctx, true)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, dir, true)
}

fn measure(ctx: &mut Ctx, sieve: bool) -> Result<Vec<Record>> {
    let rx = ctx.loopback()?;
    let xs: &[u64] = if ctx.quick {
        &[1, 10]
    } else {
        &[1, 3, 5, 7, 10]
    };
    let rounds = ctx.reps(ROUNDS);
    let mut pts = Vec::new();
    for &x in xs {
        pts.push(Point {
            scenario: "loopback".into(),
            files_label: xp_label(x as f64, 0.5),
            files: vec![ctx.work.xp(x, 0.5)?],
            x_mb: x as f64,
            p: 0.5,
            variants: NS
                .iter()
                .map(|&n| SendOptions {
                    n,
                    m: n,
                    ..if sieve {
                        SendOptions::default()
                    } else {
                        SendOptions::secure_only()
                    }
                })
                .collect(),
            rounds,
        });
    }
    ctx.sweep(&rx, &pts, &no_wrap)
}

/// Relative gain of N channels over one, paired by round: (t₁ − t_N) / t₁ × 100.
fn gain_over_one(recs: &[Record], x: f64, n: u8, metric: Metric) -> Estimate {
    let by = |k: u8, rep: usize| {
        recs.iter()
            .find(|r| r.n == k && r.rep == rep && same(r.x_mb, x))
            .map(|r| metric.of(r))
    };
    let rounds = rounds_of(recs);
    Estimate::improvement((0..rounds).filter_map(|rep| by(1, rep).zip(by(n, rep))))
}

fn render(recs: &[Record], dir: &Path, sieve: bool) -> Result<Report> {
    let (id, who) = if sieve {
        ("F5.10-5.11", "sieve")
    } else {
        ("F5.8-5.9", "secure-only")
    };
    let xs = distinct(recs.iter().map(|r| r.x_mb));
    let ns: Vec<u8> = NS
        .iter()
        .copied()
        .filter(|n| recs.iter().any(|r| r.n == *n))
        .collect();
    let med = |x: f64, n: u8, m: &dyn Fn(&Record) -> f64| {
        sample(recs, |r| r.n == n && same(r.x_mb, x), m)
    };
    // Figures: response and total against N per size (F5.8/5.10 a, b), total against x per N
    // (F5.9/5.11), connection time against N.
    for metric in [Metric::Response, Metric::Total] {
        let series = xs
            .iter()
            .map(|&x| {
                let e: Vec<Estimate> = ns.iter().map(|&n| med(x, n, &|r| metric.of(r))).collect();
                Series {
                    label: format!("ours, {x} MB"),
                    style: Style::Ours,
                    points: ns
                        .iter()
                        .zip(&e)
                        .map(|(&n, e)| (f64::from(n), e.point))
                        .collect(),
                    err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                }
            })
            .collect();
        plot::render(
            &fig(
                &format!(
                    "{id}: {who} {} vs channels (the thesis's metric)",
                    metric.name()
                ),
                "number of channels N",
                &format!("{} (ms)", metric.name()),
                series,
            ),
            &dir.join(format!("{}_vs_n", metric.short())),
        )?;
    }
    let by_x = ns
        .iter()
        .map(|&n| {
            let e: Vec<Estimate> = xs.iter().map(|&x| med(x, n, &|r| r.total_ms)).collect();
            Series {
                label: format!("ours, N = {n}"),
                style: Style::Ours,
                points: xs.iter().zip(&e).map(|(&x, e)| (x, e.point)).collect(),
                err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
            }
        })
        .collect();
    plot::render(
        &fig(
            &format!(
                "{}: {who} total time vs file size (the thesis's metric)",
                if sieve { "F5.11" } else { "F5.9" }
            ),
            "file size x (MB), P = 0.5",
            "total time (ms)",
            by_x,
        ),
        &dir.join("total_vs_x"),
    )?;
    let conn: Vec<Estimate> = ns
        .iter()
        .map(|&n| sample(recs, |r| r.n == n, |r| r.connect_ms))
        .collect();
    let mut connect = vec![Series {
        label: "ours".into(),
        style: Style::Ours,
        points: ns
            .iter()
            .zip(&conn)
            .map(|(&n, e)| (f64::from(n), e.point))
            .collect(),
        err: Some(conn.iter().map(|e| (e.lo, e.hi)).collect()),
    }];
    if !sieve {
        // The thesis's text gives 755 ms for one channel and 988 ms for two.
        connect.push(thesis_series("thesis", vec![(1.0, 755.0), (2.0, 988.0)]));
    }
    plot::render(
        &fig(
            &format!("{id}: {who} connection time vs channels"),
            "number of channels N",
            "connection time (ms)",
            connect,
        ),
        &dir.join("connect_vs_n"),
    )?;

    let mut t = String::from(
        "| x | N | response (ms) | total (ms) | connect (ms) | response gain over N = 1 | total gain over N = 1 |\n|---|---|---|---|---|---|---|\n",
    );
    let mut sizes = Vec::new();
    for &x in &xs {
        let mut best = [(0u8, f64::INFINITY); 2];
        for &n in &ns {
            let (resp, tot) = (med(x, n, &|r| r.response_ms), med(x, n, &|r| r.total_ms));
            let (gr, gt) = (
                gain_over_one(recs, x, n, Metric::Response),
                gain_over_one(recs, x, n, Metric::Total),
            );
            let _ = writeln!(
                t,
                "| {x} MB | {n} | {} | {} | {} | {} | {} |",
                resp.num(2),
                tot.num(2),
                med(x, n, &|r| r.connect_ms).num(2),
                if n == 1 { "–".into() } else { gr.pct() },
                if n == 1 { "–".into() } else { gt.pct() },
            );
            for (i, e) in [resp, tot].iter().enumerate() {
                if e.point < best[i].1 {
                    best[i] = (n, e.point);
                }
            }
        }
        let two = |m| {
            let e = gain_over_one(recs, x, 2, m);
            json!({"pct": e.pct(), "words": match Outcome::of(&e) {
                Outcome::Wins => "faster than",
                Outcome::Loses => "slower than",
                Outcome::Ties => "the same within the noise as",
            }})
        };
        sizes.push(json!({
            "x": format!("{x}"),
            "best_response_n": best[0].0,
            "best_total_n": best[1].0,
            "two_response": two(Metric::Response),
            "two_total": two(Metric::Total),
        }));
    }
    t.push_str(&interval_note(rounds_of(recs)));
    let last = ns.last().copied().unwrap_or(1);
    let c_first = conn.first().copied().unwrap_or(Estimate::NONE);
    let c_last = conn.last().copied().unwrap_or(Estimate::NONE);
    let body = fill(
        if sieve { "f5_10.md" } else { "f5_8.md" },
        if sieve {
            include_str!("f5_10.md")
        } else {
            include_str!("f5_8.md")
        },
        json!({
            "rounds": rounds_of(recs),
            "table": t,
            "sizes": sizes,
            "connect_first": c_first.num(2),
            "connect_last": c_last.num(2),
            "last_n": last,
            "connect_grows": compare(&c_last, &c_first),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings: Vec::new(),
        key_plot: Some("total_vs_n".into()),
    })
}
