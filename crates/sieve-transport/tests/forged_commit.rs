//! The review's attack on the commit, end to end: an on-path attacker holds back the last honest
//! cleartext frame until DOC_END has passed on channel 0, then releases it followed, on the same
//! TCP stream, by a forged frame over offsets already covered. The honest frame completes the
//! document and starts its verification and commit; the forged one must be refused, never
//! written, and nothing may appear under the document's name. A hook of the `test-hooks` feature
//! holds the receiver between verification and commit, where the attack had its window; this
//! test has a binary of its own because the hook is global.

// One classified range is the normal case here, not a mistaken list of indices.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use sieve_core::layout::{Kind, Layout};
use sieve_core::message::{AckStatus, Data, Doc, DocEnd, Join, Message, Mode};
use sieve_transport::receiver::hooks;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_frame_behind_the_closing_one_is_never_committed() {
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    *hooks::BEFORE_COMMIT.lock().unwrap() = Some(Arc::new(move || {
        let _ = held_tx.send(());
        let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
    }));

    let rx = TestReceiver::start().await;
    let mut s = RawSession::open(&rx, Mode::Sieve, 1, 1, 1).await.unwrap();
    // 2000 bytes of cleartext around 100 classified ones.
    let honest: Vec<u8> = (0..2100u32).map(|i| b'a' + (i % 26) as u8).collect();
    let layout = Layout::from_ranges(2100, &[1000..1100]);
    let plain: Vec<u8> = [&honest[..1000], &honest[1100..]].concat();
    let (a, b) = plain.split_at(1000);
    s.send(|o| {
        Doc {
            doc: 0,
            name: "forged.txt".into(),
            layout: layout.clone(),
            marks: None,
            padding: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    let mut pw = plain_join(
        rx.plain,
        Join {
            session_id: s.session.session_id,
            kind: Kind::Plain,
            index: 0,
            token: s.key.token(Kind::Plain, 0),
        },
    )
    .await
    .unwrap()
    .expect("the plain channel joins");
    s.send(|o| {
        Data {
            doc: 0,
            offset: 0,
            payload: honest[1000..1100].to_vec(),
        }
        .encode(o)
    })
    .await
    .unwrap();
    pw.data(0, 0, a).await.unwrap();
    pw.flush().await.unwrap();
    let digest = s.plain_digest(0, &[(0, a), (1000, b)]);
    s.send(|o| {
        DocEnd {
            doc: 0,
            plain_digest: digest,
            secure_len: 100,
            plain_len: 2000,
        }
        .encode(o)
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The held-back honest frame completes the document: the receiver verifies it and stops at
    // its commit.
    pw.data(0, 1000, b).await.unwrap();
    pw.flush().await.unwrap();
    let reached =
        tokio::task::spawn_blocking(move || held_rx.recv_timeout(Duration::from_secs(10)))
            .await
            .unwrap()
            .is_ok();
    assert!(reached, "the document never reached its commit");
    // The forgery, on the same stream, while the commit waits; then the commit goes on.
    let forged = vec![b'X'; 1000];
    pw.data(0, 0, &forged).await.unwrap();
    pw.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    go_tx.send(()).ok();

    // Whatever channel 0 says until it closes, it never acknowledges the document as stored.
    let mut stored = false;
    while let Ok(m) = s.next(Duration::from_secs(5)).await {
        stored |= matches!(m, Message::Ack(a) if a.status == AckStatus::Ok);
    }
    drop((pw, s));
    rx.sessions_settle().await;
    if let Ok(got) = std::fs::read(rx.out.join("forged.txt")) {
        panic!(
            "a file was committed under the name, {} of its bytes forged (acknowledged: {stored})",
            got.iter().filter(|&&c| c == b'X').count()
        );
    }
    assert!(!stored, "the document was acknowledged as stored");
    assert_eq!(rx.stats.docs_committed.load(Ordering::Relaxed), 0);
    rx.assert_no_partials_soon().await;
    *hooks::BEFORE_COMMIT.lock().unwrap() = None;
}
