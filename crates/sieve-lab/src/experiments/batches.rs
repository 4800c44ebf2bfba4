//! F5.14-5.16: many documents in one session, with the batch file split (BFS), batch even split
//! (BES) and batch segment split (BSS) over uniform and skewed batches (thesis §4.5, §5.4).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::measure::{fmt_summary, summary, Point};
use crate::plot::{self, Series, Style};
use crate::run::{no_wrap, SendOptions};

use super::*;

pub(super) fn f5_14(ctx: &mut Ctx, dir: &Path) -> Result<String> {
    let rx = loopback(ctx)?;
    let xs: &[u64] = if ctx.quick {
        &[1, 5]
    } else {
        &[1, 3, 5, 7, 10]
    };
    let mut pts = Vec::new();
    for &x in xs {
        for (label, files) in [("UFS", ctx.work.ufs(x)?), ("EFS", ctx.work.efs(x)?)] {
            let mut variants = vec![
                SendOptions {
                    batch_split: "file",
                    ..so(2)
                },
                SendOptions {
                    batch_split: "even",
                    ..so(2)
                },
                SendOptions {
                    batch_split: "dynamic",
                    ..so(1)
                },
                SendOptions {
                    batch_split: "file",
                    ..sv(2, 2)
                },
                SendOptions {
                    batch_split: "even",
                    ..sv(2, 2)
                },
                SendOptions {
                    batch_split: "segment",
                    ..sv(2, 2)
                },
                SendOptions {
                    batch_split: "dynamic",
                    ..sv(2, 2)
                },
            ];
            variants.push(SendOptions {
                batch_split: "dynamic",
                ..sv(1, 1)
            });
            pts.push(Point {
                scenario: "loopback".into(),
                files_label: label.into(),
                files,
                x_mb: x as f64,
                p: 0.5,
                variants,
            });
        }
    }
    let reps = ctx.reps(10);
    let recs = run_points(ctx, &rx, &pts, reps, &no_wrap)?;
    write_csv(dir, &recs)?;
    let variants: [(&str, u8, &str); 8] = [
        ("secure-only", 2, "file"),
        ("secure-only", 2, "even"),
        ("secure-only", 1, "dynamic"),
        ("sieve", 2, "file"),
        ("sieve", 2, "even"),
        ("sieve", 2, "segment"),
        ("sieve", 2, "dynamic"),
        ("sieve", 1, "dynamic"),
    ];
    let xsf: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
    let mut body = format!("Batches on loopback, P as in the sets (UFS = {{1MB-10, x-50, 1MB-90}}, EFS = 3 × x-50), {reps} rounds; BFS, BES, BSS (thesis §4.5) and the dynamic default, with 2 channels of each kind and with one.\n\nThesis: sieve BSS ≈ BES < BFS ≈ one channel; one channel best at x = 1; secure-only BES < BFS; the sieve beats secure-only more as x grows.\n\n");
    for set in ["UFS", "EFS"] {
        let series = variants
            .iter()
            .map(|&(m, n, b)| Series {
                label: format!("{m} {b} N={n}"),
                style: if m == "sieve" {
                    Style::Ours
                } else {
                    Style::Peer
                },
                points: xsf
                    .iter()
                    .map(|&x| {
                        (
                            x,
                            summary(
                                &recs,
                                |r| {
                                    r.files == set
                                        && (r.x_mb - x).abs() < 1e-9
                                        && r.send.mode == m
                                        && r.send.n == n
                                        && r.send.batch_split == b
                                },
                                response,
                            )
                            .median,
                        )
                    })
                    .collect(),
                err: None,
            })
            .collect();
        plot::render(
            &fig(
                &format!("F5.14-5.16: batch response time, {set}"),
                "file size x (MB)",
                "response time (ms)",
                series,
            ),
            &dir.join(format!("batch_{}", set.to_lowercase())),
        )?;
        let _ = writeln!(
            body,
            "\n#### {set}\n\n| variant | {} |\n|---|{}",
            xs.iter()
                .map(|x| format!("x = {x} MB"))
                .collect::<Vec<_>>()
                .join(" | "),
            "---|".repeat(xs.len())
        );
        for &(m, n, b) in &variants {
            let cells: Vec<String> = xs
                .iter()
                .map(|&x| {
                    fmt_summary(&summary(
                        &recs,
                        |r| {
                            r.files == set
                                && (r.x_mb - x as f64).abs() < 1e-9
                                && r.send.mode == m
                                && r.send.n == n
                                && r.send.batch_split == b
                        },
                        response,
                    ))
                })
                .collect();
            let _ = writeln!(body, "| {m} {b} N={n} | {} |", cells.join(" | "));
        }
    }
    body.push_str("\n(In the figures, secure-only variants are drawn in the 'peer' style to tell them from the sieve variants; no thesis numbers are overlaid because the seeds give the batch results only as shapes.)\n\n### Why the shape differs\n\nThe batch algorithms only decide which channel carries which bytes. With both ends on two cores and channels that cost nothing to open, the differences between BFS, BES and BSS are small; BFS is the one that can leave a channel idle (a whole document per channel) and shows it on UFS, where one document is much larger than the others.\n");
    Ok(body)
}
