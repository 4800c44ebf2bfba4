//! CAPACITY, our own (the ICPE paper's claim that the sieve's saving on the server raises what
//! it can serve): the receiver confined to a fraction of one core, many senders at once, and
//! what it takes in per second once it is saturated, for the sieve and secure-only, on this
//! machine and under the no-AES masks.
//!
//! How it is measured: the receiver runs in a cgroup pinned to one CPU with a CPU quota, and
//! with its senders in a network namespace of their own; `k` sender loops each run `sieve send`
//! sessions back to back; after a warm-up the lab samples the bytes that namespace's loopback
//! has carried to the receiver and the receiver's CPU time, waits a fixed window, samples again,
//! and stops the senders (killing sessions in flight, which the receiver must and does survive).
//! Capacity is the bytes taken in per CPU-second the receiver used in the window, i.e. GB/s per
//! receiver core, and the receiver is saturated where it used at least 90 % of its quota.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::child::Watched;
use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::masks::{speeds, speeds_table, Mask, Speed, NO_AES, PORTABLE, UNMASKED};
use crate::common::record::{same, write_csv};
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::words::Outcome;
use crate::common::{distinct, Ctx};
use crate::plot::{self, Series, Style};
use crate::run::{Receiver, SendOptions};
use crate::scenario::{check_cpuset, check_root, CpuLimit, LoopbackNs};

const ID: &str = "CAPACITY";
/// The receiver's share of its one CPU.
const QUOTA: f64 = 0.5;
/// The CPU the receiver is pinned to: the second, so the first is the senders' alone.
const RECEIVER_CPU: &str = "1";
/// Saturated: the receiver used at least this share of its quota in the window.
const SATURATED: f64 = 0.9;
/// The goal at P = 0.1: the sieve's capacity at least this many times secure-only's.
const GOAL: f64 = 1.8;
const GOAL_P: f64 = 0.1;

/// One window of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Row {
    mask: String,
    mode: String,
    mb: u64,
    p: f64,
    senders: usize,
    rep: usize,
    window_s: f64,
    /// Bytes the loopback of the experiment's namespace carried in the window.
    bytes_read: u64,
    receiver_cpu_ms: f64,
    quota: f64,
    sessions_done: u64,
    sessions_failed: u64,
}

impl Row {
    /// GB taken in per CPU-second of the receiver: GB/s per receiver core.
    fn gb_per_core_s(&self) -> f64 {
        self.bytes_read as f64 / 1e9 / (self.receiver_cpu_ms / 1e3)
    }

    /// Share of its quota the receiver used.
    fn busy(&self) -> f64 {
        self.receiver_cpu_ms / 1e3 / self.window_s / self.quota
    }

    /// Receiver CPU seconds per GB, the cost whose saving the findings compare.
    fn cpu_s_per_gb(&self) -> f64 {
        1.0 / self.gb_per_core_s()
    }
}

struct Plan {
    masks: Vec<Mask>,
    sizes: Vec<u64>,
    ps: Vec<f64>,
    senders: Vec<usize>,
    rounds: usize,
    warm_up: Duration,
    window: Duration,
}

fn plan(quick: bool) -> Plan {
    if quick {
        Plan {
            masks: vec![UNMASKED],
            sizes: vec![10],
            ps: vec![0.1],
            senders: vec![8],
            rounds: 2,
            warm_up: Duration::from_secs(1),
            window: Duration::from_secs(2),
        }
    } else {
        Plan {
            masks: vec![UNMASKED, NO_AES, PORTABLE],
            sizes: vec![1, 10, 100],
            ps: vec![0.1, 0.5, 0.9],
            senders: vec![8, 32],
            rounds: 3,
            warm_up: Duration::from_millis(1500),
            window: Duration::from_secs(3),
        }
    }
}

/// Documents per session: about 32 MB of them, at least one.
fn per_session(mb: u64) -> u32 {
    (32 / mb).max(1) as u32
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    if let Err(why) = check_root().and_then(|()| check_cpuset()) {
        return Ok(Report::skipped(&why));
    }
    let plan = plan(ctx.quick);
    let cells = plan.masks.len() * plan.sizes.len() * plan.ps.len() * plan.senders.len() * 2;
    ctx.bar
        .set_length(ctx.bar.length().unwrap_or(0) + (cells * plan.rounds) as u64);
    let mut rows = Vec::new();
    let mut all_speeds = Vec::new();
    for &mask in &plan.masks {
        all_speeds.extend(speeds(&ctx.tools, &mask, ctx.quick)?);
        let limit = CpuLimit::create_pinned("capacity", QUOTA, RECEIVER_CPU)?;
        // Both ends in a namespace of their own, so its loopback counts their bytes alone.
        let net = LoopbackNs::create("capacity")?;
        let wrap = |c| limit.wrap(net.wrap(mask.apply(c)));
        let rx = Receiver::start_with(
            &ctx.tools,
            "127.0.0.1",
            false,
            &["--max-sessions-per-client", "256", "--max-pending", "1024"],
            &wrap,
        )?;
        for &mb in &plan.sizes {
            for &p in &plan.ps {
                let files: Vec<PathBuf> = (0..per_session(mb))
                    .map(|c| ctx.work.xp_bytes(mb * sieve_core::gen::MB, p, c + 1))
                    .collect::<Result<_>>()?;
                for rep in 0..plan.rounds {
                    for &senders in &plan.senders {
                        for opts in [SendOptions::secure_only(), SendOptions::default()] {
                            let w = window(ctx, &rx, &net, &opts, &files, senders, &plan, mask)?;
                            rows.push(Row {
                                mask: mask.name.into(),
                                mode: opts.mode.into(),
                                mb,
                                p,
                                senders,
                                rep,
                                ..w
                            });
                            ctx.bar.inc(1);
                        }
                    }
                }
            }
        }
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    write_csv(&dir.join("speeds.csv"), &all_speeds)?;
    let mut report = render(&rows, &all_speeds, dir)?;
    report.emulated = format!(
        "the receiver confined to {:.0} % of CPU {RECEIVER_CPU} (a cgroup pinned to that CPU with a \
         CPU quota), the senders unconfined on loopback; masks (both ends): {}",
        QUOTA * 100.0,
        plan.masks
            .iter()
            .map(|m| m.what)
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(report)
}

/// One measured window: `senders` loops of `opts` sessions of `files` against `rx`.
#[allow(clippy::too_many_arguments)]
fn window(
    ctx: &Ctx,
    rx: &Receiver,
    net: &LoopbackNs,
    opts: &SendOptions,
    files: &[PathBuf],
    senders: usize,
    plan: &Plan,
    mask: Mask,
) -> Result<Row> {
    let stop = AtomicBool::new(false);
    let (done, failed) = (AtomicU64::new(0), AtomicU64::new(0));
    let started = Instant::now();
    let end = started + plan.warm_up + plan.window;
    let measured = std::thread::scope(|s| -> Result<(u64, f64, f64)> {
        for _ in 0..senders {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                    let mut cmd = net.wrap(mask.apply(opts.command(&ctx.tools, rx.tls, files)));
                    cmd.stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    let Ok(mut child) = Watched::spawn(&mut cmd) else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    // Past the end the session in flight is killed: the window is over.
                    match child.wait_until(end) {
                        Ok(exit) if exit.status.success() => done.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => failed.fetch_add(1, Ordering::Relaxed),
                        Err(_) => 0,
                    };
                }
            });
        }
        let sample = || -> Result<(u64, f64, Instant)> {
            Ok((rx.loopback_rx_bytes()?, rx.cpu_ms(), Instant::now()))
        };
        std::thread::sleep(plan.warm_up);
        let first = sample();
        std::thread::sleep(plan.window);
        let second = sample();
        stop.store(true, Ordering::Relaxed);
        let ((b0, c0, t0), (b1, c1, t1)) = (first?, second?);
        Ok((b1 - b0, c1 - c0, (t1 - t0).as_secs_f64()))
    });
    let (bytes_read, receiver_cpu_ms, window_s) = measured?;
    // Let the receiver drop the killed sessions before the next window starts.
    std::thread::sleep(Duration::from_millis(300));
    Ok(Row {
        mask: String::new(),
        mode: String::new(),
        mb: 0,
        p: 0.0,
        senders,
        rep: 0,
        window_s,
        bytes_read,
        receiver_cpu_ms,
        quota: QUOTA,
        sessions_done: done.into_inner(),
        sessions_failed: failed.into_inner(),
    })
}

fn select<'a>(mask: &'a str, mb: u64, p: f64, senders: usize) -> impl Fn(&Row) -> bool + 'a {
    move |r: &Row| r.mask == mask && r.mb == mb && same(r.p, p) && r.senders == senders
}

fn median(rows: &[Row], at: impl Fn(&Row) -> bool, f: impl Fn(&Row) -> f64) -> Estimate {
    let v: Vec<f64> = rows.iter().filter(|r| at(r)).map(f).collect();
    Estimate::median_of(&v)
}

/// Paired by round: the sieve's capacity over secure-only's, and the saving of receiver CPU per
/// GB (the improvement the findings record).
fn paired(rows: &[Row], at: impl Fn(&Row) -> bool) -> (Estimate, Estimate) {
    let reps = rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1);
    let get = |mode: &str, rep: usize| {
        rows.iter()
            .find(|r| at(r) && r.mode == mode && r.rep == rep)
    };
    let pairs: Vec<(&Row, &Row)> = (0..reps)
        .filter_map(|rep| get("secure-only", rep).zip(get("sieve", rep)))
        .collect();
    let ratio: Vec<f64> = pairs
        .iter()
        .map(|(so, sv)| sv.gb_per_core_s() / so.gb_per_core_s())
        .collect();
    (
        Estimate::median_of(&ratio),
        Estimate::improvement(
            pairs
                .iter()
                .map(|(so, sv)| (so.cpu_s_per_gb(), sv.cpu_s_per_gb())),
        ),
    )
}

pub(crate) fn render(rows: &[Row], speeds: &[Speed], dir: &Path) -> Result<Report> {
    let masks: Vec<Mask> = [UNMASKED, NO_AES, PORTABLE]
        .into_iter()
        .filter(|m| rows.iter().any(|r| r.mask == m.name))
        .collect();
    let mut sizes: Vec<u64> = rows.iter().map(|r| r.mb).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let ps = distinct(rows.iter().map(|r| r.p));
    let mut senders: Vec<usize> = rows.iter().map(|r| r.senders).collect();
    senders.sort_unstable();
    senders.dedup();
    let most = senders.last().copied().unwrap_or(0);
    let rounds = rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1);

    // Figures: capacity against P at the most senders, per mask, one curve per size and system.
    for m in &masks {
        let mut series = Vec::new();
        for &mb in &sizes {
            for (mode, style) in [("secure-only", Style::Peer), ("sieve", Style::Ours)] {
                let e: Vec<Estimate> = ps
                    .iter()
                    .map(|&p| {
                        median(
                            rows,
                            |r| select(m.name, mb, p, most)(r) && r.mode == mode,
                            Row::gb_per_core_s,
                        )
                    })
                    .collect();
                series.push(Series {
                    label: format!("{mode}, {mb} MB"),
                    style,
                    points: ps.iter().zip(&e).map(|(&p, e)| (p, e.point)).collect(),
                    err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                });
            }
        }
        plot::render(
            &fig(
                &format!(
                    "CAPACITY, {}: receiver capacity with {most} senders",
                    m.name
                ),
                "proportion of classified information P",
                "GB/s per receiver core",
                series,
            ),
            &dir.join(format!("capacity_{}", m.name)),
        )?;
    }

    let mut findings = Vec::new();
    let mut t = String::from(
        "| mask | document | P | senders | secure-only GB/s per core | sieve GB/s per core | \
         sieve / secure-only | receiver busy (so / sieve) | outcome |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut goals = Vec::new();
    let mut goal_ratios: Vec<f64> = Vec::new();
    let mut unsaturated = 0;
    for m in &masks {
        for &mb in &sizes {
            for &p in &ps {
                for &k in &senders {
                    let at = select(m.name, mb, p, k);
                    if !rows.iter().any(&at) {
                        continue;
                    }
                    let cap =
                        |mode: &str| median(rows, |r| at(r) && r.mode == mode, Row::gb_per_core_s);
                    let busy = |mode: &str| median(rows, |r| at(r) && r.mode == mode, Row::busy);
                    unsaturated += [busy("secure-only"), busy("sieve")]
                        .iter()
                        .filter(|b| b.point < SATURATED)
                        .count();
                    let (ratio, saving) = paired(rows, &at);
                    let point = format!("{}, {mb} MB, P = {p}, {k} senders", m.name);
                    findings.push(Finding::new(
                        ID,
                        &point,
                        "receiver CPU per GB at saturation",
                        &saving,
                    ));
                    let _ = writeln!(
                        t,
                        "| {} | {mb} MB | {p} | {k} | {} | {} | {} | {:.0} % / {:.0} % | {} |",
                        m.name,
                        cap("secure-only").num(2),
                        cap("sieve").num(2),
                        ratio.num(2),
                        busy("secure-only").point * 100.0,
                        busy("sieve").point * 100.0,
                        match Outcome::of(&saving) {
                            Outcome::Wins => "sieve takes more",
                            Outcome::Loses => "sieve takes less",
                            Outcome::Ties => "within the noise",
                        },
                    );
                    if same(p, GOAL_P) && k == most {
                        let verdict = if ratio.known() && ratio.lo >= GOAL {
                            "met"
                        } else if ratio.known() && ratio.hi < GOAL {
                            "missed"
                        } else {
                            "within the noise of the goal"
                        };
                        goal_ratios.push(ratio.point);
                        goals.push(json!({
                            "mask": m.name,
                            "mb": mb,
                            "ratio": ratio.num(2),
                            "verdict": verdict,
                        }));
                    }
                }
            }
        }
    }
    t.push_str(&interval_note(rounds));
    t.push_str(
        "GB/s per core: bytes that arrived in the window per CPU-second the receiver used (median over \
         the rounds [interval]); sieve / secure-only: median of the per-round ratios; busy: share \
         of its quota the receiver used (saturated from 90 %); outcome: whether the sieve's \
         receiver needs less CPU per GB (takes more) with the interval of the saving apart from \
         0.\n",
    );
    let met = goals.iter().filter(|g| g["verdict"] == "met").count();
    let known: Vec<f64> = goal_ratios.into_iter().filter(|r| r.is_finite()).collect();
    let ratio_lo = known.iter().copied().reduce(f64::min);
    let ratio_hi = known.iter().copied().reduce(f64::max);
    let body = fill(
        "capacity.md",
        include_str!("capacity.md"),
        json!({
            "quota_pct": format!("{:.0}", QUOTA * 100.0),
            "cpu": RECEIVER_CPU,
            "rounds": rounds,
            "senders": senders.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(" and "),
            "most": most,
            "sizes": sizes.iter().map(|s| format!("{s} MB")).collect::<Vec<_>>().join(", "),
            "ps": ps.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "),
            "window_s": rows.first().map_or("–".into(), |r| format!("{:.1}", r.window_s)),
            "table": t,
            "speeds": speeds_table(speeds),
            "goals": goals,
            "goal": GOAL,
            "met": met,
            "ratio_lo": ratio_lo.map(|r| format!("{r:.2}")),
            "ratio_hi": ratio_hi.map(|r| format!("{r:.2}")),
            "unsaturated": unsaturated,
            "cells": findings.len() * 2,
            "masks": masks.iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
            "mac_notes": masks.iter().map(|m| crate::common::masks::mac_note(speeds, m.name)).zip(masks.iter()).filter(|(n, _)| !n.is_empty()).map(|(n, m)| format!("**{}**: {n}", m.name)).collect::<Vec<_>>(),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: masks.first().map(|m| format!("capacity_{}", m.name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(sieve_cpu_share: f64, busy: f64) -> Vec<Row> {
        let mut v = Vec::new();
        for rep in 0..4 {
            for mode in ["secure-only", "sieve"] {
                let cpu = 1500.0 * busy;
                // The same CPU moves more bytes when each byte costs less.
                let per_byte = if mode == "sieve" {
                    sieve_cpu_share
                } else {
                    1.0
                };
                v.push(Row {
                    mask: "no-aes".into(),
                    mode: mode.into(),
                    mb: 10,
                    p: 0.1,
                    senders: 32,
                    rep,
                    window_s: 3.0,
                    bytes_read: (1e9 * cpu / 1000.0 / per_byte) as u64 + rep as u64 * 1000,
                    receiver_cpu_ms: cpu,
                    quota: 0.5,
                    sessions_done: 10,
                    sessions_failed: 0,
                });
            }
        }
        v
    }

    #[test]
    fn the_goal_and_the_saturation_follow_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let good = render(&rows(0.4, 1.0), &[], dir.path()).unwrap();
        assert!(good.body.contains("2.50"), "{}", good.body);
        assert!(good.body.contains("**met**"), "{}", good.body);
        assert!(good.body.contains("saturated in every"), "{}", good.body);
        assert!(good.body.contains("ratios is 2.50"), "{}", good.body);
        let poor = render(&rows(0.9, 0.5), &[], dir.path()).unwrap();
        assert!(poor.body.contains("missed"), "{}", poor.body);
        assert!(!poor.body.contains("saturated in every"), "{}", poor.body);
        assert!(!poor.body.contains("ratios is 2.50"), "{}", poor.body);
        assert!(dir.path().join("capacity_no-aes.svg").is_file());
        assert_ne!(good.findings, poor.findings);
    }
}
