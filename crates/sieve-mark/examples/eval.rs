//! The default policy (or another) against seeded labelled documents: recall per planted kind
//! (an item counts only if it lies wholly inside one classified range) and over-marking (the
//! share of bytes that are no planted item but were classified).
//!
//! ```sh
//! cargo run -p sieve-mark --release --example eval -- [--seed N] [--size BYTES] \
//!     [--policy FILE|default] [--write DIR]
//! ```
//!
//! `--write DIR` also writes the documents and their labels (`labels.json`: file, kind, start,
//! end) so that another tool can be scored on the same set (`bench/presidio_eval.py`).

use std::path::PathBuf;
use std::time::Instant;

use sieve_mark::labelled::{Format, Gen, Kind, Score};
use sieve_mark::{Policy, ScanOptions};

fn main() {
    let mut seed = 2026u64;
    let mut size = 2usize << 20;
    let mut policy = "default".to_string();
    let mut write: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--seed" => {
                seed = val()
                    .parse()
                    .unwrap_or_else(|_| fail("--seed takes a number"))
            }
            "--size" => size = val().parse().unwrap_or_else(|_| fail("--size takes bytes")),
            "--policy" => policy = val(),
            "--write" => write = Some(PathBuf::from(val())),
            _ => fail(&format!("unknown argument {a}")),
        }
    }
    let policy = Policy::load(&policy).unwrap_or_else(|e| fail(&e.to_string()));
    let mut gen = Gen::new(seed);
    let mut total = Score::default();
    let mut labels = Vec::new();
    println!(
        "policy {}, seed {seed}, {} per format, {} threads\n",
        policy.name,
        human(size as u64),
        ScanOptions::default().threads
    );
    println!(
        "{:<8} {:>9} {:>10} {:>12} {:>10}",
        "format", "bytes", "items", "over-marked", "MB/s"
    );
    for f in Format::ALL {
        let doc = gen.document(f, size);
        let opts = ScanOptions {
            name: Some(f.file_name().to_string()),
            ..ScanOptions::default()
        };
        let t = Instant::now();
        let m = policy.scan_slice(&doc.bytes, &opts);
        let secs = t.elapsed().as_secs_f64();
        let ranges = m.ranges();
        let mut s = Score::default();
        s.add(&doc, &ranges);
        total.add(&doc, &ranges);
        println!(
            "{:<8} {:>9} {:>10} {:>11.2}% {:>10.0}",
            format!("{f:?}").to_lowercase(),
            human(doc.bytes.len() as u64),
            doc.items.len(),
            100.0 * s.over_marking(),
            doc.bytes.len() as f64 / secs / 1e6
        );
        if let Some(dir) = &write {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(&e.to_string()));
            std::fs::write(dir.join(f.file_name()), &doc.bytes)
                .unwrap_or_else(|e| fail(&e.to_string()));
            for it in &doc.items {
                labels.push(serde_json::json!({
                    "file": f.file_name(),
                    "kind": it.kind.name(),
                    "start": it.range.start,
                    "end": it.range.end,
                }));
            }
        }
    }
    println!(
        "\n{:<12} {:>8} {:>8} {:>9}  goal (validated kinds: recall >= 99.5 %)",
        "kind", "planted", "found", "recall"
    );
    let mut all_met = true;
    for k in Kind::ALL {
        let Some(&(n, found)) = total.per_kind.get(&k) else {
            continue;
        };
        let recall = 100.0 * found as f64 / n.max(1) as f64;
        let goal = if k.validated() {
            let met = recall >= 99.5;
            all_met &= met;
            if met {
                "met"
            } else {
                "NOT MET"
            }
        } else {
            "reported"
        };
        println!(
            "{:<12} {:>8} {:>8} {:>8.2}%  {goal}",
            k.name(),
            n,
            found,
            recall
        );
    }
    let om = 100.0 * total.over_marking();
    println!(
        "\nover-marking: {om:.2} % of {} unplanted bytes classified (goal <= 15 %: {})",
        human(total.unplanted),
        if om <= 15.0 { "met" } else { "NOT MET" }
    );
    println!(
        "every validated kind at >= 99.5 %: {}",
        if all_met { "yes" } else { "NO" }
    );
    if let Some(dir) = &write {
        let v = serde_json::Value::Array(labels);
        std::fs::write(dir.join("labels.json"), v.to_string())
            .unwrap_or_else(|e| fail(&e.to_string()));
        eprintln!("wrote the documents and labels.json to {}", dir.display());
    }
}

fn human(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KiB", n as f64 / 1024.0)
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}
