//! Which TLS suite two ends agree on, with the real binary and aws-lc's `OPENSSL_ia32cap` masks
//! emulating a device without AES instructions at either end: ChaCha20-Poly1305 whenever one
//! end lacks AES hardware (AES-GCM would run in software there, 4 to 8 times slower), the
//! sender's first choice otherwise, and always the suite a user named with `--cipher`.

mod common;

use std::path::Path;

use common::*;

/// AES-NI and PCLMULQDQ off (first word), VAES and VPCLMULQDQ off (leaf-7 word): see
/// `tests/calibrate.rs`.
const NO_AES: &str = "~0x200000200000000:~0x60000000000";
const AES128: &str = "TLS13_AES_128_GCM_SHA256";
const CHACHA: &str = "TLS13_CHACHA20_POLY1305_SHA256";

/// The suite of one send (`cipher` in `--json`), the sender under `mask`.
fn suite(server: &Server, doc: &Path, mask: Option<&str>, extra: &[&str]) -> String {
    let mut cmd = server.send();
    cmd.arg("--json").args(extra).arg(doc);
    match mask {
        Some(m) => cmd.env("OPENSSL_ia32cap", m),
        None => cmd.env_remove("OPENSSL_ia32cap"),
    };
    let o = run(&mut cmd);
    assert!(
        o.status.success(),
        "sieve send failed: {}\nreceiver log:\n{}",
        text(&o.stderr),
        server.log()
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    v["cipher"].as_str().expect("a cipher").to_string()
}

#[test]
fn chacha20_is_chosen_when_either_end_lacks_aes_hardware() {
    if std::env::var_os("OPENSSL_ia32cap").is_some() {
        eprintln!("skipped: OPENSSL_ia32cap is set for the tests themselves");
        return;
    }
    // This process's answer is the unmasked one: the tests run without a mask.
    let hardware = sieve_transport::tls::hardware_aes();
    let dir = tempfile::tempdir().unwrap();
    let certs = certs(dir.path());
    let doc = dir.path().join("doc.txt");
    let o = run(sieve()
        .args(["gen", "--size", "256KiB", "--proportion", "0.1", "-o"])
        .arg(&doc));
    assert!(o.status.success(), "sieve gen: {}", text(&o.stderr));
    let unmasked_first = if hardware { AES128 } else { CHACHA };
    for server_mask in [None, Some(NO_AES)] {
        let out = dir.path().join(format!("out-{}", server_mask.is_some()));
        std::fs::create_dir_all(&out).unwrap();
        let env: Vec<(&str, &str)> = server_mask
            .map(|m| ("OPENSSL_ia32cap", m))
            .into_iter()
            .collect();
        let server = Server::start_env(&certs, &out, None, &["--discard"], &env);
        for client_mask in [None, Some(NO_AES)] {
            let want = if server_mask.is_none() && client_mask.is_none() {
                unmasked_first
            } else {
                CHACHA
            };
            for mode in ["secure-only", "sieve"] {
                assert_eq!(
                    suite(&server, &doc, client_mask, &["--mode", mode]),
                    want,
                    "receiver mask {server_mask:?}, sender mask {client_mask:?}, --mode {mode}"
                );
            }
            // A suite the user names is the one used, at either end's preference.
            for (name, full) in [("aes128gcm", AES128), ("chacha20", CHACHA)] {
                assert_eq!(
                    suite(&server, &doc, client_mask, &["--cipher", name]),
                    full,
                    "receiver mask {server_mask:?}, sender mask {client_mask:?}, --cipher {name}"
                );
            }
        }
    }
}
