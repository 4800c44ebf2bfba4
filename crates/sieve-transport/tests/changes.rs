//! A document rewritten in place while it is being sent (a file that changes while it is
//! sent can put classified bytes in the clear). The sender classified it once; the rewrite keeps
//! its size and moves a classified part into a range that was cleartext, so the bytes the sender
//! reads for that range are now classified. The sender must notice, cancel the document
//! (DOC_CANCEL), and the receiver must commit nothing; with a read lease the moved classified
//! bytes must not even reach the plain channel, whether the cleartext is copied into the socket
//! or queued there by reference (`sendfile`).
//!
//! The plain channel crosses a throttled proxy, so the send takes seconds and the rewrite lands
//! in the middle of it.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::proxy::{Fault, FaultProxy, Plan};
use common::*;
use sieve_core::message::Mode;
use sieve_transport::sender::{self, Progress, SendConfig, Sendfile, SessionReport};

/// Plain bytes per second through the proxy.
const RATE: u64 = 2 << 20;
/// Cleartext before and after the classified part: together more than the sender's socket can
/// hold (Linux lets a socket's send buffer grow to 4 MiB), so that the sender is still reading
/// the document when it is rewritten.
const PART: usize = 3 << 20;
const SECRET_BEFORE: &[u8] = b"classified-alpha";
const SECRET_MOVED: &[u8] = b"TOPSECRET-MOVED-INTO-CLEARTEXT";

/// Text that forms no mark, quickly (the tests run unoptimised, where a random generator per
/// byte would take seconds for these sizes).
fn text(seed: u64, len: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ.,;\n0123456789";
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize]
        })
        .collect()
}

/// The document as classified (a secret between two cleartext parts), and the same-size rewrite
/// that moves a classified part into the second cleartext part.
fn documents() -> (Vec<u8>, Vec<u8>) {
    let mut before = text(1, PART);
    before.extend_from_slice(b"<$S>");
    before.extend_from_slice(SECRET_BEFORE);
    before.extend_from_slice(b"<$E>");
    before.extend_from_slice(&text(2, PART));
    let mut after = before.clone();
    // The old classified range becomes cleartext...
    after[PART..PART + 8 + SECRET_BEFORE.len()].copy_from_slice(&text(3, 8 + SECRET_BEFORE.len()));
    // ...and classified parts now sit where cleartext was, every 128 KiB: some where the
    // sender has queued the old bytes in its socket already (by reference, with `sendfile`,
    // so that they go out as the rewrite leaves them unless the sender waits), some it has not
    // read yet. Each sits 100 bytes into a 16 KiB frame, so a frame header never splits it.
    let mut moved = b"<$S>".to_vec();
    moved.extend_from_slice(SECRET_MOVED);
    moved.extend_from_slice(b"<$E>");
    for k in 1..2 * PART / (128 << 10) {
        let at = k * (128 << 10) + 100;
        if (PART - 200..PART + 200).contains(&at) {
            continue;
        }
        after[at..at + moved.len()].copy_from_slice(&moved);
    }
    assert_eq!(after.len(), before.len());
    (before, after)
}

struct Rig {
    rx: TestReceiver,
    proxy: FaultProxy,
    src: tempfile::TempDir,
}

async fn rig() -> Rig {
    let proxy = FaultProxy::bind_narrow().await;
    let advertise = proxy.addr.to_string();
    let rx = TestReceiver::start_with(fast_tempdir(), |c| {
        c.plain_advertise = Some(advertise);
    })
    .await;
    proxy.set_target(rx.plain);
    proxy.set_plan(Plan::up(Fault::Throttle(RATE)));
    proxy.stats.record_up.store(true, Ordering::Relaxed);
    Rig {
        rx,
        proxy,
        src: tempfile::tempdir().unwrap(),
    }
}

/// Send `path` and, once `after_bytes` have crossed the throttled link, rewrite it in place with
/// `rewrite` (on a thread: with a read lease the writer's open waits for the sender).
async fn send_while_rewriting(
    r: &Rig,
    cfg: &SendConfig,
    files: &[PathBuf],
    after_bytes: u64,
    rewrite: impl FnOnce() + Send + 'static,
) -> (SessionReport, Duration) {
    let progress = Arc::new(Progress::default());
    let files = files.to_vec();
    let (cfg2, p2) = (cfg.clone(), progress.clone());
    let send = tokio::spawn(async move { sender::send(&cfg2, &files, p2).await });
    let t = Instant::now();
    while r.proxy.stats.up_bytes.load(Ordering::Relaxed) < after_bytes {
        assert!(!send.is_finished(), "the send ended before the rewrite");
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the send does not progress"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let total = progress.total_bytes.load(Ordering::Relaxed);
    assert!(
        progress.sent() < total,
        "the sender had handed every byte to its sockets before the rewrite"
    );
    eprintln!(
        "rewrite: {} bytes handed to the sockets, {} across the link",
        progress.sent(),
        r.proxy.stats.up_bytes.load(Ordering::Relaxed)
    );
    let writer = std::thread::spawn(rewrite);
    let report = send
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("the session failed instead of the document: {e:#}"));
    let took = t.elapsed();
    tokio::task::spawn_blocking(move || writer.join().unwrap())
        .await
        .unwrap();
    (report, took)
}

/// The first document of `report` was cancelled and not committed; any others were delivered.
fn assert_cancelled_and_nothing_committed(r: &Rig, report: &SessionReport, name: &str) {
    assert_eq!(
        report.docs_ok,
        report.docs - 1,
        "the changed document was delivered, or another was not: {:?}",
        report.failures
    );
    assert_eq!(report.failures[0].name, name);
    let err = report.failures[0].error.as_deref().unwrap_or_default();
    assert!(err.starts_with("Cancelled"), "{err}");
    assert!(err.contains("changed while it was being sent"), "{err}");
    assert!(
        !r.rx.out.join(name).exists(),
        "{name} was committed: {:?}",
        r.rx.out_names()
    );
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn write_doc(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    write(dir, name, bytes)
}

/// With a read lease (the sender owns the file), the rewrite waits until the sender has seen it
/// and its sockets have delivered what they held: the document is cancelled, nothing is
/// committed, and the moved classified bytes never reach the plain channel. Mapped and read
/// documents alike, cleartext copied or sent from the page cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewritten_during_the_send_with_a_lease_is_cancelled_and_nothing_leaks() {
    for (mmap, sendfile) in [
        (true, Sendfile::Never),
        (false, Sendfile::Never),
        (true, Sendfile::Always),
    ] {
        let r = rig().await;
        let (before, after) = documents();
        let name = format!("lease-{mmap}-{sendfile:?}.txt");
        let path = write_doc(r.src.path(), &name, &before);
        let cfg = SendConfig {
            mmap,
            sendfile,
            ..r.rx.simple(Mode::Sieve)
        };
        let p = path.clone();
        // A second document keeps the plain channel busy after the first is cancelled, so
        // that what its socket still held of the first goes out after the rewrite.
        let tail = write_doc(r.src.path(), &format!("tail-{name}"), &text(9, 3 << 20));
        let (report, took) =
            send_while_rewriting(&r, &cfg, &[path.clone(), tail], 64 * 1024, move || {
                let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                f.write_all_at(&after, 0).unwrap();
            })
            .await;
        eprintln!(
            "lease, mmap {mmap}, {sendfile:?}: {} of {} documents leased; cancelled after {took:?}; \
             {} plain bytes crossed the proxy",
            report.docs_leased,
            report.docs,
            r.proxy.stats.up_bytes.load(Ordering::Relaxed)
        );
        assert_cancelled_and_nothing_committed(&r, &report, &name);
        r.rx.assert_no_partials_soon().await;
        if report.docs_leased == report.docs {
            // Whatever the sender's sockets still held may go out after the session: wait for it.
            let mut last = usize::MAX;
            for _ in 0..60 {
                let now = r.proxy.stats.up_record.lock().unwrap().len();
                if now == last {
                    break;
                }
                last = now;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let wire = r.proxy.stats.up_record.lock().unwrap().clone();
            assert!(!wire.is_empty());
            assert!(
                !contains(&wire, SECRET_MOVED),
                "the moved classified part crossed the plain channel"
            );
        }
        // The file itself was rewritten once the sender let go.
        assert_eq!(std::fs::read(&path).unwrap().len(), before.len());
        assert!(contains(&std::fs::read(&path).unwrap(), SECRET_MOVED));
    }
}

/// Without a lease (the file is already open for writing elsewhere, so none can be taken), the
/// rewrite is noticed by the file's times: the document is still cancelled and nothing is
/// committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewritten_during_the_send_without_a_lease_is_cancelled() {
    for mmap in [true, false] {
        let r = rig().await;
        let (before, after) = documents();
        let name = format!("nolease-{mmap}.txt");
        let path = write_doc(r.src.path(), &name, &before);
        // A writer that holds the file open keeps any read lease from being granted.
        let held = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let cfg = SendConfig {
            mmap,
            ..r.rx.simple(Mode::Sieve)
        };
        let (report, took) = send_while_rewriting(
            &r,
            &cfg,
            std::slice::from_ref(&path),
            64 * 1024,
            move || {
                held.write_all_at(&after, 0).unwrap();
            },
        )
        .await;
        eprintln!("no lease, mmap {mmap}: cancelled after {took:?}");
        assert_eq!(report.docs_leased, 0);
        assert_cancelled_and_nothing_committed(&r, &report, &name);
        r.rx.assert_no_partials_soon().await;
    }
}

/// The same document, unchanged, arrives whole through the same rig: the cancellations above are
/// the rewrite's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_document_unchanged_is_delivered() {
    let r = rig().await;
    let (before, _) = documents();
    let path = write_doc(r.src.path(), "steady.txt", &before);
    let report = r.rx.send_ok(&r.rx.simple(Mode::Sieve), &[path]).await;
    r.rx.assert_received("steady.txt", &before);
    assert_eq!(report.secure_bytes, SECRET_BEFORE.len() as u64);
    let wire = r.proxy.stats.up_record.lock().unwrap().clone();
    assert!(!contains(&wire, SECRET_BEFORE));
}
