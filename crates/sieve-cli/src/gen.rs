//! `sieve gen`: test documents with classified parts marked: the thesis's x-P files (§5.1.2), or
//! realistic prose, CSV, JSON lines and logs with the same proportion P classified.

use std::path::PathBuf;

use anyhow::{bail, Result};
use sieve_core::corpus::{self, DocKind};
use sieve_core::gen::parse_size;
use sieve_core::ranges::ClassifiedRanges;
use sieve_core::ranges_file;

use crate::output::Output;

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
    /// Output file; `-` is standard output. A device or a pipe is written through, a link to a
    /// file is refused; a file of that name is replaced whole once the document is written.
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
    // Both outputs are checked before the document is made.
    let out = Output::new(&args.output).mode(None).sync(false);
    let ranges_out = args
        .ranges_out
        .as_ref()
        .map(|rf| Output::new(rf).mode(None).sync(false));
    out.check()?;
    if let Some(r) = &ranges_out {
        r.check()?;
    }
    let mut ranges = Vec::new();
    let st = out.write_with(|mut w| {
        corpus::write(
            args.kind,
            args.size,
            args.proportion,
            args.seed,
            args.ranges_out.is_none(),
            &mut w,
            |r| ranges.push(r),
        )
    })?;
    if let Some(r) = &ranges_out {
        let cr = ClassifiedRanges::new(ranges, st.content_len)?;
        r.write(ranges_file::to_json(&cr).as_bytes())?;
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
