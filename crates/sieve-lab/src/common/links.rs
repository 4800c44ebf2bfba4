//! Transfers over emulated links (F5.5, F5.6, F5.7 and WAN share them): sender and receiver in
//! two network namespaces, optionally with the sender under a CPU quota; and the check of each
//! link before it is used, whose figures every such report gives.

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::estimate::Estimate;
use super::record::{write_csv, Record};
use super::{Ctx, Point};
use crate::peers::{Iperf3, Peer, PeerCtx};
use crate::run::{Receiver, SendOptions};
use crate::scenario::{rtt, CpuLimit, DelayBy, LinkSpec, NetPair, Side};

/// One condition of the link experiments.
pub(crate) struct Condition {
    /// Scenario name in the data: "wired", "wifi", "wifi+power-saving", "rtt20-100mbit".
    pub(crate) name: &'static str,
    pub(crate) link: LinkSpec,
    /// The sender's CPU quota as a fraction of one core, if limited.
    pub(crate) cpu: Option<f64>,
}

/// What a link was set to and what it measured before the transfers: a row of `links.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LinkCheck {
    pub(crate) condition: String,
    pub(crate) rate_mbit: f64,
    pub(crate) rtt_ms: f64,
    /// How the delay was applied: "Netem", "Line" or "Nothing".
    pub(crate) delay_by: String,
    /// Round trips of small datagrams ([`rtt::round_trips`]): median and its interval.
    pub(crate) measured_rtt_ms: f64,
    pub(crate) measured_rtt_lo: f64,
    pub(crate) measured_rtt_hi: f64,
    pub(crate) probes: usize,
    /// iperf3's goodput over the link (receiver side), where it was measured.
    pub(crate) iperf3_mbit: Option<f64>,
    /// `net.ipv4.tcp_rmem` in the receiver's namespace (min, default, max bytes): the largest
    /// window one connection can offer, this kernel's default where nobody tuned it.
    pub(crate) tcp_rmem: String,
    /// `net.ipv4.tcp_wmem` in the sender's namespace: the largest send buffer, which bounds the
    /// bytes one connection keeps in flight.
    pub(crate) tcp_wmem: String,
    /// Packets the delay line dropped because its queue was full, during the transfers (both
    /// directions; 0 where there is no line).
    pub(crate) line_overflow: u64,
}

impl LinkCheck {
    pub(crate) fn rtt(&self) -> Estimate {
        Estimate {
            point: self.measured_rtt_ms,
            lo: self.measured_rtt_lo,
            hi: self.measured_rtt_hi,
            coverage: crate::stats::median_ci_ranks(self.probes).map_or(0.0, |c| c.2),
            n: self.probes,
        }
    }

    /// The most one connection can keep in flight, in bytes: the smaller of the largest receive
    /// and send buffers (each the third field of its sysctl).
    pub(crate) fn window_max(&self) -> Option<f64> {
        let max = |s: &str| s.split_whitespace().nth(2)?.parse::<f64>().ok();
        Some(max(&self.tcp_rmem)?.min(max(&self.tcp_wmem)?))
    }

    /// The measured RTT against the setting, in percent.
    pub(crate) fn rtt_error_pct(&self) -> f64 {
        (self.measured_rtt_ms - self.rtt_ms) / self.rtt_ms * 100.0
    }
}

/// Round trips measured per link before its transfers.
const PROBES: usize = 30;

/// Probe the round-trip time of `net` and, with `iperf3_mb`, its goodput with iperf3.
pub(crate) fn check(net: &NetPair, name: &str, iperf3_mb: Option<u64>) -> Result<LinkCheck> {
    Ok(check_raw(net, name, iperf3_mb)?.0)
}

/// [`check`], also returning every probe's round trip in ms (the raw data behind the median).
pub(crate) fn check_raw(
    net: &NetPair,
    name: &str,
    iperf3_mb: Option<u64>,
) -> Result<(LinkCheck, Vec<f64>)> {
    let rtts: Vec<f64> = rtt::round_trips(net, PROBES)?
        .iter()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let e = Estimate::median_of(&rtts);
    let iperf3_mbit = match iperf3_mb {
        Some(mb) if Iperf3::available().is_ok() => {
            let dir = tempfile::tempdir()?;
            let file = dir.path().join("iperf3-size");
            // iperf3 reads only the size of the file it is given (`-n`), not its bytes.
            std::fs::File::create(&file)?.set_len(mb << 20)?;
            let ctx = PeerCtx {
                net: Some(net),
                ..PeerCtx::default()
            };
            let run = Iperf3.transfer_with(&file, &ctx)?;
            run.reported_bits_per_second.map(|b| b / 1e6)
        }
        _ => None,
    };
    let check = LinkCheck {
        condition: name.into(),
        rate_mbit: net.link.rate_mbit,
        rtt_ms: net.link.rtt_ms(),
        delay_by: format!("{:?}", net.delay_by),
        measured_rtt_ms: e.point,
        measured_rtt_lo: e.lo,
        measured_rtt_hi: e.hi,
        probes: e.n,
        iperf3_mbit,
        tcp_rmem: sysctl(net, Side::Server, "net/ipv4/tcp_rmem"),
        tcp_wmem: sysctl(net, Side::Client, "net/ipv4/tcp_wmem"),
        line_overflow: 0,
    };
    Ok((check, rtts))
}

/// A sysctl as the namespace of `side` sees it, whitespace collapsed; empty if unreadable.
fn sysctl(net: &NetPair, side: Side, name: &str) -> String {
    let mut cmd = net.wrap(side, {
        let mut c = std::process::Command::new("cat");
        c.arg(format!("/proc/sys/{name}"));
        c
    });
    crate::scenario::run(&mut cmd)
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Measure `points` (built for `cond.name`) over the condition's link, after checking the link.
/// A new pair of namespaces per condition; the receiver runs in the server's, the sender in the
/// client's (and cgroup).
pub(crate) fn over_link(
    ctx: &mut Ctx,
    cond: &Condition,
    points: &[Point],
    checks: &mut Vec<LinkCheck>,
) -> Result<Vec<Record>> {
    over_link_with(ctx, cond, points, checks, None)
}

/// [`over_link`], measuring the link's goodput with iperf3 moving `iperf3_mb` MB as well.
pub(crate) fn over_link_with(
    ctx: &mut Ctx,
    cond: &Condition,
    points: &[Point],
    checks: &mut Vec<LinkCheck>,
    iperf3_mb: Option<u64>,
) -> Result<Vec<Record>> {
    let net = NetPair::create(cond.name, &cond.link)?;
    checks.push(check(&net, cond.name, iperf3_mb)?);
    let limit = cond
        .cpu
        .map(|f| CpuLimit::create(cond.name, f))
        .transpose()?;
    let server = |c| net.wrap(Side::Server, c);
    let rx = Receiver::start(&ctx.tools, &net.server_ip.to_string(), false, &server)?;
    let client = |c| {
        let c = net.wrap(Side::Client, c);
        match &limit {
            Some(l) => l.wrap(c),
            None => c,
        }
    };
    let recs = ctx.sweep(&rx, points, &client)?;
    if let (Some(c), Some(k)) = (net.line_counts(), checks.last_mut()) {
        k.line_overflow = c[0].overflow + c[1].overflow;
    }
    Ok(recs)
}

/// x-P points at `xs` × `ps` for a condition, secure-only and sieve alternating, with `rounds`
/// for points that take under a second and `rounds_slow` for the rest (at `rate_mbit`).
pub(crate) fn points(
    ctx: &mut Ctx,
    cond: &Condition,
    xs: &[u64],
    ps: &[f64],
    pair: (&SendOptions, &SendOptions),
    (rounds, rounds_slow): (usize, usize),
) -> Result<Vec<Point>> {
    let mut pts = ctx.xp_points(cond.name, xs, ps, pair, rounds)?;
    for p in &mut pts {
        // The secure-only transfer moves every byte over the link at its rate.
        let seconds = p.x_mb * 8.0 / cond.link.rate_mbit;
        if seconds >= 1.0 {
            p.rounds = rounds_slow.min(rounds);
        }
    }
    Ok(pts)
}

/// Write `links.csv` beside the data.
pub(crate) fn write_checks(dir: &Path, checks: &[LinkCheck]) -> Result<()> {
    write_csv(&dir.join("links.csv"), checks)
}

/// What the link experiments emulate, for the report's header: each link as set and as
/// measured, and how its delay was applied.
pub(crate) fn emulated(conds: &[Condition], checks: &[LinkCheck]) -> String {
    let each: Vec<String> = conds
        .iter()
        .map(|c| {
            let measured =
                checks
                    .iter()
                    .find(|k| k.condition == c.name)
                    .map_or(String::new(), |k| {
                        format!(
                            "; measured RTT {} ms over {} probes ({:+.1} % of the setting){}",
                            k.rtt().num(3),
                            k.probes,
                            k.rtt_error_pct(),
                            k.iperf3_mbit
                                .map_or(String::new(), |m| format!(", iperf3 {m:.0} Mbit/s"))
                        )
                    });
            format!(
                "{} ({} Mbit/s each way, RTT {} ms{}{})",
                c.name,
                c.link.rate_mbit,
                c.link.rtt_ms(),
                c.cpu.map_or(String::new(), |f| format!(
                    ", sender limited to {:.0} % of one core by a cgroup quota",
                    f * 100.0
                )),
                measured,
            )
        })
        .collect();
    let by: Vec<&'static str> = {
        let mut v: Vec<_> = checks
            .iter()
            .map(|k| match k.delay_by.as_str() {
                "Netem" => DelayBy::Netem.words(),
                "Line" => DelayBy::Line.words(),
                _ => DelayBy::Nothing.words(),
            })
            .collect();
        v.dedup();
        v
    };
    format!(
        "links between two network namespaces on this machine: {}. Rate and delay applied by {}; \
         RTT measured as ping does, with small datagrams echoed between the namespaces.",
        each.join("; "),
        if by.is_empty() {
            "nothing (no link was made)".to_string()
        } else {
            by.join(" and ")
        }
    )
}

/// What the sieve's sender did to its cleartext on each link: per condition, the median share
/// of the cleartext bytes that went on the wire (its default, `--compress auto`, compresses
/// them where the link is slower than its compressors; secure-only has nothing it may
/// compress). Rows whose data predate the column are left out; conditions without any, too.
pub(crate) fn cleartext_on_wire(recs: &[Record], conds: &[&str]) -> Vec<serde_json::Value> {
    conds
        .iter()
        .filter_map(|&c| {
            let share = super::sample(
                recs,
                |r| {
                    r.scenario == c
                        && r.mode == super::record::Mode::Sieve
                        && r.plain_bytes > 0
                        && r.plain_wire_bytes.is_some()
                },
                |r| r.plain_wire_bytes.unwrap_or(r.plain_bytes) as f64 / r.plain_bytes as f64,
            );
            share.known().then(|| {
                serde_json::json!({
                    "scenario": c,
                    "share": format!("{:.2}", share.point),
                    "compressed": share.point < 0.95,
                })
            })
        })
        .collect()
}
