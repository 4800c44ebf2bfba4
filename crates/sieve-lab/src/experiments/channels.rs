//! F5.8-5.11 and F5.13: several channels at once, in the secure-only system and in the sieve, and
//! what they do to response and total time (thesis §5.3, PO1).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::measure::{fmt_summary, summary, Point, Record};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, SendOptions};

use super::*;

fn channels_points(ctx: &mut Ctx, xs: &[u64], ns: &[u8], sieve: bool) -> Result<Vec<Point>> {
    let mut pts = Vec::new();
    for &x in xs {
        let f = ctx.work.xp(x, 0.5)?;
        pts.push(Point {
            scenario: "loopback".into(),
            files_label: format!("{x}MB-50"),
            files: vec![f],
            x_mb: x as f64,
            p: 0.5,
            variants: ns
                .iter()
                .map(|&n| if sieve { sv(n, n) } else { so(n) })
                .collect(),
        });
    }
    Ok(pts)
}

fn channel_figures(
    recs: &[Record],
    dir: &Path,
    id: &str,
    who: &str,
    xs: &[u64],
    ns: &[u8],
    thesis_connect: Vec<(f64, f64)>,
) -> Result<String> {
    let mut resp = Vec::new();
    for &x in xs {
        let pts = ns
            .iter()
            .map(|&n| {
                (
                    n as f64,
                    summary(
                        recs,
                        |r| r.send.n == n && (r.x_mb - x as f64).abs() < 1e-9,
                        response,
                    )
                    .median,
                )
            })
            .collect();
        resp.push(Series {
            label: format!("ours, {x} MB"),
            style: Style::Ours,
            points: pts,
            err: None,
        });
    }
    plot::render(
        &fig(
            &format!("{id}: {who} response time vs channels"),
            "number of channels N",
            "response time (ms)",
            resp,
        ),
        &dir.join("response_vs_n"),
    )?;
    let conn = ns
        .iter()
        .map(|&n| {
            (
                n as f64,
                summary(recs, |r| r.send.n == n, |s| s.connect_ms).median,
            )
        })
        .collect();
    plot::render(
        &fig(
            &format!("{id}: {who} connection time vs channels"),
            "number of channels N",
            "connection time (ms)",
            vec![
                Series {
                    label: "ours".into(),
                    style: Style::Ours,
                    points: conn,
                    err: None,
                },
                thesis_series("thesis", thesis_connect),
            ],
        ),
        &dir.join("connect_vs_n"),
    )?;
    let mut t = String::from("| x | N | response (ms) | total (ms) | connect (ms) | further TLS channels (ms) |\n|---|---|---|---|---|---|\n");
    for &x in xs {
        for &n in ns {
            let at = |r: &Record| r.send.n == n && (r.x_mb - x as f64).abs() < 1e-9;
            let _ = writeln!(
                t,
                "| {x} MB | {n} | {} | {} | {} | {} |",
                fmt_summary(&summary(recs, at, response)),
                fmt_summary(&summary(recs, at, total)),
                fmt_summary(&summary(recs, at, |s| s.connect_ms)),
                fmt_summary(&summary(recs, at, |s| s.connect_extra_tls_ms))
            );
        }
    }
    Ok(t)
}

/// F5.8-5.9 and F5.10-5.11: the same sweep over channel counts, secure-only or sieve.
fn channels_experiment(ctx: &mut Ctx, dir: &Path, sieve: bool) -> Result<(String, usize)> {
    let rx = loopback(ctx)?;
    let xs: &[u64] = if ctx.quick { &[1, 10] } else { &XS };
    let ns = [1u8, 2, 3, 5];
    let pts = channels_points(ctx, xs, &ns, sieve)?;
    let reps = ctx.reps(20);
    let recs = run_points(ctx, &rx, &pts, reps, &no_wrap)?;
    write_csv(dir, &recs)?;
    // The thesis's connection times: 755 ms for the first handshake, about 230 ms per further
    // TLS channel, and (sieve) about 25 ms for the plain channels.
    let plain = if sieve { 25.0 } else { 0.0 };
    let thesis = ns
        .iter()
        .map(|&n| (n as f64, 755.0 + 230.0 * (n as f64 - 1.0) + plain))
        .collect();
    let (id, who) = if sieve {
        ("F5.10-5.11", "sieve")
    } else {
        ("F5.8-5.9", "secure-only")
    };
    Ok((channel_figures(&recs, dir, id, who, xs, &ns, thesis)?, reps))
}

pub(super) fn f5_8(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    let (t, reps) = channels_experiment(ctx, dir, false)?;
    Ok(format!("Secure-only, loopback, 1-5 TLS channels (extra channels resume the first TLS session), {reps} rounds. Thesis connection values: 755 ms for the first handshake, about 230 ms per further channel.\n\nThesis: 1 MB gains marginally in response and loses in total; 10 MB is best at N = 3 (response) and N = 2 (total); each further TLS channel costs about 230 ms to connect.\n\n{t}\n### Why the shape differs\n\nA further TLS 1.3 channel costs a resumed handshake of well under a millisecond here, not 230 ms, so connection time barely grows with N. With two cores shared by sender and receiver, more channels cannot add CPU either: the response time stays flat or worsens slightly with N instead of improving up to N = 3.\n"))
}

pub(super) fn f5_10(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    let (t, reps) = channels_experiment(ctx, dir, true)?;
    Ok(format!("Security sieve, loopback, N = M = 1-5, dynamic split, P = 0.5, {reps} rounds. Thesis connection values are its 755 ms first handshake plus 25 ms for plain channels and 230 ms per further TLS channel (approximate).\n\nThesis: 10 MB best at N = M = 2; +230 ms per TLS channel, +2 ms per plain channel.\n\n{t}\n### Why the shape differs\n\nAs for F5.8-5.9: extra channels are almost free to open here and there is no idle CPU for them to use, so there is no optimum at N = M = 2 — only a slow rise of total time with N.\n"))
}

pub(super) fn f5_13(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    let rx = loopback(ctx)?;
    let x = if ctx.quick { 5 } else { 10 };
    let ns = [1u8, 2, 3, 5];
    let splits = ["even", "segment", "dynamic"];
    let f = ctx.work.xp(x, 0.5)?;
    let mut pts = Vec::new();
    for &n in &ns {
        let mut variants = vec![so(n)];
        variants.extend(splits.iter().map(|&s| SendOptions {
            split: s,
            ..sv(n, n)
        }));
        pts.push(Point {
            scenario: "loopback".into(),
            files_label: format!("{x}MB-50"),
            files: vec![f.clone()],
            x_mb: x as f64,
            p: 0.5,
            variants,
        });
    }
    let reps = ctx.reps(15);
    let recs = run_points(ctx, &rx, &pts, reps, &no_wrap)?;
    write_csv(dir, &recs)?;
    let series = splits
        .iter()
        .map(|&s| Series {
            label: format!("ours, {s}"),
            style: Style::Ours,
            points: ns
                .iter()
                .map(|&n| {
                    let so_t = summary(
                        &recs,
                        |r| r.send.n == n && r.send.mode == "secure-only",
                        total,
                    )
                    .median;
                    let sv_t = summary(
                        &recs,
                        |r| r.send.n == n && r.send.split == s && r.send.mode == "sieve",
                        total,
                    )
                    .median;
                    (n as f64, crate::stats::improvement(so_t, sv_t))
                })
                .collect(),
            err: None,
        })
        .collect();
    plot::render(
        &fig(
            &format!("F5.13: improvement of total time vs channels, P = 0.5, x = {x} MB"),
            "number of channels N = M",
            "improvement of total time (%)",
            series,
        ),
        &dir.join("f5_13_improvement"),
    )?;
    let mut t = String::from("| N = M | secure-only total (ms) | ES total | SS total | dynamic total |\n|---|---|---|---|---|\n");
    for &n in &ns {
        let c = |f: &dyn Fn(&Record) -> bool| {
            fmt_summary(&summary(&recs, |r| r.send.n == n && f(r), total))
        };
        let _ = writeln!(
            t,
            "| {n} | {} | {} | {} | {} |",
            c(&|r| r.send.mode == "secure-only"),
            c(&|r| r.send.mode == "sieve" && r.send.split == "even"),
            c(&|r| r.send.mode == "sieve" && r.send.split == "segment"),
            c(&|r| r.send.mode == "sieve" && r.send.split == "dynamic")
        );
    }
    Ok(format!("Loopback, P = 0.5, x = {x} MB, {reps} rounds.\n\nThesis: the improvement of total time falls with N and is flat from 3 to 5; SS above ES at P = 0.5.\n\n{t}\n### Why the shape differs\n\nConnection set-up no longer dominates (a resumed TLS 1.3 handshake is sub-millisecond), so adding channels changes the total little for either system; the improvement stays near its N = 1 value instead of falling.\n"))
}
