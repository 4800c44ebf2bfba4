//! F5.5: the improvement of response time against P over the emulated wired and Wi-Fi links,
//! and with a power-saving (slower) client (thesis §5.2.4).

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::common::curves::{describe, Along, Curve};
use crate::common::links::{
    cleartext_on_wire, emulated, over_link, points, write_checks, Condition,
};
use crate::common::record::{same, write_csv, Mode, Record};
use crate::common::report::{fill, Report};
use crate::common::{distinct, rounds_of, sample, Ctx, Metric, ROUNDS};
use crate::machine::Machine;
use crate::run::SendOptions;
use crate::scenario::{check_cgroup, check_root, WIFI, WIRED};

const ID: &str = "F5.5";

/// The thesis's three conditions; "power saving" made its client about 20 % slower, which a
/// quota of 80 % of one core reproduces for the sender.
fn conditions(with_cgroup: bool) -> Vec<Condition> {
    let mut v = vec![
        Condition {
            name: "wired",
            link: WIRED,
            cpu: None,
        },
        Condition {
            name: "wifi",
            link: WIFI,
            cpu: None,
        },
    ];
    if with_cgroup {
        v.push(Condition {
            name: "wifi+power-saving",
            link: WIFI,
            cpu: Some(0.8),
        });
    }
    v
}

/// The thesis's response-time improvements (%) per condition (§5.2.4 and F5.1).
fn thesis(name: &str) -> Vec<(f64, f64)> {
    match name {
        "wired" => vec![(0.1, 67.0), (0.9, 7.0)],
        "wifi" => vec![(0.1, 8.0)],
        "wifi+power-saving" => vec![(0.1, 15.0)],
        _ => Vec::new(),
    }
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    if let Err(why) = check_root() {
        return Ok(Report::skipped(&why));
    }
    let conds = conditions(check_cgroup().is_ok());
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.9]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9]
    };
    let pair = (&SendOptions::secure_only(), &SendOptions::default());
    let rounds = ctx.reps(ROUNDS);
    let mut recs = Vec::new();
    let mut checks = Vec::new();
    for c in &conds {
        let pts = points(ctx, c, &[1], ps, pair, (rounds, rounds))?;
        recs.extend(over_link(ctx, c, &pts, &mut checks)?);
    }
    write_csv(&dir.join("data.csv"), &recs)?;
    write_checks(dir, &checks)?;
    let mut report = render(&recs, &ctx.machine, dir)?;
    report.emulated = emulated(&conds, &checks);
    Ok(report)
}

pub(crate) fn render(recs: &[Record], machine: &Machine, dir: &Path) -> Result<Report> {
    let along = Along {
        title: "proportion of classified information P",
        symbol: "P",
        of: |r| r.p,
        values: distinct(recs.iter().map(|r| r.p)),
    };
    let names: Vec<&str> = ["wired", "wifi", "wifi+power-saving"]
        .into_iter()
        .filter(|n| recs.iter().any(|r| r.scenario == *n))
        .collect();
    let curves: Vec<Curve<'_>> = names
        .iter()
        .map(|&n| Curve {
            label: n.to_string(),
            key: Box::new(move |r: &Record| r.scenario == n),
            thesis_response: thesis(n),
            thesis_total: Vec::new(),
            thesis_label: format!("thesis, {n}"),
        })
        .collect();
    let mut findings = Vec::new();
    let (table, described) = describe(
        ID,
        recs,
        dir,
        "f5_5",
        "F5.5",
        &along,
        &curves,
        Metric::Response,
        &mut findings,
    )?;
    let secure_only_ms = |n: &str| {
        let p0 = along.values.first().copied().unwrap_or(0.1);
        sample(
            recs,
            |r| r.scenario == n && r.is(Mode::SecureOnly) && same(r.p, p0),
            |r| r.response_ms,
        )
        .num(1)
    };
    let aes = machine.speed("TLS 1.3 AES-128-GCM").unwrap_or(f64::NAN);
    // Encrypting 1 MB on the power-saving sender's 80 % of a core, against the Wi-Fi's time.
    let encrypt_ms = 1e6 / (aes * 1e9 * 0.8) * 1e3;
    let wire_ms = 8.0 / WIFI.rate_mbit * 1e3;
    let body = fill(
        "f5_5.md",
        include_str!("f5_5.md"),
        json!({
            "rounds": rounds_of(recs),
            "table": table,
            "curves": described,
            "so_wifi_ms": secure_only_ms("wifi"),
            "so_wifi_ps_ms": secure_only_ms("wifi+power-saving"),
            "power_saving": names.contains(&"wifi+power-saving"),
            "aes_gbps": format!("{aes:.1}"),
            "encrypt_ms": format!("{encrypt_ms:.2}"),
            "wire_ms": format!("{wire_ms:.0}"),
            "wifi_mbit": format!("{}", WIFI.rate_mbit),
            "wifi_rtt_ms": format!("{}", WIFI.rtt_ms()),
            "shares": cleartext_on_wire(recs, &names),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: Some("f5_5_response".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::record::{read_csv, CSV_HEADER};

    /// Three rounds on the wired link at P = 0.1 and 0.9; the sieve's cleartext took `share` of
    /// its bytes on the wire (`None`: data written before that column existed).
    fn fixture(share: Option<f64>) -> Vec<Record> {
        let mut csv = String::from(CSV_HEADER);
        if share.is_some() {
            csv.insert_str(csv.len() - 1, ",plain_wire_bytes");
        }
        for rep in 0..3 {
            for p in [0.1, 0.9] {
                let plain = ((1.0 - p) * 1e6) as u64;
                for (mode, t) in [("secure-only", 86.0), ("sieve", 60.0)] {
                    csv.push_str(&format!(
                        "wired,1MB-{},{mode},1,{p},1,1,dynamic,dynamic,aes128gcm,0,{rep},\
                         2,1.5,0,0.3,{t},{},0.1,0,0,{t},0,0,2,1000000,{},{plain},TLS13",
                        p * 100.0,
                        t + 2.0,
                        1_000_000 - plain,
                    ));
                    if let Some(s) = share {
                        csv.push_str(&format!(",{}", (plain as f64 * s) as u64));
                    }
                    csv.push('\n');
                }
            }
        }
        read_csv(csv.as_bytes()).expect("fixture parses")
    }

    fn machine() -> Machine {
        Machine::for_tests()
    }

    /// What the report says about the bytes on the wire comes from the data: compressed
    /// cleartext is named as the gain, cleartext sent as it is is not, and data without the
    /// column say so rather than claim either.
    #[test]
    fn the_bytes_on_the_wire_are_said_from_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let render_with = |s| render(&fixture(s), &machine(), dir.path()).unwrap().body;
        let compressed = render_with(Some(0.55));
        assert!(compressed.contains("wired 0.55"), "{compressed}");
        assert!(
            compressed.contains("the sieve's gain on the link is mostly that"),
            "{compressed}"
        );
        let raw = render_with(Some(1.0));
        assert!(raw.contains("wired 1.00"), "{raw}");
        assert!(!raw.contains("mostly that"), "{raw}");
        let old = render_with(None);
        assert!(old.contains("predate that column"), "{old}");
        assert!(!old.contains("do not move the same bytes"), "{old}");
    }
}
