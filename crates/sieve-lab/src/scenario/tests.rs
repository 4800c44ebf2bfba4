//! The emulated environments and the peers, exercised for real: namespaces with shaped links, a
//! cgroup CPU quota, and today's tools moving 20 MB.
//!
//! Every test that needs root or a tool checks first and returns early with a printed
//! "skipped: …" instead of failing, so the suite passes (and says what it skipped) on an
//! unprivileged machine. Tests that measure time take a common lock: run side by side on a
//! two-core machine they would disturb each other's figures.

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{check_cgroup, check_root, CpuLimit, DelayBy, LinkSpec, NetPair, Side, WIFI, WIRED};
use crate::peers::{Iperf3, Peer, PeerCtx, PeerRun, Scp, ScpCipher, SocatTcp, SocatTls};
use rand::RngCore;

static TIMING: Mutex<()> = Mutex::new(());

fn timing() -> MutexGuard<'static, ()> {
    TIMING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file of `mb` MB of random bytes (random so nothing along the way can compress it).
fn data_file(dir: &Path, mb: usize) -> PathBuf {
    let path = dir.join(format!("data-{mb}MB"));
    let mut f = fs::File::create(&path).expect("create data file");
    let mut buf = vec![0u8; 1 << 20];
    let mut rng = rand::thread_rng();
    for _ in 0..mb {
        rng.fill_bytes(&mut buf);
        f.write_all(&buf).expect("write data file");
    }
    path
}

fn netns_list() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mbit(run: &PeerRun) -> f64 {
    run.bits_per_second() / 1e6
}

fn report(what: &str, run: &PeerRun) {
    println!(
        "{what}: {} bytes in {:.1} ms = {:.1} Mbit/s, sender CPU {:.1} ms",
        run.bytes,
        run.wall.as_secs_f64() * 1e3,
        mbit(run),
        run.sender_cpu.as_secs_f64() * 1e3,
    );
}

/// Move 20 MB from client to server with socat and check the goodput is the link's rate ±30 %.
fn check_link_rate(link: &LinkSpec) {
    if let Err(why) = check_root() {
        println!("skipped: {why}");
        return;
    }
    if let Err(why) = SocatTcp::available() {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = data_file(dir.path(), 20);
    let names;
    {
        let net = NetPair::create("test", link).expect("create the link");
        names = [
            Some(net.client_ns.clone()),
            Some(net.server_ns.clone()),
            net.router_ns.clone(),
        ];
        let listed = netns_list();
        assert!(names.iter().flatten().all(|n| listed.contains(n.as_str())));
        // Shaped in the network, where a real path's bottleneck is: the router's two
        // interfaces hold the token buckets, the ends none (see the module's documentation).
        if let Some(router) = &net.router_ns {
            let qdiscs = |ns: &str| {
                let out = Command::new("ip")
                    .args(["netns", "exec", ns, "tc", "qdisc", "show"])
                    .output()
                    .expect("tc");
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            assert_eq!(
                qdiscs(router).matches("tbf").count(),
                2,
                "{}",
                qdiscs(router)
            );
            for end in [&net.client_ns, &net.server_ns] {
                assert!(!qdiscs(end).contains("tbf"), "{end}: {}", qdiscs(end));
            }
        }
        println!(
            "{}: {} -> {}, delay by {:?}",
            link.name, net.client_ip, net.server_ip, net.delay_by
        );
        let ctx = PeerCtx {
            net: Some(&net),
            ..PeerCtx::default()
        };
        let run = SocatTcp.transfer_with(&file, &ctx).expect("transfer");
        report(&format!("{} client->server", link.name), &run);
        let rate = mbit(&run);
        assert!(
            (rate - link.rate_mbit).abs() <= 0.3 * link.rate_mbit,
            "{rate:.1} Mbit/s is not within 30 % of {} Mbit/s",
            link.rate_mbit
        );

        // The other direction is shaped too: receiver in the client namespace, sender in the
        // server namespace.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let mut rx = net
            .wrap(Side::Client, {
                let mut c = Command::new("socat");
                c.args([
                    "-u",
                    &format!("TCP-LISTEN:{port},reuseaddr"),
                    "OPEN:/dev/null,wronly",
                ]);
                c
            })
            .stderr(Stdio::null())
            .spawn()
            .expect("start receiver");
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        let status = net
            .wrap(Side::Server, {
                let mut c = Command::new("socat");
                c.arg("-u")
                    .arg(format!("OPEN:{}", file.display()))
                    .arg(format!("TCP:{}:{port}", net.client_ip));
                c
            })
            .status()
            .expect("run sender");
        let rx_status = rx.wait().expect("receiver");
        let secs = start.elapsed().as_secs_f64();
        assert!(status.success() && rx_status.success());
        let back = 20.0 * 1024.0 * 1024.0 * 8.0 / secs / 1e6;
        println!("{} server->client: {back:.1} Mbit/s", link.name);
        assert!(
            (back - link.rate_mbit).abs() <= 0.3 * link.rate_mbit,
            "reverse direction: {back:.1} Mbit/s is not within 30 % of {} Mbit/s",
            link.rate_mbit
        );
    }
    let listed = netns_list();
    for n in names.iter().flatten() {
        assert!(!listed.contains(n.as_str()), "{n} still exists after drop");
    }
}

#[test]
fn wired_link_runs_at_100_mbit_and_is_removed() {
    check_link_rate(&WIRED);
}

#[test]
fn wifi_link_runs_at_54_mbit_and_is_removed() {
    check_link_rate(&WIFI);
}

#[test]
fn namespaces_are_removed_even_on_panic() {
    if let Err(why) = check_root() {
        println!("skipped: {why}");
        return;
    }
    let names = Mutex::new(Vec::new());
    let sleeper = Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let net = NetPair::create("panic", &WIRED).expect("create the link");
        // A process left running inside must not keep anything alive either.
        let child = net
            .command(Side::Server, "sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        *sleeper.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
        names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend([net.client_ns.clone(), net.server_ns.clone()]);
        panic!("deliberate panic while a NetPair is alive");
    });
    assert!(result.is_err());
    let listed = netns_list();
    let names = names.into_inner().unwrap_or_else(|e| e.into_inner());
    assert_eq!(names.len(), 2);
    for n in &names {
        assert!(!listed.contains(n.as_str()), "{n} survived a panic");
    }
    let mut child = sleeper
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .expect("sleeper started");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the process inside the namespace survived its drop");
            }
        }
    };
    assert!(!status.success(), "killed, not finished: {status}");
}

/// Fixed CPU work in one pipeline: hash 150 MB of zeros.
fn busy_work() -> Command {
    let mut c = Command::new("sh");
    c.args([
        "-c",
        "dd if=/dev/zero bs=1M count=150 status=none | sha256sum >/dev/null",
    ]);
    c
}

/// Wall time and CPU time (of the whole process tree) of one run, in seconds.
fn timed(mut cmd: Command) -> (f64, f64) {
    let start = Instant::now();
    let mut child = crate::child::Watched::spawn(cmd.stdin(Stdio::null())).expect("start");
    let exit = child
        .wait_until(start + Duration::from_secs(120))
        .expect("busy work ends");
    assert!(exit.status.success());
    ((exit.at - start).as_secs_f64(), exit.cpu.as_secs_f64())
}

/// A quota of 0.2 CPU lets the group run at most about a fifth of the wall time. Measured as
/// CPU over wall time of the limited run itself, which other load on the machine can only
/// lower, so the test holds on a busy machine too.
#[test]
fn cpu_limit_slows_a_busy_loop() {
    if let Err(why) = check_cgroup() {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir;
    {
        let limit = CpuLimit::create("test", 0.2).expect("create cgroup");
        dir = limit.dir.clone();
        assert!(dir.is_dir());
        let (free_wall, free_cpu) = timed(busy_work());
        let (wall, cpu) = timed(limit.wrap(busy_work()));
        println!(
            "busy work: {free_cpu:.3} s CPU in {free_wall:.3} s unlimited, \
             {cpu:.3} s CPU in {wall:.3} s at 0.2 CPU"
        );
        assert!(cpu > 0.02, "the busy work did no work: {cpu} s");
        assert!(
            cpu / wall <= 0.3,
            "ran {:.2} of the time at 0.2 CPU",
            cpu / wall
        );
    }
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn cpu_limit_composes_with_a_namespace() {
    if let Err(why) = check_root().and_then(|()| check_cgroup()) {
        println!("skipped: {why}");
        return;
    }
    let net = NetPair::create("compose", &WIRED).expect("create the link");
    let limit = CpuLimit::create("compose", 0.5).expect("create cgroup");
    // Namespace first, cgroup last (see NetPair::exec).
    let cmd = net.wrap(Side::Client, {
        let mut c = Command::new("sh");
        c.args(["-c", "cat /proc/self/cgroup; ip -brief addr show sv-client"]);
        c
    });
    let out = limit.wrap(cmd).output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let group = limit
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(text.contains(&group), "not in {group}: {text}");
    assert!(
        text.contains(&net.client_ip.to_string()),
        "not in the namespace: {text}"
    );
}

/// Run one peer on loopback with 20 MB, twice (the second run has warm caches and, for scp, a
/// running sshd), and print what it measured.
fn loopback_peer(
    available: Result<(), String>,
    make: impl FnOnce() -> anyhow::Result<Box<dyn Peer>>,
) {
    if let Err(why) = available {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = data_file(dir.path(), 20);
    let peer = make().expect("set up peer");
    for i in 0..2 {
        let run = peer.transfer(&file).expect("transfer");
        report(&format!("{} loopback #{i}", peer.name()), &run);
        assert_eq!(run.bytes, 20 << 20);
        assert!(run.wall > Duration::ZERO);
        assert!(
            run.sender_cpu > Duration::ZERO,
            "wait4 reports the sender's CPU"
        );
    }
}

#[test]
fn socat_plain_on_loopback() {
    loopback_peer(SocatTcp::available(), || Ok(Box::new(SocatTcp)));
}

#[test]
fn socat_tls_on_loopback_with_generated_certificate() {
    loopback_peer(SocatTls::available(), || Ok(Box::new(SocatTls::new(None)?)));
}

#[test]
fn scp_aes128_gcm_on_loopback() {
    loopback_peer(Scp::available(), || {
        Ok(Box::new(Scp::new(ScpCipher::Aes128Gcm)?))
    });
}

#[test]
fn scp_chacha20_on_loopback() {
    loopback_peer(Scp::available(), || {
        Ok(Box::new(Scp::new(ScpCipher::Chacha20Poly1305)?))
    });
}

#[test]
fn iperf3_on_loopback() {
    if let Err(why) = Iperf3::available() {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = data_file(dir.path(), 20);
    let run = Iperf3.transfer(&file).expect("transfer");
    report("iperf3 loopback", &run);
    let reported = run.reported_bits_per_second.expect("iperf3 reports a rate");
    println!("iperf3 reported {:.2} Gbit/s", reported / 1e9);
    assert!(reported > 1e8, "loopback below 100 Mbit/s?");
}

/// Every peer over the emulated wired link: receiver (socat, sshd, iperf3 server) in the server
/// namespace, sender in the client namespace, the sender also under a CPU limit. The rate must
/// be capped by the link, which shows the traffic really crossed it.
#[test]
fn peers_over_the_wired_link_with_a_slow_sender() {
    if let Err(why) = check_root().and_then(|()| check_cgroup()) {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = data_file(dir.path(), 5);
    let net = NetPair::create("peers", &WIRED).expect("create the link");
    let limit = CpuLimit::create("peers", 0.5).expect("create cgroup");
    let ctx = PeerCtx {
        net: Some(&net),
        sender_cpu: Some(&limit),
        timeout: Some(Duration::from_secs(60)),
    };
    let mut peers: Vec<Box<dyn Peer>> = Vec::new();
    if SocatTcp::available().is_ok() {
        peers.push(Box::new(SocatTcp));
    }
    if SocatTls::available().is_ok() {
        peers.push(Box::new(SocatTls::new(None).expect("certificate")));
    }
    if Scp::available().is_ok() {
        peers.push(Box::new(Scp::new(ScpCipher::Aes128Gcm).expect("scp")));
    }
    if Iperf3::available().is_ok() {
        peers.push(Box::new(Iperf3));
    }
    if peers.is_empty() {
        println!("skipped: no peer tools installed");
        return;
    }
    for peer in &peers {
        let run = peer.transfer_with(&file, &ctx).expect("transfer");
        report(
            &format!("{} over wired, sender at 0.5 CPU", peer.name()),
            &run,
        );
        let rate = mbit(&run);
        assert!(rate <= WIRED.rate_mbit, "{rate:.1} Mbit/s exceeds the link");
    }
}

#[test]
fn all_lists_every_peer_even_when_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An empty cert dir: socat+openssl must still be listed, failing with the reason.
    let peers = crate::peers::all(dir.path());
    let names: Vec<String> = peers.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "socat",
            "socat+openssl",
            "scp aes128-gcm",
            "scp chacha20-poly1305",
            "iperf3"
        ]
    );
    let tls = &peers[1];
    let err = tls
        .transfer(&dir.path().join("nothing"))
        .expect_err("no certificates");
    assert!(format!("{err:#}").contains("ca.pem") || format!("{err:#}").contains("socat"));
}

/// The lab passes the directory `sieve certs --dir D` wrote: a CA (`ca.pem`) and a server
/// certificate it signed for localhost (`server.pem`, `server.key`). Make the same layout with
/// openssl and check socat verifies the chain with it.
#[test]
fn socat_tls_with_a_ca_signed_certificate_directory() {
    if let Err(why) = SocatTls::available() {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(d)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-days", "2", "-subj", "/CN=test CA"],
            &["-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &["-subj", "/CN=receiver", "-keyout", "server.key"],
            &["-out", "server.csr"],
        ]
        .concat(),
    );
    fs::write(d.join("ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").expect("ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext",
        "-out",
        "server.pem",
    ]);
    let file = data_file(d, 2);
    let peer = SocatTls::new(Some(d)).expect("certificate directory");
    let run = peer
        .transfer(&file)
        .expect("transfer with a CA-signed certificate");
    report("socat+openssl with a CA directory", &run);
}

#[test]
fn cleanup_stale_removes_only_objects_of_dead_processes() {
    if let Err(why) = check_root() {
        println!("skipped: {why}");
        return;
    }
    // A pid that has just exited (and been reaped) stands for a lab killed before its Drop ran.
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let dead_pid = dead.id();
    dead.wait().expect("wait true");
    let stale = format!("sieve-lab-{dead_pid}-0-stale-c");
    let ours = format!("sieve-lab-{}-999-live-c", std::process::id());
    for ns in [&stale, &ours] {
        let ok = Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .expect("ip netns add");
        assert!(ok.success());
    }
    let removed = super::cleanup_stale();
    let listed = netns_list();
    let _ = Command::new("ip").args(["netns", "del", &ours]).status();
    let _ = Command::new("ip").args(["netns", "del", &stale]).status();
    assert!(removed.iter().any(|r| r.contains(&stale)), "{removed:?}");
    assert!(!listed.contains(&stale));
    assert!(
        listed.contains(&ours),
        "a live process's namespace was removed"
    );
}

/// The delay line holds every packet for its delay: round trips through a 20 ms line never come
/// back early, and the quickest comes back within 5 % of the setting (later ones may wait for
/// the CPU on a busy machine, which is the machine and not the line). Runs whether or not the
/// kernel has netem.
#[test]
fn round_trips_through_a_20_ms_delay_line() {
    if let Err(why) = check_root() {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let link = LinkSpec::with_rtt("rtt20", 1000.0, 20.0);
    let net = NetPair::create_by("rtt", &link, DelayBy::Line).expect("create the delay line");
    assert_eq!(net.delay_by, DelayBy::Line);
    let rtts = super::rtt::round_trips(&net, 30).expect("probes answered");
    let ms: Vec<f64> = rtts.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    let mut sorted = ms.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "20 ms delay line: RTT min {min:.3} ms, median {:.3} ms, max {:.3} ms over {} probes",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
        ms.len()
    );
    assert!(
        ms.iter().all(|&t| t >= 20.0),
        "a probe came back early: {ms:?}"
    );
    assert!(min <= 21.0, "the quickest round trip took {min:.3} ms");
    let counts = net.line_counts().expect("a delay line");
    assert!(
        counts[0].passed >= 31 && counts[1].passed >= 31,
        "{counts:?}"
    );
    assert_eq!(counts[0].lost + counts[1].lost, 0);
}

/// A lossy line loses packets at its rate in each direction, and the data that gets through
/// still arrives whole (TCP recovers): 5 MB through a line losing 2 % of packets.
#[test]
fn a_lossy_delay_line_loses_packets_and_tcp_recovers() {
    if let Err(why) = check_root() {
        println!("skipped: {why}");
        return;
    }
    if let Err(why) = SocatTcp::available() {
        println!("skipped: {why}");
        return;
    }
    let _t = timing();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = data_file(dir.path(), 5);
    let link = LinkSpec {
        loss: 0.02,
        ..LinkSpec::with_rtt("lossy", 200.0, 2.0)
    };
    let net = NetPair::create_by("lossy", &link, DelayBy::Line).expect("create the delay line");
    let ctx = PeerCtx {
        net: Some(&net),
        ..PeerCtx::default()
    };
    let run = SocatTcp.transfer_with(&file, &ctx).expect("transfer");
    report("lossy line", &run);
    assert_eq!(run.bytes, 5 << 20);
    let c = net.line_counts().expect("a delay line")[0];
    let share = c.lost as f64 / (c.lost + c.passed) as f64;
    println!("client->server: {c:?}, {:.2} % lost", share * 100.0);
    assert!((0.005..0.05).contains(&share), "{share}");
}
