//! What every experiment stands on: the context it runs in, the sweep that measures transfers
//! ([`sweep`]), the one estimator ([`estimate`]), the rules that turn numbers into words
//! ([`words`]), and the report and figure helpers ([`report`], [`figures`]). Experiments import
//! from here and never from each other.

pub(crate) mod curves;
pub(crate) mod estimate;
pub(crate) mod figures;
pub(crate) mod links;
pub(crate) mod masks;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod split_timing;
pub(crate) mod suites;
pub(crate) mod words;

use std::path::PathBuf;

use anyhow::Result;
use indicatif::ProgressBar;

use crate::run::{no_wrap, Receiver, SendOptions, Tools, Wrap};
use crate::workload::Workloads;
use estimate::Estimate;
use record::{At, Mode, Record};

/// What an experiment gets to work with.
pub(crate) struct Ctx {
    pub(crate) machine: crate::machine::Machine,
    pub(crate) tools: Tools,
    pub(crate) work: Workloads,
    pub(crate) quick: bool,
    pub(crate) bar: ProgressBar,
}

/// Rounds of a point whose transfers take under a second each: at least 30 (the thesis made
/// 500), 3 in a quick run.
pub(crate) const ROUNDS: usize = 30;

impl Ctx {
    /// Rounds per point: `full` in a full run, 3 in a quick one.
    pub(crate) fn reps(&self, full: usize) -> usize {
        if self.quick {
            3
        } else {
            full
        }
    }

    /// A receiver on loopback with `--discard`: like the thesis's server, which kept documents
    /// in memory, it verifies and acknowledges but does not write (no fsync in the response
    /// time).
    pub(crate) fn loopback(&self) -> Result<Receiver> {
        Receiver::start(&self.tools, "127.0.0.1", false, &no_wrap)
    }

    /// Secure-only and sieve at (x, P) points over x-P files, alternating within each round.
    pub(crate) fn xp_points(
        &mut self,
        scenario: &str,
        xs: &[u64],
        ps: &[f64],
        pair: (&SendOptions, &SendOptions),
        rounds: usize,
    ) -> Result<Vec<Point>> {
        let mut pts = Vec::new();
        for &x in xs {
            for &p in ps {
                pts.push(Point {
                    scenario: scenario.into(),
                    files_label: xp_label(x as f64, p),
                    files: vec![self.work.xp(x, p)?],
                    x_mb: x as f64,
                    p,
                    variants: vec![pair.0.clone(), pair.1.clone()],
                    rounds,
                });
            }
        }
        Ok(pts)
    }

    /// Measure `points` against `rx`, every variant once per round.
    pub(crate) fn sweep(
        &mut self,
        rx: &Receiver,
        points: &[Point],
        wrap: Wrap<'_>,
    ) -> Result<Vec<Record>> {
        let n: usize = points.iter().map(|p| p.variants.len() * p.rounds).sum();
        self.bar
            .set_length(self.bar.length().unwrap_or(0) + n as u64);
        let rounds = points.iter().map(|p| p.rounds).max().unwrap_or(0);
        let mut out = Vec::new();
        for rep in 0..rounds {
            for pt in points.iter().filter(|p| rep < p.rounds) {
                let at = At {
                    scenario: &pt.scenario,
                    files: &pt.files_label,
                    x_mb: pt.x_mb,
                    p: pt.p,
                };
                for v in &pt.variants {
                    let s = v.run(&self.tools, rx.tls, &pt.files, wrap)?;
                    out.push(Record::new(&at, v, rep, &s));
                    self.bar.inc(1);
                }
            }
        }
        Ok(out)
    }
}

/// "1MB-10": the thesis's name of an x-P file.
pub(crate) fn xp_label(x_mb: f64, p: f64) -> String {
    format!("{x_mb}MB-{}", (p * 100.0).round())
}

/// A point of an experiment: what to send, and how (several variants alternate per round).
pub(crate) struct Point {
    pub(crate) scenario: String,
    pub(crate) files_label: String,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) x_mb: f64,
    pub(crate) p: f64,
    pub(crate) variants: Vec<SendOptions>,
    pub(crate) rounds: usize,
}

/// The thesis's two times (§5.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metric {
    /// From the request until the receiver's acknowledgement (sieve, transfer, integrate).
    Response,
    /// Connection set-up plus response time.
    Total,
}

impl Metric {
    pub(crate) fn of(self, r: &Record) -> f64 {
        match self {
            Metric::Response => r.response_ms,
            Metric::Total => r.total_ms,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Metric::Response => "response time",
            Metric::Total => "total time",
        }
    }

    /// "response" / "total", for file names.
    pub(crate) fn short(self) -> &'static str {
        match self {
            Metric::Response => "response",
            Metric::Total => "total",
        }
    }
}

/// The paired improvement of the sieve over secure-only at the records `at` selects: sieve and
/// secure-only records of the same round are paired (see [`estimate`]).
pub(crate) fn improvement(
    recs: &[Record],
    at: impl Fn(&Record) -> bool,
    metric: impl Fn(&Record) -> f64,
) -> Estimate {
    let mut by_round: std::collections::BTreeMap<usize, (Option<f64>, Option<f64>)> =
        Default::default();
    for r in recs.iter().filter(|r| at(r)) {
        let e = by_round.entry(r.rep).or_default();
        match r.mode {
            Mode::SecureOnly => e.0 = e.0.or(Some(metric(r))),
            Mode::Sieve => e.1 = e.1.or(Some(metric(r))),
            Mode::Auto => {}
        }
    }
    Estimate::improvement(by_round.into_values().filter_map(|(a, b)| a.zip(b)))
}

/// The median (with its interval) of `metric` over the records `at` selects.
pub(crate) fn sample(
    recs: &[Record],
    at: impl Fn(&Record) -> bool,
    metric: impl Fn(&Record) -> f64,
) -> Estimate {
    let xs: Vec<f64> = recs.iter().filter(|r| at(r)).map(metric).collect();
    Estimate::median_of(&xs)
}

/// The distinct values, sorted.
pub(crate) fn distinct(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.dedup_by(|a, b| record::same(*a, *b));
    v
}

/// Number of rounds in the records (the largest round index + 1).
pub(crate) fn rounds_of(recs: &[Record]) -> usize {
    recs.iter().map(|r| r.rep).max().map_or(0, |m| m + 1)
}
