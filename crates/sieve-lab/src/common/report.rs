//! What an experiment hands back: its report body, what it emulated, and its findings (one per
//! comparison of the sieve with secure-only), from which `results/README.md` is built.
//!
//! Prose lives in markdown templates beside each experiment (`experiments/*.md`), filled from
//! the data by [`fill`]; every number and comparative word in them is a value computed here or
//! by [`super::words`], so a re-run cannot leave a stale sentence behind.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::estimate::Estimate;
use super::record::{Mode, Record};
use super::words::Outcome;
use super::{improvement, sample, Metric};

/// One experiment's result, before the runner adds the header.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    /// Markdown.
    pub(crate) body: String,
    /// What was emulated (links, CPU limits, processing), or that nothing was.
    pub(crate) emulated: String,
    pub(crate) findings: Vec<Finding>,
    /// The figure `results/README.md` shows for this folder (file stem, in the thesis's metric
    /// where there is one); the first PNG when `None`.
    pub(crate) key_plot: Option<String>,
}

impl Report {
    /// The report of an experiment that could not run here, saying why.
    pub(crate) fn skipped(why: &str) -> Report {
        Report::not_run(&format!(
            "**Skipped: {why}.** This experiment needs root, iproute2 and `tc` to build the \
             emulated links between network namespaces.\n"
        ))
    }

    /// The report of an experiment that did not run, with `body` saying why.
    pub(crate) fn not_run(body: &str) -> Report {
        Report {
            body: body.into(),
            emulated: "nothing: the experiment did not run.".into(),
            findings: Vec::new(),
            key_plot: None,
        }
    }
}

/// One comparison of the sieve with secure-only, as `findings.csv` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Finding {
    pub(crate) experiment: String,
    /// Where: "1MB-10, loopback".
    pub(crate) point: String,
    /// What: "response time", "total time", "receiver CPU per GB".
    pub(crate) metric: String,
    pub(crate) improvement: f64,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) coverage: f64,
    pub(crate) rounds: usize,
    pub(crate) outcome: Outcome,
}

impl Finding {
    pub(crate) fn new(experiment: &str, point: &str, metric: &str, e: &Estimate) -> Finding {
        Finding {
            experiment: experiment.into(),
            point: point.into(),
            metric: metric.into(),
            improvement: e.point,
            lo: e.lo,
            hi: e.hi,
            coverage: e.coverage,
            rounds: e.n,
            outcome: Outcome::of(e),
        }
    }

    pub(crate) fn estimate(&self) -> Estimate {
        Estimate {
            point: self.improvement,
            lo: self.lo,
            hi: self.hi,
            coverage: self.coverage,
            n: self.rounds,
        }
    }
}

/// Fill a template with `ctx`. Strict: a name the template uses and the data do not define is
/// an error, never an empty string.
pub(crate) fn fill(name: &str, template: &str, ctx: impl Serialize) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .build()
            .context("template syntax")?,
    );
    env.add_template("curve.md", include_str!("curve.md"))
        .context("template curve.md does not parse")?;
    env.add_template("cleartext.md", include_str!("cleartext.md"))
        .context("template cleartext.md does not parse")?;
    env.add_template(name, template)
        .with_context(|| format!("template {name} does not parse"))?;
    env.get_template(name)
        .and_then(|t| t.render(minijinja::value::Serde(&ctx)))
        .with_context(|| format!("cannot fill template {name}"))
}

/// A labelled selection of records: one row of a table.
pub(crate) type Row<'a> = (String, Box<dyn Fn(&Record) -> bool + 'a>);

/// Medians [interval] of both systems' response and total times at each row, with the paired
/// improvement and its outcome; and the findings of every cell.
pub(crate) fn pair_table(
    experiment: &str,
    recs: &[Record],
    rows: &[Row<'_>],
    findings: &mut Vec<Finding>,
) -> String {
    let mut t = String::from(
        "| point | secure-only response (ms) | sieve response (ms) | improvement of response | \
         outcome | secure-only total (ms) | sieve total (ms) | improvement of total | outcome |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut n = usize::MAX;
    for (label, at) in rows {
        let _ = write!(t, "| {label} |");
        for metric in [Metric::Response, Metric::Total] {
            let m = |r: &Record| metric.of(r);
            let so = sample(recs, |r| at(r) && r.is(Mode::SecureOnly), m);
            let sv = sample(recs, |r| at(r) && r.is(Mode::Sieve), m);
            let imp = improvement(recs, at, m);
            n = n.min(imp.n);
            let _ = write!(
                t,
                " {} | {} | {} | {} |",
                so.num(1),
                sv.num(1),
                imp.pct(),
                Outcome::of(&imp).adjective()
            );
            findings.push(Finding::new(experiment, label, metric.name(), &imp));
        }
        t.push('\n');
    }
    t.push_str(&interval_note(n));
    t.push_str(
        "The outcome columns apply the rules (below and in the summary): faster, slower, or \
         within the noise.\n",
    );
    t
}

/// The sentence under a table saying what its intervals are.
pub(crate) fn interval_note(rounds: usize) -> String {
    let cov = crate::stats::median_ci_ranks(rounds).map_or(0.0, |c| c.2);
    format!(
        "\nTimes: median [interval of the median] over {rounds} rounds; improvements: median of the \
         per-round paired improvements [its interval]; order-statistic intervals, coverage \
         {:.1} %{}.\n",
        cov * 100.0,
        if cov < 0.95 { " (below 95 %: too few rounds for more)" } else { "" }
    )
}
