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
//!   another, so one `memchr` iterator over those first bytes visits every mark in order;
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
//! 14.1 ms against 15.0, 40 alternating rounds; `auto`'s within the noise).

use crate::marks::{starts_with, Event, MarkConfig};

/// The mark strings in the form [`scan`] uses, for a configuration it handles.
#[derive(Debug, Clone)]
pub struct Fast<'a> {
    start: &'a [u8],
    end: &'a [u8],
    escape: u8,
    /// First bytes of the two marks (equal for the defaults, `<`).
    firsts: (u8, u8),
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
    let step = step.max(1);
    let mut w = 0;
    while w < s.len() {
        let to = (w + step).min(s.len());
        // Candidates start in this window; a mark may run past its end.
        let window = &s[w..to];
        if fast.firsts.0 == fast.firsts.1 {
            let c = memchr::memchr_iter(fast.firsts.0, window).map(|d| w + d);
            state.marks(fast, s, base, c, sink)?;
        } else {
            let c = memchr::memchr2_iter(fast.firsts.0, fast.firsts.1, window).map(|d| w + d);
            state.marks(fast, s, base, c, sink)?;
        }
        done(w..to);
        w = to;
    }
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

/// Where [`scan`] is: inside a classified part or not, and where the content not reported yet
/// starts.
struct State {
    open: bool,
    lit: usize,
}

impl State {
    /// Take the marks at the `candidates` (offsets in `s`, increasing, each holding a mark's
    /// first byte).
    fn marks(
        &mut self,
        fast: &Fast<'_>,
        s: &[u8],
        base: u64,
        candidates: impl Iterator<Item = usize>,
        sink: &mut impl FnMut(Event<'_>),
    ) -> Result<(), Misplaced> {
        for p in candidates {
            if p < self.lit {
                // Inside a mark just taken: impossible for marks that do not overlap, kept as
                // a guard.
                continue;
            }
            let rest = &s[p..];
            let (is_start, len) = if starts_with(rest, fast.start) {
                (true, fast.start.len())
            } else if starts_with(rest, fast.end) {
                (false, fast.end.len())
            } else {
                continue;
            };
            // An odd run of escapes right before the mark makes it literal content. The run
            // cannot reach into the mark before: the escape byte is in neither mark.
            let escapes = s[self.lit..p]
                .iter()
                .rev()
                .take_while(|&&b| b == fast.escape)
                .count();
            if escapes % 2 == 1 {
                continue;
            }
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
        }
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
