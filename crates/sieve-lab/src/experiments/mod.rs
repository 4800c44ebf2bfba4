//! The experiments of thesis chapter 5 (and the ICPE paper's queueing figure), plus our own.
//!
//! Each experiment writes `results/<id>/data.csv` (every raw measurement), its figures (PNG and
//! SVG, thesis values overlaid where the seeds give numbers) and `report.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use crate::measure::{
    self, fmt_summary, improvement_at, paired_improvements, summary, Point, Record,
};
use crate::plot::{Figure, Series, Style};
use crate::run::{no_wrap, Receiver, SendOptions, Tools, Wrap};
use crate::workload::Workloads;

mod batches;
mod channels;
mod ciphers;
mod size_and_p;
mod splits;

use batches::f5_14;
use channels::{f5_10, f5_13, f5_8};
use ciphers::f5_3;
use size_and_p::{f5_1, f5_2};
use splits::f5_12;

/// What an experiment gets to work with.
pub(crate) struct Ctx {
    pub(crate) tools: Tools,
    pub(crate) work: Workloads,
    pub(crate) quick: bool,
    pub(crate) bar: ProgressBar,
}

impl Ctx {
    /// Repetitions per point: the thesis made 500; we make fewer, and report intervals.
    pub(crate) fn reps(&self, full: usize) -> usize {
        if self.quick {
            3
        } else {
            full
        }
    }
}

pub(crate) struct Experiment {
    pub(crate) id: &'static str,
    pub(crate) title: &'static str,
    pub(crate) run: fn(&mut Ctx, &Path) -> Result<String>,
}

/// Every experiment, in the order of EXPERIMENTS.md.
pub(crate) fn all() -> Vec<Experiment> {
    vec![
        Experiment {
            id: "F5.1",
            title: "Improvement vs proportion of classified information P (x = 1, 10 MB)",
            run: f5_1,
        },
        Experiment {
            id: "F5.2",
            title: "Improvement vs file size x (P = 0.1, 0.5, 0.9)",
            run: f5_2,
        },
        Experiment {
            id: "F5.3-5.4",
            title: "Effect of the symmetric cipher",
            run: f5_3,
        },
        Experiment {
            id: "F5.5-5.6",
            title: "Wi-Fi link (54 Mbit/s) and a power-saving client",
            run: crate::scenarios::f5_5,
        },
        Experiment {
            id: "F5.7",
            title: "Wi-Fi with additional processing AP = 500 ms per secure MB",
            run: crate::scenarios::f5_7,
        },
        Experiment {
            id: "F5.8-5.9",
            title: "Secure-only system with N = 1, 2, 3, 5 channels",
            run: f5_8,
        },
        Experiment {
            id: "F5.10-5.11",
            title: "Security sieve with N = M = 1, 2, 3, 5 channels",
            run: f5_10,
        },
        Experiment {
            id: "F5.12/T5.2",
            title: "Even split (ES) vs segment split (SS) with N = M = 2",
            run: f5_12,
        },
        Experiment {
            id: "F5.13",
            title: "Improvement of total time vs number of channels",
            run: f5_13,
        },
        Experiment {
            id: "F5.14-5.16",
            title: "Batches: UFS and EFS with BFS, BES, BSS",
            run: f5_14,
        },
        Experiment {
            id: "TB.1-3",
            title: "Batch split/combine times (UFS, x = 10 MB, 2, 3, 5 channels)",
            run: crate::algo::tb,
        },
        Experiment {
            id: "T5.3/F5.17-5.18",
            title: "Arrival stream: batching vs none (simulation from measured service times)",
            run: crate::algo::t5_3,
        },
        Experiment {
            id: "ICPE-F7",
            title: "Open queueing model R = D/(1 − λD), sieve vs secure-only",
            run: crate::algo::icpe_f7,
        },
        Experiment {
            id: "CPU-P",
            title: "CPU seconds per GB vs P, sender and receiver",
            run: crate::scenarios::cpu_p,
        },
        Experiment {
            id: "PEERS",
            title: "Today's tools side by side: socat, socat+OpenSSL, scp, iperf3",
            run: crate::scenarios::peers,
        },
    ]
}

pub(crate) const PS: [f64; 6] = [0.1, 0.25, 0.5, 0.75, 0.9, 1.0];
pub(crate) const XS: [u64; 5] = [1, 3, 5, 7, 10];

fn so(n: u8) -> SendOptions {
    SendOptions {
        mode: "secure-only",
        n,
        m: 1,
        ..SendOptions::default()
    }
}
fn sv(n: u8, m: u8) -> SendOptions {
    SendOptions {
        mode: "sieve",
        n,
        m,
        ..SendOptions::default()
    }
}

/// Write every record to `data.csv`.
pub(crate) fn write_csv(dir: &Path, recs: &[Record]) -> Result<()> {
    let mut s = String::from(measure::CSV_HEADER);
    s.push('\n');
    for r in recs {
        s.push_str(&r.csv());
        s.push('\n');
    }
    std::fs::write(dir.join("data.csv"), s).context("cannot write data.csv")
}

/// A receiver on loopback with `--discard`: like the thesis's server, which kept documents in
/// memory, it verifies and acknowledges but does not write (no fsync in the response time).
pub(crate) fn loopback(ctx: &Ctx) -> Result<Receiver> {
    Receiver::start(&ctx.tools, "127.0.0.1", false, &no_wrap)
}

/// Standard pair sweep over x-P files: (x, P) points, secure-only and sieve alternating.
pub(crate) fn xp_points(
    ctx: &mut Ctx,
    scenario: &str,
    xs: &[u64],
    ps: &[f64],
    so_v: &SendOptions,
    sv_v: &SendOptions,
) -> Result<Vec<Point>> {
    let mut pts = Vec::new();
    for &x in xs {
        for &p in ps {
            pts.push(Point {
                scenario: scenario.into(),
                files_label: format!("{x}MB-{}", (p * 100.0).round()),
                files: vec![ctx.work.xp(x, p)?],
                x_mb: x as f64,
                p,
                variants: vec![so_v.clone(), sv_v.clone()],
            });
        }
    }
    Ok(pts)
}

pub(crate) fn run_points(
    ctx: &mut Ctx,
    rx: &Receiver,
    pts: &[Point],
    reps: usize,
    wrap: Wrap<'_>,
) -> Result<Vec<Record>> {
    let n: usize = pts.iter().map(|p| p.variants.len()).sum::<usize>() * reps;
    ctx.bar.set_length(ctx.bar.length().unwrap_or(0) + n as u64);
    measure::sweep(&ctx.tools, rx, pts, reps, wrap, &ctx.bar)
}

/// Improvement curve (eq. 1 on medians) vs P for one x, with a paired 95 % interval.
pub(crate) fn improvement_series(
    recs: &[Record],
    label: &str,
    key: impl Fn(&Record) -> bool + Copy,
    xs: &[f64],
    x_of: impl Fn(&Record) -> f64 + Copy,
    metric: fn(&crate::run::Session) -> f64,
) -> Series {
    let mut points = Vec::new();
    let mut err = Vec::new();
    for &x in xs {
        let at = |r: &Record| key(r) && (x_of(r) - x).abs() < 1e-9;
        let s = paired_improvements(recs, at, metric);
        if s.n > 0 {
            points.push((x, improvement_at(recs, at, metric)));
            err.push(s.ci95_median);
        }
    }
    Series {
        label: label.into(),
        style: Style::Ours,
        points,
        err: Some(err),
    }
}

pub(crate) fn thesis_series(label: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        style: Style::Thesis,
        points,
        err: None,
    }
}

pub(crate) fn fig(title: &str, x: &str, y: &str, series: Vec<Series>) -> Figure {
    Figure {
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        series,
        log_y: false,
        x_categories: None,
    }
}

fn response(s: &crate::run::Session) -> f64 {
    s.response_ms
}
fn total(s: &crate::run::Session) -> f64 {
    s.total_ms
}

/// A labelled selection of records: one row of a table.
pub(crate) type Row<'a> = (String, Box<dyn Fn(&Record) -> bool + 'a>);

/// A markdown table of medians [95 % CI] of response and total time, and improvements.
pub(crate) fn pair_table(recs: &[Record], rows: &[Row<'_>]) -> String {
    let mut t = String::from(
        "| point | secure-only response (ms) | sieve response (ms) | improvement response | secure-only total (ms) | sieve total (ms) | improvement total |\n|---|---|---|---|---|---|---|\n",
    );
    for (label, at) in rows {
        let so_r = summary(recs, |r| at(r) && r.send.mode == "secure-only", response);
        let sv_r = summary(recs, |r| at(r) && r.send.mode == "sieve", response);
        let so_t = summary(recs, |r| at(r) && r.send.mode == "secure-only", total);
        let sv_t = summary(recs, |r| at(r) && r.send.mode == "sieve", total);
        let _ = writeln!(
            t,
            "| {label} | {} | {} | {:.1} % | {} | {} | {:.1} % |",
            fmt_summary(&so_r),
            fmt_summary(&sv_r),
            crate::stats::improvement(so_r.median, sv_r.median),
            fmt_summary(&so_t),
            fmt_summary(&sv_t),
            crate::stats::improvement(so_t.median, sv_t.median)
        );
    }
    t
}

/// One table row per (x, P) point.
fn xp_rows(xs: &[u64], ps: &[f64]) -> Vec<Row<'static>> {
    xs.iter()
        .flat_map(|&x| ps.iter().map(move |&p| (x, p)))
        .map(|(x, p)| {
            let f: Box<dyn Fn(&Record) -> bool> = Box::new(move |r: &Record| {
                (r.x_mb - x as f64).abs() < 1e-9 && (r.p - p).abs() < 1e-9
            });
            (format!("{x}MB-{}", (p * 100.0).round()), f)
        })
        .collect()
}

/// The machine, for every report.
pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    format!(
        "{cpu}, {cores} cores, {:.0} GiB RAM, Linux {}",
        mem as f64 / 1048576.0,
        kernel.trim()
    )
}

/// Run the experiments `ids` (or all) and write `out/<id>/`.
pub(crate) fn run(
    ids: &[String],
    quick: bool,
    out: &Path,
    sieve: PathBuf,
) -> Result<Vec<(String, Result<()>)>> {
    let exps = all();
    let chosen: Vec<&Experiment> = if ids.iter().any(|i| i == "all") {
        exps.iter().collect()
    } else {
        let mut v = Vec::new();
        for id in ids {
            let e = exps
                .iter()
                .find(|e| e.id.eq_ignore_ascii_case(id))
                .with_context(|| format!("no experiment '{id}'; `sieve lab list` names them"))?;
            v.push(e);
        }
        v
    };
    // Namespaces and cgroups of an earlier lab run that was killed before it could remove them.
    for gone in crate::scenario::cleanup_stale() {
        tracing::info!("removed {gone}, left by an ended lab run");
    }
    let work = tempfile::tempdir()?;
    let tools = Tools::new(sieve, work.path())?;
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
    let mut ctx = Ctx {
        tools,
        work: Workloads::new(&work.path().join("files"))?,
        quick,
        bar,
    };
    let mut results = Vec::new();
    for e in chosen {
        ctx.bar.set_message(e.id);
        let dir = out.join(e.id.replace('/', "_"));
        std::fs::create_dir_all(&dir)?;
        let started = std::time::Instant::now();
        let r = (e.run)(&mut ctx, &dir).and_then(|body| {
            let report = format!(
                "# {}: {}\n\nMachine: {}. Run: {} ({}), {:.0} s.\n\n{}",
                e.id,
                e.title,
                machine(),
                if quick { "quick" } else { "full" },
                std::env::args().collect::<Vec<_>>().join(" "),
                started.elapsed().as_secs_f64(),
                body
            );
            std::fs::write(dir.join("report.md"), report).context("cannot write report.md")
        });
        if let Err(err) = &r {
            ctx.bar.println(format!("{}: {err:#}", e.id));
        }
        results.push((e.id.to_string(), r));
    }
    ctx.bar.finish_and_clear();
    Ok(results)
}
