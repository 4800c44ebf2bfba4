//! The marks pass on several threads, with exactly the sequential parser's result.
//!
//! Every byte of a marked document must be scanned before any of it is sent (an unbalanced mark
//! must stop the transfer first), and on today's machines that scan is bound by memory
//! bandwidth, not by the parser: one core reads a mapped gigabyte in about 130 ms, two cores in
//! about 70 ms. So the input is cut into parts parsed at once.
//!
//! A cut is only made where the parser's state is known without having parsed what comes
//! before: **right after an end mark that no token can overlap** — one with none of the three
//! tokens' first bytes in the `L` bytes before it (`L` the longest token). The parser reaches
//! such a mark as a whole token and it cannot be escaped, so after it either a classified part
//! was just closed or the part before the cut reports a stray end mark; either way the next
//! part starts outside any classified part, which is how its parser starts. Each part but the
//! last must end closed, and the parts' results are joined in order. Where no such cut exists
//! (no end marks, or marks everywhere) the parse is simply sequential.
//!
//! Errors are those of the sequential parse: parts are examined in order and the first failing
//! part reports; all parts before it succeeded, so its starting state was the true one.

use crate::marks::{
    Collector, Counter, Event, MarkConfig, MarkCounts, MarkError, MarkParser, ParsedMarks,
};
use crate::marks_fast::{self, Fast};

/// What a pass gathers from the parser's events: every run ([`Collector`], what the sieve
/// sends by) or only their counts ([`Counter`], what choosing a mode needs). Each part of the
/// input gathers alone; the parts' results are then appended in order.
pub trait Gather: Default + Send {
    /// The result of a part, and of the whole.
    type Out: Send;
    /// Take one event, in the order the parser emits them.
    fn event(&mut self, ev: Event<'_>);
    /// The part's result.
    fn finish(self) -> Self::Out;
    /// `whole` followed by `part`, the part of the input right after it.
    fn append(whole: &mut Self::Out, part: Self::Out);
    /// The fast pass over a part ([`marks_fast::scan`]), gathered.
    fn fast_pass(
        fast: &Fast<'_>,
        s: &[u8],
        base: u64,
        done: &mut impl FnMut(std::ops::Range<usize>),
    ) -> Result<Self::Out, marks_fast::Misplaced> {
        let mut gather = Self::default();
        marks_fast::scan(fast, s, base, STEP, &mut |ev| gather.event(ev), done)?;
        Ok(gather.finish())
    }
}

impl Gather for Collector {
    type Out = ParsedMarks;
    #[inline]
    fn event(&mut self, ev: Event<'_>) {
        Collector::event(self, ev)
    }
    fn finish(self) -> ParsedMarks {
        Collector::finish(self)
    }
    fn append(whole: &mut ParsedMarks, part: ParsedMarks) {
        let shift = whole.content_len;
        whole
            .ranges
            .extend(part.ranges.iter().map(|r| r.start + shift..r.end + shift));
        for e in part.extents {
            match whole.extents.last_mut() {
                Some(last) if last.raw + last.len == e.raw => last.len += e.len,
                _ => whole.extents.push(e),
            }
        }
        whole.content_len += part.content_len;
    }
}

impl Gather for Counter {
    type Out = MarkCounts;
    #[inline]
    fn event(&mut self, ev: Event<'_>) {
        Counter::event(self, ev)
    }
    fn finish(self) -> MarkCounts {
        Counter::finish(self)
    }
    fn append(whole: &mut MarkCounts, part: MarkCounts) {
        whole.append(part)
    }
    /// Counted in place, without the events ([`marks_fast::count`]).
    fn fast_pass(
        fast: &Fast<'_>,
        s: &[u8],
        _base: u64,
        done: &mut impl FnMut(std::ops::Range<usize>),
    ) -> Result<MarkCounts, marks_fast::Misplaced> {
        marks_fast::count(fast, s, STEP, done)
    }
}

/// Parse `input` on up to `threads` threads, giving each part at least `min_part` bytes.
///
/// Equal to [`crate::marks::parse_all`] for every input (the property tests check it).
pub fn parse_parallel(
    cfg: &MarkConfig,
    input: &[u8],
    threads: usize,
    min_part: usize,
) -> Result<ParsedMarks, MarkError> {
    parse_parallel_releasing(cfg, input, threads, min_part, &|_| {})
}

/// Bytes each thread parses between calls of `done`.
const STEP: usize = 8 << 20;

/// [`parse_parallel`], calling `done` with every range of `input` (about 8 MiB) once it has
/// been parsed, from the thread that parsed it; a caller with a mapped file uses it to drop the
/// pages it will not need again soon, so that scanning a large file does not fill its memory.
pub fn parse_parallel_releasing(
    cfg: &MarkConfig,
    input: &[u8],
    threads: usize,
    min_part: usize,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<ParsedMarks, MarkError> {
    pass_parallel::<Collector>(cfg, input, threads, min_part, done)
}

/// [`parse_parallel_releasing`] that only counts ([`crate::marks::count_all`]): the same checks
/// and errors, the layout's shape without the layout.
pub fn count_parallel_releasing(
    cfg: &MarkConfig,
    input: &[u8],
    threads: usize,
    min_part: usize,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<MarkCounts, MarkError> {
    pass_parallel::<Counter>(cfg, input, threads, min_part, done)
}

/// The marks pass over `input` in parts, each gathered by a `G` of its own, joined in order.
fn pass_parallel<G: Gather>(
    cfg: &MarkConfig,
    input: &[u8],
    threads: usize,
    min_part: usize,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<G::Out, MarkError> {
    cfg.validate()?;
    let cuts = cuts(cfg, input, threads, min_part.max(1));
    let bounds: Vec<(usize, usize)> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .zip(cuts.iter().copied().chain(std::iter::once(input.len())))
        .collect();
    let results: Vec<Result<G::Out, MarkError>> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds[1..]
            .iter()
            .map(|&(a, b)| s.spawn(move || parse_part::<G>(cfg, input, a, b, done)))
            .collect();
        let first = parse_part::<G>(cfg, input, bounds[0].0, bounds[0].1, done);
        std::iter::once(first)
            .chain(handles.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }))
            .collect()
    });
    let mut parts = results.into_iter();
    // The first part is where the others are appended: its runs are not copied again.
    let mut whole = match parts.next() {
        Some(first) => first?,
        None => unreachable!("the bounds hold one part at least"),
    };
    for part in parts {
        G::append(&mut whole, part?);
    }
    Ok(whole)
}

/// Parse `input[a..b]` from a state outside any classified part; it must also end outside.
///
/// For the usual marks the part is first read by [`crate::marks_fast`], which reports the same
/// events for a well-marked part at a fraction of the cost per mark; where it finds a mark out
/// of place, the general parser reads the part again and reports the error (and `done` hears of
/// the ranges the fast pass had read a second time).
fn parse_part<G: Gather>(
    cfg: &MarkConfig,
    input: &[u8],
    a: usize,
    b: usize,
    done: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<G::Out, MarkError> {
    if let Some(fast) = Fast::new(cfg) {
        let mut release = |r: std::ops::Range<usize>| done(a + r.start..a + r.end);
        if let Ok(out) = G::fast_pass(&fast, &input[a..b], a as u64, &mut release) {
            return Ok(out);
        }
    }
    let mut parser = MarkParser::starting_at(cfg.clone(), a as u64)?;
    let mut gather = G::default();
    let mut sink = |ev: Event<'_>| gather.event(ev);
    let mut at = a;
    while at < b {
        let end = (at + STEP).min(b);
        parser.feed(&input[at..end], &mut sink)?;
        done(at..end);
        at = end;
    }
    parser.finish(&mut sink)?;
    Ok(gather.finish())
}

/// Cut points: each just after a safe end mark at or after an even share of the input.
fn cuts(cfg: &MarkConfig, input: &[u8], threads: usize, min_part: usize) -> Vec<usize> {
    let parts = threads.min(input.len() / min_part).max(1);
    let mut cuts = Vec::new();
    let mut last = 0;
    for i in 1..parts {
        let target = (input.len() * i / parts).max(last + min_part);
        match safe_end_after(cfg, input, target) {
            Some(c) if c + min_part <= input.len() => {
                cuts.push(c);
                last = c;
            }
            _ => break,
        }
    }
    cuts
}

/// The end of the first end mark at or after `from` that no token overlaps or escapes.
fn safe_end_after(cfg: &MarkConfig, input: &[u8], from: usize) -> Option<usize> {
    let firsts = [cfg.start[0], cfg.end[0], cfg.escape[0]];
    let longest = cfg.start.len().max(cfg.end.len()).max(cfg.escape.len());
    let mut q = from.max(longest);
    while q < input.len() {
        q += memchr::memchr(cfg.end[0], input.get(q..)?)?;
        let clear_before = !input[q - longest..q].iter().any(|b| firsts.contains(b));
        if clear_before && input[q..].starts_with(&cfg.end) {
            return Some(q + cfg.end.len());
        }
        q += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::parse_all;

    #[test]
    fn cuts_after_end_marks_and_agrees_with_the_sequential_parse() {
        let cfg = MarkConfig::default();
        let doc: Vec<u8> = (0..500)
            .flat_map(|i| format!("text {i} <$S>secret {i}<$E> more ").into_bytes())
            .collect();
        let c = cuts(&cfg, &doc, 4, 64);
        assert_eq!(c.len(), 3);
        for &cut in &c {
            assert!(doc[..cut].ends_with(b"<$E>"));
        }
        assert_eq!(parse_parallel(&cfg, &doc, 4, 64), parse_all(&cfg, &doc));
    }

    #[test]
    fn every_byte_is_reported_parsed_exactly_once() {
        let cfg = MarkConfig::default();
        let doc: Vec<u8> = (0..1_200_000)
            .flat_map(|i| format!("t{i} <$S>s{i}<$E> ").into_bytes())
            .collect();
        assert!(doc.len() > 2 * STEP);
        let seen = std::sync::Mutex::new(Vec::new());
        let got =
            parse_parallel_releasing(&cfg, &doc, 3, STEP / 2, &|r| seen.lock().unwrap().push(r));
        assert_eq!(got, parse_all(&cfg, &doc));
        let mut seen = seen.into_inner().unwrap();
        assert!(seen.len() > 3);
        seen.sort_by_key(|r| r.start);
        let mut next = 0;
        for r in seen {
            assert_eq!(r.start, next);
            next = r.end;
        }
        assert_eq!(next, doc.len());
    }

    #[test]
    fn escaped_or_overlapped_end_marks_are_not_cut_points() {
        let cfg = MarkConfig::default();
        // Only escaped end marks: no safe cut, so one part.
        let doc = b"aaaaaaaa\\<$E>bbbbbbbbbbbbbbbb\\<$E>cccccccccccccccccc".repeat(8);
        assert!(cuts(&cfg, &doc, 2, 8).is_empty());
        assert_eq!(parse_parallel(&cfg, &doc, 2, 8), parse_all(&cfg, &doc));
    }

    #[test]
    fn errors_are_those_of_the_sequential_parse() {
        let cfg = MarkConfig::default();
        let mut doc = b"x<$S>a<$E>".repeat(40);
        doc.extend_from_slice(b"<$E>");
        doc.extend_from_slice(&b"y<$S>b<$E>".repeat(40));
        doc.extend_from_slice(b"<$S>never closed");
        let seq = parse_all(&cfg, &doc);
        assert!(seq.is_err());
        for t in 1..=4 {
            assert_eq!(parse_parallel(&cfg, &doc, t, 16), seq, "{t} threads");
        }
    }
}
