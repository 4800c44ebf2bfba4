//! Realistic seeded documents with x-P marking: prose, CSV, JSON lines and logs.
//!
//! The thesis's x-P files (§5.1.2, [`crate::gen`]) are random letters, which zstd shrinks only to
//! about 0.6 of their size; real documents shrink far more, and how much decides what compressing
//! the cleartext is worth. These generators make documents that look like what people send (a
//! customer table, an order feed, a service log, a report) with the same proportion P of
//! classified bytes, marked inline, so that every experiment can run on them as on x-P files.
//!
//! What is classified is what a real policy would classify: whole values (a name, an account, an
//! amount, a note), or whole records when P asks for more than the values hold; see
//! [`marking`]. The content is exactly `size` bytes, the same for a seed on every machine.

use std::fmt;
use std::io::{self, Write};
use std::ops::Range;
use std::str::FromStr;

use crate::gen::{write_xp_with, XpSpec};

mod csv;
mod json;
mod log;
pub mod marking;
mod rng;
mod text;
mod values;
mod words;

pub use marking::Written;

/// What kind of document to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DocKind {
    /// The thesis's x-P letters (§5.1.2): five classified components per MB.
    #[default]
    Letters,
    /// Prose: paragraphs, some sentences naming people, amounts and accounts.
    Text,
    /// A CSV table of customer transactions.
    Csv,
    /// JSON lines: orders with nested customers.
    Json,
    /// A web service's access and application log.
    Log,
}

impl DocKind {
    /// Every kind.
    pub const ALL: [DocKind; 5] = [
        DocKind::Letters,
        DocKind::Text,
        DocKind::Csv,
        DocKind::Json,
        DocKind::Log,
    ];

    /// The name `--kind` takes.
    pub fn name(self) -> &'static str {
        match self {
            DocKind::Letters => "letters",
            DocKind::Text => "text",
            DocKind::Csv => "csv",
            DocKind::Json => "json",
            DocKind::Log => "log",
        }
    }
}

impl fmt::Display for DocKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DocKind {
    type Err = String;

    fn from_str(s: &str) -> Result<DocKind, String> {
        DocKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown document kind '{s}': use letters, text, csv, json or log")
            })
    }
}

/// The record generator of a kind.
enum Source {
    Text(text::Text),
    Csv(csv::Csv),
    Json(json::Json),
    Log(log::Log),
}

/// Write `size` content bytes of `kind` with classified proportion `proportion`, marked inline
/// (`marked`), or unmarked with every classified range passed to `range` (content coordinates,
/// which are then the file's), for a ranges file.
///
/// Writes in small pieces: wrap `out` in a `BufWriter` of [`crate::gen::WRITE_CHUNK`] bytes, as
/// `sieve gen` does, so the kernel is handed 4 MiB at a time.
pub fn write(
    kind: DocKind,
    size: u64,
    proportion: f64,
    seed: u64,
    marked: bool,
    out: &mut impl Write,
    range: impl FnMut(Range<u64>),
) -> io::Result<Written> {
    if kind == DocKind::Letters {
        let spec = XpSpec {
            size,
            proportion,
            seed,
        };
        let st = write_xp_with(spec, marked, out, range)?;
        return Ok(Written {
            content_len: st.content_len,
            classified_len: st.classified_len,
            components: st.components,
            file_len: st.file_len,
        });
    }
    let mut rng = rng::Rng::new(seed, kind as u64);
    let mut m = marking::Marker::new(out, marked, proportion, size, range);
    let mut rec = marking::Record::default();
    let mut source = match kind {
        DocKind::Letters | DocKind::Text => Source::Text(text::Text::new()),
        DocKind::Csv => Source::Csv(csv::Csv::new()),
        DocKind::Json => Source::Json(json::Json::new()),
        DocKind::Log => Source::Log(log::Log::new()),
    };
    while m.remaining() > 0 {
        rec.clear();
        match &mut source {
            Source::Text(g) => g.record(&mut rng, &mut rec),
            Source::Csv(g) => g.record(&mut rng, &mut rec),
            Source::Json(g) => g.record(&mut rng, &mut rec),
            Source::Log(g) => g.record(&mut rng, &mut rec),
        }
        m.record(&rec)?;
    }
    m.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::{parse_all, MarkConfig};

    fn generate(kind: DocKind, size: u64, p: f64, seed: u64) -> (Vec<u8>, Written) {
        let mut buf = Vec::new();
        let w = write(kind, size, p, seed, true, &mut buf, |_| {}).unwrap();
        (buf, w)
    }

    /// The marks parser reads every kind, the content is exactly the size asked for, and P is
    /// met within 0.01 (on 256 KiB; error diffusion keeps it within about one record).
    #[test]
    fn every_kind_parses_and_meets_p() {
        for kind in DocKind::ALL {
            for p in [0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0] {
                let size = 256 << 10;
                let (buf, w) = generate(kind, size, p, 3);
                assert_eq!(w.file_len, buf.len() as u64);
                let parsed = parse_all(&MarkConfig::default(), &buf)
                    .unwrap_or_else(|e| panic!("{kind} at P = {p}: {e}"));
                assert_eq!(parsed.content_len, size, "{kind} at P = {p}");
                let classified: u64 = parsed.ranges.iter().map(|r| r.end - r.start).sum();
                assert_eq!(classified, w.classified_len);
                assert_eq!(parsed.ranges.len() as u64, w.components);
                let actual = classified as f64 / size as f64;
                assert!((actual - p).abs() <= 0.01, "{kind} at P = {p}: {actual}");
                if p == 0.0 {
                    assert!(parsed.ranges.is_empty());
                }
            }
        }
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        for kind in DocKind::ALL {
            let (a, _) = generate(kind, 100_000, 0.2, 9);
            let (b, _) = generate(kind, 100_000, 0.2, 9);
            assert_eq!(a, b, "{kind}");
            if kind != DocKind::Letters {
                let (c, _) = generate(kind, 100_000, 0.2, 10);
                assert_ne!(a, c, "{kind}");
            }
        }
    }

    /// Unmarked output with the ranges reported is the marked output's content and ranges.
    #[test]
    fn ranges_out_agrees_with_marks() {
        for kind in DocKind::ALL {
            let (marked, _) = generate(kind, 300_001, 0.3, 5);
            let parsed = parse_all(&MarkConfig::default(), &marked).unwrap();
            let mut plain = Vec::new();
            let mut ranges = Vec::new();
            let w = write(kind, 300_001, 0.3, 5, false, &mut plain, |r| ranges.push(r)).unwrap();
            assert_eq!(w.file_len, 300_001);
            assert_eq!(ranges, parsed.ranges, "{kind}");
            let content: Vec<u8> = parsed
                .extents
                .iter()
                .flat_map(|e| {
                    marked[e.raw as usize..(e.raw + e.len) as usize]
                        .iter()
                        .copied()
                })
                .collect();
            assert_eq!(content, plain, "{kind}");
        }
    }

    /// Classified parts are whole values: in CSV every range starts after a separator (or a
    /// quote, for notes) and ends before one.
    #[test]
    fn csv_classifies_whole_fields() {
        let mut plain = Vec::new();
        let mut ranges = Vec::new();
        write(DocKind::Csv, 200_000, 0.2, 1, false, &mut plain, |r| {
            ranges.push(r)
        })
        .unwrap();
        let header_end = plain.iter().position(|&b| b == b'\n').unwrap() as u64;
        for r in &ranges {
            assert!(r.start > header_end, "the header is never classified");
            let before = plain[r.start as usize - 1];
            assert!(
                matches!(before, b',' | b'"' | b'\n'),
                "{:?} after {:?}",
                r,
                before as char
            );
            if (r.end as usize) < plain.len() {
                let after = plain[r.end as usize];
                assert!(
                    matches!(after, b',' | b'"' | b'\n'),
                    "{:?} before {:?}",
                    r,
                    after as char
                );
            }
        }
    }

    #[test]
    fn kinds_parse_by_name() {
        for kind in DocKind::ALL {
            assert_eq!(kind.name().parse(), Ok(kind));
        }
        assert_eq!("JSON".parse(), Ok(DocKind::Json));
        assert!("xml"
            .parse::<DocKind>()
            .unwrap_err()
            .contains("letters, text, csv, json or log"));
        // No generated byte is a mark or escape byte, so nothing needs escaping.
        for kind in DocKind::ALL {
            let mut plain = Vec::new();
            write(kind, 200_000, 0.5, 2, false, &mut plain, |_| {}).unwrap();
            assert!(!plain.contains(&b'<') && !plain.contains(&b'\\'), "{kind}");
        }
    }
}
