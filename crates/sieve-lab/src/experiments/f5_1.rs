//! F5.1: the improvement of the sieve over secure-only as the proportion of classified
//! information P varies, x = 1 and 10 MB (thesis §5.2.1).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, Report};
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, ROUNDS};
use crate::machine::Machine;
use crate::run::{no_wrap, SendOptions};

const ID: &str = "F5.1";
const PS: [f64; 6] = [0.1, 0.25, 0.5, 0.75, 0.9, 1.0];
/// The thesis's improvements (%) at (P, x = 1 MB, x = 10 MB), from its text (§5.2.1).
const THESIS_RESPONSE: [(f64, f64, f64); 2] = [(0.1, 67.0, 68.0), (0.9, 7.0, 8.0)];
const THESIS_TOTAL: [(f64, f64, f64); 2] = [(0.1, 18.0, 54.0), (0.9, 0.8, 6.0)];

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let rx = ctx.loopback()?;
    let xs: &[u64] = if ctx.quick { &[1] } else { &[1, 10] };
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.5, 0.9, 1.0]
    } else {
        &PS
    };
    let so = SendOptions::secure_only();
    let sv = SendOptions::default();
    let rounds = ctx.reps(ROUNDS);
    let pts = ctx.xp_points("loopback", xs, ps, (&so, &sv), rounds)?;
    let recs = ctx.sweep(&rx, &pts, &no_wrap)?;
    write_csv(&dir.join("data.csv"), &recs)?;
    render(&recs, &ctx.machine, dir)
}

/// The thesis's values for size `x` (MB), where its text gives them.
fn thesis(table: &[(f64, f64, f64)], x: f64) -> Vec<(f64, f64)> {
    match x {
        x if same(x, 1.0) => table.iter().map(|t| (t.0, t.1)).collect(),
        x if same(x, 10.0) => table.iter().map(|t| (t.0, t.2)).collect(),
        _ => Vec::new(),
    }
}

/// The report and figures from the data alone.
pub(crate) fn render(recs: &[Record], machine: &Machine, dir: &Path) -> Result<Report> {
    let xs = distinct(recs.iter().map(|r| r.x_mb));
    let along = Along {
        title: "proportion of classified information P",
        symbol: "P",
        of: |r| r.p,
        values: distinct(recs.iter().map(|r| r.p)),
    };
    let curves: Vec<Curve<'_>> = xs
        .iter()
        .map(|&x| Curve {
            label: format!("x = {x} MB"),
            key: Box::new(move |r: &Record| same(r.x_mb, x)),
            thesis_response: thesis(&THESIS_RESPONSE, x),
            thesis_total: thesis(&THESIS_TOTAL, x),
            thesis_label: format!("thesis, x = {x} MB"),
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_1",
        "F5.1",
        &along,
        &curves,
        Metric::Response,
        &mut findings,
    )?;
    // The numbers the explanation rests on, from this run.
    let x0 = xs.first().copied().unwrap_or(1.0);
    let small = |r: &Record| same(r.x_mb, x0);
    let aes = machine.speed("TLS 1.3 AES-128-GCM").unwrap_or(f64::NAN);
    let so = sample(
        recs,
        |r| small(r) && r.is(Mode::SecureOnly),
        |r| r.response_ms,
    );
    let encrypt_ms = x0 * 1e6 / (aes * 1e9) * 1e3;
    let body = fill(
        "f5_1.md",
        include_str!("f5_1.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": table,
            "curves": described,
            "x_small": format!("{x0}"),
            "sieve_ms": sample(recs, |r| small(r) && r.is(Mode::Sieve) && same(r.p, 0.5), |r| r.sieve_ms).num(2),
            "tls_connect_ms": sample(recs, |r| r.is(Mode::SecureOnly), |r| r.connect_first_tls_ms).num(2),
            "plain_connect_ms": sample(recs, |r| r.is(Mode::Sieve), |r| r.connect_plain_ms).num(2),
            "aes_gbps": format!("{aes:.1}"),
            "encrypt_ms": format!("{encrypt_ms:.2}"),
            "encrypt_share": format!("{:.0}", encrypt_ms / so.point * 100.0),
            "so_response_ms": so.num(2),
        }),
    )?;
    Ok(Report {
        body,
        emulated: "nothing: both ends on loopback on this machine.".into(),
        findings,
        key_plot: Some("f5_1_response".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::record::{read_csv, CSV_HEADER};

    /// A fixture of two rounds per point, written and read back as `data.csv` is.
    fn fixture(sieve_at_01: f64, sieve_at_09: f64) -> Vec<Record> {
        let mut csv = String::from(CSV_HEADER);
        for rep in 0..8 {
            for (p, so, sv) in [(0.1, 10.0, sieve_at_01), (0.9, 10.0, sieve_at_09)] {
                for (mode, t) in [("secure-only", so), ("sieve", sv)] {
                    let t = t + 0.01 * rep as f64;
                    csv.push_str(&format!(
                        "loopback,1MB-{},{mode},1,{p},1,1,dynamic,dynamic,aes128gcm,0,{rep},\
                         2,1.5,0,0.3,{t},{},0.4,0,0,{t},0,0,3,1000040,100000,900000,TLS13\n",
                        p * 100.0,
                        t + 2.0
                    ));
                }
            }
        }
        read_csv(csv.as_bytes()).expect("fixture parses")
    }

    fn machine() -> Machine {
        Machine::for_tests()
    }

    /// The words follow the data: a sieve slower at P = 0.1 is called slower and said to reverse
    /// the thesis; the same report from data where it is faster at both of the thesis's points,
    /// and more so at P = 0.1, calls it faster and says it agrees.
    #[test]
    fn changing_the_data_changes_the_words() {
        let dir = tempfile::tempdir().unwrap();
        let slow = render(&fixture(14.0, 12.0), &machine(), dir.path()).unwrap();
        let fast = render(&fixture(3.0, 9.0), &machine(), dir.path()).unwrap();
        assert!(
            slow.body
                .contains("At P = 0.1 the sieve is slower than secure-only"),
            "{}",
            slow.body
        );
        assert!(
            fast.body
                .contains("At P = 0.1 the sieve is faster than secure-only"),
            "{}",
            fast.body
        );
        assert!(slow.body.contains("reverses the thesis"), "{}", slow.body);
        assert!(
            fast.body.contains("agrees with the thesis"),
            "{}",
            fast.body
        );
        assert_ne!(slow.findings, fast.findings);
        assert!(dir.path().join("f5_1_response.svg").is_file());
        assert!(dir.path().join("f5_1_total.svg").is_file());
    }
}
