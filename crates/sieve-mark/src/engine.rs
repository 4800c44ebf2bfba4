//! The engine: a policy run over a whole document, on every core, in bounded memory.
//!
//! A document is taken in **batches** (a few MiB per thread). Each batch is cut into chunks of
//! [`CHUNK`] bytes that threads take as they become free ([`crate::scan`] on each, with
//! [`MARGIN`] bytes of context either side), while one thread feeds the batch to the structure
//! pass (CSV or JSON), which must see the bytes in order. Findings are merged into sorted,
//! disjoint spans as each batch ends; adjacent and overlapping findings become one span that
//! remembers which detectors found it.
//!
//! Input is either a slice (a mapped file: nothing is copied, and the caller may drop pages
//! behind the scan) or a reader, streamed through a buffer of one batch plus two margins. Both
//! give the same spans. Memory is that buffer plus the spans themselves.

use std::io::Read;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::policy::{Format, Policy};
use crate::scan::{Hit, Scanner, Window};
use crate::structure::Structure;

/// Bytes one thread scans at a time.
pub const CHUNK: usize = 1 << 20;

pub use crate::granularity::MARGIN;

/// Chunks per thread in a batch.
const CHUNKS_PER_THREAD: usize = 4;

/// How to run a policy.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Threads to scan with (at least 1).
    pub threads: usize,
    /// The document's name, to tell its format by its extension when the policy says `auto`.
    pub name: Option<String>,
    /// Bytes per chunk (tests use small ones to cut documents in many places).
    pub chunk: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            name: None,
            chunk: CHUNK,
        }
    }
}

/// A classified range and the detectors (bits, in policy order) that found something in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub end: u64,
    pub detectors: u64,
}

/// What a policy found in a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Marking {
    /// Document length in bytes.
    pub len: u64,
    /// Sorted, disjoint, non-adjacent, non-empty.
    pub spans: Vec<Span>,
    /// Findings per detector, in policy order (before merging).
    pub counts: Vec<u64>,
    /// Detector names, in policy order.
    pub names: Vec<String>,
    /// The format the structural detectors read the document as.
    pub format: Format,
}

impl Marking {
    /// The classified ranges, as a ranges file holds them.
    pub fn ranges(&self) -> Vec<Range<u64>> {
        self.spans.iter().map(|s| s.start..s.end).collect()
    }

    pub fn classified_bytes(&self) -> u64 {
        self.spans.iter().map(|s| s.end - s.start).sum()
    }

    /// Detector names with their counts, in policy order.
    pub fn counts_by_name(&self) -> Vec<(String, u64)> {
        self.names
            .iter()
            .cloned()
            .zip(self.counts.iter().copied())
            .collect()
    }

    /// The names of the detectors in a span's set.
    pub fn names_of(&self, detectors: u64) -> Vec<&str> {
        self.names
            .iter()
            .enumerate()
            .filter(|(i, _)| detectors & (1 << i) != 0)
            .map(|(_, n)| n.as_str())
            .collect()
    }
}

/// Merges findings into spans as batches end.
struct Merger {
    spans: Vec<Span>,
    counts: Vec<u64>,
}

impl Merger {
    /// Merge `hits` (left empty, its allocation kept for the next batch).
    fn add(&mut self, hits: &mut Vec<Hit>) {
        // A batch's findings come in a few ascending runs (a chunk's findings come out in order,
        // its literal searches' put among its main loop's; the chunks follow each other, in
        // order on one thread): a stable sort finds the runs and merges them in linear time.
        hits.sort_by_key(|h| (h.start, h.end));
        for h in hits.drain(..) {
            self.counts[h.det as usize] += 1;
            if h.end <= h.start {
                continue;
            }
            let mut span = Span {
                start: h.start,
                end: h.end,
                detectors: 1 << h.det,
            };
            // Most findings come after every span so far, or overlap the last one from
            // within it (a finding inside a PEM block or a classified line): spans are
            // disjoint and sorted, so such a finding touches no other.
            match self.spans.last_mut() {
                None => {
                    self.spans.push(span);
                    continue;
                }
                Some(l) if l.end < span.start => {
                    self.spans.push(span);
                    continue;
                }
                Some(l) if l.start <= span.start => {
                    l.end = l.end.max(span.end);
                    l.detectors |= span.detectors;
                    continue;
                }
                Some(_) => {}
            }
            // Spans that overlap or touch the finding: from the first ending at or after its
            // start, through the last starting at or before its end.
            let a = self.spans.partition_point(|s| s.end < span.start);
            let mut b = a;
            while b < self.spans.len() && self.spans[b].start <= span.end {
                let s = self.spans[b];
                span.start = span.start.min(s.start);
                span.end = span.end.max(s.end);
                span.detectors |= s.detectors;
                b += 1;
            }
            self.spans.splice(a..b, std::iter::once(span));
        }
    }
}

impl Policy {
    /// The format the structural detectors will read a document as.
    pub fn format_for(&self, name: Option<&str>, head: &[u8]) -> Format {
        if self.format != Format::Auto {
            return self.format;
        }
        let ext = name
            .and_then(|n| n.rsplit_once('.'))
            .map(|(_, e)| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("csv") => return Format::Csv,
            Some("tsv" | "tab") => return Format::Tsv,
            Some("json" | "ndjson" | "jsonl") => return Format::Json,
            Some("log" | "txt" | "md") => return Format::Text,
            _ => {}
        }
        sniff(head)
    }

    /// Run the policy over a document held in memory or mapped.
    pub fn scan_slice(&self, doc: &[u8], opts: &ScanOptions) -> Marking {
        self.scan_slice_releasing(doc, opts, &|_| {})
    }

    /// [`Policy::scan_slice`], calling `done` with ranges of `doc` the scan will not read
    /// again, in order, so that a caller with a mapped file can drop those pages.
    pub fn scan_slice_releasing(
        &self,
        doc: &[u8],
        opts: &ScanOptions,
        done: &(dyn Fn(Range<usize>) + Sync),
    ) -> Marking {
        let format = self.format_for(opts.name.as_deref(), &doc[..doc.len().min(64 << 10)]);
        let scanner = Scanner::new(self);
        let mut structure = Structure::new(self, format);
        let mut merger = self.merger();
        let batch = batch_len(opts);
        let mut lo = 0;
        let mut released = 0;
        let mut hits = Vec::new();
        while lo < doc.len() {
            let hi = (lo + batch).min(doc.len());
            scan_batch(&scanner, doc, 0, lo..hi, &mut structure, opts, &mut hits);
            merger.add(&mut hits);
            lo = hi;
            let safe = lo.saturating_sub(MARGIN);
            if safe > released {
                done(released..safe);
                released = safe;
            }
        }
        structure.finish(&mut hits);
        merger.add(&mut hits);
        if doc.len() > released {
            done(released..doc.len());
        }
        self.marking(doc.len() as u64, merger, format)
    }

    /// Run the policy over a document read from `r`, through a buffer of bounded size.
    pub fn scan_reader<R: Read>(&self, mut r: R, opts: &ScanOptions) -> std::io::Result<Marking> {
        let scanner = Scanner::new(self);
        let mut merger = self.merger();
        let batch = batch_len(opts);
        let mut buf: Vec<u8> = Vec::with_capacity(batch + 2 * MARGIN);
        let mut buf_base = 0u64;
        let mut eof = false;
        let mut own_lo = 0u64;
        let mut structure: Option<(Structure, Format)> = None;
        let mut hits = Vec::new();
        loop {
            let want_end = own_lo + (batch + MARGIN) as u64;
            while !eof && buf_base + (buf.len() as u64) < want_end {
                let have = buf.len();
                let need = (want_end - buf_base) as usize;
                buf.resize(need, 0);
                match r.read(&mut buf[have..]) {
                    Ok(0) => {
                        buf.truncate(have);
                        eof = true;
                    }
                    Ok(n) => buf.truncate(have + n),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(have),
                    Err(e) => return Err(e),
                }
            }
            let avail_end = buf_base + buf.len() as u64;
            let (structure, format) = structure.get_or_insert_with(|| {
                let head = &buf[..buf.len().min(64 << 10)];
                let f = self.format_for(opts.name.as_deref(), head);
                (Structure::new(self, f), f)
            });
            let _ = format;
            let own_hi = (own_lo + batch as u64).min(avail_end);
            if own_hi <= own_lo {
                break;
            }
            let own = (own_lo - buf_base) as usize..(own_hi - buf_base) as usize;
            scan_batch(&scanner, &buf, buf_base, own, structure, opts, &mut hits);
            merger.add(&mut hits);
            own_lo = own_hi;
            let keep_from = own_lo.saturating_sub(MARGIN as u64).max(buf_base);
            buf.drain(..(keep_from - buf_base) as usize);
            buf_base = keep_from;
        }
        let (mut structure, format) = structure
            .unwrap_or_else(|| (Structure::None, self.format_for(opts.name.as_deref(), b"")));
        structure.finish(&mut hits);
        merger.add(&mut hits);
        Ok(self.marking(own_lo, merger, format))
    }

    fn merger(&self) -> Merger {
        Merger {
            spans: Vec::new(),
            counts: vec![0; self.detectors.len()],
        }
    }

    fn marking(&self, len: u64, m: Merger, format: Format) -> Marking {
        Marking {
            len,
            spans: m.spans,
            counts: m.counts,
            names: self.detectors.iter().map(|d| d.name.clone()).collect(),
            format,
        }
    }
}

fn batch_len(opts: &ScanOptions) -> usize {
    opts.chunk.max(1) * opts.threads.max(1) * CHUNKS_PER_THREAD
}

/// Scan `own` (positions of `window`, whose first byte is document offset `base`): its chunks
/// on up to `opts.threads` threads, and the structure pass over it in order. The findings are
/// appended to `found`, which the caller reuses from batch to batch (growing a fresh vector
/// for every batch costs copies and page faults on a dense document).
fn scan_batch(
    scanner: &Scanner<'_>,
    window: &[u8],
    base: u64,
    own: Range<usize>,
    structure: &mut Structure,
    opts: &ScanOptions,
    found: &mut Vec<Hit>,
) {
    let chunk = opts.chunk.max(1);
    let chunks: Vec<Range<usize>> = (own.start..own.end)
        .step_by(chunk)
        .map(|a| a..(a + chunk).min(own.end))
        .collect();
    let with_structure = !structure.is_none();
    let jobs = chunks.len() + usize::from(with_structure);
    let next = AtomicUsize::new(0);
    let structure = Mutex::new(structure);
    let work = |local: &mut Vec<Hit>| loop {
        let j = next.fetch_add(1, Ordering::Relaxed);
        if j >= jobs {
            break;
        }
        if with_structure && j == 0 {
            if let Ok(mut st) = structure.lock() {
                st.feed(&window[own.clone()], base + own.start as u64, local);
            }
            continue;
        }
        let c = &chunks[j - usize::from(with_structure)];
        let lo = c.start.saturating_sub(MARGIN);
        let hi = (c.end + MARGIN).min(window.len());
        let w = Window {
            bytes: &window[lo..hi],
            base: base + lo as u64,
            own: c.start - lo..c.end - lo,
        };
        scanner.scan(&w, local);
    };
    let threads = opts.threads.max(1).min(jobs);
    if threads <= 1 {
        work(found);
        return;
    }
    let shared = Mutex::new(found);
    let work_on_own = || {
        let mut local = Vec::new();
        work(&mut local);
        if let Ok(mut f) = shared.lock() {
            f.append(&mut local);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work_on_own);
        }
        work_on_own();
    });
}

/// The format of a document with no telling name, from its first bytes: JSON if it starts with
/// `{` or `[`, CSV or TSV if its first two lines hold the same number (at least one) of the same
/// delimiter outside quotes, else text.
pub fn sniff(head: &[u8]) -> Format {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let first = head.iter().position(|b| !b.is_ascii_whitespace());
    if let Some(i) = first {
        if head[i] == b'{' || head[i] == b'[' {
            return Format::Json;
        }
    }
    let mut lines = head.split(|&b| b == b'\n');
    let (Some(l1), Some(l2)) = (lines.next(), lines.next()) else {
        return Format::Text;
    };
    let count = |l: &[u8], d: u8| {
        let mut q = false;
        l.iter()
            .filter(|&&b| {
                if b == b'"' {
                    q = !q;
                }
                b == d && !q
            })
            .count()
    };
    for (d, f) in [
        (b'\t', Format::Tsv),
        (b',', Format::Csv),
        (b';', Format::Csv),
    ] {
        let n = count(l1, d);
        if n >= 1 && n == count(l2, d) && !l1.contains(&b'@') {
            return f;
        }
    }
    Format::Text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"  {\"a\":1}"), Format::Json);
        assert_eq!(sniff(b"id,name\n1,\"a,b\"\n"), Format::Csv);
        assert_eq!(sniff(b"id\tname\n1\tb\n"), Format::Tsv);
        assert_eq!(sniff(b"Hello, world.\nHow are you?\n"), Format::Text);
        let p = Policy::default_policy();
        assert_eq!(p.format_for(Some("x.NDJSON"), b""), Format::Json);
        assert_eq!(p.format_for(Some("x.log"), b"a,b\n1,2\n"), Format::Text);
    }

    #[test]
    fn merging_joins_overlapping_and_touching_findings() {
        let mut m = Merger {
            spans: Vec::new(),
            counts: vec![0; 3],
        };
        let h = |start, end, det| Hit { start, end, det };
        let mut hits = vec![h(10, 20, 0), h(30, 40, 1), h(50, 60, 2)];
        m.add(&mut hits);
        assert!(hits.is_empty());
        hits.extend([h(20, 25, 1), h(0, 5, 2), h(35, 55, 0), h(70, 70, 1)]);
        m.add(&mut hits);
        let got: Vec<(u64, u64, u64)> = m
            .spans
            .iter()
            .map(|s| (s.start, s.end, s.detectors))
            .collect();
        assert_eq!(got, vec![(0, 5, 4), (10, 25, 3), (30, 60, 7)]);
        assert_eq!(m.counts, vec![2, 3, 2]);
    }
}
