//! The core must build without an async runtime, sockets or TLS (docs/DESIGN.md §2): check its
//! normal dependency tree.

use std::process::Command;

#[test]
fn core_depends_on_no_runtime_and_no_tls() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "sieve-core",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("blake3"), "unexpected tree output:\n{tree}");
    for banned in ["tokio", "rustls", "mio", "socket2"] {
        assert!(
            !tree.lines().any(|l| l.starts_with(&format!("{banned} "))),
            "sieve-core depends on {banned}:\n{tree}"
        );
    }
}
