//! `sieve-lab`: re-run the thesis's experiments (chapter 5) on this machine: data, plots,
//! reports.
//!
//! A binary of its own, so that the shipped `sieve` links none of the laboratory (plots,
//! templates, data files). It drives the `sieve` binary as a child process, the one users run:
//! `$SIEVE_BIN` if set, else the `sieve` beside this executable (where
//! `cargo build --release -p sieve-cli -p sieve-lab` puts both), else the one on `PATH`.

#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

/// The laboratory of the security sieve: re-run the thesis's experiments (chapter 5) on this
/// machine against the real `sieve serve` and `sieve send`, and write data, plots and reports.
#[derive(Parser, Debug)]
#[command(name = "sieve-lab", version, about, long_about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: LabCommand,
}

const EXAMPLES: &str = "Examples:
  sieve-lab list
  sieve-lab run F5.1 --quick
  sieve-lab run all --out results
  SIEVE_BIN=/usr/local/bin/sieve sieve-lab run F5.12/T5.2

The `sieve` binary driven: $SIEVE_BIN, else the one beside sieve-lab, else the one on PATH.
Build both together: cargo build --release -p sieve-cli -p sieve-lab";

#[derive(Subcommand, Debug)]
enum LabCommand {
    /// Name every experiment.
    List,
    /// Run experiments (IDs from `sieve-lab list`, or `all`) and write `results/<ID>/`.
    Run {
        /// Experiment IDs, e.g. F5.1 F5.12/T5.2, or `all`.
        #[arg(required = true)]
        ids: Vec<String>,
        /// A reduced version of each experiment (fewer points and rounds).
        #[arg(long)]
        quick: bool,
        /// Where to write the results.
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
    /// Print the speeds of the TLS suites and of the cleartext MAC on one core of this process,
    /// as JSON. The lab runs it under each `OPENSSL_ia32cap` mask it emulates.
    #[command(hide = true)]
    Speeds {
        /// Measure over 32 MiB instead of 256 MiB.
        #[arg(long)]
        quick: bool,
    },
    /// Rewrite `<OUT>/README.md`, the one-page summary, from the findings.csv of every folder
    /// present in `<OUT>` (done at the end of every `run`; useful after copying in results of
    /// single experiments).
    Summary {
        /// The results folder.
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org).
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_ansi(colour)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(&cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: &LabCommand) -> Result<()> {
    match command {
        LabCommand::List => {
            for e in sieve_lab::list() {
                println!("{:<16} {}", e.id, e.title);
            }
            Ok(())
        }
        LabCommand::Speeds { quick } => {
            println!("{}", sieve_lab::speeds_json(*quick)?);
            Ok(())
        }
        LabCommand::Summary { out } => {
            sieve_lab::write_summary(out)
                .with_context(|| format!("cannot write {}", out.join("README.md").display()))?;
            eprintln!("{} written", out.join("README.md").display());
            Ok(())
        }
        LabCommand::Run { ids, quick, out } => {
            let lab = std::env::current_exe().context("cannot find the sieve-lab binary")?;
            let sieve = find_sieve(&lab)?;
            let results = sieve_lab::run(ids, *quick, out, sieve, lab)?;
            let failed: Vec<_> = results.iter().filter(|r| r.1.is_err()).collect();
            for (id, r) in &results {
                match r {
                    Ok(folders) => {
                        for f in folders {
                            eprintln!("{id}: written to {}", out.join(f).display());
                        }
                    }
                    Err(e) => eprintln!("{id}: failed: {e:#}"),
                }
            }
            if let Err(e) = sieve_lab::write_summary(out) {
                eprintln!("results/README.md not updated: {e:#}");
            }
            if !failed.is_empty() {
                bail!("{} of {} experiments failed", failed.len(), results.len());
            }
            Ok(())
        }
    }
}

/// The `sieve` binary the experiments drive: `$SIEVE_BIN`, else the one beside `lab` (a cargo
/// build of both puts them in the same folder), else the one on `PATH`.
fn find_sieve(lab: &std::path::Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SIEVE_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("SIEVE_BIN is {}, which is not a file", p.display());
        }
        return Ok(p);
    }
    if let Some(beside) = lab.parent().map(|d| d.join("sieve")) {
        if beside.is_file() {
            return Ok(beside);
        }
    }
    which::which("sieve").map_err(|_| {
        anyhow::anyhow!(
            "cannot find the sieve binary: not beside {} and not on PATH. Build both with \
             `cargo build --release -p sieve-cli -p sieve-lab`, or set SIEVE_BIN",
            lab.display()
        )
    })
}
