//! Running chosen experiments: one context for all of them, the machine measured once, and for
//! every folder an experiment writes: `report.md` (header with the machine facts, then the
//! experiment's body), `findings.csv` and `machine.json`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use crate::common::record::write_csv;
use crate::common::report::Report;
use crate::common::Ctx;
use crate::experiments::{all, Experiment};
use crate::machine::Machine;
use crate::run::Tools;
use crate::workload::Workloads;

/// Run the experiments `ids` (or all) and write `out/<folder>/`.
pub(crate) fn run(
    ids: &[String],
    quick: bool,
    out: &Path,
    sieve: PathBuf,
    lab: PathBuf,
) -> Result<Vec<(String, Result<Vec<String>>)>> {
    let exps = all();
    let chosen: Vec<&Experiment> = if ids.iter().any(|i| i == "all") {
        exps.iter().collect()
    } else {
        ids.iter()
            .map(|id| {
                exps.iter()
                    .find(|e| e.id.eq_ignore_ascii_case(id))
                    .with_context(|| format!("no experiment '{id}'; `sieve-lab list` names them"))
            })
            .collect::<Result<_>>()?
    };
    // Namespaces and cgroups of an earlier lab run that was killed before it could remove them.
    for gone in crate::scenario::cleanup_stale() {
        tracing::info!("removed {gone}, left by an ended lab run");
    }
    let work = tempfile::tempdir()?;
    let tools = Tools::new(sieve, lab, work.path())?;
    let bar = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:20} {bar:30} {pos}/{len} transfers, {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message("machine");
    let mut ctx = Ctx {
        machine: Machine::measure(quick),
        tools,
        work: Workloads::new(&work.path().join("files"))?,
        quick,
        bar,
    };
    let mut results = Vec::new();
    for e in chosen {
        ctx.bar.set_message(e.id);
        let started = Instant::now();
        let r = run_one(&mut ctx, e, out, started);
        if let Err(err) = &r {
            ctx.bar.println(format!("{}: {err:#}", e.id));
        }
        results.push((e.id.to_string(), r));
    }
    ctx.bar.finish_and_clear();
    Ok(results)
}

/// Run one experiment; the folders it wrote.
fn run_one(ctx: &mut Ctx, e: &Experiment, out: &Path, started: Instant) -> Result<Vec<String>> {
    let outputs = (e.run)(ctx, out)?;
    let mut folders = Vec::new();
    for o in outputs {
        let dir = out.join(&o.folder);
        std::fs::create_dir_all(&dir)?;
        let run = format!(
            "{} ({}), {:.0} s",
            if ctx.quick { "quick" } else { "full" },
            std::env::args().collect::<Vec<_>>().join(" "),
            started.elapsed().as_secs_f64()
        );
        write(&dir, &o.folder, &o.title, &ctx.machine, &run, &o.report)?;
        folders.push(o.folder);
    }
    Ok(folders)
}

/// Write `report.md`, `findings.csv` and `machine.json` of one folder.
pub(crate) fn write(
    dir: &Path,
    folder: &str,
    title: &str,
    machine: &Machine,
    run: &str,
    report: &Report,
) -> Result<()> {
    let text = format!(
        "# {}: {title}\n\n{}\n\n**Emulated**: {}\n\n**Run**: {run}. How the comparative words are \
         chosen: [the rules](../README.md#how-the-words-are-chosen).\n\n{}",
        folder.replace('_', "/"),
        machine.markdown(),
        report.emulated,
        report.body
    );
    std::fs::write(dir.join("report.md"), text).context("cannot write report.md")?;
    write_csv(&dir.join("findings.csv"), &report.findings)?;
    let meta = serde_json::json!({"title": title, "key_plot": report.key_plot});
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&meta)?,
    )
    .context("cannot write report.json")?;
    std::fs::write(
        dir.join("machine.json"),
        serde_json::to_string_pretty(machine)?,
    )
    .context("cannot write machine.json")
}
