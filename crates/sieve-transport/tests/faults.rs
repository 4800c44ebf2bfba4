//! Fault injection: a proxy in front of the plain port (advertised to senders with
//! `plain_advertise`) or in front of the TLS port (the sender's `to`) delays, throttles, resets,
//! stalls, truncates, duplicates or corrupts one direction of one connection. For every fault:
//! the transfer completes byte-identical, or `send` fails / reports the document as failed; the
//! sender's "ok" is true only for files that are really there and identical; no temporary file and
//! no corrupt file remains; and the receiver serves the next, honest session.

mod common;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::proxy::{Fault, FaultProxy, Plan};
use common::*;
use sieve_core::message::Mode;
use sieve_transport::sender::SendConfig;
use tempfile::TempDir;

/// Short timeouts, so that stalls resolve within seconds.
const IDLE: Duration = Duration::from_secs(2);
/// Longest any one faulty session may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    Plain,
    Tls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Up,
    Down,
}

struct Rig {
    rx: TestReceiver,
    proxy: FaultProxy,
    port: Port,
    src: TempDir,
    /// Bytes of each direction of one honest session's proxied connection.
    up_len: u64,
    down_len: u64,
    runs: u32,
}

/// The documents of every faulty session: mixed sizes, an empty one, a tiny one.
fn documents() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("a.txt", marked_doc(1, 120_000, 12).1),
        ("b.txt", b"a <$S>b<$E> c".to_vec()),
        ("c.txt", marked_doc(2, 40_000, 3).1),
        ("d.bin", Vec::new()),
        ("e.txt", marked_doc(3, 200_000, 30).1),
    ]
}

impl Rig {
    async fn new(port: Port) -> Rig {
        let proxy = FaultProxy::bind().await;
        let advertise = proxy.addr.to_string();
        let rx = TestReceiver::start_with(fast_tempdir(), |c| {
            c.limits.idle_timeout = IDLE;
            c.limits.handshake_timeout = IDLE;
            if port == Port::Plain {
                c.plain_advertise = Some(advertise);
            }
        })
        .await;
        proxy.set_target(match port {
            Port::Plain => rx.plain,
            Port::Tls => rx.addr,
        });
        let mut rig = Rig {
            rx,
            proxy,
            port,
            src: tempfile::tempdir().unwrap(),
            up_len: 0,
            down_len: 0,
            runs: 0,
        };
        // Calibrate: how many bytes each direction of the proxied connection carries.
        let (up0, down0) = rig.bytes();
        rig.honest().await;
        let (up1, down1) = rig.bytes();
        rig.up_len = up1 - up0;
        rig.down_len = down1 - down0;
        assert!(rig.up_len > 100_000 || port == Port::Tls && rig.up_len > 50_000);
        assert!(rig.down_len > 0);
        rig
    }

    fn bytes(&self) -> (u64, u64) {
        (
            self.proxy.stats.up_bytes.load(Ordering::Relaxed),
            self.proxy.stats.down_bytes.load(Ordering::Relaxed),
        )
    }

    fn cfg(&self) -> SendConfig {
        let mut cfg = self.rx.simple(Mode::Sieve);
        cfg.idle_timeout = IDLE;
        if self.port == Port::Tls {
            cfg.to = self.proxy.addr.to_string();
        }
        cfg
    }

    fn files(&mut self) -> (Vec<PathBuf>, Vec<(String, Vec<u8>)>) {
        self.runs += 1;
        let mut paths = Vec::new();
        let mut docs = Vec::new();
        for (name, bytes) in documents() {
            let name = format!("run{}-{name}", self.runs);
            paths.push(write(self.src.path(), &name, &bytes));
            docs.push((name, bytes));
        }
        (paths, docs)
    }

    /// A session through the proxy with no fault: everything arrives.
    async fn honest(&mut self) {
        self.proxy.set_plan(Plan::PASS);
        let (paths, docs) = self.files();
        self.rx.send_ok(&self.cfg(), &paths).await;
        for (name, bytes) in &docs {
            self.rx.assert_received(name, bytes);
        }
    }

    /// One session with `fault` on `dir` of the next proxied connection; check every invariant.
    /// Returns whether the session completed with every document delivered.
    async fn inject(&mut self, dir: Dir, fault: Fault, must_complete: bool) -> bool {
        let fired0 = self.proxy.fired();
        let mut plan = match dir {
            Dir::Up => Plan::up(fault),
            Dir::Down => Plan::down(fault),
        };
        plan.conn = Some(self.proxy.connections());
        self.proxy.set_plan(plan);
        let (paths, docs) = self.files();
        let what = format!("{:?} port, {dir:?}, {fault:?}", self.port);
        let t = Instant::now();
        let result = tokio::time::timeout(HANG, send(&self.cfg(), &paths))
            .await
            .unwrap_or_else(|_| panic!("{what}: the sender hung"));
        let fired = self.proxy.fired() - fired0;
        assert!(fired > 0, "{what}: the fault never took effect");
        self.rx.sessions_settle().await;
        self.rx.assert_no_partials_soon().await;
        let complete = match &result {
            Ok(r) => {
                assert_eq!(r.docs, docs.len(), "{what}");
                assert_eq!(r.documents.len(), docs.len(), "{what}");
                assert_eq!(r.docs_ok + r.failures.len(), docs.len(), "{what}");
                for (d, (name, bytes)) in r.documents.iter().zip(&docs) {
                    assert_eq!(&d.name, name, "{what}");
                    if d.ok {
                        // The sender's "ok" must be the truth.
                        self.rx.assert_received(name, bytes);
                    } else {
                        let err = d.error.as_deref().unwrap_or_default();
                        assert!(!err.is_empty(), "{what}: {name} failed without a reason");
                        assert!(
                            !self.rx.out.join(name).exists(),
                            "{what}: failed document {name} exists under its final name"
                        );
                    }
                }
                r.docs_ok == docs.len()
            }
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(!msg.is_empty(), "{what}");
                // Whatever the receiver acknowledged before the failure must be whole; nothing
                // else may exist under a final name.
                for (name, bytes) in &docs {
                    if self.rx.out.join(name).exists() {
                        self.rx.assert_received(name, bytes);
                    }
                }
                false
            }
        };
        if must_complete {
            assert!(
                complete,
                "{what}: expected a complete transfer, got {result:?}"
            );
        }
        eprintln!(
            "{what}: {} in {:.2}s",
            match &result {
                Ok(r) => format!("{} of {} documents delivered", r.docs_ok, r.docs),
                Err(e) => format!("send failed: {e:#}"),
            },
            t.elapsed().as_secs_f64()
        );
        // The receiver keeps serving.
        self.honest().await;
        complete
    }

    /// Every fault, once, on `dir`.
    async fn all_faults(&mut self, dir: Dir) {
        let len = match dir {
            Dir::Up => self.up_len,
            Dir::Down => self.down_len,
        };
        let mid = len / 2;
        let rate = (len / 2).max(2_000); // about two seconds for the whole direction
        self.inject(dir, Fault::Delay(Duration::from_millis(20)), true)
            .await;
        self.inject(dir, Fault::Throttle(rate), true).await;
        self.inject(dir, Fault::Reset(mid), false).await;
        self.inject(dir, Fault::Stall(mid), false).await;
        self.inject(dir, Fault::Truncate(mid), false).await;
        self.inject(dir, Fault::Duplicate { at: mid, len: 100 }, false)
            .await;
        self.inject(dir, Fault::Corrupt(mid), false).await;
        // Early in the stream (inside the JOIN or the TLS handshake) and at its very first byte.
        self.inject(dir, Fault::Corrupt(len / 50), false).await;
        self.inject(dir, Fault::Reset(0), false).await;
        // Late: among the last pieces (up) or the acknowledgements (down).
        let late = (len - len / 10).min(len - 1);
        self.inject(dir, Fault::Reset(late), false).await;
        self.inject(dir, Fault::Stall(late), false).await;
        self.inject(dir, Fault::Truncate(late), false).await;
        self.inject(dir, Fault::Corrupt(late), false).await;
        let st = &self.rx.stats;
        eprintln!(
            "{:?} port, {dir:?}: sessions started {}, completed {}, failed {}; documents committed {}, failed {}",
            self.port,
            st.sessions_started.load(Ordering::Relaxed),
            st.sessions_completed.load(Ordering::Relaxed),
            st.sessions_failed.load(Ordering::Relaxed),
            st.docs_committed.load(Ordering::Relaxed),
            st.docs_failed.load(Ordering::Relaxed),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_port_client_to_receiver() {
    Rig::new(Port::Plain).await.all_faults(Dir::Up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_port_receiver_to_client() {
    Rig::new(Port::Plain).await.all_faults(Dir::Down).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_port_client_to_receiver() {
    Rig::new(Port::Tls).await.all_faults(Dir::Up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_port_receiver_to_client() {
    Rig::new(Port::Tls).await.all_faults(Dir::Down).await;
}

/// A corrupted plain byte inside a data payload fails exactly that document (integrity), the
/// session goes on and the other documents arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_plain_payload_fails_only_its_document() {
    let mut rig = Rig::new(Port::Plain).await;
    // Byte 200: past the JOIN and the first frame header, inside the first document's payload.
    rig.proxy.set_plan(Plan {
        conn: Some(rig.proxy.connections()),
        ..Plan::up(Fault::Corrupt(200))
    });
    let (paths, docs) = rig.files();
    let r = send(&rig.cfg(), &paths)
        .await
        .expect("the session completes");
    assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
    assert_eq!(r.failures[0].name, docs[0].0);
    assert!(r.failures[0]
        .error
        .as_deref()
        .unwrap()
        .contains("IntegrityError"));
    for (name, bytes) in &docs[1..] {
        rig.rx.assert_received(name, bytes);
    }
    assert!(!rig.rx.out.join(&docs[0].0).exists());
    rig.rx.assert_no_partials_soon().await;
}

/// Receiver and sender both wait for frames under a timeout (idle checks) and inside `select!`,
/// then read again: a frame that straddles a timeout (a slow or throttled link) must still be
/// read whole, not lose the bytes that came before the timeout.
#[tokio::test]
async fn frame_reader_survives_a_timeout_mid_frame() {
    use sieve_core::frame::Limits;
    use sieve_core::message::{Ack, AckStatus, Message};
    use sieve_transport::conn::FrameReader;
    use tokio::io::AsyncWriteExt;

    let ack = Ack {
        doc: 7,
        status: AckStatus::Ok,
        message: "fine".into(),
        receive_us: 1,
        integrate_us: 2,
        commit_us: 3,
    };
    let mut bytes = Vec::new();
    ack.encode(&mut bytes);
    ack.encode(&mut bytes);
    let (mut w, r) = tokio::io::duplex(1024);
    let mut reader = FrameReader::new(Box::new(r), Limits::default());
    // Cut inside the first header, then inside the first payload, then inside the second frame.
    let cuts = [0, 3, 9, bytes.len() / 2 + 4, bytes.len()];
    let mut got = Vec::new();
    for pair in cuts.windows(2) {
        w.write_all(&bytes[pair[0]..pair[1]]).await.unwrap();
        w.flush().await.unwrap();
        // Whatever has arrived is taken, then the wait times out.
        loop {
            match tokio::time::timeout(Duration::from_millis(20), reader.message()).await {
                Err(_) => break,
                Ok(m) => got.push(m.expect("a whole, valid frame")),
            }
        }
    }
    assert_eq!(got.len(), 2, "{got:?}");
    for m in got {
        match m {
            Message::Ack(a) => assert_eq!((a.doc, a.message.as_str()), (7, "fine")),
            other => panic!("{other:?}"),
        }
    }
}

/// A plain link slower than one frame per idle timeout: bytes stream through the proxy the whole
/// time, so neither side may call the session idle. The receiver counts every 16 KiB of a frame
/// as activity (not single bytes, which a trickling attacker could send forever), and the sender
/// counts the bytes its sockets' queues drain after its last write.
/// A stalled link is still caught (`plain_port_client_to_receiver` stalls one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_slower_than_one_frame_per_idle_timeout_still_delivers() {
    // 16 KiB of a frame (what counts as progress) take 250 ms at this rate: a margin of three
    // against the idle timeout on a busy machine.
    const IDLE: Duration = Duration::from_millis(800);
    const RATE: u64 = 64 * 1024;
    const CHUNK: u32 = 256 * 1024;
    // The premise: one frame takes several idle timeouts to cross the link.
    assert!(Duration::from_secs_f64(f64::from(CHUNK) / RATE as f64) > 4 * IDLE);

    let proxy = FaultProxy::bind_narrow().await;
    let advertise = proxy.addr.to_string();
    let rx = TestReceiver::start_with(fast_tempdir(), |c| {
        c.limits.idle_timeout = IDLE;
        c.plain_advertise = Some(advertise);
    })
    .await;
    proxy.set_target(rx.plain);
    proxy.set_plan(Plan::up(Fault::Throttle(RATE)));
    let src = tempfile::tempdir().unwrap();
    // No marks: every byte goes over the slow plain channel.
    let doc = filler(11, 300_000);
    let path = write(src.path(), "slow.txt", &doc);
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.idle_timeout = IDLE;
    cfg.chunk = sieve_transport::sender::Chunk::Bytes(CHUNK);
    let report = rx.send_ok(&cfg, &[path]).await;
    assert_eq!(report.plain_bytes, doc.len() as u64);
    rx.assert_received("slow.txt", &doc);
    assert!(proxy.stats.faults_fired.load(Ordering::Relaxed) >= 1);
    assert_eq!(rx.stats.sessions_failed.load(Ordering::Relaxed), 0);
}
