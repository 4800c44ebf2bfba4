//! F5.14-5.16: many documents in one session: the batch file split (BFS), batch even split (BES)
//! and batch segment split (BSS) over the uneven and even file sets (thesis §4.5, §5.4.1-5.4.3).
//! One sweep feeds two folders: `F5.14-5.15` (the times of every variant, F5.14, F5.15, A.1, A.2)
//! and `F5.16` (the improvement of the best sieve over the best secure-only variant).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use super::Output;
use crate::common::estimate::Estimate;
use crate::common::figures::{fig, improvement_figures};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::words::{point_words, trend, Outcome};
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, Point, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, SendOptions};

/// (mode, channels, batch split) of every variant, as the thesis compared them.
const VARIANTS: [(&str, u8, &str); 8] = [
    ("secure-only", 2, "file"),
    ("secure-only", 2, "even"),
    ("secure-only", 1, "dynamic"),
    ("sieve", 2, "file"),
    ("sieve", 2, "even"),
    ("sieve", 2, "segment"),
    ("sieve", 2, "dynamic"),
    ("sieve", 1, "dynamic"),
];
const SETS: [&str; 2] = ["UFS", "EFS"];

pub(crate) fn run(ctx: &mut Ctx, out: &Path) -> Result<Vec<Output>> {
    let (dir, improvement_dir) = (out.join("F5.14-5.15"), out.join("F5.16"));
    for d in [&dir, &improvement_dir] {
        std::fs::create_dir_all(d)?;
    }
    let rx = ctx.loopback()?;
    let xs: &[u64] = if ctx.quick {
        &[1, 5]
    } else {
        &[1, 3, 5, 7, 10]
    };
    let rounds = ctx.reps(ROUNDS);
    let mut pts = Vec::new();
    for &x in xs {
        for (set, files) in [("UFS", ctx.work.ufs(x)?), ("EFS", ctx.work.efs(x)?)] {
            pts.push(Point {
                scenario: "loopback".into(),
                files_label: set.into(),
                files,
                x_mb: x as f64,
                p: 0.5,
                variants: VARIANTS
                    .iter()
                    .map(|&(m, n, b)| SendOptions {
                        mode: m,
                        n,
                        m: n,
                        batch_split: b,
                        ..SendOptions::default()
                    })
                    .collect(),
                rounds,
            });
        }
    }
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    write_csv(&improvement_dir.join("data.csv"), &recs)?;
    Ok(vec![
        Output {
            folder: "F5.14-5.15".into(),
            title: "Batches UFS and EFS with BFS, BES, BSS: total time of every variant".into(),
            report: render_times(&recs, &dir)?,
        },
        Output {
            folder: "F5.16".into(),
            title: "Batches: improvement of the best sieve over the best secure-only variant"
                .into(),
            report: render_improvement(&recs, &improvement_dir)?,
        },
    ])
}

fn is_variant(r: &Record, (m, n, b): (&str, u8, &str)) -> bool {
    let mode = if m == "sieve" {
        Mode::Sieve
    } else {
        Mode::SecureOnly
    };
    r.is(mode) && r.n == n && r.batch_split == b
}

fn name((m, n, b): (&str, u8, &str)) -> String {
    format!("{m} {b} N={n}")
}

pub(crate) fn render_times(recs: &[Record], dir: &Path) -> Result<Report> {
    let xs = distinct(recs.iter().map(|r| r.x_mb));
    let med = |set: &str, x: f64, v, metric: Metric| {
        sample(
            recs,
            |r| r.files == set && same(r.x_mb, x) && is_variant(r, v),
            |r| metric.of(r),
        )
    };
    let mut tables = String::new();
    let mut best = Vec::new();
    for set in SETS {
        for metric in [Metric::Total, Metric::Response] {
            let series = VARIANTS
                .iter()
                .map(|&v| {
                    let e: Vec<Estimate> = xs.iter().map(|&x| med(set, x, v, metric)).collect();
                    Series {
                        label: name(v),
                        style: if v.0 == "sieve" {
                            Style::Ours
                        } else {
                            Style::Peer
                        },
                        points: xs.iter().zip(&e).map(|(&x, e)| (x, e.point)).collect(),
                        err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                    }
                })
                .collect();
            let whose = if metric == Metric::Total {
                "the thesis's metric"
            } else {
                "ours beside it"
            };
            plot::render(
                &fig(
                    &format!("F5.14-5.15: batch {} of {set} ({whose})", metric.name()),
                    "file size x (MB)",
                    &format!("{} (ms)", metric.name()),
                    series,
                ),
                &dir.join(format!("batch_{}_{}", set.to_lowercase(), metric.short())),
            )?;
        }
        let _ = writeln!(
            tables,
            "\n#### {set}, total time (ms)\n\n| variant | {} |\n|---|{}",
            xs.iter()
                .map(|x| format!("x = {x} MB"))
                .collect::<Vec<_>>()
                .join(" | "),
            "---|".repeat(xs.len())
        );
        for &v in &VARIANTS {
            let cells: Vec<String> = xs
                .iter()
                .map(|&x| med(set, x, v, Metric::Total).num(1))
                .collect();
            let _ = writeln!(tables, "| {} | {} |", name(v), cells.join(" | "));
        }
        for &x in &xs {
            let lowest = |mode: &str| {
                VARIANTS
                    .iter()
                    .filter(|v| v.0 == mode)
                    .min_by(|a, b| {
                        med(set, x, **a, Metric::Total)
                            .point
                            .total_cmp(&med(set, x, **b, Metric::Total).point)
                    })
                    .map(|&v| name(v))
            };
            best.push(json!({"set": set, "x": format!("{x}"), "sieve": lowest("sieve"), "secure_only": lowest("secure-only")}));
        }
    }
    tables.push_str(&interval_note(rounds_of(recs)));
    // The thesis's claims, by the rules: BFS against BES for the sieve (2 channels), at the
    // largest x of UFS.
    let x_max = xs.last().copied().unwrap_or(10.0);
    let cmp = |a, b| {
        crate::common::words::compare(
            &med("UFS", x_max, a, Metric::Total),
            &med("UFS", x_max, b, Metric::Total),
        )
    };
    let body = fill(
        "f5_14.md",
        include_str!("f5_14.md"),
        json!({
            "rounds": rounds_of(recs),
            "tables": tables,
            "best": best,
            "x_max": format!("{x_max}"),
            "sieve_bfs_vs_bes": cmp(("sieve", 2, "file"), ("sieve", 2, "even")),
            "sieve_bss_vs_bes": cmp(("sieve", 2, "segment"), ("sieve", 2, "even")),
            "so_bes_vs_bfs": cmp(("secure-only", 2, "even"), ("secure-only", 2, "file")),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings: Vec::new(),
        key_plot: Some("batch_ufs_total".into()),
    })
}

/// The thesis's F5.16: at each (set, x), the sieve variant with the lowest median total time
/// against the secure-only variant with the lowest, paired by round.
fn best_improvement(
    recs: &[Record],
    set: &str,
    x: f64,
    metric: Metric,
) -> (Estimate, String, String) {
    let at = |r: &Record| r.files == set && same(r.x_mb, x);
    let lowest = |mode: &str| {
        VARIANTS
            .iter()
            .filter(|v| v.0 == mode)
            .copied()
            .min_by(|a, b| {
                let m = |v| sample(recs, |r| at(r) && is_variant(r, v), |r| r.total_ms).point;
                m(*a).total_cmp(&m(*b))
            })
    };
    let (Some(sv), Some(so)) = (lowest("sieve"), lowest("secure-only")) else {
        return (Estimate::NONE, String::new(), String::new());
    };
    let get = |v, rep| {
        recs.iter()
            .find(|r| at(r) && r.rep == rep && is_variant(r, v))
            .map(|r| metric.of(r))
    };
    let e = Estimate::improvement(
        (0..rounds_of(recs)).filter_map(|rep| get(so, rep).zip(get(sv, rep))),
    );
    (e, name(sv), name(so))
}

pub(crate) fn render_improvement(recs: &[Record], dir: &Path) -> Result<Report> {
    let xs = distinct(recs.iter().map(|r| r.x_mb));
    improvement_figures(
        dir,
        "f5_16",
        "F5.16, best variants",
        "file size x (MB)",
        Metric::Total,
        |metric| {
            SETS.iter()
                .map(|&set| {
                    let e: Vec<Estimate> = xs
                        .iter()
                        .map(|&x| best_improvement(recs, set, x, metric).0)
                        .collect();
                    Series {
                        label: format!("ours, {set}"),
                        style: Style::Ours,
                        points: xs.iter().zip(&e).map(|(&x, e)| (x, e.point)).collect(),
                        err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                    }
                })
                .collect()
        },
    )?;
    let mut findings = Vec::new();
    let mut t = String::from("| set | x (MB) | best sieve | best secure-only | improvement of total | outcome | improvement of response | outcome |\n|---|---|---|---|---|---|---|---|\n");
    let mut sets = Vec::new();
    for set in SETS {
        let mut curve = Vec::new();
        for &x in &xs {
            let (tot, sv, so) = best_improvement(recs, set, x, Metric::Total);
            let (resp, _, _) = best_improvement(recs, set, x, Metric::Response);
            let point = format!("{set}, x = {x} MB, best variants");
            findings.push(Finding::new("F5.16", &point, "total time", &tot));
            findings.push(Finding::new("F5.16", &point, "response time", &resp));
            let _ = writeln!(
                t,
                "| {set} | {x} | {sv} | {so} | {} | {} | {} | {} |",
                tot.pct(),
                Outcome::of(&tot).adjective(),
                resp.pct(),
                Outcome::of(&resp).adjective()
            );
            curve.push(tot);
        }
        let wins = curve
            .iter()
            .filter(|e| Outcome::of(e) == Outcome::Wins)
            .count();
        let losses = curve
            .iter()
            .filter(|e| Outcome::of(e) == Outcome::Loses)
            .count();
        sets.push(json!({
            "set": set,
            "trend": trend(&curve),
            "wins": wins,
            "losses": losses,
            "n": curve.len(),
            "first": point_words(curve.first().unwrap_or(&Estimate::NONE)),
            "last": point_words(curve.last().unwrap_or(&Estimate::NONE)),
        }));
    }
    t.push_str(&interval_note(rounds_of(recs)));
    let body = fill(
        "f5_16.md",
        include_str!("f5_16.md"),
        json!({"rounds": rounds_of(recs), "table": t, "sets": sets}),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_16_total".into()),
    })
}
