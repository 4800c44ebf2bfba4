//! `sieve gen`: test documents with classified parts marked: the thesis's x-P files (§5.1.2), or
//! realistic prose, CSV, JSON lines and logs with the same proportion P classified.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sieve_core::corpus::{self, DocKind};
use sieve_core::gen::{parse_size, WRITE_CHUNK};
use sieve_core::ranges::ClassifiedRanges;
use sieve_core::ranges_file;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Content size (marks excluded): 1MB, 10MB, 1GiB, 4096...
    #[arg(long, value_parser = parse_size)]
    pub size: u64,
    /// Proportion of classified content, 0 to 1 (the thesis's P).
    #[arg(long, short = 'p')]
    pub proportion: f64,
    /// What to write: `letters`, the thesis's x-P files (random letters with five classified
    /// components per MB); or realistic documents whose classified parts are whole values (names,
    /// accounts, amounts, notes) or whole records: `text` (prose), `csv` (customer
    /// transactions), `json` (JSON lines of orders), `log` (a web service's log).
    #[arg(long, default_value = "letters")]
    pub kind: DocKind,
    /// Seed of the generated content: the same seed gives the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// Write no marks; write the classified ranges to this JSON file instead (for `send --ranges`).
    #[arg(long)]
    pub ranges_out: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<()> {
    if !(0.0..=1.0).contains(&args.proportion) {
        bail!(
            "--proportion must be between 0 and 1, got {}",
            args.proportion
        );
    }
    let f = File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let mut w = BufWriter::with_capacity(WRITE_CHUNK, f);
    let mut ranges = Vec::new();
    let st = corpus::write(
        args.kind,
        args.size,
        args.proportion,
        args.seed,
        args.ranges_out.is_none(),
        &mut w,
        |r| ranges.push(r),
    )
    .with_context(|| format!("cannot write {}", args.output.display()))?;
    std::io::Write::flush(&mut w)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    if let Some(rf) = &args.ranges_out {
        let cr = ClassifiedRanges::new(ranges, st.content_len)?;
        std::fs::write(rf, ranges_file::to_json(&cr))
            .with_context(|| format!("cannot write {}", rf.display()))?;
    }
    eprintln!(
        "wrote {} ({}): {} content bytes, {} classified ({:.3}), {} components, {} bytes with marks",
        args.output.display(),
        args.kind,
        st.content_len,
        st.classified_len,
        if st.content_len > 0 {
            st.classified_len as f64 / st.content_len as f64
        } else {
            0.0
        },
        st.components,
        st.file_len
    );
    Ok(())
}
