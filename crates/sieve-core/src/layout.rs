//! The layout of a sieved document: which byte runs are classified, in document order.
//!
//! This is what the thesis's two *sieved data lists* plus the `<!First!>` tag encode (§3.1):
//! segments strictly alternate between the two lists, so a layout is the kind of the first segment
//! and the length of every segment. The layout travels inside TLS in the document manifest; the
//! receiver derives from it where every byte of either stream belongs in the output.

use std::ops::Range;

/// Which list, and therefore which kind of channel, a segment belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Non-classified bytes: the non-secure data list, sent over plain TCP.
    Plain,
    /// Classified bytes: the secure data list, sent over TLS.
    Secure,
}

impl Kind {
    /// The other kind.
    pub fn other(self) -> Kind {
        match self {
            Kind::Plain => Kind::Secure,
            Kind::Secure => Kind::Plain,
        }
    }

    /// A stable index (0 = plain, 1 = secure) for arrays indexed by kind.
    pub fn index(self) -> usize {
        match self {
            Kind::Plain => 0,
            Kind::Secure => 1,
        }
    }
}

/// Segments in document order, alternating between the two kinds starting with `first`.
///
/// Empty segments are legal and meaningful: `<$S><$E>` is an empty classified segment and
/// `<$E><$S>` leaves an empty non-classified segment between two classified ones, exactly as the
/// thesis's sieve records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Kind of the first segment (the thesis's First List Tag). Irrelevant when there are no segments.
    pub first: Kind,
    /// Length of every segment, in document order.
    pub lens: Vec<u64>,
}

impl Layout {
    /// A layout with no segments (an empty document).
    pub fn empty() -> Layout {
        Layout {
            first: Kind::Plain,
            lens: Vec::new(),
        }
    }

    /// The whole document as one segment of `kind` (secure-only mode uses `Kind::Secure`).
    pub fn whole(kind: Kind, len: u64) -> Layout {
        Layout {
            first: kind,
            lens: vec![len],
        }
    }

    /// Kind of segment `i`.
    pub(crate) fn kind_of(&self, i: usize) -> Kind {
        if i.is_multiple_of(2) {
            self.first
        } else {
            self.first.other()
        }
    }

    /// Iterator over `(kind, len)` in document order.
    pub fn segments(&self) -> impl Iterator<Item = (Kind, u64)> + '_ {
        self.lens
            .iter()
            .enumerate()
            .map(|(i, &l)| (self.kind_of(i), l))
    }

    /// Lengths of the segments of one kind, in order: the sieved data list of that kind.
    pub fn lens_of(&self, kind: Kind) -> Vec<u64> {
        self.segments()
            .filter(|(k, _)| *k == kind)
            .map(|(_, l)| l)
            .collect()
    }

    /// Total bytes of one kind (the length of that kind's stream).
    pub fn stream_len(&self, kind: Kind) -> u64 {
        self.segments()
            .filter(|(k, _)| *k == kind)
            .map(|(_, l)| l)
            .sum()
    }

    /// Total content bytes (both kinds, marks excluded).
    pub fn content_len(&self) -> u64 {
        self.lens.iter().sum()
    }

    /// Build the layout of a document of `len` bytes whose classified ranges are `ranges`.
    ///
    /// `ranges` must be valid (see [`crate::ranges::ClassifiedRanges`]); this mirrors the thesis's
    /// sieve: a non-classified segment before each classified one (possibly empty between two
    /// adjacent ranges, omitted before a range at offset 0) and one after the last range unless
    /// the document ends there.
    pub fn from_ranges(len: u64, ranges: &[Range<u64>]) -> Layout {
        let mut lens = Vec::with_capacity(ranges.len() * 2 + 1);
        let first = match ranges.first() {
            Some(r) if r.start == 0 => Kind::Secure,
            _ => Kind::Plain,
        };
        let mut pos = 0u64;
        for (i, r) in ranges.iter().enumerate() {
            if i > 0 || r.start > 0 {
                lens.push(r.start - pos);
            }
            lens.push(r.end - r.start);
            pos = r.end;
        }
        if pos < len || (ranges.is_empty() && len > 0) {
            lens.push(len - pos);
        }
        Layout { first, lens }
    }

    /// The classified ranges of the content (inverse of [`Layout::from_ranges`]).
    pub fn ranges(&self) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut pos = 0u64;
        for (kind, len) in self.segments() {
            if kind == Kind::Secure {
                out.push(pos..pos + len);
            }
            pos += len;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_ranges_matches_thesis_sieve() {
        // "ab<$S>cd<$E>ef": plain 2, secure 2, plain 2.
        let l = Layout::from_ranges(6, &[2..4]);
        assert_eq!(
            l,
            Layout {
                first: Kind::Plain,
                lens: vec![2, 2, 2]
            }
        );
        // starts classified: first list tag on the secure list.
        let l = Layout::from_ranges(4, &[0..2]);
        assert_eq!(
            l,
            Layout {
                first: Kind::Secure,
                lens: vec![2, 2]
            }
        );
        // ends classified: no trailing empty plain segment.
        let l = Layout::from_ranges(4, &[2..4]);
        assert_eq!(
            l,
            Layout {
                first: Kind::Plain,
                lens: vec![2, 2]
            }
        );
        // adjacent ranges: empty plain segment between them.
        let l = Layout::from_ranges(4, &[0..2, 2..4]);
        assert_eq!(
            l,
            Layout {
                first: Kind::Secure,
                lens: vec![2, 0, 2]
            }
        );
        // empty range in the middle.
        let l = Layout::from_ranges(4, &[2..2]);
        assert_eq!(
            l,
            Layout {
                first: Kind::Plain,
                lens: vec![2, 0, 2]
            }
        );
        // nothing classified, and the empty document.
        assert_eq!(
            Layout::from_ranges(3, &[]),
            Layout {
                first: Kind::Plain,
                lens: vec![3]
            }
        );
        assert_eq!(Layout::from_ranges(0, &[]), Layout::empty());
        assert_eq!(
            Layout::from_ranges(0, &[0..0]),
            Layout {
                first: Kind::Secure,
                lens: vec![0]
            }
        );
    }

    #[test]
    fn ranges_round_trip() {
        for (len, rs) in [
            (6u64, vec![2..4]),
            (4, vec![0..2, 2..4]),
            (4, vec![2..2]),
            (0, vec![0..0]),
            (9, vec![0..0, 0..0, 3..9]),
        ] {
            let l = Layout::from_ranges(len, &rs);
            assert_eq!(l.ranges(), rs);
            assert_eq!(l.content_len(), len);
        }
    }
}
