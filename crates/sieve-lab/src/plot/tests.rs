//! Rendering whole figures: PNG and SVG written, every label present, odd data survived.

use std::path::{Path, PathBuf};

use super::text::{pieces, wrap};
use super::*;

fn s(label: &str, style: Style, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        style,
        points,
        err: None,
    }
}

/// Ours, the thesis's and a peer's series on a categorical axis, with error bars and a gap.
fn example() -> Figure {
    let ours_err = vec![
        (11.0, 14.0),
        (20.0, 26.0),
        (35.0, 41.0),
        (50.0, 58.0),
        (61.0, 70.0),
    ];
    Figure {
        title: "F5.3 – response time by split algorithm (loopback, 10 MB, P = 0.5)".into(),
        x_label: "split algorithm".into(),
        y_label: "response time (ms)".into(),
        series: vec![
            Series {
                err: Some(ours_err),
                ..s(
                    "ours: sieve, AES-128-GCM",
                    Style::Ours,
                    vec![
                        (0.0, 12.5),
                        (1.0, 23.0),
                        (2.0, 38.0),
                        (3.0, 54.0),
                        (4.0, 66.0),
                    ],
                )
            },
            s(
                "ours: secure-only, AES-128-GCM",
                Style::Ours,
                vec![
                    (0.0, 30.0),
                    (1.0, f64::NAN),
                    (2.0, 52.0),
                    (3.0, 71.0),
                    (4.0, 80.0),
                ],
            ),
            Series {
                err: Some(vec![(40.0, 48.0), (70.0, 85.0), (90.0, 104.0)]),
                ..s(
                    "thesis: sieve, 3DES-EDE-CBC-SHA (2011 laptop)",
                    Style::Thesis,
                    vec![
                        (0.0, 44.0),
                        (1.0, 77.0),
                        (2.0, 97.0),
                        (3.0, 120.0),
                        (4.0, 140.0),
                    ],
                )
            },
            s(
                "thesis: secure-only",
                Style::Thesis,
                vec![(0.0, 90.0), (2.0, 150.0), (4.0, 171.0)],
            ),
            s(
                "peer: socat + OpenSSL TLS",
                Style::Peer,
                vec![
                    (0.0, 25.0),
                    (1.0, 29.0),
                    (2.0, 47.0),
                    (3.0, 63.0),
                    (4.0, 75.0),
                ],
            ),
            s("peer: scp (not installed)", Style::Peer, vec![]),
        ],
        log_y: false,
        x_categories: Some(vec![
            "fixed 4 KiB blocks".into(),
            "content-defined (Rabin)".into(),
            "per line".into(),
            "per field (CSV)".into(),
            "whole file".into(),
        ]),
    }
}

/// Plots are checked by eye too: with `SIEVE_LAB_PLOT_EXAMPLES=DIR` the tests copy
/// what they drew into DIR.
fn keep_for_viewing(stem: &Path) {
    if let Some(dir) = std::env::var_os("SIEVE_LAB_PLOT_EXAMPLES") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        for ext in ["png", "svg"] {
            let from = with_ext(stem, ext);
            let to = dir.join(from.file_name().unwrap());
            std::fs::copy(&from, to).unwrap();
        }
    }
}

fn check_outputs(stem: &Path, fig: &Figure) {
    let png = std::fs::read(with_ext(stem, "png")).unwrap();
    assert!(png.len() > 10_000, "PNG only {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(with_ext(stem, "svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
    assert!(svg.len() > 2_000);
    assert!(svg.contains(&fig.x_label), "x label missing from SVG");
    assert!(svg.contains(&fig.y_label), "y label missing from SVG");
    for s in &fig.series {
        // Legend text may be wrapped; every unbreakable piece must be there.
        for (piece, _) in pieces(&s.label) {
            let piece = piece.replace('&', "&amp;");
            assert!(
                svg.contains(&piece),
                "legend text {piece:?} missing from SVG"
            );
        }
    }
}

#[test]
fn renders_ours_thesis_peers_with_error_bars_on_categories() {
    let dir = tempfile::tempdir().unwrap();
    let fig = example();
    let stem = dir.path().join("nested").join("F5.3");
    render(&fig, &stem).unwrap();
    check_outputs(&stem, &fig);
    let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
    assert!(svg.contains("(Rabin)"), "category label missing");
    keep_for_viewing(&stem);
}

#[test]
fn renders_log_axis_single_points_empty_and_non_finite() {
    let dir = tempfile::tempdir().unwrap();
    let fig = Figure {
        title: "CPU seconds per GB vs P".into(),
        x_label: "P (share of bytes encrypted)".into(),
        y_label: "CPU time (s/GB)".into(),
        series: vec![
            s(
                "ours",
                Style::Ours,
                vec![
                    (0.0, 0.0),
                    (0.1, 0.05),
                    (0.5, 0.4),
                    (0.9, 0.7),
                    (1.0, f64::INFINITY),
                ],
            ),
            s("thesis", Style::Thesis, vec![(0.5, 30.0)]),
            Series {
                err: Some(vec![(-1.0, 2.0)]),
                ..s("iperf3", Style::Peer, vec![(0.5, 1.5)])
            },
            s("empty", Style::Ours, vec![]),
            s(
                "all NaN",
                Style::Thesis,
                vec![(f64::NAN, 1.0), (1.0, f64::NAN)],
            ),
        ],
        log_y: true,
        x_categories: None,
    };
    let stem = dir.path().join("log");
    render(&fig, &stem).unwrap();
    check_outputs(&stem, &fig);
    keep_for_viewing(&stem);

    // Nothing at all to draw, and a single point on a linear axis.
    for (name, series) in [
        ("none", vec![]),
        (
            "single",
            vec![s("one point", Style::Ours, vec![(3.0, 7.0)])],
        ),
        (
            "zero",
            vec![s("zeros", Style::Peer, vec![(0.0, 0.0), (0.0, 0.0)])],
        ),
    ] {
        let fig = Figure {
            title: String::new(),
            x_label: "N (files)".into(),
            y_label: "throughput (MB/s)".into(),
            series,
            log_y: false,
            x_categories: None,
        };
        let stem = dir.path().join(name);
        render(&fig, &stem).unwrap();
        check_outputs(&stem, &fig);
        keep_for_viewing(&stem);
    }
}

/// Many categories, many series, long labels and large numbers: still no overlapping text.
#[test]
fn renders_crowded_figure() {
    let dir = tempfile::tempdir().unwrap();
    let cats: Vec<String> = [
        "F5.1",
        "F5.2",
        "F5.3-5.4",
        "F5.5-5.6",
        "F5.7",
        "F5.8-5.9",
        "F5.10-5.11",
        "F5.12/T5.2",
        "F5.13",
        "F5.14-5.16",
        "TB.1-3",
        "T5.3/F5.17-5.18",
        "ICPE-F7",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    let series = (0..9)
        .map(|k| {
            let style = [Style::Ours, Style::Thesis, Style::Peer][k % 3];
            let points = (0..cats.len())
                .map(|i| (i as f64, 1.0e6 * (1.0 + k as f64) * (1.0 + 0.3 * i as f64)))
                .collect();
            s(
                &format!("series {k}: a rather long legend label that has to wrap somewhere"),
                style,
                points,
            )
        })
        .collect();
    let fig = Figure {
        title: "A very long title that goes on and on to check that it shrinks instead of \
                running off both edges of the image"
            .into(),
        x_label: "experiment".into(),
        y_label: "bytes encrypted per second (B/s)".into(),
        series,
        log_y: false,
        x_categories: Some(cats),
    };
    let stem = dir.path().join("crowded");
    render(&fig, &stem).unwrap();
    check_outputs(&stem, &fig);
    keep_for_viewing(&stem);
}

#[test]
fn names_and_wrapping() {
    assert_eq!(
        with_ext(Path::new("results/F5.1/fig"), "png"),
        PathBuf::from("results/F5.1/fig.png")
    );
    assert_eq!(
        with_ext(Path::new("F5.12"), "svg"),
        PathBuf::from("F5.12.svg")
    );
    let lines = wrap("content-defined chunking (Rabin)", 90, 15.0, false);
    assert!(lines.len() >= 2, "{lines:?}");
    assert_eq!(wrap("F5.10-5.11", 30, 15.0, false), ["F5.10-", "5.11"]);
    assert_eq!(wrap("a -b c/", 1000, 15.0, false), ["a -b c/"]);
    assert_eq!(
        wrap("T5.3/F5.17-5.18", 60, 15.0, false),
        ["T5.3/", "F5.17-", "5.18"]
    );
    assert_eq!(wrap("", 90, 15.0, false), vec![String::new()]);
}

/// Without a font the SVG is still written and the error names the package to install. Runs
/// the check in a child process because the font registry is per process.
#[test]
fn without_font_svg_is_written_and_error_says_what_to_install() {
    if let Some(dir) = std::env::var_os("SIEVE_LAB_PLOT_NO_FONT_CHILD") {
        let stem = PathBuf::from(dir).join("nofont");
        let err = render(&example(), &stem).unwrap_err().to_string();
        assert!(err.contains("apt-get install fonts-dejavu-core"), "{err}");
        assert!(with_ext(&stem, "svg").is_file());
        assert!(!with_ext(&stem, "png").exists());
        let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
        assert!(svg.contains("response time (ms)"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "plot::tests::without_font_svg_is_written_and_error_says_what_to_install",
            "--nocapture",
        ])
        .env("SIEVE_LAB_PLOT_NO_FONT_CHILD", dir.path())
        .env("SIEVE_LAB_FONT", dir.path().join("missing.ttf"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "child ran no test: {text}");
    assert!(dir.path().join("nofont.svg").is_file());
}
