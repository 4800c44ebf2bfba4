//! DELAY, our own: the check of the userspace delay line the link experiments use where the
//! kernel has no netem (F5.5-5.7, WAN). Its two goals: the round trip ping measures within 5 % of
//! the setting, and at least 1 Gbit/s through it (iperf3). The line is used here whether or not
//! the kernel has netem, since it is the line that is being checked.

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::links::{check_raw, write_checks, LinkCheck};
use crate::common::record::write_csv;
use crate::common::report::{fill, Report};
use crate::plot::{self, Series, Style};
use crate::scenario::{check_root, DelayBy, LinkSpec, NetPair};

/// The goal on the round trip: the median within this share of the setting.
const RTT_GOAL: f64 = 0.05;
/// The goal on the goodput through the line, in Mbit/s.
const RATE_GOAL_MBIT: f64 = 1000.0;
/// A rate far above what the forwarder can move: the line's own limit shows.
const UNSHAPED_MBIT: f64 = 10_000.0;

/// The lines checked: (name, RTT in ms, rate in Mbit/s). The round trips of the Wi-Fi scenario
/// and of WAN at WAN's top rate, and the line at full speed at two round trips.
const GRID: [(&str, f64, f64); 6] = [
    ("line3-1g", 3.0, 1000.0),
    ("line20-1g", 20.0, 1000.0),
    ("line50-1g", 50.0, 1000.0),
    ("line100-1g", 100.0, 1000.0),
    ("line3-10g", 3.0, UNSHAPED_MBIT),
    ("line20-10g", 20.0, UNSHAPED_MBIT),
];

/// One probe's round trip: a row of `data.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Probe {
    pub(crate) condition: String,
    pub(crate) rtt_setting_ms: f64,
    pub(crate) rate_mbit: f64,
    pub(crate) probe: usize,
    pub(crate) rtt_ms: f64,
}

pub(crate) fn run(ctx: &mut crate::common::Ctx, dir: &Path) -> Result<Report> {
    if let Err(why) = check_root() {
        return Ok(Report::skipped(&why));
    }
    let grid: Vec<_> = if ctx.quick {
        vec![GRID[1], GRID[4], GRID[5]]
    } else {
        GRID.to_vec()
    };
    let mut probes = Vec::new();
    let mut checks = Vec::new();
    for (name, rtt, rate) in grid {
        let link = LinkSpec::with_rtt(name, rate, rtt);
        let net = NetPair::create_by(name, &link, DelayBy::Line)?;
        // About two seconds of the rate, at most 1 GB (the unshaped line moves less than its
        // nominal rate).
        let iperf3_mb = ((rate.min(4000.0) / 8.0) * 2.0) as u64;
        let (check, raw) = check_raw(&net, name, Some(iperf3_mb))?;
        probes.extend(raw.iter().enumerate().map(|(i, &ms)| Probe {
            condition: name.into(),
            rtt_setting_ms: rtt,
            rate_mbit: rate,
            probe: i,
            rtt_ms: ms,
        }));
        checks.push(check);
    }
    write_csv(&dir.join("data.csv"), &probes)?;
    write_checks(dir, &checks)?;
    render(&probes, &checks, dir)
}

pub(crate) fn render(probes: &[Probe], checks: &[LinkCheck], dir: &Path) -> Result<Report> {
    let est = |c: &LinkCheck| {
        let ms: Vec<f64> = probes
            .iter()
            .filter(|p| p.condition == c.condition)
            .map(|p| p.rtt_ms)
            .collect();
        Estimate::median_of(&ms)
    };
    let mut rows = Vec::new();
    let mut table = String::from(
        "| line | RTT set (ms) | rate set (Mbit/s) | RTT measured, median [95 % interval] (ms) | \
         min / max (ms) | error of the median | RTT goal (±5 %) | iperf3 (Mbit/s) | \
         one connection's window allows (Mbit/s) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in checks {
        let e = est(c);
        let ms: Vec<f64> = probes
            .iter()
            .filter(|p| p.condition == c.condition)
            .map(|p| p.rtt_ms)
            .collect();
        let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let err = (e.point - c.rtt_ms) / c.rtt_ms;
        let met = err.abs() <= RTT_GOAL;
        let window = c.window_max().map(|b| b * 8.0 / (c.rtt_ms / 1e3) / 1e6);
        table.push_str(&format!(
            "| {} | {} | {} | {} | {min:.3} / {max:.3} | {:+.1} % | {} | {} | {} |\n",
            c.condition,
            c.rtt_ms,
            c.rate_mbit,
            e.num(3),
            err * 100.0,
            if met { "met" } else { "missed" },
            c.iperf3_mbit
                .map_or("not measured".into(), |m| format!("{m:.0}")),
            window.map_or("?".into(), |w| format!("{w:.0}")),
        ));
        rows.push(json!({
            "name": c.condition,
            "rtt": c.rtt_ms,
            "rate": c.rate_mbit,
            "err": format!("{:+.1} %", err * 100.0),
            "met": met,
            "iperf3": c.iperf3_mbit,
            "window": window,
        }));
    }
    let rtt_met = rows.iter().filter(|r| r["met"] == json!(true)).count();
    let worst = checks
        .iter()
        .map(|c| ((est(c).point - c.rtt_ms) / c.rtt_ms * 100.0, c))
        .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
    let fastest = checks
        .iter()
        .filter_map(|c| c.iperf3_mbit.map(|m| (m, c)))
        .max_by(|a, b| a.0.total_cmp(&b.0));

    // The figure: measured round trip against the setting, one series per rate, the setting as
    // the reference line.
    let mut rates: Vec<f64> = checks.iter().map(|c| c.rate_mbit).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let mut series = Vec::new();
    for &rate in &rates {
        let at: Vec<(&LinkCheck, Estimate)> = checks
            .iter()
            .filter(|c| c.rate_mbit == rate)
            .map(|c| (c, est(c)))
            .collect();
        series.push(Series {
            label: format!("measured, line at {rate} Mbit/s"),
            style: Style::Ours,
            points: at.iter().map(|(c, e)| (c.rtt_ms, e.point)).collect(),
            err: Some(at.iter().map(|(_, e)| (e.lo, e.hi)).collect()),
        });
    }
    let mut settings: Vec<f64> = checks.iter().map(|c| c.rtt_ms).collect();
    settings.sort_by(f64::total_cmp);
    settings.dedup();
    series.push(Series {
        label: "the setting".into(),
        style: Style::Peer,
        points: settings.iter().map(|&s| (s, s)).collect(),
        err: None,
    });
    plot::render(
        &fig(
            "Delay line: measured round trip against its setting",
            "RTT set (ms)",
            "RTT measured, median (ms)",
            series,
        ),
        &dir.join("delay_rtt"),
    )?;

    let body = fill(
        "delay.md",
        include_str!("delay.md"),
        json!({
            "table": table,
            "lines": checks.len(),
            "rtt_met": rtt_met,
            "worst_name": worst.map(|w| w.1.condition.clone()),
            "worst_err": worst.map(|w| format!("{:+.1} %", w.0)),
            "fastest_name": fastest.map(|f| f.1.condition.clone()),
            "fastest": fastest.map(|f| format!("{:.0}", f.0)),
            "rate_met": fastest.is_some_and(|f| f.0 >= RATE_GOAL_MBIT),
            "rate_goal": format!("{RATE_GOAL_MBIT:.0}"),
            "probes": checks.first().map_or(0, |c| c.probes),
            "tcp_rmem": checks.first().map_or(String::new(), |c| c.tcp_rmem.clone()),
            "tcp_wmem": checks.first().map_or(String::new(), |c| c.tcp_wmem.clone()),
            "netem": crate::scenario::netem_available(),
        }),
    )?;
    Ok(Report {
        body,
        emulated: format!(
            "{} links, each between two network namespaces through {}.",
            checks.len(),
            DelayBy::Line.words()
        ),
        findings: Vec::new(),
        key_plot: Some("delay_rtt".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, rtt: f64, rate: f64, iperf3: f64) -> LinkCheck {
        LinkCheck {
            condition: name.into(),
            rate_mbit: rate,
            rtt_ms: rtt,
            delay_by: "Line".into(),
            measured_rtt_ms: rtt,
            measured_rtt_lo: rtt,
            measured_rtt_hi: rtt,
            probes: 30,
            iperf3_mbit: Some(iperf3),
            tcp_rmem: "4096 131072 6291456".into(),
            tcp_wmem: "4096 16384 4194304".into(),
            line_overflow: 0,
        }
    }

    fn probes(name: &str, rtt: f64, rate: f64, measured: f64) -> Vec<Probe> {
        (0..30)
            .map(|i| Probe {
                condition: name.into(),
                rtt_setting_ms: rtt,
                rate_mbit: rate,
                probe: i,
                rtt_ms: measured,
            })
            .collect()
    }

    /// The verdicts on both goals come from the data: a line 10 % slow misses the RTT goal and is
    /// named; a line that moves less than 1 Gbit/s misses the rate goal.
    #[test]
    fn the_goals_follow_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let good = render(
            &probes("line20-10g", 20.0, 10_000.0, 20.2),
            &[check("line20-10g", 20.0, 10_000.0, 1800.0)],
            dir.path(),
        )
        .unwrap();
        assert!(good.body.contains("1 of 1 lines"), "{}", good.body);
        assert!(good.body.contains("goal met: 1800 Mbit/s"), "{}", good.body);
        let bad = render(
            &probes("line20-10g", 20.0, 10_000.0, 22.0),
            &[check("line20-10g", 20.0, 10_000.0, 700.0)],
            dir.path(),
        )
        .unwrap();
        assert!(bad.body.contains("0 of 1 lines"), "{}", bad.body);
        assert!(bad.body.contains("+10.0 %"), "{}", bad.body);
        assert!(bad.body.contains("goal missed: 700 Mbit/s"), "{}", bad.body);
        assert!(dir.path().join("delay_rtt.svg").is_file());
    }
}
