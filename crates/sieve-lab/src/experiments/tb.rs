//! Tables B.1-B.3: batch split and combine times of UFS (x = 10 MB) over 2, 3 and 5 channels,
//! in process (thesis appendix B).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sieve_core::batch::{batch_even_split, batch_file_split, batch_segment_split};
use sieve_core::gen::MB;
use sieve_core::Plan;

use crate::common::estimate::Estimate;
use crate::common::figures::{fig, thesis_series};
use crate::common::record::write_csv;
use crate::common::report::{fill, Report};
use crate::common::split_timing::{lists, split_combine, xp, Lists};
use crate::common::words::compare;
use crate::common::{Ctx, ROUNDS};
use crate::plot::{self, Series, Style};

/// The thesis's (split, combine) ms for k = 2, 3, 5.
const THESIS: [(&str, [(f64, f64); 3]); 3] = [
    ("BFS", [(0.14, 0.05), (0.12, 0.07), (0.12, 0.07)]),
    ("BSS", [(0.38, 0.14), (0.39, 0.19), (0.39, 0.26)]),
    ("BES", [(0.18, 18.94), (0.21, 20.23), (0.28, 22.58)]),
];
const KS: [usize; 3] = [2, 3, 5];

/// One row of `data.csv`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    algorithm: String,
    channels: usize,
    runs: usize,
    split_ms: f64,
    split_lo: f64,
    split_hi: f64,
    combine_ms: f64,
    combine_lo: f64,
    combine_hi: f64,
    thesis_split_ms: f64,
    thesis_combine_ms: f64,
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let reps = if ctx.quick { 5 } else { ROUNDS };
    let docs = [
        lists(&xp(MB, 0.1))?,
        lists(&xp(10 * MB, 0.5))?,
        lists(&xp(MB, 0.9))?,
    ];
    let refs: Vec<&Lists> = docs.iter().collect();
    let mut rows = Vec::new();
    for (name, th) in THESIS {
        let plan_of: &dyn Fn(&[Vec<u64>], usize) -> Plan = match name {
            "BFS" => &|d, k| batch_file_split(d, k),
            "BSS" => &|d, k| batch_segment_split(d, k),
            _ => &|d, k| batch_even_split(d, k),
        };
        for (i, k) in KS.into_iter().enumerate() {
            let (s, c) = split_combine(&refs, k, plan_of, reps);
            rows.push(Row {
                algorithm: name.into(),
                channels: k,
                runs: reps,
                split_ms: s.point,
                split_lo: s.lo,
                split_hi: s.hi,
                combine_ms: c.point,
                combine_lo: c.lo,
                combine_hi: c.hi,
                thesis_split_ms: th[i].0,
                thesis_combine_ms: th[i].1,
            });
        }
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    render(&rows, dir)
}

fn est(point: f64, lo: f64, hi: f64, n: usize) -> Estimate {
    Estimate {
        point,
        lo,
        hi,
        coverage: crate::stats::median_ci_ranks(n).map_or(0.0, |c| c.2),
        n,
    }
}

pub(crate) fn render(rows: &[Row], dir: &Path) -> Result<Report> {
    let mut t = String::from("| table | algorithm | k | split (ms) | combine (ms) | thesis split | thesis combine |\n|---|---|---|---|---|---|---|\n");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for (ti, (name, _)) in THESIS.iter().enumerate() {
        let rs: Vec<&Row> = rows.iter().filter(|r| r.algorithm == *name).collect();
        for r in &rs {
            let _ = writeln!(
                t,
                "| B.{} | {name} | {} | {} | {} | {} | {} |",
                ti + 1,
                r.channels,
                est(r.split_ms, r.split_lo, r.split_hi, r.runs).num(3),
                est(r.combine_ms, r.combine_lo, r.combine_hi, r.runs).num(2),
                r.thesis_split_ms,
                r.thesis_combine_ms
            );
        }
        ours.push(Series {
            label: format!("ours, {name} combine"),
            style: Style::Ours,
            points: rs
                .iter()
                .map(|r| (r.channels as f64, r.combine_ms))
                .collect(),
            err: Some(rs.iter().map(|r| (r.combine_lo, r.combine_hi)).collect()),
        });
        theirs.push(thesis_series(
            &format!("thesis, {name} combine"),
            rs.iter()
                .map(|r| (r.channels as f64, r.thesis_combine_ms))
                .collect(),
        ));
    }
    ours.extend(theirs);
    let mut f = fig(
        "TB.1-3: batch combine time, UFS with x = 10 MB",
        "number of channels",
        "combine time (ms)",
        ours,
    );
    f.log_y = true;
    plot::render(&f, &dir.join("tb_combine"))?;
    let combine = |name: &str, k: usize| {
        rows.iter()
            .find(|r| r.algorithm == name && r.channels == k)
            .map_or(Estimate::NONE, |r| {
                est(r.combine_ms, r.combine_lo, r.combine_hi, r.runs)
            })
    };
    let comparisons: Vec<_> = KS
        .iter()
        .map(|&k| json!({"k": k, "bes_vs_bfs": compare(&combine("BES", k), &combine("BFS", k)), "bes": combine("BES", k).num(2), "bfs": combine("BFS", k).num(2)}))
        .collect();
    let body = fill(
        "tb.md",
        include_str!("tb.md"),
        json!({"table": t, "runs": rows.first().map_or(0, |r| r.runs), "comparisons": comparisons}),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: in process.".into(),
        findings: Vec::new(),
        key_plot: Some("tb_combine".into()),
    })
}
