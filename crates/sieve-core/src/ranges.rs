//! Classified ranges: the one input of the sieve.
//!
//! Everything the sieve does is a function of `(bytes, classified ranges)`. How the ranges were
//! found (inline marks, a ranges file, a policy) is somebody else's business; this type only
//! guarantees they are usable: sorted, disjoint, half-open and inside the document.

use std::ops::Range;

use thiserror::Error;

/// Why a list of ranges cannot describe a document.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RangeError {
    /// A range's end is below its start.
    #[error("classified range {index} ({start}..{end}) ends before it starts")]
    Reversed {
        /// Position of the range in the list given.
        index: usize,
        /// Its start offset in the document.
        start: u64,
        /// Its end offset in the document (exclusive).
        end: u64,
    },
    /// A range starts before the previous one ends: the list is unsorted or overlapping.
    #[error(
        "classified range {index} ({start}..{end}) overlaps or precedes the range before it, \
         which ends at {prev_end}; sort the ranges and merge overlapping ones"
    )]
    Unsorted {
        /// Position of the range in the list given.
        index: usize,
        /// Its start offset in the document.
        start: u64,
        /// Its end offset in the document (exclusive).
        end: u64,
        /// End offset (exclusive) of the range before it.
        prev_end: u64,
    },
    /// A range ends past the end of the document.
    #[error("classified range {index} ({start}..{end}) lies beyond the end of the document ({len} bytes)")]
    OutOfBounds {
        /// Position of the range in the list given.
        index: usize,
        /// Its start offset in the document.
        start: u64,
        /// Its end offset in the document (exclusive).
        end: u64,
        /// The document's length in bytes.
        len: u64,
    },
}

/// Sorted, disjoint, half-open byte ranges over a document of known length.
///
/// Empty ranges are allowed (an empty classified segment is still a segment), and a range may
/// start exactly where the previous one ends (adjacent classified segments stay distinct).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassifiedRanges {
    ranges: Vec<Range<u64>>,
    doc_len: u64,
}

impl ClassifiedRanges {
    /// Validate `ranges` against a document of `doc_len` bytes.
    pub fn new(ranges: Vec<Range<u64>>, doc_len: u64) -> Result<Self, RangeError> {
        let mut prev_end = 0u64;
        for (index, r) in ranges.iter().enumerate() {
            let (start, end) = (r.start, r.end);
            if end < start {
                return Err(RangeError::Reversed { index, start, end });
            }
            if start < prev_end {
                return Err(RangeError::Unsorted {
                    index,
                    start,
                    end,
                    prev_end,
                });
            }
            if end > doc_len {
                return Err(RangeError::OutOfBounds {
                    index,
                    start,
                    end,
                    len: doc_len,
                });
            }
            prev_end = end;
        }
        Ok(ClassifiedRanges { ranges, doc_len })
    }

    /// Nothing classified.
    pub fn none(doc_len: u64) -> Self {
        ClassifiedRanges {
            ranges: Vec::new(),
            doc_len,
        }
    }

    /// Everything classified: the secure-only system is the sieve with this input.
    pub fn all(doc_len: u64) -> Self {
        ClassifiedRanges {
            ranges: vec![0..doc_len],
            doc_len,
        }
    }

    /// The ranges, sorted and disjoint, each `start..end` with `end` exclusive; empty ranges
    /// are kept, since each is still a classified segment.
    pub fn as_slice(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Length in bytes of the document the ranges were checked against.
    pub fn doc_len(&self) -> u64 {
        self.doc_len
    }

    /// Total classified bytes.
    pub fn classified_len(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_adjacent_and_empty() {
        let r = ClassifiedRanges::new(vec![0..0, 0..3, 3..3, 3..5, 9..10], 10).unwrap();
        assert_eq!(r.classified_len(), 6);
    }

    #[test]
    #[allow(clippy::reversed_empty_ranges)] // a reversed range is the input under test
    fn rejects_reversed_overlapping_and_out_of_bounds() {
        assert_eq!(
            ClassifiedRanges::new(vec![4..2], 10),
            Err(RangeError::Reversed {
                index: 0,
                start: 4,
                end: 2
            })
        );
        assert_eq!(
            ClassifiedRanges::new(vec![0..5, 4..6], 10),
            Err(RangeError::Unsorted {
                index: 1,
                start: 4,
                end: 6,
                prev_end: 5
            })
        );
        assert_eq!(
            ClassifiedRanges::new(vec![8..11], 10),
            Err(RangeError::OutOfBounds {
                index: 0,
                start: 8,
                end: 11,
                len: 10
            })
        );
    }
}
