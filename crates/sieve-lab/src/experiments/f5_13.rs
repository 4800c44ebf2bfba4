//! F5.13: the improvement of total time against the number of channels, per split (thesis
//! §5.3.3).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::improvement_figures;
use crate::common::record::{write_csv, Mode, Record};
use crate::common::report::{fill, Finding, Report};
use crate::common::words::{point_words, trend};
use crate::common::{rounds_of, sample, Ctx, Metric, Point, ROUNDS};
use crate::plot::{Series, Style};
use crate::run::{no_wrap, SendOptions};

const ID: &str = "F5.13";
const NS: [u8; 4] = [1, 2, 3, 5];
const SPLITS: [&str; 3] = ["even", "segment", "dynamic"];

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let x = if ctx.quick { 5 } else { 10 };
    let f = ctx.work.xp(x, 0.5)?;
    let rounds = ctx.reps(ROUNDS);
    let pts: Vec<Point> = NS
        .iter()
        .map(|&n| {
            let mut variants = vec![SendOptions {
                n,
                ..SendOptions::secure_only()
            }];
            variants.extend(SPLITS.iter().map(|&s| SendOptions {
                split: s,
                n,
                m: n,
                ..SendOptions::default()
            }));
            Point {
                scenario: "loopback".into(),
                files_label: format!("{x}MB-50"),
                files: vec![f.clone()],
                x_mb: x as f64,
                p: 0.5,
                variants,
                rounds,
            }
        })
        .collect();
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, dir)
}

/// Improvement of the sieve with `split` over secure-only, both with N channels, paired by round.
fn at(recs: &[Record], n: u8, split: &str, metric: Metric) -> Estimate {
    let find = |rep: usize, sieve: bool| {
        recs.iter()
            .find(|r| {
                r.n == n
                    && r.rep == rep
                    && if sieve {
                        r.is(Mode::Sieve) && r.split == split
                    } else {
                        r.is(Mode::SecureOnly)
                    }
            })
            .map(|r| metric.of(r))
    };
    Estimate::improvement(
        (0..rounds_of(recs)).filter_map(|rep| find(rep, false).zip(find(rep, true))),
    )
}

pub(crate) fn render(recs: &[Record], dir: &Path) -> Result<Report> {
    let x = recs.first().map_or(10.0, |r| r.x_mb);
    let ns: Vec<u8> = NS
        .iter()
        .copied()
        .filter(|n| recs.iter().any(|r| r.n == *n))
        .collect();
    improvement_figures(
        dir,
        "f5_13",
        &format!("F5.13, x = {x} MB, P = 0.5"),
        "number of channels N = M",
        Metric::Total,
        |metric| {
            SPLITS
                .iter()
                .map(|&s| {
                    let e: Vec<Estimate> = ns.iter().map(|&n| at(recs, n, s, metric)).collect();
                    Series {
                        label: format!("ours, {s}"),
                        style: Style::Ours,
                        points: ns
                            .iter()
                            .zip(&e)
                            .map(|(&n, e)| (f64::from(n), e.point))
                            .collect(),
                        err: Some(e.iter().map(|e| (e.lo, e.hi)).collect()),
                    }
                })
                .collect()
        },
    )?;
    let mut findings = Vec::new();
    let mut t =
        String::from("| N = M | ES: improvement of total | SS | dynamic |\n|---|---|---|---|\n");
    for &n in &ns {
        let cells: Vec<String> = SPLITS
            .iter()
            .map(|&s| {
                let e = at(recs, n, s, Metric::Total);
                findings.push(Finding::new(
                    ID,
                    &format!("{s}, N = M = {n}, {x}MB-50"),
                    "total time",
                    &e,
                ));
                format!(
                    "{} ({})",
                    e.pct(),
                    crate::common::words::Outcome::of(&e).adjective()
                )
            })
            .collect();
        t.push_str(&format!("| {n} | {} |\n", cells.join(" | ")));
    }
    t.push_str(&crate::common::report::interval_note(rounds_of(recs)));
    let splits: Vec<_> = SPLITS
        .iter()
        .map(|&s| {
            let curve: Vec<Estimate> = ns.iter().map(|&n| at(recs, n, s, Metric::Total)).collect();
            json!({
                "split": s,
                "trend": trend(&curve),
                "first": point_words(curve.first().unwrap_or(&Estimate::NONE)),
                "last": point_words(curve.last().unwrap_or(&Estimate::NONE)),
            })
        })
        .collect();
    let ss_vs_es: Vec<_> = ns
        .iter()
        .map(|&n| {
            let (ss, es) = (
                at(recs, n, "segment", Metric::Total),
                at(recs, n, "even", Metric::Total),
            );
            json!({"n": n, "words": crate::common::words::compare(&ss, &es)})
        })
        .collect();
    // What N does to each system's own total, and how long the sieve's set-up took at the most
    // channels: whether set-up or the transfer is what moves.
    let (first_n, last_n) = (
        ns.first().copied().unwrap_or(1),
        ns.last().copied().unwrap_or(1),
    );
    let median = |n: u8, system: &dyn Fn(&Record) -> bool, of: fn(&Record) -> f64| {
        sample(recs, |r| r.n == n && system(r), of)
    };
    let total = |r: &Record| r.total_ms;
    let connect = |r: &Record| r.connect_ms;
    let secure_only = |r: &Record| r.is(Mode::SecureOnly);
    let own: Vec<_> = std::iter::once(("secure-only".to_string(), None))
        .chain(
            SPLITS
                .iter()
                .map(|&s| (format!("the sieve with {s}"), Some(s))),
        )
        .map(|(label, split)| {
            let system = move |r: &Record| match split {
                None => r.is(Mode::SecureOnly),
                Some(s) => r.is(Mode::Sieve) && r.split == s,
            };
            let (a, b) = (
                median(first_n, &system, total),
                median(last_n, &system, total),
            );
            json!({
                "system": label,
                "first": a.num(1),
                "last": b.num(1),
                "words": crate::common::words::compare(&b, &a),
                "connect_last": median(last_n, &system, connect).num(1),
            })
        })
        .collect();
    let so_flat = {
        let (a, b) = (
            median(first_n, &secure_only, total),
            median(last_n, &secure_only, total),
        );
        crate::common::words::compare(&b, &a) != "higher than"
    };
    let body = fill(
        "f5_13.md",
        include_str!("f5_13.md"),
        json!({
            "rounds": rounds_of(recs),
            "x": x,
            "table": t,
            "splits": splits,
            "ss_vs_es": ss_vs_es,
            "first_n": ns.first(),
            "last_n": ns.last(),
            "own": own,
            "so_flat": so_flat,
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_13_total".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::record::{read_csv, CSV_HEADER};

    /// Three rounds at each N: secure-only's total is `so(n)`, every sieve split's `sv(n)`.
    fn fixture(so: impl Fn(u8) -> f64, sv: impl Fn(u8) -> f64) -> Vec<Record> {
        let mut csv = String::from(CSV_HEADER);
        for rep in 0..3 {
            for n in NS {
                let mut row = |mode: &str, m: u8, split: &str, t: f64| {
                    let t = t + 0.01 * rep as f64;
                    csv.push_str(&format!(
                        "loopback,10MB-50,{mode},10,0.5,{n},{m},{split},dynamic,aes128gcm,0,{rep},\
                         1.5,1,0.3,0.2,{},{t},0.4,0,0,{},0,0,9,10000000,5000000,5000000,TLS13\n",
                        t - 1.5,
                        t - 2.0,
                    ));
                };
                row("secure-only", 0, "dynamic", so(n));
                for s in SPLITS {
                    row("sieve", n, s, sv(n));
                }
            }
        }
        read_csv(csv.as_bytes()).expect("fixture parses")
    }

    /// The explanation follows the data: a sieve whose total grows with N beside a flat
    /// secure-only is said to compete for the CPU, and both growing is said as such.
    #[test]
    fn what_n_does_to_each_total_is_said_from_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let sieve_grows = render(
            &fixture(|_| 10.0, |n| 10.0 + 2.0 * f64::from(n)),
            dir.path(),
        )
        .unwrap()
        .body;
        assert!(
            sieve_grows.contains(
                "the sieve with even: 12.0 [12.0, 12.0] → 20.0 [20.0, 20.0] (higher than at N = 1)"
            ),
            "{sieve_grows}"
        );
        assert!(
            sieve_grows.contains(
                "secure-only: 10.0 [10.0, 10.0] → 10.0 [10.0, 10.0] (the same within the noise as"
            ),
            "{sieve_grows}"
        );
        assert!(
            sieve_grows.contains("as secure-only's N do not"),
            "{sieve_grows}"
        );
        let both_grow = render(
            &fixture(|n| 10.0 + 2.0 * f64::from(n), |n| 10.0 + 2.0 * f64::from(n)),
            dir.path(),
        )
        .unwrap()
        .body;
        assert!(
            both_grow.contains("Both systems' totals grow"),
            "{both_grow}"
        );
        assert!(
            !both_grow.contains("as secure-only's N do not"),
            "{both_grow}"
        );
    }
}
