//! The marks pass for the usual marks, without the general parser's state machine: the same
//! events for every well-marked part, found by the marks' first byte alone.
//!
//! Dense documents (logs, CSV exports: a marked value every hundred bytes or so) cost the
//! general parser per mark, not per byte: it stops at every mark's and escape's first byte,
//! tries the three tokens there, and reports each piece of content between them. 8 MiB of
//! generated log holds 140,000 marks.
//!
//! For marks that cannot overlap one another (no byte after a mark's first is the first byte of
//! a mark) and a one-byte escape found in neither, less is needed:
//!
//! - every mark starts at an occurrence of a mark's first byte, and no mark starts inside
//!   another, so one pass over those first bytes visits every mark in order (`Firsts`: 64-byte
//!   SIMD masks where they are dense, `memchr` across long stretches without them), and a mark
//!   of at most 8 bytes is told from the bytes at a candidate with one word compare;
//! - whether a mark is escaped depends only on the escapes right before it: an odd run makes
//!   it literal text, an even one is kept as content (marks kept, not stripped: the escapes are
//!   content either way), which is what the general parser decides reading forwards;
//! - the content between two marks is then one run of the input, reported as one event.
//!
//! A mark out of place (a start inside a classified part, an end outside one, a part left
//! open) is not reported here: [`scan`] gives up, and the caller runs the general parser,
//! which finds the same mark and reports it with its offset. Stripping escapes, and mark
//! strings this does not handle, go to the general parser from the start ([`Fast::new`]).
//!
//! Measured (criterion's `marks-pass`, one thread, Intel Xeon model 207): counting 8 MiB of
//! generated log at P = 0.1 took 2.69 ms against the general parser's 3.61, collecting its runs
//! 3.75 against 4.94; CSV 3.54 against 3.94 and 5.28 against 5.35. In a whole send the pass is
//! a smaller share than that suggests: the mapped file's page faults and a core shared with the
//! handshake weigh as much (`bench/small.sh` with `KIND=log`, 8 MiB: the sieve's preparation
//! 14.1 ms against 15.0, 40 alternating rounds; `auto`'s within the noise). The masks and the
//! word compare then took the fast pass to 0.79 of its time per round on that log and 0.77 on
//! that CSV when counting, and 0.98 on a 10 MB x-P file (the build before alternating with
//! this one, 11 rounds of criterion's `count-1t-fast`, same machine).
//!
//! Counting ([`count`], what `--mode auto` does to a dense document it may send secure-only)
//! then stopped going through the events: a mark updates a few counters in place. Against the
//! build before, alternating, 11 rounds on the same machine, per-round medians: one thread 0.86
//! of the time on both the log and the CSV, two threads 0.79 and 0.82; the 10 MB x-P file 1.05.
//! The general parser, which did not change, moved by 0.88 (log), 0.98 (CSV) and 1.03 (x-P) in
//! the same rounds: the machine's drift is of the size of the log's gain and the x-P file's loss,
//! and only the CSV's gain stands clearly above it.

use wide::u8x16;

use crate::marks::{starts_with, Event, MarkConfig, MarkCounts};

/// The mark strings in the form [`scan`] uses, for a configuration it handles.
#[derive(Debug, Clone)]
pub struct Fast<'a> {
    start: &'a [u8],
    end: &'a [u8],
    escape: u8,
    /// First bytes of the two marks (equal for the defaults, `<`).
    firsts: (u8, u8),
    /// The two marks as 8-byte words, when both fit in one (the defaults do).
    words: Option<(Word, Word)>,
}

/// A mark of at most 8 bytes as a little-endian word and the mask of its bytes: whether the
/// bytes at a candidate are the mark is then one load, an AND and a compare, for both marks at
/// once, where comparing slices byte by byte was most of the fast pass's time per mark.
#[derive(Debug, Clone, Copy)]
struct Word {
    pattern: u64,
    mask: u64,
    len: usize,
}

impl Word {
    fn new(mark: &[u8]) -> Option<Word> {
        let len = mark.len();
        (1..=8).contains(&len).then(|| {
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(mark);
            Word {
                pattern: u64::from_le_bytes(b),
                mask: u64::MAX >> (64 - 8 * len),
                len,
            }
        })
    }

    #[inline(always)]
    fn is_in(self, word: u64) -> bool {
        word & self.mask == self.pattern
    }
}

/// The 8 bytes of `s` from `at`, if there are as many.
#[inline(always)]
fn word_at(s: &[u8], at: usize) -> Option<u64> {
    let w = s.get(at..at.checked_add(8)?)?;
    let mut b = [0u8; 8];
    b.copy_from_slice(w);
    Some(u64::from_le_bytes(b))
}

/// Why [`scan`] stopped: the general parser must take the part (it reports the error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Misplaced;

impl<'a> Fast<'a> {
    /// `Some` when `cfg` keeps its marks' escapes (`strip` off), has a one-byte escape found in
    /// neither mark, and marks that cannot overlap: no byte after either mark's first is the
    /// first byte of a mark. The defaults (`<$S>`, `<$E>`, `\`) qualify.
    pub fn new(cfg: &'a MarkConfig) -> Option<Fast<'a>> {
        let (start, end) = (cfg.start.as_slice(), cfg.end.as_slice());
        let (&s0, &e0) = (start.first()?, end.first()?);
        let &[escape] = cfg.escape.as_slice() else {
            return None;
        };
        let overlap = start[1..]
            .iter()
            .chain(&end[1..])
            .any(|&b| b == s0 || b == e0);
        let escaped_inside = start.contains(&escape) || end.contains(&escape);
        (!cfg.strip && !overlap && !escaped_inside && start != end).then_some(Fast {
            start,
            end,
            escape,
            firsts: (s0, e0),
            words: Word::new(start).zip(Word::new(end)),
        })
    }
}

/// Report the events of `s`, raw bytes that start at offset `base` outside any classified
/// part and must end outside one, exactly as [`crate::marks::MarkParser`] reports their content
/// and marks (content runs may be cut differently: a run between two marks is one event here).
/// `done` is called with each range of `s` (relative to `s`), `step` bytes long but the last,
/// in order, once the marks starting in it have been read: a caller with a mapped file drops
/// those pages from its memory.
///
/// Returns [`Misplaced`] at the first mark out of place, or if a part is left open at the end;
/// events already reported are then to be discarded.
pub fn scan(
    fast: &Fast<'_>,
    s: &[u8],
    base: u64,
    step: usize,
    sink: &mut impl FnMut(Event<'_>),
    done: &mut impl FnMut(std::ops::Range<usize>),
) -> Result<(), Misplaced> {
    let mut state = State {
        open: false,
        lit: 0,
    };
    each_candidate(fast, s, step, done, |p| state.mark(fast, s, base, p, sink))?;
    if state.open {
        return Err(Misplaced);
    }
    if s.len() > state.lit {
        sink(Event::Data {
            at: base + state.lit as u64,
            bytes: &s[state.lit..],
        });
    }
    Ok(())
}

/// Call `take` with every offset of `s` that holds a mark's first byte, in order, `step` bytes
/// at a time, and `done` with each range of `s` once the candidates in it are taken (a mark may
/// run past its range's end): the walk [`scan`] and [`count`] share.
#[inline(always)]
fn each_candidate(
    fast: &Fast<'_>,
    s: &[u8],
    step: usize,
    done: &mut impl FnMut(std::ops::Range<usize>),
    mut take: impl FnMut(usize) -> Result<(), Misplaced>,
) -> Result<(), Misplaced> {
    let step = step.max(1);
    let mut w = 0;
    while w < s.len() {
        let to = (w + step).min(s.len());
        for d in Firsts::new(&s[w..to], fast.firsts) {
            take(w + d)?;
        }
        done(w..to);
        w = to;
    }
    Ok(())
}

/// Bytes [`Firsts`] compares at a time.
const BLOCK: usize = 64;

/// Blocks without a candidate after which [`Firsts`] looks for the next one with `memchr`. A
/// line of generated log has its marks in its first hundred bytes and none in the hundred or so
/// after: jumping from the first empty block cost such a document most of what the masks gain.
const SPARSE_AFTER: usize = 4;

/// The offsets in a slice of every byte equal to either of two, in order, found a block of 64
/// bytes at a time: four 16-byte SIMD compares (`wide`, SSE2 on x86-64, NEON on AArch64) give a
/// 64-bit mask, and each set bit is a candidate.
///
/// `memchr`'s iterator pays a call, a dispatch and a fresh unaligned load per hit: on a dense
/// document (a marked value every few dozen bytes: logs, CSV exports) that was about half the
/// fast pass's time (criterion's `marks-pass`, 8 MiB of generated log with 140,720 marks, Intel
/// Xeon model 207). A mask costs the same per block whatever it holds, and taking a hit from it
/// is two instructions. Past [`SPARSE_AFTER`] blocks in a row with no candidate, `memchr` finds
/// the next one, so a sparse document is crossed at `memchr`'s speed.
struct Firsts<'s> {
    s: &'s [u8],
    firsts: (u8, u8),
    /// Offset of the block `mask` covers.
    at: usize,
    /// Candidates of that block not yet returned, by bit.
    mask: u64,
}

impl<'s> Firsts<'s> {
    fn new(s: &'s [u8], firsts: (u8, u8)) -> Firsts<'s> {
        let mut f = Firsts {
            s,
            firsts,
            at: 0,
            mask: 0,
        };
        f.mask = f.block_mask();
        f
    }

    /// The candidates of the block at `at` (shorter at the end of the slice).
    #[inline(always)]
    fn block_mask(&self) -> u64 {
        let (a, b) = self.firsts;
        match self.s.get(self.at..self.at + BLOCK) {
            Some(block) => {
                let (va, vb) = (u8x16::splat(a), u8x16::splat(b));
                let mut m = 0u64;
                for (k, lane) in block.chunks_exact(16).enumerate() {
                    let mut v = [0u8; 16];
                    v.copy_from_slice(lane);
                    let v = u8x16::new(v);
                    // One compare when both marks start with the same byte (the defaults).
                    let eq = if a == b {
                        v.cmp_eq(va)
                    } else {
                        v.cmp_eq(va) | v.cmp_eq(vb)
                    };
                    // `move_mask` gives one bit per lane, in its low 16 bits.
                    m |= u64::from(eq.move_mask() as u16) << (16 * k);
                }
                m
            }
            None => self.s[self.at.min(self.s.len())..]
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c == a || c == b)
                .fold(0, |m, (i, _)| m | 1u64 << i),
        }
    }
}

impl Iterator for Firsts<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        let mut empty = 0;
        while self.mask == 0 {
            self.at += BLOCK;
            if self.at >= self.s.len() {
                return None;
            }
            self.mask = self.block_mask();
            empty += 1;
            if self.mask == 0 && empty >= SPARSE_AFTER {
                // The document is sparse here, and `memchr` crosses long stretches faster than
                // masks do (an x-P file has five marks per megabyte: 0.96 ms against 0.49 for
                // 10 MB, masks alone). The next block starts at the next candidate.
                let (a, b) = self.firsts;
                let from = self.at + BLOCK;
                let rest = self.s.get(from..).unwrap_or_default();
                let next = if a == b {
                    memchr::memchr(a, rest)
                } else {
                    memchr::memchr2(a, b, rest)
                };
                self.at = next.map_or(self.s.len(), |d| from + d);
                if self.at >= self.s.len() {
                    return None;
                }
                self.mask = self.block_mask();
            }
        }
        let bit = self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(self.at + bit)
    }
}

/// The mark at `p` of `s` (whether it is the start mark, and its length), unless the bytes there
/// are neither mark, the mark is escaped, or `p` lies inside the last mark taken; `lit` is where
/// the content after that mark starts.
#[inline(always)]
fn mark_at(fast: &Fast<'_>, s: &[u8], lit: usize, p: usize) -> Option<(bool, usize)> {
    if p < lit {
        // Inside a mark just taken: impossible for marks that do not overlap, kept as a guard.
        return None;
    }
    let (is_start, len) = match fast.words.zip(word_at(s, p)) {
        Some((words, w)) if words.0.is_in(w) => (true, words.0.len),
        Some((words, w)) if words.1.is_in(w) => (false, words.1.len),
        Some(_) => return None,
        // Near the end of `s`, or marks longer than a word.
        None if starts_with(&s[p..], fast.start) => (true, fast.start.len()),
        None if starts_with(&s[p..], fast.end) => (false, fast.end.len()),
        None => return None,
    };
    // An odd run of escapes right before the mark makes it literal content. The run cannot
    // reach into the mark before: the escape byte is in neither mark.
    if p > lit && s[p - 1] == fast.escape {
        let escapes = s[lit..p]
            .iter()
            .rev()
            .take_while(|&&b| b == fast.escape)
            .count();
        if escapes % 2 == 1 {
            return None;
        }
    }
    Some((is_start, len))
}

/// Where [`scan`] is: inside a classified part or not, and where the content not reported yet
/// starts.
struct State {
    open: bool,
    lit: usize,
}

impl State {
    /// Take the mark at `p` (an offset in `s` holding a mark's first byte, after the last one
    /// taken), if the bytes there are one and it is not escaped ([`mark_at`]).
    #[inline(always)]
    fn mark(
        &mut self,
        fast: &Fast<'_>,
        s: &[u8],
        base: u64,
        p: usize,
        sink: &mut impl FnMut(Event<'_>),
    ) -> Result<(), Misplaced> {
        let Some((is_start, len)) = mark_at(fast, s, self.lit, p) else {
            return Ok(());
        };
        if is_start == self.open {
            return Err(Misplaced);
        }
        if p > self.lit {
            sink(Event::Data {
                at: base + self.lit as u64,
                bytes: &s[self.lit..p],
            });
        }
        let at = base + p as u64;
        sink(if is_start {
            Event::Start { at }
        } else {
            Event::End { at }
        });
        self.open = is_start;
        self.lit = p + len;
        Ok(())
    }
}

/// [`scan`] gathered by a [`crate::marks::Counter`], without the events: the counts `--mode
/// auto` chooses by, the same for every input (and [`Misplaced`] where [`scan`] gives up).
///
/// On a dense document the events were most of the counting pass's time: a content run and a
/// mark reported for every mark, each taken apart again by the counter. Here a mark found
/// updates a few counters in place.
pub fn count(
    fast: &Fast<'_>,
    s: &[u8],
    step: usize,
    done: &mut impl FnMut(std::ops::Range<usize>),
) -> Result<MarkCounts, Misplaced> {
    let mut t = Tally::default();
    each_candidate(fast, s, step, done, |p| t.mark(fast, s, p))?;
    if t.open {
        return Err(Misplaced);
    }
    t.out.content_len = s.len() as u64 - t.removed;
    Ok(t.out)
}

/// Where [`count`] is, and what it has counted.
#[derive(Default)]
struct Tally {
    out: MarkCounts,
    /// Inside a classified part.
    open: bool,
    /// Bytes of the marks taken so far: a raw offset less these is a content offset.
    removed: u64,
    /// Content offset where the open part started.
    start: u64,
    /// Raw offset after the last mark taken.
    lit: usize,
}

impl Tally {
    /// Take the mark at `p`, if the bytes there are one and it is not escaped ([`mark_at`], as
    /// for [`State::mark`]).
    #[inline(always)]
    fn mark(&mut self, fast: &Fast<'_>, s: &[u8], p: usize) -> Result<(), Misplaced> {
        let Some((is_start, len)) = mark_at(fast, s, self.lit, p) else {
            return Ok(());
        };
        if is_start == self.open {
            return Err(Misplaced);
        }
        let at = p as u64 - self.removed;
        if is_start {
            self.start = at;
        } else {
            if self.out.ranges == 0 {
                self.out.starts_classified = self.start == 0;
            }
            self.out.ranges += 1;
            self.out.classified += at - self.start;
            self.out.last_end = at;
        }
        self.open = is_start;
        self.removed += len as u64;
        self.lit = p + len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::{parse_all, Collector};

    fn fast_parse(cfg: &MarkConfig, s: &[u8]) -> Option<crate::marks::ParsedMarks> {
        let fast = Fast::new(cfg)?;
        let mut col = Collector::default();
        scan(&fast, s, 0, 7, &mut |ev| col.event(ev), &mut |_| {}).ok()?;
        Some(col.finish())
    }

    #[test]
    fn the_defaults_qualify_stripping_and_overlapping_marks_do_not() {
        let d = MarkConfig::default();
        assert!(Fast::new(&d).is_some());
        assert!(Fast::new(&MarkConfig {
            strip: true,
            ..d.clone()
        })
        .is_none());
        // `<` inside the end mark could start a mark inside a mark.
        assert!(Fast::new(&MarkConfig {
            end: b"<E<".to_vec(),
            ..d.clone()
        })
        .is_none());
        assert!(Fast::new(&MarkConfig {
            escape: b"\\\\".to_vec(),
            ..d.clone()
        })
        .is_none());
        // Different first bytes are fine, a repeated one is not.
        assert!(Fast::new(&MarkConfig {
            start: b"[S]".to_vec(),
            end: b"{E}".to_vec(),
            ..d.clone()
        })
        .is_some());
        assert!(Fast::new(&MarkConfig {
            start: b"[[".to_vec(),
            end: b"]]".to_vec(),
            ..d
        })
        .is_none());
    }

    #[test]
    fn escapes_before_a_mark_decide_as_the_parser_does() {
        let cfg = MarkConfig::default();
        for doc in [
            &b"a<$S>b<$E>c"[..],
            b"\\<$S>x",
            b"\\\\<$S>x<$E>",
            b"\\\\\\<$S>x",
            b"<$S>\\<$E>y<$E>",
            b"a\\b<$S><$E>",
            b"<$S<$S>v<$E>",
            b"",
        ] {
            assert_eq!(fast_parse(&cfg, doc), parse_all(&cfg, doc).ok(), "{doc:?}");
        }
    }

    #[test]
    fn a_misplaced_mark_is_left_to_the_parser() {
        let cfg = MarkConfig::default();
        for doc in [&b"<$E>"[..], b"<$S><$S><$E>", b"x<$S>open", b"\\\\<$E>"] {
            assert!(parse_all(&cfg, doc).is_err());
            assert_eq!(fast_parse(&cfg, doc), None, "{doc:?}");
        }
    }

    proptest::proptest! {
        /// The 64-byte masks find exactly the bytes a linear search finds, in order, whatever
        /// the slice's length (whole blocks and a shorter last one) and whether the two bytes
        /// are one.
        #[test]
        fn the_masks_find_every_first_byte_in_order(
            s in proptest::collection::vec(
                proptest::prop_oneof![3 => proptest::prelude::any::<u8>(), 1 => proptest::strategy::Just(b'<')],
                0..1200,
            ),
            a in proptest::prop_oneof![proptest::strategy::Just(b'<'), proptest::prelude::any::<u8>()],
            b in proptest::prop_oneof![proptest::strategy::Just(b'>'), proptest::prelude::any::<u8>()],
            same in proptest::prelude::any::<bool>(),
        ) {
            let firsts = (a, if same { a } else { b });
            let want: Vec<usize> = s
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c == firsts.0 || c == firsts.1)
                .map(|(i, _)| i)
                .collect();
            proptest::prop_assert_eq!(Firsts::new(&s, firsts).collect::<Vec<_>>(), want);
        }
    }

    /// Every position after any stretch without candidates, short or long enough for `memchr`
    /// to take over, and at either end of a block.
    #[test]
    fn a_candidate_anywhere_after_a_stretch_without_any_is_found() {
        let len = BLOCK * (SPARSE_AFTER + 3) + 5;
        for p in 0..len {
            for with_first in [false, true] {
                let mut s = vec![b'x'; len];
                s[p] = b'<';
                let mut want = vec![p];
                if with_first && p > 0 {
                    s[0] = b'>';
                    want.insert(0, 0);
                }
                assert_eq!(
                    Firsts::new(&s, (b'<', b'>')).collect::<Vec<_>>(),
                    want,
                    "{p}"
                );
            }
        }
    }

    /// A word matches its mark's bytes and nothing that differs in any bit of them, whatever
    /// follows the mark.
    #[test]
    fn a_mark_word_tells_every_bit_of_its_mark() {
        let bytes = *b"<$S>abcde";
        for len in 1..=8 {
            let mark = &bytes[..len];
            let word = Word::new(mark).expect("fits a word");
            let at = |b: &[u8]| word_at(b, 0).expect("8 bytes");
            assert!(word.is_in(at(&bytes[..8])));
            for bit in 0..8 * len {
                let mut other = bytes;
                other[bit / 8] ^= 1 << (bit % 8);
                assert!(!word.is_in(at(&other[..8])), "{len} {bit}");
            }
            // Bytes after the mark do not count.
            let mut after = bytes;
            after[len] ^= 0xff;
            assert!(word.is_in(at(&after[..8])));
        }
        assert!(Word::new(b"").is_none() && Word::new(b"123456789").is_none());
    }

    #[test]
    fn every_byte_is_released_once_in_order() {
        let cfg = MarkConfig::default();
        let fast = Fast::new(&cfg).unwrap();
        let doc: Vec<u8> = (0..200)
            .flat_map(|i| format!("t{i} <$S>s{i}<$E> ").into_bytes())
            .collect();
        let mut seen = Vec::new();
        scan(&fast, &doc, 0, 100, &mut |_| {}, &mut |r| seen.push(r)).unwrap();
        let mut next = 0;
        for r in &seen {
            assert_eq!(r.start, next);
            next = r.end;
        }
        assert_eq!(next, doc.len());
        assert!(seen.len() > 10);
    }
}
