//! The structural detectors: CSV/TSV columns and JSON/NDJSON fields.
//!
//! Where a cell or a value sits depends on everything before it (quotes, nesting), so these
//! passes are state machines fed the document's bytes in order, one batch at a time, with
//! bounded state: the header's column choices, and a stack of keys for JSON nested at most
//! [`json::MAX_DEPTH`] deep. They run beside the content scan (see [`crate::engine`]).

pub mod csv;
pub mod json;

use crate::policy::{Format, Policy};
use crate::scan::Hit;

/// The structure pass chosen for a document.
pub enum Structure {
    None,
    Csv(csv::CsvPass),
    Json(json::JsonPass),
}

impl Structure {
    pub fn new(policy: &Policy, format: Format) -> Structure {
        if !policy.has_structural(format) {
            return Structure::None;
        }
        match format {
            Format::Csv => Structure::Csv(csv::CsvPass::new(policy, None)),
            Format::Tsv => Structure::Csv(csv::CsvPass::new(policy, Some(b'\t'))),
            Format::Json => Structure::Json(json::JsonPass::new(policy)),
            Format::Text | Format::Auto => Structure::None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Structure::None)
    }

    /// The next bytes of the document, which start at offset `base`.
    pub fn feed(&mut self, bytes: &[u8], base: u64, out: &mut Vec<Hit>) {
        match self {
            Structure::None => {}
            Structure::Csv(c) => c.feed(bytes, base, out),
            Structure::Json(j) => j.feed(bytes, base, out),
        }
    }

    /// End of the document.
    pub fn finish(&mut self, out: &mut Vec<Hit>) {
        match self {
            Structure::None => {}
            Structure::Csv(c) => c.finish(out),
            Structure::Json(j) => j.finish(out),
        }
    }
}
