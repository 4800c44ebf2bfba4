//! ICPE paper, Figure 7: the open queueing model R = D / (1 − λD) for the sieve and for
//! secure-only, with D measured on the real system.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::record::{write_csv, Mode, Record};
use crate::common::report::{fill, Finding, Report};
use crate::common::words::{compare, point_words};
use crate::common::{improvement, rounds_of, sample, Ctx, ROUNDS};
use crate::plot::{self, Series, Style};
use crate::queue::open_model_response;
use crate::run::{no_wrap, SendOptions};

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let pair = (&SendOptions::secure_only(), &SendOptions::default());
    let pts = ctx.xp_points("loopback", &[1], &[0.5], pair, ctx.reps(ROUNDS))?;
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, dir)
}

pub(crate) fn render(recs: &[Record], dir: &Path) -> Result<Report> {
    let d = |m: Mode| sample(recs, |r| r.is(m), |r| r.total_ms);
    let (so, sv) = (d(Mode::SecureOnly), d(Mode::Sieve));
    let gain = improvement(recs, |_| true, |r| r.total_ms);
    let dmax = so.point.max(sv.point);
    let curve = |e: &Estimate, label: &str, style| {
        let mut points = Vec::new();
        let mut err = Vec::new();
        for i in 1..=40 {
            let l = (f64::from(i) / 41.0) / dmax;
            if let Some(r) = open_model_response(l, e.point) {
                points.push((l, r));
                // The bar: R at the ends of D's interval (infinite past saturation: clipped).
                let lo = open_model_response(l, e.lo).unwrap_or(f64::NAN);
                let hi = open_model_response(l, e.hi)
                    .unwrap_or(f64::INFINITY)
                    .min(r * 100.0);
                err.push((lo, hi));
            }
        }
        Series {
            label: label.into(),
            style,
            points,
            err: Some(err),
        }
    };
    let mut f = fig(
        "ICPE Figure 7: open model R = D/(1 − λD), 1MB-50",
        "arrival rate λ (requests/ms)",
        "mean response time R (ms, log scale)",
        vec![
            curve(
                &so,
                &format!("ours, secure-only (D = {:.2} ms)", so.point),
                Style::Peer,
            ),
            curve(
                &sv,
                &format!("ours, sieve (D = {:.2} ms)", sv.point),
                Style::Ours,
            ),
        ],
    );
    f.log_y = true;
    plot::render(&f, &dir.join("icpe_f7"))?;
    // R of both at 90 % of the slower system's capacity.
    let l90 = 0.9 / dmax;
    let r = |e: &Estimate| open_model_response(l90, e.point).unwrap_or(f64::NAN);
    let mut t = String::from("| system | D (ms) | R at λ = 0.9 / max D (ms) |\n|---|---|---|\n");
    let _ = writeln!(t, "| secure-only | {} | {:.2} |", so.num(2), r(&so));
    let _ = writeln!(t, "| sieve | {} | {:.2} |", sv.num(2), r(&sv));
    let body = fill(
        "icpe_f7.md",
        include_str!("icpe_f7.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": t,
            "gain": point_words(&gain),
            "d_words": compare(&sv, &so),
            "ratio": format!("{:.1}", r(&so) / r(&sv)),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: D measured on loopback; the model is analytic.".into(),
        findings: vec![Finding::new(
            "ICPE-F7",
            "1MB-50, loopback (service demand D)",
            "total time",
            &gain,
        )],
        key_plot: Some("icpe_f7".into()),
    })
}
