//! What a new user meets, with the real binary: messages that say what happened and what to do,
//! figures that add up, a timeout that is what it says, interrupts, inputs that are not files,
//! and logs without colour codes where there is no terminal.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write a test file");
    p
}

/// A marked document of about `len` bytes, with a classified part every kilobyte or so (what
/// a debug build of the receiver handles quickly at tens of MB).
fn sparse(len: usize) -> Vec<u8> {
    let filler = "lorem ipsum dolor sit amet ".repeat(36);
    let mut v = Vec::with_capacity(len + 1100);
    let mut i = 0u64;
    while v.len() < len {
        i += 1;
        v.extend_from_slice(
            format!(
                "record {i}, card <$S>4111 1111 1111 {:04}<$E>; {filler}\n",
                i % 10_000
            )
            .as_bytes(),
        );
    }
    v
}

/// A marked document of about `len` bytes.
fn marked(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 64);
    let mut i = 0u64;
    while v.len() < len {
        i += 1;
        v.extend_from_slice(
            format!("record {i}, card <$S>4111 1111 1111 {i:04}<$E>;\n").as_bytes(),
        );
    }
    v
}

/// Every bad file of a send is reported at once, each with line and column beside the byte
/// offset, and nothing is sent; with --skip-invalid the good ones go and the command still exits
/// non-zero, listing the others.
#[test]
fn every_badly_marked_file_is_reported_with_its_line_and_column() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let srv = Server::start(&certs, &out, None, &[]);
    let good = write(root.path(), "good.txt", b"a <$S>b<$E> c\n");
    let bad1 = write(root.path(), "bad1.txt", b"line one\nline two <$E> stray\n");
    let bad2 = write(root.path(), "bad2.txt", b"ok\nok\nopen <$S> never closed\n");
    let o = run(srv.send().args([&good, &bad1, &bad2]));
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("2 of 3 documents cannot be sent"), "{err}");
    assert!(
        err.contains("bad1.txt:2:10: not correctly marked") && err.contains("byte 18"),
        "{err}"
    );
    assert!(err.contains("bad2.txt:3:6: not correctly marked"), "{err}");
    assert!(err.contains("--skip-invalid"), "{err}");
    assert!(finals(&out).is_empty());
    assert!(
        !srv.log().contains("session started"),
        "a session was opened"
    );

    let o = run(srv.send().arg("--skip-invalid").args([&good, &bad1, &bad2]));
    let err = text(&o.stderr);
    assert!(!o.status.success(), "skipped files still fail the command");
    assert!(
        err.contains("warning: not sent:") && err.contains("bad2.txt:3:6"),
        "{err}"
    );
    assert!(err.contains("1 of 1 documents delivered"), "{err}");
    assert_eq!(finals(&out), vec!["good.txt".to_string()]);
}

/// `--mode auto`, the default, sends in the mode the cost model chose, says which and why (on the
/// summary line, and in --json as `decision`, whose `chosen` is the `mode` used), and delivers
/// the document byte for byte, marks included, whichever it chose; `--mode sieve` and
/// `--mode secure-only` are used as given, with no decision.
#[test]
fn auto_mode_reports_its_choice_and_delivers_the_document_intact() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let srv = Server::start(&certs, &out, None, &[]);
    // A cache of its own: the first send measures this machine, the others read it.
    let cache = root.path().join("cache");
    let send = |args: &[&str], file: &Path| {
        let o = run(srv
            .send()
            .env("XDG_CACHE_HOME", &cache)
            .args(args)
            .arg(file));
        assert!(o.status.success(), "{}", text(&o.stderr));
        o
    };
    let json = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&o.stdout).expect("one JSON object")
    };

    for (name, doc) in [
        ("sparse.txt", sparse(4_000_000)),
        ("dense.txt", marked(300_000)),
    ] {
        let p = write(root.path(), name, &doc);
        let v = json(&send(&["--mode", "auto", "--json"], &p));
        let d = &v["decision"];
        assert_eq!(d["requested"], "auto", "{v}");
        assert_eq!(d["chosen"], v["mode"], "{v}");
        let mode = v["mode"].as_str().unwrap();
        assert!(["sieve", "secure-only"].contains(&mode), "{v}");
        for m in ["sieve", "secure_only"] {
            let ms = d["predicted_ms"][m].as_f64().unwrap_or(-1.0);
            assert!(ms.is_finite() && ms > 0.0, "{m}: {v}");
        }
        let reason = d["reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty() && !reason.contains('\n'), "{v}");
        // The mode used is the one reported: secure-only sends nothing in the clear.
        assert_eq!(
            v["plain_bytes"].as_u64() == Some(0),
            mode == "secure-only",
            "{v}"
        );
        assert_eq!(std::fs::read(out.join(name)).unwrap(), doc, "{mode}");
    }

    // A few marked bytes: the sieve's plain connection alone costs more than sealing them, so
    // auto sends them secure-only, after having sieved them; they arrive with their marks.
    let tiny = b"name,<$S>Jane Doe<$E>,42\n<$S>x<$E>\\<$S>y\n".to_vec();
    let p = write(root.path(), "tiny.txt", &tiny);
    let o = send(&[], &p);
    let err = text(&o.stderr);
    assert!(
        err.contains("1 of 1 documents delivered") && err.contains("auto chose secure-only ("),
        "the default is auto and the summary says what it chose: {err}"
    );
    assert_eq!(std::fs::read(out.join("tiny.txt")).unwrap(), tiny);

    for mode in ["sieve", "secure-only"] {
        let name = format!("explicit-{mode}.txt");
        let doc = marked(100_000);
        let p = write(root.path(), &name, &doc);
        let v = json(&send(&["--mode", mode, "--json"], &p));
        assert_eq!(v["mode"], mode, "{v}");
        assert!(v.get("decision").is_none(), "{v}");
        assert_eq!(
            v["plain_bytes"].as_u64() == Some(0),
            mode == "secure-only",
            "{v}"
        );
        assert_eq!(std::fs::read(out.join(&name)).unwrap(), doc);
        let o = send(
            &["--mode", mode],
            &write(root.path(), &format!("h-{name}"), &doc),
        );
        assert!(
            !text(&o.stderr).contains("auto chose"),
            "{}",
            text(&o.stderr)
        );
    }
}

/// The summary's figures and --json's add up: response = sieve + processing + split +
/// transfer, total = connect + response, bytes = secure + plain + marks, and a refused document
/// is counted in failures, not in the bytes.
#[test]
fn the_reported_figures_add_up() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    // A file the receiver already has: refused (Exists) at its manifest.
    std::fs::write(out.join("exists.txt"), b"old").unwrap();
    let srv = Server::start(&certs, &out, None, &[]);
    let doc = marked(200_000);
    let a = write(root.path(), "a.txt", &doc);
    let b = write(root.path(), "exists.txt", &marked(5_000));
    let o = run(srv
        .send()
        .args(["--json", "-n", "2", "-m", "2"])
        .arg(&a)
        .arg(&b));
    assert!(!o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"));
    let close = |a: f64, b: f64| (a - b).abs() < 0.01;
    assert!(close(
        f("response_ms"),
        f("sieve_ms") + f("processing_ms") + f("split_ms") + f("transfer_ms")
    ));
    assert!(close(f("total_ms"), f("connect_ms") + f("response_ms")));
    assert_eq!(
        f("bytes"),
        f("secure_bytes") + f("plain_bytes") + f("marks_bytes")
    );
    assert_eq!(
        f("bytes"),
        doc.len() as f64,
        "only the delivered document counts"
    );
    assert_eq!(f("docs"), 2.0);
    assert_eq!(f("docs_ok"), 1.0);
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(1));
    assert!(
        v["failures"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("already exists")),
        "{v}"
    );
}

/// A receiver that stops answering (SIGSTOP) is given up on after --idle-timeout, not after up
/// to twice that, and the message says so in one sentence without library links.
#[test]
fn the_idle_timeout_is_what_it_says() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let srv = Server::start(&certs, &out, None, &[]);
    let big = write(root.path(), "big.txt", &sparse(256 << 20));
    let mut sender = srv
        .send()
        .args(["--idle-timeout", "3"])
        .arg(&big)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sieve send");
    wait_for("the transfer to start", Duration::from_secs(30), || {
        !partials(&out).is_empty()
    });
    signal(srv.pid(), rustix::process::Signal::STOP);
    let stopped = Instant::now();
    let status = sender.wait().expect("wait for sieve send");
    let took = stopped.elapsed();
    signal(srv.pid(), rustix::process::Signal::CONT);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut sender.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_millis(5500),
        "gave up {took:?} after the receiver stopped, with --idle-timeout 3: {err}"
    );
    assert!(err.contains("no progress for 3."), "{err}");
    assert!(err.contains("the document was not delivered"), "{err}");
    assert!(!err.contains("https://"), "{err}");
}

/// A receiver killed mid-transfer: one sentence, no library link, no "the others" when none
/// was delivered.
#[test]
fn a_killed_receiver_is_said_plainly() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let mut srv = Server::start(&certs, &out, None, &[]);
    let big = write(root.path(), "big.txt", &sparse(256 << 20));
    let sender = srv
        .send()
        .arg(&big)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sieve send");
    wait_for("the transfer to start", Duration::from_secs(30), || {
        !partials(&out).is_empty()
    });
    srv.kill();
    let o = sender.wait_with_output().expect("wait for sieve send");
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("the receiver closed the connection")
            || err.contains("the receiver reset the connection"),
        "{err}"
    );
    assert!(err.contains("the document was not delivered"), "{err}");
    assert!(
        !err.contains("https://") && !err.contains("the others"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Mutual TLS: without a client certificate, and with one from another CA, the sender says what
/// to do; the receiver logs each refused handshake with the peer's address.
#[test]
fn mutual_tls_failures_say_what_to_do() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let o = run(sieve()
        .args(["certs", "client", "alice", "--dir"])
        .arg(&certs));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let other = root.path().join("other");
    let o = run(sieve().args(["certs", "--client", "--dir"]).arg(&other));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = root.path().join("out");
    let ca = certs.join("ca.pem");
    let srv = Server::start(&certs, &out, None, &["--client-ca", ca.to_str().unwrap()]);
    let doc = write(root.path(), "d.txt", b"a <$S>b<$E> c\n");
    let o = run(srv.send().arg(&doc));
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--client-cert") && err.contains("--client-key"),
        "{err}"
    );
    let o = run(srv
        .send()
        .arg("--client-cert")
        .arg(other.join("client.pem"))
        .arg("--client-key")
        .arg(other.join("client.key"))
        .arg(&doc));
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("did not accept the client certificate"),
        "{err}"
    );
    wait_for(
        "the receiver to log the refusals",
        Duration::from_secs(10),
        || srv.log().matches("TLS handshake refused").count() >= 2,
    );
    assert!(srv.log().contains("peer=127.0.0.1:"), "{}", srv.log());
    // The rightful certificate works, and the session's log names its identity.
    let o = run(srv
        .send()
        .arg("--client-cert")
        .arg(certs.join("alice.pem"))
        .arg("--client-key")
        .arg(certs.join("alice.key"))
        .arg(&doc));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(srv.log().contains("(cert "), "{}", srv.log());
}

/// Ctrl-C (SIGINT) on the sender: it says what was and was not delivered and exits 130.
#[test]
fn an_interrupted_send_says_what_was_delivered() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let srv = Server::start(&certs, &out, None, &[]);
    let small = write(root.path(), "small.txt", b"x <$S>y<$E> z\n");
    let big = write(root.path(), "big.txt", &sparse(512 << 20));
    let sender = srv
        .send()
        .args(["-n", "1", "-m", "1"])
        .arg(&small)
        .arg(&big)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sieve send");
    // The receiver logs a commit just before it writes the acknowledgement.
    wait_for("the big document to start", Duration::from_secs(60), || {
        srv.log()
            .lines()
            .any(|l| l.contains("document committed") && l.contains("name=small.txt"))
            && !partials(&out).is_empty()
    });
    // What the sender does with the acknowledgement shows nowhere outside it: a moment for it
    // to be read.
    std::thread::sleep(Duration::from_millis(300));
    signal(sender.id(), rustix::process::Signal::INT);
    let o = sender.wait_with_output().expect("wait for sieve send");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted: 1 of 2 documents were delivered (small.txt)"),
        "{err}"
    );
    assert!(err.contains("1 was not"), "{err}");
    wait_for(
        "the receiver to drop the unfinished one",
        Duration::from_secs(20),
        || partials(&out).is_empty(),
    );
}

/// Standard input (with --name) and a named pipe are sent like files; a device is refused
/// with a sentence that says how to send what it produces.
#[test]
fn streams_are_sent_and_devices_refused() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let srv = Server::start(&certs, &out, None, &[]);
    let doc = marked(300_000);
    let mut c = srv.send();
    let mut child = c
        .args(["-", "--name", "from-stdin.txt"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sieve send");
    child.stdin.take().unwrap().write_all(&doc).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(out.join("from-stdin.txt")).unwrap(), doc);

    let fifo = root.path().join("piped.txt");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let (f2, d2) = (fifo.clone(), doc.clone());
    let writer = std::thread::spawn(move || std::fs::write(&f2, &d2));
    let o = run(srv.send().arg(&fifo));
    writer.join().unwrap().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(out.join("piped.txt")).unwrap(), doc);

    let o = run(srv.send().arg("/dev/null"));
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("is a device") && err.contains("sieve send -"),
        "{err}"
    );
    let o = run(srv.send().arg("-"));
    assert!(text(&o.stderr).contains("--name"), "{}", text(&o.stderr));
}

/// `--to HOST` alone means port 7443, and a failure names the address tried.
#[test]
fn a_host_alone_means_the_default_port() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let doc = write(root.path(), "d.txt", b"a <$S>b<$E> c\n");
    // Nothing listens on 127.0.0.9:7443 (a loopback address no test uses).
    let o = run(sieve()
        .args(["send", "--to", "127.0.0.9", "--ca"])
        .arg(certs.join("ca.pem"))
        .arg(&doc));
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("127.0.0.9:7443"), "{err}");
}

/// `--listen HOST:PORT` alone puts the plain listener on the same host; logs written to a pipe
/// carry no colour codes (and NO_COLOR is honoured on a terminal).
#[test]
fn the_plain_listener_follows_listen_and_pipes_get_no_colour() {
    let root = tempfile::tempdir().unwrap();
    let certs = certs(root.path());
    let out = root.path().join("out");
    let ready = root.path().join("ready.json");
    let mut child = Command::new(SIEVE)
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .args(["serve", "--dir"])
        .arg(&out)
        .arg("--cert")
        .arg(certs.join("server.pem"))
        .arg("--key")
        .arg(certs.join("server.key"))
        .args(["--listen", "127.0.0.7:0", "--ready-file"])
        .arg(&ready)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sieve serve");
    wait_for("the ready file", Duration::from_secs(20), || ready.exists());
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ready).unwrap()).expect("ready JSON");
    assert!(
        r["plain"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.7:")),
        "{r}"
    );
    let _ = child.kill();
    let o = child.wait_with_output().unwrap();
    let log = text(&o.stderr);
    assert!(log.contains("receiver listening"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a piped log: {log:?}"
    );
}
