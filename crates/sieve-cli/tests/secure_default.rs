//! Secure by default: a document for which nobody gave a classification (no inline mark, no
//! ranges file, no policy) puts none of its bytes on a plain channel, whatever the mode; an
//! explicit choice (`--allow-clear`, an empty ranges file) sends it as it says.
//!
//! The plain channel is read on the wire, not in the report: the receiver advertises a
//! forwarding proxy as its plain address, and the proxy keeps every byte that crosses it.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use common::*;

/// A TCP forwarder in front of the receiver's plain port that records what senders write.
struct PlainTap {
    addr: SocketAddr,
    target: Arc<Mutex<Option<SocketAddr>>>,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl PlainTap {
    fn start() -> PlainTap {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the tap");
        let addr = listener.local_addr().expect("tap address");
        let target: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let seen: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (t, s) = (target.clone(), seen.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { break };
                let Some(to) = *t.lock().unwrap() else {
                    continue;
                };
                let Ok(server) = TcpStream::connect(to) else {
                    continue;
                };
                let (mut c_rd, mut s_wr) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let s = s.clone();
                // Sender to receiver, recorded.
                std::thread::spawn(move || {
                    let mut buf = [0u8; 64 << 10];
                    while let Ok(n) = c_rd.read(&mut buf) {
                        if n == 0 || s_wr.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        s.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                    let _ = s_wr.shutdown(std::net::Shutdown::Write);
                });
                // Receiver to sender.
                let (mut s_rd, mut c_wr) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_rd, &mut c_wr);
                    let _ = c_wr.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        PlainTap { addr, target, seen }
    }

    fn seen(&self) -> Vec<u8> {
        self.seen.lock().unwrap().clone()
    }

    fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

struct Rig {
    root: tempfile::TempDir,
    out: PathBuf,
    srv: Server,
    tap: PlainTap,
}

impl Rig {
    fn start() -> Rig {
        let root = tempfile::tempdir().unwrap();
        let certs = certs(root.path());
        let out = root.path().join("inbox");
        let tap = PlainTap::start();
        let advertise = tap.addr.to_string();
        let srv = Server::start(&certs, &out, None, &["--plain-advertise", &advertise]);
        *tap.target.lock().unwrap() = Some(srv.plain);
        Rig {
            root,
            out,
            srv,
            tap,
        }
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let dir = self.root.path().join("src");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// `sieve send --json ARGS FILES` against a fresh inbox.
    fn send(&self, args: &[&str], files: &[&Path]) -> (Output, serde_json::Value) {
        for n in finals(&self.out) {
            let _ = std::fs::remove_file(self.out.join(n));
        }
        self.tap.clear();
        let o = self
            .srv
            .send()
            .arg("--json")
            .args(args)
            .args(files)
            .output()
            .expect("run sieve send");
        assert!(
            o.status.success(),
            "sieve send {args:?} failed: {}\nreceiver:\n{}",
            text(&o.stderr),
            self.srv.log()
        );
        let v = serde_json::from_str(text(&o.stdout).trim()).expect("one JSON object");
        (o, v)
    }
}

/// A customers table full of card numbers, IBANs and e-mail addresses, without a mark.
fn customers() -> Vec<u8> {
    let mut v = b"id,name,email,card,iban\n".to_vec();
    for i in 0..2000u32 {
        v.extend_from_slice(
            format!(
                "{i},Customer {i},customer{i}@mail.test,4111 1111 1111 {:04},DE89 3704 0044 0532 {:04} 00\n",
                i % 10_000,
                (i * 7) % 10_000
            )
            .as_bytes(),
        );
    }
    v
}

const CARD: &[u8] = b"4111 1111 1111 0042";

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn an_unmarked_file_of_card_numbers_puts_no_byte_on_a_plain_channel_in_any_mode() {
    let rig = Rig::start();
    let doc = customers();
    let csv = rig.file("customers.csv", &doc);
    for mode in [None, Some("auto"), Some("sieve")] {
        let args: Vec<&str> = mode.map_or(vec![], |m| vec!["--mode", m]);
        let (o, v) = rig.send(&args, &[&csv]);
        assert_eq!(std::fs::read(rig.out.join("customers.csv")).unwrap(), doc);
        let seen = rig.tap.seen();
        assert!(
            seen.is_empty(),
            "--mode {mode:?}: {} bytes crossed the plain channel (a card number among them: {})",
            seen.len(),
            contains(&seen, CARD)
        );
        assert_eq!(v["mode"], "secure-only", "{v}");
        assert_eq!(v["plain_bytes"], 0, "{v}");
        assert_eq!(v["unmarked"], serde_json::json!(["customers.csv"]), "{v}");
        let reason = v["decision"]["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("unmarked"), "{v}");
        assert_eq!(v["decision"]["chosen"], "secure-only", "{v}");
        let err = text(&o.stderr);
        assert!(
            err.contains("no classification was given for customers.csv")
                && err.contains("--allow-clear"),
            "{err}"
        );
    }
}

#[test]
fn allow_clear_and_an_empty_ranges_file_are_choices_to_send_in_the_clear() {
    let rig = Rig::start();
    let doc = customers();
    let csv = rig.file("customers.csv", &doc);
    let (o, v) = rig.send(&["--mode", "sieve", "--allow-clear"], &[&csv]);
    assert_eq!(std::fs::read(rig.out.join("customers.csv")).unwrap(), doc);
    assert!(
        contains(&rig.tap.seen(), CARD),
        "--allow-clear sent nothing in the clear"
    );
    assert_eq!(v["mode"], "sieve", "{v}");
    assert_eq!(v["unmarked"], serde_json::json!([]), "{v}");
    assert!(
        text(&o.stderr).contains("has no classified byte"),
        "{}",
        text(&o.stderr)
    );
    // An empty ranges file says "nothing here is classified" (the laboratory's P = 0).
    let ranges = rig.file("empty.ranges.json", br#"{"ranges": []}"#);
    let ranges = ranges.to_str().unwrap();
    let (_, v) = rig.send(&["--mode", "sieve", "--ranges", ranges], &[&csv]);
    assert_eq!(std::fs::read(rig.out.join("customers.csv")).unwrap(), doc);
    assert!(
        contains(&rig.tap.seen(), CARD),
        "an empty ranges file sent nothing in the clear"
    );
    assert_eq!(v["mode"], "sieve", "{v}");
    assert_eq!(v["plain_bytes"].as_u64(), Some(doc.len() as u64), "{v}");
}

#[test]
fn a_marked_file_still_goes_through_the_sieve_beside_an_unmarked_one() {
    let rig = Rig::start();
    let plain = rig.file(
        "notes.txt",
        b"meeting at noon, room 4\n".repeat(100).as_slice(),
    );
    let marked = rig.file(
        "letter.txt",
        b"Dear client, your card <$S>4111 1111 1111 1111<$E> ...\n",
    );
    let (_, v) = rig.send(&["--mode", "sieve"], &[&plain, &marked]);
    assert_eq!(v["mode"], "sieve", "{v}");
    assert_eq!(v["unmarked"], serde_json::json!(["notes.txt"]), "{v}");
    let seen = rig.tap.seen();
    assert!(
        !contains(&seen, b"meeting at noon"),
        "the unmarked file crossed in the clear"
    );
    assert!(
        contains(&seen, b"Dear client"),
        "the marked file's cleartext did not"
    );
    assert!(
        !contains(&seen, b"4111 1111 1111 1111"),
        "a classified byte crossed in the clear"
    );
}

#[test]
fn standard_input_and_folders_follow_the_same_rule() {
    let rig = Rig::start();
    let doc = customers();
    // Standard input.
    let mut child = rig
        .srv
        .send()
        .args(["--json", "--mode", "sieve", "-", "--name", "piped.csv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sieve send");
    child.stdin.take().unwrap().write_all(&doc).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(rig.out.join("piped.csv")).unwrap(), doc);
    assert!(
        rig.tap.seen().is_empty(),
        "standard input crossed in the clear"
    );
    // A folder.
    let dir = rig.root.path().join("src/records");
    std::fs::create_dir_all(dir.join("2026")).unwrap();
    std::fs::write(dir.join("2026/a.csv"), &doc).unwrap();
    std::fs::write(dir.join("b.csv"), &doc).unwrap();
    let (_, v) = rig.send(&["-r", "--mode", "sieve"], &[&dir]);
    assert_eq!(v["docs_ok"], 2, "{v}");
    assert_eq!(v["mode"], "secure-only", "{v}");
    assert!(
        rig.tap.seen().is_empty(),
        "a folder's files crossed in the clear"
    );
}
