//! `sieve serve --ready-file`: the file appears, whole, once both listeners accept connections.

use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SIEVE: &str = env!("CARGO_BIN_EXE_sieve");

#[test]
fn ready_file_names_both_bound_addresses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let st = Command::new(SIEVE)
        .args(["certs", "--dir"])
        .arg(&certs)
        .stderr(Stdio::null())
        .status()
        .expect("sieve runs");
    assert!(st.success());
    let ready = dir.path().join("sub").join("ready.json");
    std::fs::create_dir_all(ready.parent().unwrap()).unwrap();
    let mut child = Command::new(SIEVE)
        .args(["serve", "--discard", "--dir"])
        .arg(dir.path().join("out"))
        .arg("--cert")
        .arg(certs.join("server.pem"))
        .arg("--key")
        .arg(certs.join("server.key"))
        .args(["--listen", "127.0.0.1:0", "--plain-listen", "127.0.0.1:0"])
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sieve serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        if let Ok(t) = std::fs::read_to_string(&ready) {
            break t;
        }
        assert!(Instant::now() < deadline, "no ready file");
        assert!(child.try_wait().unwrap().is_none(), "sieve serve exited");
        std::thread::sleep(Duration::from_millis(10));
    };
    let v: serde_json::Value = serde_json::from_str(&text).expect("whole JSON");
    let addr = |k: &str| -> SocketAddr { v[k].as_str().unwrap().parse().unwrap() };
    let (tls, plain) = (addr("tls"), addr("plain"));
    assert_ne!(tls.port(), 0);
    assert_ne!(plain.port(), 0);
    assert_ne!(tls, plain);
    assert_eq!(v["pid"].as_u64(), Some(u64::from(child.id())));
    for a in [tls, plain] {
        TcpStream::connect_timeout(&a, Duration::from_secs(5)).expect("listening");
    }
    let _ = child.kill();
    let _ = child.wait();
}
