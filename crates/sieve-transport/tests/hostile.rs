//! Hostile peers (docs/DESIGN.md §6 "anyone who can reach the ports"): garbage, random frames
//! and a 4 GiB frame length on both ports; TLS handshakes that never finish; clients that connect
//! and stay silent past the handshake timeout; 2 000 plain JOINs with wrong tokens; a plain
//! channel presenting another session's token, and a replayed token. Meanwhile honest sessions
//! complete; afterwards the receiver's file descriptors are back near where they started and its
//! counters account for what was thrown at it.
//!
//! One test function on purpose: it counts this process's open file descriptors, which other tests
//! running at the same time would disturb.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rustls::pki_types::ServerName;
use sieve_core::batch::BatchSplit;
use sieve_core::frame::{self, FrameType};
use sieve_core::message::{Join, Mode};
use sieve_core::split::Split;
use sieve_core::Kind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

const HANDSHAKE: Duration = Duration::from_secs(1);
const IDLE: Duration = Duration::from_secs(3);
/// How long the receiver may take to drop a connection it should drop.
const DROP_WITHIN: Duration = Duration::from_secs(5);

async fn tls_client(rx: &TestReceiver) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(rx.addr).await.expect("connect");
    TlsConnector::from(rx.certs.client())
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake")
}

/// Read until the peer closes (or resets) the connection; panic if it is still open after
/// `limit`.
async fn expect_closed<S: tokio::io::AsyncRead + Unpin>(s: &mut S, what: &str, limit: Duration) {
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline.into(), s.read(&mut buf)).await {
            Err(_) => panic!("{what}: the receiver kept the connection open for {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
    }
}

/// Frames with valid headers, random types and random payloads.
fn random_frames(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        let ty = FrameType::ALL[rng.gen_range(0..FrameType::ALL.len())];
        let len = rng.gen_range(0..300);
        let payload: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        frame::encode(ty, &payload, &mut out);
    }
    out
}

/// A header claiming a payload of 4 GiB - 1 bytes.
fn huge_header(ty: FrameType) -> Vec<u8> {
    let mut h = vec![0xff, 0xff, 0xff, 0xff];
    h.push(frame::encode_header(ty, 0)[4]);
    h
}

/// Send `bytes` on a fresh plain connection and require the receiver to drop it.
async fn plain_blast(addr: SocketAddr, bytes: &[u8], what: &str) {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let _ = tcp.write_all(bytes).await;
    expect_closed(&mut tcp, what, DROP_WITHIN).await;
}

/// Complete a TLS handshake, send `bytes`, and require the receiver to drop the connection.
async fn tls_blast(rx: &TestReceiver, bytes: &[u8], what: &str) {
    let mut tls = tls_client(rx).await;
    let _ = tls.write_all(bytes).await;
    let _ = tls.flush().await;
    expect_closed(&mut tls, what, DROP_WITHIN).await;
}

#[derive(Default)]
struct Tally {
    garbage: AtomicU64,
    random_frames: AtomicU64,
    huge: AtomicU64,
    never_finished: AtomicU64,
    silent: AtomicU64,
    wrong_tokens: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_peers_on_both_ports() {
    let rx = Arc::new(
        TestReceiver::start_with(fast_tempdir(), |c| {
            c.limits.handshake_timeout = HANDSHAKE;
            c.limits.idle_timeout = IDLE;
        })
        .await,
    );
    let src = tempfile::tempdir().unwrap();
    let doc = marked_doc(7, 1_000_000, 40).1;
    let honest_file = write(src.path(), "warmup.txt", &doc);
    let mut cfg = rx.config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic);
    cfg.idle_timeout = IDLE;
    // Warm up (runtime threads, blocking pool, TLS session cache), then take the baseline.
    rx.send_ok(&cfg, &[honest_file]).await;
    let fd0 = fd_count();
    let stats0 = (
        rx.stats.bad_joins.load(Ordering::Relaxed),
        rx.stats.rejected_connections.load(Ordering::Relaxed),
    );

    // Honest sessions, one after another, for as long as the attack lasts.
    let stop = Arc::new(AtomicBool::new(false));
    let honest = {
        let (rx, stop, cfg, src_dir) = (
            rx.clone(),
            stop.clone(),
            cfg.clone(),
            src.path().to_path_buf(),
        );
        let doc = doc.clone();
        tokio::spawn(async move {
            let mut n = 0u32;
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) || n == 0 {
                let name = format!("honest-{n}.txt");
                let f = write(&src_dir, &name, &doc);
                let t = Instant::now();
                rx.send_ok(&cfg, &[f]).await;
                times.push(t.elapsed());
                rx.assert_received(&name, &doc);
                n += 1;
            }
            (n, times)
        })
    };

    // Peak descriptors while the attack runs.
    let peak = Arc::new(AtomicU64::new(fd0));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(fd_count(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let tally = Arc::new(Tally::default());
    let mut rng = StdRng::seed_from_u64(5);
    let mut attacks = tokio::task::JoinSet::new();

    // Clients that connect and say nothing, on both ports, and TLS handshakes that never finish:
    // all held open at once, each must be dropped after the handshake timeout.
    for i in 0..20 {
        let (rx, tally) = (rx.clone(), tally.clone());
        attacks.spawn(async move {
            let addr = if i % 2 == 0 { rx.addr } else { rx.plain };
            let mut tcp = TcpStream::connect(addr).await.expect("connect");
            let t = Instant::now();
            expect_closed(&mut tcp, "silent client", DROP_WITHIN).await;
            assert!(t.elapsed() >= HANDSHAKE / 2, "dropped before the timeout");
            tally.silent.fetch_add(1, Ordering::Relaxed);
        });
    }
    for _ in 0..10 {
        let (rx, tally) = (rx.clone(), tally.clone());
        attacks.spawn(async move {
            // A TLS handshake record header announcing 512 bytes, then nothing.
            let mut tcp = TcpStream::connect(rx.addr).await.expect("connect");
            tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
                .await
                .unwrap();
            expect_closed(&mut tcp, "unfinished TLS handshake", DROP_WITHIN).await;
            tally.never_finished.fetch_add(1, Ordering::Relaxed);
        });
    }
    for _ in 0..10 {
        let (rx, tally) = (rx.clone(), tally.clone());
        attacks.spawn(async move {
            // Slowloris past the handshake: two bytes of a frame header, then silence.
            let mut tls = tls_client(&rx).await;
            tls.write_all(&[0, 0]).await.unwrap();
            tls.flush().await.unwrap();
            expect_closed(&mut tls, "silent after the TLS handshake", DROP_WITHIN).await;
            tally.silent.fetch_add(1, Ordering::Relaxed);
        });
    }

    // Garbage, random frames and 4 GiB lengths on both ports.
    for i in 0..40u64 {
        let garbage: Vec<u8> = (0..rng.gen_range(1..4096)).map(|_| rng.gen()).collect();
        let frames = random_frames(&mut rng, 20);
        let (rx, tally) = (rx.clone(), tally.clone());
        attacks.spawn(async move {
            match i % 6 {
                0 => {
                    plain_blast(rx.plain, &garbage, "plain garbage").await;
                    tally.garbage.fetch_add(1, Ordering::Relaxed);
                }
                1 => {
                    // Garbage where a TLS ClientHello should be.
                    plain_blast(rx.addr, &garbage, "TLS-port garbage").await;
                    tally.garbage.fetch_add(1, Ordering::Relaxed);
                }
                2 => {
                    plain_blast(rx.plain, &frames, "plain random frames").await;
                    tally.random_frames.fetch_add(1, Ordering::Relaxed);
                }
                3 => {
                    tls_blast(&rx, &frames, "TLS random frames").await;
                    tally.random_frames.fetch_add(1, Ordering::Relaxed);
                }
                4 => {
                    plain_blast(rx.plain, &huge_header(FrameType::Join), "plain 4 GiB").await;
                    tally.huge.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    tls_blast(&rx, &huge_header(FrameType::Hello), "TLS 4 GiB").await;
                    tally.huge.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    // A 4 GiB DATA frame inside a live session's channel 0 ends that session only.
    {
        let mut s = RawSession::open(&rx, Mode::Sieve, 1, 1, 1).await.unwrap();
        s.send(|o| o.extend_from_slice(&huge_header(FrameType::Data)))
            .await
            .unwrap();
        assert!(
            s.next(DROP_WITHIN).await.is_err(),
            "the session survived a 4 GiB frame"
        );
        tally.huge.fetch_add(1, Ordering::Relaxed);
    }

    // 2 000 plain JOINs with wrong tokens, 32 at a time.
    let wrong = 2_000u64;
    let sem = Arc::new(tokio::sync::Semaphore::new(32));
    for i in 0..wrong {
        let (rx, tally, sem) = (rx.clone(), tally.clone(), sem.clone());
        let join = Join {
            session_id: rng.gen(),
            kind: Kind::Plain,
            index: (i % 3) as u8,
            token: rng.gen(),
        };
        attacks.spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let accepted = plain_join(rx.plain, join).await.expect("receiver answers");
            assert!(accepted.is_none(), "a wrong token was accepted");
            tally.wrong_tokens.fetch_add(1, Ordering::Relaxed);
        });
    }

    // Another session's token, and a replayed token.
    let a = RawSession::open(&rx, Mode::Sieve, 1, 1, 1).await.unwrap();
    let b = RawSession::open(&rx, Mode::Sieve, 1, 1, 1).await.unwrap();
    let a_token = a.key.token(Kind::Plain, 0);
    let cross = Join {
        session_id: b.session.session_id,
        kind: Kind::Plain,
        index: 0,
        token: a_token,
    };
    assert!(
        plain_join(rx.plain, cross).await.unwrap().is_none(),
        "session A's token joined session B"
    );
    let own = Join {
        session_id: a.session.session_id,
        kind: Kind::Plain,
        index: 0,
        token: a_token,
    };
    let joined = plain_join(rx.plain, own).await.unwrap();
    assert!(joined.is_some(), "the rightful JOIN was refused");
    assert!(
        plain_join(rx.plain, own).await.unwrap().is_none(),
        "a replayed token joined"
    );
    let mut b_writer = plain_join(
        rx.plain,
        Join {
            session_id: b.session.session_id,
            kind: Kind::Plain,
            index: 0,
            token: b.key.token(Kind::Plain, 0),
        },
    )
    .await
    .unwrap()
    .expect("B's own token joins B");
    let _ = b_writer.flush().await;
    drop((a, b, joined, b_writer));

    while let Some(r) = attacks.join_next().await {
        r.expect("an attack task panicked");
    }
    stop.store(true, Ordering::Relaxed);
    let (honest_sessions, times) = honest.await.expect("honest sessions");
    sampler.await.unwrap();
    let peak_fds = peak.load(Ordering::Relaxed);

    // Everything hostile is gone: sessions ended, descriptors released.
    let st = rx.stats.clone();
    rx.sessions_settle().await;
    wait_for(
        "file descriptors to return to the baseline",
        Duration::from_secs(20),
        || fd_count() <= fd0 + 4,
    )
    .await;
    rx.assert_no_partials_soon().await;
    let fd_end = fd_count();

    let bad_joins = st.bad_joins.load(Ordering::Relaxed) - stats0.0;
    let rejected = st.rejected_connections.load(Ordering::Relaxed) - stats0.1;
    let t = &tally;
    let (silent, never, wrong_n) = (
        t.silent.load(Ordering::Relaxed),
        t.never_finished.load(Ordering::Relaxed),
        t.wrong_tokens.load(Ordering::Relaxed),
    );
    assert_eq!(wrong_n, wrong);
    // Wrong tokens, another session's token, the replay, and every plain connection whose first
    // frame was garbage, random or oversized.
    assert!(
        bad_joins >= wrong + 2 + 3 * 40 / 6,
        "bad_joins {bad_joins} does not account for the attack"
    );
    // Every connection that said too little before the handshake timeout.
    assert!(
        rejected >= silent + never,
        "rejected_connections {rejected} < {silent} silent + {never} unfinished"
    );
    assert!(honest_sessions >= 1);
    let mut ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    eprintln!(
        "hostile: garbage {}, random-frame connections {}, 4 GiB headers {}, unfinished TLS handshakes {never}, \
         silent clients {silent}, wrong tokens {wrong_n}, cross-session 1, replay 1; receiver counted \
         bad_joins {bad_joins}, rejected_connections {rejected}; honest sessions meanwhile {honest_sessions} \
         (max {:.0} ms), all byte-identical; fds: baseline {fd0}, peak during the attack {peak_fds}, end {fd_end}",
        t.garbage.load(Ordering::Relaxed),
        t.random_frames.load(Ordering::Relaxed),
        t.huge.load(Ordering::Relaxed),
        ms.last().copied().unwrap_or(0.0),
    );
    assert_eq!(
        st.sessions_completed.load(Ordering::Relaxed),
        u64::from(honest_sessions) + 1
    );

    // Memory before authentication: connections whose first frame claims the largest payload the
    // receiver accepts from a session (16 MiB), then say nothing more. Unauthenticated peers must
    // not make the receiver reserve that much each.
    let rss0 = rss();
    let mut held = Vec::new();
    for i in 0..64 {
        let hdr = frame::encode_header(FrameType::Join, frame::DEFAULT_MAX_PAYLOAD);
        if i % 4 == 0 {
            let mut tls = tls_client(&rx).await;
            let hdr = frame::encode_header(FrameType::Hello, frame::DEFAULT_MAX_PAYLOAD);
            tls.write_all(&hdr).await.unwrap();
            tls.write_all(&[0u8; 1000]).await.unwrap();
            tls.flush().await.unwrap();
            held.push(tokio::spawn(async move {
                expect_closed(&mut tls, "16 MiB HELLO", DROP_WITHIN).await
            }));
        } else {
            let mut tcp = TcpStream::connect(rx.plain).await.unwrap();
            tcp.write_all(&hdr).await.unwrap();
            tcp.write_all(&[0u8; 1000]).await.unwrap();
            held.push(tokio::spawn(async move {
                expect_closed(&mut tcp, "16 MiB JOIN", DROP_WITHIN).await
            }));
        }
    }
    let mut rss_peak = rss0;
    while held.iter().any(|h| !h.is_finished()) {
        rss_peak = rss_peak.max(rss());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for h in held {
        h.await.unwrap();
    }
    let grew = rss_peak.saturating_sub(rss0);
    eprintln!(
        "hostile: 64 unauthenticated 16 MiB frame headers held open: resident memory {} MiB -> peak {} MiB",
        rss0 >> 20,
        rss_peak >> 20
    );
    assert!(
        grew < 128 << 20,
        "unauthenticated peers made the receiver grow by {} MiB",
        grew >> 20
    );
}
