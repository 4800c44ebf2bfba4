//! What the sender's session asks of the transport, and why it refuses what the receiver says.

use thiserror::Error;

use crate::mac::MacAlg;
use crate::message::{Bye, DocCancel, DocEnd, Manifest, MessageError};
use crate::{Kind, Piece};

/// A control message to write on channel 0 (TLS), in the order the session hands them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// A document's manifest: every manifest goes before any of its data can be placed.
    Doc(Manifest),
    /// Every byte of a document is handed to the sockets: this vouches for its cleartext.
    DocEnd(DocEnd),
    /// A document's file changed while it was sent: the receiver removes what it holds of it.
    DocCancel(DocCancel),
    /// Every document is answered: the session ends.
    Bye(Bye),
}

impl Control {
    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Control::Doc(m) => m.encode(out),
            Control::DocEnd(m) => m.encode(out),
            Control::DocCancel(m) => m.encode(out),
            Control::Bye(m) => m.encode(out),
        }
    }
}

/// One of the session's channels: a kind and an index among the channels of that kind (secure
/// channel 0 is the control channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Channel {
    /// Secure (TLS) or plain (TCP).
    pub kind: Kind,
    /// Index among the channels of its kind.
    pub index: u8,
}

/// A piece a channel is to send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// The bytes: a run of one document's stream of the channel's kind.
    pub piece: Piece,
    /// The document is beyond the window of unacknowledged documents: send none of it until
    /// [`SenderSession::acked_below`](super::SenderSession::acked_below) exceeds this (flush the
    /// channel first: the documents it waits for may have bytes in its buffer).
    pub after: Option<u32>,
}

/// What a channel learns when it reports a piece handed to its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// This was the last piece of that document still out: flush the channel, then say how it
    /// ends with [`SenderSession::finish_doc`](super::SenderSession::finish_doc).
    pub finished: Option<u32>,
    /// The channel's next piece; `None` when it has nothing more to send.
    pub next: Option<Assignment>,
}

/// How a document whose pieces are all out ends, as the transport found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Its file is unchanged: vouch for it with the digest of its cleartext ledger.
    Sent {
        /// [`crate::ledger::Ledger::finish`] over the tags of every cleartext unit sent.
        plain_digest: [u8; 32],
    },
    /// Its file changed since it was opened: cancel it.
    Changed {
        /// What changed, for the receiver's log.
        why: String,
    },
}

/// The receiver answered a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// The document.
    pub doc: u32,
    /// Stored (verified, durable, under its name); otherwise it failed.
    pub delivered: bool,
    /// Some of its pieces are not yet handed to the sockets: they need not be (stop reading its
    /// file; report the pieces as sent all the same).
    pub unfinished: bool,
}

/// Why the sender will not go on with the session the receiver answered HELLO with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionRefused {
    /// The receiver answered with ERROR (another protocol version, too many documents...).
    #[error("the receiver refused the session: {0}")]
    Refused(String),
    /// Anything else than SESSION or ERROR.
    #[error("unexpected answer to HELLO: {0}")]
    Unexpected(String),
    /// The receiver chose a MAC the HELLO did not offer: its tags would never verify.
    #[error("the receiver chose the {} MAC, which this sender did not offer ({offered}); use a receiver of the same release", .chose.name())]
    MacNotOffered {
        /// The receiver's choice.
        chose: MacAlg,
        /// What HELLO offered, by name.
        offered: String,
    },
    /// A frame limit that leaves no room for a byte of data.
    #[error("the receiver's frame limit of {max_payload} bytes leaves no room for data (more than {prefix} bytes are needed)")]
    NoRoom {
        /// What SESSION announced.
        max_payload: u32,
        /// The DATA prefix every data frame starts with.
        prefix: usize,
    },
}

/// Why an extra channel did not join.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JoinRefused {
    /// The receiver answered with ERROR.
    #[error("refused: {0}")]
    Refused(String),
    /// Anything else than JOIN_OK or ERROR.
    #[error("unexpected answer {0}")]
    Unexpected(String),
}

/// Why a document cannot be announced to this receiver.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ManifestError {
    /// Its name or marks are outside what a manifest may carry.
    #[error("document {doc} cannot be described to the receiver: {source}")]
    Invalid {
        /// The document.
        doc: u32,
        /// What is wrong.
        source: MessageError,
    },
    /// Its manifest does not fit in one of the receiver's frames.
    #[error("document {doc} has {segments} segments; its manifest ({len} bytes) exceeds the receiver's frame limit of {max} bytes")]
    TooLarge {
        /// The document.
        doc: u32,
        /// Segments of its layout.
        segments: usize,
        /// Bytes of its manifest.
        len: usize,
        /// The receiver's frame limit.
        max: u32,
    },
    /// Announced before the receiver's SESSION, or twice.
    #[error(transparent)]
    Order(#[from] TooEarly),
}

/// Why the session ends while documents are still unanswered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Ended {
    /// The receiver sent ERROR.
    #[error("the receiver ended the session: {0}")]
    Error(String),
    /// An acknowledgement for a document that was never announced, or answered already.
    #[error("the receiver acknowledged document {0} twice or out of range")]
    BadAck(u32),
    /// A message that has no place on channel 0 after SESSION.
    #[error("unexpected message from the receiver: {0}")]
    Unexpected(String),
}

/// A call made out of its order (a transport bug, never the peer's doing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("internal error: the sender's session was asked to {0} out of order")]
pub struct TooEarly(pub &'static str);
