//! Sieve and integrate (thesis §3.1-3.2, Figures 3.1-3.4).
//!
//! `sieve` separates a document into the *secure data list* (classified segments) and the
//! *non-secure data list* (the rest), both in document order, plus the [`Layout`] that records
//! which list each segment came from: the thesis's First List Tag and the alternation of the two
//! lists, carried in the manifest instead of in-band strings. `integrate` interleaves the lists
//! back, with the marks restored (so the receiver's file is byte-identical to the sender's) or
//! stripped (the thesis's output).
//!
//! The transport does not call `integrate` on whole documents: it writes every received piece
//! straight to its place in the output file, using a [`Placement`] computed from the same layout.
//! Integration then costs nothing but a check that every byte arrived.

use std::borrow::Cow;

use thiserror::Error;

use crate::layout::{Kind, Layout};
use crate::marks::{self, MarkConfig, MarkError};
use crate::ranges::ClassifiedRanges;

/// The two sieved data lists and the layout that interleaves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sieved<'a> {
    pub layout: Layout,
    /// Classified segments in document order.
    pub secure: Vec<Cow<'a, [u8]>>,
    /// Non-classified segments in document order.
    pub plain: Vec<Cow<'a, [u8]>>,
}

impl Sieved<'_> {
    /// The segments of one kind.
    pub fn list(&self, kind: Kind) -> &[Cow<'_, [u8]>] {
        match kind {
            Kind::Secure => &self.secure,
            Kind::Plain => &self.plain,
        }
    }
}

/// Sieve a document whose classified ranges are known. Zero-copy: segments borrow `doc`.
pub fn sieve<'a>(doc: &'a [u8], ranges: &ClassifiedRanges) -> Sieved<'a> {
    let layout = Layout::from_ranges(doc.len() as u64, ranges.as_slice());
    let mut secure = Vec::with_capacity(ranges.as_slice().len());
    let mut plain = Vec::with_capacity(ranges.as_slice().len() + 1);
    let mut pos = 0usize;
    for (kind, len) in layout.segments() {
        let seg = Cow::Borrowed(&doc[pos..pos + len as usize]);
        pos += len as usize;
        match kind {
            Kind::Secure => secure.push(seg),
            Kind::Plain => plain.push(seg),
        }
    }
    Sieved {
        layout,
        secure,
        plain,
    }
}

/// Sieve a document marked inline. Segments borrow `doc` unless an escape had to be resolved
/// inside them (only with `cfg.strip`), in which case that segment is copied.
pub fn sieve_marked<'a>(doc: &'a [u8], cfg: &MarkConfig) -> Result<Sieved<'a>, MarkError> {
    let parsed = marks::parse_all(cfg, doc)?;
    let layout = parsed.layout();
    let mut secure = Vec::with_capacity(parsed.ranges.len());
    let mut plain = Vec::with_capacity(parsed.ranges.len() + 1);
    // Walk segments (content coordinates) and extents (raw runs) together.
    let mut ext = parsed.extents.iter().copied().peekable();
    let mut ext_used = 0u64; // bytes of the current extent already consumed
    for (kind, len) in layout.segments() {
        let mut need = len;
        let mut seg: Option<Cow<'a, [u8]>> = None;
        while need > 0 {
            let Some(e) = ext.peek().copied() else { break };
            let take = (e.len - ext_used).min(need);
            let start = (e.raw + ext_used) as usize;
            let bytes = &doc[start..start + take as usize];
            seg = Some(match seg {
                None => Cow::Borrowed(bytes),
                Some(prev) => {
                    let mut owned = prev.into_owned();
                    owned.extend_from_slice(bytes);
                    Cow::Owned(owned)
                }
            });
            need -= take;
            ext_used += take;
            if ext_used == e.len {
                ext.next();
                ext_used = 0;
            }
        }
        let seg = seg.unwrap_or(Cow::Borrowed(&[]));
        match kind {
            Kind::Secure => secure.push(seg),
            Kind::Plain => plain.push(seg),
        }
    }
    Ok(Sieved {
        layout,
        secure,
        plain,
    })
}

/// The two mark strings to put back around each classified segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marks<'m> {
    pub start: &'m [u8],
    pub end: &'m [u8],
}

/// The lists do not match the layout.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IntegrateError {
    #[error("the layout has {expected} {kind:?} segments but {got} were received")]
    SegmentCount {
        kind: Kind,
        expected: usize,
        got: usize,
    },
    #[error("{kind:?} segment {index} should be {expected} bytes but is {got}")]
    SegmentLen {
        kind: Kind,
        index: usize,
        expected: u64,
        got: u64,
    },
    #[error(transparent)]
    Overflow(#[from] OutputOverflow),
}

/// Interleave the two lists back into the document (Figure 3.4), writing `marks` around every
/// classified segment if given. Allocates the output once.
pub fn integrate<S: AsRef<[u8]>, P: AsRef<[u8]>>(
    layout: &Layout,
    secure: &[S],
    plain: &[P],
    marks: Option<Marks<'_>>,
) -> Result<Vec<u8>, IntegrateError> {
    let placement = Placement::new(
        layout,
        marks.map(|m| (m.start.len() as u64, m.end.len() as u64)),
    )?;
    let mut out = Vec::with_capacity(placement.output_len() as usize);
    let (mut si, mut pi) = (0usize, 0usize);
    for (kind, len) in layout.segments() {
        let (seg, index) = match kind {
            Kind::Secure => {
                si += 1;
                (secure.get(si - 1).map(AsRef::as_ref), si - 1)
            }
            Kind::Plain => {
                pi += 1;
                (plain.get(pi - 1).map(AsRef::as_ref), pi - 1)
            }
        };
        let Some(seg) = seg else {
            let got = if kind == Kind::Secure {
                secure.len()
            } else {
                plain.len()
            };
            return Err(IntegrateError::SegmentCount {
                kind,
                expected: layout.lens_of(kind).len(),
                got,
            });
        };
        if seg.len() as u64 != len {
            return Err(IntegrateError::SegmentLen {
                kind,
                index,
                expected: len,
                got: seg.len() as u64,
            });
        }
        if let (Kind::Secure, Some(m)) = (kind, marks) {
            out.extend_from_slice(m.start);
            out.extend_from_slice(seg);
            out.extend_from_slice(m.end);
        } else {
            out.extend_from_slice(seg);
        }
    }
    for (kind, used) in [(Kind::Secure, si), (Kind::Plain, pi)] {
        let got = if kind == Kind::Secure {
            secure.len()
        } else {
            plain.len()
        };
        if got != used {
            return Err(IntegrateError::SegmentCount {
                kind,
                expected: used,
                got,
            });
        }
    }
    Ok(out)
}

/// One contiguous run of a stream and where it lands in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Offset within the stream of the run's kind.
    pub stream: u64,
    /// Offset in the output document.
    pub output: u64,
    pub len: u64,
}

/// Integration by position: where every byte of either stream goes in the output.
///
/// Built from the manifest alone, so each receive loop can write what it reads straight to its
/// final offset, in any order, from any channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    runs: [Vec<Run>; 2],
    stream_len: [u64; 2],
    /// Output offsets of start and end marks, if marks are restored.
    mark_offsets: Vec<(u64, bool)>,
    output_len: u64,
}

/// A piece of a stream that the layout does not have.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind:?} bytes {offset}..{end} are outside the {kind:?} stream of {len} bytes")]
pub struct OutOfStream {
    pub kind: Kind,
    pub offset: u64,
    pub end: u64,
    pub len: u64,
}

/// A layout whose output (content plus restored marks) would not fit in 64 bits.
///
/// A manifest is input from the network: its segment lengths and mark lengths are summed with
/// checked arithmetic, so that a wrapped total can never pass a size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the document's length (its segments and restored marks) overflows 64 bits")]
pub struct OutputOverflow;

/// Length of the document a layout describes once `marks` (lengths of the start and end marks,
/// or `None`) are restored around its classified segments: what [`Placement::new`] would give as
/// [`Placement::output_len`], without building the placement.
pub fn output_len(layout: &Layout, marks: Option<(u64, u64)>) -> Result<u64, OutputOverflow> {
    let mut out = 0u64;
    for (kind, len) in layout.segments() {
        out = out.checked_add(len).ok_or(OutputOverflow)?;
        if let (Kind::Secure, Some((s, e))) = (kind, marks) {
            out = out
                .checked_add(s)
                .and_then(|o| o.checked_add(e))
                .ok_or(OutputOverflow)?;
        }
    }
    Ok(out)
}

impl Placement {
    /// `marks`: lengths of the start and end marks to restore, or `None` to strip them.
    pub fn new(layout: &Layout, marks: Option<(u64, u64)>) -> Result<Placement, OutputOverflow> {
        let mut runs: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
        let mut stream_len = [0u64; 2];
        let mut mark_offsets = Vec::new();
        let mut out = 0u64;
        for (kind, len) in layout.segments() {
            let restore = if kind == Kind::Secure { marks } else { None };
            if let Some((s, _)) = restore {
                mark_offsets.push((out, true));
                out = out.checked_add(s).ok_or(OutputOverflow)?;
            }
            if len > 0 {
                runs[kind.index()].push(Run {
                    stream: stream_len[kind.index()],
                    output: out,
                    len,
                });
            }
            // Stream lengths are parts of the output length, so they cannot overflow if it does not.
            stream_len[kind.index()] += len;
            out = out.checked_add(len).ok_or(OutputOverflow)?;
            if let Some((_, e)) = restore {
                mark_offsets.push((out, false));
                out = out.checked_add(e).ok_or(OutputOverflow)?;
            }
        }
        Ok(Placement {
            runs,
            stream_len,
            mark_offsets,
            output_len: out,
        })
    }

    /// Segments of the layout this placement was built from (for memory accounting).
    pub fn run_count(&self) -> usize {
        self.runs[0].len() + self.runs[1].len() + self.mark_offsets.len()
    }

    /// Length of the integrated document.
    pub fn output_len(&self) -> u64 {
        self.output_len
    }

    pub fn stream_len(&self, kind: Kind) -> u64 {
        self.stream_len[kind.index()]
    }

    /// Where the marks go: `(output offset, is_start)`.
    pub fn mark_offsets(&self) -> &[(u64, bool)] {
        &self.mark_offsets
    }

    /// Call `f(output_offset, piece_offset, len)` for every run of the stream piece
    /// `offset..offset + len`, where `piece_offset` is relative to the piece. O(log segments).
    pub fn place(
        &self,
        kind: Kind,
        offset: u64,
        len: u64,
        mut f: impl FnMut(u64, u64, u64),
    ) -> Result<(), OutOfStream> {
        let total = self.stream_len[kind.index()];
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= total)
            .ok_or(OutOfStream {
                kind,
                offset,
                end: offset.saturating_add(len),
                len: total,
            })?;
        let runs = &self.runs[kind.index()];
        let mut i = runs.partition_point(|r| r.stream + r.len <= offset);
        let mut pos = offset;
        while pos < end {
            let r = runs[i];
            let within = pos - r.stream;
            let take = (r.len - within).min(end - pos);
            f(r.output + within, pos - offset, take);
            pos += take;
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_3_1_example() {
        let doc = b"Name: <$S>Alice<$E>, card <$S>4111<$E>.";
        let s = sieve_marked(doc, &MarkConfig::default()).unwrap();
        assert_eq!(s.layout.first, Kind::Plain);
        let sec: Vec<&[u8]> = s.secure.iter().map(|c| c.as_ref()).collect();
        let pl: Vec<&[u8]> = s.plain.iter().map(|c| c.as_ref()).collect();
        assert_eq!(sec, vec![&b"Alice"[..], b"4111"]);
        assert_eq!(pl, vec![&b"Name: "[..], b", card ", b"."]);
        let m = Marks {
            start: b"<$S>",
            end: b"<$E>",
        };
        assert_eq!(
            integrate(&s.layout, &s.secure, &s.plain, Some(m)).unwrap(),
            doc
        );
        assert_eq!(
            integrate(&s.layout, &s.secure, &s.plain, None).unwrap(),
            b"Name: Alice, card 4111."
        );
    }

    #[test]
    fn integrate_rejects_mismatched_lists() {
        let layout = Layout {
            first: Kind::Plain,
            lens: vec![2, 3],
        };
        let e = integrate(&layout, &[b"abc"], &[b"a"], None).unwrap_err();
        assert_eq!(
            e,
            IntegrateError::SegmentLen {
                kind: Kind::Plain,
                index: 0,
                expected: 2,
                got: 1
            }
        );
        let e = integrate::<&[u8], &[u8]>(&layout, &[], &[b"ab"], None).unwrap_err();
        assert!(matches!(
            e,
            IntegrateError::SegmentCount {
                kind: Kind::Secure,
                ..
            }
        ));
        let e = integrate(&layout, &[&b"abc"[..], b"x"], &[b"ab"], None).unwrap_err();
        assert!(matches!(
            e,
            IntegrateError::SegmentCount {
                kind: Kind::Secure,
                ..
            }
        ));
    }

    #[test]
    fn placement_refuses_outputs_that_overflow() {
        // Segment lengths that fit in 64 bits, with marks that push the total past it.
        let layout = Layout {
            first: Kind::Secure,
            lens: vec![u64::MAX - 4],
        };
        assert!(Placement::new(&layout, None).is_ok());
        assert_eq!(Placement::new(&layout, Some((4, 4))), Err(OutputOverflow));
        let layout = Layout {
            first: Kind::Plain,
            lens: vec![u64::MAX, 1],
        };
        assert_eq!(Placement::new(&layout, None), Err(OutputOverflow));
    }

    #[test]
    fn placement_maps_stream_pieces() {
        // plain 2, secure 3, plain 1, secure 0, plain 4; marks of 4 bytes each restored.
        let layout = Layout {
            first: Kind::Plain,
            lens: vec![2, 3, 1, 0, 4],
        };
        let p = Placement::new(&layout, Some((4, 4))).unwrap();
        assert_eq!(p.output_len(), 10 + 16);
        let mut got = Vec::new();
        p.place(Kind::Plain, 1, 5, |o, w, l| got.push((o, w, l)))
            .unwrap();
        // plain stream: [0,2)->out 0, [2,3)->out 2+4+3+4=13, [3,7)->out 14+8=22
        assert_eq!(got, vec![(1, 0, 1), (13, 1, 1), (22, 2, 3)]);
        assert!(p.place(Kind::Secure, 2, 2, |_, _, _| {}).is_err());
        assert_eq!(
            p.mark_offsets(),
            &[(2, true), (9, false), (14, true), (18, false)]
        );
    }
}
