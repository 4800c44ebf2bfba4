//! COMPRESS, our own: compression of the cleartext (after ACCENT, Park and Park 2011) across link
//! rates, corpora and P, against secure-only and against the tools that compress everything.
//!
//! Links of 10, 54, 100 and 1000 Mbit/s (two network namespaces routed through a third, `tbf`
//! both ways there, as the lab builds them) and loopback. Corpora: the `sieve gen` kinds (prose, CSV, JSON lines, logs, and
//! the thesis's x-P letters) and real text already on the machine (the Rust toolchain's HTML
//! documentation and the cargo registry's crate sources, classified by a ranges file with five
//! equal parts per MiB). The sieve with `auto`, with ACCENT's policy, with fixed levels and off;
//! secure-only; and `zstd --adapt | socat OPENSSL` (which compresses the classified bytes too),
//! `scp -C` and `rsync -z` over ssh, on the same links and bytes. The ideal is the best fixed
//! level at each point.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sieve_core::corpus::DocKind;

use crate::common::estimate::Estimate;
use crate::common::figures::fig;
use crate::common::record::write_csv;
use crate::common::report::{fill, interval_note, Finding, Report};
use crate::common::Ctx;
use crate::peers::{self, PeerCtx};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, Receiver, SendOptions};
use crate::scenario::{check_root, LinkSpec, NetPair, Side};

const ID: &str = "COMPRESS";

/// One transfer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Row {
    /// "10", "54", "100", "1000" (Mbit/s) or "loopback".
    link: String,
    corpus: String,
    p: f64,
    bytes: u64,
    /// "secure-only", "sieve auto", "sieve zstd:9", "rsync -z", ...
    variant: String,
    rep: usize,
    response_ms: f64,
    /// Cleartext bytes on the wire (the sieve only; empty otherwise).
    plain_after: Option<u64>,
    plain_before: Option<u64>,
}

/// The links, slowest first: (name, Mbit/s; `None`: loopback).
const LINKS: [(&str, Option<f64>); 5] = [
    ("10", Some(10.0)),
    ("54", Some(54.0)),
    ("100", Some(100.0)),
    ("1000", Some(1000.0)),
    ("loopback", None),
];

/// How a link is named in sentences: "100 Mbit/s", or "loopback".
fn link_label(link: &str) -> String {
    if link == "loopback" {
        link.to_string()
    } else {
        format!("{link} Mbit/s")
    }
}

/// Bytes of a document on a link: a few seconds of secure-only at its rate.
fn size_for(link: Option<f64>, quick: bool) -> u64 {
    let mib = match link {
        Some(r) if r <= 10.0 => 4,
        Some(r) if r <= 54.0 => 16,
        Some(r) if r <= 100.0 => 32,
        _ => 128,
    };
    (if quick { (mib / 4).max(2) } else { mib }) << 20
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Corpus {
    Gen(DocKind),
    RustDocs,
    CrateSources,
}

impl Corpus {
    fn name(self) -> String {
        match self {
            Corpus::Gen(k) => k.name().to_string(),
            Corpus::RustDocs => "rust-docs".into(),
            Corpus::CrateSources => "crate-sources".into(),
        }
    }
}

/// Make the document of `corpus`, `bytes` long, with proportion `p` classified; returns the
/// file and, for real text, its ranges file. `None` when the corpus is not on this machine.
fn document(
    dir: &Path,
    corpus: Corpus,
    bytes: u64,
    p: f64,
) -> Result<Option<(PathBuf, Option<PathBuf>)>> {
    let stem = format!("{}-{}-{}", corpus.name(), bytes, (p * 100.0).round());
    let path = dir.join(format!("{stem}.txt"));
    match corpus {
        Corpus::Gen(kind) => {
            if !path.exists() {
                let f = File::create(&path)?;
                let mut w = BufWriter::with_capacity(sieve_core::gen::WRITE_CHUNK, f);
                sieve_core::corpus::write(kind, bytes, p, 1, true, &mut w, |_| {})?;
                w.flush()?;
            }
            Ok(Some((path, None)))
        }
        Corpus::RustDocs | Corpus::CrateSources => {
            let ranges = dir.join(format!("{stem}.ranges.json"));
            if !path.exists() {
                let files = real_text(corpus)?;
                if files.is_empty() {
                    return Ok(None);
                }
                let mut w = BufWriter::new(File::create(&path)?);
                let mut left = bytes;
                'all: loop {
                    for f in &files {
                        let Ok(b) = std::fs::read(f) else { continue };
                        let n = (b.len() as u64).min(left) as usize;
                        w.write_all(&b[..n])?;
                        left -= n as u64;
                        if left == 0 {
                            break 'all;
                        }
                    }
                }
                w.flush()?;
                std::fs::write(&ranges, ranges_json(bytes, p))?;
            }
            Ok(Some((path, Some(ranges))))
        }
    }
}

/// Five equal classified parts per MiB, as the thesis's x-P files place theirs.
fn ranges_json(len: u64, p: f64) -> String {
    let mib = 1u64 << 20;
    let mut v = Vec::new();
    let mut start = 0;
    while start < len {
        let block = mib.min(len - start);
        let part = (block as f64 * p / 5.0) as u64;
        for k in 0..5 {
            let a = start + k * block / 5;
            if part > 0 {
                v.push([a, (a + part).min(len)]);
            }
        }
        start += mib;
    }
    json!({ "ranges": v }).to_string()
}

/// The files of a real-text corpus, sorted: HTML of the Rust documentation, or `.rs`, `.md` and
/// `.toml` of the cargo registry's sources.
fn real_text(corpus: Corpus) -> Result<Vec<PathBuf>> {
    let (root, exts): (PathBuf, &[&str]) = match corpus {
        Corpus::RustDocs => {
            let out = std::process::Command::new("rustc")
                .args(["--print", "sysroot"])
                .output();
            let Ok(out) = out else { return Ok(Vec::new()) };
            let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (Path::new(&sysroot).join("share/doc"), &["html"])
        }
        Corpus::CrateSources => {
            let home = std::env::var("CARGO_HOME")
                .map(PathBuf::from)
                .or_else(|_| std::env::var("HOME").map(|h| Path::new(&h).join(".cargo")))
                .context("no CARGO_HOME or HOME")?;
            (home.join("registry/src"), &["rs", "md", "toml"])
        }
        Corpus::Gen(_) => return Ok(Vec::new()),
    };
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t)
                    if t.is_file()
                        && p.extension().is_some_and(|x| exts.iter().any(|e| x == *e)) =>
                {
                    out.push(p)
                }
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `auto` as in a first session to a receiver: its sender's cache holds no path memory (see
/// [`variants`]).
const AUTO_FIRST: &str = "sieve auto, first session";

/// The sieve's variants: secure-only, off, auto, ACCENT, the fixed levels; and `auto` once
/// more with a path memory of its own, emptied before every session (`cold`), so that it starts
/// as a first session to the receiver does. The other variants share the user's cache, in which
/// `auto` resumes at the level its last session to the receiver kept: the one before it in
/// this experiment, on the same link (the corpus may differ).
fn variants(quick: bool, cold: &Path) -> Vec<(String, SendOptions)> {
    let levels: &[&str] = if quick {
        &["zstd:1", "zstd:9"]
    } else {
        &["zstd:1", "zstd:3", "zstd:6", "zstd:9", "zstd:19"]
    };
    let mut v = vec![(
        "secure-only".to_string(),
        SendOptions {
            compress: Some("off".into()),
            ..SendOptions::secure_only()
        },
    )];
    let policies = ["off", "auto", "accent"].iter().chain(levels);
    for c in policies {
        v.push((
            format!("sieve {c}"),
            SendOptions {
                compress: Some((*c).into()),
                ..SendOptions::default()
            },
        ));
    }
    v.push((
        AUTO_FIRST.to_string(),
        SendOptions {
            compress: Some("auto".into()),
            cache_home: Some(cold.to_path_buf()),
            ..SendOptions::default()
        },
    ));
    v
}

pub(crate) fn run(ctx: &mut Ctx, dir: &Path) -> Result<Report> {
    let netns = check_root();
    let quick = ctx.quick;
    let rounds = ctx.reps(5);
    let corpora: Vec<Corpus> = if quick {
        vec![Corpus::CrateSources, Corpus::Gen(DocKind::Log)]
    } else {
        vec![
            Corpus::CrateSources,
            Corpus::RustDocs,
            Corpus::Gen(DocKind::Text),
            Corpus::Gen(DocKind::Csv),
            Corpus::Gen(DocKind::Json),
            Corpus::Gen(DocKind::Log),
            Corpus::Gen(DocKind::Letters),
        ]
    };
    let ps: &[f64] = if quick { &[0.1] } else { &[0.1, 0.5, 0.9] };
    let work = dir.join("work");
    std::fs::create_dir_all(&work)?;
    let cold = work.join("first-session-cache");
    let vars = variants(quick, &cold);
    let peers = peers::compressing(&ctx.tools.certs);
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    let mut skipped_links = Vec::new();
    for (link, rate) in LINKS {
        let (links, reason) = match (rate, &netns) {
            (Some(_), Err(why)) => (None, Some(why.clone())),
            (Some(r), Ok(())) => {
                let spec = LinkSpec {
                    name: "compress",
                    rate_mbit: r,
                    delay_ms: 0.0,
                    loss: 0.0,
                };
                (Some(NetPair::create(&format!("z{link}"), &spec)?), None)
            }
            (None, _) => (None, None),
        };
        if let Some(why) = reason {
            skipped_links.push(format!("{link} Mbit/s: {why}"));
            continue;
        }
        let net = links.as_ref();
        let host = net.map_or("127.0.0.1".to_string(), |n| n.server_ip.to_string());
        let server = |c| match net {
            Some(n) => n.wrap(Side::Server, c),
            None => no_wrap(c),
        };
        let client = |c| match net {
            Some(n) => n.wrap(Side::Client, c),
            None => no_wrap(c),
        };
        let rx = Receiver::start(&ctx.tools, &host, false, &server)?;
        let bytes = size_for(rate, quick);
        // P varies on the 100 Mbit/s link only; elsewhere P = 0.1.
        let point_ps: &[f64] = if link == "100" { ps } else { &ps[..1] };
        let peer_ctx = PeerCtx {
            net,
            ..PeerCtx::default()
        };
        let mut points = Vec::new();
        for &corpus in &corpora {
            for &p in point_ps {
                if p != 0.1 && corpus != Corpus::CrateSources {
                    continue;
                }
                match document(&work, corpus, bytes, p)? {
                    Some(d) => points.push((corpus, p, d)),
                    None => {
                        let m = format!("{}: not on this machine", corpus.name());
                        if !missing.contains(&m) {
                            missing.push(m);
                        }
                    }
                }
            }
        }
        let per_point = vars.len() + peers.len();
        ctx.bar
            .set_length(ctx.bar.length().unwrap_or(0) + (points.len() * per_point * rounds) as u64);
        for rep in 0..rounds {
            for (corpus, p, (file, ranges)) in &points {
                for (name, v) in &vars {
                    let v = SendOptions {
                        ranges: ranges.clone(),
                        ..v.clone()
                    };
                    if v.cache_home.is_some() {
                        forget_paths(&cold)?;
                    }
                    let s = v.run(&ctx.tools, rx.tls, std::slice::from_ref(file), &client)?;
                    let c = s.compression.as_ref();
                    rows.push(Row {
                        link: link.into(),
                        corpus: corpus.name(),
                        p: *p,
                        bytes: s.bytes,
                        variant: name.clone(),
                        rep,
                        response_ms: s.response_ms,
                        plain_after: c.map(|c| c.plain_after),
                        plain_before: c.map(|c| c.plain_before),
                    });
                    ctx.bar.inc(1);
                }
                // The peers send the file as it is (marks and all), the same bytes on the link.
                for peer in &peers {
                    match peer.transfer_with(file, &peer_ctx) {
                        Ok(r) => rows.push(Row {
                            link: link.into(),
                            corpus: corpus.name(),
                            p: *p,
                            bytes: r.bytes,
                            variant: peer.name(),
                            rep,
                            response_ms: r.wall.as_secs_f64() * 1e3,
                            plain_after: None,
                            plain_before: None,
                        }),
                        Err(e) => {
                            let m = format!("{}: not measured ({e:#})", peer.name());
                            if !missing.contains(&m) {
                                missing.push(m);
                            }
                        }
                    }
                    ctx.bar.inc(1);
                }
            }
        }
        drop(rx);
    }
    write_csv(&dir.join("data.csv"), &rows)?;
    let mut report = render(&rows, dir)?;
    for m in skipped_links {
        missing.push(m);
    }
    if !missing.is_empty() {
        report.body.push_str(&format!(
            "\nNot measured on this machine:\n\n- {}\n",
            missing.join("\n- ")
        ));
    }
    report.emulated = "links of 10, 54, 100 and 1000 Mbit/s between two network namespaces \
                       (tbf both ways in a third namespace that routes between them, no added \
                       delay), and loopback; sender and receiver share this machine's cores."
        .into();
    Ok(report)
}

/// Auto's share of the ideal's throughput at one point: link, corpus, P, the share of the
/// medians (%), and the share round by round ([`Estimate`] of the per-round shares, %).
type GoalRow = (String, String, f64, f64, Estimate);

/// The throughput goal: at least this share of the best fixed level's (%).
const GOAL_SHARE: f64 = 95.0;

/// The goal judged by the per-round shares' interval, as the AUTO experiment judges its own:
/// a point **meets** it where the whole interval lies at or above [`GOAL_SHARE`], **misses** it
/// where the whole interval lies below, and is **within the noise** otherwise.
fn verdicts(rows: &[&GoalRow]) -> String {
    let known: Vec<&&GoalRow> = rows.iter().filter(|g| g.4.known()).collect();
    if known.is_empty() {
        return String::new();
    }
    let met = known.iter().filter(|g| g.4.lo >= GOAL_SHARE).count();
    let missed: Vec<String> = known
        .iter()
        .filter(|g| g.4.hi < GOAL_SHARE)
        .map(|g| format!("{}, {}, P = {}: {}", link_label(&g.0), g.1, g.2, g.4.pct()))
        .collect();
    let noise = known.len() - met - missed.len();
    let list = if missed.is_empty() {
        String::new()
    } else {
        format!(" ({})", missed.join("; "))
    };
    format!(
        ". Round by round (each way once per round, the ideal's time over auto's): the goal is \
         met at {met}, within the noise at {noise} and missed at {}{list}",
        missed.len()
    )
}

/// The response times of `a` and `b` in the same rounds, in `a`'s order: every way runs once
/// per round, so pairs share the machine's state of that round.
fn by_round(a: &[&Row], b: &[&Row]) -> Vec<(f64, f64)> {
    a.iter()
        .filter_map(|x| {
            b.iter()
                .find(|y| y.rep == x.rep)
                .map(|y| (x.response_ms, y.response_ms))
        })
        .collect()
}

/// Empty the path memory in the cache at `dir` (its calibration stays): the next session is a
/// first one to every receiver.
fn forget_paths(dir: &Path) -> Result<()> {
    let file = dir.join("sieve").join("paths.json");
    match std::fs::remove_file(&file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot empty {}", file.display()))
        }
        _ => Ok(()),
    }
}

fn median(rows: &[&Row]) -> Estimate {
    Estimate::median_of(&rows.iter().map(|r| r.response_ms).collect::<Vec<_>>())
}

pub(crate) fn render(rows: &[Row], dir: &Path) -> Result<Report> {
    let links: Vec<&str> = LINKS
        .iter()
        .map(|l| l.0)
        .filter(|l| rows.iter().any(|r| r.link == *l))
        .collect();
    let mut variants: Vec<String> = rows.iter().map(|r| r.variant.clone()).collect();
    variants.sort();
    variants.dedup();
    let fixed: Vec<&String> = variants
        .iter()
        .filter(|v| v.starts_with("sieve zstd:"))
        .collect();
    let at = |link: &str, corpus: &str, p: f64, v: &str| -> Vec<&Row> {
        rows.iter()
            .filter(|r| {
                r.link == link && r.corpus == corpus && (r.p - p).abs() < 1e-9 && r.variant == v
            })
            .collect()
    };
    // Every (corpus, P) measured on some link.
    let mut points: Vec<(String, f64)> = rows.iter().map(|r| (r.corpus.clone(), r.p)).collect();
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    points.dedup();
    let mut table = String::from(
        "| link (Mbit/s) | corpus | P | secure-only | sieve off | auto | auto, first session | accent | ideal (best fixed) | auto / ideal throughput | per round | first session / ideal | zstd+socat | scp -C | rsync -z |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut findings = Vec::new();
    let mut goal_rows = Vec::new();
    let mut first_rows = Vec::new();
    let med = |v: Vec<&Row>| (!v.is_empty()).then(|| median(&v).point);
    let cell = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.0}"));
    for link in &links {
        for (corpus, p) in &points {
            let get = |v: &str| med(at(link, corpus, *p, v));
            let Some(auto) = get("sieve auto") else {
                continue;
            };
            let ideal = fixed
                .iter()
                .filter_map(|v| get(v).map(|m| (v.as_str(), m)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let share = ideal.map(|(_, m)| m / auto * 100.0);
            let first = get(AUTO_FIRST);
            let first_share = ideal.zip(first).map(|((_, m), f)| m / f * 100.0);
            // The same share round by round: the ideal level's time over auto's in each round
            // (every way runs once per round, alternating), so that the machine's drift between
            // rounds cancels; its interval decides the verdict on the goal.
            let per_round = |v: &str| {
                ideal.map_or(Estimate::NONE, |(iv, _)| {
                    let shares: Vec<f64> =
                        by_round(&at(link, corpus, *p, iv), &at(link, corpus, *p, v))
                            .into_iter()
                            .map(|(i, a)| i / a * 100.0)
                            .collect();
                    Estimate::median_of(&shares)
                })
            };
            let (round, first_round) = (per_round("sieve auto"), per_round(AUTO_FIRST));
            let peer = |name: &str| {
                variants
                    .iter()
                    .find(|v| v.starts_with(name))
                    .and_then(|v| get(v))
            };
            let _ = writeln!(
                table,
                "| {link} | {corpus} | {p} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(get("secure-only")),
                cell(get("sieve off")),
                cell(Some(auto)),
                cell(first),
                cell(get("sieve accent")),
                ideal.map_or("—".into(), |(v, m)| format!(
                    "{m:.0} ({})",
                    v.trim_start_matches("sieve ")
                )),
                share.map_or("—".into(), |s| format!("{s:.1} %")),
                if round.known() {
                    round.pct()
                } else {
                    "—".into()
                },
                first_share.map_or("—".into(), |s| format!("{s:.1} %")),
                cell(peer("zstd --adapt")),
                cell(peer("scp")),
                cell(peer("rsync")),
            );
            if let Some(s) = share {
                goal_rows.push((link.to_string(), corpus.clone(), *p, s, round));
            }
            if let Some(s) = first_share {
                first_rows.push((link.to_string(), corpus.clone(), *p, s, first_round));
            }
            // The sieve's default against secure-only, paired by round.
            let e = Estimate::improvement(by_round(
                &at(link, corpus, *p, "secure-only"),
                &at(link, corpus, *p, "sieve auto"),
            ));
            if e.point.is_finite() {
                findings.push(Finding::new(
                    ID,
                    &format!("{}, {corpus}, P = {p}, auto", link_label(link)),
                    "response time",
                    &e,
                ));
            }
        }
    }
    table.push_str(&interval_note(
        rows.iter().map(|r| r.rep).max().map_or(0, |m| m + 1),
    ));
    // Response time against the link rate, crate sources at P = 0.1 (or the first corpus).
    let main = points
        .iter()
        .find(|(c, p)| c == "crate-sources" && (*p - 0.1).abs() < 1e-9)
        .or(points.first())
        .cloned();
    if let Some((corpus, p)) = &main {
        let mut series = Vec::new();
        let mut by_variant: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        let mut ideal = Vec::new();
        for (i, link) in links.iter().enumerate() {
            for v in &variants {
                if let Some(m) = med(at(link, corpus, *p, v)) {
                    by_variant.entry(v).or_default().push((i as f64, m));
                }
            }
            if let Some(m) = fixed
                .iter()
                .filter_map(|v| med(at(link, corpus, *p, v)))
                .min_by(f64::total_cmp)
            {
                ideal.push((i as f64, m));
            }
        }
        for (v, points) in by_variant {
            series.push(Series {
                label: v.to_string(),
                style: if v.starts_with("sieve") || v == "secure-only" {
                    Style::Ours
                } else {
                    Style::Peer
                },
                points,
                err: None,
            });
        }
        series.push(Series {
            label: "ideal (best fixed level)".into(),
            style: Style::Thesis,
            points: ideal,
            err: None,
        });
        let mut f = fig(
            &format!("Response time against link rate: {corpus}, P = {p}"),
            "link (Mbit/s)",
            "response time (ms)",
            series,
        );
        f.log_y = true;
        f.x_categories = Some(links.iter().map(|l| l.to_string()).collect());
        plot::render(&f, &dir.join("compress_response"))?;
    }
    let lowest = |rows: &[GoalRow]| {
        let on_links: Vec<_> = rows.iter().filter(|g| g.0 != "loopback").collect();
        let worst = on_links.iter().min_by(|a, b| a.3.total_cmp(&b.3))?;
        let met = on_links.iter().filter(|g| g.3 >= 95.0).count();
        Some(format!(
            "{:.1} % ({}, {}, P = {}); at least 95 % at {met} of {} points{}",
            worst.3,
            link_label(&worst.0),
            worst.1,
            worst.2,
            on_links.len(),
            verdicts(&on_links),
        ))
    };
    let body = fill(
        "compress.md",
        include_str!("compress.md"),
        json!({
            "table": table,
            "worst": lowest(&goal_rows),
            "worst_first": lowest(&first_rows),
            "levels": fixed.iter().map(|v| v.trim_start_matches("sieve ")).collect::<Vec<_>>().join(", "),
        }),
    )?;
    Ok(Report {
        body,
        emulated: String::new(),
        findings,
        key_plot: main.map(|_| "compress_response".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_classify_p_in_five_parts_per_mib() {
        let len = (3 << 20) + 12_345;
        let v: serde_json::Value = serde_json::from_str(&ranges_json(len, 0.1)).unwrap();
        let r: Vec<(u64, u64)> = v["ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x[0].as_u64().unwrap(), x[1].as_u64().unwrap()))
            .collect();
        assert_eq!(r.len(), 4 * 5);
        assert!(r.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint");
        let classified: u64 = r.iter().map(|(a, b)| b - a).sum();
        let p = classified as f64 / len as f64;
        assert!((p - 0.1).abs() < 0.001, "{p}");
        assert!(r.iter().all(|&(_, b)| b <= len));
    }

    #[test]
    fn the_table_names_the_ideal_and_auto_s_share_of_it() {
        let row = |link: &str, variant: &str, rep, ms| Row {
            link: link.into(),
            corpus: "crate-sources".into(),
            p: 0.1,
            bytes: 32 << 20,
            variant: variant.into(),
            rep,
            response_ms: ms,
            plain_after: None,
            plain_before: None,
        };
        let mut rows = Vec::new();
        for rep in 0..3 {
            rows.push(row("100", "secure-only", rep, 2800.0));
            rows.push(row("100", "sieve off", rep, 2600.0));
            rows.push(row("100", "sieve auto", rep, 640.0));
            rows.push(row("100", AUTO_FIRST, rep, 760.0));
            rows.push(row("100", "sieve zstd:1", rep, 800.0));
            rows.push(row("100", "sieve zstd:9", rep, 608.0));
            rows.push(row("100", "rsync -z", rep, 1500.0));
            rows.push(row("loopback", "sieve auto", rep, 100.0));
            rows.push(row("loopback", "sieve zstd:1", rep, 180.0));
        }
        // Over 10 Mbit/s auto is as fast as zstd:19 in the median, but its rounds spread
        // (shares 95.0, 105.6 and 76.0 %): within the noise. Over 1000 Mbit/s it is slower than
        // zstd:1 in every round: missed.
        for (rep, (auto, z19)) in [(2000.0, 1900.0), (1800.0, 1900.0), (2500.0, 1900.0)]
            .into_iter()
            .enumerate()
        {
            rows.push(row("10", "sieve auto", rep, auto));
            rows.push(row("10", "sieve zstd:19", rep, z19));
            rows.push(row("1000", "sieve auto", rep, 400.0 + rep as f64));
            rows.push(row("1000", "sieve zstd:1", rep, 350.0));
        }
        let dir = tempfile::tempdir().unwrap();
        let r = render(&rows, dir.path()).unwrap();
        assert!(
            r.body.contains(
                "| 100 | crate-sources | 0.1 | 2800 | 2600 | 640 | 760 | — | 608 (zstd:9) | 95.0 % \
                 | 95.0 % [95.0, 95.0] | 80.0 % |"
            ),
            "{}",
            r.body
        );
        assert!(r.body.contains("| 1500 |"), "{}", r.body);
        assert!(
            r.body
                .contains("| 1900 (zstd:19) | 95.0 % | 95.0 % [76.0, 105.6] |"),
            "{}",
            r.body
        );
        // The loopback is not a link the goal counts; the per-round interval decides the
        // verdict, not the median alone.
        assert!(
            r.body.contains(
                "87.3 % (1000 Mbit/s, crate-sources, P = 0.1); at least 95 % at 2 of 3 points. \
                 Round by round (each way once per round, the ideal's time over auto's): the \
                 goal is met at 1, within the noise at 1 and missed at 1 (1000 Mbit/s, \
                 crate-sources, P = 0.1: 87.3 % [87.1, 87.5])"
            ),
            "{}",
            r.body
        );
        // Two paragraphs, not one.
        assert!(
            r.body.contains("everywhere).\n\nIn a first session"),
            "{}",
            r.body
        );
        assert!(
            r.body.contains(
                "In a first session to the receiver: 80.0 % (100 Mbit/s, crate-sources, P = 0.1); \
                 at least 95 % at 0 of 1 points. Round by round"
            ),
            "{}",
            r.body
        );
        assert!(dir.path().join("compress_response.svg").exists());
    }
}
