//! The default split: channels ask for the next chunk when they are free.
//!
//! ES and SS (§4.3.3-4.3.4) and their batch forms (§4.5) fix the assignment before sending, from
//! byte counts alone. Channels are not equally fast, though (a TLS channel encrypts, a plain one
//! does not, and either may stall), and the thesis's own results show the cost: SS is uneven
//! when segments differ in size, BFS cannot split a large file (§5.4), and ES cuts every segment.
//! Here the streams are handed out as fixed-size chunks, document 0 entirely first, to whichever
//! channel is free: a slow channel simply takes fewer chunks. The assignment is decided at run
//! time, so the receiver cannot recompute it; instead every chunk travels with its
//! `(doc, offset, len)` and the [`Reassembler`] places it there. The result never depends on which
//! channel carried which chunk, or in what order chunks arrived.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::plan::Piece;

/// Hands out the streams of a batch as chunks of at most `chunk` bytes, in document order.
///
/// Iterating yields every byte of every stream exactly once; the last chunk of each document may
/// be shorter, and empty documents yield nothing.
#[derive(Debug, Clone)]
pub struct ChunkScheduler {
    lens: Vec<u64>,
    chunk: u64,
    doc: usize,
    offset: u64,
    remaining: u64,
}

impl ChunkScheduler {
    /// A scheduler over streams of `stream_lens[d]` bytes (one per document) handing out chunks
    /// of `chunk` bytes (`0` is treated as 1).
    pub fn new(stream_lens: &[u64], chunk: u64) -> ChunkScheduler {
        ChunkScheduler {
            lens: stream_lens.to_vec(),
            chunk: chunk.max(1),
            doc: 0,
            offset: 0,
            remaining: stream_lens.iter().fold(0u64, |t, &l| t.saturating_add(l)),
        }
    }

    /// Bytes not yet handed out.
    pub fn remaining_bytes(&self) -> u64 {
        self.remaining
    }
}

impl Iterator for ChunkScheduler {
    type Item = Piece;

    /// The next chunk, for whichever channel asks first; `None` once everything is handed out.
    fn next(&mut self) -> Option<Piece> {
        while let Some(&len) = self.lens.get(self.doc) {
            if self.offset < len {
                let take = self.chunk.min(len - self.offset);
                let piece = Piece {
                    doc: u32::try_from(self.doc).ok()?,
                    offset: self.offset,
                    len: take,
                };
                self.offset += take;
                self.remaining = self.remaining.saturating_sub(take);
                return Some(piece);
            }
            self.doc += 1;
            self.offset = 0;
        }
        None
    }
}

/// Why a received piece was refused, or the streams are not ready.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReassembleError {
    /// The piece names a document the manifest does not have.
    #[error("piece {piece:?} names a document beyond the {docs} announced")]
    NoSuchDocument {
        /// The refused piece, as its header gave it.
        piece: Piece,
        /// Documents the manifest announced; valid indices are `0..docs`.
        docs: usize,
    },
    /// The piece reaches past the end of its document's stream.
    #[error("piece {piece:?} does not fit in a stream of {stream_len} bytes")]
    OutOfRange {
        /// The refused piece, as its header gave it.
        piece: Piece,
        /// Length in bytes of that document's stream (not of the document).
        stream_len: u64,
    },
    /// The piece's header and its payload disagree on the length.
    #[error("piece {piece:?} came with {got} bytes")]
    LengthMismatch {
        /// The refused piece, as its header gave it.
        piece: Piece,
        /// Payload bytes that actually came with it.
        got: usize,
    },
    /// The piece overlaps bytes already placed (a duplicate is an overlap).
    #[error("piece {piece:?} overlaps bytes already received")]
    Overlap {
        /// The refused piece, as its header gave it.
        piece: Piece,
    },
    /// The stream could not be allocated.
    #[error("cannot allocate {len} bytes for document {doc}'s stream")]
    TooLarge {
        /// Index of the document within the batch.
        doc: usize,
        /// The stream length the manifest announced, in bytes.
        len: u64,
    },
    /// Some bytes have not arrived.
    #[error("{missing} bytes of document {doc}'s stream have not arrived")]
    Incomplete {
        /// Index of the first incomplete document within the batch.
        doc: usize,
        /// Bytes of its stream not yet placed.
        missing: u64,
    },
}

/// One document's stream being filled in.
#[derive(Debug, Default)]
struct Stream {
    len: u64,
    /// Allocated (once, with the full length) when the first piece arrives.
    bytes: Vec<u8>,
    /// Received intervals `start -> end`, coalesced: no two touch.
    covered: BTreeMap<u64, u64>,
    received: u64,
}

/// Receiver side of the chunk scheduler (and of any plan): places pieces by `(doc, offset)`.
///
/// Pieces may arrive in any order from any channel. Coverage is kept as coalesced intervals, so
/// checking a piece costs `O(log intervals)`, not `O(bytes)`, and each byte is copied once.
#[derive(Debug)]
pub struct Reassembler {
    streams: Vec<Stream>,
    incomplete: usize,
}

impl Reassembler {
    /// Expect one stream of `stream_lens[d]` bytes per document.
    pub fn new(stream_lens: &[u64]) -> Reassembler {
        Reassembler {
            streams: stream_lens
                .iter()
                .map(|&len| Stream {
                    len,
                    ..Stream::default()
                })
                .collect(),
            incomplete: stream_lens.iter().filter(|&&l| l > 0).count(),
        }
    }

    /// Copy `bytes` to where `piece` says they belong.
    ///
    /// Refuses (and leaves everything unchanged) a piece for an unknown document, past the end of
    /// its stream, whose payload length differs from `piece.len`, or overlapping bytes already
    /// placed. An empty piece inside its stream is accepted and changes nothing.
    pub fn place(&mut self, piece: Piece, bytes: &[u8]) -> Result<(), ReassembleError> {
        let docs = self.streams.len();
        let doc = usize::try_from(piece.doc)
            .ok()
            .filter(|&d| d < docs)
            .ok_or(ReassembleError::NoSuchDocument { piece, docs })?;
        let s = &mut self.streams[doc];
        let start = piece.offset;
        let end = match start.checked_add(piece.len) {
            Some(end) if end <= s.len => end,
            _ => {
                return Err(ReassembleError::OutOfRange {
                    piece,
                    stream_len: s.len,
                })
            }
        };
        if bytes.len() as u64 != piece.len {
            return Err(ReassembleError::LengthMismatch {
                piece,
                got: bytes.len(),
            });
        }
        if piece.len == 0 {
            return Ok(());
        }
        let before = s.covered.range(..=start).next_back().map(|(&a, &b)| (a, b));
        let after = s.covered.range(start..).next().map(|(&a, &b)| (a, b));
        if before.is_some_and(|(_, b)| b > start) || after.is_some_and(|(a, _)| a < end) {
            return Err(ReassembleError::Overlap { piece });
        }
        if s.bytes.is_empty() {
            let too_large = ReassembleError::TooLarge { doc, len: s.len };
            let len = usize::try_from(s.len).map_err(|_| too_large.clone())?;
            s.bytes.try_reserve_exact(len).map_err(|_| too_large)?;
            s.bytes.resize(len, 0);
        }
        // In range: `end <= s.len == s.bytes.len()`, which is a usize.
        s.bytes[start as usize..end as usize].copy_from_slice(bytes);

        let mut lo = start;
        let mut hi = end;
        if let Some((a, _)) = before.filter(|&(_, b)| b == start) {
            s.covered.remove(&a);
            lo = a;
        }
        if let Some((a, b)) = after.filter(|&(a, _)| a == end) {
            s.covered.remove(&a);
            hi = b;
        }
        s.covered.insert(lo, hi);
        s.received += piece.len;
        if s.received == s.len {
            self.incomplete -= 1;
        }
        Ok(())
    }

    /// Whether every byte of every stream has been placed.
    pub fn is_complete(&self) -> bool {
        self.incomplete == 0
    }

    /// Bytes still expected, over all documents.
    pub fn missing_bytes(&self) -> u64 {
        self.streams
            .iter()
            .fold(0u64, |t, s| t.saturating_add(s.len - s.received))
    }

    /// The rebuilt streams, one per document, if complete.
    pub fn into_streams(self) -> Result<Vec<Vec<u8>>, ReassembleError> {
        if let Some((doc, s)) = self
            .streams
            .iter()
            .enumerate()
            .find(|(_, s)| s.received != s.len)
        {
            return Err(ReassembleError::Incomplete {
                doc,
                missing: s.len - s.received,
            });
        }
        Ok(self.streams.into_iter().map(|s| s.bytes).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(doc: u32, offset: u64, len: u64) -> Piece {
        Piece { doc, offset, len }
    }

    #[test]
    fn scheduler_walks_documents_in_order() {
        let mut s = ChunkScheduler::new(&[5, 0, 3], 2);
        assert_eq!(s.remaining_bytes(), 8);
        let pieces: Vec<Piece> = s.by_ref().collect();
        assert_eq!(
            pieces,
            vec![p(0, 0, 2), p(0, 2, 2), p(0, 4, 1), p(2, 0, 2), p(2, 2, 1)]
        );
        assert_eq!(s.remaining_bytes(), 0);
        assert_eq!(s.next(), None);
        assert_eq!(ChunkScheduler::new(&[3], 0).count(), 3);
        assert_eq!(ChunkScheduler::new(&[], 4).next(), None);
    }

    #[test]
    fn reassembler_places_out_of_order_and_coalesces() {
        let mut r = Reassembler::new(&[6, 0, 2]);
        assert!(!r.is_complete());
        r.place(p(0, 4, 2), b"ef").unwrap();
        r.place(p(2, 0, 2), b"xy").unwrap();
        r.place(p(0, 0, 2), b"ab").unwrap();
        assert_eq!(r.missing_bytes(), 2);
        assert_eq!(r.streams[0].covered.len(), 2);
        r.place(p(0, 2, 2), b"cd").unwrap();
        assert_eq!(r.streams[0].covered.len(), 1);
        assert!(r.is_complete());
        assert_eq!(
            r.into_streams().unwrap(),
            vec![b"abcdef".to_vec(), vec![], b"xy".to_vec()]
        );
    }

    #[test]
    fn reassembler_refuses_bad_pieces() {
        let mut r = Reassembler::new(&[6]);
        r.place(p(0, 2, 2), b"cd").unwrap();
        for (piece, bytes) in [
            (p(0, 2, 2), &b"cd"[..]), // duplicate
            (p(0, 1, 2), b"bc"),      // overlaps the start
            (p(0, 3, 2), b"de"),      // overlaps the end
            (p(0, 0, 6), b"abcdef"),  // covers it
            (p(0, 3, 1), b"d"),       // inside it
        ] {
            assert_eq!(
                r.place(piece, bytes),
                Err(ReassembleError::Overlap { piece })
            );
        }
        assert!(matches!(
            r.place(p(1, 0, 1), b"a"),
            Err(ReassembleError::NoSuchDocument { .. })
        ));
        assert!(matches!(
            r.place(p(0, 5, 2), b"fg"),
            Err(ReassembleError::OutOfRange { .. })
        ));
        assert!(matches!(
            r.place(p(0, u64::MAX, 2), b"fg"),
            Err(ReassembleError::OutOfRange { .. })
        ));
        assert!(matches!(
            r.place(p(0, 0, 2), b"a"),
            Err(ReassembleError::LengthMismatch { .. })
        ));
        r.place(p(0, 4, 0), b"").unwrap();
        assert_eq!(r.missing_bytes(), 4);
        assert_eq!(
            r.into_streams(),
            Err(ReassembleError::Incomplete { doc: 0, missing: 4 })
        );
    }
}
