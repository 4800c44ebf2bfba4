//! What a sender asks of a session, before it knows the receiver.

use crate::batch::BatchSplit;
use crate::mac::MacOffer;
use crate::message::{CompressFlags, Mode};
use crate::split::Split;

use super::Chunk;

/// Most documents a session has in progress (some bytes sent, not yet acknowledged) at once,
/// fewer if the receiver's SESSION says it holds fewer open
/// ([`max_open_docs`](crate::message::SessionMsg::max_open_docs)).
pub const MAX_UNACKED_DOCS: u32 = 512;

/// The sender's side of the HELLO: what it asks for and offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderConfig {
    /// Sieve or secure-only (what `auto` chose, when it was asked for).
    pub mode: Mode,
    /// TLS channels wanted, channel 0 included; kept within
    /// `1..=`[`MAX_SECURE_CHANNELS`](crate::message::MAX_SECURE_CHANNELS).
    pub secure_channels: u8,
    /// Plain channels wanted; kept within
    /// `1..=`[`MAX_PLAIN_CHANNELS`](crate::message::MAX_PLAIN_CHANNELS) in sieve mode, none in
    /// secure-only mode.
    pub plain_channels: u8,
    /// How one document's streams are split over the channels of a kind.
    pub split: Split,
    /// How a batch of documents is split over the channels of a kind.
    pub batch_split: BatchSplit,
    /// How large the data frames are.
    pub chunk: Chunk,
    /// The cleartext MACs offered, most preferred first.
    pub macs: MacOffer,
    /// The compressed frames the sender may send, if the receiver accepts them.
    pub compression: CompressFlags,
}
