//! One address cannot pin the whole frame-buffer budget (SECURITY.md, "pinned frame buffers"):
//! eight sessions from 127.0.0.2, each with one TLS and three plain channels, each channel
//! holding one DATA frame declared just under the session's frame limit, all of it sent but
//! the last 256 KiB, which then trickles. That is the red team's attack (16,380 KiB frames, all
//! but 256 KiB sent, then 16 KiB every 20 s, against the 512 MiB default) scaled to a 64 MiB
//! budget, where a session's frames may be 2 MiB. An honest sender must still complete within
//! 5 s, each of several times while the attacker re-opens whatever is ended, and the receiver's
//! buffers stay within the budget.
//!
//! The second test sends enough of every frame that all of them wait for memory at once (a
//! frame that waits is never slow): from another network than the honest sender's, it must
//! still leave room for it.

mod common;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use common::*;
use sieve_core::batch::BatchSplit;
use sieve_core::frame::{self, FrameType, Limits};
use sieve_core::message::{Join, Message, Mode};
use sieve_core::split::Split;
use sieve_core::Kind;
use sieve_transport::conn::{FrameReader, FrameWriter};

const MIB: u64 = 1 << 20;
const BUDGET: u64 = 64 * MIB;
const SESSIONS: usize = 8;
const PLAIN: u8 = 3;
/// Bytes of each frame not sent at once: what the red team held back of its frames. At the
/// trickle below the frames outlast the test many times over.
const HELD_BACK: usize = 256 << 10;
/// What each channel then sends every [`TRICKLE_EVERY`]: enough, with four channels, to keep
/// the session active (16 KiB within the idle timeout), as the red team's 16 KiB every 20 s
/// was.
const TRICKLE: usize = 512;
const TRICKLE_EVERY: Duration = Duration::from_millis(500);
const ROUNDS: usize = 3;

/// The tests of this file run one at a time: each measures the resident memory of the process.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn attacker() -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 2)
}

/// A plain JOIN from `from`; the writer of the channel once the receiver answers JOIN_OK.
async fn plain_join_from(from: Ipv4Addr, rx: &TestReceiver, join: Join) -> Result<FrameWriter> {
    let tcp = connect_from(from, rx.plain).await?;
    let (r, w) = tcp.into_split();
    let mut reader = FrameReader::new(Box::new(r), Limits::default());
    let mut writer = FrameWriter::new(Box::new(w));
    writer.send(|o| join.encode(o)).await?;
    writer.flush().await?;
    match tokio::time::timeout(Duration::from_secs(10), reader.message()).await {
        Ok(Ok(Message::JoinOk(_))) => Ok(writer),
        other => bail!("the plain channel did not join: {other:?}"),
    }
}

/// Declare a frame of `claim` bytes on `w`, send all of it but [`HELD_BACK`], then trickle.
async fn pin(mut w: FrameWriter, claim: u32, pinned: Arc<AtomicU64>) {
    let head = frame::encode_header(FrameType::Data, claim);
    let chunk = vec![0x5au8; 64 << 10];
    let mut left = claim as usize - HELD_BACK;
    let mut first = true;
    while left > 0 {
        let n = left.min(chunk.len());
        let r = w
            .send(|o| {
                if first {
                    o.extend_from_slice(&head);
                }
                o.extend_from_slice(&chunk[..n]);
            })
            .await;
        first = false;
        if r.is_err() || w.flush().await.is_err() {
            return;
        }
        left -= n;
    }
    pinned.fetch_add(1, Ordering::Relaxed);
    loop {
        tokio::time::sleep(TRICKLE_EVERY).await;
        let r = w.send(|o| o.extend_from_slice(&chunk[..TRICKLE])).await;
        if r.is_err() || w.flush().await.is_err() {
            return;
        }
    }
}

/// One attacking session after another: open it, pin a frame on each of its channels, and
/// open the next as soon as the receiver ends it.
async fn pinning_sessions(
    rx: Arc<TestReceiver>,
    stop: Arc<AtomicBool>,
    pinned: Arc<AtomicU64>,
    opened: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(s) = RawSession::open_from(&rx, attacker(), Mode::Sieve, 1, PLAIN, 1).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        let claim = s.session.max_payload - 512;
        let mut writers = Vec::new();
        for i in 0..PLAIN {
            let join = Join {
                session_id: s.session.session_id,
                kind: Kind::Plain,
                index: i,
                token: s.key.token(Kind::Plain, i),
            };
            if let Ok(w) = plain_join_from(attacker(), &rx, join).await {
                writers.push(w);
            }
        }
        let RawSession {
            mut reader, writer, ..
        } = s;
        writers.push(writer);
        let mut pushers = tokio::task::JoinSet::new();
        for w in writers {
            pushers.spawn(pin(w, claim, pinned.clone()));
        }
        // Until the receiver says something (an ERROR) or closes channel 0.
        let _ = reader.read().await;
        pushers.abort_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_pin_the_frame_buffer_budget() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let rx = Arc::new(
        TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
            c.limits.max_buffer_bytes = BUDGET;
        })
        .await,
    );
    let src = tempfile::tempdir().unwrap();
    let (_, doc) = marked_doc(5, 1_000_000, 10);
    let mut cfg = rx.config(Mode::Sieve, 1, 1, Split::Dynamic, BatchSplit::Dynamic);
    cfg.chunk = sieve_transport::sender::Chunk::Bytes(256 << 10);
    // Read, not mapped: a mapped document would count in this process's resident memory.
    cfg.mmap = false;
    let warm = write(src.path(), "warm.txt", &doc);
    rx.send_ok(&cfg, &[warm]).await;
    rx.sessions_settle().await;
    let rss0 = rss();

    let stop = Arc::new(AtomicBool::new(false));
    let rss_peak = Arc::new(AtomicU64::new(rss0));
    let sampler = {
        let (stop, rss_peak) = (stop.clone(), rss_peak.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                rss_peak.fetch_max(rss(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let (pinned, opened) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut attack = tokio::task::JoinSet::new();
    for _ in 0..SESSIONS {
        attack.spawn(pinning_sessions(
            rx.clone(),
            stop.clone(),
            pinned.clone(),
            opened.clone(),
        ));
    }
    let st = rx.stats.clone();
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        // The attack holds the budget: every byte of it is held or asked for.
        wait_for(
            &format!("the attack to hold the frame-buffer budget (round {round})"),
            Duration::from_secs(30),
            || st.buffer.bytes.load(Ordering::Relaxed) + MIB >= BUDGET,
        )
        .await;
        let name = format!("honest-{round}.txt");
        let path = write(src.path(), &name, &doc);
        let t = Instant::now();
        let sent = tokio::time::timeout(Duration::from_secs(5), send(&cfg, &[path])).await;
        let took = t.elapsed();
        match sent {
            Err(_) => panic!(
                "round {round}: the honest sender did not finish within 5 s while the attack \
                 held {} MiB of the {} MiB budget",
                st.buffer.bytes.load(Ordering::Relaxed) >> 20,
                BUDGET >> 20
            ),
            Ok(Err(e)) => panic!(
                "round {round}: the honest sender failed after {:.1} s: {e:#}",
                took.as_secs_f64()
            ),
            Ok(Ok(r)) => assert_eq!(r.docs_ok, 1),
        }
        rx.assert_received(&name, &doc);
        times.push(took);
    }
    stop.store(true, Ordering::Relaxed);
    attack.abort_all();
    sampler.await.unwrap();
    let b = &st.buffer;
    let peak = b.peak_bytes.load(Ordering::Relaxed);
    let grew = rss_peak.load(Ordering::Relaxed).saturating_sub(rss0);
    eprintln!(
        "pinned buffers: {SESSIONS} sessions from one address × {} channels, frames pinned {}, \
         sessions opened {}; budget {} MiB, peak held {} MiB; honest sends {:?} ms; resident \
         memory {} -> peak {} MiB (+{} MiB)",
        PLAIN + 1,
        pinned.load(Ordering::Relaxed),
        opened.load(Ordering::Relaxed),
        BUDGET >> 20,
        peak >> 20,
        times.iter().map(|t| t.as_millis()).collect::<Vec<_>>(),
        rss0 >> 20,
        rss_peak.load(Ordering::Relaxed) >> 20,
        grew >> 20,
    );
    assert!(peak <= BUDGET, "frame buffers reached {peak} bytes");
    // The whole process: the receiver's buffers, and every client's. The exact bound is the
    // receiver's own accounting, above.
    assert!(
        grew < BUDGET + 64 * MIB,
        "resident memory grew by {} MiB with a {} MiB budget",
        grew >> 20,
        BUDGET >> 20
    );
}

/// The waiting attack's network: four addresses of 127.0.2.0/24, another /24 than the honest
/// sender's 127.0.0.1.
fn waiting_attacker(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 2, 2 + (i % 4) as u8)
}

/// Sessions of each wave of the waiting attack, 12 from each address (the receiver takes 128
/// sessions, 64 of a network).
const WAITING_SESSIONS: usize = 48;

/// Plain channels of each waiting session: with its TLS channel, two frames, each 4 MiB long
/// (a 64 MiB budget over 8 sessions over 2 channels): 96 frames asking for 384 MiB, of which
/// no more than 16 can have all their buffer.
const WAITING_PLAIN: u8 = 1;

/// Of each frame, what the waiting attack does not send: a frame that has received all it
/// will has a buffer of its whole length (and is then slow, and ended, when others wait) or,
/// until it has, waits for memory with all its buffer filled.
const WAITING_HELD_BACK: usize = 1024;

/// What each frame of the waiting attack sends first, on every channel of a wave before any
/// sends more: 96 such buffers fit in the budget, so that the frames then grow from the same
/// point, one step each in turn (the budget serves its waiters in order), and none has all its
/// buffer before the budget is spent.
const WAITING_FIRST: usize = 512 << 10;

/// Send `bytes` of a frame's payload on `w`, the frame's header before them if `head`.
async fn send_part(
    w: &mut FrameWriter,
    head: Option<[u8; frame::HEADER_LEN]>,
    bytes: usize,
) -> bool {
    let chunk = vec![0x5au8; 64 << 10];
    let mut head = head;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        let r = w
            .send(|o| {
                if let Some(h) = head.take() {
                    o.extend_from_slice(&h);
                }
                o.extend_from_slice(&chunk[..n]);
            })
            .await;
        if r.is_err() || w.flush().await.is_err() {
            return false;
        }
        left -= n;
    }
    true
}

/// Declare a frame of `claim` bytes on `w`, send [`WAITING_FIRST`] of it, then once `go` says
/// so all of it but [`WAITING_HELD_BACK`], then nothing.
async fn fill(mut w: FrameWriter, claim: u32, go: Arc<tokio::sync::Notify>, sent: Arc<AtomicU64>) {
    let head = frame::encode_header(FrameType::Data, claim);
    let later = go.notified();
    if !send_part(&mut w, Some(head), WAITING_FIRST).await {
        return;
    }
    later.await;
    if !send_part(
        &mut w,
        None,
        claim as usize - WAITING_HELD_BACK - WAITING_FIRST,
    )
    .await
    {
        return;
    }
    sent.fetch_add(1, Ordering::Relaxed);
    std::future::pending::<()>().await;
}

/// The waiting attack in waves: open all its sessions and their channels, then fill a frame on
/// every channel at once (frames that start together grow together, so none has all its
/// buffer before the budget is spent, and then all of them wait); once the receiver ends any
/// of the wave's sessions, drop the wave and start the next.
async fn waiting_waves(
    rx: Arc<TestReceiver>,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    opened: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        let mut sessions = Vec::new();
        for i in 0..WAITING_SESSIONS {
            let from = waiting_attacker(i);
            let Ok(s) = RawSession::open_from(&rx, from, Mode::Sieve, 1, WAITING_PLAIN, 1).await
            else {
                continue;
            };
            opened.fetch_add(1, Ordering::Relaxed);
            let mut writers = Vec::new();
            for i in 0..WAITING_PLAIN {
                let join = Join {
                    session_id: s.session.session_id,
                    kind: Kind::Plain,
                    index: i,
                    token: s.key.token(Kind::Plain, i),
                };
                if let Ok(w) = plain_join_from(from, &rx, join).await {
                    writers.push(w);
                }
            }
            sessions.push((s, writers));
        }
        if sessions.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let mut tasks = tokio::task::JoinSet::new();
        let mut ends = tokio::task::JoinSet::new();
        let go = Arc::new(tokio::sync::Notify::new());
        let frames = sessions
            .iter()
            .map(|(_, w)| w.len() as u64 + 1)
            .sum::<u64>();
        for (s, mut writers) in sessions {
            let claim = s.session.max_payload - 512;
            let RawSession {
                mut reader, writer, ..
            } = s;
            writers.push(writer);
            for w in writers {
                tasks.spawn(fill(w, claim, go.clone(), sent.clone()));
            }
            // Until the receiver says something (an ERROR) or closes channel 0.
            ends.spawn(async move {
                let _ = reader.read().await;
            });
        }
        // The rest once the receiver holds the first part of every frame.
        let st = rx.stats.clone();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && st.buffer.bytes.load(Ordering::Relaxed) < frames * WAITING_FIRST as u64
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        go.notify_waiters();
        let _ = ends.join_next().await;
        tasks.abort_all();
        ends.abort_all();
        // The next wave starts once the receiver has ended this one's sessions (but the honest
        // sender's): else it finds the addresses at their session limits, and its newcomers
        // end its own sessions.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && st.sessions_started.load(Ordering::Relaxed)
                > st.sessions_completed.load(Ordering::Relaxed)
                    + st.sessions_failed.load(Ordering::Relaxed)
                    + 1
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_that_all_wait_for_memory_leave_room_for_another_network() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let rx = Arc::new(
        TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
            c.limits.max_buffer_bytes = BUDGET;
            c.limits.max_sessions = 128;
        })
        .await,
    );
    let src = tempfile::tempdir().unwrap();
    let (_, doc) = marked_doc(6, 1_000_000, 10);
    let mut cfg = rx.config(Mode::Sieve, 1, 1, Split::Dynamic, BatchSplit::Dynamic);
    cfg.chunk = sieve_transport::sender::Chunk::Bytes(256 << 10);
    cfg.mmap = false;
    let warm = write(src.path(), "warm.txt", &doc);
    rx.send_ok(&cfg, &[warm]).await;
    rx.sessions_settle().await;
    let rss0 = rss();

    let stop = Arc::new(AtomicBool::new(false));
    let rss_peak = Arc::new(AtomicU64::new(rss0));
    let sampler = {
        let (stop, rss_peak) = (stop.clone(), rss_peak.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                rss_peak.fetch_max(rss(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let (sent, opened) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let attack = tokio::spawn(waiting_waves(
        rx.clone(),
        stop.clone(),
        sent.clone(),
        opened.clone(),
    ));
    let st = rx.stats.clone();
    let frames = WAITING_SESSIONS as u64 * (WAITING_PLAIN as u64 + 1);
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        // The attack holds the budget, and (nearly) all its frames wait for more.
        wait_for(
            &format!("the attack's frames to wait for the whole budget (round {round})"),
            Duration::from_secs(30),
            || {
                st.buffer.bytes.load(Ordering::Relaxed) + MIB >= BUDGET
                    && st.buffer.waiting.load(Ordering::Relaxed) + 4 >= frames
            },
        )
        .await;
        let name = format!("honest-{round}.txt");
        let path = write(src.path(), &name, &doc);
        let t = Instant::now();
        let sent_ok = tokio::time::timeout(Duration::from_secs(5), send(&cfg, &[path])).await;
        let took = t.elapsed();
        match sent_ok {
            Err(_) => panic!(
                "round {round}: the honest sender did not finish within 5 s while {} frames of \
                 another network waited and held {} MiB of the {} MiB budget",
                st.buffer.waiting.load(Ordering::Relaxed),
                st.buffer.bytes.load(Ordering::Relaxed) >> 20,
                BUDGET >> 20
            ),
            Ok(Err(e)) => panic!(
                "round {round}: the honest sender failed after {:.1} s: {e:#}",
                took.as_secs_f64()
            ),
            Ok(Ok(r)) => assert_eq!(r.docs_ok, 1),
        }
        rx.assert_received(&name, &doc);
        times.push(took);
    }
    stop.store(true, Ordering::Relaxed);
    attack.abort();
    sampler.await.unwrap();
    let b = &st.buffer;
    let peak = b.peak_bytes.load(Ordering::Relaxed);
    let grew = rss_peak.load(Ordering::Relaxed).saturating_sub(rss0);
    eprintln!(
        "waiting frames: {WAITING_SESSIONS} sessions from 127.0.2.0/24 × {} channels, frames \
         filled {}, sessions opened {}; budget {} MiB, peak held {} MiB; frames ended over \
         their network's share {}; honest sends {:?} ms; resident memory {} -> peak {} MiB \
         (+{} MiB)",
        WAITING_PLAIN + 1,
        sent.load(Ordering::Relaxed),
        opened.load(Ordering::Relaxed),
        BUDGET >> 20,
        peak >> 20,
        b.over_share.load(Ordering::Relaxed),
        times.iter().map(|t| t.as_millis()).collect::<Vec<_>>(),
        rss0 >> 20,
        rss_peak.load(Ordering::Relaxed) >> 20,
        grew >> 20,
    );
    assert!(peak <= BUDGET, "frame buffers reached {peak} bytes");
    // The whole process: the attack's 96 connections and their buffers on both sides, and
    // what the allocator keeps of the hundreds of 4 MiB buffers each wave's frames grew and
    // freed. A sanity bound only; the exact one is the receiver's own accounting, above.
    assert!(
        grew < 3 * BUDGET,
        "resident memory grew by {} MiB with a {} MiB budget",
        grew >> 20,
        BUDGET >> 20
    );
}
