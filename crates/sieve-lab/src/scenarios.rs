//! Experiments that change the environment (links, CPU), measure CPU, or bring in other tools.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::experiments::{
    fig, improvement_series, loopback, pair_table, run_points, thesis_series, write_csv, xp_points,
    Ctx, Row,
};
use crate::measure::{fmt_summary, summary, Record};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, Receiver, SendOptions};
use crate::scenario::{check_cgroup, check_root, CpuLimit, LinkSpec, NetPair, Side, WIFI, WIRED};
use crate::stats::{improvement, summarize};

fn response(s: &crate::run::Session) -> f64 {
    s.response_ms
}

/// Secure-only and sieve at N = M = 1 with the default cipher.
fn pair() -> (SendOptions, SendOptions) {
    (
        SendOptions {
            mode: "secure-only",
            ..SendOptions::default()
        },
        SendOptions::default(),
    )
}

/// Run x-P points over an emulated link, optionally with the sender under a CPU limit.
fn over_link(
    ctx: &mut Ctx,
    link: &LinkSpec,
    cpu: Option<f64>,
    scenario: &str,
    ps: &[f64],
    (so, sv): (&SendOptions, &SendOptions),
    reps: usize,
) -> Result<Vec<Record>> {
    let net = NetPair::create(scenario, link)?;
    let limit = cpu.map(|f| CpuLimit::create(scenario, f)).transpose()?;
    let server = |c| net.wrap(Side::Server, c);
    let rx = Receiver::start(&ctx.tools, &net.server_ip.to_string(), false, &server)?;
    let client = |c| {
        let c = net.wrap(Side::Client, c);
        match &limit {
            Some(l) => l.wrap(c),
            None => c,
        }
    };
    let pts = xp_points(ctx, scenario, &[1], ps, so, sv)?;
    run_points(ctx, &rx, &pts, reps, &client)
}

pub(crate) fn f5_5(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    if let Err(why) = check_root() {
        return Ok(format!("**Skipped: {why}.** This experiment needs root, iproute2 and `tc` to build the emulated links between network namespaces.\n"));
    }
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.9]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9]
    };
    let reps = ctx.reps(10);
    let (so, sv) = pair();
    let mut recs = over_link(ctx, &WIRED, None, "wired", ps, (&so, &sv), reps)?;
    recs.extend(over_link(ctx, &WIFI, None, "wifi", ps, (&so, &sv), reps)?);
    let cg = check_cgroup();
    if cg.is_ok() {
        recs.extend(over_link(
            ctx,
            &WIFI,
            Some(0.8),
            "wifi+power-saving",
            ps,
            (&so, &sv),
            reps,
        )?);
        recs.extend(over_link(
            ctx,
            &WIRED,
            Some(0.25),
            "wired+slow-client",
            ps,
            (&so, &sv),
            reps,
        )?);
    }
    write_csv(dir, &recs)?;
    let scenarios: Vec<&str> = ["wired", "wifi", "wifi+power-saving", "wired+slow-client"]
        .into_iter()
        .filter(|s| recs.iter().any(|r| r.scenario == *s))
        .collect();
    let mut series: Vec<Series> = scenarios
        .iter()
        .map(|&s| {
            improvement_series(
                &recs,
                &format!("ours, {s}"),
                move |r| r.scenario == s,
                ps,
                |r| r.p,
                response,
            )
        })
        .collect();
    series.push(thesis_series(
        "thesis, wired 100 Mbit/s",
        vec![(0.1, 67.0), (0.9, 7.0)],
    ));
    series.push(thesis_series("thesis, Wi-Fi 54 Mbit/s", vec![(0.1, 8.0)]));
    series.push(thesis_series(
        "thesis, Wi-Fi + power saving",
        vec![(0.1, 15.0)],
    ));
    plot::render(
        &fig(
            "F5.5-5.6: improvement of response time vs P by link and client power (x = 1 MB)",
            "proportion of classified information P",
            "improvement of response time (%)",
            series,
        ),
        &dir.join("f5_5_improvement"),
    )?;
    let rows: Vec<Row<'static>> = scenarios
        .iter()
        .flat_map(|&s| ps.iter().map(move |&p| (s, p)))
        .map(|(s, p)| {
            let f: Box<dyn Fn(&Record) -> bool> =
                Box::new(move |r: &Record| r.scenario == s && (r.p - p).abs() < 1e-9);
            (format!("{s}, 1MB-{}", (p * 100.0).round()), f)
        })
        .collect();
    let mut body = format!(
        "Sender and receiver in two network namespaces joined by a veth pair shaped with `tc` to {} Mbit/s (one-way delay {} ms) and {} Mbit/s ({} ms) (delays only where the kernel has `netem`, see below); 'power saving' puts the sender in a cgroup limited to 80 % of one core (the thesis measured its power-saving client about 20 % slower), 'slow client' to 25 %. x = 1 MB, N = M = 1, {reps} alternating rounds.\n\n",
        WIRED.rate_mbit, WIRED.delay_ms, WIFI.rate_mbit, WIFI.delay_ms
    );
    if let Err(why) = cg {
        let _ = writeln!(body, "Power-saving and slow-client rows skipped: {why}.\n");
    }
    body.push_str(&pair_table(&recs, &rows));
    let so_wifi = summary(
        &recs,
        |r| r.scenario == "wifi" && r.send.mode == "secure-only" && (r.p - 0.1).abs() < 1e-9,
        response,
    );
    let _ = writeln!(body, "\n1 MB secure-only over the emulated Wi-Fi: {} ms (thesis: 501 ms; 557 ms with power saving).\n", fmt_summary(&so_wifi));
    if !crate::scenario::netem_available() {
        body.push_str("\nThis kernel has no `netem` queueing discipline, so only the link rates are emulated; the one-way delays listed above are not applied.\n\n");
    }
    body.push_str("### Why the shape differs\n\nOver a 100 or 54 Mbit/s link both systems push the same bytes through the same bottleneck, and at those rates neither AES-GCM nor the sieve's MAC costs anything visible: encrypting 1 MB takes about 0.1 ms of a full core, 0.4 ms of a quarter core, against 80-150 ms on the wire. So the improvement is within a few per cent of zero at every P, for every client power we tried, and slightly negative (the sieve opens a second connection and sends a manifest). The thesis's Wi-Fi result (8 % against 67 % wired) already showed the link swallowing the gain; with today's ciphers the same happens on the wired link too. What would bring the gain back is a client for which encryption is slow relative to its link: a legacy cipher (the thesis's 3DES), or a CPU orders of magnitude slower than this one.\n");
    Ok(body)
}

pub(crate) fn f5_7(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    if let Err(why) = check_root() {
        return Ok(format!("**Skipped: {why}.** This experiment runs over the emulated Wi-Fi link, which needs root, iproute2 and `tc`.\n"));
    }
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.5]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9]
    };
    let reps = ctx.reps(10);
    let (so, sv) = pair();
    let mut recs = over_link(ctx, &WIFI, None, "wifi", ps, (&so, &sv), reps)?;
    let ap = 500.0;
    let so_ap = SendOptions {
        processing_ms_per_mb: ap,
        ..so
    };
    let sv_ap = SendOptions {
        processing_ms_per_mb: ap,
        ..sv
    };
    recs.extend(over_link(
        ctx,
        &WIFI,
        None,
        "wifi+AP",
        ps,
        (&so_ap, &sv_ap),
        reps,
    )?);
    write_csv(dir, &recs)?;
    let mut series: Vec<Series> = ["wifi", "wifi+AP"]
        .iter()
        .map(|&s| {
            improvement_series(
                &recs,
                &format!("ours, {s}"),
                move |r| r.scenario == s,
                ps,
                |r| r.p,
                response,
            )
        })
        .collect();
    series.push(thesis_series("thesis, Wi-Fi", vec![(0.1, 8.0)]));
    series.push(thesis_series(
        "thesis, Wi-Fi + AP 500 ms",
        vec![(0.1, 49.0)],
    ));
    plot::render(&fig("F5.7: improvement with additional processing AP = 500 ms per secure MB (Wi-Fi, x = 1 MB)", "proportion of classified information P", "improvement of response time (%)", series), &dir.join("f5_7_improvement"))?;
    let rows: Vec<Row<'static>> = ["wifi", "wifi+AP"]
        .iter()
        .flat_map(|&s| ps.iter().map(move |&p| (s, p)))
        .map(|(s, p)| {
            let f: Box<dyn Fn(&Record) -> bool> =
                Box::new(move |r: &Record| r.scenario == s && (r.p - p).abs() < 1e-9);
            (format!("{s}, 1MB-{}", (p * 100.0).round()), f)
        })
        .collect();
    let mut body = format!("Emulated Wi-Fi ({} Mbit/s), x = 1 MB, N = M = 1, {reps} rounds. With AP the sender sleeps {ap} ms per MB of classified data before sending (the thesis's emulation of application processing: x·AP for secure-only, x·P·AP for the sieve).\n\n", WIFI.rate_mbit);
    body.push_str(&pair_table(&recs, &rows));
    let _ = writeln!(
        body,
        "\nImprovement at P = 0.1: {:.1} % without AP, {:.1} % with AP (thesis: 8 % → 49 %).\n",
        crate::measure::improvement_at(
            &recs,
            |r| r.scenario == "wifi" && (r.p - 0.1).abs() < 1e-9,
            response
        ),
        crate::measure::improvement_at(
            &recs,
            |r| r.scenario == "wifi+AP" && (r.p - 0.1).abs() < 1e-9,
            response
        )
    );
    body.push_str("### Why the shape is the thesis's\n\nThe added processing is proportional to the classified bytes, so the sieve saves (1 − P)·x·AP by construction; this is the one result that does not depend on how fast TLS is, and it reproduces: the improvement rises to roughly (1 − P) of the AP share of the response time.\n");
    Ok(body)
}

pub(crate) fn cpu_p(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    let rx = loopback(ctx)?;
    let size = if ctx.quick { 32 } else { 256 };
    let ps: &[f64] = if ctx.quick {
        &[0.1, 0.5, 0.9]
    } else {
        &[0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    };
    let reps = ctx.reps(7);
    let (so, sv) = pair();
    let mut csv = String::from("mode,p,rep,sender_cpu_ms,receiver_cpu_ms,response_ms,bytes\n");
    let mut rows: Vec<(String, f64, f64, f64)> = Vec::new();
    let files: Vec<_> = ps
        .iter()
        .map(|&p| ctx.work.xp(size, p))
        .collect::<Result<_>>()?;
    ctx.bar
        .set_length(ctx.bar.length().unwrap_or(0) + (reps * ps.len() * 2) as u64);
    for rep in 0..reps {
        for (i, &p) in ps.iter().enumerate() {
            for v in [&so, &sv] {
                let before = rx.cpu_ms();
                let s = v.run(
                    &ctx.tools,
                    rx.tls,
                    std::slice::from_ref(&files[i]),
                    &no_wrap,
                )?;
                std::thread::sleep(std::time::Duration::from_millis(50));
                let rcpu = rx.cpu_ms() - before;
                let _ = writeln!(
                    csv,
                    "{},{p},{rep},{},{rcpu},{},{}",
                    v.mode, s.cpu_ms, s.response_ms, s.bytes
                );
                rows.push((
                    v.mode.to_string(),
                    p,
                    s.cpu_ms / (s.bytes as f64 / 1e9) / 1000.0,
                    rcpu / (s.bytes as f64 / 1e9) / 1000.0,
                ));
                ctx.bar.inc(1);
            }
        }
    }
    std::fs::write(dir.join("data.csv"), csv)?;
    let med = |mode: &str, p: f64, which: usize| {
        summarize(
            &rows
                .iter()
                .filter(|r| r.0 == mode && (r.1 - p).abs() < 1e-9)
                .map(|r| if which == 0 { r.2 } else { r.3 })
                .collect::<Vec<_>>(),
        )
    };
    let mut series = Vec::new();
    for (mode, style) in [("secure-only", Style::Peer), ("sieve", Style::Ours)] {
        for (which, side) in [(0usize, "sender"), (1, "receiver")] {
            series.push(Series {
                label: format!("{mode}, {side}"),
                style,
                points: ps
                    .iter()
                    .map(|&p| (p, med(mode, p, which).median))
                    .collect(),
                err: Some(
                    ps.iter()
                        .map(|&p| med(mode, p, which).ci95_median)
                        .collect(),
                ),
            });
        }
    }
    plot::render(
        &fig(
            &format!("CPU seconds per GB vs P ({size} MB documents, loopback)"),
            "proportion of classified information P",
            "CPU time (s per GB moved)",
            series,
        ),
        &dir.join("cpu_per_gb"),
    )?;
    let mut t = String::from("| P | secure-only sender (s/GB) | sieve sender | secure-only receiver | sieve receiver | receiver saving |\n|---|---|---|---|---|---|\n");
    for &p in ps {
        let (a, b, c, d) = (
            med("secure-only", p, 0),
            med("sieve", p, 0),
            med("secure-only", p, 1),
            med("sieve", p, 1),
        );
        let _ = writeln!(
            t,
            "| {p} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} % |",
            a.median,
            b.median,
            c.median,
            d.median,
            improvement(c.median, d.median)
        );
    }
    Ok(format!("Our own experiment: the CPU each side spends per GB, {size} MB x-P documents on loopback, receiver with `--discard` (verifies, acknowledges, writes nothing), {reps} alternating rounds; sender CPU from `sieve send --json` (whole process), receiver CPU from the receiver process's per-thread scheduler statistics in /proc.\n\n{t}\n### What it shows\n\nThe receiver's work falls with the classified share: cleartext costs a read and an AES-GMAC pass (about 25 GB/s), classified bytes a TLS decryption. The sender's does not fall as much, because before any cleartext may leave it must scan the whole document for marks (so that a badly marked document sends nothing), a pass secure-only does not need.\n"))
}

pub(crate) fn peers(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    let size_mb = if ctx.quick { 128 } else { 1024 };
    let file = ctx.work.xp(size_mb, 0.1)?;
    let reps = ctx.reps(5);
    let rx = Receiver::start(&ctx.tools, "127.0.0.1", true, &no_wrap)?;
    let disc = Receiver::start(&ctx.tools, "127.0.0.1", false, &no_wrap)?;
    let (so, sv) = pair();
    let mut csv = String::from("tool,rep,wall_ms,sender_cpu_ms\n");
    let mut results: Vec<(String, f64, f64)> = Vec::new();
    let mut notes = String::new();
    let peers = crate::peers::all(&ctx.tools.certs);
    ctx.bar
        .set_length(ctx.bar.length().unwrap_or(0) + (reps * (4 + peers.len())) as u64);
    for rep in 0..reps {
        for (label, v, r) in [
            ("sieve (write)", &sv, &rx),
            ("secure-only (write)", &so, &rx),
            ("sieve (discard)", &sv, &disc),
            ("secure-only (discard)", &so, &disc),
        ] {
            let s = v.run(&ctx.tools, r.tls, std::slice::from_ref(&file), &no_wrap)?;
            let _ = writeln!(csv, "{label},{rep},{},{}", s.total_ms, s.cpu_ms);
            results.push((label.into(), s.total_ms, s.cpu_ms));
            ctx.bar.inc(1);
        }
        for p in &peers {
            match p.transfer(&file) {
                Ok(run) => {
                    let (w, c) = (
                        run.wall.as_secs_f64() * 1000.0,
                        run.sender_cpu.as_secs_f64() * 1000.0,
                    );
                    let _ = writeln!(csv, "{},{rep},{w},{c}", p.name());
                    results.push((p.name(), w, c));
                }
                Err(e) if rep == 0 => {
                    let _ = writeln!(notes, "- {}: not measured ({e:#})", p.name());
                }
                Err(_) => {}
            }
            ctx.bar.inc(1);
        }
    }
    std::fs::write(dir.join("data.csv"), csv)?;
    let mut names: Vec<String> = results.iter().map(|r| r.0.clone()).collect();
    names.dedup();
    names.sort();
    names.dedup();
    let gb = size_mb as f64 * 1e6 / 1e9;
    let mut t =
        String::from("| tool | wall time (ms) | GB/s | sender CPU (s/GB) |\n|---|---|---|---|\n");
    let mut bars = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let w = summarize(
            &results
                .iter()
                .filter(|r| &r.0 == n)
                .map(|r| r.1)
                .collect::<Vec<_>>(),
        );
        let c = summarize(
            &results
                .iter()
                .filter(|r| &r.0 == n)
                .map(|r| r.2)
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(
            t,
            "| {n} | {} | {:.2} | {:.2} |",
            fmt_summary(&w),
            gb / (w.median / 1000.0),
            c.median / 1000.0 / gb
        );
        bars.push(Series {
            label: n.clone(),
            style: if n.starts_with("sieve") {
                Style::Ours
            } else if n.starts_with("secure-only") {
                Style::Thesis
            } else {
                Style::Peer
            },
            points: vec![(i as f64, gb / (w.median / 1000.0))],
            err: None,
        });
    }
    let mut f = fig(
        &format!("Throughput of a {size_mb} MB x-10 document on loopback"),
        "tool",
        "throughput (GB/s)",
        bars,
    );
    f.x_categories = Some(names.clone());
    plot::render(&f, &dir.join("peers_throughput"))?;
    Ok(format!("One {size_mb} MB 1MB-10-style document (P = 0.1) on loopback, {reps} rounds each, tools alternating. `sieve` rows are total time (connect + response, the acknowledgement after fsync when writing); peers are wall time of the client process writing to /dev/null on the far side. (In the figure, secure-only is drawn in the thesis style only to tell it apart.)\n\n{t}\n{notes}\n"))
}
