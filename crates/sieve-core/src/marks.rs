//! Inline marks: the thesis's secure tags `<$S>` … `<$E>` (§3.1), made safe.
//!
//! The thesis assumed the tag strings never occur in a document. We do not: an **escape** lets
//! any content be written, and malformed marking is an error carrying the byte offset, found
//! before anything is sent.
//!
//! ## The escape rule
//!
//! The escape string (default `\`) only means something in a run of escapes that is immediately
//! followed by a mark string. In such a run of `n` escapes, every pair stands for one literal
//! escape, and if `n` is odd the mark is literal text rather than a mark:
//!
//! | raw input | content | a mark? |
//! |---|---|---|
//! | `<$S>` | | start |
//! | `\<$S>` | `<$S>` | no |
//! | `\\<$S>` | `\` | start |
//! | `\\\<$S>` | `\<$S>` | no |
//! | `a\b` | `a\b` | (escape not before a mark: plain text) |
//!
//! Escapes anywhere else are ordinary bytes, so documents full of backslashes (paths, regular
//! expressions) need no change.
//!
//! ## Two outputs
//!
//! With [`MarkConfig::strip`] false (the default), the content keeps every escape byte verbatim,
//! so re-inserting the marks around the classified segments gives back the input byte for byte:
//! the receiver's file is `cmp`-identical to the sender's. With `strip` true the escapes are
//! resolved, which is the thesis's output: the document without its tags.
//!
//! ## Streaming
//!
//! [`MarkParser`] accepts input in chunks of any size; a mark or escape split across chunks still
//! parses, and a run of escapes of any length is counted, not buffered. Every content byte is
//! reported with its offset in the raw input, so a sender can read the classified and
//! non-classified runs straight from the file (content is always a subsequence of the input).

use std::ops::Range;

use thiserror::Error;

use crate::layout::Layout;

/// Mark strings and what to do with escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkConfig {
    /// Opens a classified span. Default `<$S>`.
    pub start: Vec<u8>,
    /// Closes a classified span. Default `<$E>`.
    pub end: Vec<u8>,
    /// Makes a following mark literal. Default `\`.
    pub escape: Vec<u8>,
    /// Resolve escapes in the content (the thesis's stripped output) instead of keeping them.
    pub strip: bool,
}

impl Default for MarkConfig {
    fn default() -> Self {
        MarkConfig {
            start: b"<$S>".to_vec(),
            end: b"<$E>".to_vec(),
            escape: b"\\".to_vec(),
            strip: false,
        }
    }
}

/// A malformed document or configuration. Offsets are byte offsets in the raw input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MarkError {
    /// The input ended with a classified span still open.
    #[error(
        "unbalanced start mark at byte {at}: the classified part opened there is never closed; \
         add an end mark, or escape the start mark if it is meant literally"
    )]
    Unbalanced {
        /// Raw offset of the start mark that is never closed.
        at: u64,
    },
    /// An end mark (unescaped) outside any classified span.
    #[error(
        "stray end mark at byte {at}: no classified part is open there; remove it, or escape it \
         if it is meant literally"
    )]
    StrayEnd {
        /// Raw offset of the end mark.
        at: u64,
    },
    /// A start mark inside a classified span: spans do not nest.
    #[error(
        "nested start mark at byte {at}: a classified part is already open since byte {open_at}; \
         classified parts cannot nest"
    )]
    NestedStart {
        /// Raw offset of the second start mark.
        at: u64,
        /// Raw offset of the start mark that opened the span still open.
        open_at: u64,
    },
    /// The [`MarkConfig`] is unusable: a string is empty, longer than 64 bytes, or a prefix of
    /// another (see [`MarkConfig::validate`]); found before any input is read.
    #[error("invalid mark configuration: {0}")]
    Config(String),
}

impl MarkError {
    /// The byte offset the error is about, if it is about one.
    pub fn at(&self) -> Option<u64> {
        match self {
            MarkError::Unbalanced { at }
            | MarkError::StrayEnd { at }
            | MarkError::NestedStart { at, .. } => Some(*at),
            MarkError::Config(_) => None,
        }
    }
}

/// Line and column (both from 1, the column in bytes) of byte `at` of a document whose bytes
/// before it are `before` (`before.len() == at`): what an editor shows, beside the offset.
pub fn line_col(before: &[u8]) -> (u64, u64) {
    let line = memchr::memchr_iter(b'\n', before).count() as u64 + 1;
    let col = match memchr::memrchr(b'\n', before) {
        Some(nl) => (before.len() - nl) as u64,
        None => before.len() as u64 + 1,
    };
    (line, col)
}

/// What the parser reports, in input order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// Content bytes; `bytes` equals the raw input at `at..at + bytes.len()`.
    Data {
        /// Raw offset of the first byte.
        at: u64,
        /// The bytes, borrowed from the chunk fed or the parser's own buffer: copy them to keep
        /// them past the callback.
        bytes: &'a [u8],
    },
    /// A start mark at raw offset `at`.
    Start {
        /// Raw offset of the mark's first byte.
        at: u64,
    },
    /// An end mark at raw offset `at`.
    End {
        /// Raw offset of the mark's first byte.
        at: u64,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Start,
    End,
    Escape,
}

enum Probe {
    Token(Token),
    NeedMore,
    NotToken,
}

/// Streaming mark parser. Feed chunks with [`MarkParser::feed`], then call [`MarkParser::finish`].
#[derive(Debug, Clone)]
pub struct MarkParser {
    cfg: MarkConfig,
    /// First bytes of the three tokens, for the memchr scan.
    firsts: Firsts,
    /// A possible token prefix left over from the previous chunk.
    pending: Vec<u8>,
    /// Raw offset of the first byte not yet consumed (of `pending` if any, else of the next chunk).
    offset: u64,
    /// Escapes counted but not yet emitted, and the raw offset of the first one.
    esc_run: u64,
    esc_at: u64,
    /// Offset of the open start mark, if a classified span is open.
    open_at: Option<u64>,
    /// `escape` repeated, to emit long counted runs from.
    esc_block: Vec<u8>,
}

impl MarkConfig {
    /// Check that the three strings can be told apart in any input.
    pub fn validate(&self) -> Result<(), MarkError> {
        let named = [
            ("start", &self.start),
            ("end", &self.end),
            ("escape", &self.escape),
        ];
        for (name, s) in named {
            if s.is_empty() {
                return Err(MarkError::Config(format!(
                    "the {name} mark string is empty"
                )));
            }
            if s.len() > 64 {
                return Err(MarkError::Config(format!(
                    "the {name} mark string is {} bytes long; at most 64 are allowed",
                    s.len()
                )));
            }
        }
        for (a, sa) in named {
            for (b, sb) in named {
                if a != b && sb.starts_with(sa) {
                    return Err(MarkError::Config(format!(
                        "the {a} string is a prefix of the {b} string; they must differ from the first byte on or at least not contain one another at the start"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl MarkParser {
    /// A parser at raw offset 0, outside any classified span; refuses a configuration that
    /// [`MarkConfig::validate`] rejects.
    pub fn new(cfg: MarkConfig) -> Result<Self, MarkError> {
        cfg.validate()?;
        let firsts = Firsts::new([cfg.start[0], cfg.end[0], cfg.escape[0]]);
        let esc_block = cfg.escape.repeat(4096 / cfg.escape.len().max(1));
        Ok(MarkParser {
            cfg,
            firsts,
            pending: Vec::new(),
            offset: 0,
            esc_run: 0,
            esc_at: 0,
            open_at: None,
            esc_block,
        })
    }

    /// A parser for input that starts at raw offset `offset` outside any classified part, as
    /// the input does right after an end mark (see [`crate::marks_parallel`]).
    pub(crate) fn starting_at(cfg: MarkConfig, offset: u64) -> Result<Self, MarkError> {
        let mut p = MarkParser::new(cfg)?;
        p.offset = offset;
        Ok(p)
    }

    /// The mark strings and escape mode this parser was built with.
    pub fn config(&self) -> &MarkConfig {
        &self.cfg
    }

    /// Raw bytes consumed so far (including any held back as a possible token prefix).
    pub fn position(&self) -> u64 {
        self.offset + self.pending.len() as u64
    }

    /// Parse the next chunk of input.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        sink: &mut impl FnMut(Event<'_>),
    ) -> Result<(), MarkError> {
        if self.pending.is_empty() {
            let used = self.scan(chunk, false, sink)?;
            self.pending.extend_from_slice(&chunk[used..]);
        } else {
            // Rare: the previous chunk ended inside a possible token.
            let mut buf = std::mem::take(&mut self.pending);
            buf.extend_from_slice(chunk);
            let used = self.scan(&buf, false, sink)?;
            buf.drain(..used);
            self.pending = buf;
        }
        Ok(())
    }

    /// End of input: flush what was held back and check that no classified span is open.
    pub fn finish(&mut self, sink: &mut impl FnMut(Event<'_>)) -> Result<(), MarkError> {
        let buf = std::mem::take(&mut self.pending);
        let used = self.scan(&buf, true, sink)?;
        debug_assert_eq!(used, buf.len());
        if let Some(at) = self.open_at {
            return Err(MarkError::Unbalanced { at });
        }
        Ok(())
    }

    fn probe(&self, s: &[u8], fin: bool) -> Probe {
        let mut need_more = false;
        for (tok, t) in [
            (Token::Start, &self.cfg.start),
            (Token::End, &self.cfg.end),
            (Token::Escape, &self.cfg.escape),
        ] {
            if starts_with(s, t) {
                return Probe::Token(tok);
            }
            if !fin && s.len() < t.len() && t.starts_with(s) {
                need_more = true;
            }
        }
        if need_more {
            Probe::NeedMore
        } else {
            Probe::NotToken
        }
    }

    fn mark(
        &mut self,
        tok: Token,
        at: u64,
        sink: &mut impl FnMut(Event<'_>),
    ) -> Result<(), MarkError> {
        match (tok, self.open_at) {
            (Token::Start, None) => {
                self.open_at = Some(at);
                sink(Event::Start { at });
            }
            (Token::Start, Some(open_at)) => return Err(MarkError::NestedStart { at, open_at }),
            (Token::End, Some(_)) => {
                self.open_at = None;
                sink(Event::End { at });
            }
            (Token::End, None) => return Err(MarkError::StrayEnd { at }),
            (Token::Escape, _) => unreachable!("escapes are not marks"),
        }
        Ok(())
    }

    /// Emit `count` escapes starting at raw offset `at` as content.
    fn emit_escapes(&self, mut count: u64, mut at: u64, sink: &mut impl FnMut(Event<'_>)) {
        let per = (self.esc_block.len() / self.cfg.escape.len()) as u64;
        while count > 0 {
            let n = count.min(per);
            let bytes = &self.esc_block[..(n as usize) * self.cfg.escape.len()];
            sink(Event::Data { at, bytes });
            at += bytes.len() as u64;
            count -= n;
        }
    }

    /// Resolve the pending escape run, followed by `next` (a mark at raw offset `mark_at` whose
    /// bytes are `mark_bytes`) or by ordinary content (`next == None`).
    fn resolve_run(
        &mut self,
        next: Option<(Token, u64, &[u8])>,
        sink: &mut impl FnMut(Event<'_>),
    ) -> Result<(), MarkError> {
        let n = std::mem::take(&mut self.esc_run);
        let Some((tok, mark_at, mark_bytes)) = next else {
            self.emit_escapes(n, self.esc_at, sink);
            return Ok(());
        };
        let literal = n % 2 == 1;
        let kept = if self.cfg.strip { n / 2 } else { n };
        self.emit_escapes(kept, self.esc_at, sink);
        if literal {
            sink(Event::Data {
                at: mark_at,
                bytes: mark_bytes,
            });
            Ok(())
        } else {
            self.mark(tok, mark_at, sink)
        }
    }

    /// Scan `s` (raw bytes starting at `self.offset`); returns how many bytes were consumed.
    /// Unconsumed bytes are a possible token prefix (only when `fin` is false).
    fn scan(
        &mut self,
        s: &[u8],
        fin: bool,
        sink: &mut impl FnMut(Event<'_>),
    ) -> Result<usize, MarkError> {
        let base = self.offset;
        let esc_len = self.cfg.escape.len();
        let mut i = 0usize;
        let mut lit = 0usize;
        loop {
            if self.esc_run > 0 {
                while s[i..].starts_with(&self.cfg.escape) {
                    self.esc_run += 1;
                    i += esc_len;
                }
                match self.probe(&s[i..], fin) {
                    Probe::NeedMore => {
                        self.offset = base + i as u64;
                        return Ok(i);
                    }
                    Probe::Token(tok @ (Token::Start | Token::End)) => {
                        let len = if tok == Token::Start {
                            self.cfg.start.len()
                        } else {
                            self.cfg.end.len()
                        };
                        self.resolve_run(Some((tok, base + i as u64, &s[i..i + len])), sink)?;
                        i += len;
                    }
                    Probe::Token(Token::Escape) => unreachable!("escapes were all counted"),
                    Probe::NotToken => {
                        if i == s.len() && !fin {
                            // The run may go on in the next chunk.
                            self.offset = base + i as u64;
                            return Ok(i);
                        }
                        self.resolve_run(None, sink)?;
                    }
                }
                lit = i;
            }
            let Some(d) = self.firsts.find(&s[i..]) else {
                break;
            };
            let p = i + d;
            match self.probe(&s[p..], fin) {
                Probe::Token(Token::Escape) => {
                    if p > lit {
                        sink(Event::Data {
                            at: base + lit as u64,
                            bytes: &s[lit..p],
                        });
                    }
                    self.esc_run = 1;
                    self.esc_at = base + p as u64;
                    i = p + esc_len;
                }
                Probe::Token(tok) => {
                    if p > lit {
                        sink(Event::Data {
                            at: base + lit as u64,
                            bytes: &s[lit..p],
                        });
                    }
                    self.mark(tok, base + p as u64, sink)?;
                    i = p + if tok == Token::Start {
                        self.cfg.start.len()
                    } else {
                        self.cfg.end.len()
                    };
                    lit = i;
                }
                Probe::NeedMore => {
                    if p > lit {
                        sink(Event::Data {
                            at: base + lit as u64,
                            bytes: &s[lit..p],
                        });
                    }
                    self.offset = base + p as u64;
                    return Ok(p);
                }
                Probe::NotToken => i = p + 1,
            }
        }
        if s.len() > lit {
            sink(Event::Data {
                at: base + lit as u64,
                bytes: &s[lit..],
            });
        }
        self.offset = base + s.len() as u64;
        Ok(s.len())
    }
}

/// `s.starts_with(t)` for a token: a few bytes compared in line, where the slice method calls
/// `memcmp` for every candidate the scan stops at, every few dozen bytes of a dense document
/// (criterion's `marks-pass`: counting 8 MiB of log or CSV 3-4 % faster).
#[inline]
pub(crate) fn starts_with(s: &[u8], t: &[u8]) -> bool {
    s.len() >= t.len() && s.iter().zip(t).all(|(a, b)| a == b)
}

/// The distinct first bytes of the tokens: where the scan must stop and look.
///
/// The default marks `<$S>` and `<$E>` share their first byte, so the scan looks for two bytes,
/// not three: one comparison less per 32 bytes of the document. Measured: a two-thread `memchr`
/// over a gigabyte in memory, 65 ms against 70 with three; the sender's whole marks pass over a
/// mapped 1 GiB document, 91 against 94 ms (medians of 11 alternating rounds).
#[derive(Debug, Clone, Copy)]
enum Firsts {
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
}

impl Firsts {
    fn new(firsts: [u8; 3]) -> Firsts {
        let mut sorted = firsts;
        sorted.sort_unstable();
        match sorted {
            [a, _, c] if a == c => Firsts::One(a),
            [a, b, c] if a == b => Firsts::Two(a, c),
            [a, b, c] if b == c => Firsts::Two(a, b),
            [a, b, c] => Firsts::Three(a, b, c),
        }
    }

    /// Offset of the first byte in `hay` that may start a token.
    fn find(self, hay: &[u8]) -> Option<usize> {
        match self {
            Firsts::One(a) => memchr::memchr(a, hay),
            Firsts::Two(a, b) => memchr::memchr2(a, b, hay),
            Firsts::Three(a, b, c) => memchr::memchr3(a, b, c, hay),
        }
    }
}

/// A run of content bytes taken verbatim from the raw input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Offset in the raw input.
    pub raw: u64,
    /// Number of bytes; the same in the raw input and in the content.
    pub len: u64,
}

/// The result of parsing a whole marked document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedMarks {
    /// Classified ranges over the content (the document without marks).
    pub ranges: Vec<Range<u64>>,
    /// The content as runs of the raw input, in order (adjacent runs merged).
    pub extents: Vec<Extent>,
    /// Content length in bytes.
    pub content_len: u64,
}

impl ParsedMarks {
    /// The layout the sieve sends in the manifest.
    pub fn layout(&self) -> Layout {
        Layout::from_ranges(self.content_len, &self.ranges)
    }
}

/// Collects parser events into a [`ParsedMarks`]. Usable with a streaming parser.
#[derive(Debug, Default)]
pub struct Collector {
    out: ParsedMarks,
    open: Option<u64>,
}

impl Collector {
    /// Take one event, in the order the parser emits them; pass it as (part of) the sink.
    #[inline]
    pub fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Data { at, bytes } => {
                let len = bytes.len() as u64;
                match self.out.extents.last_mut() {
                    Some(e) if e.raw + e.len == at => e.len += len,
                    _ => self.out.extents.push(Extent { raw: at, len }),
                }
                self.out.content_len += len;
            }
            Event::Start { .. } => self.open = Some(self.out.content_len),
            Event::End { .. } => {
                let start = self.open.take().unwrap_or(self.out.content_len);
                self.out.ranges.push(start..self.out.content_len);
            }
        }
    }

    /// The collected result; call after [`MarkParser::finish`] succeeded, since the collector
    /// itself does not check that marks balance.
    pub fn finish(self) -> ParsedMarks {
        self.out
    }
}

/// What the sieve's layout of a marked document would hold, counted without building it: the
/// marks pass of a document that may not go through the sieve at all (`sieve send --mode auto`
/// choosing secure-only for a dense document) checks the marks and learns the document's shape
/// at a fraction of the cost of collecting every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MarkCounts {
    /// Content length in bytes (the document without its marks).
    pub content_len: u64,
    /// Classified bytes of the content.
    pub classified: u64,
    /// Classified ranges (marked spans, empty ones included).
    pub ranges: u64,
    /// Whether the first classified range starts at content offset 0.
    pub(crate) starts_classified: bool,
    /// Content offset where the last classified range ends.
    pub(crate) last_end: u64,
}

impl MarkCounts {
    /// Segments of the layout [`ParsedMarks::layout`] would build: classified and cleartext
    /// runs, alternating, as [`Layout::from_ranges`] cuts them.
    pub fn segments(&self) -> u64 {
        if self.ranges == 0 {
            return u64::from(self.content_len > 0);
        }
        2 * self.ranges - u64::from(self.starts_classified)
            + u64::from(self.last_end < self.content_len)
    }

    /// These counts followed by `part`'s, a part of the document that starts where these end.
    pub(crate) fn append(&mut self, part: MarkCounts) {
        let shift = self.content_len;
        if part.ranges > 0 {
            if self.ranges == 0 {
                self.starts_classified = part.starts_classified && shift == 0;
            }
            self.last_end = part.last_end + shift;
        }
        self.content_len += part.content_len;
        self.classified += part.classified;
        self.ranges += part.ranges;
    }
}

/// Counts parser events into [`MarkCounts`], as [`Collector`] collects them, without allocating.
#[derive(Debug, Default)]
pub struct Counter {
    out: MarkCounts,
    open: Option<u64>,
}

impl Counter {
    /// Take one event, in the order the parser emits them.
    #[inline]
    pub fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Data { bytes, .. } => self.out.content_len += bytes.len() as u64,
            Event::Start { .. } => self.open = Some(self.out.content_len),
            Event::End { .. } => {
                let start = self.open.take().unwrap_or(self.out.content_len);
                if self.out.ranges == 0 {
                    self.out.starts_classified = start == 0;
                }
                self.out.ranges += 1;
                self.out.classified += self.out.content_len - start;
                self.out.last_end = self.out.content_len;
            }
        }
    }

    /// The counts so far: a value whose end mark has not come yet is not counted.
    pub fn counts(&self) -> MarkCounts {
        self.out
    }

    /// Marks started and not yet ended count nothing: call after [`MarkParser::finish`]
    /// succeeded, as for [`Collector::finish`].
    pub fn finish(self) -> MarkCounts {
        self.out
    }
}

/// Parse a whole document held in memory.
pub fn parse_all(cfg: &MarkConfig, input: &[u8]) -> Result<ParsedMarks, MarkError> {
    let mut parser = MarkParser::new(cfg.clone())?;
    let mut col = Collector::default();
    let mut sink = |ev: Event<'_>| col.event(ev);
    parser.feed(input, &mut sink)?;
    parser.finish(&mut sink)?;
    Ok(col.finish())
}

/// Count what [`parse_all`] would collect: the same checks, the same errors.
pub fn count_all(cfg: &MarkConfig, input: &[u8]) -> Result<MarkCounts, MarkError> {
    let mut parser = MarkParser::new(cfg.clone())?;
    let mut counter = Counter::default();
    let mut sink = |ev: Event<'_>| counter.event(ev);
    parser.feed(input, &mut sink)?;
    parser.finish(&mut sink)?;
    Ok(counter.finish())
}

/// Write `content` with the classified `ranges` marked, escaping every literal mark so that
/// parsing the result with `strip` set gives back exactly `content` and `ranges`.
///
/// This is how a marking tool should emit a document; it is also the property tests' oracle.
/// It assumes the configured strings cannot form one another across a mark (true of the
/// defaults and of any strings that share no bytes with each other's ends).
pub fn mark_document(cfg: &MarkConfig, content: &[u8], ranges: &[Range<u64>]) -> Vec<u8> {
    let mut marks: Vec<(usize, bool)> = Vec::with_capacity(ranges.len() * 2);
    for r in ranges {
        marks.push((r.start as usize, true));
        marks.push((r.end as usize, false));
    }
    let esc = cfg.escape.as_slice();
    let token_at = |s: &[u8]| -> Option<usize> {
        if s.starts_with(&cfg.start) {
            Some(cfg.start.len())
        } else if s.starts_with(&cfg.end) {
            Some(cfg.end.len())
        } else {
            None
        }
    };
    let mut out = Vec::with_capacity(content.len() + ranges.len() * 8);
    let mut next = 0usize;
    let mut i = 0usize;
    loop {
        while next < marks.len() && marks[next].0 == i {
            out.extend_from_slice(if marks[next].1 { &cfg.start } else { &cfg.end });
            next += 1;
        }
        if i >= content.len() {
            break;
        }
        // Content up to the next real mark: nothing may straddle it.
        let lim = marks.get(next).map_or(content.len(), |m| m.0);
        let seg = &content[i..lim];
        if seg.starts_with(esc) {
            let mut j = i;
            let mut n = 0usize;
            while content[j..lim].starts_with(esc) {
                n += 1;
                j += esc.len();
            }
            let reps = if j == lim && next < marks.len() {
                2 * n // a real mark follows: keep it real
            } else if token_at(&content[j..lim]).is_some() {
                2 * n + 1 // a literal mark follows: make it literal
            } else {
                n // escapes before ordinary bytes are ordinary bytes
            };
            for _ in 0..reps {
                out.extend_from_slice(esc);
            }
            i = j;
            if reps == 2 * n + 1 {
                let len = token_at(&content[j..lim]).unwrap_or(0);
                out.extend_from_slice(&content[j..j + len]);
                i = j + len;
            }
            continue;
        }
        if let Some(len) = token_at(seg) {
            out.extend_from_slice(esc);
            out.extend_from_slice(&seg[..len]);
            i += len;
            continue;
        }
        out.push(content[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_col(b""), (1, 1));
        assert_eq!(line_col(b"abc"), (1, 4));
        assert_eq!(line_col(b"ab\n"), (2, 1));
        assert_eq!(line_col(b"ab\ncd\nxy"), (3, 3));
        let e = MarkError::StrayEnd { at: 7 };
        assert_eq!(e.at(), Some(7));
        assert_eq!(MarkError::Config("x".into()).at(), None);
    }

    use super::*;

    #[test]
    fn the_scan_stops_at_every_first_byte_however_many_are_shared() {
        let hay: Vec<u8> = (0u32..4000)
            .map(|i| b"abcdx"[(i * 7 % 13 % 5) as usize])
            .collect();
        for a in b"abc" {
            for b in b"abc" {
                for c in b"abcd" {
                    let f = Firsts::new([*a, *b, *c]);
                    for from in [0, 1, 5, 100, 3999, 4000] {
                        let naive = hay[from..].iter().position(|x| [*a, *b, *c].contains(x));
                        assert_eq!(f.find(&hay[from..]), naive, "{f:?} from {from}");
                    }
                }
            }
        }
        assert!(matches!(
            Firsts::new([b'<', b'<', b'\\']),
            Firsts::Two(b'<', b'\\')
        ));
        assert!(matches!(
            Firsts::new([b'[', b']', b'\\']),
            Firsts::Three(..)
        ));
    }

    fn parse(input: &[u8], strip: bool) -> Result<(Vec<u8>, Vec<Range<u64>>), MarkError> {
        let cfg = MarkConfig {
            strip,
            ..MarkConfig::default()
        };
        let p = parse_all(&cfg, input)?;
        let mut content = Vec::new();
        for e in &p.extents {
            content.extend_from_slice(&input[e.raw as usize..(e.raw + e.len) as usize]);
        }
        Ok((content, p.ranges))
    }

    #[test]
    fn plain_and_marked() {
        let (c, r) = parse(b"ab<$S>cd<$E>ef", false).unwrap();
        assert_eq!(c, b"abcdef");
        assert_eq!(r, vec![2..4]);
        let (c, r) = parse(b"<$S><$E><$S>x<$E>", false).unwrap();
        assert_eq!(c, b"x");
        assert_eq!(r, vec![0..0, 0..1]);
    }

    #[test]
    fn escapes_follow_the_table() {
        assert_eq!(parse(br"\<$S>", true).unwrap(), (b"<$S>".to_vec(), vec![]));
        assert_eq!(
            parse(br"\<$S>", false).unwrap(),
            (br"\<$S>".to_vec(), vec![])
        );
        assert_eq!(
            parse(br"\\<$S>a<$E>", true).unwrap(),
            (br"\a".to_vec(), vec![1..2])
        );
        assert_eq!(
            parse(br"\\<$S>a<$E>", false).unwrap(),
            (br"\\a".to_vec(), vec![2..3])
        );
        assert_eq!(
            parse(br"\\\<$E>", true).unwrap(),
            (br"\<$E>".to_vec(), vec![])
        );
        assert_eq!(
            parse(br"a\b\\c\", true).unwrap(),
            (br"a\b\\c\".to_vec(), vec![])
        );
    }

    #[test]
    fn errors_carry_offsets() {
        assert_eq!(
            parse(b"abc<$S>def", false),
            Err(MarkError::Unbalanced { at: 3 })
        );
        assert_eq!(parse(b"abc<$E>", false), Err(MarkError::StrayEnd { at: 3 }));
        assert_eq!(
            parse(b"<$S>ab<$S>", false),
            Err(MarkError::NestedStart { at: 6, open_at: 0 })
        );
        let e = parse(b"0123456789<$S>x", false).unwrap_err();
        assert!(e.to_string().contains("byte 10"), "{e}");
    }

    #[test]
    fn bad_configs_are_refused() {
        let cfg = MarkConfig {
            start: b"<".to_vec(),
            ..MarkConfig::default()
        };
        assert!(matches!(MarkParser::new(cfg), Err(MarkError::Config(_))));
        let cfg = MarkConfig {
            end: Vec::new(),
            ..MarkConfig::default()
        };
        assert!(matches!(MarkParser::new(cfg), Err(MarkError::Config(_))));
    }

    #[test]
    fn split_mark_across_chunks() {
        let input = b"hello <$S>secret<$E> world \\<$E>";
        let whole = parse_all(&MarkConfig::default(), input).unwrap();
        for cut in 0..=input.len() {
            let mut p = MarkParser::new(MarkConfig::default()).unwrap();
            let mut col = Collector::default();
            let mut sink = |ev: Event<'_>| col.event(ev);
            p.feed(&input[..cut], &mut sink).unwrap();
            p.feed(&input[cut..], &mut sink).unwrap();
            p.finish(&mut sink).unwrap();
            assert_eq!(col.finish(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn mark_document_round_trips_awkward_content() {
        let cfg = MarkConfig {
            strip: true,
            ..MarkConfig::default()
        };
        let cases: Vec<(&[u8], Vec<Range<u64>>)> = vec![
            (br"\", vec![1..1]),
            (br"\\", vec![0..1]),
            (br"<$S>", vec![]),
            (br"\<$E>", vec![0..1]),
            (br"a\", vec![0..1, 2..2]),
            (br"<$S><$E>", vec![4..4]),
        ];
        for (content, ranges) in cases {
            let marked = mark_document(&cfg, content, &ranges);
            let p = parse_all(&cfg, &marked).unwrap();
            let mut got = Vec::new();
            for e in &p.extents {
                got.extend_from_slice(&marked[e.raw as usize..(e.raw + e.len) as usize]);
            }
            assert_eq!(
                got,
                content,
                "marked {:?}",
                String::from_utf8_lossy(&marked)
            );
            assert_eq!(
                p.ranges,
                ranges,
                "marked {:?}",
                String::from_utf8_lossy(&marked)
            );
        }
    }
}
