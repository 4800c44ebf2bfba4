//! The ledger of one document stream: which pieces arrived, and a digest of what they held.
//!
//! Plain channels cross the network in the clear, so an attacker can change, drop, duplicate or
//! inject their bytes. The sender records every unit of cleartext it sends (offset, length, and
//! the unit's keyed AES-GMAC tag, computed by the transport's `mac.rs` and recorded with
//! [`Ledger::record_hashed`]) and sends the ledger's digest over TLS; the receiver records every
//! unit it receives the same way and compares before committing. Pieces may arrive in any order
//! on any channel (the dynamic scheduler decides at run time), so the digest is taken over the
//! entries sorted by offset: independent of arrival order, but bound to every byte and its
//! position. (The ledger folds the entries with BLAKE3; [`Ledger::record`], which hashes a
//! piece's bytes with BLAKE3 itself, serves callers without a key, such as tests.)
//!
//! The same ledger, without hashing, proves a secure stream complete: no gap, no overlap.

use std::collections::BTreeMap;

use thiserror::Error;

/// What is wrong with the pieces of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    /// A piece covers bytes already recorded: a duplicate, or a piece forged over another.
    #[error("bytes {offset}..{end} were received twice or overlap another piece")]
    Overlap {
        /// Stream offset of the offending piece's first byte.
        offset: u64,
        /// Stream offset just past its last byte (end-exclusive).
        end: u64,
    },
    /// The first stretch of the stream that no piece covered.
    #[error("bytes {offset}..{end} are missing")]
    Gap {
        /// Stream offset of the first missing byte.
        offset: u64,
        /// Stream offset where the missing stretch ends (exclusive): the next piece, or the
        /// stream's length.
        end: u64,
    },
    /// The pieces reach past the length the manifest gave the stream.
    #[error("bytes beyond the stream's {len} bytes were received")]
    TooLong {
        /// The stream's length as the sender declared it, in bytes.
        len: u64,
    },
    /// The pieces are complete but their digest differs from the one sent over TLS: some
    /// cleartext was changed, moved or replaced on a plain channel.
    #[error("the cleartext digest does not match what the sender sent over TLS: a plain channel was tampered with")]
    DigestMismatch,
}

/// A tagged unit of a plain stream: its stream offset, its length and its tag (the transport's
/// MAC, widened to 32 bytes), as [`Ledger::record_hashed`] records it.
pub type UnitTag = (u64, u64, [u8; 32]);

/// The hash of one piece's bytes, as recorded by [`Ledger::record`].
pub(crate) fn piece_hash(bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(bytes).as_bytes()
}

/// Records the pieces of one stream, folding them into the digest as soon as they are in order.
///
/// The digest is BLAKE3 over `"sieve ledger v1"`, then `(offset, length, tag)` of every piece in
/// offset order, then the stream's length. Pieces mostly arrive in order (each channel takes the
/// next chunk), so a piece that starts where the folded ones end is folded at once, and only
/// pieces that came early wait, in offset order, for the gap before them to fill. Memory is
/// therefore what the channels hold in flight, not the number of pieces of the document: a
/// document with millions of classified parts (a card number on every line of a CSV) costs no
/// more than one with a few.
#[derive(Debug, Clone)]
pub struct Ledger {
    hasher: blake3::Hasher,
    /// Every byte below this is folded into `hasher`.
    frontier: u64,
    /// Pieces that arrived ahead of the frontier: offset → (length, tag).
    pending: BTreeMap<u64, (u64, [u8; 32])>,
    bytes: u64,
    /// The first overlap seen; reported by [`Ledger::finish`].
    error: Option<LedgerError>,
}

impl Default for Ledger {
    fn default() -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"sieve ledger v1");
        Ledger {
            hasher,
            frontier: 0,
            pending: BTreeMap::new(),
            bytes: 0,
            error: None,
        }
    }
}

impl Ledger {
    /// An empty ledger for one stream; the sender and receiver each keep one per stream.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Record a piece and hash its bytes.
    pub fn record(&mut self, offset: u64, bytes: &[u8]) {
        let hash = piece_hash(bytes);
        self.push(offset, bytes.len() as u64, hash);
    }

    /// Record a piece whose hash (`piece_hash`) was computed elsewhere, e.g. outside a lock.
    pub fn record_hashed(&mut self, offset: u64, len: u64, hash: [u8; 32]) {
        self.push(offset, len, hash);
    }

    /// Record a piece whose contents need no digest (it came over TLS).
    pub(crate) fn record_unhashed(&mut self, offset: u64, len: u64) {
        self.push(offset, len, [0; 32]);
    }

    fn push(&mut self, offset: u64, len: u64, hash: [u8; 32]) {
        if len == 0 {
            return;
        }
        self.bytes = self.bytes.saturating_add(len);
        if self.error.is_some() {
            return;
        }
        let end = offset.saturating_add(len);
        let overlap = LedgerError::Overlap { offset, end };
        // Below the frontier, or touching a piece already waiting: the same bytes twice.
        let before = self.pending.range(..=offset).next_back();
        let after = self.pending.range(offset..).next();
        if offset < self.frontier
            || before.is_some_and(|(&o, &(l, _))| o.saturating_add(l) > offset)
            || after.is_some_and(|(&o, _)| o < end)
        {
            self.error = Some(overlap);
            return;
        }
        if offset > self.frontier {
            self.pending.insert(offset, (len, hash));
            return;
        }
        self.fold(offset, len, &hash);
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() != self.frontier {
                break;
            }
            let (o, (l, h)) = entry.remove_entry();
            self.fold(o, l, &h);
        }
    }

    fn fold(&mut self, offset: u64, len: u64, hash: &[u8; 32]) {
        self.hasher.update(&offset.to_be_bytes());
        self.hasher.update(&len.to_be_bytes());
        self.hasher.update(hash);
        self.frontier = offset + len;
    }

    /// Bytes recorded so far (duplicates counted twice).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Pieces held because they arrived ahead of a gap (each takes about
    /// [`Ledger::ENTRY_BYTES`] of memory); the others are folded into the digest already.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// Memory one held piece takes, with its share of the tree that holds it.
    pub const ENTRY_BYTES: u64 = 64;

    /// Check that the pieces cover `0..len` exactly once and return the digest.
    pub fn finish(&mut self, len: u64) -> Result<[u8; 32], LedgerError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if let Some((&o, _)) = self.pending.first_key_value() {
            return Err(LedgerError::Gap {
                offset: self.frontier,
                end: o,
            });
        }
        if self.frontier > len {
            return Err(LedgerError::TooLong { len });
        }
        if self.frontier < len {
            return Err(LedgerError::Gap {
                offset: self.frontier,
                end: len,
            });
        }
        let mut h = self.hasher.clone();
        h.update(&len.to_be_bytes());
        Ok(*h.finalize().as_bytes())
    }

    /// [`Ledger::finish`] and compare with the digest the sender sent.
    pub fn verify(&mut self, len: u64, expected: &[u8; 32]) -> Result<(), LedgerError> {
        let got = self.finish(len)?;
        // Not secret, so no constant-time comparison is needed.
        if &got == expected {
            Ok(())
        } else {
            Err(LedgerError::DigestMismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// The digest as it was first specified: every entry, sorted by offset, at the end.
    fn reference(pieces: &[(u64, u64, [u8; 32])], len: u64) -> Option<[u8; 32]> {
        let mut sorted = pieces.to_vec();
        sorted.sort_unstable_by_key(|p| p.0);
        let mut h = blake3::Hasher::new();
        h.update(b"sieve ledger v1");
        let mut pos = 0;
        for (o, l, t) in sorted {
            if o != pos {
                return None;
            }
            h.update(&o.to_be_bytes());
            h.update(&l.to_be_bytes());
            h.update(&t);
            pos = o + l;
        }
        (pos == len).then(|| {
            h.update(&len.to_be_bytes());
            *h.finalize().as_bytes()
        })
    }

    proptest! {
        /// Folding as pieces come, in any order, gives the digest of the sorted pieces, and
        /// holds only the pieces that came ahead of a gap.
        #[test]
        fn streaming_equals_the_sorted_digest(
            cuts in proptest::collection::vec(1u64..50, 1..60),
            seed in any::<u64>(),
        ) {
            let mut pieces = Vec::new();
            let mut at = 0;
            for (i, n) in cuts.iter().enumerate() {
                pieces.push((at, *n, [(i as u8) ^ (seed as u8); 32]));
                at += n;
            }
            let len = at;
            let expected = reference(&pieces, len).unwrap();
            // A permutation of the pieces, from the seed.
            let mut shuffled = pieces.clone();
            let mut x = seed | 1;
            for i in (1..shuffled.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                shuffled.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut l = Ledger::new();
            for &(o, n, t) in &shuffled {
                l.record_hashed(o, n, t);
            }
            prop_assert_eq!(l.held(), 0);
            prop_assert_eq!(l.finish(len), Ok(expected));
            // In order, nothing is ever held.
            let mut l = Ledger::new();
            for &(o, n, t) in &pieces {
                l.record_hashed(o, n, t);
                prop_assert_eq!(l.held(), 0);
            }
            // Any piece twice, anywhere in the order, is an overlap; any piece missing, a gap.
            let k = (seed as usize) % pieces.len();
            let mut l = Ledger::new();
            for &(o, n, t) in shuffled.iter().chain(std::iter::once(&pieces[k])) {
                l.record_hashed(o, n, t);
            }
            let twice = matches!(l.finish(len), Err(LedgerError::Overlap { .. }));
            prop_assert!(twice);
            let mut l = Ledger::new();
            for &(o, n, t) in shuffled.iter().filter(|p| p.0 != pieces[k].0) {
                l.record_hashed(o, n, t);
            }
            let gap = matches!(l.finish(len), Err(LedgerError::Gap { .. }));
            prop_assert!(gap);
        }
    }

    use super::*;

    #[test]
    fn order_independent_and_position_bound() {
        let mut a = Ledger::new();
        a.record(0, b"hello ");
        a.record(6, b"world");
        let mut b = Ledger::new();
        b.record(6, b"world");
        b.record(0, b"hello ");
        let da = a.finish(11).unwrap();
        assert_eq!(da, b.finish(11).unwrap());
        // Same bytes, different cut: the receiver sees the frames the sender sent, so a
        // different cut means something was re-framed in between and must not match.
        let mut c = Ledger::new();
        c.record(0, b"hello");
        c.record(5, b" world");
        assert_ne!(da, c.finish(11).unwrap());
        // One byte changed.
        let mut d = Ledger::new();
        d.record(0, b"hello ");
        d.record(6, b"worle");
        assert_eq!(d.verify(11, &da), Err(LedgerError::DigestMismatch));
    }

    #[test]
    fn gaps_overlaps_and_excess() {
        let mut l = Ledger::new();
        l.record(0, b"abc");
        l.record(2, b"cd");
        assert_eq!(l.finish(4), Err(LedgerError::Overlap { offset: 2, end: 4 }));
        let mut l = Ledger::new();
        l.record(0, b"ab");
        assert_eq!(l.finish(4), Err(LedgerError::Gap { offset: 2, end: 4 }));
        let mut l = Ledger::new();
        l.record(1, b"b");
        assert_eq!(l.finish(2), Err(LedgerError::Gap { offset: 0, end: 1 }));
        let mut l = Ledger::new();
        l.record(0, b"abc");
        assert_eq!(l.finish(2), Err(LedgerError::TooLong { len: 2 }));
        let mut l = Ledger::new();
        assert!(l.finish(0).is_ok());
    }
}
