//! Marking records with the proportion P: whole fields, or whole records, never parts of words.
//!
//! Each record comes with its *candidate* spans, the values a real policy would classify (a
//! name, an account number, a note). The marker classifies candidates, in order, while that
//! brings the classified bytes nearer P of all bytes so far (error diffusion: what one record
//! over- or undershoots, the next ones make up); when P asks for more than a record's candidates
//! hold, it classifies the whole record. So P is met to within about one record over the file,
//! for any P from 0 to 1, and classified parts are always whole values.
//!
//! The output is exactly `size` content bytes: the last record is cut there (a value cut with
//! it stays classified up to the cut). Classified spans that touch are one range (one pair of
//! marks).

use std::io::{self, Write};
use std::ops::Range;

/// One generated record: its bytes and the spans within them that may be classified, in order
/// and disjoint.
#[derive(Debug, Default)]
pub(crate) struct Record {
    pub(crate) bytes: Vec<u8>,
    pub(crate) spans: Vec<Range<usize>>,
    /// A record that may never be classified whole (a CSV header).
    pub(crate) plain_only: bool,
}

impl Record {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
        self.plain_only = false;
    }

    /// Append `s` as plain text.
    pub(crate) fn text(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
    }

    /// Append what `f` writes as a candidate span.
    pub(crate) fn value(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        f(&mut self.bytes);
        if self.bytes.len() > start {
            self.spans.push(start..self.bytes.len());
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    /// Content bytes (marks excluded).
    pub content_len: u64,
    /// Classified content bytes.
    pub classified_len: u64,
    /// Classified ranges (touching spans merged).
    pub components: u64,
    /// File bytes, marks included.
    pub file_len: u64,
}

/// Writes records with marks (or without, reporting ranges) until `size` content bytes.
pub(crate) struct Marker<'w, W: Write, F: FnMut(Range<u64>)> {
    out: &'w mut W,
    marked: bool,
    range: F,
    p: f64,
    size: u64,
    written: Written,
    /// Start of the classified range still open (its end mark not yet written).
    open: Option<u64>,
}

const START: &[u8] = b"<$S>";
const END: &[u8] = b"<$E>";

impl<'w, W: Write, F: FnMut(Range<u64>)> Marker<'w, W, F> {
    pub(crate) fn new(out: &'w mut W, marked: bool, p: f64, size: u64, range: F) -> Self {
        Marker {
            out,
            marked,
            range,
            p: p.clamp(0.0, 1.0),
            size,
            written: Written::default(),
            open: None,
        }
    }

    /// Content bytes still to write.
    pub(crate) fn remaining(&self) -> u64 {
        self.size - self.written.content_len
    }

    /// Write one record (cut to what remains).
    pub(crate) fn record(&mut self, rec: &Record) -> io::Result<()> {
        let n = (rec.bytes.len() as u64).min(self.remaining()) as usize;
        if n == 0 {
            return Ok(());
        }
        let bytes = &rec.bytes[..n];
        let want = self.p * (self.written.content_len + n as u64) as f64
            - self.written.classified_len as f64;
        let mut chosen: Vec<Range<usize>> = Vec::new();
        let mut sum = 0usize;
        for s in &rec.spans {
            let s = s.start.min(n)..s.end.min(n);
            if s.is_empty() {
                continue;
            }
            let with = (sum + s.len()) as f64 - want;
            if with.abs() < (want - sum as f64).abs() {
                sum += s.len();
                chosen.push(s);
            }
        }
        if !rec.plain_only && (n as f64 - want).abs() < (want - sum as f64).abs() {
            chosen = vec![0..n];
        }
        let mut at = 0;
        for s in chosen {
            self.plain(&bytes[at..s.start])?;
            self.secret(&bytes[s.clone()])?;
            at = s.end;
        }
        self.plain(&bytes[at..])
    }

    fn plain(&mut self, b: &[u8]) -> io::Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        self.close()?;
        self.put(b)?;
        self.written.content_len += b.len() as u64;
        Ok(())
    }

    fn secret(&mut self, b: &[u8]) -> io::Result<()> {
        if b.is_empty() {
            return Ok(());
        }
        if self.open.is_none() {
            self.open = Some(self.written.content_len);
            if self.marked {
                self.put(START)?;
            }
        }
        self.put(b)?;
        self.written.content_len += b.len() as u64;
        self.written.classified_len += b.len() as u64;
        Ok(())
    }

    fn close(&mut self) -> io::Result<()> {
        if let Some(start) = self.open.take() {
            if self.marked {
                self.put(END)?;
            }
            (self.range)(start..self.written.content_len);
            self.written.components += 1;
        }
        Ok(())
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.written.file_len += b.len() as u64;
        self.out.write_all(b)
    }

    /// Close the last range; what was written.
    pub(crate) fn finish(mut self) -> io::Result<Written> {
        self.close()?;
        Ok(self.written)
    }
}
