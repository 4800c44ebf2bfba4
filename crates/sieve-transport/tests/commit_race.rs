//! Bug 1 of RELIABILITY.md, forced instead of waited for: the session ends while a document that
//! has passed verification waits to be committed. The session's teardown closes the document and
//! removes its temporary file; the commit that runs afterwards must refuse, so that no file (in
//! particular no zero-filled one, as before the fix) appears under the document's name. A hook of
//! the `test-hooks` feature holds the commit between verification and the file's rename; this
//! test has a binary of its own because the hook is global.

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use sieve_core::message::Mode;
use sieve_transport::receiver::hooks;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ending_during_a_commit_leaves_no_file() {
    let (verified_tx, verified_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    *hooks::BEFORE_COMMIT.lock().unwrap() = Some(Arc::new(move || {
        let _ = verified_tx.send(());
        let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
    }));

    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let doc = marked_doc(5, 200_000, 10).1;
    let path = write(src.path(), "held.txt", &doc);
    let cfg = rx.simple(Mode::Sieve);
    let sending = tokio::spawn(async move { send(&cfg, &[path]).await });

    // The document is verified; its commit waits in the hook.
    tokio::task::spawn_blocking(move || verified_rx.recv_timeout(Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("the document never reached its commit");
    assert!(rx.out.join("held.txt").metadata().is_err());
    // The sender goes away: the receiver ends the session and closes its documents.
    sending.abort();
    let st = rx.stats.clone();
    wait_for("the session to end", Duration::from_secs(20), || {
        st.sessions_failed.load(Ordering::Relaxed) == 1
    })
    .await;
    // Only now does the commit go on.
    go_tx.send(()).unwrap();
    wait_for("the commit to end", Duration::from_secs(20), || {
        st.docs_failed.load(Ordering::Relaxed) + st.docs_committed.load(Ordering::Relaxed) == 1
    })
    .await;
    assert_eq!(
        st.docs_committed.load(Ordering::Relaxed),
        0,
        "the commit went on after its session had ended"
    );
    assert!(
        !rx.out.join("held.txt").exists(),
        "a document whose session ended before its commit was committed"
    );
    rx.assert_no_partials_soon().await;

    // Without the hook, the same document goes through.
    *hooks::BEFORE_COMMIT.lock().unwrap() = None;
    let again = write(src.path(), "held.txt", &doc);
    rx.send_ok(&rx.simple(Mode::Sieve), &[again]).await;
    rx.assert_received("held.txt", &doc);
}
