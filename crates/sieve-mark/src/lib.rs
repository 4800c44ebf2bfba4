//! # sieve-mark
//!
//! Automatic marking for the security sieve (the thesis's future work, §6.2): a **policy** says
//! what in a document is classified (card numbers, IBANs, keys, CSV columns, JSON fields, ...),
//! and the **engine** runs it over a document of any size and returns the classified byte ranges
//! (sorted, merged, end-exclusive), the one input the sieve needs (`sieve_core::ranges`).
//!
//! | piece | file |
//! |---|---|
//! | policies in TOML, the built-in `default` | [`policy`], `policies/default.toml` |
//! | field names (CSV headers, JSON keys, log keys) | [`names`] |
//! | allow patterns, with the literal every match holds searched first | [`allow`] |
//! | validated detectors (Luhn, mod 97, SSN rules, phone plans, ...) | [`detect`] |
//! | byte classes of 64-byte blocks (AVX-512 or AVX2 where the CPU has it) | [`classify`] |
//! | the content scan: triggers, prefilters, one window at a time | [`scan`] |
//! | keywords before dates, found through a block filter | [`keywords`] |
//! | how much around a finding is classified | [`granularity`] |
//! | CSV/TSV columns and JSON/NDJSON fields (streaming, stateful) | [`structure`] |
//! | batches over threads, mapped or read input, merging | [`engine`] |
//! | a marked copy (`<$S>` … `<$E>`, literal marks escaped) | [`marked`] |
//! | masked previews for `--explain` | [`preview`] |
//! | a policy shared by a sender's documents, counting findings | [`run`] |
//! | seeded labelled documents for the evaluation and the benchmark | [`labelled`] |
//!
//! ## Why the scan is exact under any chunking
//!
//! Every finding is decided by the bytes within a bounded distance of the position that
//! triggers it (a digit that starts a run of digits, an `@`, a `:` or `=`, a literal prefix), and
//! a finding belongs to the chunk that holds its trigger. Each chunk is scanned with
//! [`engine::MARGIN`] bytes of context on both sides, more than any finding or expansion reaches,
//! so cutting a document anywhere gives the same ranges as scanning it whole (a property test
//! checks it). That is what lets the engine scan chunks on all cores and stream a file of any size
//! through a bounded buffer. The two stateful passes (CSV rows, JSON nesting) run in order, one
//! batch at a time, beside the chunks.

pub mod allow;
pub mod classify;
pub mod detect;
pub mod engine;
pub mod granularity;
pub mod keywords;
pub mod labelled;
pub mod marked;
pub mod names;
pub mod path;
#[cfg(test)]
mod pieces;
pub mod policy;
pub mod preview;
pub mod run;
pub mod scan;
pub mod structure;

pub use engine::{Marking, ScanOptions, Span};
pub use policy::{Format, Granularity, Policy, PolicyError};
pub use run::PolicyRun;
