//! Smoke test of the laboratory, so it cannot rot: `sieve-lab list` names every experiment of
//! the issue, and `sieve-lab run F5.1 --quick` writes data, plots and a report.
//!
//! `sieve-lab run` drives the `sieve` binary beside it (or `$SIEVE_BIN`): `cargo test
//! --workspace` builds it there; alone, `cargo build -p sieve-cli && cargo test -p sieve-lab`.

use std::path::PathBuf;
use std::process::Command;

const LAB: &str = env!("CARGO_BIN_EXE_sieve-lab");

/// The `sieve` binary the lab will drive, which must exist for the run to mean anything.
fn sieve() -> PathBuf {
    let p = std::env::var_os("SIEVE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(LAB).with_file_name("sieve"));
    assert!(
        p.is_file(),
        "{} is missing: build it first (`cargo build -p sieve-cli`)",
        p.display()
    );
    p
}

#[test]
fn lab_lists_every_experiment() {
    let out = Command::new(LAB)
        .arg("list")
        .output()
        .expect("sieve-lab runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for id in [
        "F5.1",
        "F5.2",
        "F5.3",
        "F5.4",
        "F5.5",
        "F5.6",
        "F5.7",
        "F5.8-5.9",
        "F5.10-5.11",
        "F5.12/T5.2",
        "F5.13",
        "F5.14-5.16",
        "TB.1-3",
        "T5.3/F5.17-5.18",
        "ICPE-F7",
        "CPU-P",
        "PEERS",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(id)),
            "{id} missing from:\n{text}"
        );
    }
}

#[test]
fn lab_quick_f5_1_writes_data_plots_and_report() {
    let out = tempfile::tempdir().expect("tempdir");
    let st = Command::new(LAB)
        .args(["run", "F5.1", "--quick", "--out"])
        .arg(out.path())
        .env("SIEVE_BIN", sieve())
        .output()
        .expect("sieve-lab runs");
    assert!(
        st.status.success(),
        "lab failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let d = out.path().join("F5.1");
    let csv = std::fs::read_to_string(d.join("data.csv")).expect("data.csv");
    // header + 1 size x 4 P x 2 modes x 3 rounds
    assert_eq!(csv.lines().count(), 1 + 24, "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.contains("loopback")));
    let report = std::fs::read_to_string(d.join("report.md")).expect("report.md");
    for words in [
        "| x = 1 MB, P = 0.1 |",
        "**Machine**",
        "pclmulqdq",
        "AES-GMAC",
        "**Emulated**",
        "The thesis gave 67 % at P = 0.1",
    ] {
        assert!(report.contains(words), "{words:?} missing from:\n{report}");
    }
    let findings = std::fs::read_to_string(d.join("findings.csv")).expect("findings.csv");
    // header + 4 P x 2 metrics
    assert_eq!(findings.lines().count(), 1 + 8, "{findings}");
    for f in [
        "f5_1_response.png",
        "f5_1_response.svg",
        "f5_1_total.png",
        "f5_1_total.svg",
    ] {
        let md = std::fs::metadata(d.join(f)).unwrap_or_else(|_| panic!("{f} missing"));
        assert!(md.len() > 1000, "{f} is too small");
    }
    let summary = std::fs::read_to_string(out.path().join("README.md")).expect("README.md");
    assert!(
        summary.contains("## What the data support most strongly"),
        "{summary}"
    );
    assert!(summary.contains("[F5.1](F5.1/report.md)"), "{summary}");
}
