//! F5.12 and Table 5.2: the even split (ES) against the segment split (SS) with N = M = 2, and
//! our dynamic scheduler beside them (thesis §4.3.3-4.3.4, §5.3.2.2).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;
use sieve_core::gen::MB;
use sieve_core::split::{even_split, segment_split};

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::record::{same, write_csv, Record};
use crate::common::report::{fill, interval_note, Report};
use crate::common::split_timing::{lists, split_combine, xp};
use crate::common::words::Outcome;
use crate::common::{distinct, rounds_of, sample, xp_label, Ctx, Point, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, SendOptions};

const SPLITS: [&str; 3] = ["even", "segment", "dynamic"];

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.5, 0.9]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9]
    };
    let x = if ctx.quick { 5 } else { 10 };
    let rounds = ctx.reps(ROUNDS);
    let mut pts = Vec::new();
    for &p in ps {
        pts.push(Point {
            scenario: "loopback".into(),
            files_label: xp_label(x as f64, p),
            files: vec![ctx.work.xp(x, p)?],
            x_mb: x as f64,
            p,
            variants: SPLITS
                .iter()
                .map(|&s| SendOptions {
                    split: s,
                    n: 2,
                    m: 2,
                    ..SendOptions::default()
                })
                .collect(),
            rounds,
        });
    }
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    let t52 = table_5_2(if ctx.quick { 5 } else { ROUNDS })?;
    render(&recs, &t52, dir)
}

/// Table 5.2: ES and SS of a 10MB-50 document over 2 channels, in process.
fn table_5_2(reps: usize) -> Result<String> {
    let l = lists(&xp(10 * MB, 0.5))?;
    let es = split_combine(&[&l], 2, &|d, k| even_split(&d[0], k), reps);
    let ss = split_combine(&[&l], 2, &|d, k| segment_split(&d[0], k), reps);
    Ok(format!(
        "| algorithm | split (ms), ours | combine (ms), ours | split (ms), thesis | combine (ms), thesis |\n\
         |---|---|---|---|---|\n| ES | {} | {} | 0.24 | 13.5 |\n| SS | {} | {} | 0.36 | 0.14 |\n\n\
         Medians [interval] of {reps} runs in process. Our combine copies every byte into one \
         contiguous stream per kind, for every algorithm; the thesis's SS combine only rearranged \
         references to Java strings, and its ES combine concatenated strings.\n",
        es.0.num(3),
        es.1.num(2),
        ss.0.num(3),
        ss.1.num(2)
    ))
}

/// SS against ES at P, paired by round: (ES − SS) / ES × 100, positive where SS is faster.
fn ss_over_es(recs: &[Record], p: f64) -> Estimate {
    let at = |s: &str, rep: usize| {
        recs.iter()
            .find(|r| r.split == s && r.rep == rep && same(r.p, p))
            .map(|r| r.response_ms)
    };
    Estimate::improvement(
        (0..rounds_of(recs)).filter_map(|rep| at("even", rep).zip(at("segment", rep))),
    )
}

pub(crate) fn render(recs: &[Record], t52: &str, dir: &Path) -> Result<Report> {
    let ps = distinct(recs.iter().map(|r| r.p));
    let x = recs.first().map_or(10.0, |r| r.x_mb);
    let med = |s: &str, p: f64| sample(recs, |r| r.split == s && same(r.p, p), |r| r.response_ms);
    let series = SPLITS
        .iter()
        .map(|&s| {
            let e: Vec<Estimate> = ps.iter().map(|&p| med(s, p)).collect();
            Series {
                label: format!("ours, {s}"),
                style: Style::Ours,
                points: ps.iter().zip(&e).map(|(&p, e)| (p, e.point)).collect(),
                err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
            }
        })
        .collect();
    plot::render(
        &fig(
            &format!(
                "F5.12: sieve response time by split, N = M = 2, x = {x} MB (the thesis's metric)"
            ),
            "proportion of classified information P",
            "response time (ms)",
            series,
        ),
        &dir.join("f5_12_response"),
    )?;
    let mut t = String::from("| P | ES response (ms) | SS response (ms) | dynamic response (ms) | SS against ES | which is faster |\n|---|---|---|---|---|---|\n");
    let mut points = Vec::new();
    for &p in &ps {
        let d = ss_over_es(recs, p);
        let faster = match Outcome::of(&d) {
            Outcome::Wins => "SS",
            Outcome::Loses => "ES",
            Outcome::Ties => "neither (within the noise)",
        };
        let _ = writeln!(
            t,
            "| {p} | {} | {} | {} | {} | {faster} |",
            med("even", p).num(2),
            med("segment", p).num(2),
            med("dynamic", p).num(2),
            d.pct()
        );
        points.push(json!({"p": p, "faster": faster, "pct": d.pct()}));
    }
    t.push_str(&interval_note(rounds_of(recs)));
    let es_wins_high = points
        .iter()
        .filter(|v| v["p"].as_f64().is_some_and(|p| p > 0.6))
        .all(|v| v["faster"] == "ES");
    let body = fill(
        "f5_12.md",
        include_str!("f5_12.md"),
        json!({
            "rounds": rounds_of(recs),
            "x": x,
            "table": t,
            "points": points,
            "es_wins_high": es_wins_high,
            "t52": t52,
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings: Vec::new(),
        key_plot: Some("f5_12_response".into()),
    })
}
