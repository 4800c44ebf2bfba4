//! PEERS, our own: today's tools moving the same large document on loopback, beside the sieve
//! and secure-only: socat, socat with OpenSSL, scp and iperf3 (see [`crate::peers`]).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::record::write_csv;
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::words::point_words;
use crate::common::{Ctx, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, Receiver, SendOptions};

const ID: &str = "PEERS";
/// Rounds of the other tools: scp takes seconds per GB, so they join the first ten of the
/// sieve's rounds only (a point that takes under a second gets the lab's 30).
const PEER_ROUNDS: usize = 10;

/// One transfer by one tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    tool: String,
    rep: usize,
    wall_ms: f64,
    sender_cpu_ms: f64,
    bytes: u64,
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let size_mb = if ctx.quick { 128 } else { 1024 };
    let file = ctx.work.xp(size_mb, 0.1)?;
    let bytes = std::fs::metadata(&file)?.len();
    let reps = ctx.reps(ROUNDS);
    let write = Receiver::start(&ctx.tools, "127.0.0.1", true, &no_wrap)?;
    let discard = Receiver::start(&ctx.tools, "127.0.0.1", false, &no_wrap)?;
    let (so, sv) = (SendOptions::secure_only(), SendOptions::default());
    let peers = crate::peers::all(&ctx.tools.certs);
    let peer_reps = reps.min(PEER_ROUNDS);
    let transfers = reps * 4 + peer_reps * peers.len();
    ctx.bar
        .set_length(ctx.bar.length().unwrap_or(0) + transfers as u64);
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for rep in 0..reps {
        for (tool, v, rx) in [
            ("sieve (write)", &sv, &write),
            ("secure-only (write)", &so, &write),
            ("sieve (discard)", &sv, &discard),
            ("secure-only (discard)", &so, &discard),
        ] {
            let s = v.run(&ctx.tools, rx.tls, std::slice::from_ref(&file), &no_wrap)?;
            rows.push(Row {
                tool: tool.into(),
                rep,
                wall_ms: s.total_ms,
                sender_cpu_ms: s.cpu_ms,
                bytes: s.bytes,
            });
            ctx.bar.inc(1);
        }
        for p in peers.iter().filter(|_| rep < peer_reps) {
            match p.transfer(&file) {
                Ok(run) => rows.push(Row {
                    tool: p.name(),
                    rep,
                    wall_ms: run.wall.as_secs_f64() * 1e3,
                    sender_cpu_ms: run.sender_cpu.as_secs_f64() * 1e3,
                    bytes: run.bytes,
                }),
                Err(e) if rep == 0 => missing.push(format!("{}: not measured ({e:#})", p.name())),
                Err(_) => {}
            }
            ctx.bar.inc(1);
        }
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    let mut report = render(&rows, dir, bytes)?;
    if !missing.is_empty() {
        report.body.push_str(&format!(
            "\nNot measured on this machine:\n\n- {}\n",
            missing.join("\n- ")
        ));
    }
    Ok(report)
}

/// The sieve against secure-only against the same receiver, paired by round, in wall time.
fn sieve_gain(rows: &[Row], receiver: &str) -> Estimate {
    let get = |tool: String, rep| {
        rows.iter()
            .find(|r| r.tool == tool && r.rep == rep)
            .map(|r| r.wall_ms)
    };
    let reps = rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1);
    Estimate::improvement((0..reps).filter_map(|rep| {
        get(format!("secure-only ({receiver})"), rep).zip(get(format!("sieve ({receiver})"), rep))
    }))
}

pub(crate) fn render(rows: &[Row], dir: &Path, bytes: u64) -> Result<Report> {
    let mut names: Vec<String> = rows.iter().map(|r| r.tool.clone()).collect();
    names.sort();
    names.dedup();
    let gb = bytes as f64 / 1e9;
    let mut t =
        String::from("| tool | wall time (ms) | GB/s | sender CPU (s/GB) |\n|---|---|---|---|\n");
    let mut bars = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let of = |f: fn(&Row) -> f64| {
            Estimate::median_of(
                &rows
                    .iter()
                    .filter(|r| &r.tool == n)
                    .map(f)
                    .collect::<Vec<_>>(),
            )
        };
        let (w, c) = (of(|r| r.wall_ms), of(|r| r.sender_cpu_ms));
        let _ = writeln!(
            t,
            "| {n} | {} | {:.2} | {:.2} |",
            w.num(0),
            gb / (w.point / 1000.0),
            c.point / 1000.0 / gb
        );
        bars.push(Series {
            label: n.clone(),
            style: if n.starts_with("sieve") {
                Style::Ours
            } else {
                Style::Peer
            },
            points: vec![(i as f64, gb / (w.point / 1000.0))],
            err: Some(vec![(gb / (w.hi / 1000.0), gb / (w.lo / 1000.0))]),
        });
    }
    t.push_str(&interval_note(
        rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1),
    ));
    let mut f = fig(
        &format!(
            "Throughput of a {:.0} MB x-10 document on loopback",
            bytes as f64 / 1e6
        ),
        "tool",
        "throughput (GB/s)",
        bars,
    );
    f.x_categories = Some(names.clone());
    plot::render(&f, &dir.join("peers_throughput"))?;
    let (w, d) = (sieve_gain(rows, "write"), sieve_gain(rows, "discard"));
    let label = |r: &str| format!("{:.0} MB x-10, loopback, receiver {r}", bytes as f64 / 1e6);
    let findings = vec![
        Finding::new(ID, &label("writes"), "total time", &w),
        Finding::new(ID, &label("discards"), "total time", &d),
    ];
    let body = fill(
        "peers.md",
        include_str!("peers.md"),
        json!({"table": t, "write": point_words(&w), "discard": point_words(&d), "mb": format!("{:.0}", bytes as f64 / 1e6)}),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: every tool on loopback on this machine.".into(),
        findings,
        key_plot: Some("peers_throughput".into()),
    })
}
