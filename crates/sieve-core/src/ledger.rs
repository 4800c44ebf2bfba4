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

use thiserror::Error;

/// What is wrong with the pieces of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    #[error("bytes {offset}..{end} were received twice or overlap another piece")]
    Overlap { offset: u64, end: u64 },
    #[error("bytes {offset}..{end} are missing")]
    Gap { offset: u64, end: u64 },
    #[error("bytes beyond the stream's {len} bytes were received")]
    TooLong { len: u64 },
    #[error("the cleartext digest does not match what the sender sent over TLS: a plain channel was tampered with")]
    DigestMismatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    offset: u64,
    len: u64,
    hash: [u8; 32],
}

/// A tagged unit of a plain stream: its stream offset, its length and its tag (the transport's
/// MAC, widened to 32 bytes), as [`Ledger::record_hashed`] records it.
pub type UnitTag = (u64, u64, [u8; 32]);

/// The hash of one piece's bytes, as recorded by [`Ledger::record`].
pub fn piece_hash(bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(bytes).as_bytes()
}

/// Records the pieces of one stream.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    bytes: u64,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Record a piece and hash its bytes.
    pub fn record(&mut self, offset: u64, bytes: &[u8]) {
        let hash = piece_hash(bytes);
        self.push(offset, bytes.len() as u64, hash);
    }

    /// Record a piece whose hash ([`piece_hash`]) was computed elsewhere, e.g. outside a lock.
    pub fn record_hashed(&mut self, offset: u64, len: u64, hash: [u8; 32]) {
        self.push(offset, len, hash);
    }

    /// Record a piece whose contents need no digest (it came over TLS).
    pub fn record_unhashed(&mut self, offset: u64, len: u64) {
        self.push(offset, len, [0; 32]);
    }

    fn push(&mut self, offset: u64, len: u64, hash: [u8; 32]) {
        if len > 0 {
            self.entries.push(Entry { offset, len, hash });
            self.bytes = self.bytes.saturating_add(len);
        }
    }

    /// Bytes recorded so far (duplicates counted twice).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries recorded so far (each takes [`Ledger::ENTRY_BYTES`] of memory).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Memory one entry takes.
    pub const ENTRY_BYTES: u64 = std::mem::size_of::<Entry>() as u64;

    /// Check that the pieces cover `0..len` exactly once and return the digest.
    pub fn finish(&mut self, len: u64) -> Result<[u8; 32], LedgerError> {
        self.entries.sort_unstable_by_key(|e| e.offset);
        let mut h = blake3::Hasher::new();
        h.update(b"sieve ledger v1");
        let mut pos = 0u64;
        for e in &self.entries {
            let end = e.offset.saturating_add(e.len);
            if e.offset < pos {
                return Err(LedgerError::Overlap {
                    offset: e.offset,
                    end,
                });
            }
            if e.offset > pos {
                return Err(LedgerError::Gap {
                    offset: pos,
                    end: e.offset,
                });
            }
            if end > len {
                return Err(LedgerError::TooLong { len });
            }
            h.update(&e.offset.to_be_bytes());
            h.update(&e.len.to_be_bytes());
            h.update(&e.hash);
            pos = end;
        }
        if pos < len {
            return Err(LedgerError::Gap {
                offset: pos,
                end: len,
            });
        }
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
