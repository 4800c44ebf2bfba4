//! `results/README.md`, generated from the folders' `findings.csv` alone: it leads with the
//! finding the data support most strongly, gives the strongest result the other way, and tables
//! where the sieve wins, ties and loses in every experiment.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use crate::common::record::read_csv;
use crate::common::report::{fill, Finding};
use crate::common::words::{Outcome, RULES};
use crate::machine::Machine;

/// One folder of results.
struct Folder {
    name: String,
    title: String,
    plot: Option<String>,
    findings: Vec<Finding>,
}

/// How strongly the data support a finding: how far its interval stays from 0 (0 when it
/// contains 0).
fn strength(f: &Finding) -> f64 {
    match f.outcome {
        Outcome::Wins => f.lo,
        Outcome::Loses => -f.hi,
        Outcome::Ties => 0.0,
    }
}

/// Write `out/README.md` from the results present in `out`.
pub(crate) fn write(out: &Path) -> Result<()> {
    let folders = read_folders(out)?;
    let machines: Vec<(String, Machine)> = folders
        .iter()
        .filter_map(|f| {
            let bytes = std::fs::read(out.join(&f.name).join("machine.json")).ok()?;
            let m = serde_json::from_slice::<Machine>(&bytes).ok()?;
            Some((f.name.clone(), m))
        })
        .collect();
    let (machine, others) = machines_of(&machines);
    let mut text = render(&folders, machine, &others)?;
    text.push_str(&stale_section(&stale_folders(out)?));
    std::fs::write(out.join("README.md"), text).context("cannot write README.md")
}

/// The machine most folders were run on, and a paragraph naming the folders run on another
/// CPU (empty when all were run on one): results copied in from runs on other machines must
/// not be read as this machine's.
fn machines_of(machines: &[(String, Machine)]) -> (Option<&Machine>, String) {
    let mut cpus: Vec<(&str, Vec<&str>)> = Vec::new();
    for (folder, m) in machines {
        match cpus.iter_mut().find(|(cpu, _)| *cpu == m.cpu) {
            Some((_, names)) => names.push(folder),
            None => cpus.push((&m.cpu, vec![folder])),
        }
    }
    let Some(main) = cpus
        .iter()
        .max_by_key(|(_, names)| names.len())
        .map(|c| c.0)
    else {
        return (None, String::new());
    };
    let machine = machines.iter().map(|(_, m)| m).find(|m| m.cpu == main);
    let others: Vec<String> = cpus
        .iter()
        .filter(|(cpu, _)| *cpu != main)
        .map(|(cpu, names)| {
            let m = machines.iter().map(|(_, m)| m).find(|m| m.cpu == *cpu);
            format!(
                "{} on {}",
                names.join(", "),
                m.map_or_else(|| (*cpu).to_string(), Machine::line)
            )
        })
        .collect();
    let note = if others.is_empty() {
        String::new()
    } else {
        format!(
            "**Run on another machine** (the machine above ran the other folders; each folder's \
             `machine.json` and report name its own): {}.",
            others.join("; ")
        )
    };
    (machine, note)
}

fn read_folders(out: &Path) -> Result<Vec<Folder>> {
    let mut folders = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .filter_map(|e| e.ok())
        // Folders this lab wrote (report.json beside report.md): a folder left by an experiment
        // that no longer exists is not summarised.
        .filter(|e| e.path().join("report.md").is_file() && e.path().join("report.json").is_file())
        .collect();
    entries.sort_by_key(|e| sort_key(&e.file_name().to_string_lossy()));
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let report = std::fs::read_to_string(e.path().join("report.md")).unwrap_or_default();
        let title = report
            .lines()
            .next()
            .and_then(|l| l.split_once(": "))
            .map_or(String::new(), |(_, t)| t.to_string());
        let findings = match std::fs::File::open(e.path().join("findings.csv")) {
            Ok(f) => read_csv(f).with_context(|| format!("{name}/findings.csv"))?,
            Err(_) => Vec::new(),
        };
        let mut pngs: Vec<String> = std::fs::read_dir(e.path())?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".png"))
            .collect();
        pngs.sort();
        // The experiment's own choice of key plot (report.json), else its first figure.
        let chosen = std::fs::read(e.path().join("report.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["key_plot"].as_str().map(|s| format!("{s}.png")))
            .filter(|p| pngs.contains(p));
        folders.push(Folder {
            name,
            title,
            plot: chosen.or_else(|| pngs.into_iter().next()),
            findings,
        });
    }
    Ok(folders)
}

/// Folders with a report but no `report.json`: written by an earlier version of the laboratory,
/// before reports carried their findings. They are listed, not summarised: their figures come
/// from older code and their prose was not generated from their data.
fn stale_folders(out: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("report.md").is_file() && !e.path().join("report.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| sort_key(n));
    Ok(names)
}

/// The closing section that names the folders [`stale_folders`] found (empty when none).
fn stale_section(names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let list: Vec<String> = names
        .iter()
        .map(|n| format!("[{n}]({n}/report.md)"))
        .collect();
    format!(
        "\n## Not re-run with the current code\n\nThese folders were written by an earlier \
         version of the laboratory and of the sieve; they are not counted above, and their \
         reports were not generated from their data by the rules above. `sieve-lab run all` \
         replaces them: {}.\n",
        list.join(", ")
    )
}

/// Thesis order: F5.2 before F5.10, then the tables, the queueing studies and our own.
fn sort_key(name: &str) -> (u8, u32, String) {
    let kind = match name.chars().next() {
        Some('F') => 0,
        Some('T') => 1,
        Some('I') => 2,
        _ => 3,
    };
    let number = name
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !c.is_ascii_digit())
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (kind, number, name.to_string())
}

fn render(folders: &[Folder], machine: Option<&Machine>, others: &str) -> Result<String> {
    // The page's totals and its lead are about the sieve against secure-only; AUTO compares
    // `--mode auto` with the faster of the two, and shows only in its own row.
    let all: Vec<&Finding> = folders
        .iter()
        .flat_map(|f| &f.findings)
        .filter(|f| f.experiment != crate::experiments::AUTO_ID)
        .collect();
    let strongest = |want: Outcome| {
        all.iter()
            .filter(|f| f.outcome == want)
            .max_by(|a, b| strength(a).total_cmp(&strength(b)))
            .map(|f| describe(f))
    };
    let count = |o: Outcome| all.iter().filter(|f| f.outcome == o).count();
    let lead_is_loss = all
        .iter()
        .max_by(|a, b| strength(a).total_cmp(&strength(b)))
        .is_some_and(|f| f.outcome == Outcome::Loses);
    let rows: Vec<_> = folders
        .iter()
        .map(|f| {
            let n = |o: Outcome| f.findings.iter().filter(|x| x.outcome == o).count();
            let extreme = |best: bool| {
                f.findings
                    .iter()
                    .filter(|x| x.improvement.is_finite())
                    .max_by(|a, b| {
                        let o = a.improvement.total_cmp(&b.improvement);
                        if best {
                            o
                        } else {
                            o.reverse()
                        }
                    })
                    .map_or("–".to_string(), |x| {
                        format!("{} {}: {}", x.point, x.metric, x.estimate().pct())
                    })
            };
            json!({
                "name": f.name,
                "id": f.name.replace('_', "/"),
                "title": f.title,
                "plot": f.plot,
                "comparisons": f.findings.len(),
                "wins": n(Outcome::Wins),
                "ties": n(Outcome::Ties),
                "losses": n(Outcome::Loses),
                "best": extreme(true),
                "worst": extreme(false),
            })
        })
        .collect();
    fill(
        "summary.md",
        include_str!("summary.md"),
        json!({
            "machine": machine.map_or("this machine (no machine.json found)".into(), Machine::line),
            "machine_block": machine.map_or(String::new(), Machine::markdown),
            "other_machines": others,
            "lead_is_loss": lead_is_loss,
            "strongest_win": strongest(Outcome::Wins),
            "strongest_loss": strongest(Outcome::Loses),
            "comparisons": all.len(),
            "wins": count(Outcome::Wins),
            "ties": count(Outcome::Ties),
            "losses": count(Outcome::Loses),
            "rows": rows,
            "rules": RULES,
        }),
    )
}

/// "F5.7, wifi+AP, 1MB-10, response time: the sieve is faster than secure-only by 69.0 % [..]".
fn describe(f: &Finding) -> String {
    let e = f.estimate();
    let how = if f.outcome == Outcome::Loses {
        format!("its improvement is {}", e.pct())
    } else {
        format!("by {}", e.pct())
    };
    let coverage = if f.coverage < 0.95 {
        format!(" (interval coverage {:.1} %)", f.coverage * 100.0)
    } else {
        String::new()
    };
    // "faster" and "slower" are words for times; other quantities (CPU per GB) are less or more.
    let verb = if f.metric.ends_with("time") {
        f.outcome.verb().to_string()
    } else {
        match f.outcome {
            Outcome::Wins => format!("needs less {} than", f.metric),
            Outcome::Ties => format!("ties in {} with", f.metric),
            Outcome::Loses => format!("needs more {} than", f.metric),
        }
    };
    format!(
        "{} ({}, {}): the sieve {verb} secure-only, {how} over {} rounds{coverage}",
        f.experiment, f.point, f.metric, f.rounds
    )
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    #[test]
    fn folders_without_findings_are_listed_apart() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("F5.1");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("report.md"), "# F5.1: old").unwrap();
        let new = dir.path().join("NOAES");
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("report.md"), "# NOAES: new").unwrap();
        std::fs::write(new.join("report.json"), "{}").unwrap();
        assert_eq!(stale_folders(dir.path()).unwrap(), vec!["F5.1".to_string()]);
        let text = stale_section(&["F5.1".to_string()]);
        assert!(text.contains("[F5.1](F5.1/report.md)"), "{text}");
        assert!(stale_section(&[]).is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::estimate::Estimate;

    fn finding(exp: &str, lo: f64, hi: f64) -> Finding {
        let e = Estimate {
            point: (lo + hi) / 2.0,
            lo,
            hi,
            coverage: 0.96,
            n: 30,
        };
        Finding::new(exp, "1MB-10", "response time", &e)
    }

    fn folder(name: &str, findings: Vec<Finding>) -> Folder {
        Folder {
            name: name.into(),
            title: "t".into(),
            plot: None,
            findings,
        }
    }

    /// Folders run on another CPU are named with it; one CPU needs no note.
    #[test]
    fn folders_from_another_machine_are_named() {
        let on = |cpu: &str| Machine {
            cpu: cpu.into(),
            ..Machine::for_tests()
        };
        let one = [("F5.1".to_string(), on("A")), ("F5.2".to_string(), on("A"))];
        let (m, note) = machines_of(&one);
        assert_eq!(m.map(|m| m.cpu.as_str()), Some("A"));
        assert!(note.is_empty());
        let mixed = [
            ("F5.1".to_string(), on("A")),
            ("COMPRESS".to_string(), on("B")),
            ("F5.2".to_string(), on("A")),
        ];
        let (m, note) = machines_of(&mixed);
        assert_eq!(m.map(|m| m.cpu.as_str()), Some("A"));
        assert!(note.contains("COMPRESS on B, "), "{note}");
        assert!(!note.contains("F5.1"), "{note}");
        assert_eq!(machines_of(&[]).0, None);
    }

    /// The summary leads with what the data support most strongly, whichever way it goes.
    #[test]
    fn leads_with_the_strongest_finding_losses_included() {
        let text = render(
            &[
                folder(
                    "F5.1",
                    vec![finding("F5.1", -60.0, -40.0), finding("F5.1", -1.0, 2.0)],
                ),
                folder("F5.7", vec![finding("F5.7", 10.0, 30.0)]),
            ],
            None,
            "",
        )
        .unwrap();
        let lead = text.split("## Where").next().unwrap();
        assert!(lead.contains("slower"), "{lead}");
        assert!(
            lead.find("F5.1").unwrap() < lead.find("F5.7").unwrap(),
            "{lead}"
        );
        assert!(
            text.contains("| [F5.1](F5.1/report.md) | t | 2 | 0 | 1 | 1 |"),
            "{text}"
        );

        let text = render(
            &[folder("F5.7", vec![finding("F5.7", 50.0, 70.0)])],
            None,
            "",
        )
        .unwrap();
        let lead = text.split("## Where").next().unwrap();
        assert!(
            lead.contains("is faster than") && !lead.contains("slower"),
            "{lead}"
        );

        // AUTO's comparisons (auto against the faster mode) have their row, not the lead.
        let auto = crate::experiments::AUTO_ID;
        let text = render(
            &[
                folder("F5.7", vec![finding("F5.7", 50.0, 70.0)]),
                folder(auto, vec![finding(auto, -90.0, -80.0)]),
            ],
            None,
            "",
        )
        .unwrap();
        let lead = text.split("## Where").next().unwrap();
        assert!(!lead.contains(auto) && !lead.contains("slower"), "{lead}");
        assert!(
            text.contains(&format!(
                "| [{auto}]({auto}/report.md) | t | 1 | 0 | 0 | 1 |"
            )),
            "{text}"
        );
    }

    #[test]
    fn folders_sort_in_thesis_order() {
        let mut v = ["PEERS", "F5.10-5.11", "TB.1-3", "F5.2", "ICPE-F7", "F5.1"];
        v.sort_by_key(|n| sort_key(n));
        assert_eq!(
            v,
            ["F5.1", "F5.2", "F5.10-5.11", "TB.1-3", "ICPE-F7", "PEERS"]
        );
    }
}
