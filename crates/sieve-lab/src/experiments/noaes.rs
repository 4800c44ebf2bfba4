//! NOAES, our own: the thesis's F5.1 and F5.2 (improvement against P and against size) on an
//! emulated device without AES instructions, both ends under each of two `OPENSSL_ia32cap`
//! masks ([`crate::common::masks`]), for AES-128-GCM and ChaCha20-Poly1305, each reported on its
//! own; and the 1 GiB point at P = 0.1 where the performance goals are set.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::estimate::Estimate;
use crate::common::masks::{speeds, speeds_table, Mask, Speed, NO_AES, PORTABLE, UNMASKED};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, Finding, Report};
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, Point, ROUNDS};
use crate::run::{Receiver, SendOptions};

const ID: &str = "NOAES";
const SUITES: [&str; 2] = ["aes128gcm", "chacha20"];
/// Where the goals are set: 1 GiB at P = 0.1 (64 MiB in a quick run).
const GOAL_P: f64 = 0.1;
/// Rounds of the goal point, whose transfers take seconds.
const GOAL_ROUNDS: usize = 10;
/// The goals of the AES-only mask: the sieve's response time at most this share of
/// secure-only's, per suite (both ends with the same suite).
const GOALS: [(&str, f64); 2] = [("aes128gcm", 0.22), ("chacha20", 0.55)];

/// The thesis's response improvements (%) at (P, x = 1 MB, x = 10 MB), from its text (§5.2.1).
const THESIS: [(f64, f64, f64); 2] = [(0.1, 67.0, 68.0), (0.9, 7.0, 8.0)];

fn suite_name(s: &str) -> &'static str {
    match s {
        "aes128gcm" => "AES-128-GCM",
        "chacha20" => "ChaCha20-Poly1305",
        _ => "another suite",
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let (p_xs, x_xs, ps, x_ps, goal_mb): (&[u64], &[u64], &[f64], &[f64], u64) = if ctx.quick {
        (&[1], &[1, 3], &[0.1, 0.9], &[0.1], 64)
    } else {
        (
            &[1, 10],
            &[1, 3, 5, 7, 10],
            &[0.1, 0.25, 0.5, 0.75, 0.9, 1.0],
            &[0.1, 0.5, 0.9],
            1024,
        )
    };
    let mut all_speeds = speeds(&ctx.tools, &UNMASKED, ctx.quick)?;
    let mut recs = Vec::new();
    for mask in [NO_AES, PORTABLE] {
        all_speeds.extend(speeds(&ctx.tools, &mask, ctx.quick)?);
        let wrap = |c| mask.apply(c);
        let rx = Receiver::start(&ctx.tools, "127.0.0.1", false, &wrap)?;
        // The union of F5.1's grid (P at x = 1, 10) and F5.2's (x at three P), once each.
        let mut grid: Vec<(u64, f64)> = Vec::new();
        for &x in p_xs {
            grid.extend(ps.iter().map(|&p| (x, p)));
        }
        for &x in x_xs {
            grid.extend(x_ps.iter().map(|&p| (x, p)));
        }
        grid.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        grid.dedup_by(|a, b| a.0 == b.0 && same(a.1, b.1));
        let mut pts = Vec::new();
        for &(x, p) in &grid {
            pts.push(point(ctx, mask, x, p, ctx.reps(ROUNDS))?);
        }
        pts.push(point(ctx, mask, goal_mb, GOAL_P, ctx.reps(GOAL_ROUNDS))?);
        recs.extend(ctx.sweep(&rx, &pts, &wrap)?);
    }
    write_csv(&dir.join("data.csv"), &recs)?;
    write_csv(&dir.join("speeds.csv"), &all_speeds)?;
    let mut report = render(&recs, &all_speeds, dir)?;
    report.emulated = format!(
        "devices without AES instructions, both ends on loopback under each mask: {}; {}. The \
         masks change which code aws-lc runs, not the core's clock or memory.",
        NO_AES.what, PORTABLE.what
    );
    Ok(report)
}

/// Secure-only and sieve with each suite at (x, P), alternating.
fn point(ctx: &mut Ctx, mask: Mask, x: u64, p: f64, rounds: usize) -> Result<Point> {
    let variants = SUITES
        .iter()
        .flat_map(|&cipher| {
            [
                SendOptions {
                    cipher,
                    ..SendOptions::secure_only()
                },
                SendOptions {
                    cipher,
                    ..SendOptions::default()
                },
            ]
        })
        .collect();
    Ok(Point {
        scenario: mask.name.into(),
        files_label: crate::common::xp_label(x as f64, p),
        files: vec![ctx.work.xp(x, p)?],
        x_mb: x as f64,
        p,
        variants,
        rounds,
    })
}

/// The sieve's response time as a share of secure-only's, per round, paired.
fn ratio(recs: &[Record], at: impl Fn(&Record) -> bool) -> Estimate {
    let get = |mode: Mode, rep: usize| {
        recs.iter()
            .find(|r| at(r) && r.is(mode) && r.rep == rep)
            .map(|r| r.response_ms)
    };
    let ratios: Vec<f64> = (0..rounds_of(recs))
        .filter_map(|rep| Some(get(Mode::Sieve, rep)? / get(Mode::SecureOnly, rep)?))
        .collect();
    Estimate::median_of(&ratios)
}

pub(crate) fn render(recs: &[Record], speeds: &[Speed], dir: &Path) -> Result<Report> {
    let mut findings: Vec<Finding> = Vec::new();
    let mut sections = Vec::new();
    let masks: Vec<Mask> = [NO_AES, PORTABLE]
        .into_iter()
        .filter(|m| recs.iter().any(|r| r.scenario == m.name))
        .collect();
    for mask in masks {
        let of_mask: Vec<Record> = recs
            .iter()
            .filter(|r| r.scenario == mask.name)
            .cloned()
            .collect();
        // The goal point is the largest document; the curves are the thesis's sizes.
        let goal_x = of_mask.iter().map(|r| r.x_mb).fold(0.0, f64::max);
        let curve_recs: Vec<Record> = of_mask
            .iter()
            .filter(|r| r.x_mb < goal_x)
            .cloned()
            .collect();
        let suites: Vec<&str> = SUITES
            .into_iter()
            .filter(|s| curve_recs.iter().any(|r| r.cipher == *s))
            .collect();
        // F5.1: against P, one curve per suite and size where the whole P range was measured.
        let ps = distinct(curve_recs.iter().map(|r| r.p));
        let xs_full_p: Vec<f64> = distinct(curve_recs.iter().map(|r| r.x_mb))
            .into_iter()
            .filter(|&x| {
                distinct(curve_recs.iter().filter(|r| same(r.x_mb, x)).map(|r| r.p)).len()
                    == ps.len()
            })
            .collect();
        let mut p_curves = Vec::new();
        for &s in &suites {
            for &x in &xs_full_p {
                let t: Vec<(f64, f64)> = match x {
                    x if same(x, 1.0) => THESIS.iter().map(|t| (t.0, t.1)).collect(),
                    x if same(x, 10.0) => THESIS.iter().map(|t| (t.0, t.2)).collect(),
                    _ => Vec::new(),
                };
                p_curves.push(Curve {
                    label: format!("{}, x = {x} MB", suite_name(s)),
                    key: Box::new(move |r: &Record| r.cipher == s && same(r.x_mb, x)),
                    thesis_response: if s == "aes128gcm" { t } else { Vec::new() },
                    thesis_total: Vec::new(),
                    thesis_label: format!("thesis (3DES), x = {x} MB"),
                });
            }
        }
        let along_p = Along {
            title: "proportion of classified information P",
            symbol: "P",
            of: |r| r.p,
            values: ps.clone(),
        };
        let mut fs = Vec::new();
        let (p_table, p_described) = describe(
            ID,
            &curve_recs,
            dir,
            &format!("noaes_{}_p", mask.name),
            &format!("NOAES, {}, F5.1", mask.name),
            &along_p,
            &p_curves,
            Metric::Response,
            &mut fs,
        )?;
        // F5.2: against x, one curve per suite and P measured at every size.
        let xs = distinct(curve_recs.iter().map(|r| r.x_mb));
        let ps_full_x: Vec<f64> = ps
            .iter()
            .copied()
            .filter(|&p| {
                distinct(curve_recs.iter().filter(|r| same(r.p, p)).map(|r| r.x_mb)).len()
                    == xs.len()
            })
            .collect();
        let mut x_curves = Vec::new();
        for &s in &suites {
            for &p in &ps_full_x {
                let t: Vec<(f64, f64)> = THESIS
                    .iter()
                    .filter(|t| same(t.0, p))
                    .flat_map(|t| [(1.0, t.1), (10.0, t.2)])
                    .collect();
                x_curves.push(Curve {
                    label: format!("{}, P = {p}", suite_name(s)),
                    key: Box::new(move |r: &Record| r.cipher == s && same(r.p, p)),
                    thesis_response: if s == "aes128gcm" { t } else { Vec::new() },
                    thesis_total: Vec::new(),
                    thesis_label: format!("thesis (3DES), P = {p}"),
                });
            }
        }
        let along_x = Along {
            title: "file size x (MB)",
            symbol: "x",
            of: |r| r.x_mb,
            values: xs,
        };
        let (x_table, x_described) = describe(
            ID,
            &curve_recs,
            dir,
            &format!("noaes_{}_x", mask.name),
            &format!("NOAES, {}, F5.2", mask.name),
            &along_x,
            &x_curves,
            Metric::Response,
            &mut fs,
        )?;
        for f in fs {
            let f = Finding {
                point: format!("{}, {}", mask.name, f.point),
                ..f
            };
            // The two grids share points; each comparison counts once.
            if !findings
                .iter()
                .any(|g| g.point == f.point && g.metric == f.metric)
            {
                findings.push(f);
            }
        }
        // The goal point.
        let mut goal_table = String::from(
            "| suite | secure-only response (ms) | sieve response (ms) | sieve / secure-only | \
             goal | verdict |\n|---|---|---|---|---|---|\n",
        );
        let mut goals = Vec::new();
        for &s in &suites {
            let at = |r: &Record| r.cipher == s && same(r.x_mb, goal_x) && same(r.p, GOAL_P);
            let e = ratio(&of_mask, at);
            let goal = GOALS.iter().find(|g| g.0 == s).map(|g| g.1);
            let verdict = match goal {
                _ if mask != NO_AES => "no goal under this mask".to_string(),
                Some(g) if e.known() && e.hi <= g => "met".into(),
                Some(g) if e.known() && e.lo > g => {
                    format!("missed, by {:.0} % of the goal", (e.point - g) / g * 100.0)
                }
                Some(_) if e.known() => "within the noise of the goal".into(),
                _ => "not measured".into(),
            };
            let med = |m: Mode| sample(&of_mask, |r| at(r) && r.is(m), |r| r.response_ms);
            let _ = writeln!(
                goal_table,
                "| {} | {} | {} | {} | {} | {verdict} |",
                suite_name(s),
                med(Mode::SecureOnly).num(0),
                med(Mode::Sieve).num(0),
                e.num(3),
                match goal {
                    Some(g) if mask == NO_AES => format!("≤ {g}"),
                    _ => "–".into(),
                },
            );
            goals.push(json!({"suite": suite_name(s), "ratio": e.num(3), "verdict": verdict}));
            let imp = crate::common::improvement(&of_mask, at, |r| r.response_ms);
            findings.push(Finding::new(
                ID,
                &format!(
                    "{}, {}, {}",
                    mask.name,
                    suite_name(s),
                    crate::common::xp_label(goal_x, GOAL_P)
                ),
                Metric::Response.name(),
                &imp,
            ));
        }
        let speed = |what: &str| {
            crate::common::masks::speed_of(speeds, mask.name, what)
                .map_or("–".into(), |v| format!("{v:.2}"))
        };
        sections.push(json!({
            "name": mask.name,
            "what": mask.what,
            "p_table": p_table,
            "x_table": x_table,
            "p_curves": p_described,
            "x_curves": x_described,
            "goal_table": goal_table,
            "goal_mb": format!("{goal_x}"),
            "goals": goals,
            "goal_rounds": rounds_of(&of_mask.iter().filter(|r| same(r.x_mb, goal_x)).cloned().collect::<Vec<_>>()),
            "aes": speed("TLS 1.3 AES-128-GCM"),
            "chacha": speed("TLS 1.3 ChaCha20"),
            "mac": speed("cleartext MAC"),
            "mac_note": crate::common::masks::mac_note(speeds, mask.name),
        }));
    }
    let body = fill(
        "noaes.md",
        include_str!("noaes.md"),
        json!({
            "speeds": speeds_table(speeds),
            "unmasked_aes": crate::common::masks::speed_of(speeds, "unmasked", "TLS 1.3 AES-128-GCM").map_or("–".into(), |v| format!("{v:.2}")),
            "sections": sections,
            "rounds": rounds_of(recs),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: Some(format!("noaes_{}_p_response", NO_AES.name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::record::{read_csv, CSV_HEADER};

    /// Eight rounds under the AES-only mask: secure-only takes `secure_only` ms per MB, the sieve
    /// `sieve(p)` ms per MB, for both suites, at two P, two sizes and the goal point.
    fn fixture(secure_only: f64, sieve: impl Fn(f64) -> f64) -> Vec<Record> {
        let mut csv = String::from(CSV_HEADER);
        for rep in 0..8 {
            for (x, ps) in [
                (1.0, vec![0.1, 0.9]),
                (3.0, vec![0.1, 0.9]),
                (64.0, vec![0.1]),
            ] {
                for p in ps {
                    for cipher in SUITES {
                        for (mode, per_mb) in [("secure-only", secure_only), ("sieve", sieve(p))] {
                            let t = per_mb * x + 0.01 * rep as f64;
                            csv.push_str(&format!(
                                "no-aes,{x}MB-{},{mode},{x},{p},1,1,dynamic,dynamic,{cipher},0,\
                                 {rep},1,1,0,0,{t},{},0.4,0,0,{t},0,0,1,1000,100,900,TLS13\n",
                                p * 100.0,
                                t + 1.0
                            ));
                        }
                    }
                }
            }
        }
        read_csv(csv.as_bytes()).expect("fixture parses")
    }

    fn speeds() -> Vec<Speed> {
        vec![Speed {
            mask: "no-aes".into(),
            what: "TLS 1.3 AES-128-GCM".into(),
            gb_per_s: 0.28,
        }]
    }

    /// A sieve at a fifth of secure-only's time meets the AES goal and misses the ChaCha20 one
    /// never (0.2 ≤ 0.55); at 0.9 of it, both goals are missed; and the words say which.
    #[test]
    fn goals_and_words_follow_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let fast = render(
            &fixture(10.0, |p| 10.0 * (0.1 + p) / 2.5),
            &speeds(),
            dir.path(),
        )
        .unwrap();
        let slow = render(&fixture(10.0, |_| 9.0), &speeds(), dir.path()).unwrap();
        assert!(fast.body.contains("| met |"), "{}", fast.body);
        assert!(!fast.body.contains("missed, by"), "{}", fast.body);
        assert!(slow.body.contains("missed, by"), "{}", slow.body);
        assert!(fast.body.contains("(faster)"), "{}", fast.body);
        assert!(slow.body.contains("10.0 % ["), "{}", slow.body);
        assert!(dir.path().join("noaes_no-aes_p_response.svg").is_file());
        assert!(dir.path().join("noaes_no-aes_x_response.svg").is_file());
        // Each comparison once, the goal points included.
        let mut points: Vec<_> = fast
            .findings
            .iter()
            .map(|f| (&f.point, &f.metric))
            .collect();
        let n = points.len();
        points.sort();
        points.dedup();
        assert_eq!(points.len(), n);
        assert_ne!(fast.findings, slow.findings);
    }
}
