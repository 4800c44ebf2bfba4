//! The measurement method of thesis §5.1: a new connection per transfer, repeated runs,
//! secure-only and sieve alternating within one run so drift hits both, every raw figure kept.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use indicatif::ProgressBar;

use crate::run::{Receiver, SendOptions, Session, Tools, Wrap};
use crate::stats::{improvement, summarize, Summary};

/// One raw measurement: the configuration and what `sieve send --json` reported.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) scenario: String,
    pub(crate) files: String,
    pub(crate) x_mb: f64,
    pub(crate) p: f64,
    pub(crate) send: SendOptions,
    pub(crate) rep: usize,
    pub(crate) s: Session,
}

pub(crate) const CSV_HEADER: &str = "scenario,files,mode,x_mb,p,n,m,split,batch_split,cipher,ap_ms_per_mb,rep,\
connect_ms,connect_first_tls_ms,connect_extra_tls_ms,connect_plain_ms,response_ms,total_ms,sieve_ms,\
processing_ms,split_ms,transfer_ms,combine_ms,integrate_ms,cpu_ms,bytes,secure_bytes,plain_bytes,negotiated_cipher";

impl Record {
    pub(crate) fn csv(&self) -> String {
        let (d, s) = (&self.send, &self.s);
        let mut o = String::new();
        let _ = write!(
            o,
            "{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.4},{:.3},{:.3},{:.3},{:.1},{},{},{},{}",
            self.scenario, self.files, d.mode, self.x_mb, self.p, d.n, d.m, d.split, d.batch_split, d.cipher,
            d.processing_ms_per_mb, self.rep, s.connect_ms, s.connect_first_tls_ms, s.connect_extra_tls_ms,
            s.connect_plain_ms, s.response_ms, s.total_ms, s.sieve_ms, s.processing_ms, s.split_ms, s.transfer_ms,
            s.combine_ms, s.integrate_ms, s.cpu_ms, s.bytes, s.secure_bytes, s.plain_bytes, s.cipher
        );
        o
    }
}

/// A point of an experiment: what to send, and how (several variants alternate per round).
pub(crate) struct Point {
    pub(crate) scenario: String,
    pub(crate) files_label: String,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) x_mb: f64,
    pub(crate) p: f64,
    pub(crate) variants: Vec<SendOptions>,
}

/// Run every point `reps` times, variants alternating within each round.
pub(crate) fn sweep(
    tools: &Tools,
    rx: &Receiver,
    points: &[Point],
    reps: usize,
    wrap: Wrap<'_>,
    bar: &ProgressBar,
) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for rep in 0..reps {
        for pt in points {
            for v in &pt.variants {
                let s = v.run(tools, rx.tls, &pt.files, wrap)?;
                out.push(Record {
                    scenario: pt.scenario.clone(),
                    files: pt.files_label.clone(),
                    x_mb: pt.x_mb,
                    p: pt.p,
                    send: v.clone(),
                    rep,
                    s,
                });
                bar.inc(1);
            }
        }
    }
    Ok(out)
}

/// Records matching a predicate.
pub(crate) fn select<'a>(
    recs: &'a [Record],
    f: impl Fn(&Record) -> bool + 'a,
) -> impl Iterator<Item = &'a Record> + 'a {
    recs.iter().filter(move |r| f(r))
}

/// Summary of one metric over the matching records.
pub(crate) fn summary(
    recs: &[Record],
    f: impl Fn(&Record) -> bool,
    metric: impl Fn(&Session) -> f64,
) -> Summary {
    let xs: Vec<f64> = select(recs, f).map(|r| metric(&r.s)).collect();
    summarize(&xs)
}

/// Improvement (eq. 1) of the medians of `metric`, sieve against secure-only, at one point.
pub(crate) fn improvement_at(
    recs: &[Record],
    at: impl Fn(&Record) -> bool,
    metric: impl Fn(&Session) -> f64 + Copy,
) -> f64 {
    let so = summary(recs, |r| at(r) && r.send.mode == "secure-only", metric);
    let sv = summary(recs, |r| at(r) && r.send.mode == "sieve", metric);
    improvement(so.median, sv.median)
}

/// Improvement per round (paired, same round), for an interval on the improvement itself.
pub(crate) fn paired_improvements(
    recs: &[Record],
    at: impl Fn(&Record) -> bool,
    metric: impl Fn(&Session) -> f64 + Copy,
) -> Summary {
    let mut xs = Vec::new();
    let reps = recs.iter().map(|r| r.rep).max().map_or(0, |m| m + 1);
    for rep in 0..reps {
        let so = select(recs, |r| {
            at(r) && r.rep == rep && r.send.mode == "secure-only"
        })
        .next();
        let sv = select(recs, |r| at(r) && r.rep == rep && r.send.mode == "sieve").next();
        if let (Some(a), Some(b)) = (so, sv) {
            xs.push(improvement(metric(&a.s), metric(&b.s)));
        }
    }
    summarize(&xs)
}

/// `median [low, high]` with the 95 % interval of the median.
pub(crate) fn fmt_summary(s: &Summary) -> String {
    if s.n == 0 {
        return "–".into();
    }
    format!(
        "{:.1} [{:.1}, {:.1}]",
        s.median, s.ci95_median.0, s.ci95_median.1
    )
}
