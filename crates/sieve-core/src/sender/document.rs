//! One document as the sender's session sees it: what its manifest says, how much of it the
//! channels have still to hand to their sockets, and how it ended.

use crate::layout::Layout;
use crate::message::golomb::EncodedLens;
use crate::Kind;

/// What the session needs to know of a document it will send: what its manifest says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocSpec {
    /// The name the receiver stores it under (checked by the receiver, and by
    /// [`crate::message::Doc::validate`] before it is announced).
    pub name: String,
    /// Its classified and cleartext segments, in document order.
    pub layout: Layout,
    /// Mark strings the receiver writes back around classified segments, if any.
    pub marks: Option<(Vec<u8>, Vec<u8>)>,
    /// The layout's lengths as its manifest carries them, when the caller has them already
    /// (its placement's [`crate::sieve::Placement::encoded_lens`]); `None` to encode them at
    /// [`super::SenderSession::announce`]. Must be [`EncodedLens::of`] the layout.
    pub lens: Option<EncodedLens>,
}

/// Where a document is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Pieces of it are still to be handed to the sockets.
    Sending,
    /// Every piece is out; the transport is to say how it ends (its digest, or that it changed).
    Finishing,
    /// Its DOC_END or DOC_CANCEL is queued: only its answer is awaited.
    Ended,
}

/// The session's record of one document.
#[derive(Debug)]
pub(super) struct Document {
    /// Its name, for a DOC_CANCEL's reason.
    pub(super) name: String,
    /// Bytes of each stream, by [`Kind::index`].
    pub(super) lens: [u64; 2],
    /// Bytes of both streams whose pieces are not yet reported handed to the sockets.
    pub(super) unsent: u64,
    pub(super) phase: Phase,
}

impl Document {
    pub(super) fn new(spec: &DocSpec) -> Document {
        let lens = [Kind::Plain, Kind::Secure].map(|k| spec.layout.stream_len(k));
        Document {
            name: spec.name.clone(),
            lens,
            unsent: spec.layout.content_len(),
            phase: Phase::Sending,
        }
    }

    pub(super) fn len(&self, kind: Kind) -> u64 {
        self.lens[kind.index()]
    }
}
