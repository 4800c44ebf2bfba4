//! Folders and names: a tree of 1 000 files arrives identical; names that would climb out of the
//! output folder, hide a file, or pass through a symbolic link planted in the output folder are
//! refused (by a hand-driven client that sends such manifests) and nothing is written outside the
//! folder; names that display as something else are refused, and with `--portable-names` names
//! Windows cannot hold; an existing file is never replaced unless the receiver overwrites, and received files
//! are readable by the receiver's user only unless it says otherwise.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use sieve_core::batch::BatchSplit;
use sieve_core::layout::{Kind, Layout};
use sieve_core::message::{AckStatus, Bye, Doc, DocEnd, Message, Mode};
use sieve_core::split::Split;
use sieve_transport::sender::{self, inputs, Progress};
use sieve_transport::store::StoreOptions;

const ANSWER: Duration = Duration::from_secs(10);

/// Every file beneath `dir`, as (relative path, bytes), sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_of_1000_files_in_nested_folders_arrives_identical() {
    let rx = TestReceiver::start_with(fast_tempdir(), |_| {}).await;
    let src = fast_tempdir();
    let root = src.path().join("dataset");
    let mut n = 0u64;
    for a in 0..10 {
        for b in 0..10 {
            let dir = root.join(format!("region-{a}")).join(format!("year-{b}"));
            std::fs::create_dir_all(&dir).unwrap();
            for c in 0..10 {
                // The same base names in every folder: only the paths keep them apart.
                let (_, marked) = marked_doc(n, 200 + (n as usize * 37) % 1500, 2);
                std::fs::write(dir.join(format!("part-{c}.csv")), marked).unwrap();
                n += 1;
            }
        }
    }
    let expanded = inputs::expand(std::slice::from_ref(&root), true, false).unwrap();
    assert_eq!(expanded.inputs.len(), 1000);
    assert!(expanded.skipped.is_empty());
    let cfg = rx.config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic);
    let prepared = sender::prepare(&cfg, expanded.inputs).await.unwrap();
    let report = sender::send_prepared(&cfg, prepared, Arc::new(Progress::default()))
        .await
        .unwrap();
    assert_eq!(report.docs_ok, 1000, "{:?}", report.failures.first());
    let sent = tree(&root);
    let got = tree(&rx.out.join("dataset"));
    assert_eq!(got.len(), 1000);
    assert!(got == sent, "the received tree differs from the sent one");
    // And as `diff -r` sees it, where the tool exists.
    if let Ok(o) = std::process::Command::new("diff")
        .arg("-r")
        .arg(&root)
        .arg(rx.out.join("dataset"))
        .output()
    {
        assert!(
            o.status.success(),
            "diff -r: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    assert_eq!(rx.out_names(), vec!["dataset".to_string()]);
    assert_eq!(
        mode_of(&rx.out.join("dataset/region-3/year-4/part-5.csv")),
        0o600
    );
    assert_eq!(mode_of(&rx.out.join("dataset/region-3")), 0o700);
}

/// A document of four classified bytes, sent by hand: manifest, data, end. Returns the ACK.
async fn send_by_hand(
    s: &mut RawSession,
    doc: u32,
    name: &str,
    between: impl FnOnce(),
) -> sieve_core::message::Ack {
    let empty = s.plain_digest(doc, &[]);
    s.send(|o| {
        Doc {
            doc,
            name: name.into(),
            layout: Layout::whole(Kind::Secure, 4),
            marks: None,
            padding: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    s.writer.data(doc, 0, b"evil").await.unwrap();
    s.writer.flush().await.unwrap();
    // Let the receiver take the data before the test changes the folder.
    tokio::time::sleep(Duration::from_millis(100)).await;
    between();
    s.send(|o| {
        DocEnd {
            doc,
            plain_digest: empty,
            secure_len: 4,
            plain_len: 0,
        }
        .encode(o)
    })
    .await
    .unwrap();
    match s.next(ANSWER).await.unwrap() {
        Message::Ack(a) => {
            assert_eq!(a.doc, doc, "{a:?}");
            a
        }
        other => panic!("{name:?}: expected an ACK, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_relative_names_and_planted_links_are_refused() {
    let rx = TestReceiver::start().await;
    let outside = rx.root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("target"), b"keep").unwrap();
    // Links planted in the output folder (by anyone with access to it) pointing outside.
    std::os::unix::fs::symlink(&outside, rx.out.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("target"), rx.out.join("t.txt")).unwrap();
    let hostile: [(&str, AckStatus, &str); 9] = [
        ("../x", AckStatus::Refused, "climbs out"),
        ("a/../../x", AckStatus::Refused, "climbs out"),
        ("link/../../x", AckStatus::Refused, "climbs out"),
        ("/tmp/sieve-evil", AckStatus::Refused, "absolute"),
        (
            "a/.ssh/authorized_keys",
            AckStatus::Refused,
            "begins with '.'",
        ),
        (".bashrc", AckStatus::Refused, "begins with '.'"),
        ("link/x", AckStatus::Refused, "symbolic link"),
        ("link/deeper/x", AckStatus::Refused, "symbolic link"),
        ("t.txt", AckStatus::Exists, "already exists"),
    ];
    let mut s = RawSession::open(&rx, Mode::SecureOnly, 1, 0, hostile.len() as u32 + 3)
        .await
        .unwrap();
    for (i, (name, status, why)) in hostile.iter().enumerate() {
        let a = send_by_hand(&mut s, i as u32, name, || {}).await;
        assert_eq!(a.status, *status, "{name:?}: {a:?}");
        assert!(a.message.contains(why), "{name:?}: {a:?}");
    }
    // A folder that became a link to the outside after the document was accepted: the commit
    // resolves the path again, never through a link.
    let late = hostile.len() as u32;
    let planted = rx.out.join("late");
    let a = send_by_hand(&mut s, late, "late/x.txt", || {
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
    })
    .await;
    assert_eq!(a.status, AckStatus::Refused, "{a:?}");
    assert!(a.message.contains("symbolic link"), "{a:?}");
    // The session goes on, and a name in new folders is created beneath the output folder.
    let a = send_by_hand(&mut s, late + 1, "ok/sub/fine.txt", || {}).await;
    assert_eq!(a.status, AckStatus::Ok, "{a:?}");
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    rx.assert_received("ok/sub/fine.txt", b"evil");
    assert_eq!(
        names_in(&outside),
        vec!["target".to_string()],
        "something was written outside the output folder"
    );
    assert_eq!(std::fs::read(outside.join("target")).unwrap(), b"keep");
    assert!(!Path::new("/tmp/sieve-evil").exists() && !rx.root.path().join("x").exists());
    assert_eq!(
        names_in(rx.root.path()),
        vec!["out".to_string(), "outside".to_string()]
    );
    rx.assert_no_partials_soon().await;
    assert_eq!(
        rx.out_names(),
        vec!["late", "link", "ok", "t.txt"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    );
}

/// Names that display as something else (a right-to-left override makes `\u{202E}txt.exe` show
/// as `exe.txt`; a zero-width space makes two names look alike) are refused by the receiver from
/// a hand-driven client, and by the sender before it connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_display_as_something_else_are_refused() {
    let rx = TestReceiver::start().await;
    let disguised = ["\u{202E}txt.exe", "re\u{200B}port.txt", "dir\u{202E}/x.txt"];
    let mut s = RawSession::open(&rx, Mode::SecureOnly, 1, 0, disguised.len() as u32 + 1)
        .await
        .unwrap();
    for (i, name) in disguised.iter().enumerate() {
        let a = send_by_hand(&mut s, i as u32, name, || {}).await;
        assert_eq!(a.status, AckStatus::Refused, "{name:?}: {a:?}");
        assert!(a.message.contains("format character"), "{name:?}: {a:?}");
    }
    let a = send_by_hand(&mut s, disguised.len() as u32, "report.txt", || {}).await;
    assert_eq!(a.status, AckStatus::Ok, "{a:?}");
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    rx.assert_no_partials_soon().await;
    assert_eq!(rx.out_names(), vec!["report.txt".to_string()]);

    // The sender names the file and sends nothing.
    let src = tempfile::tempdir().unwrap();
    let file = write(src.path(), "\u{202E}txt.exe", b"public <$S>secret<$E>");
    let started = rx
        .stats
        .sessions_started
        .load(std::sync::atomic::Ordering::Relaxed);
    let e = send(&rx.simple(Mode::Sieve), &[file]).await.unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("format character"), "{e}");
    assert_eq!(
        rx.stats
            .sessions_started
            .load(std::sync::atomic::Ordering::Relaxed),
        started
    );
}

/// With `--portable-names` the receiver refuses what Windows cannot hold: device names with or
/// without an extension, in any case, in any component; the characters `<>:"|?*`; components
/// ending in a dot or a space. Without it, Linux's rules hold: `CON` and `aux.txt` are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portable_names_refuse_what_windows_cannot_hold() {
    let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
        c.store = StoreOptions {
            portable_names: true,
            ..StoreOptions::default()
        };
    })
    .await;
    let windows = [
        ("CON", "device name"),
        ("aux.txt", "device name"),
        ("Nul.tar.gz", "device name"),
        ("logs/LPT1.log", "device name"),
        ("com9", "device name"),
        ("a:b.txt", "does not allow"),
        ("what?.txt", "does not allow"),
        ("trailing.", "dot or a space"),
        ("dir /x.txt", "dot or a space"),
    ];
    let mut s = RawSession::open(&rx, Mode::SecureOnly, 1, 0, windows.len() as u32 + 2)
        .await
        .unwrap();
    for (i, (name, why)) in windows.iter().enumerate() {
        let a = send_by_hand(&mut s, i as u32, name, || {}).await;
        assert_eq!(a.status, AckStatus::Refused, "{name:?}: {a:?}");
        assert!(a.message.contains(why), "{name:?}: {a:?}");
        assert!(a.message.contains("--portable-names"), "{name:?}: {a:?}");
    }
    let n = windows.len() as u32;
    let a = send_by_hand(&mut s, n, "console/report.txt", || {}).await;
    assert_eq!(a.status, AckStatus::Ok, "{a:?}");
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    rx.assert_no_partials_soon().await;
    assert_eq!(rx.out_names(), vec!["console".to_string()]);

    // A receiver without the option stores them: they are valid names on Linux.
    let rx = TestReceiver::start().await;
    let mut s = RawSession::open(&rx, Mode::SecureOnly, 1, 0, 2)
        .await
        .unwrap();
    for (i, name) in ["CON", "aux.txt"].iter().enumerate() {
        let a = send_by_hand(&mut s, i as u32, name, || {}).await;
        assert_eq!(a.status, AckStatus::Ok, "{name:?}: {a:?}");
    }
    s.send(|o| Bye {}.encode(o)).await.unwrap();
    rx.assert_received("CON", b"evil");
    rx.assert_received("aux.txt", b"evil");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_files_are_kept_unless_the_receiver_overwrites() {
    let rx = TestReceiver::start().await;
    let src = tempfile::tempdir().unwrap();
    let first = write(src.path(), "same.txt", b"first <$S>version<$E>");
    let cfg = rx.simple(Mode::Sieve);
    rx.send_ok(&cfg, std::slice::from_ref(&first)).await;
    assert_eq!(mode_of(&rx.out.join("same.txt")), 0o600);
    std::fs::write(&first, b"second <$S>version<$E>").unwrap();
    let r = send(&cfg, std::slice::from_ref(&first)).await.unwrap();
    assert_eq!(r.docs_ok, 0, "an existing file was replaced");
    let err = r.failures[0].error.clone().unwrap();
    assert!(err.starts_with("Exists"), "{err}");
    assert!(err.contains("--overwrite"), "{err}");
    rx.assert_received("same.txt", b"first <$S>version<$E>");
    rx.assert_no_partials_soon().await;

    let rx = TestReceiver::start_with(tempfile::tempdir().unwrap(), |c| {
        c.store = StoreOptions {
            overwrite: true,
            file_mode: 0o640,
            ..StoreOptions::default()
        };
    })
    .await;
    let cfg = rx.simple(Mode::Sieve);
    std::fs::write(rx.out.join("same.txt"), b"old").unwrap();
    rx.send_ok(&cfg, std::slice::from_ref(&first)).await;
    rx.assert_received("same.txt", b"second <$S>version<$E>");
    assert_eq!(mode_of(&rx.out.join("same.txt")), 0o640);
}
