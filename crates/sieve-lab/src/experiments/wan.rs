//! WAN, our own: several channels over links with a real round trip (20, 50 and 100 ms at 100
//! and 1000 Mbit/s), where the thesis's extra channels, and GridFTP's parallel streams, are
//! meant to pay: one TCP connection is held back by slow start and by its window, several are
//! not held back as much. Secure-only with N TLS channels against the sieve with N = M.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::links::{
    cleartext_on_wire, emulated, over_link_with, write_checks, Condition, LinkCheck,
};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::words::{point_words, Outcome};
use crate::common::{improvement, rounds_of, sample, xp_label, Ctx, Metric, Point};
use crate::plot::{self, Series, Style};
use crate::run::SendOptions;
use crate::scenario::{check_root, LinkSpec};

const ID: &str = "WAN";
/// The document: 10 MB, where the thesis found several channels paying; P = 0.5 as in its
/// channel experiments.
const X_MB: u64 = 10;
const P: f64 = 0.5;
/// Rounds per point: each transfer takes about a second or more at these round trips.
const ROUNDS: usize = 10;

/// The links: (scenario name, RTT in ms, rate in Mbit/s).
const GRID: [(&str, f64, f64); 6] = [
    ("rtt20-100mbit", 20.0, 100.0),
    ("rtt50-100mbit", 50.0, 100.0),
    ("rtt100-100mbit", 100.0, 100.0),
    ("rtt20-1000mbit", 20.0, 1000.0),
    ("rtt50-1000mbit", 50.0, 1000.0),
    ("rtt100-1000mbit", 100.0, 1000.0),
];

fn condition(name: &'static str, rtt: f64, rate: f64) -> Condition {
    Condition {
        name,
        link: LinkSpec::with_rtt(name, rate, rtt),
        cpu: None,
    }
}

/// The channel counts of the full run; a quick run takes 1, 2 and 4.
fn ns(quick: bool) -> Vec<u8> {
    if quick {
        vec![1, 2, 4]
    } else {
        (1..=8).collect()
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    if let Err(why) = check_root() {
        return Ok(Report::skipped(&why));
    }
    let grid: Vec<_> = if ctx.quick {
        vec![GRID[3]]
    } else {
        GRID.to_vec()
    };
    let file = ctx.work.xp(X_MB, P)?;
    let rounds = ctx.reps(ROUNDS);
    let mut recs = Vec::new();
    let mut checks = Vec::new();
    let mut conds = Vec::new();
    for (name, rtt, rate) in grid {
        let cond = condition(name, rtt, rate);
        let variants = ns(ctx.quick)
            .into_iter()
            .flat_map(|n| {
                [
                    SendOptions {
                        n,
                        ..SendOptions::secure_only()
                    },
                    SendOptions {
                        n,
                        m: n,
                        ..SendOptions::default()
                    },
                ]
            })
            .collect();
        let pts = [Point {
            scenario: name.into(),
            files_label: xp_label(X_MB as f64, P),
            files: vec![file.clone()],
            x_mb: X_MB as f64,
            p: P,
            variants,
            rounds,
        }];
        // iperf3 for about two seconds of the link's rate.
        let iperf3_mb = (rate / 8.0 * 2.0) as u64;
        recs.extend(over_link_with(
            ctx,
            &cond,
            &pts,
            &mut checks,
            Some(iperf3_mb),
        )?);
        conds.push(cond);
    }
    write_csv(&dir.join("data.csv"), &recs)?;
    write_checks(dir, &checks)?;
    let mut report = render(&recs, &checks, dir)?;
    report.emulated = emulated(&conds, &checks);
    Ok(report)
}

/// The gain of N channels over one for `mode` at `scenario`, paired by round.
fn gain(recs: &[Record], scenario: &str, mode: Mode, n: u8, metric: Metric) -> Estimate {
    let at = |k: u8, rep: usize| {
        recs.iter()
            .find(|r| r.scenario == scenario && r.is(mode) && r.n == k && r.rep == rep)
            .map(|r| metric.of(r))
    };
    Estimate::improvement((0..rounds_of(recs)).filter_map(|rep| at(1, rep).zip(at(n, rep))))
}

/// "faster than" / "slower than" / "the same within the noise as", for "N channels are ___ one".
fn than(e: &Estimate) -> &'static str {
    match Outcome::of(e) {
        Outcome::Wins => "faster than",
        Outcome::Loses => "slower than",
        Outcome::Ties => "the same within the noise as",
    }
}

pub(crate) fn render(recs: &[Record], checks: &[LinkCheck], dir: &Path) -> Result<Report> {
    let grid: Vec<(&str, f64, f64)> = GRID
        .iter()
        .copied()
        .filter(|g| recs.iter().any(|r| r.scenario == g.0))
        .collect();
    let mut ns: Vec<u8> = recs.iter().map(|r| r.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let rounds = rounds_of(recs);
    let modes = [(Mode::SecureOnly, "secure-only"), (Mode::Sieve, "sieve")];
    let scenarios: Vec<&str> = grid.iter().map(|g| g.0).collect();

    // Figures: per rate and metric, the median time against N, one curve per RTT and system.
    let mut rates: Vec<f64> = grid.iter().map(|g| g.2).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    for &rate in &rates {
        for metric in [Metric::Total, Metric::Response] {
            let mut series = Vec::new();
            for &(name, rtt, _) in grid.iter().filter(|g| same(g.2, rate)) {
                for (mode, who) in modes {
                    let e: Vec<Estimate> = ns
                        .iter()
                        .map(|&n| {
                            sample(
                                recs,
                                |r| r.scenario == name && r.is(mode) && r.n == n,
                                |r| metric.of(r),
                            )
                        })
                        .collect();
                    series.push(Series {
                        label: format!("{who}, RTT {rtt} ms"),
                        style: if mode == Mode::Sieve {
                            Style::Ours
                        } else {
                            Style::Peer
                        },
                        points: ns
                            .iter()
                            .zip(&e)
                            .map(|(&n, e)| (f64::from(n), e.point))
                            .collect(),
                        err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                    });
                }
            }
            let whose = if metric == Metric::Total {
                "the thesis's metric for channels"
            } else {
                "beside it"
            };
            plot::render(
                &fig(
                    &format!(
                        "WAN, {rate} Mbit/s, {X_MB}MB-50: {} vs channels ({whose})",
                        metric.name()
                    ),
                    "number of channels N (= M for the sieve)",
                    &format!("{} (ms)", metric.name()),
                    series,
                ),
                &dir.join(format!("wan_{}_{rate}mbit", metric.short())),
            )?;
        }
    }

    let mut findings = Vec::new();
    let mut t = String::from(
        "| link | N | secure-only total (ms) | sieve total (ms) | secure-only: N against 1 | \
         sieve: N against 1 | sieve against secure-only | outcome |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut conds = Vec::new();
    let (mut paying, mut pairs) = (0, 0);
    for &(name, rtt, rate) in &grid {
        let label = format!("RTT {rtt} ms, {rate} Mbit/s");
        let mut per_mode = Vec::new();
        for &n in &ns {
            let med = |mode: Mode| {
                sample(
                    recs,
                    |r| r.scenario == name && r.is(mode) && r.n == n,
                    |r| r.total_ms,
                )
            };
            let vs = improvement(recs, |r| r.scenario == name && r.n == n, |r| r.total_ms);
            findings.push(Finding::new(
                ID,
                &format!("{label}, N = M = {n}, {X_MB}MB-50"),
                Metric::Total.name(),
                &vs,
            ));
            let g = |mode| {
                if n == 1 {
                    "–".to_string()
                } else {
                    gain(recs, name, mode, n, Metric::Total).pct()
                }
            };
            let _ = writeln!(
                t,
                "| {label} | {n} | {} | {} | {} | {} | {} | {} |",
                med(Mode::SecureOnly).num(0),
                med(Mode::Sieve).num(0),
                g(Mode::SecureOnly),
                g(Mode::Sieve),
                vs.pct(),
                Outcome::of(&vs).adjective()
            );
        }
        for (mode, who) in modes {
            // The best channel count: the lowest median total time.
            let best = ns
                .iter()
                .copied()
                .min_by(|&a, &b| {
                    let m = |n: u8| {
                        sample(
                            recs,
                            |r| r.scenario == name && r.is(mode) && r.n == n,
                            |r| r.total_ms,
                        )
                        .point
                    };
                    m(a).total_cmp(&m(b))
                })
                .unwrap_or(1);
            let e = gain(recs, name, mode, best, Metric::Total);
            let pays = best > 1 && Outcome::of(&e) == Outcome::Wins;
            pairs += 1;
            paying += usize::from(pays);
            let mut w = point_words(&e);
            w["than"] = json!(than(&e));
            per_mode.push(json!({
                "mode": who,
                "best_n": best,
                "gain": w,
                "pays": pays,
            }));
        }
        let vs_at = |n: u8| {
            point_words(&improvement(
                recs,
                |r| r.scenario == name && r.n == n,
                |r| r.total_ms,
            ))
        };
        let check = checks.iter().find(|c| c.condition == name);
        // What one connection's largest window allows at this round trip.
        let window_mbit = check
            .and_then(LinkCheck::window_max)
            .map(|b| b * 8.0 / (rtt / 1e3) / 1e6);
        conds.push(json!({
            "label": label,
            "modes": per_mode,
            "n1": vs_at(1),
            "nmax": vs_at(*ns.last().unwrap_or(&1)),
            "window_mbit": window_mbit.map(|w| format!("{w:.0}")),
            "window_bound": window_mbit.is_some_and(|w| w < rate),
            "iperf3": check.and_then(|c| c.iperf3_mbit).map(|m| format!("{m:.0}")),
            "rate": format!("{rate}"),
        }));
    }
    t.push_str(&interval_note(rounds));
    t.push_str(
        "\"N against 1\" is the paired gain of N channels over one for the same system, \
         (t₁ − t_N) / t₁; \"sieve against secure-only\" the paired improvement at the same N.\n",
    );
    let tcp_rmem = checks
        .first()
        .map_or("not read".to_string(), |c| c.tcp_rmem.clone());
    let body = fill(
        "wan.md",
        include_str!("wan.md"),
        json!({
            "rounds": rounds,
            "x": X_MB,
            "p": P,
            "ns": ns.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            "table": t,
            "conds": conds,
            "paying": paying,
            "pairs": pairs,
            "tcp_rmem": tcp_rmem,
            "window_max": checks.first().and_then(LinkCheck::window_max).map_or("?".into(), |b| format!("{b:.0}")),
            "tcp_wmem": checks.first().map_or("not read".to_string(), |c| c.tcp_wmem.clone()),
            "files": xp_label(X_MB as f64, P),
            "rates": rates.iter().map(|r| format!("{r}")).collect::<Vec<_>>().join(" and "),
            "shares": cleartext_on_wire(recs, &scenarios),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: rates
            .last()
            .map(|r| format!("wan_{}_{r}mbit", Metric::Total.short())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::record::{read_csv, CSV_HEADER};

    /// Ten rounds at one link; `time(mode, n)` gives the total time.
    fn fixture(time: impl Fn(&str, u8) -> f64) -> Vec<Record> {
        let mut csv = String::from(CSV_HEADER);
        for rep in 0..10 {
            for n in 1..=4u8 {
                for mode in ["secure-only", "sieve"] {
                    let t = time(mode, n) + rep as f64;
                    csv.push_str(&format!(
                        "rtt100-100mbit,10MB-50,{mode},10,0.5,{n},{n},dynamic,dynamic,aes128gcm,\
                         0,{rep},1,1,0,0,{},{t},1,0,0,{t},0,0,1,10485800,5242900,5242900,TLS13\n",
                        t - 1.0
                    ));
                }
            }
        }
        read_csv(csv.as_bytes()).expect("fixture parses")
    }

    fn check() -> LinkCheck {
        LinkCheck {
            condition: "rtt100-100mbit".into(),
            rate_mbit: 100.0,
            rtt_ms: 100.0,
            delay_by: "Line".into(),
            measured_rtt_ms: 100.4,
            measured_rtt_lo: 100.3,
            measured_rtt_hi: 100.6,
            probes: 30,
            iperf3_mbit: Some(60.0),
            tcp_rmem: "4096 131072 6291456".into(),
            tcp_wmem: "4096 16384 8388608".into(),
            line_overflow: 0,
        }
    }

    /// Where more channels are faster the report says they pay and names the best count; where
    /// they are slower it says one channel is best, from the same template.
    #[test]
    fn the_words_follow_the_channels() {
        let dir = tempfile::tempdir().unwrap();
        let paying = render(
            &fixture(|_, n| 3000.0 / f64::from(n)),
            &[check()],
            dir.path(),
        )
        .unwrap();
        assert!(
            paying.body.contains("secure-only is fastest at N = 4"),
            "{}",
            paying.body
        );
        assert!(paying.body.contains("In 2 of 2"), "{}", paying.body);
        let flat = render(
            &fixture(|m, n| 1000.0 + 50.0 * f64::from(n) + if m == "sieve" { 500.0 } else { 0.0 }),
            &[check()],
            dir.path(),
        )
        .unwrap();
        assert!(
            flat.body.contains("secure-only is fastest at N = 1"),
            "{}",
            flat.body
        );
        assert!(flat.body.contains("In 0 of 2"), "{}", flat.body);
        assert!(
            flat.body.contains("is slower than secure-only"),
            "{}",
            flat.body
        );
        assert!(paying.body.contains("503 Mbit/s"), "{}", paying.body);
        assert!(dir.path().join("wan_total_100mbit.svg").is_file());
        assert_ne!(paying.findings, flat.findings);
    }
}
