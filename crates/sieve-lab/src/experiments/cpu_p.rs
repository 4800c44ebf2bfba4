//! CPU-P, our own: the CPU each side spends per GB against P, for the sieve and secure-only. The
//! thesis measured time only; where the sieve saves anything on a fast processor, it is CPU.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::record::{same, write_csv};
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::words::Outcome;
use crate::common::{distinct, Ctx, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, SendOptions};

const ID: &str = "CPU-P";

/// One transfer: CPU of both processes, in ms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    mode: String,
    p: f64,
    rep: usize,
    sender_cpu_ms: f64,
    receiver_cpu_ms: f64,
    response_ms: f64,
    bytes: u64,
}

impl Row {
    /// CPU seconds per GB moved, sender or receiver.
    fn per_gb(&self, receiver: bool) -> f64 {
        let ms = if receiver {
            self.receiver_cpu_ms
        } else {
            self.sender_cpu_ms
        };
        ms / 1000.0 / (self.bytes as f64 / 1e9)
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let size = if ctx.quick { 32 } else { 256 };
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.5, 0.9]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    };
    let reps = ctx.reps(ROUNDS);
    let (so, sv) = (SendOptions::secure_only(), SendOptions::default());
    let files: Vec<_> = ps
        .iter()
        .map(|&p| ctx.work.xp(size, p))
        .collect::<Result<_>>()?;
    ctx.bar
        .set_length(ctx.bar.length().unwrap_or(0) + (reps * ps.len() * 2) as u64);
    let mut rows = Vec::new();
    for rep in 0..reps {
        for (i, &p) in ps.iter().enumerate() {
            for v in [&so, &sv] {
                let before = rx.cpu_ms();
                let s = v.run(
                    &ctx.tools,
                    rx.tls,
                    std::slice::from_ref(&files[i]),
                    &no_wrap,
                )?;
                // The receiver has acknowledged; let it finish its bookkeeping before reading.
                std::thread::sleep(std::time::Duration::from_millis(50));
                rows.push(Row {
                    mode: v.mode.into(),
                    p,
                    rep,
                    sender_cpu_ms: s.cpu_ms,
                    receiver_cpu_ms: rx.cpu_ms() - before,
                    response_ms: s.response_ms,
                    bytes: s.bytes,
                });
                ctx.bar.inc(1);
            }
        }
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    render(&rows, dir)
}

/// The saving of the sieve's CPU over secure-only's at P, paired by round.
fn saving(rows: &[Row], p: f64, receiver: bool) -> Estimate {
    let get = |mode: &str, rep: usize| {
        rows.iter()
            .find(|r| r.mode == mode && r.rep == rep && same(r.p, p))
            .map(|r| r.per_gb(receiver))
    };
    let reps = rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1);
    Estimate::improvement(
        (0..reps).filter_map(|rep| get("secure-only", rep).zip(get("sieve", rep))),
    )
}

pub(crate) fn render(rows: &[Row], dir: &Path) -> Result<Report> {
    let ps = distinct(rows.iter().map(|r| r.p));
    let med = |mode: &str, p: f64, receiver: bool| {
        let xs: Vec<f64> = rows
            .iter()
            .filter(|r| r.mode == mode && same(r.p, p))
            .map(|r| r.per_gb(receiver))
            .collect();
        Estimate::median_of(&xs)
    };
    let mut series = Vec::new();
    for (mode, style) in [("secure-only", Style::Peer), ("sieve", Style::Ours)] {
        for (receiver, side) in [(false, "sender"), (true, "receiver")] {
            let e: Vec<Estimate> = ps.iter().map(|&p| med(mode, p, receiver)).collect();
            series.push(Series {
                label: format!("{mode}, {side}"),
                style,
                points: ps.iter().zip(&e).map(|(&p, e)| (p, e.point)).collect(),
                err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
            });
        }
    }
    let size_mb = rows.first().map_or(0, |r| r.bytes / 1_000_000);
    plot::render(
        &fig(
            &format!("CPU seconds per GB vs P ({size_mb} MB documents, loopback)"),
            "proportion of classified information P",
            "CPU time (s per GB moved)",
            series,
        ),
        &dir.join("cpu_per_gb"),
    )?;
    let mut findings = Vec::new();
    let mut t = String::from("| P | secure-only sender (s/GB) | sieve sender | sender saving | secure-only receiver | sieve receiver | receiver saving |\n|---|---|---|---|---|---|---|\n");
    let mut points = Vec::new();
    for &p in &ps {
        let (ss, rs) = (saving(rows, p, false), saving(rows, p, true));
        let _ = writeln!(
            t,
            "| {p} | {} | {} | {} ({}) | {} | {} | {} ({}) |",
            med("secure-only", p, false).num(2),
            med("sieve", p, false).num(2),
            ss.pct(),
            Outcome::of(&ss)
                .adjective()
                .replace("faster", "less")
                .replace("slower", "more"),
            med("secure-only", p, true).num(2),
            med("sieve", p, true).num(2),
            rs.pct(),
            Outcome::of(&rs)
                .adjective()
                .replace("faster", "less")
                .replace("slower", "more"),
        );
        let label = format!("P = {p}, {size_mb} MB, loopback");
        findings.push(Finding::new(ID, &label, "sender CPU per GB", &ss));
        findings.push(Finding::new(ID, &label, "receiver CPU per GB", &rs));
        let spends = |e: &Estimate| match Outcome::of(e) {
            Outcome::Wins => "spends less CPU per GB than",
            Outcome::Loses => "spends more CPU per GB than",
            Outcome::Ties => "spends the same CPU per GB within the noise as",
        };
        points.push(json!({
            "p": format!("{p}"),
            "sender": {"pct": ss.pct(), "spends": spends(&ss)},
            "receiver": {"pct": rs.pct(), "spends": spends(&rs)},
        }));
    }
    t.push_str(&interval_note(
        rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1),
    ));
    let body = fill(
        "cpu_p.md",
        include_str!("cpu_p.md"),
        json!({"table": t, "points": points, "size_mb": size_mb}),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("cpu_per_gb".into()),
    })
}
