//! One document of a session, from its manifest to its acknowledgement.

use std::sync::Arc;
use std::time::Instant;

use crate::ledger::Ledger;
use crate::message::DocEnd;
use crate::sieve::Placement;

use super::action::FileSpec;

/// Where a document stands. Each state admits only the events that may follow it, so that a
/// byte can never be written after the document's ledgers were taken to be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Pieces may arrive and be written.
    Receiving,
    /// Closed: its ledgers are being checked ([`super::Action::Verify`]).
    Verifying,
    /// Checked; waiting for writes still in flight.
    Verified,
    /// Being made durable and renamed ([`super::Action::Commit`]).
    Committing,
}

/// A document announced by its manifest and not yet acknowledged.
pub(super) struct Document {
    pub(super) file: Arc<FileSpec>,
    /// Shared with the transport, which cuts a frame's cleartext into tagged units by it
    /// before it hands the frame in.
    pub(super) placement: Arc<Placement>,
    pub(super) marks: Option<(Vec<u8>, Vec<u8>)>,
    /// Indexed by [`crate::Kind::index`]; made at the first piece (a session may announce
    /// thousands of documents ahead of their bytes, and a ledger's hasher is about 2 KiB) and
    /// moved out when the document closes.
    pub(super) ledgers: Option<Box<[Ledger; 2]>>,
    /// Ledger entries paid for so far (see [`super::memory::LEDGER_BLOCK`]).
    pub(super) entries_paid: u64,
    /// Everything charged for this document: manifest and ledger entries.
    pub(super) charged: u64,
    pub(super) end: Option<DocEnd>,
    pub(super) state: State,
    /// Whether a write was handed out, so that the transport has created its file.
    pub(super) opened: bool,
    /// Writes handed out and not yet reported done.
    pub(super) pending_writes: u64,
    pub(super) first_data: Option<Instant>,
    pub(super) closed_at: Option<Instant>,
    /// Microseconds the ledger check took.
    pub(super) verify_us: u64,
    /// Bytes its compressed frames were let decompress to, and their bytes on the wire.
    pub(super) inflated: u64,
    pub(super) wire: u64,
    /// What of `inflated` lies beyond the receiver's ratio to `wire`, charged to the session's
    /// allowance until the document is verified ([`super::InflateLimit`]).
    pub(super) excess: u64,
}

impl Document {
    pub(super) fn new(
        file: FileSpec,
        placement: Placement,
        marks: Option<(Vec<u8>, Vec<u8>)>,
        charged: u64,
    ) -> Document {
        Document {
            file: Arc::new(file),
            placement: Arc::new(placement),
            marks,
            ledgers: None,
            entries_paid: 0,
            charged,
            end: None,
            state: State::Receiving,
            opened: false,
            pending_writes: 0,
            first_data: None,
            closed_at: None,
            verify_us: 0,
            inflated: 0,
            wire: 0,
            excess: 0,
        }
    }

    /// Ledger entries held (pieces that came ahead of a gap), both streams.
    pub(super) fn entries(&self) -> u64 {
        self.ledgers
            .as_ref()
            .map_or(0, |l| (l[0].held() + l[1].held()) as u64)
    }

    /// Every byte of both streams has been received (counting duplicates, so that a piece sent
    /// twice closes the document early and fails its check) and its DOC_END has come.
    pub(super) fn complete(&self) -> bool {
        use crate::Kind;
        self.end.is_some()
            && [Kind::Secure, Kind::Plain]
                .iter()
                .all(|&k| self.stream_bytes(k) >= self.placement.stream_len(k))
    }

    /// Bytes of stream `k` received so far.
    pub(super) fn stream_bytes(&self, k: crate::Kind) -> u64 {
        self.ledgers.as_ref().map_or(0, |l| l[k.index()].bytes())
    }

    /// Microseconds from the first piece to the last.
    pub(super) fn receive_us(&self) -> u64 {
        match (self.first_data, self.closed_at) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_micros() as u64,
            _ => 0,
        }
    }
}

/// What became of a document id, kept (one byte each) after its slot is dropped, so that late
/// frames are recognised: dropped for a refused or failed document, refused for a finished one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Phase {
    /// No manifest yet.
    #[default]
    Unseen,
    /// In [`super::ReceiverSession`]'s map.
    Active,
    /// Refused at its manifest.
    Refused,
    /// Failed after it was accepted.
    Failed,
    /// Acknowledged as stored.
    Stored,
}
