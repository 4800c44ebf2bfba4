//! PARALLEL, our own: what several channels give where protection is the bottleneck, against
//! what earlier work found for parallel protection (Nahum et al., NDSS 1996: connection-level
//! parallelism near-linear up to 12 CPUs; Alaidaros et al.: MAC in parallel with encryption,
//! 1.74× on 2 CPUs). Secure-only and the sieve with N = 1, 2, 4 channels of each kind, on the
//! two cores this machine has for both ends, unmasked and under the no-AES masks.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::{fig, thesis_series};
use crate::common::masks::{speeds, speeds_table, Mask, Speed, NO_AES, PORTABLE, UNMASKED};
use crate::common::record::write_csv;
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::words::{compare, point_words, Outcome};
use crate::common::{Ctx, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::run::{Receiver, SendOptions};

const ID: &str = "PARALLEL";
const NS: [u8; 3] = [1, 2, 4];
const P: f64 = 0.5;
/// Both ends together use at least this share of the two cores: the cores are full.
const FULL: f64 = 0.9;

/// One transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Row {
    mask: String,
    mode: String,
    n: u8,
    rep: usize,
    response_ms: f64,
    total_ms: f64,
    sender_cpu_ms: f64,
    receiver_cpu_ms: f64,
    bytes: u64,
    /// The machine's 1-minute load average before the transfer: other processes that took
    /// the cores show as cores not busy with this transfer.
    load1: f64,
}

impl Row {
    /// Cores both ends kept busy on average over the transfer.
    fn cores(&self) -> f64 {
        (self.sender_cpu_ms + self.receiver_cpu_ms) / self.total_ms
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let mb = if ctx.quick { 16 } else { 64 };
    let file = ctx.work.xp(mb, P)?;
    let rounds = ctx.reps(ROUNDS);
    let masks = [UNMASKED, NO_AES, PORTABLE];
    ctx.bar
        .set_length(ctx.bar.length().unwrap_or(0) + (masks.len() * rounds * NS.len() * 2) as u64);
    let mut rows = Vec::new();
    let mut all_speeds = Vec::new();
    for mask in masks {
        all_speeds.extend(speeds(&ctx.tools, &mask, ctx.quick)?);
        let wrap = |c| mask.apply(c);
        let rx = Receiver::start(&ctx.tools, "127.0.0.1", false, &wrap)?;
        for rep in 0..rounds {
            for n in NS {
                for opts in [
                    SendOptions {
                        n,
                        ..SendOptions::secure_only()
                    },
                    SendOptions {
                        n,
                        m: n,
                        ..SendOptions::default()
                    },
                ] {
                    let load1 = load_average();
                    let before = rx.cpu_ms();
                    let s = opts.run(&ctx.tools, rx.tls, std::slice::from_ref(&file), &wrap)?;
                    // The receiver has acknowledged; let it finish its bookkeeping first.
                    std::thread::sleep(Duration::from_millis(50));
                    rows.push(Row {
                        mask: mask.name.into(),
                        mode: opts.mode.into(),
                        n,
                        rep,
                        response_ms: s.response_ms,
                        total_ms: s.total_ms,
                        sender_cpu_ms: s.cpu_ms,
                        receiver_cpu_ms: rx.cpu_ms() - before,
                        bytes: s.bytes,
                        load1,
                    });
                    ctx.bar.inc(1);
                }
            }
        }
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    write_csv(&dir.join("speeds.csv"), &all_speeds)?;
    let mut report = render(&rows, &all_speeds, dir)?;
    report.emulated = format!(
        "both ends on loopback on this machine's two cores, under three masks: {}; {}; {}.",
        UNMASKED.what, NO_AES.what, PORTABLE.what
    );
    Ok(report)
}

/// The 1-minute load average (`/proc/loadavg`), NaN if unreadable.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn rounds_of(rows: &[Row]) -> usize {
    rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1)
}

/// The speed-up of N channels over one, t₁ / t_N of the response time, paired by round.
fn speed_up(rows: &[Row], mask: &str, mode: &str, n: u8) -> Estimate {
    let at = |k: u8, rep: usize| {
        rows.iter()
            .find(|r| r.mask == mask && r.mode == mode && r.n == k && r.rep == rep)
            .map(|r| r.response_ms)
    };
    let v: Vec<f64> = (0..rounds_of(rows))
        .filter_map(|rep| Some(at(1, rep)? / at(n, rep)?))
        .collect();
    Estimate::median_of(&v)
}

fn median(rows: &[Row], mask: &str, mode: &str, n: u8, f: impl Fn(&Row) -> f64) -> Estimate {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| r.mask == mask && r.mode == mode && r.n == n)
        .map(f)
        .collect();
    Estimate::median_of(&v)
}

/// The sieve against secure-only at (mask, N), paired by round.
fn improvement(rows: &[Row], mask: &str, n: u8) -> Estimate {
    let at = |mode: &str, rep: usize| {
        rows.iter()
            .find(|r| r.mask == mask && r.mode == mode && r.n == n && r.rep == rep)
            .map(|r| r.response_ms)
    };
    Estimate::improvement(
        (0..rounds_of(rows)).filter_map(|rep| at("secure-only", rep).zip(at("sieve", rep))),
    )
}

pub(crate) fn render(rows: &[Row], speeds: &[Speed], dir: &Path) -> Result<Report> {
    let masks: Vec<Mask> = [UNMASKED, NO_AES, PORTABLE]
        .into_iter()
        .filter(|m| rows.iter().any(|r| r.mask == m.name))
        .collect();
    let ns: Vec<u8> = NS
        .into_iter()
        .filter(|n| rows.iter().any(|r| r.n == *n))
        .collect();
    let modes = ["secure-only", "sieve"];
    for mode in modes {
        let mut series = Vec::new();
        for m in &masks {
            let e: Vec<Estimate> = ns
                .iter()
                .map(|&n| speed_up(rows, m.name, mode, n))
                .collect();
            series.push(Series {
                label: format!("ours, {}", m.name),
                style: Style::Ours,
                points: ns
                    .iter()
                    .zip(&e)
                    .map(|(&n, e)| (f64::from(n), e.point))
                    .collect(),
                err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
            });
        }
        for m in &masks {
            let one = median(rows, m.name, mode, 1, Row::cores);
            series.push(Series {
                label: format!("two-core bound, {}", m.name),
                style: Style::Peer,
                points: ns
                    .iter()
                    .map(|&n| (f64::from(n), (2.0 / one.point).min(f64::from(n))))
                    .collect(),
                err: None,
            });
        }
        series.push(thesis_series(
            "Nahum et al.: near-linear",
            ns.iter().map(|&n| (f64::from(n), f64::from(n))).collect(),
        ));
        series.push(thesis_series("Alaidaros et al.: 2 CPUs", vec![(2.0, 1.74)]));
        plot::render(
            &fig(
                &format!("PARALLEL: {mode}, speed-up of response time against channels"),
                "channels N (= M for the sieve)",
                "speed-up over N = 1 (t₁ / t_N)",
                series,
            ),
            &dir.join(format!("parallel_{mode}")),
        )?;
    }

    let mut findings = Vec::new();
    let mut t = String::from(
        "| mask | system | N | response (ms) | speed-up over N = 1 | cores busy (both ends) | \
         sieve against secure-only |\n|---|---|---|---|---|---|---|\n",
    );
    let mut ones: Vec<f64> = Vec::new();
    let mut sections = Vec::new();
    for m in &masks {
        let mut per_mode = Vec::new();
        for mode in modes {
            for &n in &ns {
                let vs = improvement(rows, m.name, n);
                let _ = writeln!(
                    t,
                    "| {} | {mode} | {n} | {} | {} | {} | {} |",
                    m.name,
                    median(rows, m.name, mode, n, |r| r.response_ms).num(0),
                    if n == 1 {
                        "–".into()
                    } else {
                        speed_up(rows, m.name, mode, n).num(2)
                    },
                    median(rows, m.name, mode, n, Row::cores).num(2),
                    if mode == "sieve" {
                        format!("{} ({})", vs.pct(), Outcome::of(&vs).adjective())
                    } else {
                        "–".into()
                    },
                );
                if mode == "sieve" {
                    findings.push(Finding::new(
                        ID,
                        &format!("{}, N = M = {n}", m.name),
                        "response time",
                        &vs,
                    ));
                }
            }
            let one = median(rows, m.name, mode, 1, Row::cores);
            ones.push(one.point);
            let full_from = ns
                .iter()
                .copied()
                .find(|&n| median(rows, m.name, mode, n, Row::cores).point >= 2.0 * FULL);
            let two = speed_up(rows, m.name, mode, 2);
            let last_n = *ns.last().unwrap_or(&1);
            let last = speed_up(rows, m.name, mode, last_n);
            let alaidaros = Estimate {
                point: 1.74,
                lo: 1.74,
                hi: 1.74,
                coverage: 1.0,
                n: 1,
            };
            per_mode.push(json!({
                "mode": mode,
                "one_cores": format!("{:.2}", one.point),
                "bound": format!("{:.2}", 2.0 / one.point),
                "full_from": full_from,
                "two": two.num(2),
                "two_vs_alaidaros": compare(&two, &alaidaros),
                "last_n": last_n,
                "last": last.num(2),
                "last_cores": median(rows, m.name, mode, last_n, Row::cores).num(2),
            }));
        }
        sections.push(json!({
            "name": m.name,
            "what": m.what,
            "mac_note": crate::common::masks::mac_note(speeds, m.name),
            "modes": per_mode,
            "n1": point_words(&improvement(rows, m.name, 1)),
            "nmax": point_words(&improvement(rows, m.name, *ns.last().unwrap_or(&1))),
        }));
    }
    t.push_str(&interval_note(rounds_of(rows)));
    t.push_str(
        "Speed-up: median of the per-round t₁ / t_N [its interval]; cores busy: (sender CPU + \
         receiver CPU) / total time, the share of this machine's two cores both ends used.\n",
    );
    let mb = rows.first().map_or(0.0, |r| r.bytes as f64 / 1e6);
    let body = fill(
        "parallel.md",
        include_str!("parallel.md"),
        json!({
            "rounds": rounds_of(rows),
            "mb": format!("{mb:.0}"),
            "p": P,
            "ns": ns.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            "table": t,
            "speeds": speeds_table(speeds),
            "sections": sections,
            "full_pct": format!("{:.0}", FULL * 100.0),
            "one_lo": ones.iter().copied().filter(|c| c.is_finite()).reduce(f64::min).map(|c| format!("{c:.2}")),
            "one_hi": ones.iter().copied().filter(|c| c.is_finite()).reduce(f64::max).map(|c| format!("{c:.2}")),
            "one_near_two": ones.iter().any(|&c| c >= 2.0 * FULL),
            "load": Estimate::median_of(&rows.iter().map(|r| r.load1).collect::<Vec<_>>()).num(1),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: Some("parallel_secure-only".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(scale: impl Fn(&str, u8) -> f64) -> Vec<Row> {
        let mut v = Vec::new();
        for rep in 0..8 {
            for n in NS {
                for mode in ["secure-only", "sieve"] {
                    let t = 1000.0 * scale(mode, n) + rep as f64;
                    v.push(Row {
                        mask: "no-aes".into(),
                        mode: mode.into(),
                        n,
                        rep,
                        response_ms: t,
                        total_ms: t + 5.0,
                        // The same CPU work however it is split: more channels, more cores busy.
                        sender_cpu_ms: 600.0,
                        receiver_cpu_ms: 500.0,
                        bytes: 64_000_000,
                        load1: 1.0,
                    });
                }
            }
        }
        v
    }

    /// Where more channels halve the time the report gives the speed-up and says when the two
    /// cores are full; where they change nothing it says the cores are never full.
    #[test]
    fn speed_ups_and_the_two_core_bound_follow_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let scaling = render(
            &rows(|m, n| if m == "sieve" { 0.5 } else { 1.0 } / f64::from(n.min(2))),
            &[],
            dir.path(),
        )
        .unwrap();
        assert!(
            scaling.body.contains("busy) from N = 2"),
            "{}",
            scaling.body
        );
        assert!(scaling.body.contains("is faster than"), "{}", scaling.body);
        let flat = render(&rows(|_, _| 1.0), &[], dir.path()).unwrap();
        assert!(flat.body.contains("never full"), "{}", flat.body);
        assert!(flat.body.contains("ties with"), "{}", flat.body);
        assert!(
            flat.body.contains("In this run one channel kept"),
            "{}",
            flat.body
        );
        assert!(dir.path().join("parallel_sieve.svg").is_file());
        assert_ne!(scaling.findings, flat.findings);
    }
}
