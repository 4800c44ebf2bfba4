//! Table 5.3 and Figures 5.17-5.18: a Poisson stream of 1MB-50 requests, batched in fives or
//! not, simulated with service times measured on the real system (thesis §5.4.4), over five
//! seeds with their spread.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sieve_core::gen::MB;

use crate::common::estimate::Estimate;
use crate::common::figures::{fig, thesis_series};
use crate::common::record::write_csv;
use crate::common::report::{fill, Report};
use crate::common::{Ctx, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::queue::{simulate, thesis_table_5_3, BatchService, Dist, Policy};
use crate::run::{no_wrap, SendOptions};

/// The thesis ran each point five times; so do we, with seeds 1 to 5.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];
const LAMBDAS: [f64; 11] = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5];
const POLICIES: [(&str, Policy); 3] = [
    ("none", Policy::None),
    ("fixed batch of 5", Policy::Fixed(5)),
    ("adaptive (≤ 32)", Policy::Adaptive { max_batch: 32 }),
];

/// One simulated point: a service, a policy, an arrival rate and a seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    service: String,
    lambda_per_s: f64,
    policy: String,
    seed: u64,
    mean_turnaround_s: f64,
    p50_s: f64,
    p99_s: f64,
    utilisation: f64,
    saturated: bool,
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let reps = ctx.reps(ROUNDS);
    let (single, batch5) = measure_service(ctx, reps)?;
    let ours = BatchService::through(
        single.point / 1e3,
        5,
        batch5.point / 1e3,
        Dist::Deterministic,
    );
    let thesis = BatchService::thesis();
    let n = if ctx.quick { 20_000 } else { 200_000 };
    // Our λ keep the thesis's utilisation of the no-batching server: λ · D the same.
    let scale = thesis.mean(1) / ours.mean(1);
    let mut rows = Vec::new();
    for (service, svc, factor) in [("thesis", thesis, 1.0), ("ours", ours, scale)] {
        for &l in &LAMBDAS {
            for (name, policy) in POLICIES {
                for seed in SEEDS {
                    let r = simulate(l * factor, policy, svc, n, seed);
                    rows.push(Row {
                        service: service.into(),
                        lambda_per_s: l * factor,
                        policy: name.into(),
                        seed,
                        mean_turnaround_s: r.mean_turnaround,
                        p50_s: r.p50,
                        p99_s: r.p99,
                        utilisation: r.utilisation,
                        saturated: r.saturated,
                    });
                }
            }
        }
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    render(&rows, dir, (&single, &batch5), reps, n)
}

/// Total time (ms) of one 1MB-50 transfer and of a batch of five, sieve mode, new connection
/// each, alternating: medians with their intervals.
fn measure_service(ctx: &mut Ctx, reps: usize) -> Result<(Estimate, Estimate)> {
    let rx = ctx.loopback()?;
    let one = ctx.work.xp(1, 0.5)?;
    let five: Vec<_> = (1..=5)
        .map(|c| ctx.work.xp_bytes(MB, 0.5, c))
        .collect::<Result<_>>()?;
    let v = SendOptions::default();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        a.push(
            v.run(&ctx.tools, rx.tls, std::slice::from_ref(&one), &no_wrap)?
                .total_ms,
        );
        b.push(v.run(&ctx.tools, rx.tls, &five, &no_wrap)?.total_ms);
    }
    Ok((Estimate::median_of(&a), Estimate::median_of(&b)))
}

/// Mean turnaround over the seeds at one point: (mean of the seeds' means, min, max), or None
/// when any seed saturated.
fn over_seeds(
    rows: &[Row],
    service: &str,
    policy: &str,
    lambda_index: usize,
) -> Option<(f64, f64, f64)> {
    let lambdas: Vec<f64> = {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.service == service)
            .map(|r| r.lambda_per_s)
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let lambda = *lambdas.get(lambda_index)?;
    let xs: Vec<&Row> = rows
        .iter()
        .filter(|r| r.service == service && r.policy == policy && r.lambda_per_s == lambda)
        .collect();
    if xs.is_empty() || xs.iter().any(|r| r.saturated) {
        return None;
    }
    let m: Vec<f64> = xs.iter().map(|r| r.mean_turnaround_s).collect();
    let mean = m.iter().sum::<f64>() / m.len() as f64;
    Some((
        mean,
        m.iter().copied().fold(f64::INFINITY, f64::min),
        m.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    ))
}

/// The share (%) of one file's service time that a batch pays once: per-batch over single, from
/// the line through the single and five-file times.
fn share(single: &Estimate, batch5: &Estimate) -> f64 {
    let per_file = (batch5.point - single.point) / 4.0;
    (single.point - per_file) / single.point * 100.0
}

fn cell(v: Option<(f64, f64, f64)>) -> String {
    v.map_or("saturated".into(), |(m, lo, hi)| {
        format!("{m:.3} [{lo:.3}..{hi:.3}]")
    })
}

pub(crate) fn render(
    rows: &[Row],
    dir: &Path,
    (single, batch5): (&Estimate, &Estimate),
    reps: usize,
    n: usize,
) -> Result<Report> {
    let table = thesis_table_5_3();
    let ours_lambda = |i: usize| {
        let mut v: Vec<f64> = rows
            .iter()
            .filter(|r| r.service == "ours")
            .map(|r| r.lambda_per_s)
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.get(i).copied().unwrap_or(f64::NAN)
    };
    let scale = ours_lambda(0) / LAMBDAS[0];
    let mut t = String::from("| λ thesis (1/s) | thesis batching | thesis none | sim, thesis's service: none | fixed 5 | adaptive | λ ours (1/s) | ours: none | fixed 5 | adaptive |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let mut series: Vec<Series> = Vec::new();
    let mut lower = Vec::new();
    for (i, &l) in LAMBDAS.iter().enumerate() {
        let th = table.iter().find(|x| (x.0 - l).abs() < 1e-9);
        let f = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.2}"));
        let _ = writeln!(
            t,
            "| {l} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            f(th.and_then(|x| x.1)),
            f(th.and_then(|x| x.2)),
            cell(over_seeds(rows, "thesis", "none", i)),
            cell(over_seeds(rows, "thesis", "fixed batch of 5", i)),
            cell(over_seeds(rows, "thesis", "adaptive (≤ 32)", i)),
            ours_lambda(i),
            cell(over_seeds(rows, "ours", "none", i)),
            cell(over_seeds(rows, "ours", "fixed batch of 5", i)),
            cell(over_seeds(rows, "ours", "adaptive (≤ 32)", i)),
        );
        // Batching against none on our service, by the spread over seeds.
        let (b, o) = (
            over_seeds(rows, "ours", "fixed batch of 5", i),
            over_seeds(rows, "ours", "none", i),
        );
        lower.push(json!({"lambda": format!("{l}"), "words": match (b, o) {
            (Some(_), None) => "stable where sending one file per connection saturates",
            (None, _) => "saturated",
            (Some(b), Some(o)) if b.2 < o.1 => "lower than without batching",
            (Some(b), Some(o)) if b.1 > o.2 => "higher than without batching",
            _ => "the same within the spread of the seeds as without batching",
        }}));
    }
    for (name, _) in POLICIES {
        for (service, style, factor) in [("ours", Style::Ours, scale), ("thesis", Style::Peer, 1.0)]
        {
            let mut points = Vec::new();
            let mut err = Vec::new();
            for (i, &l) in LAMBDAS.iter().enumerate() {
                if let Some((m, lo, hi)) = over_seeds(rows, service, name, i) {
                    points.push((l, m * factor));
                    err.push((lo * factor, hi * factor));
                }
            }
            let label = if service == "ours" {
                format!("ours (time × D ratio), {name}")
            } else {
                format!("simulated, thesis's service, {name}")
            };
            series.push(Series {
                label,
                style,
                points,
                err: Some(err),
            });
        }
    }
    series.push(thesis_series(
        "thesis Table 5.3, batching",
        table.iter().filter_map(|x| x.1.map(|v| (x.0, v))).collect(),
    ));
    series.push(thesis_series(
        "thesis Table 5.3, none",
        table.iter().filter_map(|x| x.2.map(|v| (x.0, v))).collect(),
    ));
    let mut f = fig(
        "T5.3 / F5.17-5.18: mean turnaround vs arrival rate (1MB-50 requests)",
        "arrival rate λ at the thesis's scale (requests/s)",
        "mean turnaround (s, log scale)",
        series,
    );
    f.log_y = true;
    plot::render(&f, &dir.join("t5_3_turnaround"))?;
    let body = fill(
        "t5_3.md",
        include_str!("t5_3.md"),
        json!({
            "reps": reps,
            "single": single.num(1),
            "batch5": batch5.num(1),
            "n": n,
            "seeds": SEEDS.len(),
            "scale": format!("{scale:.0}"),
            "table": t,
            "lower": lower,
            "our_share": format!("{:.0}", share(single, batch5)),
            "thesis_share": format!("{:.0}", share(&Estimate { point: 933.0, ..Estimate::NONE }, &Estimate { point: 1552.0, ..Estimate::NONE })),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "an arrival stream, simulated (seeded Poisson arrivals, deterministic service \
                   times measured on loopback in this run)."
            .into(),
        findings: Vec::new(),
        key_plot: Some("t5_3_turnaround".into()),
    })
}
