//! The shipped `sieve` stays lean: its default build links neither the laboratory (its plots,
//! templates and data files), nor a second crypto library beside aws-lc.

use std::process::Command;

/// Packages the default build of `sieve` must not depend on: the laboratory and what only it
/// uses (plots, images, templates), and ring (aws-lc is the one crypto library).
const KEPT_OUT: [&str; 5] = ["sieve-lab", "plotters", "image", "minijinja", "ring"];

#[test]
fn the_default_build_links_neither_the_lab_nor_ring() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "sieve-cli",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .arg("--offline")
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let mut packages: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    packages.sort_unstable();
    packages.dedup();
    let found: Vec<&str> = KEPT_OUT
        .iter()
        .copied()
        .filter(|p| packages.contains(p))
        .collect();
    assert!(
        found.is_empty(),
        "the default build of sieve depends on {found:?} ({} packages in all)",
        packages.len()
    );
}
