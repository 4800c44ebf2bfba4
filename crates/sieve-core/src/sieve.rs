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
use crate::message::golomb::{EncodedLens, LensCode, LensDecoder};
use crate::ranges::ClassifiedRanges;

/// The two sieved data lists and the layout that interleaves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sieved<'a> {
    /// Every segment's kind and length in document order: what the manifest carries so the
    /// receiver can integrate the two lists.
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
    /// Written before each classified segment, e.g. `<$S>`.
    pub start: &'m [u8],
    /// Written after each classified segment, e.g. `<$E>`.
    pub end: &'m [u8],
}

/// The lists do not match the layout.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IntegrateError {
    /// A list has more or fewer segments than the layout has of its kind.
    #[error("the layout has {expected} {kind:?} segments but {got} were received")]
    SegmentCount {
        /// Which list.
        kind: Kind,
        /// Segments of that kind in the layout.
        expected: usize,
        /// Segments in the list given.
        got: usize,
    },
    /// A segment's length differs from the layout's.
    #[error("{kind:?} segment {index} should be {expected} bytes but is {got}")]
    SegmentLen {
        /// Which list.
        kind: Kind,
        /// Index of the segment within its list (not within the document).
        index: usize,
        /// Its length in the layout, in bytes.
        expected: u64,
        /// Its length as given, in bytes.
        got: u64,
    },
    /// The integrated document, marks included, would be longer than `u64::MAX` bytes.
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

/// Integration by position: where every byte of either stream goes in the output.
///
/// Built from the manifest alone, so each receive loop can write what it reads straight to its
/// final offset, in any order, from any channel.
///
/// Compact, because a manifest is input from the network and documents may have millions of
/// segments (a classified field on every line of a CSV): the segment lengths are kept in the
/// Exp-Golomb code they travel in ([`crate::message::golomb`], about a byte per segment or
/// less), with a checkpoint every `CHECKPOINT` segments from which decoding resumes, instead of
/// the 40 bytes that a run and a mark offset per segment would take. [`Placement::place`] costs
/// a binary search and at most `CHECKPOINT` decoded lengths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    first: Kind,
    /// The code of [`Placement::lens`].
    code: LensCode,
    /// Segment lengths in document order, in `code`.
    lens: Vec<u8>,
    segments: usize,
    /// Lengths of the start and end marks restored around each classified segment.
    marks: Option<(u64, u64)>,
    checkpoints: Vec<Checkpoint>,
    stream_len: [u64; 2],
    /// The longest segment of each kind.
    longest: [u64; 2],
    output_len: u64,
}

/// Where decoding of [`Placement::lens`] resumes: at segment `seg`, bit `at` of the code,
/// with the streams and the output at these offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Checkpoint {
    seg: usize,
    at: u64,
    stream: [u64; 2],
    output: u64,
}

/// Segments between two checkpoints of a [`Placement`].
pub(crate) const CHECKPOINT: usize = 32;

/// One segment as a [`Placement`] walks them.
#[derive(Debug, Clone, Copy)]
struct Seg {
    kind: Kind,
    len: u64,
    /// Offset in its stream.
    stream: u64,
    /// Offset of its first content byte in the output (after its start mark, if any).
    output: u64,
}

/// Decodes segments from a checkpoint on.
struct Walk<'p> {
    p: &'p Placement,
    lens: LensDecoder<'p>,
    seg: usize,
    stream: [u64; 2],
    output: u64,
}

impl Iterator for Walk<'_> {
    type Item = Seg;

    /// Inlined into the loops that walk, so that the decoder's state stays in registers
    /// between segments instead of going through memory at every call.
    #[inline]
    fn next(&mut self) -> Option<Seg> {
        if self.seg >= self.p.segments {
            return None;
        }
        // Lengths written by `new` or checked by the manifest's parser.
        let (kind, len) = self.lens.next_len().ok()?;
        let (start, end) = self.p.marks_around(kind);
        let seg = Seg {
            kind,
            len,
            stream: self.stream[kind.index()],
            output: self.output + start,
        };
        self.seg += 1;
        self.stream[kind.index()] += len;
        self.output += start + len + end;
        Some(seg)
    }
}

/// Heap bytes of the [`Placement`] of a manifest of `segments` segments whose lengths take
/// `code_bytes` bytes, computed without building it: what a receiver charges before it accepts
/// a manifest.
pub(crate) fn placement_bytes(segments: usize, code_bytes: usize) -> u64 {
    let checkpoints = segments / CHECKPOINT + 1;
    (code_bytes + checkpoints * std::mem::size_of::<Checkpoint>()) as u64
}

/// A piece of a stream that the layout does not have.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind:?} bytes {offset}..{end} are outside the {kind:?} stream of {len} bytes")]
pub struct OutOfStream {
    /// Which stream the piece claims to belong to.
    pub kind: Kind,
    /// Offset of the piece's first byte in that stream (not in the output document).
    pub offset: u64,
    /// Stream offset just past its last byte (end-exclusive; saturated if it overflows).
    pub end: u64,
    /// Length of that stream in bytes, from the layout.
    pub len: u64,
}

/// A layout whose output (content plus restored marks) would not fit in 64 bits.
///
/// A manifest is input from the network: its segment lengths and mark lengths are summed with
/// checked arithmetic, so that a wrapped total can never pass a size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("the document's length (its segments and restored marks) overflows 64 bits")]
pub struct OutputOverflow;

/// What one pass over a layout's lengths gives its [`Placement`]: checkpoints, sums and the
/// longest segments.
struct Walked {
    segments: usize,
    checkpoints: Vec<Checkpoint>,
    stream_len: [u64; 2],
    longest: [u64; 2],
    output_len: u64,
}

impl Walked {
    /// Take `segments` lengths from `next`, in order, each with the bit position of its
    /// codeword: one pass that keeps a checkpoint every [`CHECKPOINT`] segments and checks that
    /// the output length, with `marks` restored, fits.
    fn over(
        segments: usize,
        marks: Option<(u64, u64)>,
        mut next: impl FnMut() -> Result<(u64, Kind, u64), OutputOverflow>,
    ) -> Result<Walked, OutputOverflow> {
        let mut w = Walked {
            segments,
            checkpoints: Vec::with_capacity(segments / CHECKPOINT + 1),
            stream_len: [0; 2],
            longest: [0; 2],
            output_len: 0,
        };
        let mut out = 0u64;
        for i in 0..segments {
            let (at, kind, len) = next()?;
            if i % CHECKPOINT == 0 {
                w.checkpoints.push(Checkpoint {
                    seg: i,
                    at,
                    stream: w.stream_len,
                    output: out,
                });
            }
            let (start, end) = marks_around(marks, kind);
            out = out
                .checked_add(start)
                .and_then(|o| o.checked_add(len))
                .and_then(|o| o.checked_add(end))
                .ok_or(OutputOverflow)?;
            // Stream lengths are parts of the output length, so they cannot overflow if it does not.
            w.stream_len[kind.index()] += len;
            w.longest[kind.index()] = w.longest[kind.index()].max(len);
        }
        if w.checkpoints.is_empty() {
            w.checkpoints.push(Checkpoint {
                seg: 0,
                at: 0,
                stream: [0; 2],
                output: 0,
            });
        }
        w.output_len = out;
        Ok(w)
    }

    fn into_placement(
        self,
        first: Kind,
        code: LensCode,
        lens: Vec<u8>,
        marks: Option<(u64, u64)>,
    ) -> Placement {
        Placement {
            first,
            code,
            lens,
            segments: self.segments,
            marks,
            checkpoints: self.checkpoints,
            stream_len: self.stream_len,
            longest: self.longest,
            output_len: self.output_len,
        }
    }
}

/// Mark lengths before and after a segment of `kind`, `marks` being restored.
fn marks_around(marks: Option<(u64, u64)>, kind: Kind) -> (u64, u64) {
    match (kind, marks) {
        (Kind::Secure, Some(m)) => m,
        _ => (0, 0),
    }
}

impl Placement {
    /// `marks`: lengths of the start and end marks to restore, or `None` to strip them.
    ///
    /// The lengths are encoded in the same pass that lays the checkpoints, each checkpoint at
    /// the bit where the encoder stands: a sender builds the placement of every document it
    /// sends, and for a dense one (hundreds of thousands of segments) decoding them back from
    /// the code cost as much as encoding, and a separate pass to count their bits most of that.
    pub fn new(layout: &Layout, marks: Option<(u64, u64)>) -> Result<Placement, OutputOverflow> {
        let (code, bits) = LensCode::choose_with_bits(layout);
        let mut lens = Vec::with_capacity(usize::try_from(bits.div_ceil(8)).unwrap_or(0));
        let mut encoder = code.encoder(&mut lens);
        let mut segments = layout.segments();
        let walked = Walked::over(layout.lens.len(), marks, || {
            let (kind, len) = segments.next().ok_or(OutputOverflow)?;
            let here = encoder.bit_pos();
            encoder.put(kind, len);
            Ok((here, kind, len))
        })?;
        encoder.finish();
        Ok(walked.into_placement(layout.first, code, lens, marks))
    }

    /// The placement of a manifest as it travelled: its code is kept as it is, with no expanded
    /// copy of its lengths on the way.
    pub fn from_manifest(
        m: &crate::message::DocRef<'_>,
        marks: Option<(u64, u64)>,
    ) -> Result<Placement, OutputOverflow> {
        Placement::from_code(m.first, m.code, m.lens.to_vec(), m.segments, marks)
    }

    /// Build a placement over `segments` lengths held in `code` in `lens`, decoding them.
    fn from_code(
        first: Kind,
        code: LensCode,
        lens: Vec<u8>,
        segments: usize,
        marks: Option<(u64, u64)>,
    ) -> Result<Placement, OutputOverflow> {
        let mut dec = code.decoder(&lens, first);
        let walked = Walked::over(segments, marks, || {
            let at = dec.bit_pos();
            // Lengths written by `new` or checked by the manifest's parser.
            let (kind, len) = dec.next_len().map_err(|_| OutputOverflow)?;
            Ok((at, kind, len))
        })?;
        Ok(walked.into_placement(first, code, lens, marks))
    }

    /// Mark lengths before and after a segment of `kind`.
    fn marks_around(&self, kind: Kind) -> (u64, u64) {
        marks_around(self.marks, kind)
    }

    fn walk_from(&self, c: &Checkpoint) -> Walk<'_> {
        Walk {
            p: self,
            lens: self.code.decoder_at(&self.lens, self.first, c.at, c.seg),
            seg: c.seg,
            stream: c.stream,
            output: c.output,
        }
    }

    /// The lengths as the document's manifest carries them: the code this placement decodes,
    /// for a sender to announce without choosing and encoding it again.
    pub fn encoded_lens(&self) -> EncodedLens {
        EncodedLens::from_parts(self.code, self.lens.clone())
    }

    /// Length of the integrated document.
    pub fn output_len(&self) -> u64 {
        self.output_len
    }

    /// Length of the stream of `kind`: the sum of the layout's segments of that kind, marks
    /// excluded.
    pub fn stream_len(&self, kind: Kind) -> u64 {
        self.stream_len[kind.index()]
    }

    /// Length of the layout's content: both streams.
    pub fn content_len(&self) -> u64 {
        self.stream_len[0] + self.stream_len[1]
    }

    /// Length of the document once `marks` (lengths of the start and end marks, or `None`) are
    /// restored around every classified segment: what the placement of the same layout with
    /// those marks gives as [`Placement::output_len`], from the sums this one holds instead of
    /// another pass over the segments. The sum is checked as a whole: its terms are all
    /// positive, so it overflows exactly when adding them one by one would.
    pub fn output_len_with(&self, marks: Option<(u64, u64)>) -> Result<u64, OutputOverflow> {
        let Some((start, end)) = marks else {
            return Ok(self.content_len());
        };
        // Segments alternate, the first of kind `first`.
        let classified = match self.first {
            Kind::Secure => self.segments.div_ceil(2),
            Kind::Plain => self.segments / 2,
        } as u64;
        start
            .checked_add(end)
            .and_then(|m| m.checked_mul(classified))
            .and_then(|m| m.checked_add(self.content_len()))
            .ok_or(OutputOverflow)
    }

    /// Length of the longest segment of `kind` (0 if it has none): a caller that cuts a stream
    /// only where long runs begin (the cleartext MAC's units do) can tell without walking the
    /// layout that a document has none.
    pub fn longest(&self, kind: Kind) -> u64 {
        self.longest[kind.index()]
    }

    /// Check that the piece `offset..offset + len` lies within the stream of `kind`; returns
    /// its end.
    pub fn check_piece(&self, kind: Kind, offset: u64, len: u64) -> Result<u64, OutOfStream> {
        let total = self.stream_len[kind.index()];
        offset
            .checked_add(len)
            .filter(|&e| e <= total)
            .ok_or(OutOfStream {
                kind,
                offset,
                end: offset.saturating_add(len),
                len: total,
            })
    }

    /// Segments of the layout.
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Heap bytes this placement holds.
    pub fn heap_bytes(&self) -> u64 {
        (self.lens.capacity() + self.checkpoints.capacity() * std::mem::size_of::<Checkpoint>())
            as u64
    }

    /// Where the marks go, in output order: `(output offset, is_start)`; nothing when they are
    /// stripped.
    pub fn mark_offsets(&self) -> impl Iterator<Item = (u64, bool)> + '_ {
        let start = self.marks.map_or(0, |m| m.0);
        let walk = self
            .marks
            .and(self.checkpoints.first())
            .map(|c| self.walk_from(c));
        walk.into_iter().flatten().flat_map(move |s| {
            (s.kind == Kind::Secure)
                .then(|| [(s.output - start, true), (s.output + s.len, false)])
                .into_iter()
                .flatten()
        })
    }

    /// Call `f(output_offset, piece_offset, len)` for every run of the stream piece
    /// `offset..offset + len`, where `piece_offset` is relative to the piece. A binary search
    /// and at most `CHECKPOINT` decoded lengths before the first run.
    pub fn place(
        &self,
        kind: Kind,
        offset: u64,
        len: u64,
        mut f: impl FnMut(u64, u64, u64),
    ) -> Result<(), OutOfStream> {
        let end = self.check_piece(kind, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // The last checkpoint at or before the piece's start in its stream.
        let i = self
            .checkpoints
            .partition_point(|c| c.stream[kind.index()] <= offset)
            .saturating_sub(1);
        let mut pos = offset;
        for s in self.walk_from(&self.checkpoints[i]) {
            if pos >= end {
                break;
            }
            if s.kind != kind || s.stream + s.len <= pos {
                continue;
            }
            let within = pos - s.stream;
            let take = (s.len - within).min(end - pos);
            f(s.output + within, pos - offset, take);
            pos += take;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A sender's placement, whose checkpoints are laid where its encoder stands as it writes
        /// the code, is the one a receiver decodes from that code: same code bytes,
        /// checkpoints, sums and longest runs.
        #[test]
        fn counted_checkpoints_are_the_decoded_ones(
            lens in proptest::collection::vec(
                proptest::prop_oneof![8 => 0u64..64, 4 => 0u64..100_000, 1 => (1u64 << 40)..(1 << 50)],
                0..300),
            secure_first in proptest::bool::ANY,
            marks in proptest::option::of((1u64..6, 1u64..6)),
        ) {
            let first = if secure_first { Kind::Secure } else { Kind::Plain };
            let layout = Layout { first, lens };
            let built = Placement::new(&layout, marks);
            proptest::prop_assert!(built.is_ok());
            let code = LensCode::choose(&layout);
            let mut bytes = Vec::new();
            code.encode(&layout, &mut bytes);
            let decoded = Placement::from_code(first, code, bytes, layout.lens.len(), marks);
            proptest::prop_assert_eq!(built, decoded);
        }

        /// The output length a placement without marks works out for some marks is the one the
        /// placement built with those marks has, and it overflows exactly when that one does.
        #[test]
        fn output_len_with_marks_is_the_marked_placements(
            lens in proptest::collection::vec(
                proptest::prop_oneof![8 => 0u64..64, 1 => (u64::MAX / 8)..=u64::MAX / 4],
                0..40),
            secure_first in proptest::bool::ANY,
            marks in proptest::option::of(proptest::prop_oneof![
                4 => (0u64..6, 0u64..6),
                1 => (0u64..=u64::MAX / 8, 0u64..=u64::MAX / 8),
            ]),
        ) {
            let first = if secure_first { Kind::Secure } else { Kind::Plain };
            let layout = Layout { first, lens };
            let Ok(plain) = Placement::new(&layout, None) else {
                return Ok(());
            };
            let marked = Placement::new(&layout, marks).map(|p| p.output_len());
            proptest::prop_assert_eq!(plain.output_len_with(marks), marked);
        }
    }

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
            p.mark_offsets().collect::<Vec<_>>(),
            vec![(2, true), (9, false), (14, true), (18, false)]
        );
    }
}
