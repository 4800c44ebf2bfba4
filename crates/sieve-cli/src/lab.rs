//! `sieve lab`: re-run the thesis's experiments on this machine.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum LabCommand {
    /// Name every experiment.
    List,
    /// Run experiments (IDs from `sieve lab list`, or `all`) and write `results/<ID>/`.
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

pub fn run(args: &Args) -> Result<bool> {
    match &args.command {
        LabCommand::List => {
            for e in sieve_lab::list() {
                println!("{:<16} {}", e.id, e.title);
            }
            Ok(true)
        }
        LabCommand::Speeds { quick } => {
            println!("{}", sieve_lab::speeds_json(*quick)?);
            Ok(true)
        }
        LabCommand::Summary { out } => {
            sieve_lab::write_summary(out)
                .with_context(|| format!("cannot write {}", out.join("README.md").display()))?;
            eprintln!("{} written", out.join("README.md").display());
            Ok(true)
        }
        LabCommand::Run { ids, quick, out } => {
            let me = std::env::current_exe().context("cannot find the sieve binary")?;
            let results = sieve_lab::run(ids, *quick, out, me)?;
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
            Ok(true)
        }
    }
}
