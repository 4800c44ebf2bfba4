//! Manifests cost the receiver memory for as long as their documents are in progress, so they are
//! paid for (SECURITY.md, "manifests"): a client announcing documents of millions of segments in
//! several sessions at once is refused with LIMIT, the receiver's resident memory stays small,
//! and honest senders are served meanwhile. One test in its own binary: it measures this
//! process's peak resident memory.

mod common;

use std::time::Duration;

use common::*;
use sieve_core::layout::{Kind, Layout};
use sieve_core::message::{AckStatus, Doc, Message, Mode};

/// Peak resident memory of this process (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// The DOC frame of document `doc` whose layout is `segments` one-byte segments, marks restored,
/// written without building the layout: the shortest code of a length of 1 is order 1, where
/// it takes two bits, `11`.
fn manifest(doc: u32, segments: usize) -> Vec<u8> {
    let name = format!("huge-{doc}");
    let mut payload = Vec::with_capacity(segments / 4 + 64);
    payload.extend_from_slice(&doc.to_be_bytes());
    payload.push(name.len() as u8);
    payload.extend_from_slice(name.as_bytes());
    payload.push(0); // first segment: plain
    let mut n = segments as u64;
    while n >= 0x80 {
        payload.push((n as u8) | 0x80);
        n >>= 7;
    }
    payload.push(n as u8);
    payload.extend_from_slice(&[1, 1]); // both kinds' order
    payload.resize(payload.len() + segments / 4, 0xff);
    if !segments.is_multiple_of(4) {
        payload.push(0xffu8 << (8 - 2 * (segments % 4)));
    }
    payload.extend_from_slice(&[1, 4]);
    payload.extend_from_slice(b"<$S>");
    payload.push(4);
    payload.extend_from_slice(b"<$E>");
    payload.extend_from_slice(&0u32.to_be_bytes()); // no padding
    let mut frame = Vec::with_capacity(payload.len() + 8);
    sieve_core::frame::encode(sieve_core::frame::FrameType::Doc, &payload, &mut frame);
    frame
}

#[test]
fn the_hand_encoded_manifest_is_a_doc_frame() {
    let mut expected = Vec::new();
    Doc {
        doc: 3,
        name: "huge-3".into(),
        layout: Layout {
            first: Kind::Plain,
            lens: vec![1; 301],
        },
        marks: Some((b"<$S>".to_vec(), b"<$E>".to_vec())),
        padding: 0,
    }
    .encode(&mut expected);
    assert_eq!(manifest(3, 301), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_manifests_are_refused_and_honest_senders_served() {
    const SESSIONS: u32 = 6;
    const DOCS: u32 = 4;
    const SEGMENTS: usize = 2_000_000;
    // A budget of 128 MiB (frame buffers, and a quarter of that, 32 MiB, for the protocol;
    // a session's share of it 4 MiB): what the receiver holds is bounded by its budget, so a
    // bound on its memory is checked against a budget of that size. (The default, 512 MiB,
    // bounds the protocol's part at 128 MiB and the frame buffers at 512 MiB.)
    let rx = TestReceiver::start_with(fast_tempdir(), |c| {
        c.limits.max_buffer_bytes = 128 << 20;
    })
    .await;
    // One-byte segments: each takes two bits of the manifest and, parsed, a varint and a share
    // of a checkpoint in the receiver's memory. Encoded by hand, so that the clients do not hold the layouts either.
    let frames: std::sync::Arc<Vec<Vec<u8>>> =
        std::sync::Arc::new((0..DOCS).map(|d| manifest(d, SEGMENTS)).collect());
    let mut attacks = tokio::task::JoinSet::new();
    // The clients live in this process too, and each holds a few copies of a 0.5 MB frame while
    // TLS seals it: two send at a time, so that the peak measured is mostly the receiver's
    // (every session stays open, holding what the receiver accepted from it).
    let sending = std::sync::Arc::new(tokio::sync::Semaphore::new(2));
    for i in 0..SESSIONS {
        let mut s = RawSession::open_from(
            &rx,
            std::net::Ipv4Addr::new(127, 0, 0, 30 + i as u8),
            Mode::Sieve,
            1,
            1,
            DOCS,
        )
        .await
        .expect("session");
        let frames = frames.clone();
        let sending = sending.clone();
        attacks.spawn(async move {
            let turn = sending.acquire_owned().await.expect("semaphore");
            for f in frames.iter() {
                s.send(|o| o.extend_from_slice(f))
                    .await
                    .expect("manifest sent");
            }
            drop(turn);
            // Each manifest, parsed, holds about 3.75 MB (its 2 MB of varints and a checkpoint
            // every 32 segments): one fits the session's share of 4 MiB, the others are
            // refused. The accepted one waits for bytes that never come.
            let mut limits = 0;
            while let Ok(m) = s.next(Duration::from_secs(5)).await {
                match m {
                    Message::Ack(a) if a.status == AckStatus::Refused => {
                        assert!(a.message.contains("LIMIT"), "{}", a.message);
                        limits += 1;
                    }
                    other => panic!("expected a LIMIT refusal, got {other:?}"),
                }
            }
            limits
        });
    }
    // Honest senders meanwhile.
    let src = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut docs = Vec::new();
    for i in 0..4 {
        let (_, doc) = marked_doc(40 + i, 2_000_000, 20);
        files.push(write(src.path(), &format!("ok-{i}.txt"), &doc));
        docs.push(doc);
    }
    rx.send_ok(&rx.simple(Mode::Sieve), &files).await;
    let mut refused = 0;
    while let Some(r) = attacks.join_next().await {
        refused += r.expect("attack task");
    }
    assert!(
        refused >= SESSIONS * (DOCS - 1),
        "{refused} of {} manifests refused",
        SESSIONS * DOCS
    );
    for (i, d) in docs.iter().enumerate() {
        rx.assert_received(&format!("ok-{i}.txt"), d);
    }
    let peak = peak_rss();
    eprintln!(
        "{refused} of {} manifests of {SEGMENTS} segments refused; peak resident memory of the test process \
         (receiver and clients): {:.1} MiB",
        SESSIONS * DOCS,
        peak as f64 / (1 << 20) as f64
    );
    assert!(peak < 128 << 20, "peak resident memory {} MiB", peak >> 20);
}
