//! Tests that run the real `sieve` binary: the command-line contract (docs/DESIGN.md §7.1), a
//! sender killed mid-transfer, badly marked files, and TLS as seen by OpenSSL.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::*;

/// `sieve certs --dir root/certs`, then `sieve serve` into `root/out` on ports chosen by the
/// system (read back from its log). Killed when dropped.
struct Server {
    root: tempfile::TempDir,
    out: PathBuf,
    rx: common::Server,
}

impl Server {
    fn start() -> Server {
        Server::start_with(&[])
    }

    /// Start with extra arguments for `sieve serve`.
    fn start_with(extra: &[&str]) -> Server {
        let root = tempfile::tempdir().unwrap();
        let certs = certs(root.path());
        let out = root.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let rx = common::Server::start(&certs, &out, None, extra);
        Server { root, out, rx }
    }
}

impl std::ops::Deref for Server {
    type Target = common::Server;
    fn deref(&self) -> &common::Server {
        &self.rx
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut common::Server {
        &mut self.rx
    }
}

fn gen(size: &str, p: &str, out: &Path) {
    let o = run(sieve()
        .args(["gen", "--size", size, "--proportion", p, "-o"])
        .arg(out));
    assert!(o.status.success(), "sieve gen: {}", text(&o.stderr));
}

/// `sieve gen --kind`: every realistic kind is marked so that the sender parses it and the
/// receiver rebuilds it byte for byte, states its proportion, is the same for a seed, and writes
/// a ranges file that sends the same classification; an unknown kind says which exist.
#[test]
fn gen_kinds_are_sent_intact_and_repeatable() {
    let srv = Server::start();
    let src = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for kind in ["text", "csv", "json", "log"] {
        let doc = src.path().join(format!("{kind}.txt"));
        let o = run(sieve()
            .args([
                "gen", "--kind", kind, "--size", "300KB", "-p", "0.2", "--seed", "4", "-o",
            ])
            .arg(&doc));
        assert!(o.status.success(), "{kind}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("300000 content bytes"),
            "{}",
            text(&o.stderr)
        );
        assert!(
            text(&o.stderr).contains(&format!("({kind})")),
            "{}",
            text(&o.stderr)
        );
        let again = src.path().join(format!("{kind}-again.txt"));
        let o = run(sieve()
            .args([
                "gen", "--kind", kind, "--size", "300KB", "-p", "0.2", "--seed", "4", "-o",
            ])
            .arg(&again));
        assert!(o.status.success());
        assert_eq!(std::fs::read(&doc).unwrap(), std::fs::read(&again).unwrap());
        files.push(doc);
    }
    srv.send_ok(&files);
    for f in &files {
        let name = f.file_name().unwrap();
        assert_eq!(
            std::fs::read(srv.out.join(name)).unwrap(),
            std::fs::read(f).unwrap()
        );
    }

    let doc = src.path().join("records.json");
    let ranges = src.path().join("records.ranges.json");
    let o = run(sieve()
        .args([
            "gen", "--kind", "json", "--size", "200KB", "-p", "0.3", "-o",
        ])
        .arg(&doc)
        .arg("--ranges-out")
        .arg(&ranges));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::metadata(&doc).unwrap().len(), 200_000);
    let o = run(srv
        .send()
        .args(["--json", "--mode", "sieve", "--ranges"])
        .arg(&ranges)
        .arg(&doc));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let secure = j["secure_bytes"].as_u64().unwrap() as f64;
    assert!((secure / 200_000.0 - 0.3).abs() < 0.02, "{j}");
    assert_eq!(
        std::fs::read(srv.out.join("records.json")).unwrap(),
        std::fs::read(&doc).unwrap()
    );

    let o = run(sieve()
        .args(["gen", "--kind", "xml", "--size", "1KB", "-p", "0.1", "-o"])
        .arg(src.path().join("x")));
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("letters, text, csv, json or log"),
        "{}",
        text(&o.stderr)
    );
}

/// Where `sieve gen` writes: `-` is standard output, a named pipe is written through, a link
/// to a file and a folder are refused with the reason and left as they were (the file the link
/// points to keeps its content).
#[test]
fn gen_writes_standard_output_and_pipes_and_refuses_links() {
    let d = tempfile::tempdir().unwrap();
    let args = ["gen", "--kind", "csv", "--size", "20KB", "-p", "0.2", "-o"];
    let reference = d.path().join("reference.csv");
    let o = run(sieve().args(args).arg(&reference));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = std::fs::read(&reference).unwrap();
    let o = run(sieve().current_dir(d.path()).args(args).arg("-"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!d.path().join("-").exists(), "a file named - was written");
    assert_eq!(o.stdout, want, "standard output");
    let fifo = d.path().join("pipe");
    let reader = fifo_reader(&fifo);
    let o = run(sieve().args(args).arg(&fifo));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(is_fifo(&fifo), "the pipe was replaced by a file");
    assert_eq!(reader.join().unwrap(), want, "what the pipe carried");
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = run(sieve().args(args).arg(&link));
    assert!(!o.status.success(), "a link to a file was accepted");
    assert!(
        text(&o.stderr).contains("symbolic link"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(link_target(&link), Some(victim.clone()));
    let o = run(sieve().args(args).arg(d.path()));
    assert!(!o.status.success(), "a folder was accepted");
    assert!(
        text(&o.stderr).contains("is a folder"),
        "{}",
        text(&o.stderr)
    );
}

/// `sieve send --json`: exit 0, one JSON object with the contract's fields, files identical;
/// `--strip-marks` and `--ranges` through the command line.
#[test]
fn send_json_strip_marks_and_ranges() {
    let mut srv = Server::start();
    let src = tempfile::tempdir().unwrap();
    let doc = src.path().join("1MB-10.txt");
    gen("1MB", "0.1", &doc);
    let o = run(srv
        .send()
        .args([
            "--json", "--mode", "sieve", "-n", "2", "-m", "3", "--split", "even",
        ])
        .arg(&doc));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert_eq!(
        stdout.lines().count(),
        1,
        "one JSON object per session: {stdout}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    for field in [
        "mode",
        "secure_channels",
        "plain_channels",
        "split",
        "docs",
        "bytes",
        "secure_bytes",
        "plain_bytes",
        "connect_ms",
        "response_ms",
        "total_ms",
        "sieve_ms",
        "split_ms",
        "combine_ms",
        "integrate_ms",
        "cpu_ms",
        "cipher",
    ] {
        assert!(v.get(field).is_some(), "--json lacks {field}: {stdout}");
    }
    assert_eq!(v["mode"], "sieve");
    assert_eq!(
        (v["secure_channels"].as_u64(), v["plain_channels"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(v["split"], "even");
    assert_eq!(v["docs"], 1);
    assert_eq!(
        std::fs::read(srv.out.join("1MB-10.txt")).unwrap(),
        std::fs::read(&doc).unwrap()
    );

    // --strip-marks, secure-only.
    let marked = src.path().join("marked.txt");
    std::fs::write(&marked, b"ab<$S>cd<$E>e\\<$S>f<$S>gh<$E>").unwrap();
    let o = run(srv
        .send()
        .args(["--mode", "secure-only", "--strip-marks"])
        .arg(&marked));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read(srv.out.join("marked.txt")).unwrap(),
        b"abcde<$S>fgh"
    );

    // --ranges over a binary file.
    let bin = src.path().join("record.bin");
    let bytes: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&bin, &bytes).unwrap();
    let ranges = src.path().join("fields.json");
    std::fs::write(
        &ranges,
        br#"{"ranges": [[0, 16], [120, 180], [50000, 100000]]}"#,
    )
    .unwrap();
    let o = run(srv
        .send()
        .args(["--json", "--mode", "sieve", "--ranges"])
        .arg(&ranges)
        .arg(&bin));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["secure_bytes"], 16 + 60 + 50_000);
    assert_eq!(std::fs::read(srv.out.join("record.bin")).unwrap(), bytes);
    srv.assert_running();
}

/// Unbalanced marks: non-zero exit, a one-line error with the byte offset, nothing sent, nothing
/// in OUT.
#[test]
fn unbalanced_marks_fail_with_the_offset_and_send_nothing() {
    let mut srv = Server::start();
    let src = tempfile::tempdir().unwrap();
    let good = src.path().join("good.txt");
    std::fs::write(&good, b"fine <$S>secret<$E> text").unwrap();
    let bad = src.path().join("bad.txt");
    let mut bytes = vec![b'x'; 1234];
    bytes.extend_from_slice(b"<$S>never closed");
    std::fs::write(&bad, &bytes).unwrap();
    let o = run(srv.send().arg(&good).arg(&bad));
    let stderr = text(&o.stderr);
    assert!(!o.status.success(), "exit status {:?}", o.status);
    assert!(stderr.contains("byte 1234"), "{stderr}");
    assert!(stderr.contains("bad.txt"), "{stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "a one-line error: {stderr}"
    );
    assert!(o.stdout.is_empty());
    srv.assert_running();
    assert!(names_in(&srv.out).is_empty(), "{:?}", names_in(&srv.out));
    assert!(
        !srv.log().contains("session started"),
        "something was sent:\n{}",
        srv.log()
    );
}

/// A sender killed (SIGKILL) mid-transfer: the receiver removes the temporary file, no file
/// appears under the final name, and the receiver goes on serving.
#[test]
fn killed_sender_leaves_no_partial_file() {
    let mut srv = Server::start();
    let src = tempfile::tempdir().unwrap();
    let big = src.path().join("big.txt");
    gen("200MB", "0.1", &big);
    let mut sender = srv
        .send()
        .args(["-n", "2", "-m", "2"])
        .arg(&big)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it as soon as the receiver has started writing the document.
    let out = srv.out.clone();
    wait_for(
        "the receiver to start writing",
        Duration::from_secs(60),
        || !partials(&out).is_empty(),
    );
    sender.kill().expect("kill the sender");
    let status = sender.wait().unwrap();
    assert!(!status.success());
    wait_for(
        "the temporary file to be removed",
        Duration::from_secs(20),
        || partials(&out).is_empty(),
    );
    assert!(names_in(&out).is_empty(), "{:?}", names_in(&out));
    wait_for(
        "the receiver to log the failed session",
        Duration::from_secs(20),
        || srv.log().contains("session failed"),
    );
    srv.assert_running();

    let small = src.path().join("after.txt");
    std::fs::write(&small, b"still <$S>serving<$E>").unwrap();
    let o = run(srv.send().arg(&small));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(names_in(&out), vec!["after.txt".to_string()]);
    assert_eq!(
        std::fs::read(out.join("after.txt")).unwrap(),
        b"still <$S>serving<$E>"
    );
}

/// `openssl s_client -CAfile D/ca.pem -connect 127.0.0.1:PORT` verifies the receiver's
/// certificate and negotiates TLS 1.3; with another CA, verification fails.
#[test]
fn openssl_verifies_the_certificate_and_negotiates_tls13() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let srv = Server::start();
    let s_client = |ca: &Path| {
        Command::new("openssl")
            .args([
                "s_client",
                "-brief",
                "-verify_return_error",
                "-verify_hostname",
                "localhost",
                "-CAfile",
            ])
            .arg(ca)
            .arg("-connect")
            .arg(srv.addr.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run openssl")
    };
    let o = s_client(&srv.ca());
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{all}");
    assert!(all.contains("Protocol version: TLSv1.3"), "{all}");
    assert!(all.contains("Verification: OK"), "{all}");

    let other = srv.root.path().join("other");
    assert!(run(sieve().args(["certs", "--dir"]).arg(&other))
        .status
        .success());
    let o = s_client(&other.join("ca.pem"));
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(
        !o.status.success() && !all.contains("Verification: OK"),
        "a foreign CA verified the receiver: {all}"
    );
}

/// INSECURE thesis suites (only in a build with `--features insecure-thesis-suites`): each one
/// moves a document intact, is named as insecure in the report, and a normal receiver refuses
/// it; TLS 1.3 senders still work against a receiver that accepts them.
#[cfg(feature = "insecure-thesis-suites")]
#[test]
fn thesis_suites_move_documents_and_are_refused_by_normal_receivers() {
    let legacy = Server::start_with(&["--insecure-thesis-suites"]);
    let doc = legacy.root.path().join("doc.txt");
    gen("300KB", "0.3", &doc);
    let bytes = std::fs::read(&doc).unwrap();
    for (suite, openssl) in [
        ("3des-ede-cbc-sha", "ECDHE-ECDSA-DES-CBC3-SHA"),
        ("aes256-cbc-sha", "ECDHE-ECDSA-AES256-SHA"),
    ] {
        for mode in ["sieve", "secure-only"] {
            let o = run(legacy
                .send()
                .args(["--insecure-thesis-suite", suite, "--mode", mode, "--json"])
                .arg(&doc));
            assert!(o.status.success(), "{suite} {mode}: {}", text(&o.stderr));
            let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let cipher = j["cipher"].as_str().unwrap_or_default();
            assert!(
                cipher.contains(openssl)
                    && cipher.contains("INSECURE")
                    && cipher.contains("TLSv1.2"),
                "{cipher}"
            );
            assert_eq!(std::fs::read(legacy.out.join("doc.txt")).unwrap(), bytes);
        }
    }
    let o = run(legacy.send().args(["--json"]).arg(&doc));
    assert!(
        o.status.success(),
        "TLS 1.3 against OpenSSL: {}",
        text(&o.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        j["cipher"].as_str().unwrap_or_default().contains("TLS13"),
        "{j}"
    );

    let normal = Server::start();
    let o = run(normal
        .send()
        .args(["--insecure-thesis-suite", "3des-ede-cbc-sha"])
        .arg(&doc));
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("handshake"), "{}", text(&o.stderr));
    assert!(!normal.out.join("doc.txt").exists());
}

/// The README's first command (`cargo run --release`) is `sieve` with no arguments: the demo.
/// It must run on its built-in default, check every received file itself, and print one row per
/// mode in which the sieve put only the classified tenth of the document on TLS.
#[test]
fn sieve_without_arguments_runs_the_demo() {
    let o = run(&mut sieve());
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "sieve (demo) failed: {err}\n{out}");
    assert!(err.contains("no command given: running the demo"), "{err}");
    assert!(
        out.contains("every received file was byte-identical"),
        "{out}"
    );
    // mode, response, connect, total, sieve, commit, cpu, bytes on TLS
    let row = |mode: &str| -> Vec<f64> {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(mode))
            .unwrap_or_else(|| panic!("no {mode} row in:\n{out}"));
        line.split_whitespace()
            .skip(1)
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("bad number in {line:?}"))
            })
            .collect()
    };
    let (so, sv) = (row("secure-only"), row("sieve"));
    assert_eq!(so.len(), 7, "{out}");
    assert_eq!(sv.len(), 7, "{out}");
    // The built-in document: 64 MB of content at P = 0.1, sent whole over TLS in secure-only.
    assert_eq!(so[6], 64_002_560.0, "{out}");
    assert_eq!(sv[6], 6_400_000.0, "{out}");
    for r in [&so, &sv] {
        assert!(
            r[0] > 0.0 && r[2] >= r[0],
            "response and total times: {out}"
        );
    }
    assert!(out.contains("improvement (thesis eq. 1)"), "{out}");
}
