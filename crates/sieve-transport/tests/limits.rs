//! The sender adapts to the receiver's limits: data frames shrink to fit its frame limit, a
//! manifest that cannot fit fails the session before any document is announced, and no more
//! documents are in progress at once than the receiver's SESSION allows.

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

/// A receiver with few descriptors tells each session how many documents it may hold open (here
/// 5, for 64 open files). A sender with 8 channels would otherwise have a document in progress
/// on each, and the receiver would refuse those beyond the 5th ("more than 5 documents of one
/// session in progress at once"); it waits for acknowledgements instead, and all arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_in_progress_stay_within_the_receivers_window() {
    let rx = TestReceiver::start_with(fast_tempdir(), |c| c.limits.max_open_files = Some(64)).await;
    let window = sieve_transport::receiver::FdBudget::for_limit(64).session_docs();
    assert_eq!(window, 5);
    let src = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut docs = Vec::new();
    for i in 0..60 {
        let (_, doc) = marked_doc(100 + i, 100_000, 4);
        files.push(write(src.path(), &format!("d{i:02}.txt"), &doc));
        docs.push(doc);
    }
    let cfg = rx.config(
        Mode::Sieve,
        4,
        4,
        sieve_core::split::Split::Dynamic,
        sieve_core::batch::BatchSplit::Dynamic,
    );
    rx.send_ok(&cfg, &files).await;
    for (i, doc) in docs.iter().enumerate() {
        rx.assert_received(&format!("d{i:02}.txt"), doc);
    }
    rx.assert_no_partials_soon().await;
}
