//! `sieve mark`: run a marking policy over a document.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sieve_core::marks::MarkConfig;
use sieve_core::ranges::ClassifiedRanges;
use sieve_core::ranges_file;
use sieve_mark::{marked, preview, Marking, Policy, ScanOptions};

use crate::output::Output;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The marking policy: a TOML file, or `default` (built in).
    #[arg(long, default_value = "default", value_name = "FILE|default")]
    pub policy: String,
    /// Write the classified ranges to this JSON file ({"ranges": [[start, end], ...]}, byte
    /// offsets, end exclusive, sorted, merged): what `sieve send --ranges` reads. `-` is
    /// standard output; a device or a pipe is written through, a link to a file is refused.
    #[arg(short = 'o', long, value_name = "RANGES.json")]
    pub output: Option<PathBuf>,
    /// Write a marked copy of the document here: each classified range between the start and
    /// end marks, and every mark string already in the document escaped, so that the copy
    /// parses back to the same content and ranges (`sieve send` reads it as it is). `-` is
    /// standard output; a device or a pipe is written through, a link to a file is refused.
    #[arg(long, value_name = "OUT")]
    pub marked: Option<PathBuf>,
    /// Print each classified range: its offsets, the detectors that found it and a masked
    /// preview (never the whole value).
    #[arg(long)]
    pub explain: bool,
    /// Print a built-in policy (`default`) as TOML and exit: a starting point for your own.
    #[arg(long, value_name = "NAME", exclusive = true)]
    pub print_policy: Option<String>,
    /// Print a JSON summary (bytes, classified bytes, P, ranges, findings per detector) on
    /// stdout.
    #[arg(long)]
    pub json: bool,
    /// Threads to scan with (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Start mark for --marked.
    #[arg(long, default_value = "<$S>")]
    pub start_mark: String,
    /// End mark for --marked.
    #[arg(long, default_value = "<$E>")]
    pub end_mark: String,
    /// Escape for --marked.
    #[arg(long, default_value = "\\")]
    pub escape: String,
    /// The document.
    #[arg(required_unless_present = "print_policy")]
    pub file: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<bool> {
    if let Some(name) = &args.print_policy {
        let src = Policy::builtin(name).with_context(|| {
            format!("no built-in policy is called {name}; the one there is is default")
        })?;
        print!("{src}");
        return Ok(true);
    }
    let Some(file) = &args.file else {
        bail!("name the document to mark");
    };
    if args.output.is_none() && args.marked.is_none() && !args.explain && !args.json {
        bail!("say what to produce: -o RANGES.json, --marked OUT, --explain or --json");
    }
    // Outputs that would be refused are refused before the scan, not after it.
    for out in args.output.iter().chain(&args.marked) {
        Output::new(out).check()?;
    }
    let policy = Policy::load(&args.policy)
        .with_context(|| format!("the marking policy {} cannot be used", args.policy))?;
    let opts = ScanOptions {
        threads: args
            .threads
            .unwrap_or(ScanOptions::default().threads)
            .max(1),
        name: file.file_name().and_then(|n| n.to_str()).map(String::from),
        ..ScanOptions::default()
    };
    let f = File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let marking = policy
        .scan_reader(&f, &opts)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let ranges = ClassifiedRanges::new(marking.ranges(), marking.len)
        .context("internal error: the policy's ranges are not sorted and disjoint")?;
    if let Some(out) = &args.output {
        Output::new(out).write(ranges_file::to_json(&ranges).as_bytes())?;
    }
    if let Some(out) = &args.marked {
        let cfg = MarkConfig {
            start: args.start_mark.as_bytes().to_vec(),
            end: args.end_mark.as_bytes().to_vec(),
            escape: args.escape.as_bytes().to_vec(),
            strip: true,
        };
        cfg.validate().context("the marks for --marked")?;
        write_marked_copy(&f, file, &cfg, &marking, out)?;
    }
    if args.explain {
        explain(&f, &marking)?;
    }
    summary(file, &policy, &marking, args.json)?;
    Ok(true)
}

/// Write the marked copy of `file` (open as `f`, scanned into `m`) to `out`, by the rule of
/// [`crate::output`].
fn write_marked_copy(
    f: &File,
    file: &Path,
    cfg: &MarkConfig,
    m: &Marking,
    out: &Path,
) -> Result<()> {
    let len = f
        .metadata()
        .with_context(|| format!("cannot stat {}", file.display()))?
        .len();
    if len != m.len {
        bail!("{} changed while it was being marked", file.display());
    }
    // SAFETY: the mapping is read-only and nothing in this process writes the file. Another
    // process truncating it while the copy is written would raise SIGBUS, as with any program
    // that maps its input; the length was checked against the scan just above.
    #[allow(unsafe_code)]
    let map = if len > 0 {
        Some(
            unsafe { memmap2::Mmap::map(f) }
                .with_context(|| format!("cannot map {}", file.display()))?,
        )
    } else {
        None
    };
    let content: &[u8] = map.as_deref().unwrap_or(&[]);
    Output::new(out).write_with(|mut w| marked::write_marked(cfg, content, &m.ranges(), &mut w))
}

fn explain(f: &File, m: &Marking) -> Result<()> {
    let stdout = std::io::stdout();
    let mut o = stdout.lock();
    for s in &m.spans {
        let n = ((s.end - s.start) as usize).min(256);
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, s.start)
            .context("cannot read the document for --explain")?;
        writeln!(
            o,
            "{}..{}\t{} B\t{}\t{}",
            s.start,
            s.end,
            s.end - s.start,
            m.names_of(s.detectors).join(","),
            preview::masked(&buf)
        )?;
    }
    Ok(())
}

fn summary(file: &Path, policy: &Policy, m: &Marking, json: bool) -> Result<()> {
    let classified = m.classified_bytes();
    let p = if m.len == 0 {
        0.0
    } else {
        classified as f64 / m.len as f64
    };
    let counts: serde_json::Map<String, serde_json::Value> = m
        .counts_by_name()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    if json {
        let v = serde_json::json!({
            "file": file.display().to_string(),
            "policy": policy.name,
            "format": m.format.to_string(),
            "bytes": m.len,
            "classified_bytes": classified,
            "p": p,
            "ranges": m.spans.len(),
            "detections": counts,
        });
        println!("{v}");
    } else {
        let found: Vec<String> = m
            .counts_by_name()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        eprintln!(
            "{}: {} ranges, {} of {} bytes classified (P = {:.4}), read as {}; found: {}",
            file.display(),
            m.spans.len(),
            classified,
            m.len,
            p,
            m.format,
            if found.is_empty() {
                "nothing".to_string()
            } else {
                found.join(", ")
            }
        );
    }
    Ok(())
}
