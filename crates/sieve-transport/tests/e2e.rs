//! End-to-end and negative tests of the transfer: a real receiver and a real sender on loopback,
//! every received file compared byte for byte.

mod common;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use sieve_core::batch::BatchSplit;
use sieve_core::corpus::DocKind;
use sieve_core::gen::XpSpec;
use sieve_core::layout::{Kind, Layout};
use sieve_core::marks::MarkConfig;
use sieve_core::message::{AckStatus, Bye, Doc, DocEnd, Join, Message, Mode};
use sieve_core::split::Split;
use sieve_transport::sender::Sendfile;
use sieve_transport::source::Classify;

const SPLITS: [Split; 3] = [Split::Dynamic, Split::Even, Split::Segment];
const BATCH_SPLITS: [BatchSplit; 4] = [
    BatchSplit::Dynamic,
    BatchSplit::File,
    BatchSplit::Even,
    BatchSplit::Segment,
];

/// (N, M) pairs; taken two at a time per split combination so that every value of N and M in
/// {1, 2, 3, 5} appears, with N = M and N ≠ M.
const PAIRS: [(u8, u8); 12] = [
    (1, 1),
    (2, 3),
    (3, 5),
    (5, 2),
    (1, 5),
    (5, 1),
    (3, 3),
    (2, 2),
    (5, 5),
    (3, 1),
    (1, 2),
    (2, 5),
];

const ANSWER: Duration = Duration::from_secs(10);

/// Every split × batch split, a few (N, M) each: a batch of three documents (so the batch split
/// applies) and a single document (so the split applies), all compared byte for byte.
async fn matrix(mode: Mode) {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    // Small, medium, and ~300 KB with many segments: with 16 KiB frames every channel gets work.
    let docs = [
        marked_doc(1, 3_000, 3).1,
        marked_doc(2, 40_000, 8).1,
        marked_doc(3, 300_000, 40).1,
    ];
    let mut sent = 0;
    let mut combo = 0;
    for split in SPLITS {
        for batch in BATCH_SPLITS {
            for k in 0..2 {
                let (n, m) = PAIRS[(2 * combo + k) % PAIRS.len()];
                let tag = format!("{mode:?}-{split}-{batch}-{n}x{m}");
                let cfg = rx.config(mode, n, m, split, batch);

                let files: Vec<PathBuf> = docs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| write(src.path(), &format!("{tag}-batch{i}.txt"), d))
                    .collect();
                let r = rx.send_ok(&cfg, &files).await;
                assert_eq!(r.secure_channels, n, "{tag}");
                match mode {
                    Mode::Sieve => {
                        assert_eq!(r.plain_channels, m, "{tag}");
                        assert!(r.plain_bytes > 0 && r.secure_bytes > 0, "{tag}: {r:?}");
                    }
                    Mode::SecureOnly => {
                        assert_eq!(r.plain_channels, 0, "{tag}");
                        assert_eq!(r.plain_bytes, 0, "{tag}");
                    }
                }
                for (i, d) in docs.iter().enumerate() {
                    rx.assert_received(&format!("{tag}-batch{i}.txt"), d);
                }

                let single = write(src.path(), &format!("{tag}-single.txt"), &docs[2]);
                rx.send_ok(&cfg, &[single]).await;
                rx.assert_received(&format!("{tag}-single.txt"), &docs[2]);
                sent += 4;
            }
            combo += 1;
        }
    }
    assert_eq!(
        rx.out_names().len(),
        sent,
        "exactly the documents sent, and no temporary file"
    );
    assert_eq!(rx.stats.docs_committed.load(Ordering::Relaxed), sent as u64);
    assert_eq!(rx.stats.bad_joins.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_sieve() {
    matrix(Mode::Sieve).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_secure_only() {
    matrix(Mode::SecureOnly).await;
}

/// `--mode auto` on loopback with dense documents (a marked value per line), alone and in one
/// session with a sparse x-P file, some well marked and counted rather than collected where
/// auto expects secure-only: whatever it chooses, the receiver writes every file as it is; and
/// so it does through the sieve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_sends_dense_documents_exactly() {
    let rx = TestReceiver::start().await;
    let dir = fast_tempdir();
    let mut files = Vec::new();
    for (i, kind) in [DocKind::Log, DocKind::Csv].into_iter().enumerate() {
        let mut bytes = Vec::new();
        sieve_core::corpus::write(kind, 2 << 20, 0.1, i as u64, true, &mut bytes, |_| {}).unwrap();
        files.push((format!("{kind}.txt"), bytes));
    }
    let mut xp = Vec::new();
    sieve_core::gen::write_xp(
        XpSpec {
            size: 1 << 20,
            proportion: 0.1,
            seed: 3,
        },
        &mut xp,
    )
    .unwrap();
    files.push(("xp.txt".into(), xp));
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|(name, bytes)| write(dir.path(), name, bytes))
        .collect();
    let mut cfg = rx.simple(Mode::Sieve);
    cfg.mode = sieve_transport::sender::SendMode::Auto;
    // All three in one session, then each dense document alone (under another name).
    assert!(rx.send_ok(&cfg, &paths).await.decision.is_some());
    for (name, bytes) in &files {
        rx.assert_received(name, bytes);
    }
    for (name, bytes) in &files[..2] {
        let alone = format!("alone-{name}");
        let p = write(dir.path(), &alone, bytes);
        assert!(rx.send_ok(&cfg, &[p]).await.decision.is_some());
        rx.assert_received(&alone, bytes);
    }
    // Through the sieve, two channels of each kind writing each document's runs at once (in
    // blocks patched in memory where they are dense).
    let sieve = rx.config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic);
    for (name, bytes) in &files {
        let sieved = format!("sieved-{name}");
        let p = write(dir.path(), &sieved, bytes);
        rx.send_ok(&sieve, &[p]).await;
        rx.assert_received(&sieved, bytes);
    }
}

/// The documents the edge-case tests send, each with what the receiver must write.
fn edge_documents() -> Vec<(&'static str, Marked)> {
    let straddle = {
        // A start mark across the 8 KiB boundary, an end mark across 16 KiB (a frame boundary
        // here), a literal start mark across 32 KiB, a start mark across 64 KiB.
        let d = Marked::new()
            .fill_to(8190, 1)
            .start()
            .fill_to(16382, 2)
            .end()
            .fill_to(32766, 3);
        let d = d
            .literal_start()
            .fill_to(65534, 4)
            .start()
            .fill_to(70_000, 5)
            .end()
            .fill_to(72_000, 6);
        assert_eq!(&d.raw[8190..8194], b"<$S>");
        assert_eq!(&d.raw[16382..16386], b"<$E>");
        assert_eq!(&d.raw[32766..32771], b"\\<$S>");
        assert_eq!(&d.raw[65534..65538], b"<$S>");
        d
    };
    let binary = Marked::new()
        .text(&safe_binary(10, 5_000))
        .text(b"\0\xff\xfe\xc0\x80")
        .start()
        .text(&safe_binary(11, 20_000))
        .literal_start()
        .text(b"\0")
        .literal_end()
        .text(&safe_binary(12, 3_000))
        .end()
        .text(&safe_binary(13, 7_000))
        .literal_start()
        .text(b"\xff")
        .escaped_escape()
        .start()
        .text(b"\0\0\0")
        .end()
        .text(&safe_binary(14, 30_000));
    vec![
        ("empty.txt", Marked::new()),
        (
            "no-classified.txt",
            Marked::new().fill_to(50_000, 20).text(b"a\\b c:\\dir\\"),
        ),
        (
            "all-classified.txt",
            Marked::new().start().fill_to(40_000, 21).end(),
        ),
        ("only-marks.txt", Marked::new().start().end()),
        (
            "start-and-end.txt",
            Marked::new()
                .start()
                .text(b"head")
                .end()
                .fill_to(30_000, 22)
                .start()
                .fill_to(45_000, 23)
                .end(),
        ),
        (
            "adjacent-and-empty.txt",
            Marked::new()
                .start()
                .end()
                .text(b"a")
                .start()
                .text(b"b")
                .end()
                .start()
                .text(b"c")
                .end()
                .text(b"d")
                .start()
                .end()
                .start()
                .end()
                .fill_to(20_000, 24)
                .start()
                .fill_to(40_000, 25)
                .end()
                .start()
                .fill_to(60_000, 26)
                .end()
                .start()
                .end(),
        ),
        ("binary.bin", binary),
        ("straddle.txt", straddle),
    ]
}

/// Empty, unclassified, all classified, classified at both ends, adjacent and empty segments,
/// binary content, marks across buffer boundaries: each alone and all in one batch, in both modes
/// over several channel layouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_case_documents() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let docs = edge_documents();
    let layouts = [
        (1, 1, Split::Dynamic, BatchSplit::Dynamic),
        (2, 3, Split::Even, BatchSplit::Even),
        (3, 2, Split::Segment, BatchSplit::Segment),
        (5, 1, Split::Dynamic, BatchSplit::File),
    ];
    for mode in [Mode::Sieve, Mode::SecureOnly] {
        for (n, m, split, batch) in layouts {
            let cfg = rx.config(mode, n, m, split, batch);
            let tag = format!("{mode:?}-{n}x{m}-{split}-{batch}");
            for (name, d) in &docs {
                let f = write(src.path(), &format!("{tag}-single-{name}"), &d.raw);
                rx.send_ok(&cfg, &[f]).await;
                rx.assert_received(&format!("{tag}-single-{name}"), &d.raw);
            }
            let files: Vec<PathBuf> = docs
                .iter()
                .map(|(name, d)| write(src.path(), &format!("{tag}-batch-{name}"), &d.raw))
                .collect();
            rx.send_ok(&cfg, &files).await;
            for (name, d) in &docs {
                rx.assert_received(&format!("{tag}-batch-{name}"), &d.raw);
            }
        }
    }
    assert!(rx
        .out_names()
        .iter()
        .all(|n| !n.starts_with(".sieve-partial-")));
}

/// Secure by default, through the library: with `allow_clear` off (the default of
/// `sieve send`), a document without a mark travels secure-only in every mode, alone or beside
/// a marked one; the report says which and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_nobody_classified_travel_secure_only_unless_allowed_in_the_clear() {
    use sieve_transport::sender::{SendMode, UNMARKED_REASON};
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let bare = b"card 4111 1111 1111 1111, iban DE89 3704 0044 0532 0130 00\n".repeat(2000);
    let marked = b"dear <$S>Ada Lovelace<$E>, all is well\n".repeat(100);
    let strict = |mode: SendMode| sieve_transport::sender::SendConfig {
        mode,
        allow_clear: false,
        ..rx.config(Mode::Sieve, 1, 2, Split::Dynamic, BatchSplit::Dynamic)
    };
    for (i, mode) in [SendMode::Fixed(Mode::Sieve), SendMode::Auto]
        .into_iter()
        .enumerate()
    {
        // Alone: the session is secure-only, and says why.
        let f = write(src.path(), &format!("{i}-bare.csv"), &bare);
        let r = rx.send_ok(&strict(mode), &[f]).await;
        rx.assert_received(&format!("{i}-bare.csv"), &bare);
        assert_eq!(r.mode, Mode::SecureOnly, "{mode}");
        assert_eq!((r.plain_bytes, r.secure_bytes), (0, bare.len() as u64));
        assert_eq!(r.unmarked, vec![format!("{i}-bare.csv")]);
        let d = r.decision.expect("a decision");
        assert_eq!(
            (d.chosen, d.reason.as_str()),
            (Mode::SecureOnly, UNMARKED_REASON)
        );
        assert!(d.predicted_ms.is_none());
        // Beside a marked one in sieve mode: only the marked one's cleartext goes in the clear.
        if mode == SendMode::Fixed(Mode::Sieve) {
            let f = write(src.path(), "mixed-bare.csv", &bare);
            let g = write(src.path(), "mixed-marked.txt", &marked);
            let r = rx.send_ok(&strict(mode), &[f, g]).await;
            assert_eq!(r.mode, Mode::Sieve);
            assert_eq!(r.unmarked, vec!["mixed-bare.csv".to_string()]);
            let marked_clear = marked.len() as u64 - 100 * (12 + 8);
            assert_eq!(r.plain_bytes, marked_clear, "{r:?}");
        }
    }
    // Allowed in the clear: the sieve sends it as before.
    let f = write(src.path(), "allowed.csv", &bare);
    let cfg = sieve_transport::sender::SendConfig {
        allow_clear: true,
        ..strict(SendMode::Fixed(Mode::Sieve))
    };
    let r = rx.send_ok(&cfg, &[f]).await;
    rx.assert_received("allowed.csv", &bare);
    assert_eq!((r.mode, r.plain_bytes), (Mode::Sieve, bare.len() as u64));
    assert!(r.unmarked.is_empty() && r.unclassified == vec!["allowed.csv".to_string()]);
}

/// `--strip-marks`: the receiver writes the document without its marks, escapes resolved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strip_marks() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let mut docs = edge_documents();
    docs.push((
        "thesis-example.txt",
        Marked {
            raw: b"ab<$S>cd<$E>e\\<$S>f<$S>gh<$E>".to_vec(),
            stripped: b"abcde<$S>fgh".to_vec(),
        },
    ));
    docs.push((
        "escaped-escape.txt",
        Marked {
            raw: b"\\\\<$S>x<$E>\\y".to_vec(),
            stripped: b"\\x\\y".to_vec(),
        },
    ));
    let (content, marked) = marked_doc(7, 100_000, 12);
    docs.push((
        "generated.txt",
        Marked {
            raw: marked,
            stripped: content,
        },
    ));
    let strip = Classify::Marks(MarkConfig {
        strip: true,
        ..MarkConfig::default()
    });
    // Mapped (frames spanning content runs; cleartext by sendfile, the default, or copied) and
    // read (--no-mmap).
    for (mode, n, m, mmap, sendfile) in [
        (Mode::Sieve, 1, 1, true, Sendfile::Never),
        (Mode::Sieve, 1, 1, true, Sendfile::Always),
        (Mode::Sieve, 1, 1, false, Sendfile::Always),
        (Mode::Sieve, 3, 2, true, Sendfile::Never),
        (Mode::Sieve, 2, 3, true, Sendfile::Always),
        (Mode::SecureOnly, 2, 0, false, Sendfile::Never),
    ] {
        let cfg = sieve_transport::sender::SendConfig {
            classify: strip.clone(),
            mmap,
            sendfile,
            ..rx.config(mode, n, m, Split::Dynamic, BatchSplit::Dynamic)
        };
        let tag = format!("{mode:?}-{n}x{m}-{mmap}-{sendfile:?}");
        let files: Vec<PathBuf> = docs
            .iter()
            .map(|(name, d)| write(src.path(), &format!("{tag}-{name}"), &d.raw))
            .collect();
        rx.send_ok(&cfg, &files).await;
        for (name, d) in &docs {
            rx.assert_received(&format!("{tag}-{name}"), &d.stripped);
        }
    }
}

/// `--ranges`: classified ranges from a JSON file over a binary document; the output is the
/// input, byte for byte, and only the classified bytes went over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_file_over_binary() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let data = binary(30, 200_000);
    let ranges = write(
        src.path(),
        "ranges.json",
        br#"{"ranges": [[0, 100], [5000, 5000], [5000, 20000], [20000, 20001], [150000, 200000]]}"#,
    );
    let classified = 100 + 15_000 + 1 + 50_000;
    for (mode, n, m, split) in [
        (Mode::Sieve, 1, 1, Split::Dynamic),
        (Mode::Sieve, 2, 3, Split::Even),
        (Mode::Sieve, 3, 2, Split::Segment),
        (Mode::SecureOnly, 2, 0, Split::Dynamic),
    ] {
        let cfg = sieve_transport::sender::SendConfig {
            classify: Classify::RangesFile(ranges.clone()),
            ..rx.config(mode, n, m, split, BatchSplit::Dynamic)
        };
        let name = format!("{mode:?}-{n}x{m}-{split}.bin");
        let f = write(src.path(), &name, &data);
        let r = rx.send_ok(&cfg, &[f]).await;
        rx.assert_received(&name, &data);
        match mode {
            Mode::Sieve => assert_eq!(
                (r.secure_bytes, r.plain_bytes),
                (classified, data.len() as u64 - classified)
            ),
            Mode::SecureOnly => assert_eq!((r.secure_bytes, r.plain_bytes), (data.len() as u64, 0)),
        }
    }
}

/// 10 000 tiny documents in one session, every one of them committed with the right bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tiny_documents() {
    let rx = TestReceiver::start_with(fast_tempdir(), |_| {}).await;
    let src = fast_tempdir();
    let docs: Vec<(String, Vec<u8>)> = (0..10_000)
        .map(|i| {
            let body = match i % 4 {
                0 => format!("{i}"),
                1 => format!("<$S>{i}<$E>"),
                2 => format!("a<$S>{i}<$E>b"),
                _ => String::new(),
            };
            (format!("tiny-{i:05}.txt"), body.into_bytes())
        })
        .collect();
    let files: Vec<PathBuf> = docs.iter().map(|(n, b)| write(src.path(), n, b)).collect();
    let r = rx
        .send_ok(
            &rx.config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic),
            &files,
        )
        .await;
    assert_eq!(r.docs_ok, 10_000);
    let names = rx.out_names();
    assert_eq!(names.len(), 10_000);
    for (n, b) in &docs {
        rx.assert_received(n, b);
    }
}

/// 16 sessions at once against one receiver, with different modes and channel counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_sessions_at_once() {
    let rx = Arc::new(TestReceiver::start().await);
    let src = tempfile::tempdir().unwrap();
    let mut tasks = Vec::new();
    for s in 0..16u8 {
        let mode = if s % 4 == 3 {
            Mode::SecureOnly
        } else {
            Mode::Sieve
        };
        let (n, m) = PAIRS[s as usize % PAIRS.len()];
        let cfg = rx.config(
            mode,
            n,
            m,
            SPLITS[s as usize % 3],
            BATCH_SPLITS[s as usize % 4],
        );
        let docs: Vec<(String, Vec<u8>)> = (0..3)
            .map(|i| {
                (
                    format!("session{s:02}-doc{i}.txt"),
                    marked_doc(100 + u64::from(s) * 3 + i, 20_000 + 40_000 * i as usize, 6).1,
                )
            })
            .collect();
        let files: Vec<PathBuf> = docs.iter().map(|(n, d)| write(src.path(), n, d)).collect();
        let rx = rx.clone();
        tasks.push(tokio::spawn(async move {
            rx.send_ok(&cfg, &files).await;
            docs
        }));
    }
    for t in tasks {
        for (name, d) in t.await.expect("session task") {
            rx.assert_received(&name, &d);
        }
    }
    assert_eq!(rx.out_names().len(), 48);
    assert_eq!(rx.stats.sessions_started.load(Ordering::Relaxed), 16);
    wait_for("every session to finish", ANSWER, || {
        rx.stats.sessions_completed.load(Ordering::Relaxed) == 16
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Negative tests
// ---------------------------------------------------------------------------------------------

/// Unbalanced, stray or nested marks: `send` fails with the byte offset before anything is sent
/// (no session starts: channel 0, opened while the documents were prepared, is closed before
/// its HELLO), and nothing reaches the output folder (not even the correctly marked files of the
/// same batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn badly_marked_documents_fail_before_anything_is_sent() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let good = write(src.path(), "good.txt", b"fine <$S>secret<$E> text");
    let cases: [(&str, &[u8], &str); 4] = [
        ("unclosed.txt", b"0123456789<$S>never closed", "byte 10"),
        ("stray.txt", b"abc<$E>def", "byte 3"),
        ("nested.txt", b"<$S>a<$S>b<$E><$E>", "byte 5"),
        (
            "unclosed-late.txt",
            &[b"x".repeat(100_000).as_slice(), b"<$S>"].concat(),
            "byte 100000",
        ),
    ];
    for (name, bytes, offset) in cases {
        let bad = write(src.path(), name, bytes);
        for (n, m) in [(1, 1), (3, 2)] {
            let cfg = rx.config(Mode::Sieve, n, m, Split::Dynamic, BatchSplit::Dynamic);
            let err = send(&cfg, &[good.clone(), bad.clone()])
                .await
                .expect_err("a badly marked file must fail");
            let msg = format!("{err:#}");
            assert!(msg.contains(offset) && msg.contains(name), "{name}: {msg}");
        }
        // Secure-only sends the bytes as they are (marks are not interpreted), unless the marks
        // are to be stripped: then they are parsed, and must be well formed, in either mode.
        let strip = Classify::Marks(MarkConfig {
            strip: true,
            ..MarkConfig::default()
        });
        let cfg = sieve_transport::sender::SendConfig {
            classify: strip,
            ..rx.simple(Mode::SecureOnly)
        };
        let err = send(&cfg, &[good.clone(), bad.clone()])
            .await
            .expect_err("strip must parse the marks");
        assert!(format!("{err:#}").contains(offset), "{err:#}");
    }
    assert_eq!(
        rx.stats.sessions_started.load(Ordering::Relaxed),
        0,
        "nothing may be sent"
    );
    assert!(rx.out_names().is_empty(), "{:?}", rx.out_names());
}

/// Plain connections with wrong tokens (unknown session, random token) are refused and counted
/// while an honest session runs, and that session completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_join_tokens_are_refused_while_a_session_completes() {
    let rx = Arc::new(TestReceiver::start().await);
    let src = tempfile::tempdir().unwrap();
    let doc = marked_doc(40, 2_000_000, 50).1;
    let f = write(src.path(), "honest.txt", &doc);
    let cfg = rx.config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic);
    let honest = {
        let rx = rx.clone();
        tokio::spawn(async move { rx.send_ok(&cfg, &[f]).await })
    };
    wait_for("the honest session to start", ANSWER, || {
        rx.stats.sessions_started.load(Ordering::Relaxed) == 1
    })
    .await;
    let attempts = 8;
    for i in 0..attempts {
        let join = Join {
            session_id: rand::random(),
            kind: Kind::Plain,
            index: i % 2,
            token: rand::random(),
        };
        let accepted = plain_join(rx.plain, join)
            .await
            .expect("the receiver answers");
        assert!(
            accepted.is_none(),
            "a JOIN with a random token was accepted"
        );
    }
    honest.await.expect("honest session");
    rx.assert_received("honest.txt", &doc);
    assert!(rx.stats.bad_joins.load(Ordering::Relaxed) >= attempts as u64);
    assert_eq!(rx.stats.sessions_failed.load(Ordering::Relaxed), 0);
}

/// Against a live session, by hand: a wrong token for the right session and slot is refused and
/// does not take the slot; an index beyond the session's channels is refused; the right token
/// joins; replaying it is refused; the session then completes a document over both channels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_needs_the_exported_token() {
    let rx = TestReceiver::start().await;
    let mut s = RawSession::open(&rx, Mode::Sieve, 1, 1, 1).await.unwrap();
    let sid = s.session.session_id;
    let bad = |join: Join| plain_join(rx.plain, join);
    let right = s.key.token(Kind::Plain, 0);
    let mut wrong = right;
    wrong[31] ^= 1;
    assert!(bad(Join {
        session_id: sid,
        kind: Kind::Plain,
        index: 0,
        token: wrong
    })
    .await
    .unwrap()
    .is_none());
    assert!(bad(Join {
        session_id: sid,
        kind: Kind::Plain,
        index: 0,
        token: s.key.token(Kind::Secure, 0)
    })
    .await
    .unwrap()
    .is_none());
    assert!(bad(Join {
        session_id: sid,
        kind: Kind::Plain,
        index: 1,
        token: s.key.token(Kind::Plain, 1)
    })
    .await
    .unwrap()
    .is_none());
    assert_eq!(rx.stats.bad_joins.load(Ordering::Relaxed), 3);

    let mut plain = plain_join(
        rx.plain,
        Join {
            session_id: sid,
            kind: Kind::Plain,
            index: 0,
            token: right,
        },
    )
    .await
    .unwrap()
    .expect("the right token joins");
    assert!(
        bad(Join {
            session_id: sid,
            kind: Kind::Plain,
            index: 0,
            token: right
        })
        .await
        .unwrap()
        .is_none(),
        "a replayed token joined"
    );
    assert_eq!(rx.stats.bad_joins.load(Ordering::Relaxed), 4);

    // "hello " in the clear, "world" classified, "!" in the clear.
    let layout = Layout {
        first: Kind::Plain,
        lens: vec![6, 5, 1],
    };
    let marks = Some((b"<$S>".to_vec(), b"<$E>".to_vec()));
    s.send(|o| {
        Doc {
            doc: 0,
            name: "joined.txt".into(),
            layout,
            marks,
            padding: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    plain.data(0, 0, b"hello ").await.unwrap();
    plain.data(0, 6, b"!").await.unwrap();
    plain.flush().await.unwrap();
    s.writer.data(0, 0, b"world").await.unwrap();
    let digest = s.plain_digest(0, &[(0, b"hello "), (6, b"!")]);
    s.send(|o| {
        DocEnd {
            doc: 0,
            plain_digest: digest,
            secure_len: 5,
            plain_len: 7,
        }
        .encode(o)
    })
    .await
    .unwrap();
    match s.next(ANSWER).await.unwrap() {
        Message::Ack(a) => assert_eq!((a.doc, a.status), (0, AckStatus::Ok), "{a:?}"),
        other => panic!("expected an ACK, got {other:?}"),
    }
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    rx.assert_received("joined.txt", b"hello <$S>world<$E>!");
}

/// A plain channel that cannot connect (the receiver advertises an address where nothing
/// listens) fails the session with the reason and what to do, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_plain_address_fails_the_session_clearly() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let advertise = closed.local_addr().unwrap().to_string();
    drop(closed);
    let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
        c.plain_advertise = Some(advertise)
    })
    .await;
    let src = tempfile::tempdir().unwrap();
    let doc = Marked::new()
        .fill_to(50_000, 1)
        .start()
        .fill_to(60_000, 2)
        .end()
        .fill_to(100_000, 3)
        .raw;
    let f = write(src.path(), "never.txt", &doc);
    let err = send(&rx.simple(Mode::Sieve), &[f])
        .await
        .expect_err("no plain channel, no session");
    let text = format!("{err:#}");
    assert!(
        text.contains("cannot open a plain channel") && text.contains("nothing listens there"),
        "{text}"
    );
    rx.assert_no_partials_soon().await;
    assert!(rx.out_names().is_empty(), "{:?}", rx.out_names());
}

/// A byte changed on a plain channel (by a proxy the receiver advertises): the document fails
/// with an integrity error, no file and no temporary file remain, and the receiver serves the
/// next session through the same (now honest) proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_plain_byte_fails_the_document() {
    let proxy = ProxyListener::bind().await;
    let advertise = proxy.addr.to_string();
    let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
        c.plain_advertise = Some(advertise)
    })
    .await;
    // Offset 200 of the first plain connection: past its JOIN (55 bytes) and the first DATA
    // frame's header, inside the payload of a 16 KiB frame.
    let proxy = proxy.forward(rx.plain, Some(200));
    let src = tempfile::tempdir().unwrap();
    let doc = Marked::new()
        .fill_to(100_000, 50)
        .start()
        .fill_to(120_000, 51)
        .end()
        .fill_to(200_000, 52)
        .raw;
    let victim = write(src.path(), "victim.txt", &doc);
    let r = send(&rx.simple(Mode::Sieve), &[victim])
        .await
        .expect("the session itself completes");
    assert_eq!(
        proxy.flipped.load(Ordering::Relaxed),
        1,
        "the proxy changed a byte"
    );
    assert_eq!(r.docs_ok, 0);
    let err = r.failures[0].error.as_deref().unwrap_or_default();
    assert!(
        err.contains("IntegrityError") && err.contains("digest"),
        "{err}"
    );
    assert_eq!(rx.stats.docs_failed.load(Ordering::Relaxed), 1);
    rx.assert_no_partials_soon().await;
    assert!(rx.out_names().is_empty(), "{:?}", rx.out_names());

    let next = write(src.path(), "next.txt", &doc);
    rx.send_ok(&rx.simple(Mode::Sieve), &[next]).await;
    rx.assert_received("next.txt", &doc);
    assert_eq!(proxy.connections.load(Ordering::Relaxed), 2);
    assert_eq!(rx.out_names(), vec!["next.txt".to_string()]);
}

/// The plain channels do not show where the classified parts sat (docs/DESIGN.md §6: an observer
/// must not learn the layout). Recorded by a proxy on the plain channel, the DATA frames are the
/// scheduler's chunks, one after the other, however the cleartext runs fall: mapped and sent by
/// `sendfile(2)` (the default), mapped and copied, or read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_frames_do_not_show_the_layout() {
    let src = tempfile::tempdir().unwrap();
    // Sixty classified parts of 100-3,100 bytes at irregular places in 1.1 MB.
    let mut d = Marked::new();
    for i in 0..60u64 {
        let pos = d.raw.len() + 5_000 + (i as usize * 7_919) % 23_000;
        d = d.fill_to(pos, i).start();
        let pos = d.raw.len() + 100 + (i as usize * 104_729) % 3_000;
        d = d.fill_to(pos, 1000 + i).end();
    }
    let pos = d.raw.len();
    let d = d.fill_to(pos + 10_000, 7);
    let chunk: u64 = 64 << 10;
    for (mmap, sendfile) in [
        (true, Sendfile::Never),
        (true, Sendfile::Always),
        (false, Sendfile::Always),
    ] {
        let proxy = ProxyListener::bind().await;
        let advertise = proxy.addr.to_string();
        let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
            c.plain_advertise = Some(advertise)
        })
        .await;
        let proxy = proxy.forward(rx.plain, None);
        let cfg = sieve_transport::sender::SendConfig {
            mmap,
            sendfile,
            chunk: sieve_transport::sender::Chunk::Bytes(chunk as u32),
            ..rx.simple(Mode::Sieve)
        };
        let name = format!("layout-{mmap}-{sendfile:?}.txt");
        let r = rx.send_ok(&cfg, &[write(src.path(), &name, &d.raw)]).await;
        rx.assert_received(&name, &d.raw);
        let up = proxy.upstream.lock().unwrap()[0].clone();
        let (mut pos, mut frames) = (0, Vec::new());
        while pos < up.len() {
            let h = sieve_core::frame::parse_header(&up[pos..], &Default::default()).unwrap();
            let payload = &up[pos + sieve_core::frame::HEADER_LEN..][..h.len as usize];
            if h.ty == sieve_core::frame::FrameType::Data {
                let f = sieve_core::message::DataRef::parse(payload).unwrap();
                frames.push((f.offset, f.payload.len() as u64));
            }
            // Compressed frames are cut the same way: by size alone.
            if h.ty == sieve_core::frame::FrameType::ZData {
                let f = sieve_core::message::ZDataRef::parse(payload).unwrap();
                frames.push((f.offset, u64::from(f.declared_len)));
            }
            pos += sieve_core::frame::HEADER_LEN + h.len as usize;
        }
        let plain = r.plain_bytes;
        let want: Vec<(u64, u64)> = (0..plain)
            .step_by(chunk as usize)
            .map(|o| (o, chunk.min(plain - o)))
            .collect();
        assert!(want.len() > 10, "{} frames", want.len());
        assert_eq!(frames, want, "mmap {mmap}, sendfile {sendfile:?}");
    }
}

/// Names that would leave the output folder, or are no file names, are refused with an ACK; the
/// session goes on and nothing is written anywhere but the output folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_file_names_are_refused() {
    let rx = TestReceiver::start().await;
    let hostile = [
        "../evil",
        "a/../../evil",
        "a//b",
        "a/",
        "a/./b",
        ".bashrc",
        "a/.ssh/authorized_keys",
        "/etc/sieve-evil",
        "x\0y",
        "..",
        ".",
        "",
        "a\\b",
        "..\\evil",
        ".sieve-partial-x",
        "new\nline",
    ];
    let mut s = RawSession::open(&rx, Mode::SecureOnly, 1, 0, hostile.len() as u32 + 1)
        .await
        .unwrap();
    let empty_digest = s.plain_digest(0, &[]);
    for (i, name) in hostile.iter().enumerate() {
        let doc = Doc {
            doc: i as u32,
            name: name.to_string(),
            layout: Layout::whole(Kind::Secure, 4),
            marks: None,
            padding: 0,
        };
        s.send(|o| doc.encode(o)).await.unwrap();
        match s.next(ANSWER).await.unwrap() {
            Message::Ack(a) => {
                assert_eq!(
                    (a.doc, a.status),
                    (i as u32, AckStatus::Refused),
                    "{name:?}: {a:?}"
                );
                assert!(a.message.contains("name"), "{a:?}");
            }
            other => panic!("{name:?}: expected an ACK, got {other:?}"),
        }
        // Pieces and the end of a refused document are dropped.
        s.writer.data(i as u32, 0, b"evil").await.unwrap();
        s.send(|o| {
            DocEnd {
                doc: i as u32,
                plain_digest: empty_digest,
                secure_len: 4,
                plain_len: 0,
            }
            .encode(o)
        })
        .await
        .unwrap();
    }
    // The session still works.
    let last = hostile.len() as u32;
    s.send(|o| {
        Doc {
            doc: last,
            name: "fine.txt".into(),
            layout: Layout::whole(Kind::Secure, 4),
            marks: None,
            padding: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    s.writer.data(last, 0, b"evil").await.unwrap();
    s.send(|o| {
        DocEnd {
            doc: last,
            plain_digest: empty_digest,
            secure_len: 4,
            plain_len: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    match s.next(ANSWER).await.unwrap() {
        Message::Ack(a) => assert_eq!((a.doc, a.status), (last, AckStatus::Ok), "{a:?}"),
        other => panic!("expected an ACK, got {other:?}"),
    }
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    rx.assert_received("fine.txt", b"evil");
    assert_eq!(rx.out_names(), vec!["fine.txt".to_string()]);
    assert_eq!(
        names_in(rx.root.path()),
        vec!["out".to_string()],
        "nothing beside the output folder"
    );
    assert!(!std::path::Path::new("/etc/sieve-evil").exists());
    assert_eq!(
        rx.stats.docs_failed.load(Ordering::Relaxed),
        hostile.len() as u64
    );
    wait_for("the session to finish", ANSWER, || {
        rx.stats.sessions_completed.load(Ordering::Relaxed) == 1
    })
    .await;
}

/// A document over the receiver's size limit is refused; the others of the batch are delivered
/// and the session completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_document_is_refused_and_the_rest_delivered() {
    let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
        c.limits.max_doc_bytes = 50_000
    })
    .await;
    let src = tempfile::tempdir().unwrap();
    let small = marked_doc(60, 20_000, 4).1;
    let big = marked_doc(61, 200_000, 10).1;
    for (mode, n, m) in [(Mode::Sieve, 2, 2), (Mode::SecureOnly, 1, 0)] {
        let files = [
            write(src.path(), &format!("{mode:?}-small1.txt"), &small),
            write(src.path(), &format!("{mode:?}-big.txt"), &big),
            write(src.path(), &format!("{mode:?}-small2.txt"), &small),
        ];
        let cfg = rx.config(mode, n, m, Split::Dynamic, BatchSplit::Dynamic);
        let started = std::time::Instant::now();
        let r = send(&cfg, &files).await.expect("the session completes");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(r.docs_ok, 2, "{:?}", r.failures);
        let err = r.failures[0].error.as_deref().unwrap_or_default();
        assert!(err.contains("Refused") && err.contains("limit"), "{err}");
        rx.assert_received(&format!("{mode:?}-small1.txt"), &small);
        rx.assert_received(&format!("{mode:?}-small2.txt"), &small);
    }
    assert_eq!(rx.out_names().len(), 4, "{:?}", rx.out_names());
}

/// A sender that stops in the middle of a document (its task dropped, every connection closed):
/// the receiver removes the temporary file, commits nothing, and serves the next session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_transfer_leaves_no_partial_file() {
    let rx = Arc::new(TestReceiver::start().await);
    let src = tempfile::tempdir().unwrap();
    let mut doc = Vec::new();
    let spec = XpSpec {
        size: 30_000_000,
        proportion: 0.1,
        seed: 70,
    };
    sieve_core::gen::write_xp(spec, &mut doc).unwrap();
    let f = write(src.path(), "abandoned.txt", &doc);
    let cfg = rx.config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic);
    let task = tokio::spawn(async move { send(&cfg, &[f]).await });
    let out = rx.out.clone();
    wait_for(
        "the receiver to start writing",
        Duration::from_secs(30),
        || !partials(&out).is_empty(),
    )
    .await;
    task.abort();
    assert!(
        task.await.is_err(),
        "the transfer finished before it was abandoned"
    );
    rx.assert_no_partials_soon().await;
    wait_for("the session to fail", ANSWER, || {
        rx.stats.sessions_failed.load(Ordering::Relaxed) == 1
    })
    .await;
    assert!(rx.out_names().is_empty(), "{:?}", rx.out_names());
    assert_eq!(rx.stats.docs_committed.load(Ordering::Relaxed), 0);

    let next = write(src.path(), "next.txt", b"a <$S>b<$E> c");
    rx.send_ok(&rx.simple(Mode::Sieve), &[next]).await;
    rx.assert_received("next.txt", b"a <$S>b<$E> c");
}

/// A document large enough for the marks pass to run on several threads (parts of 8 MiB),
/// with marks and escapes everywhere: received byte for byte, with and without the mapping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_document_with_parallel_marks_pass() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let (_, marked) = marked_doc(11, 20_000_000, 400);
    for mmap in [true, false] {
        let cfg = sieve_transport::sender::SendConfig {
            chunk: sieve_transport::sender::Chunk::Bytes(256 * 1024),
            mmap,
            ..rx.simple(Mode::Sieve)
        };
        let name = format!("large-{mmap}.txt");
        let f = write(src.path(), &name, &marked);
        rx.send_ok(&cfg, &[f]).await;
        rx.assert_received(&name, &marked);
    }
}

/// Cleartext by `sendfile(2)`, driving the writer directly: header and file slices, in parts,
/// arrive as one well-formed frame, between ordinary frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sendfile_frames_carry_the_file_bytes() {
    use sieve_core::frame::{FrameType, Limits};
    use sieve_core::message::DataRef;
    use sieve_transport::conn::{FrameReader, FrameWriter};

    let dir = tempfile::tempdir().unwrap();
    let content: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    let path = write(dir.path(), "f.bin", &content);
    let file = std::fs::File::open(&path).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    let (_r, w) = client.unwrap().into_split();
    let mut writer = FrameWriter::tcp(w);
    let mut reader = FrameReader::new(
        Box::new(server.unwrap().0),
        Limits {
            max_payload: 1 << 20,
        },
    );
    let sent = tokio::spawn(async move {
        writer.data(1, 0, b"head").await?;
        // Two parts, the second of two slices that are not next to each other in the file.
        let mut parts = vec![
            vec![(1000, &content[1000..201_000])],
            vec![
                (300_000, &content[300_000..400_000]),
                (450_000, &content[450_000..501_000]),
            ],
        ]
        .into_iter();
        writer
            .data_from_file(1, 4, 351_000, &file, || Ok(parts.next()))
            .await?;
        let mut one = Some(vec![(7, &content[7..8])]);
        writer
            .data_from_file(2, 0, 1, &file, || Ok(one.take()))
            .await?;
        writer.data(2, 1, b"tail").await?;
        writer.flush().await?;
        anyhow::Ok(content)
    });
    let mut got = Vec::new();
    for _ in 0..4 {
        let (ty, payload) = reader.read().await.unwrap().expect("a frame");
        assert_eq!(ty, FrameType::Data);
        let d = DataRef::parse(payload).unwrap();
        got.push((d.doc, d.offset, d.payload.to_vec()));
    }
    let content = sent.await.unwrap().unwrap();
    assert_eq!(got[0], (1, 0, b"head".to_vec()));
    let joined = [
        &content[1000..201_000],
        &content[300_000..400_000],
        &content[450_000..501_000],
    ]
    .concat();
    assert_eq!(got[1], (1, 4, joined));
    assert_eq!(got[2], (2, 0, content[7..8].to_vec()));
    assert_eq!(got[3], (2, 1, b"tail".to_vec()));
}
