//! How a session's plain channels connect: their cleartext follows the JOIN without waiting for
//! its answer, so a refused JOIN must still fail the session and say why; and a receiver's plain
//! address remembered from a past session is connected to during channel 0's handshake, used
//! only if SESSION confirms it.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use sieve_core::message::Mode;
use sieve_core::report::SessionReport;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// A listener that is not the receiver: it accepts, counts the connections and the bytes they
/// send, and closes each after `keep` bytes (never, with `u64::MAX`).
struct Stranger {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl Stranger {
    async fn start(keep: u64) -> Stranger {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (connections, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (c, b) = (connections.clone(), bytes.clone());
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::Relaxed);
                let b = b.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let mut seen = 0u64;
                    while seen < keep {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                seen += n as u64;
                                b.fetch_add(n as u64, Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        Stranger {
            addr,
            connections,
            bytes,
        }
    }
}

/// A path memory that says the receiver at `to` had its plain port at `plain`.
fn remembered(dir: &std::path::Path, to: &str, plain: SocketAddr) -> std::path::PathBuf {
    let file = dir.join("paths.json");
    let ok = SessionReport {
        docs: 1,
        docs_ok: 1,
        ..SessionReport::default()
    };
    sieve_transport::paths::remember(&file, to, &ok, Some(plain));
    assert_eq!(
        sieve_transport::paths::recall_plain(&file, to),
        Some(plain),
        "the path memory was not written"
    );
    file
}

/// The plain channel is sent to another program, which reads the JOIN (and whatever follows
/// it) and closes: the session fails, naming the plain channel and what to check, and nothing
/// is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_channel_nobody_accepts_fails_the_session_clearly() {
    let stranger = Stranger::start(200).await;
    let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
        c.plain_advertise = Some(stranger.addr.to_string());
    })
    .await;
    let src = tempfile::tempdir().unwrap();
    let doc = marked_doc(7, 2 << 20, 40).1;
    let path = write(src.path(), "refused.txt", &doc);
    let e = send(&rx.simple(Mode::Sieve), &[path])
        .await
        .expect_err("a session whose plain channel nobody accepted must fail");
    let msg = format!("{e:#}");
    assert!(
        msg.contains("plain channel") && msg.contains("not accepted"),
        "the error must say which channel was not accepted: {msg}"
    );
    assert!(msg.contains("another program"), "{msg}");
    assert_eq!(stranger.connections.load(Ordering::Relaxed), 1);
    rx.sessions_settle().await;
    assert!(rx.out_names().is_empty(), "{:?}", rx.out_names());
}

/// Sent without waiting for JOIN_OK, the cleartext still arrives whole, over several plain
/// channels, and the report says no channel connected early (nothing was remembered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleartext_sent_behind_the_join_arrives_whole() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let doc = marked_doc(11, 3 << 20, 60).1;
    for m in [1, 3] {
        let name = format!("behind-{m}.txt");
        let path = write(src.path(), &name, &doc);
        let mut cfg = rx.simple(Mode::Sieve);
        cfg.plain_channels = m;
        let r = rx.send_ok(&cfg, &[path]).await;
        assert_eq!(r.connect_plain_early, 0);
        rx.assert_received(&name, &doc);
    }
}

/// A remembered plain address that SESSION confirms: every plain channel uses the connection
/// opened during the handshake, and the document arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_channels_open_during_the_handshake_to_a_remembered_address() {
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.plain_channels = 2;
    cfg.path_memory = Some(remembered(dir.path(), &cfg.to, rx.plain));
    let doc = marked_doc(13, 2 << 20, 30).1;
    let path = write(dir.path(), "early.txt", &doc);
    let r = rx.send_ok(&cfg, &[path]).await;
    assert_eq!(r.connect_plain_early, 2, "{r:?}");
    rx.assert_received("early.txt", &doc);
    // On one host nothing is recorded, so the memory still says what it said.
    assert_eq!(
        sieve_transport::paths::recall_plain(cfg.path_memory.as_ref().unwrap(), &cfg.to),
        Some(rx.plain)
    );
}

/// A remembered address that is no longer the receiver's plain port: the connections opened
/// to it carry nothing (no JOIN, no cleartext), and the session connects where SESSION says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_remembered_address_gets_no_byte() {
    let stranger = Stranger::start(u64::MAX).await;
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.path_memory = Some(remembered(dir.path(), &cfg.to, stranger.addr));
    let doc = marked_doc(17, 1 << 20, 20).1;
    let path = write(dir.path(), "stale.txt", &doc);
    let r = rx.send_ok(&cfg, &[path]).await;
    assert_eq!(r.connect_plain_early, 0, "{r:?}");
    rx.assert_received("stale.txt", &doc);
    assert_eq!(
        stranger.bytes.load(Ordering::Relaxed),
        0,
        "a byte went to an address SESSION did not confirm"
    );
}

/// A remembered address where nothing listens any more: the session is not delayed into a
/// failure; it connects where SESSION says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_address_where_nothing_listens_is_harmless() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.path_memory = Some(remembered(dir.path(), &cfg.to, closed));
    let doc = marked_doc(19, 1 << 20, 20).1;
    let path = write(dir.path(), "closed.txt", &doc);
    let r = rx.send_ok(&cfg, &[path]).await;
    assert_eq!(r.connect_plain_early, 0);
    rx.assert_received("closed.txt", &doc);
}

/// A receiver on this host: its plain address is remembered after a session (never a rate:
/// between two ends on one host the "path" is memory), and the next session opens its plain
/// channel early to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_on_this_host_has_its_plain_address_remembered_but_no_rate() {
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let memory = dir.path().join("paths.json");
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.path_memory = Some(memory.clone());
    let doc = marked_doc(23, 4 << 20, 20).1;
    let first = write(dir.path(), "first.txt", &doc);
    let r = rx.send_ok(&cfg, &[first]).await;
    assert_eq!(r.connect_plain_early, 0, "nothing was remembered yet");
    assert_eq!(
        sieve_transport::paths::recall_plain(&memory, &cfg.to),
        Some(rx.plain)
    );
    assert_eq!(sieve_transport::paths::recall(&memory, &cfg.to), None);
    let second = write(dir.path(), "second.txt", &doc);
    let r = rx.send_ok(&cfg, &[second]).await;
    assert_eq!(r.connect_plain_early, 1, "{r:?}");
    rx.assert_received("second.txt", &doc);
}

/// `--mode auto` to a receiver on this host opens no plain channel ahead for documents the
/// sieve cannot win even with nothing classified (a megabyte on loopback, on a machine that
/// seals at GB/s): it would only come and go, a connection the receiver sees close before its
/// JOIN. Where the sieve can win, it is opened ahead as in sieve mode. (A document with nothing
/// classified is exactly that best case, so the choice reported says which applies.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_opens_no_plain_channel_ahead_where_the_sieve_cannot_win() {
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.path_memory = Some(dir.path().join("paths.json"));
    let doc = marked_doc(31, 1 << 20, 20).1;
    rx.send_ok(&cfg, &[write(dir.path(), "first.txt", &doc)])
        .await;
    rx.sessions_settle().await;
    let refused = rx.stats.bad_joins.load(Ordering::Relaxed);
    cfg.mode = sieve_transport::sender::SendMode::Auto;
    let bare = vec![b'x'; 1 << 20];
    let r = rx
        .send_ok(&cfg, &[write(dir.path(), "bare.txt", &bare)])
        .await;
    rx.assert_received("bare.txt", &bare);
    rx.sessions_settle().await;
    let chosen = r.decision.as_ref().map(|d| d.chosen);
    if chosen == Some(Mode::SecureOnly) {
        // Had one been opened and dropped, the receiver would count it by now.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(rx.stats.bad_joins.load(Ordering::Relaxed), refused);
        assert_eq!(r.connect_plain_early, 0);
    } else {
        assert_eq!(r.connect_plain_early, 1, "{r:?}");
    }
}

/// Channel 0 is opened while a small document is prepared, and the report says how much of
/// its connecting ran meanwhile; a file that turns out badly marked fails the send with nothing
/// sent on the connection opened for it, and the receiver goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_0_is_dialled_while_the_documents_are_prepared() {
    let rx = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = rx.simple(Mode::Sieve);
    let doc = marked_doc(29, 1 << 20, 10).1;
    let good = write(dir.path(), "good.txt", &doc);
    let r = rx.send_ok(&cfg, std::slice::from_ref(&good)).await;
    assert!(r.connect_ahead_ms > 0.0, "{r:?}");
    assert!(
        (r.total_ms - (r.connect_ms + r.response_ms)).abs() < 1e-6,
        "{r:?}"
    );
    rx.assert_received("good.txt", &doc);

    let bad = write(dir.path(), "bad.txt", b"name,<$S>open but never closed\n");
    let e = send(&cfg, &[bad]).await.unwrap_err();
    assert!(format!("{e:#}").contains("not correctly marked"), "{e:#}");
    rx.sessions_settle().await;
    assert!(!rx.out_names().contains(&"bad.txt".to_string()));

    let again = write(dir.path(), "again.txt", &doc);
    rx.send_ok(&cfg, &[again]).await;
    rx.assert_received("again.txt", &doc);
}
