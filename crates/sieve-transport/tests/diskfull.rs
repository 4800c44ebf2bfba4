//! The output disk fills up (a process fault): the receiver's output folder is a small
//! tmpfs. A document that does not fit fails cleanly: no partial file, no file under its name,
//! and the sender is told which document and why ("no space left on the receiver's disk"). The
//! session goes on with the other documents, the receiver keeps serving, and the same document
//! goes through once space returns. Needs root to mount the tmpfs; without it the test says so
//! and passes vacuously.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use sieve_core::message::Mode;

/// Unmounts (lazily: the receiver may still hold a descriptor) when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(at: &Path, bytes: u64) -> Option<Mount> {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
        .arg("tmpfs")
        .arg(at)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| Mount(at.to_path_buf()))
}

/// A receiver whose output folder is a 4 MiB tmpfs with 512 KiB left free by a filler file
/// (returned, so that a test can give the space back), or `None` without the right to mount.
async fn nearly_full_receiver(idle: Duration) -> Option<(Mount, TestReceiver, PathBuf)> {
    const SIZE: u64 = 4 << 20;
    let root = tempfile::tempdir().unwrap();
    let Some(mount) = mount_tmpfs(root.path(), SIZE) else {
        eprintln!("disk full: SKIPPED (cannot mount a tmpfs; run as root)");
        return None;
    };
    let rx = TestReceiver::start_with(root, |c| c.limits.idle_timeout = idle).await;
    let filler = rx.out.parent().unwrap().join("filler");
    std::fs::write(&filler, vec![7u8; (SIZE - (512 << 10)) as usize]).unwrap();
    Some((mount, rx, filler))
}

/// One channel carries every byte in order, so the receiver has failed the large document and
/// removed its temporary file before any byte of the next one arrives. With several channels a
/// small document's bytes may land while the large one is filling the disk, and then the small
/// one is the document that finds it full.
fn one_channel(rx: &TestReceiver) -> sieve_transport::sender::SendConfig {
    rx.simple(Mode::SecureOnly)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_disk_full_fails_cleanly_and_recovers() {
    let Some((_mount, rx, filler)) = nearly_full_receiver(Duration::from_secs(2)).await else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    let mut cfg = one_channel(&rx);
    cfg.idle_timeout = Duration::from_secs(2);

    // 512 KiB are free: send 1 MB.
    let doc = marked_doc(11, 1_000_000, 20).1;
    let big = write(src.path(), "big.txt", &doc);
    let small_doc = marked_doc(12, 20_000, 3).1;
    let small = write(src.path(), "small.txt", &small_doc);
    // The failed document must not end the session: the small one still arrives.
    let rep = send(&cfg, &[big.clone(), small.clone()])
        .await
        .expect("a full disk fails the document, not the session");
    let d = rep.documents.iter().find(|d| d.name == "big.txt").unwrap();
    assert!(
        !d.ok,
        "a document larger than the free space was acknowledged"
    );
    let why = d.error.as_deref().unwrap_or_default();
    eprintln!("disk full: big.txt failed: {why}");
    assert!(
        why.contains("StoreError")
            && why.contains("big.txt")
            && why.contains("no space left on the receiver's disk"),
        "the sender is not told the cause: {why}"
    );
    assert!(
        !why.contains(&*rx.out.to_string_lossy()),
        "the receiver's paths leak to the sender: {why}"
    );
    let s = rep
        .documents
        .iter()
        .find(|d| d.name == "small.txt")
        .unwrap();
    assert!(s.ok, "small.txt was not delivered: {:?}", s.error);
    rx.assert_received("small.txt", &small_doc);
    assert_eq!((rep.docs, rep.docs_ok), (2, 1));
    rx.sessions_settle().await;
    let st = rx.stats.clone();
    assert_eq!(
        st.sessions_failed.load(Ordering::Relaxed),
        0,
        "the session was aborted"
    );
    assert_eq!(st.docs_failed.load(Ordering::Relaxed), 1);
    rx.assert_no_partials_soon().await;
    assert!(!rx.out.join("big.txt").exists(), "a partial big.txt exists");

    // Space returns: the same document goes through, byte-identical.
    std::fs::remove_file(&filler).unwrap();
    rx.send_ok(&cfg, &[big]).await;
    rx.assert_received("big.txt", &doc);
    rx.assert_no_partials_soon().await;
}

/// A document the receiver fails early (its disk is full after half a MiB) is not sent to the
/// end: the failure's ACK comes back at once, and the sender skips the rest of the document
/// instead of spending the link on bytes the receiver drops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_failed_early_is_not_sent_to_the_end() {
    let Some((_mount, rx, _)) = nearly_full_receiver(Duration::from_secs(5)).await else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    // 128 MiB of cleartext against 512 KiB of free space.
    let doc = filler(21, 1 << 20).repeat(128);
    let big = write(src.path(), "huge.txt", &doc);
    let small_doc = marked_doc(22, 20_000, 3).1;
    let small = write(src.path(), "after.txt", &small_doc);
    let mut cfg = one_channel(&rx);
    cfg.idle_timeout = Duration::from_secs(5);
    let progress = std::sync::Arc::new(sieve_transport::sender::Progress::default());
    let rep = sieve_transport::sender::send(&cfg, &[big, small], progress.clone())
        .await
        .unwrap_or_else(|e| panic!("a full disk must fail the document, not the session: {e:#}"));
    let d = &rep.documents[0];
    assert!(!d.ok, "huge.txt was acknowledged");
    assert!(
        rep.documents[1].ok,
        "after.txt: {:?}",
        rep.documents[1].error
    );
    rx.assert_received("after.txt", &small_doc);
    let (sent, skipped) = (progress.sent(), progress.skipped.load(Ordering::Relaxed));
    eprintln!(
        "disk full: huge.txt failed; {} MB sent, {} MB skipped",
        sent >> 20,
        skipped >> 20
    );
    assert!(
        skipped > doc.len() as u64 / 2 && sent < doc.len() as u64 / 2,
        "the sender went on sending a failed document: {sent} bytes sent, {skipped} skipped"
    );
    // Every byte is either sent or skipped, none twice.
    assert_eq!(sent + skipped, progress.total_bytes.load(Ordering::Relaxed));
    rx.assert_no_partials_soon().await;
}
