//! # sieve-lab
//!
//! Re-runs the experiments of the thesis's chapter 5 on this machine, against the real `sieve
//! serve` and `sieve send`, next to today's tools, and writes `results/<experiment>/`: raw
//! measurements (`data.csv`), plots (PNG and SVG) and a report that puts our figures beside the
//! thesis's.
//!
//! Its only user is the `sieve-lab` binary (`src/main.rs`), so the public surface is what that
//! binary calls: [`list`], [`run`], [`write_summary`] and [`speeds_json`]; everything else is the
//! crate's own.

// Unsafe only where a system call has no safe wrapper (`wait4`, in `child`), allowed there.
#![deny(unsafe_code)]

mod child;
mod common;
mod experiments;
mod machine;
mod peers;
mod plot;
mod queue;
mod run;
mod runner;
mod scenario;
mod stats;
mod summary;
mod workload;

use std::path::{Path, PathBuf};

use anyhow::Result;

/// An experiment as `sieve-lab list` names it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its id, e.g. "F5.1" (also its folder under `results/`, with `/` as `_`).
    pub id: &'static str,
    /// What it measures, in one line.
    pub title: &'static str,
}

/// Every experiment, in the order of the thesis.
pub fn list() -> Vec<Listed> {
    experiments::all()
        .into_iter()
        .map(|e| Listed {
            id: e.id,
            title: e.title,
        })
        .collect()
}

/// Run the experiments `ids` (or `all`) with the `sieve` binary at `sieve`, writing their
/// folders under `out`; `quick` runs a reduced version of each. `lab` is the `sieve-lab` binary,
/// run as a child for what must be measured in a new process (`sieve-lab speeds`). One result
/// per experiment: the folders it wrote, or why it failed.
pub fn run(
    ids: &[String],
    quick: bool,
    out: &Path,
    sieve: PathBuf,
    lab: PathBuf,
) -> Result<Vec<(String, Result<Vec<String>>)>> {
    runner::run(ids, quick, out, sieve, lab)
}

/// The speeds of the TLS suites and of the cleartext MAC on one core of this process, as JSON
/// (`[["TLS 1.3 AES-128-GCM", 4.1], …]`, GB/s). The lab runs this in a child process under each
/// `OPENSSL_ia32cap` mask it emulates, since the mask is read once when a process starts.
pub fn speeds_json(quick: bool) -> Result<String> {
    Ok(serde_json::to_string(&machine::measure_speeds(quick))?)
}

/// Rewrite `out/README.md`, the one-page summary, from the results present in `out`.
pub fn write_summary(out: &Path) -> Result<()> {
    summary::write(out)
}
