//! Transfers over the emulated links of Table 5.1 (F5.5, F5.6 and F5.7 share them): sender and
//! receiver in two network namespaces, optionally with the sender under a CPU quota.

use anyhow::Result;

use super::record::Record;
use super::{Ctx, Point};
use crate::run::{Receiver, SendOptions};
use crate::scenario::{netem_available, CpuLimit, LinkSpec, NetPair, Side};

/// One condition of the link experiments.
pub(crate) struct Condition {
    /// Scenario name in the data: "wired", "wifi", "wifi+power-saving".
    pub(crate) name: &'static str,
    pub(crate) link: LinkSpec,
    /// The sender's CPU quota as a fraction of one core, if limited.
    pub(crate) cpu: Option<f64>,
}

/// Measure `points` (built for `cond.name`) over the condition's link. A new pair of namespaces
/// per condition; the receiver runs in the server's, the sender in the client's (and cgroup).
pub(crate) fn over_link(ctx: &mut Ctx, cond: &Condition, points: &[Point]) -> Result<Vec<Record>> {
    let net = NetPair::create(cond.name, &cond.link)?;
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
    ctx.sweep(&rx, points, &client)
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

/// What the link experiments emulate, for the report's header.
pub(crate) fn emulated(conds: &[Condition]) -> String {
    let delay = if netem_available() {
        "one-way delays applied with netem"
    } else {
        "no one-way delay: this kernel has no netem, so the delays listed are not applied"
    };
    let each: Vec<String> = conds
        .iter()
        .map(|c| {
            format!(
                "{} ({} Mbit/s each way by tbf, {} ms one-way delay listed{})",
                c.name,
                c.link.rate_mbit,
                c.link.delay_ms,
                c.cpu.map_or(String::new(), |f| format!(
                    ", sender limited to {:.0} % of one core by a cgroup quota",
                    f * 100.0
                ))
            )
        })
        .collect();
    format!(
        "links between two network namespaces on this machine: {}; {delay}.",
        each.join("; ")
    )
}
