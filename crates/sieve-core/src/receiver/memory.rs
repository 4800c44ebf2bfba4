//! Memory a peer can make the receiver hold, and who pays for it.
//!
//! Frame buffers are budgeted by the transport; this is the rest: what the protocol keeps per
//! document (its manifest, the placement built from it, the ledgers that grow with every piece)
//! and per session (which documents are finished). Each session has a share, and every session's
//! charges also come out of one [`MemoryPool`], so that no peer, however many sessions it opens,
//! can take the memory that others need.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Memory shared by every session of a receiver.
///
/// The transport implements it over its global budget; [`AtomicPool`] is a plain counter.
pub trait MemoryPool: Send + Sync {
    /// Take `bytes` if they are free; `false` leaves the pool unchanged.
    fn try_take(&self, bytes: u64) -> bool;
    /// Give back `bytes` taken earlier.
    fn give_back(&self, bytes: u64);
}

/// A pool with no limit (for tests and tools that receive from a trusted peer).
pub const UNLIMITED: u64 = u64::MAX;

/// A [`MemoryPool`] that is a counter against a limit.
#[derive(Debug)]
pub struct AtomicPool {
    used: AtomicU64,
    limit: u64,
}

impl AtomicPool {
    /// A pool of `limit` bytes.
    pub fn new(limit: u64) -> AtomicPool {
        AtomicPool {
            used: AtomicU64::new(0),
            limit,
        }
    }

    /// Bytes taken now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

impl MemoryPool for AtomicPool {
    fn try_take(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(bytes).filter(|&n| n <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// What one session has taken from its pool, against its own share.
pub(super) struct Account {
    pool: Arc<dyn MemoryPool>,
    share: u64,
    held: u64,
}

/// Why a charge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Short {
    /// The session's own share would be exceeded.
    Session { share: u64 },
    /// The receiver's pool (all sessions) is spent.
    Receiver,
}

impl Account {
    pub(super) fn new(pool: Arc<dyn MemoryPool>, share: u64) -> Account {
        Account {
            pool,
            share,
            held: 0,
        }
    }

    pub(super) fn charge(&mut self, bytes: u64) -> Result<(), Short> {
        if self.held.saturating_add(bytes) > self.share {
            return Err(Short::Session { share: self.share });
        }
        if !self.pool.try_take(bytes) {
            return Err(Short::Receiver);
        }
        self.held += bytes;
        Ok(())
    }

    pub(super) fn release(&mut self, bytes: u64) {
        let bytes = bytes.min(self.held);
        self.held -= bytes;
        self.pool.give_back(bytes);
    }

    pub(super) fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        self.pool.give_back(self.held);
    }
}

/// Bytes a document holds once its manifest is accepted: its placement (see
/// [`crate::sieve::placement_bytes`]: the code of its lengths as it travelled, about a byte per
/// segment or less, and a checkpoint every 32 segments), its name, and a fixed part (its slot in the
/// session's map, its file spec). Its ledgers are charged when its first piece makes them
/// ([`LEDGERS_FIXED`]).
pub(super) fn manifest_cost(segments: usize, code_bytes: usize, name_len: usize) -> u64 {
    MANIFEST_FIXED + name_len as u64 + crate::sieve::placement_bytes(segments, code_bytes)
}

/// The fixed part of [`manifest_cost`].
pub(super) const MANIFEST_FIXED: u64 = 512;

/// A document's two ledgers, made at its first piece (their hashers are most of it).
pub(super) const LEDGERS_FIXED: u64 = std::mem::size_of::<[crate::ledger::Ledger; 2]>() as u64;

/// The table of document phases (one byte per id) grows, and is charged, this many ids at a
/// time.
pub(super) const PHASE_BLOCK: usize = 4096;

/// A ledger grows by one entry per tagged unit or secure piece. Entries are paid for ahead, the
/// way a vector grows: at least this many, and then as many again as are paid for, so that a
/// small document pays for a few entries and a large one is charged a logarithmic number of
/// times.
pub(super) const LEDGER_BLOCK: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_respect_their_share_and_the_pool_and_give_back_on_drop() {
        let pool = Arc::new(AtomicPool::new(100));
        {
            let mut a = Account::new(pool.clone(), 60);
            let mut b = Account::new(pool.clone(), 60);
            assert_eq!(a.charge(50), Ok(()));
            assert_eq!(a.charge(11), Err(Short::Session { share: 60 }));
            assert_eq!(b.charge(51), Err(Short::Receiver));
            assert_eq!(b.charge(50), Ok(()));
            assert_eq!(pool.used(), 100);
            a.release(20);
            assert_eq!((a.held(), pool.used()), (30, 80));
            // Releasing more than is held gives back only what is held.
            a.release(1000);
            assert_eq!((a.held(), pool.used()), (0, 50));
        }
        assert_eq!(pool.used(), 0);
    }
}
