//! The sender adapts to the receiver's frame limit: data frames shrink to fit, and a manifest
//! that cannot fit fails the session before any document is announced.

mod common;

use common::*;
use sieve_core::frame::Limits;
use sieve_core::message::Mode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_frames_shrink_to_the_receivers_limit() {
    let rx = TestReceiver::start_with(fast_tempdir(), |c| {
        c.limits.frame = Limits { max_payload: 4096 }
    })
    .await;
    let (_, doc) = marked_doc(7, 200_000, 3);
    let f = write(rx.root.path(), "big.txt", &doc);
    // The sender asks for 16 KiB frames; the receiver accepts at most 4 KiB payloads.
    let cfg = rx.simple(Mode::Sieve);
    rx.send_ok(&cfg, &[f]).await;
    rx.assert_received("big.txt", &doc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_manifest_fails_before_anything_is_announced() {
    let rx = TestReceiver::start_with(fast_tempdir(), |c| {
        c.limits.frame = Limits { max_payload: 4096 }
    })
    .await;
    // Thousands of classified segments: the manifest alone exceeds 4 KiB.
    let (_, doc) = marked_doc(9, 100_000, 3000);
    let f = write(rx.root.path(), "many.txt", &doc);
    let err = send(&rx.simple(Mode::Sieve), &[f])
        .await
        .expect_err("the manifest cannot fit");
    let msg = format!("{err:#}");
    assert!(msg.contains("exceeds the receiver's frame limit"), "{msg}");
    assert!(rx.out_names().is_empty());
    rx.assert_no_partials_soon().await;
}
