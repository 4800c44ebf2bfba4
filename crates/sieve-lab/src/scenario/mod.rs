//! The emulated environments of the thesis's Table 5.1: a wired or Wi-Fi link between sender and
//! receiver, and a slow ("power saving") sender.
//!
//! The thesis ran on real hardware: two PCs on 100 Mbit/s Ethernet or 54 Mbit/s 802.11g, with the
//! client in Windows' "power saving" plan for the slow case. We cannot rewire the machine, so we
//! emulate each factor with what Linux gives root:
//!
//! - **Links** ([`NetPair`]): two network namespaces, each joined by a veth pair to a third that
//!   routes between them, the rate limited in *both* directions by a token-bucket qdisc (`tbf`)
//!   on the router's two interfaces, with the propagation delay (`netem`) under it. The
//!   bottleneck is in the network, as on a real path: shaped on the sender's own interface, its
//!   50 ms queue (62 KB at 10 Mbit/s) is far below what a socket may keep queued below TCP
//!   (`tcp_limit_output_bytes`, 4 MiB on recent kernels), so the kernel dropped its own sockets'
//!   packets and refused their retransmissions (`TcpExtTCPRetransFail`), and two flows at once
//!   (the sieve's channels) fell into retransmission storms: 4 MiB of logs over 10 Mbit/s took
//!   3.6 s in some rounds and 4.5-5.3 s in others, against 3.6 s in every round routed. Where the kernel has no `netem` and the link has a delay, the namespaces
//!   are joined instead by a userspace delay line ([`delay_line`]): a TUN interface in each and
//!   two threads of the lab that hold every packet for the delay and serialize it at the rate.
//!   [`NetPair::delay_by`] says which was used. Traffic between the namespaces never leaves the
//!   machine and never touches the host's own interfaces.
//! - **Slow client** ([`CpuLimit`]): a cgroup with a CPU bandwidth quota (cgroup v2 `cpu.max`, or
//!   the v1 `cpu` controller's CFS quota on hybrid hosts such as this one), into which the sender is
//!   started.
//!
//! Everything is created on demand and removed by `Drop` (namespaces, their processes, cgroup
//! directories), so a failing test or a panicking lab leaves nothing behind. Anything a killed
//! process could not remove is found by [`cleanup_stale`], which deletes only objects whose name
//! carries the pid of a process that no longer exists.
//!
//! Scenarios need root and kernel features; [`check_root`] and [`check_cgroup`] say in one line why
//! a scenario cannot run, so the lab can print "skipped: …" instead of failing.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rustix::process::{kill_process, Pid, Signal};

pub(crate) mod delay_line;
pub(crate) mod inside;
pub(crate) mod rtt;

use delay_line::queue::LineSpec;
use delay_line::{DelayLine, End, QUEUE_LIMIT};

/// Prefix of every namespace and cgroup this module creates; [`cleanup_stale`] relies on it.
const PREFIX: &str = "sieve-lab-";

/// Interface names inside the namespaces. Each end lives in its own namespace from the moment it
/// is created, so the names never collide with the host's interfaces or with another pair's.
const CLIENT_IF: &str = "sv-client";
const SERVER_IF: &str = "sv-server";
/// The router's ends of the two veth pairs of a routed link.
const ROUTER_CLIENT_IF: &str = "sv-r-client";
const ROUTER_SERVER_IF: &str = "sv-r-server";

/// Sequence number that makes names unique within one process (the pid makes them unique across
/// processes) and picks the /30 subnet of each pair.
static SEQ: AtomicU32 = AtomicU32::new(0);

/// A point-to-point link as Table 5.1 names it: a nominal rate and a one-way propagation delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinkSpec {
    /// Short name used in reports and in namespace names ("wired", "wifi").
    pub(crate) name: &'static str,
    /// Rate in Mbit/s (10^6 bit/s), enforced in each direction independently.
    pub(crate) rate_mbit: f64,
    /// One-way delay in milliseconds, applied in each direction (so the round trip is twice this).
    pub(crate) delay_ms: f64,
    /// Probability that a packet is lost, in each direction (0 for none).
    pub(crate) loss: f64,
}

impl LinkSpec {
    /// A link of `rate_mbit` and a round-trip time of `rtt_ms` (half each way), without loss.
    pub(crate) fn with_rtt(name: &'static str, rate_mbit: f64, rtt_ms: f64) -> LinkSpec {
        LinkSpec {
            name,
            rate_mbit,
            delay_ms: rtt_ms / 2.0,
            loss: 0.0,
        }
    }

    /// The nominal round-trip time, in ms.
    pub(crate) fn rtt_ms(&self) -> f64 {
        2.0 * self.delay_ms
    }
}

/// The thesis's "wired" link: switched 100 Mbit/s Ethernet on one LAN. The 0.2 ms one-way delay is
/// what a switch hop and two NICs add; it matters little next to the rate but keeps the handshake
/// round trips from being unrealistically free. `tbf` counts the Ethernet header but not the
/// preamble and inter-frame gap, so TCP goodput comes out near 95 Mbit/s, against about 94 Mbit/s on
/// real Fast Ethernet.
pub(crate) const WIRED: LinkSpec = LinkSpec {
    name: "wired",
    rate_mbit: 100.0,
    delay_ms: 0.2,
    loss: 0.0,
};

/// The thesis's "Wi-Fi" link at the nominal 802.11g rate it names (54 Mbit/s), with the round
/// trip of a Wi-Fi hop: 3 ms, the median WiFi latency (ping between the access point's wired side
/// and the device) that Sui et al. measured over more than 47,000 devices on a campus network
/// ("Characterizing and Improving WiFi Latency in Large-Scale Operational Networks", MobiSys
/// 2016; their 90th percentile was about 20 ms).
///
/// Real 802.11g delivers only about 20-25 Mbit/s of TCP goodput (half-duplex medium, per-frame
/// preamble, ACKs and backoff). We keep the nominal rate because that is the factor Table 5.1
/// varies and because the thesis's own Wi-Fi figures are dominated by its slow handshake rather
/// than by the rate.
pub(crate) const WIFI: LinkSpec = LinkSpec {
    name: "wifi",
    rate_mbit: 54.0,
    delay_ms: 1.5,
    loss: 0.0,
};

/// How a [`NetPair`]'s link gets its delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) enum DelayBy {
    /// The kernel's `netem` qdisc, under `tbf` for the rate, in a namespace that routes between the two.
    Netem,
    /// The userspace delay line between two TUN interfaces, which also applies the rate.
    Line,
    /// No delay: the link has none (`tbf` only, in a namespace that routes between the two).
    Nothing,
}

impl DelayBy {
    /// How the report names it.
    pub(crate) fn words(self) -> &'static str {
        match self {
            DelayBy::Netem => {
                "the kernel's netem (rate by tbf, in a namespace routing between the two)"
            }
            DelayBy::Line => {
                "the lab's userspace delay line (a TUN interface in each namespace; rate, delay \
                 and loss applied by the forwarder, as mahimahi's mm-link does)"
            }
            DelayBy::Nothing => "no delay (rate by tbf, in a namespace routing between the two)",
        }
    }
}

/// Which end of a [`NetPair`]: the client runs the sender, the server runs the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The sender's namespace (`10.77.N.1`).
    Client,
    /// The receiver's namespace (`10.77.N.2` over the delay line, `10.77.N.5` routed).
    Server,
}

/// Two network namespaces joined by a shaped veth link; see the module documentation.
///
/// Dropping it kills whatever still runs inside its namespaces (only processes started there,
/// which can only be ours) and deletes them, which also destroys the veth pairs and their qdiscs.
#[derive(Debug)]
pub(crate) struct NetPair {
    /// Name of the sender's namespace (for `ip netns exec`).
    pub(crate) client_ns: String,
    /// Name of the receiver's namespace.
    pub(crate) server_ns: String,
    /// The namespace that routes between the two and shapes the link (veth links only).
    router_ns: Option<String>,
    /// Address of the sender, `10.77.N.1/30`.
    pub(crate) client_ip: Ipv4Addr,
    /// Address of the receiver, where the sender connects to: `10.77.N.2/30` over the delay
    /// line, `10.77.N.5/30` behind the router.
    pub(crate) server_ip: Ipv4Addr,
    /// The link this pair emulates.
    pub(crate) link: LinkSpec,
    /// How the delay of `link` is applied.
    pub(crate) delay_by: DelayBy,
    /// The delay line, when [`DelayBy::Line`]; stopped before the namespaces are removed.
    line: Option<DelayLine>,
}

impl NetPair {
    /// Create the two namespaces, the veth link between them, addresses, and shaping in both
    /// directions. On any error whatever was already created is removed again (by `Drop`).
    ///
    /// `tag` only makes names readable (`sieve-lab-<pid>-<seq>-<tag>-c`); any characters other
    /// than ASCII letters, digits and `_` are dropped.
    /// The delay is applied by `netem` where the kernel has it, else by the userspace delay line
    /// (see [`DelayBy`]); a link without delay or loss is routed over veth pairs with `tbf`.
    pub(crate) fn create(tag: &str, link: &LinkSpec) -> Result<NetPair> {
        let by = if link.delay_ms == 0.0 && link.loss == 0.0 {
            DelayBy::Nothing
        } else if netem_available() {
            DelayBy::Netem
        } else {
            DelayBy::Line
        };
        NetPair::create_by(tag, link, by)
    }

    /// [`NetPair::create`] with the delay applied by `by`, whatever the kernel has (for tests
    /// and measurements of the delay line itself).
    pub(crate) fn create_by(tag: &str, link: &LinkSpec, by: DelayBy) -> Result<NetPair> {
        if !(link.rate_mbit.is_finite() && link.rate_mbit > 0.0) {
            bail!("link {}: rate must be positive", link.name);
        }
        if !(link.delay_ms.is_finite() && link.delay_ms >= 0.0) {
            bail!("link {}: delay must be zero or positive", link.name);
        }
        if !(0.0..1.0).contains(&link.loss) {
            bail!("link {}: loss must be in [0, 1)", link.name);
        }
        if by == DelayBy::Nothing && (link.delay_ms > 0.0 || link.loss > 0.0) {
            bail!(
                "link {}: a delay or a loss needs netem or the delay line",
                link.name
            );
        }
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let base = format!("{PREFIX}{}-{seq}-{}", std::process::id(), sanitize(tag));
        // The subnet number only has to differ between pairs for readability of `ip` output:
        // each pair's addresses live in namespaces of their own and cannot clash with anything.
        let subnet = ((std::process::id() + seq) % 250 + 1) as u8;
        let routed = by != DelayBy::Line;
        let mut pair = NetPair {
            client_ns: format!("{base}-c"),
            server_ns: format!("{base}-s"),
            router_ns: routed.then(|| format!("{base}-r")),
            client_ip: Ipv4Addr::new(10, 77, subnet, 1),
            server_ip: Ipv4Addr::new(10, 77, subnet, if routed { 5 } else { 2 }),
            link: *link,
            delay_by: by,
            line: None,
        };
        pair.set_up()
            .with_context(|| format!("cannot create the {} link {base}", link.name))?;
        Ok(pair)
    }

    fn set_up(&mut self) -> Result<()> {
        run(Command::new("ip").args(["netns", "add", &self.client_ns]))?;
        run(Command::new("ip").args(["netns", "add", &self.server_ns]))?;
        if self.delay_by == DelayBy::Line {
            let spec = LineSpec {
                delay_ns: (self.link.delay_ms * 1e6).round() as u64,
                rate_bps: Some(self.link.rate_mbit * 1e6),
                loss: self.link.loss,
                queue_limit_ns: QUEUE_LIMIT.as_nanos() as u64,
                seed: u64::from(std::process::id()),
            };
            let end = |ns, dev, ip| End { ns, dev, ip };
            self.line = Some(DelayLine::start(
                end(&self.client_ns, CLIENT_IF, self.client_ip),
                end(&self.server_ns, SERVER_IF, self.server_ip),
                spec,
            )?);
            return Ok(());
        }
        let Some(router) = self.router_ns.clone() else {
            bail!("a veth link needs its router namespace");
        };
        run(Command::new("ip").args(["netns", "add", &router]))?;
        // Every end is created directly inside its namespace, never in the host's. The client's
        // /30 holds .1 (client) and .2 (router), the server's .5 (server) and .6 (router).
        let [a, b, c, _] = self.client_ip.octets();
        let at = |last: u8| Ipv4Addr::new(a, b, c, last);
        let sides = [
            (
                &self.client_ns,
                CLIENT_IF,
                ROUTER_CLIENT_IF,
                at(1),
                at(2),
                at(4),
            ),
            (
                &self.server_ns,
                SERVER_IF,
                ROUTER_SERVER_IF,
                at(5),
                at(6),
                at(0),
            ),
        ];
        for (ns, dev, peer, ip, gateway, other) in sides {
            run(Command::new("ip").args([
                "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", peer, "netns",
                &router,
            ]))?;
            run(Command::new("ip").args([
                "-n",
                ns,
                "addr",
                "add",
                &format!("{ip}/30"),
                "dev",
                dev,
            ]))?;
            run(Command::new("ip").args([
                "-n",
                &router,
                "addr",
                "add",
                &format!("{gateway}/30"),
                "dev",
                peer,
            ]))?;
            run(Command::new("ip").args(["-n", ns, "link", "set", "lo", "up"]))?;
            run(Command::new("ip").args(["-n", ns, "link", "set", dev, "up"]))?;
            run(Command::new("ip").args(["-n", &router, "link", "set", peer, "up"]))?;
            run(Command::new("ip").args([
                "-n",
                ns,
                "route",
                "add",
                &format!("{other}/30"),
                "via",
                &gateway.to_string(),
            ]))?;
        }
        // Written through /proc rather than with `sysctl`, which minimal systems lack.
        run(Command::new("ip").args([
            "netns",
            "exec",
            &router,
            "sh",
            "-c",
            "echo 1 > /proc/sys/net/ipv4/ip_forward",
        ]))?;
        // Each direction is shaped where it leaves the router: towards the server for what the
        // client sends, towards the client for what the server sends.
        for dev in [ROUTER_SERVER_IF, ROUTER_CLIENT_IF] {
            shape(&router, dev, &self.link)?;
            if self.delay_by == DelayBy::Netem {
                add_delay(&router, dev, self.link.delay_ms, self.link.loss)?;
            }
        }
        Ok(())
    }

    /// What the delay line did so far (client to server, server to client), if there is one.
    pub(crate) fn line_counts(&self) -> Option<[delay_line::queue::Counts; 2]> {
        self.line.as_ref().map(DelayLine::counts)
    }

    /// The namespace of one side.
    pub(crate) fn ns(&self, side: Side) -> &str {
        match side {
            Side::Client => &self.client_ns,
            Side::Server => &self.server_ns,
        }
    }

    /// Rewrite `cmd` to run inside the namespace of `side`: `ip netns exec NS prog args…`, with the
    /// environment changes and working directory `cmd` had.
    ///
    /// Call it before configuring stdio (std cannot read stdio settings back, so they are not
    /// carried over). `ip netns exec` remounts `/sys` for the namespace, which hides
    /// `/sys/fs/cgroup`: to combine with [`CpuLimit::wrap`], wrap for the namespace first and for
    /// the cgroup last, so the cgroup is joined before `ip` runs.
    pub(crate) fn exec(&self, side: Side, cmd: &mut Command) {
        let ns = self.ns(side).to_string();
        *cmd = prefix_command("ip", ["netns", "exec", ns.as_str()], cmd);
    }

    /// [`NetPair::exec`] by value, for code that passes commands through `Fn(Command) -> Command`.
    pub(crate) fn wrap(&self, side: Side, mut cmd: Command) -> Command {
        self.exec(side, &mut cmd);
        cmd
    }

    /// A new command for `program` that will run inside the namespace of `side`.
    #[cfg(test)]
    pub(crate) fn command(&self, side: Side, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        self.exec(side, &mut cmd);
        cmd
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        // The forwarder first: its threads stop and its TUN interfaces go with their descriptors.
        drop(self.line.take());
        for ns in [&self.client_ns, &self.server_ns]
            .into_iter()
            .chain(self.router_ns.as_ref())
        {
            delete_netns(ns);
        }
    }
}

/// A network namespace of its own with only its loopback interface: the same path as the
/// host's loopback, but whose traffic counters (`/proc/PID/net/dev` of a process inside) count
/// this experiment's bytes alone. Removed, with what runs inside, on drop.
#[derive(Debug)]
pub(crate) struct LoopbackNs {
    pub(crate) ns: String,
}

impl LoopbackNs {
    pub(crate) fn create(tag: &str) -> Result<LoopbackNs> {
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let ns = format!("{PREFIX}{}-{seq}-{}-l", std::process::id(), sanitize(tag));
        run(Command::new("ip").args(["netns", "add", &ns]))?;
        let made = LoopbackNs { ns };
        run(Command::new("ip").args(["-n", &made.ns, "link", "set", "lo", "up"]))?;
        Ok(made)
    }

    /// `cmd` run inside the namespace (wrap for a cgroup after this, see [`NetPair::exec`]).
    pub(crate) fn wrap(&self, cmd: Command) -> Command {
        prefix_command("ip", ["netns", "exec", self.ns.as_str()], &cmd)
    }
}

impl Drop for LoopbackNs {
    fn drop(&mut self) {
        delete_netns(&self.ns);
    }
}

/// Bytes received so far on the loopback interface of the network namespace process `pid` is
/// in (`/proc/PID/net/dev`).
pub(crate) fn loopback_rx_bytes(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/net/dev");
    let text = fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix("lo:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no loopback counters in {path}"))
}

/// Kill what still runs in `ns` (so the namespace really goes away rather than lingering,
/// anonymous, until those processes end) and delete it. Errors are ignored: this runs in `Drop`.
fn delete_netns(ns: &str) {
    if let Ok(out) = Command::new("ip")
        .args(["netns", "pids", ns])
        .stderr(Stdio::null())
        .output()
    {
        let listed = String::from_utf8_lossy(&out.stdout);
        let pids = listed
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .filter_map(Pid::from_raw);
        for pid in pids {
            let _ = kill_process(pid, Signal::KILL);
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .status();
}

/// Rate-limit the egress of `dev` with a token bucket.
///
/// Why `tbf` and not `netem rate`: `tbf` is in nearly every kernel (netem is not, here), and its
/// rate is accurate for TCP provided the bucket holds at least a couple of milliseconds of traffic
/// (so timer granularity does not starve it) and a few full frames. The queue limit (50 ms worth)
/// is about what a small switch buffers; TCP sees drops beyond it as it would on a real link.
fn shape(ns: &str, dev: &str, link: &LinkSpec) -> Result<()> {
    let rate_kbit = (link.rate_mbit * 1000.0).round().max(1.0) as u64;
    let bytes_per_s = link.rate_mbit * 1e6 / 8.0;
    let burst = ((bytes_per_s * 0.002) as u64).max(10 * 1514);
    run(Command::new("ip").args([
        "netns",
        "exec",
        ns,
        "tc",
        "qdisc",
        "add",
        "dev",
        dev,
        "root",
        "handle",
        "1:",
        "tbf",
        "rate",
        &format!("{rate_kbit}kbit"),
        "burst",
        &burst.to_string(),
        "latency",
        "50ms",
    ]))
    .map(drop)
}

/// Put a `netem` delay (and loss) under the token bucket (as its child qdisc), so packets are
/// first delayed and then paced. Fails on kernels without netem.
///
/// One of the two places a link gets its delay ([`NetPair::set_up`] calls it per end after
/// [`shape`]); the other is the userspace delay line, for kernels without netem.
fn add_delay(ns: &str, dev: &str, delay_ms: f64, loss: f64) -> Result<()> {
    let us = (delay_ms * 1000.0).round() as u64;
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        ns,
        "tc",
        "qdisc",
        "add",
        "dev",
        dev,
        "parent",
        "1:1",
        "handle",
        "10:",
        "netem",
        "delay",
        &format!("{us}us"),
        "limit",
        "100000",
    ]);
    if loss > 0.0 {
        cmd.args(["loss", &format!("{}%", loss * 100.0)]);
    }
    run(&mut cmd).map(drop)
}

/// Whether we run as root and can create network namespaces, veth pairs and `tbf` qdiscs, i.e.
/// whether [`NetPair::create`] can work. `Err` says why not, in a form fit for "skipped: …".
///
/// Probes with a throwaway namespace that is deleted before returning.
pub(crate) fn check_root() -> Result<(), String> {
    if !is_root() {
        return Err("needs root (network namespaces and tc)".into());
    }
    for tool in ["ip", "tc"] {
        match Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(s) if s.success() => {}
            _ => return Err(format!("needs iproute2: `{tool}` not found or not working")),
        }
    }
    let ns = format!(
        "{PREFIX}{}-{}-check",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let probe = || -> Result<()> {
        run(Command::new("ip").args(["netns", "add", &ns]))?;
        run(Command::new("ip").args([
            "-n", &ns, "link", "add", "sv-a", "type", "veth", "peer", "name", "sv-b",
        ]))?;
        shape(&ns, "sv-a", &WIRED)
    };
    let mut result = probe();
    // Without netem, delayed links need the delay line and so a TUN interface.
    if result.is_ok() && !netem_available() {
        result = inside::in_netns(&ns, || {
            delay_line::tun::Tun::create("sv-probe", true).map(drop)
        });
    }
    delete_netns(&ns);
    result.map_err(|e| format!("cannot create a shaped link between namespaces: {e:#}"))
}

/// Whether the kernel has `netem`, i.e. whether [`NetPair`] delays links with it rather than
/// with the delay line. Probed once per process in a throwaway namespace; `false` also when not
/// root.
pub(crate) fn netem_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(probe_netem)
}

fn probe_netem() -> bool {
    if !is_root() {
        return false;
    }
    let ns = format!(
        "{PREFIX}{}-{}-netem",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let probe = || -> Result<()> {
        run(Command::new("ip").args(["netns", "add", &ns]))?;
        run(Command::new("ip").args([
            "-n", &ns, "link", "add", "sv-a", "type", "veth", "peer", "name", "sv-b",
        ]))?;
        shape(&ns, "sv-a", &WIRED)?;
        add_delay(&ns, "sv-a", 1.0, 0.0)
    };
    let ok = probe().is_ok();
    delete_netns(&ns);
    ok
}

/// Effective uid 0, read from `/proc/self/status` (no libc needed).
pub(crate) fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Which cgroup interface carries the CPU controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CgroupVersion {
    /// Unified hierarchy: `cpu.max`.
    V2,
    /// Legacy `cpu` hierarchy (hybrid hosts): `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    V1,
}

/// CFS period we use: 100 ms, the kernel's default. A shorter period would spread the throttling
/// more evenly but costs scheduler overhead; at 100 ms a 20 % quota runs 20 ms then waits 80 ms,
/// which for transfers lasting seconds averages out like a uniformly slower CPU.
const PERIOD_US: u64 = 100_000;

/// A cgroup with a CPU bandwidth quota, for the thesis's "power saving" and slow clients.
///
/// The thesis's power saving made the client about 20 % slower; a quota of 0.8 CPU reproduces
/// that for a single-threaded sender. Note what a quota is and is not: it caps the CPU *time* the
/// group may use per period (throttling), it does not lower the clock, so short bursts still run
/// at full speed and only sustained work is slowed. For transfers of megabytes this is the same
/// average slow-down.
///
/// The quota counts every thread of every process in the group, summed over all cores.
#[derive(Debug)]
pub(crate) struct CpuLimit {
    /// The cgroup directory, e.g. `/sys/fs/cgroup/sieve-lab-<pid>-<seq>-<tag>` (v2) or
    /// `/sys/fs/cgroup/cpu/sieve-lab-…` (v1).
    pub(crate) dir: PathBuf,
    /// The v1 `cpuset` group that pins the processes to some CPUs, when pinned on a v1 host (on
    /// v2 the pinning is in `dir` itself).
    cpuset_dir: Option<PathBuf>,
}

impl CpuLimit {
    /// Create the cgroup and set its quota to `fraction_of_one_cpu` of one core (0.8 = 80 %, i.e.
    /// "80000 100000"). Fractions above 1 allow several cores. The kernel's smallest quota is 1 ms
    /// per period, so fractions below 0.01 are raised to that.
    pub(crate) fn create(tag: &str, fraction_of_one_cpu: f64) -> Result<CpuLimit> {
        if !(fraction_of_one_cpu.is_finite() && fraction_of_one_cpu > 0.0) {
            bail!("CPU fraction must be positive, got {fraction_of_one_cpu}");
        }
        let (root, version) = find_cpu_cgroup().map_err(|e| anyhow!(e))?;
        if version == CgroupVersion::V2 {
            enable_cpu_controller(&root)?;
        }
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{}-{seq}-{}", std::process::id(), sanitize(tag));
        let dir = root.join(name);
        fs::create_dir(&dir).with_context(|| format!("cannot create cgroup {}", dir.display()))?;
        // From here on, an error drops `limit`, which removes the directory again.
        let limit = CpuLimit {
            dir,
            cpuset_dir: None,
        };
        let quota = ((fraction_of_one_cpu * PERIOD_US as f64).round() as u64).max(1000);
        match version {
            CgroupVersion::V2 => {
                write_file(&limit.dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?
            }
            CgroupVersion::V1 => {
                write_file(&limit.dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write_file(&limit.dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            }
        }
        Ok(limit)
    }

    /// [`CpuLimit::create`], and the processes confined to the CPUs `cpus` (a cpuset list such as
    /// "1"), so that a fraction of one core is a fraction of *that* core: cgroup v2's
    /// `cpuset.cpus` in the same group, or a v1 `cpuset` group beside the `cpu` one.
    pub(crate) fn create_pinned(
        tag: &str,
        fraction_of_one_cpu: f64,
        cpus: &str,
    ) -> Result<CpuLimit> {
        let mut limit = CpuLimit::create(tag, fraction_of_one_cpu)?;
        let (_, version) = find_cpu_cgroup().map_err(|e| anyhow!(e))?;
        match version {
            CgroupVersion::V2 => {
                let root = limit.dir.parent().context("a cgroup has a parent")?;
                let control = root.join("cgroup.subtree_control");
                let current = fs::read_to_string(&control).unwrap_or_default();
                if !current.split_whitespace().any(|c| c == "cpuset") {
                    write_file(&control, "+cpuset")?;
                }
                write_file(&limit.dir.join("cpuset.cpus"), cpus)?;
            }
            CgroupVersion::V1 => {
                let root = find_v1("cpuset").context("no cgroup v1 hierarchy offers cpuset")?;
                let name = limit.dir.file_name().context("a cgroup has a name")?;
                let dir = root.join(name);
                fs::create_dir(&dir)
                    .with_context(|| format!("cannot create cgroup {}", dir.display()))?;
                limit.cpuset_dir = Some(dir.clone());
                // A v1 cpuset takes no process before it has CPUs and memory nodes.
                let mems = fs::read_to_string(root.join("cpuset.mems"))
                    .context("cannot read the root cpuset's memory nodes")?;
                write_file(&dir.join("cpuset.mems"), mems.trim())?;
                write_file(&dir.join("cpuset.cpus"), cpus)?;
            }
        }
        Ok(limit)
    }

    /// Rewrite `cmd` so that it joins the group before it runs: `sh -c 'echo $$ > …/cgroup.procs
    /// && exec "$@"' … prog args…`. The shell joins, then execs the program, so the program and
    /// all its children are limited from their first instruction.
    ///
    /// Environment changes and working directory are carried over; stdio settings are not (std
    /// cannot read them back), so configure stdio on the returned command. When combining with
    /// [`NetPair::exec`], wrap for the namespace first (see there).
    pub(crate) fn wrap(&self, cmd: Command) -> Command {
        let procs = self.procs_file();
        if let Some(cpuset) = &self.cpuset_dir {
            let pinned = cpuset.join("cgroup.procs");
            return prefix_command(
                "sh",
                [
                    OsStr::new("-c"),
                    OsStr::new("echo $$ > \"$0\" && echo $$ > \"$1\" && shift && exec \"$@\""),
                    procs.as_os_str(),
                    pinned.as_os_str(),
                ],
                &cmd,
            );
        }
        prefix_command(
            "sh",
            [
                OsStr::new("-c"),
                OsStr::new("echo $$ > \"$0\" && exec \"$@\""),
                procs.as_os_str(),
            ],
            &cmd,
        )
    }

    fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for CpuLimit {
    /// Remove the directory. The kernel refuses while processes are still in the group, so retry
    /// for a short while (a process just killed takes a moment to leave); processes are never
    /// moved out or killed here.
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        for dir in std::iter::once(&self.dir).chain(self.cpuset_dir.as_ref()) {
            loop {
                match fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e) => {
                        if Instant::now() >= deadline {
                            tracing::warn!("cannot remove cgroup {}: {e}", dir.display());
                            break;
                        }
                        thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        }
    }
}

/// Whether [`CpuLimit::create`] can work: root, a cgroup hierarchy with the CPU controller, and a
/// quota that can be written. Probes with a throwaway group.
pub(crate) fn check_cgroup() -> Result<(), String> {
    if !is_root() {
        return Err("needs root (cgroup CPU quota)".into());
    }
    find_cpu_cgroup()?;
    CpuLimit::create("check", 0.5)
        .map(drop)
        .map_err(|e| format!("cannot create a cgroup with a CPU quota: {e:#}"))
}

/// Whether [`CpuLimit::create_pinned`] can work; probes with a throwaway group on CPU 0.
pub(crate) fn check_cpuset() -> Result<(), String> {
    check_cgroup()?;
    CpuLimit::create_pinned("check", 0.5, "0")
        .map(drop)
        .map_err(|e| format!("cannot pin a cgroup to one CPU: {e:#}"))
}

/// The mount point of the cgroup v1 hierarchy with `controller`.
fn find_v1(controller: &str) -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == controller))
            .then(|| PathBuf::from(f[1]))
    })
}

/// Find where the CPU controller is mounted: a cgroup2 mount whose root offers `cpu`, else a
/// cgroup v1 mount with the `cpu` option. Hybrid hosts (v2 mounted at `/sys/fs/cgroup/unified`
/// without controllers, `cpu` on v1) are common in containers and VMs, this one included.
fn find_cpu_cgroup() -> Result<(PathBuf, CgroupVersion), String> {
    let mounts = fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("cannot read /proc/self/mounts: {e}"))?;
    let mut v1 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let (point, fstype, opts) = (Path::new(f[1]), f[2], f[3]);
        if fstype == "cgroup2" {
            let controllers =
                fs::read_to_string(point.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "cpu") {
                return Ok((point.to_path_buf(), CgroupVersion::V2));
            }
        } else if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") && v1.is_none() {
            v1 = Some(point.to_path_buf());
        }
    }
    v1.map(|p| (p, CgroupVersion::V1))
        .ok_or_else(|| "no cgroup hierarchy offers the cpu controller".to_string())
}

/// In v2 a child only gets `cpu.max` if its parent delegates the controller. Enabling it at the
/// root is harmless and is left enabled (other groups may rely on it by then).
fn enable_cpu_controller(root: &Path) -> Result<()> {
    let control = root.join("cgroup.subtree_control");
    let current = fs::read_to_string(&control).unwrap_or_default();
    if current.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    write_file(&control, "+cpu")
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).with_context(|| format!("cannot write {text:?} to {}", path.display()))
}

/// Remove namespaces and cgroups left by lab processes that were killed before their `Drop` ran:
/// those whose name (`sieve-lab-<pid>-…`) carries a pid that is no longer running. Returns what
/// was removed. Objects of live processes (including this one) are never touched.
pub(crate) fn cleanup_stale() -> Vec<String> {
    let mut removed = Vec::new();
    if let Ok(out) = Command::new("ip")
        .args(["netns", "list"])
        .stderr(Stdio::null())
        .output()
    {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            if owner_is_gone(name) {
                delete_netns(name);
                removed.push(format!("netns {name}"));
            }
        }
    }
    let roots = find_cpu_cgroup()
        .ok()
        .map(|(root, _)| root)
        .into_iter()
        .chain(find_v1("cpuset"));
    for root in roots {
        if let Ok(entries) = fs::read_dir(&root) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if owner_is_gone(&name) && fs::remove_dir(entry.path()).is_ok() {
                    removed.push(format!("cgroup {}", entry.path().display()));
                }
            }
        }
    }
    removed
}

/// True for our names whose creating process has exited.
fn owner_is_gone(name: &str) -> bool {
    owner_pid(name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Keep names short and safe for file names, `ip` and cgroupfs.
fn sanitize(tag: &str) -> String {
    let s: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(16)
        .collect();
    if s.is_empty() {
        "x".into()
    } else {
        s
    }
}

/// Build `program pre_args… <cmd's program> <cmd's args…>` with `cmd`'s environment changes and
/// working directory. Used to run a command under `ip netns exec` or `sh` (cgroup).
pub(crate) fn prefix_command<I, S>(
    program: impl AsRef<OsStr>,
    pre_args: I,
    cmd: &Command,
) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut new = Command::new(program);
    new.args(pre_args)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => new.env(key, v),
            None => new.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        new.current_dir(dir);
    }
    new
}

/// Run a set-up command; its stderr becomes the error.
pub(crate) fn run(cmd: &mut Command) -> Result<Output> {
    let line = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {line}"))?;
    if !out.status.success() {
        bail!(
            "{line} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn prefix_keeps_program_args_env_and_dir() {
        let mut cmd = Command::new("socat");
        cmd.args(["-u", "A", "B"])
            .env("X", "1")
            .env_remove("Y")
            .current_dir("/tmp");
        let new = prefix_command("ip", ["netns", "exec", "ns"], &cmd);
        assert_eq!(new.get_program(), "ip");
        let args: Vec<_> = new.get_args().collect();
        assert_eq!(args, ["netns", "exec", "ns", "socat", "-u", "A", "B"]);
        let envs: Vec<_> = new.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("X"), Some(OsStr::new("1")))));
        assert!(envs.contains(&(OsStr::new("Y"), None)));
        assert_eq!(new.get_current_dir(), Some(Path::new("/tmp")));
    }

    #[test]
    fn names_carry_the_pid_and_stay_safe() {
        assert_eq!(sanitize("wired link/1"), "wiredlink1");
        assert_eq!(sanitize("--"), "x");
        assert_eq!(owner_pid("sieve-lab-1234-0-wired-c"), Some(1234));
        assert_eq!(owner_pid("other-1234"), None);
        assert!(!owner_is_gone(&format!(
            "{PREFIX}{}-0-x-c",
            std::process::id()
        )));
    }
}

#[cfg(test)]
mod tests;
