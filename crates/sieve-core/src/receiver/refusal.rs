//! Why the receiver refuses a document: typed here, so that each check says what it found, and
//! worded for the sender, who reads the text in the document's acknowledgement.

use crate::name::NameError;
use crate::sieve::OutputOverflow;

use super::memory::Short;

/// Why a manifest is refused (the document is then answered `Refused`; the session goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ManifestRefusal {
    /// The name is not one the receiver creates.
    #[error("refused file name: {0}")]
    Name(#[from] NameError),
    /// More segments than the receiver takes.
    #[error(
        "the manifest has {segments} segments; this receiver takes at most {max} (merge \
         adjacent classified parts)"
    )]
    TooManySegments { segments: usize, max: usize },
    /// A secure-only session announced cleartext.
    #[error("plain bytes in a secure-only session")]
    PlainInSecureOnly,
    /// The session's memory cannot pay for the manifest.
    #[error(transparent)]
    Memory(#[from] MemoryRefusal),
    /// The layout's output length does not fit in 64 bits.
    #[error(transparent)]
    Placement(#[from] OutputOverflow),
    /// The document is larger than the receiver takes.
    #[error("{len} bytes exceed this receiver's limit of {max} bytes")]
    TooLarge { len: u64, max: u64 },
}

/// A charge that a session's memory could not pay: what it was for, what it needed, and whose
/// share ran out. The text tells the sender what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum MemoryRefusal {
    /// The session's own share would be exceeded.
    #[error(
        "LIMIT: {what} needs {} KiB of the receiver's memory, more than this session's share \
         of {} KiB with what it already holds; send fewer documents at once, merge adjacent \
         classified parts, or ask for a larger --max-buffer-memory",
        need.div_ceil(1024),
        share / 1024
    )]
    SessionShare { what: String, need: u64, share: u64 },
    /// Every session's memory together is spent.
    #[error(
        "LIMIT: the receiver has no memory free for {what} ({} KiB): other sessions hold it; \
         try again later",
        need.div_ceil(1024)
    )]
    Receiver { what: String, need: u64 },
}

impl MemoryRefusal {
    /// The refusal of a charge of `need` bytes for `what` that fell `short`.
    pub(super) fn new(short: Short, need: u64, what: impl Into<String>) -> MemoryRefusal {
        let what = what.into();
        match short {
            Short::Session { share } => MemoryRefusal::SessionShare { what, need, share },
            Short::Receiver => MemoryRefusal::Receiver { what, need },
        }
    }
}

/// Compressed frames of a document not yet verified would decompress past what the receiver
/// allows: [`super::InflateLimit`]'s ratio to their bytes on the wire, plus the session's
/// allowance. The document is refused (`Refused`, LIMIT) before the frame is decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "LIMIT: its compressed frames would decompress to {inflated} bytes from {wire} on the wire \
     before it is verified; this receiver allows {ratio} times the bytes on the wire, and \
     {} KiB beyond that for all the unverified documents of a session ({} KiB of which its \
     others hold); send it with less compression or none (--compress off), or ask for a higher \
     --max-compression-ratio or --compression-allowance",
    allowance / 1024,
    others.div_ceil(1024)
)]
pub(super) struct InflateRefusal {
    pub(super) inflated: u64,
    pub(super) wire: u64,
    pub(super) ratio: u32,
    pub(super) allowance: u64,
    pub(super) others: u64,
}
