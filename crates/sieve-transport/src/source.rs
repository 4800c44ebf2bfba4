//! The sender's documents: sieved once, then read piece by piece straight from the file.
//!
//! Preparing a document is the thesis's `sieve()`: one streaming pass over the file finds the
//! marks (or a ranges file supplies the ranges) and yields the layout plus the runs of the file
//! that make up the content. Nothing is held in memory but those runs; every piece a channel
//! sends is taken from the file when it is needed.
//!
//! ## Why the file is memory-mapped
//!
//! Profiling the sender on a 1 GiB document showed half its CPU time in the kernel copying page
//! cache into user buffers: once for the marks pass and once more for every piece sent. A
//! read-only mapping removes both copies: the marks parser scans the page cache in place, and
//! the plain channels hand slices of the mapping straight to the socket (the MAC reads the same
//! slices). A frame spans as many of the file's content runs as it needs: frames cut where the
//! runs end would show an observer of the plain channels where the classified parts sat.
//! `--no-mmap` (or an empty or unmappable file) falls back to positional reads into a buffer,
//! with the same frames.
//!
//! Every document's file is watched from the moment it is opened (`crate::change`): a
//! document whose file changes before its last byte is sent is cancelled, not vouched for.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use memmap2::{Advice, Mmap, UncheckedAdvice};
use sieve_core::cost::DocShape;
use sieve_core::marks::{
    Collector, Counter, Event, Extent, MarkConfig, MarkCounts, MarkError, MarkParser, ParsedMarks,
};
use sieve_core::marks_parallel::{count_parallel_releasing, parse_parallel_releasing};
use sieve_core::sieve::Placement;
use sieve_core::{ranges_file, Kind, Layout};

use crate::change::{Leases, Watched};

/// Mapped pages are released from a multiple of this (the largest page-cache folio; see
/// `release`).
const RELEASE_ALIGN: usize = 2 << 20;

/// Smallest part of a mapped document the marks pass gives a thread of its own.
const PARALLEL_MARKS_PART: usize = 8 << 20;

/// Smallest part of a dense document ([`DENSE_VALUES`]) the counting pass gives a thread of its
/// own: there the pass costs per value, a few hundred microseconds per MiB, against the tens of
/// microseconds a thread takes to start, and counts are joined for nothing.
const PARALLEL_COUNT_PART: usize = 1 << 20;

/// Bytes at the start of a marked document that `--mode auto` reads first, to tell a dense
/// document ([`Source::prepare_counting`]).
const PROBE_BYTES: usize = 256 << 10;

/// Marked values in the first [`PROBE_BYTES`] from which a document is dense: one every 4 KiB
/// on average. Below it (an x-P file has five per megabyte) the marks pass costs what reading
/// the bytes costs, whichever mode follows; above it (logs, CSV exports, marked prose: a value
/// every hundred bytes or so) its cost is per value, and collecting every run costs twice what
/// checking and counting them does (`cargo bench -p sieve-core --bench sieve -- marks-pass`).
const DENSE_VALUES: u64 = 64;

/// Most bytes of mapped documents, over all the documents of one send, whose pages the pass that
/// finds the classified ranges leaves in the page tables ([`KeepMapped`]).
const KEEP_MAPPED_BYTES: u64 = 32 << 20;

/// What is left of [`KEEP_MAPPED_BYTES`] for the documents of one send still to be prepared.
///
/// The marks scan (or a policy's pass) is the first to touch a mapped document, and faulting its
/// pages in is most of what it costs on a small one: about 90 µs for 1 MB from a fresh mapping
/// against 15 µs once mapped (AMD EPYC). Releasing them after the scan, as a large document must
/// so that resident memory stays small, made the sending fault them all in again. The documents
/// that fit in this budget therefore keep their pages until the channels that send them release
/// them (`sender::channel::Release`); the others are released as scanned, so a batch of many
/// small documents, like one large one, stays within its bound.
#[derive(Debug)]
pub(crate) struct KeepMapped(u64);

impl KeepMapped {
    /// The budget of one send.
    pub(crate) fn new() -> KeepMapped {
        KeepMapped(KEEP_MAPPED_BYTES)
    }

    /// No budget: every document is released as it is scanned.
    #[cfg(test)]
    pub(crate) fn none() -> KeepMapped {
        KeepMapped(0)
    }

    /// Whether a mapped document of `len` bytes keeps its pages after the scan, taking its
    /// share of the budget if so.
    fn take(&mut self, len: u64) -> bool {
        match self.0.checked_sub(len) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => false,
        }
    }
}

/// How the classified ranges of a document are found.
#[derive(Debug, Clone)]
pub enum Classify {
    /// Everything is classified and the file is sent as it is (secure-only mode).
    All,
    /// Inline marks.
    Marks(MarkConfig),
    /// A JSON ranges file over the raw bytes (of one document).
    RangesFile(PathBuf),
    /// A marking policy, run over each document as it is prepared (before anything is sent);
    /// its findings are counted across the documents.
    Policy(std::sync::Arc<sieve_mark::PolicyRun>),
    /// A JSON ranges file beside each document: `FILE.ranges.json` (see [`ranges_beside`]).
    RangesBeside,
}

/// The ranges file that [`Classify::RangesBeside`] reads for `path`: `path` with
/// `.ranges.json` appended to its name.
pub fn ranges_beside(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".ranges.json");
    path.with_file_name(name)
}

/// One frame's payload, as [`Source::frame`] cuts it.
pub struct Frame<'a> {
    /// The payload.
    pub bytes: &'a [u8],
    /// The bytes of the file the frame was taken from, when it was taken from the mapping.
    pub raw: Option<std::ops::Range<u64>>,
}

/// One contiguous slice of a mapped file: where it starts in the file, and its bytes.
pub(crate) type Slice<'a> = (u64, &'a [u8]);

/// A document ready to send.
#[derive(Debug)]
pub struct Source {
    /// The file on the sender's disk.
    pub path: PathBuf,
    /// The name the receiver will store it under: a base name, or a relative path beneath the
    /// receiver's folder (`sieve send -r`).
    pub name: String,
    /// The document's classified and plain runs, in content order (marks excluded).
    pub layout: Layout,
    /// Mark strings the receiver puts back around classified segments, if any.
    pub marks: Option<(Vec<u8>, Vec<u8>)>,
    /// The open file, watched for changes.
    watch: Arc<Watched>,
    /// The whole file, mapped read-only, when mapping is enabled and possible.
    map: Option<Mmap>,
    /// Content as runs of the file, with the content offset where each run starts.
    extents: Vec<Extent>,
    content_starts: Vec<u64>,
    /// Stream offset → content offset.
    streams: Placement,
    /// Length of the document the receiver writes (content and restored marks).
    output_len: u64,
    /// Marks checked and counted, runs not collected: the document is ready to go secure-only,
    /// and [`Source::sieve_pending`] collects its runs if the sieve is chosen after all.
    pending: Option<Pending>,
}

/// What a document prepared by counting ([`Source::prepare_counting`]) keeps for the sieve.
#[derive(Debug)]
struct Pending {
    counts: MarkCounts,
    cfg: MarkConfig,
    /// Whether its pages stay mapped after a pass ([`KeepMapped`]).
    kept: bool,
}

impl Source {
    /// Open and sieve `path`, to be stored as `name`, mapping it into memory if `mmap` (see the
    /// module documentation). The file is watched for changes from here on, with a read lease
    /// through `leases` where the system grants one. A mapped document the pass over its bytes
    /// touches keeps its pages mapped for the sending if it fits in what is left of `keep`.
    pub(crate) fn prepare(
        path: &Path,
        name: &str,
        how: &Classify,
        mmap: bool,
        leases: Option<&Leases>,
        keep: &mut KeepMapped,
    ) -> Result<Source> {
        Source::open_and_sieve(path, name, how, (mmap, leases, keep), None)
    }

    /// [`Source::prepare`] for `--mode auto`, which may send the document secure-only: a
    /// mapped document with inline marks (kept, not stripped) whose first [`PROBE_BYTES`] hold
    /// [`DENSE_VALUES`] marked values or more is only checked and counted, not collected, when
    /// `secure_only_likely` says the estimate of its shape from those bytes will go secure-only.
    /// Its marks are checked all the same: a badly marked file fails here, whatever is chosen.
    /// [`Source::sieve_pending`] then collects its runs if the sieve is chosen after all.
    pub(crate) fn prepare_counting(
        path: &Path,
        name: &str,
        how: &Classify,
        (mmap, leases, keep): (bool, Option<&Leases>, &mut KeepMapped),
        secure_only_likely: &dyn Fn(&DocShape) -> bool,
    ) -> Result<Source> {
        Source::open_and_sieve(
            path,
            name,
            how,
            (mmap, leases, keep),
            Some(secure_only_likely),
        )
    }

    fn open_and_sieve(
        path: &Path,
        name: &str,
        how: &Classify,
        (mmap, leases, keep): (bool, Option<&Leases>, &mut KeepMapped),
        count_if: Option<&dyn Fn(&DocShape) -> bool>,
    ) -> Result<Source> {
        let watch = Watched::open(path, leases)?;
        let len = watch.len();
        let map = if mmap && len > 0 {
            map_file(watch.file())
        } else {
            None
        };
        // Only a pass over the bytes (marks, a policy) touches the pages before the sending.
        let touches = matches!(how, Classify::Policy(_) | Classify::Marks(_));
        let kept = map.is_some() && touches && keep.take(len);
        let scanned = |m: &Mmap, r: std::ops::Range<usize>| {
            if !kept {
                release(m, r);
            }
        };
        let whole = || vec![Extent { raw: 0, len }];
        let ranges = |rf: &Path, beside: bool| -> Result<Layout> {
            let json = std::fs::read(rf).with_context(|| {
                if beside {
                    format!(
                        "cannot read the ranges file {} (--ranges-beside reads FILE.ranges.json \
                         next to each FILE)",
                        rf.display()
                    )
                } else {
                    format!("cannot read the ranges file {}", rf.display())
                }
            })?;
            let ranges =
                ranges_file::parse(&json, len).with_context(|| format!("in {}", rf.display()))?;
            Ok(Layout::from_ranges(len, ranges.as_slice()))
        };
        let mut pending = None;
        let (layout, extents, marks) = match how {
            Classify::All => (Layout::whole(Kind::Secure, len), whole(), None),
            Classify::RangesFile(rf) => (ranges(rf, false)?, whole(), None),
            Classify::RangesBeside => (ranges(&ranges_beside(path), true)?, whole(), None),
            Classify::Policy(run) => {
                let ranges = match &map {
                    Some(m) => run.classify_slice(m, name, &|r| scanned(m, r)),
                    None => run
                        .classify_reader(watch.file(), name)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                };
                (Layout::from_ranges(len, &ranges), whole(), None)
            }
            Classify::Marks(cfg) => {
                let refuse = |e| badly_marked(e, path, map.as_deref(), watch.file());
                let counting = match (&map, count_if) {
                    (Some(m), Some(likely)) if !cfg.strip => {
                        probe(cfg, m).is_some_and(|estimate| likely(&estimate))
                    }
                    _ => false,
                };
                match &map {
                    Some(m) if counting => {
                        let counts = count_parallel_releasing(
                            cfg,
                            m,
                            crate::cpu::cores(),
                            PARALLEL_COUNT_PART,
                            &|r| scanned(m, r),
                        )
                        .map_err(refuse)?;
                        pending = Some(Pending {
                            counts,
                            cfg: cfg.clone(),
                            kept,
                        });
                        // Until the sieve is chosen, the file as it is, marks and all: what
                        // secure-only sends.
                        (Layout::whole(Kind::Secure, len), whole(), None)
                    }
                    _ => {
                        let parsed = match &map {
                            Some(m) => collect_mapped(cfg, m, kept),
                            None => parse_by_reading(watch.file(), cfg, path)?,
                        };
                        let parsed = parsed.map_err(refuse)?;
                        let marks = (!cfg.strip).then(|| (cfg.start.clone(), cfg.end.clone()));
                        (parsed.layout(), parsed.extents, marks)
                    }
                }
            }
        };
        let runs = Runs::new(path, &layout, &extents, marks.as_ref())?;
        Ok(Source {
            path: path.to_path_buf(),
            name: name.to_string(),
            layout,
            marks,
            watch,
            map,
            extents,
            content_starts: runs.content_starts,
            streams: runs.streams,
            output_len: runs.output_len,
            pending,
        })
    }

    /// The document as the sieve would send it, for `--mode auto`'s choice: its content and
    /// classified bytes, its segments, and whether the sieve has still to scan it (a document
    /// only counted, [`Source::prepare_counting`]). The share of the cleartext on the wire is
    /// left at 1 (the caller knows it).
    pub(crate) fn sieve_shape(&self) -> DocShape {
        let (bytes, classified, segments, scanned) = match &self.pending {
            Some(p) => (
                p.counts.content_len,
                p.counts.classified,
                p.counts.segments(),
                true,
            ),
            None => (
                self.content_len(),
                self.stream_len(Kind::Secure),
                self.layout.lens.len() as u64,
                false,
            ),
        };
        DocShape {
            bytes,
            classified,
            scanned,
            segments,
            cleartext_wire: 1.0,
        }
    }

    /// Whether the document was only counted ([`Source::prepare_counting`]): its runs are still
    /// to be collected if the sieve is chosen.
    pub(crate) fn counted_only(&self) -> bool {
        self.pending.is_some()
    }

    /// Collect the runs of a document that was only counted ([`Source::prepare_counting`]),
    /// the sieve being chosen after all: the marks pass again, as [`Source::prepare`] makes it.
    /// Nothing to do for any other document.
    pub(crate) fn sieve_pending(&mut self) -> Result<()> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        let (Some(m), false) = (&self.map, p.cfg.strip) else {
            bail!("internal error: only a mapped document with kept marks is counted first");
        };
        let parsed = collect_mapped(&p.cfg, m, p.kept)
            .map_err(|e| badly_marked(e, &self.path, Some(m), self.watch.file()))?;
        let layout = parsed.layout();
        let marks = Some((p.cfg.start.clone(), p.cfg.end.clone()));
        let runs = Runs::new(&self.path, &layout, &parsed.extents, marks.as_ref())?;
        self.layout = layout;
        self.extents = parsed.extents;
        self.marks = marks;
        self.content_starts = runs.content_starts;
        self.streams = runs.streams;
        self.output_len = runs.output_len;
        Ok(())
    }

    /// Send this document secure-only after all (`--mode auto` chose it once the document was
    /// sieved): every byte over TLS, exactly as secure-only would have prepared it. With marks
    /// kept that is the file as it is, marks included ([`Classify::All`]); with marks stripped,
    /// or ranges from a file or a policy, the content as sieved, in one secure segment.
    pub(crate) fn make_secure_only(&mut self) {
        // A document only counted is in this state already.
        self.pending = None;
        if self.marks.is_some() {
            let len = self.watch.len();
            self.extents = vec![Extent { raw: 0, len }];
            self.content_starts = vec![0];
            self.layout = Layout::whole(Kind::Secure, len);
        }
        self.set_all_secure();
    }

    /// Treat the whole content as classified (secure-only mode): one secure segment, no marks.
    pub(crate) fn set_all_secure(&mut self) {
        // The layout's own sum: `make_secure_only` may have replaced it, and not the streams.
        let len = self.layout.content_len();
        self.layout = Layout::whole(Kind::Secure, len);
        self.marks = None;
        self.output_len = len;
        // One secure run, no marks: the stream is the content.
        self.streams = match Placement::new(&self.layout, None) {
            Ok(p) => p,
            Err(_) => unreachable!("a single segment's length is the content's, which fits"),
        };
    }

    /// Where each stream's bytes sit in the content (the layout's runs).
    pub fn streams(&self) -> &Placement {
        &self.streams
    }

    /// Bytes of the `kind` stream (all classified, or all plain, bytes): kept by the placement,
    /// where the layout would add up every segment again (226,838 of them in 32 MiB of marked
    /// prose, at every call).
    pub fn stream_len(&self, kind: Kind) -> u64 {
        self.streams.stream_len(kind)
    }

    /// Bytes of the layout's content, which the placement keeps, where summing the layout's
    /// segments again cost a pass over hundreds of thousands of them for a dense document, at
    /// every one of the four places that ask.
    pub fn content_len(&self) -> u64 {
        self.streams.content_len()
    }

    /// Length of the document the receiver writes.
    pub fn output_len(&self) -> u64 {
        self.output_len
    }

    /// The bytes of one frame: `max` bytes of the `kind` stream from `offset`.
    ///
    /// With a mapping this is a slice of it when those bytes are contiguous in the file, and a
    /// copy into `buf` when they span several runs (classified bytes, which TLS copies anyway).
    /// Without one, they are read into `buf`.
    pub fn frame<'a>(
        &'a self,
        kind: Kind,
        offset: u64,
        max: usize,
        buf: &'a mut [u8],
    ) -> Result<Frame<'a>> {
        if self.map.is_none() {
            let bytes = &mut buf[..max];
            self.read(kind, offset, bytes)?;
            return Ok(Frame { bytes, raw: None });
        }
        let slices = self.slices(kind, offset, max as u64)?;
        let raw = match (slices.first(), slices.last()) {
            (Some(&(a, _)), Some(&(b, l))) => Some(a..b + l.len() as u64),
            _ => None,
        };
        if let [(_, bytes)] = slices[..] {
            return Ok(Frame { bytes, raw });
        }
        let out = &mut buf[..max];
        let mut pos = 0;
        for (_, s) in slices {
            out[pos..pos + s.len()].copy_from_slice(s);
            pos += s.len();
        }
        Ok(Frame { bytes: out, raw })
    }

    /// The contiguous slices of the mapped file that hold `len` bytes of the `kind` stream from
    /// `offset`, in order. Several when the bytes span runs of the content (segments, or the
    /// two sides of an escape).
    pub fn slices(&self, kind: Kind, offset: u64, len: u64) -> Result<Vec<Slice<'_>>> {
        let map = self
            .map
            .as_ref()
            .context("internal error: slices of a document that is not mapped")?;
        let mut runs = Vec::new();
        self.streams
            .place(kind, offset, len, |content, _, n| runs.push((content, n)))?;
        let mut out = Vec::with_capacity(runs.len());
        // The runs come in content order: find the first one's extent by binary search and
        // walk forward from there (a dense document has thousands of runs per frame, and a
        // search for each was a sixth of the sender's time).
        let mut i = runs.first().map_or(0, |&(content, _)| self.run_of(content));
        for (mut content, mut n) in runs {
            while self
                .content_starts
                .get(i + 1)
                .is_some_and(|&next| next <= content)
            {
                i += 1;
            }
            while n > 0 {
                let e = self
                    .extents
                    .get(i)
                    .context("read past the end of the content")?;
                let within = content - self.content_starts[i];
                let take = n.min(e.len - within);
                let at = e.raw + within;
                let start = usize::try_from(at).context("offset beyond the address space")?;
                let bytes = map.get(start..start + take as usize).with_context(|| {
                    format!("{} is shorter than when it was sieved", self.path.display())
                })?;
                out.push((at, bytes));
                content += take;
                n -= take;
                if n > 0 {
                    // This extent is used up; the run goes on in the next.
                    i += 1;
                }
            }
        }
        Ok(out)
    }

    /// Whether the document is mapped (frames then cost no read and no copy).
    pub(crate) fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// Drop the mapped pages of the file's bytes `raw` from this process (`MADV_DONTNEED`; see
    /// the free function `release` below for why that is sound); a no-op without a mapping.
    pub fn release(&self, raw: std::ops::Range<u64>) {
        if let (Some(map), Ok(a), Ok(b)) = (
            &self.map,
            usize::try_from(raw.start),
            usize::try_from(raw.end),
        ) {
            release(map, a..b.min(map.len()));
        }
    }

    /// The open file (for `sendfile`).
    pub fn file(&self) -> &File {
        self.watch.file()
    }

    /// The watch on the file's changes (`crate::change`).
    pub fn watch(&self) -> &Watched {
        &self.watch
    }

    /// Whether the document has no classified byte although it has content (in sieve mode it
    /// would travel entirely in the clear).
    pub fn unclassified(&self) -> bool {
        let shape = self.sieve_shape();
        shape.bytes > 0 && shape.classified == 0
    }

    /// Read `buf.len()` bytes of the `kind` stream starting at `offset`.
    pub fn read(&self, kind: Kind, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut err = None;
        self.streams
            .place(kind, offset, buf.len() as u64, |content, within, len| {
                if err.is_none() {
                    if let Err(e) = self
                        .read_content(content, &mut buf[within as usize..(within + len) as usize])
                    {
                        err = Some(e);
                    }
                }
            })?;
        err.map_or(Ok(()), Err)
    }

    /// Index of the content run holding content offset `content`.
    fn run_of(&self, content: u64) -> usize {
        self.content_starts
            .partition_point(|&s| s <= content)
            .saturating_sub(1)
    }

    fn read_content(&self, mut content: u64, mut buf: &mut [u8]) -> Result<()> {
        let mut i = self.run_of(content);
        while !buf.is_empty() {
            let e = self
                .extents
                .get(i)
                .context("read past the end of the content")?;
            let within = content - self.content_starts[i];
            let n = ((e.len - within) as usize).min(buf.len());
            let (head, tail) = buf.split_at_mut(n);
            self.file()
                .read_exact_at(head, e.raw + within)
                .with_context(|| {
                    format!(
                        "cannot read {} (did it change while being sent?)",
                        self.path.display()
                    )
                })?;
            buf = tail;
            content += n as u64;
            i += 1;
        }
        Ok(())
    }
}

/// Line and column of byte `at` of a document, from its mapping or by reading it up to there.
fn line_col_of(map: Option<&[u8]>, file: &File, at: u64) -> Option<(u64, u64)> {
    if let Some(m) = map {
        return Some(sieve_core::marks::line_col(
            m.get(..usize::try_from(at).ok()?)?,
        ));
    }
    // Streamed a MiB at a time: the error may be deep in a large file.
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut last_nl, mut pos) = (0u64, None, 0u64);
    while pos < at {
        let n = usize::try_from(at - pos).map_or(buf.len(), |left| left.min(buf.len()));
        file.read_exact_at(&mut buf[..n], pos).ok()?;
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            last_nl = Some(pos + i as u64);
        }
        pos += n as u64;
    }
    Some((lines + 1, last_nl.map_or(at + 1, |nl| at - nl)))
}

/// What a layout's runs give the sending: where each content run starts, the placement of the
/// streams, and the length of the document the receiver writes.
struct Runs {
    content_starts: Vec<u64>,
    streams: Placement,
    output_len: u64,
}

impl Runs {
    fn new(
        path: &Path,
        layout: &Layout,
        extents: &[Extent],
        marks: Option<&(Vec<u8>, Vec<u8>)>,
    ) -> Result<Runs> {
        let mut content_starts = Vec::with_capacity(extents.len());
        let mut pos = 0;
        for e in extents {
            content_starts.push(pos);
            pos += e.len;
        }
        let streams = Placement::new(layout, None)
            .with_context(|| format!("{} cannot be described", path.display()))?;
        if pos != streams.content_len() {
            bail!("internal error: content runs ({pos} bytes) disagree with the layout");
        }
        let marks_len = marks.map(|(s, e)| (s.len() as u64, e.len() as u64));
        let output_len = streams
            .output_len_with(marks_len)
            .with_context(|| format!("{} cannot be described", path.display()))?;
        Ok(Runs {
            content_starts,
            streams,
            output_len,
        })
    }
}

/// The error of a badly marked file: where, as an editor shows it (path:line:column), then
/// the parser's own words with the byte offset.
fn badly_marked(e: MarkError, path: &Path, map: Option<&[u8]>, file: &File) -> anyhow::Error {
    let place = e
        .at()
        .and_then(|at| line_col_of(map, file, at))
        .map_or(String::new(), |(l, c)| format!(":{l}:{c}"));
    anyhow::Error::new(e).context(format!("{}{place}: not correctly marked", path.display()))
}

/// A dense document's shape, estimated from its first [`PROBE_BYTES`] (`None` if they hold
/// fewer than [`DENSE_VALUES`] marked values, pro rata for a shorter document, or are badly
/// marked: the whole pass then reports it). The estimate scales what those bytes hold to the
/// whole file; the choice itself is made later on the exact counts.
fn probe(cfg: &MarkConfig, bytes: &[u8]) -> Option<DocShape> {
    /// Probed at a time, to stop as soon as the document is known to be dense.
    const STEP: usize = 64 << 10;
    let mut parser = MarkParser::new(cfg.clone()).ok()?;
    let mut counter = Counter::default();
    let end = bytes.len().min(PROBE_BYTES);
    let want = (DENSE_VALUES * end as u64)
        .div_ceil(PROBE_BYTES as u64)
        .max(1);
    let mut at = 0;
    while at < end && counter.counts().ranges < want {
        let to = (at + STEP).min(end);
        parser
            .feed(&bytes[at..to], &mut |ev| counter.event(ev))
            .ok()?;
        at = to;
    }
    let c = counter.counts();
    if c.ranges < want {
        return None;
    }
    let scale = bytes.len() as f64 / parser.position().max(1) as f64;
    let classified = (c.classified as f64 * scale) as u64;
    Some(DocShape {
        bytes: bytes.len() as u64,
        classified: classified.min(bytes.len() as u64),
        scanned: true,
        segments: (2.0 * c.ranges as f64 * scale) as u64 + 1,
        cleartext_wire: 1.0,
    })
}

/// The marks pass that collects every run of a mapped document, on this machine's cores, as
/// the sieve sends by; its pages are released as they are scanned unless they are `kept`
/// ([`KeepMapped`]).
fn collect_mapped(
    cfg: &MarkConfig,
    m: &Mmap,
    kept: bool,
) -> std::result::Result<ParsedMarks, MarkError> {
    parse_parallel_releasing(cfg, m, crate::cpu::cores(), PARALLEL_MARKS_PART, &|r| {
        if !kept {
            release(m, r);
        }
    })
}

/// Parse the marks of `file` through a buffer, for files that are not mapped.
fn parse_by_reading(
    mut file: &File,
    cfg: &MarkConfig,
    path: &Path,
) -> Result<std::result::Result<ParsedMarks, MarkError>> {
    let mut parser = match MarkParser::new(cfg.clone()) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    let mut col = Collector::default();
    let mut sink = |ev: Event<'_>| col.event(ev);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        if let Err(e) = parser.feed(&buf[..n], &mut sink) {
            return Ok(Err(e));
        }
    }
    Ok(parser.finish(&mut sink).map(|()| col.finish()))
}

/// Drop the pages of `range` from this process's page tables once they have been used.
///
/// The page cache keeps them; the next access (if any) maps them again. Without this, the
/// sender's resident memory would grow to the size of the document while it is scanned and sent,
/// though it holds no private copy of it.
///
/// The range is widened back to a [`RELEASE_ALIGN`] boundary of the file. A page fault maps the
/// whole large folio (up to 2 MiB, naturally aligned in the file) of the page it touches, and a
/// freshly written file sits in the page cache in such folios: the first touch after a release
/// would map again the part of a straddling folio that lies before the range, and no later
/// release (which starts where this one ends) would drop it. Measured on a 1 GiB document just
/// written, sent with a ranges file: 116 MiB of file pages resident at the peak without the
/// widening, growing with the document, and releasing more often made it worse.
#[allow(unsafe_code)]
fn release(map: &Mmap, range: std::ops::Range<usize>) {
    if range.is_empty() {
        return;
    }
    let range = range.start & !(RELEASE_ALIGN - 1)..range.end;
    // SAFETY: `MADV_DONTNEED` is unchecked advice because on a private mapping it discards the
    // process's own modifications. This mapping is shared and read-only (`Mmap::map`), so there
    // are none: the next read of any byte of the range, by any thread, faults the same page back
    // in from the page cache and sees the same contents (the caveat of `map_file` about other
    // processes changing the file is unchanged). No reference is invalidated: the address range
    // stays mapped; only its page-table entries are dropped. Advice that fails changes nothing.
    let _ =
        unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, range.start, range.len()) };
}

/// Map `file` read-only, or `None` if the kernel refuses (the caller then reads instead).
#[allow(unsafe_code)]
fn map_file(file: &File) -> Option<Mmap> {
    // SAFETY: `Mmap::map` is unsafe because Rust assumes the bytes behind a `&[u8]` never change,
    // and another process may write or truncate the file while it is mapped. The mapping is
    // read-only and *shared* (`MAP_SHARED`, `PROT_READ`): it shows the page cache, so another
    // process's writes appear in it, and nothing in this process writes the file. What that
    // costs, and why it is still sound for the bytes we read:
    // - a concurrent write changes bytes we have not read yet. We only ever copy the bytes out
    //   (to a socket, a MAC, a buffer) and never rely on two reads agreeing, so the worst outcome
    //   is a mix of old and new bytes, as `read` would give; `crate::change` notices the change
    //   (before it happens, with a read lease) and the document is cancelled, not vouched for;
    // - a truncation makes the next access to a page past the new end raise SIGBUS. With a read
    //   lease the truncation waits until no frame is reading the file and the document is
    //   marked changed, so no access follows; without one (another user's file, a file already
    //   open for writing) it remains possible, which is why the sender's contract is that a
    //   document does not change while it is sent, as for every tool that maps its input (e.g.
    //   ripgrep). `--no-mmap` turns that SIGBUS into a read error; it does not make a changing
    //   file safe to send.
    let map = unsafe { Mmap::map(file) }.ok()?;
    // Advisory only: a failure changes nothing but read-ahead.
    let _ = map.advise(Advice::Sequential);
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_streams_through_marks_and_escapes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        std::fs::write(&p, b"ab<$S>cd<$E>e\\<$S>f<$S>gh<$E>").unwrap();
        let strip = MarkConfig {
            strip: true,
            ..MarkConfig::default()
        };
        let s = Source::prepare(
            &p,
            "doc.txt",
            &Classify::Marks(strip),
            false,
            None,
            &mut KeepMapped::new(),
        )
        .unwrap();
        let mut plain = vec![0; s.stream_len(Kind::Plain) as usize];
        s.read(Kind::Plain, 0, &mut plain).unwrap();
        assert_eq!(plain, b"abe<$S>f");
        let mut sec = vec![0; 3];
        s.read(Kind::Secure, 1, &mut sec).unwrap();
        assert_eq!(sec, b"dgh");
        assert!(s.marks.is_none());
        let s = Source::prepare(
            &p,
            "doc.txt",
            &Classify::Marks(MarkConfig::default()),
            false,
            None,
            &mut KeepMapped::new(),
        )
        .unwrap();
        assert_eq!(s.output_len(), 29);
        let mut plain = vec![0; s.stream_len(Kind::Plain) as usize];
        s.read(Kind::Plain, 0, &mut plain).unwrap();
        assert_eq!(plain, b"abe\\<$S>f");
    }

    /// A file of `parts`, each classified (marked) or not, whose texts stay literal: every
    /// escape and mark in them escaped. Returns its folder (kept while the file is used), its
    /// path and its contents.
    fn write_marked(parts: &[(bool, String)]) -> (tempfile::TempDir, PathBuf, String) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        // Consecutive cleartext parts are escaped as one text: "<" then "$E>" is a mark.
        let escape = |t: &str| t.replace('\\', "\\\\").replace("<$", "\\<$");
        let mut doc = String::new();
        let mut plain = String::new();
        for (secret, text) in parts {
            if *secret {
                doc.push_str(&escape(&std::mem::take(&mut plain)));
                doc.push_str(&format!("<$S>{}<$E>", escape(text)));
            } else {
                plain.push_str(text);
            }
        }
        doc.push_str(&escape(&plain));
        std::fs::write(&p, &doc).unwrap();
        (d, p, doc)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// `--mode auto` sieves a document, then may send it secure-only after all: what then
        /// goes over TLS is exactly what an explicit secure-only send prepares (the file as it
        /// is with marks kept, the content without them with marks stripped), and the receiver
        /// writes what it would have written.
        #[test]
        fn secure_only_after_sieving_is_secure_only(
            parts in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), "[a-z\\\\ ]{0,12}"), 0..12),
            strip in proptest::prelude::any::<bool>(),
            mmap in proptest::prelude::any::<bool>(),
        ) {
            let (_d, p, doc) = write_marked(&parts);
            let cfg = MarkConfig { strip, ..MarkConfig::default() };
            let explicit = if strip { Classify::Marks(cfg.clone()) } else { Classify::All };
            let mut want = Source::prepare(&p, "doc.txt", &explicit, mmap, None, &mut KeepMapped::new()).unwrap();
            want.set_all_secure();
            let mut got = Source::prepare(&p, "doc.txt", &Classify::Marks(cfg), mmap, None, &mut KeepMapped::new()).unwrap();
            got.make_secure_only();
            proptest::prop_assert_eq!(&got.layout, &want.layout);
            proptest::prop_assert_eq!(&got.marks, &want.marks);
            proptest::prop_assert_eq!(got.output_len(), want.output_len());
            proptest::prop_assert_eq!(got.stream_len(Kind::Plain), 0);
            let len = got.stream_len(Kind::Secure) as usize;
            let (mut a, mut b) = (vec![0; len], vec![0; len]);
            got.read(Kind::Secure, 0, &mut a).unwrap();
            want.read(Kind::Secure, 0, &mut b).unwrap();
            proptest::prop_assert_eq!(&a, &b);
            if !strip {
                proptest::prop_assert_eq!(&a, doc.as_bytes());
            }
        }

        /// `--mode auto` counts a dense document instead of collecting its runs: counted, it is
        /// what secure-only sends, its shape is the collected document's, and collected after
        /// all ([`Source::sieve_pending`]) it is exactly what [`Source::prepare`] makes.
        #[test]
        fn a_counted_document_is_secure_only_until_collected_then_the_sieves(
            parts in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), "[a-z\\\\ <$SE>]{0,12}"), 1..40),
            strip in proptest::prelude::any::<bool>(),
            mmap in proptest::prelude::any::<bool>(),
        ) {
            let (_d, p, doc) = write_marked(&parts);
            let cfg = MarkConfig { strip, ..MarkConfig::default() };
            let how = Classify::Marks(cfg.clone());
            let asked = std::cell::Cell::new(0);
            let likely = |_: &DocShape| {
                asked.set(asked.get() + 1);
                true
            };
            let mut got = Source::prepare_counting(&p, "doc.txt", &how, (mmap, None, &mut KeepMapped::new()), &likely).unwrap();
            let mut want = Source::prepare(&p, "doc.txt", &how, mmap, None, &mut KeepMapped::new()).unwrap();
            let valued = parts.iter().any(|(secret, _)| *secret);
            let counted = got.sieve_shape().scanned;
            // Counted exactly when it may be: mapped, marks kept, a value in its first bytes.
            proptest::prop_assert_eq!(counted, mmap && !strip && valued);
            proptest::prop_assert_eq!(asked.get() > 0, counted);
            let (g, w) = (got.sieve_shape(), want.sieve_shape());
            proptest::prop_assert_eq!((g.bytes, g.classified, g.segments), (w.bytes, w.classified, w.segments));
            proptest::prop_assert_eq!(got.unclassified(), want.unclassified());
            if counted {
                // Until collected: the file as it is, over TLS.
                proptest::prop_assert_eq!(got.stream_len(Kind::Plain), 0);
                let mut all = vec![0; got.stream_len(Kind::Secure) as usize];
                got.read(Kind::Secure, 0, &mut all).unwrap();
                proptest::prop_assert_eq!(&all, doc.as_bytes());
            }
            got.sieve_pending().unwrap();
            proptest::prop_assert!(!got.sieve_shape().scanned);
            proptest::prop_assert_eq!(&got.layout, &want.layout);
            proptest::prop_assert_eq!(got.content_len(), got.layout.content_len());
            proptest::prop_assert_eq!(&got.marks, &want.marks);
            proptest::prop_assert_eq!(got.output_len(), want.output_len());
            for kind in [Kind::Secure, Kind::Plain] {
                let len = want.stream_len(kind) as usize;
                proptest::prop_assert_eq!(got.stream_len(kind) as usize, len);
                let (mut a, mut b) = (vec![0; len], vec![0; len]);
                got.read(kind, 0, &mut a).unwrap();
                want.read(kind, 0, &mut b).unwrap();
                proptest::prop_assert_eq!(a, b);
            }
            // And a counted document sent secure-only is what secure-only prepares.
            let mut again = Source::prepare_counting(&p, "doc.txt", &how, (mmap, None, &mut KeepMapped::new()), &likely).unwrap();
            again.make_secure_only();
            want.make_secure_only();
            proptest::prop_assert!(!again.sieve_shape().scanned);
            proptest::prop_assert_eq!(&again.layout, &want.layout);
            proptest::prop_assert_eq!(again.content_len(), again.layout.content_len());
            proptest::prop_assert_eq!(&again.marks, &want.marks);
            proptest::prop_assert_eq!(again.output_len(), want.output_len());
        }
    }

    /// A document whose first bytes hold few marked values (an x-P file: five per megabyte) is
    /// collected as always, and the guess is not even asked for; one that `auto` would send
    /// through the sieve is collected too.
    #[test]
    fn sparse_documents_and_likely_sieve_sends_are_collected_at_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        let filler = "x".repeat(8 << 10);
        let sparse: String = (0..40).map(|i| format!("{filler}<$S>v{i}<$E>")).collect();
        std::fs::write(&p, &sparse).unwrap();
        let how = Classify::Marks(MarkConfig::default());
        let asked = std::cell::Cell::new(false);
        let s = Source::prepare_counting(
            &p,
            "doc.txt",
            &how,
            (true, None, &mut KeepMapped::new()),
            &|_| {
                asked.set(true);
                true
            },
        )
        .unwrap();
        assert!(!asked.get() && !s.sieve_shape().scanned);
        assert_eq!(s.sieve_shape().segments, 80);

        let dense: String = (0..400)
            .map(|i| format!("line {i} <$S>v{i}<$E>\n"))
            .collect();
        std::fs::write(&p, &dense).unwrap();
        let estimate = std::cell::Cell::new(None);
        let s = Source::prepare_counting(
            &p,
            "doc.txt",
            &how,
            (true, None, &mut KeepMapped::new()),
            &|e| {
                estimate.set(Some(*e));
                false
            },
        )
        .unwrap();
        assert!(!s.sieve_shape().scanned, "collected");
        let e = estimate.get().expect("a dense document asks");
        // The whole file was the probe: the estimate is close to the truth.
        let truth = s.sieve_shape();
        assert_eq!(e.bytes, dense.len() as u64);
        assert!(e.scanned);
        assert!(e.segments.abs_diff(truth.segments) <= 2, "{e:?} {truth:?}");
        assert!(
            e.classified.abs_diff(truth.classified) <= 4,
            "{e:?} {truth:?}"
        );
    }

    /// A badly marked dense document fails as it does when collected, with the same words,
    /// whatever the guess.
    #[test]
    fn a_counted_document_badly_marked_fails_the_same_way() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        let mut doc: String = (0..400)
            .map(|i| format!("line {i} <$S>v{i}<$E>\n"))
            .collect();
        doc.push_str("tail <$S>never closed\n");
        std::fs::write(&p, &doc).unwrap();
        let how = Classify::Marks(MarkConfig::default());
        let collected =
            Source::prepare(&p, "doc.txt", &how, true, None, &mut KeepMapped::new()).unwrap_err();
        let counted = Source::prepare_counting(
            &p,
            "doc.txt",
            &how,
            (true, None, &mut KeepMapped::new()),
            &|_| true,
        )
        .unwrap_err();
        assert_eq!(format!("{counted:#}"), format!("{collected:#}"));
        assert!(
            format!("{counted:#}").contains("not correctly marked"),
            "{counted:#}"
        );
    }

    #[test]
    fn mapped_frames_rebuild_the_streams_read_without_a_mapping() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        let mut doc = Vec::new();
        for i in 0..200u32 {
            doc.extend_from_slice(
                format!("plain {i} \\<$S>x<$S>sec {i} \\<$E>\\\\y<$E>").as_bytes(),
            );
        }
        std::fs::write(&p, &doc).unwrap();
        for strip in [false, true] {
            let how = Classify::Marks(MarkConfig {
                strip,
                ..MarkConfig::default()
            });
            let mapped =
                Source::prepare(&p, "doc.txt", &how, true, None, &mut KeepMapped::new()).unwrap();
            assert!(mapped.map.is_some());
            let read =
                Source::prepare(&p, "doc.txt", &how, false, None, &mut KeepMapped::new()).unwrap();
            for kind in [Kind::Plain, Kind::Secure] {
                let len = read.stream_len(kind);
                let mut want = vec![0; len as usize];
                read.read(kind, 0, &mut want).unwrap();
                for max in [1, 7, 64, 1 << 20] {
                    let (mut got, mut off, mut buf) = (Vec::new(), 0, vec![0; max]);
                    while off < len {
                        let n = max.min((len - off) as usize);
                        // A frame is all `n` bytes asked for, wherever the runs end.
                        let fr = mapped.frame(kind, off, n, &mut buf).unwrap();
                        assert_eq!(fr.bytes.len(), n);
                        let raw = fr.raw.clone().unwrap();
                        got.extend_from_slice(fr.bytes);
                        // Its slices are the file's bytes where they lie, inside the frame's span.
                        let slices = mapped.slices(kind, off, n as u64).unwrap();
                        let mut joined = Vec::new();
                        for (at, s) in &slices {
                            let at = *at as usize;
                            assert_eq!(*s, &doc[at..at + s.len()]);
                            assert!(
                                raw.start <= at as u64 && at as u64 + s.len() as u64 <= raw.end
                            );
                            joined.extend_from_slice(s);
                        }
                        assert_eq!(joined, fr.bytes);
                        off += n as u64;
                    }
                    assert_eq!(got, want, "{kind:?} max {max} strip {strip}");
                    let f = read
                        .frame(kind, 0, n_min(len, max), &mut buf)
                        .unwrap()
                        .bytes;
                    assert_eq!(f, &want[..f.len()]);
                }
            }
        }
    }

    fn n_min(len: u64, max: usize) -> usize {
        max.min(len as usize)
    }

    /// Resident KiB of the mapping that starts at `addr`, from /proc/self/smaps.
    fn mapping_rss_kib(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(l) = lines.next() {
            let start = l
                .split('-')
                .next()
                .and_then(|a| usize::from_str_radix(a, 16).ok());
            if start == Some(addr) {
                for l in lines.by_ref() {
                    if let Some(v) = l.strip_prefix("Rss:") {
                        return v.trim().trim_end_matches(" kB").parse().unwrap();
                    }
                }
            }
        }
        panic!("no mapping at {addr:#x}");
    }

    /// A marked document within the send's budget keeps the pages its scan mapped, for the
    /// sending to read without faulting them in again; once the budget is spent, or without one,
    /// the scan releases them as it goes, as it must for a large document.
    #[test]
    fn the_scan_keeps_small_documents_mapped_within_the_budget() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        // Marked text, one classified value every 64 KiB.
        let write = |name: &str, mib: usize| {
            let p = d.path().join(name);
            let mut f = File::create(&p).unwrap();
            let mut block = vec![b'a'; 64 << 10];
            block[100..118].copy_from_slice(b"<$S>classified<$E>");
            for _ in 0..mib * 16 {
                f.write_all(&block).unwrap();
            }
            p
        };
        let small = write("small.txt", 4);
        let large = write("large.txt", 30);
        let marks = Classify::Marks(MarkConfig::default());
        let resident_mib = |s: &Source| {
            let map = s.map.as_ref().unwrap();
            mapping_rss_kib(map.as_ptr() as usize) >> 10
        };
        let prepare = |p: &Path, keep: &mut KeepMapped| {
            Source::prepare(p, "doc.txt", &marks, true, None, keep).unwrap()
        };
        let mut keep = KeepMapped::new();
        let a = prepare(&small, &mut keep);
        assert!(resident_mib(&a) >= 3, "{} MiB resident", resident_mib(&a));
        // 4 of the 32 MiB are taken: a 30 MiB document no longer fits, and is released.
        let b = prepare(&large, &mut keep);
        assert!(resident_mib(&b) <= 2, "{} MiB resident", resident_mib(&b));
        // Alone, it fits.
        let c = prepare(&large, &mut KeepMapped::new());
        assert!(resident_mib(&c) >= 28, "{} MiB resident", resident_mib(&c));
        // Without a budget, nothing stays.
        let e = prepare(&small, &mut KeepMapped::none());
        assert!(resident_mib(&e) <= 1, "{} MiB resident", resident_mib(&e));
        // The kept one is released by the sending like any other.
        a.release(0..a.watch.len());
        assert_eq!(resident_mib(&a), 0);
    }

    /// Sending walks the file from start to end on two channels: the plain one reads every page,
    /// the secure one reads a little of every 200 KB and runs ahead; each releases what it has
    /// sent every 8 MiB or so, at boundaries that fall anywhere. Once both have released all
    /// they sent, nothing of the file may stay mapped, however the page cache holds it: a file
    /// written in 1 MiB writes sits in large folios, which a fault maps whole, so a release
    /// boundary inside a folio lets the next touch map again what lies before it.
    #[test]
    #[cfg(target_os = "linux")]
    fn released_pages_stay_released_behind_both_channels() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fresh.bin");
        let len = 128usize << 20;
        let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let mut f = File::create(&p).unwrap();
        for _ in 0..len >> 20 {
            f.write_all(&block).unwrap();
        }
        drop(f);
        let s = Source::prepare(
            &p,
            "fresh.bin",
            &Classify::All,
            true,
            None,
            &mut KeepMapped::new(),
        )
        .unwrap();
        let map = s.map.as_ref().unwrap();
        let addr = map.as_ptr() as usize;
        let mut sum = 0u64;
        let mut touch = |range: std::ops::Range<usize>| {
            for page in range.step_by(4096) {
                sum += u64::from(map[page]);
            }
        };
        // (position, start of the span not yet released)
        let (mut plain, mut secure) = ((0, 0), (0, 0));
        let release = |ch: &mut (usize, usize), end: usize, force: bool| {
            ch.0 = end;
            if force || ch.0 - ch.1 >= 8 << 20 {
                s.release(ch.1 as u64..ch.0 as u64);
                ch.1 = ch.0;
            }
        };
        while plain.0 < len {
            for _ in 0..4 {
                if secure.0 < len {
                    let end = (secure.0 + 2_600_000).min(len);
                    for run in (secure.0 + 188_743..end).step_by(204_800) {
                        touch(run..(run + 20_480).min(end));
                    }
                    release(&mut secure, end, end == len);
                }
            }
            let end = (plain.0 + 4_400_000).min(len);
            touch(plain.0..end);
            release(&mut plain, end, end == len);
        }
        assert!(sum > 0);
        let rss = mapping_rss_kib(addr);
        assert!(
            rss <= 1 << 10,
            "{rss} KiB of the 128 MiB mapping still resident after both channels released it all"
        );
    }

    #[test]
    fn badly_marked_files_fail_with_the_offset() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bad.txt");
        std::fs::write(&p, b"0123<$S>").unwrap();
        let e = Source::prepare(
            &p,
            "bad.txt",
            &Classify::Marks(MarkConfig::default()),
            true,
            None,
            &mut KeepMapped::new(),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("byte 4"), "{e:#}");
    }
}
