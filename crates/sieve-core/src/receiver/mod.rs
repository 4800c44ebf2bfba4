//! The receiver's protocol, as a state machine that never touches a socket or a file.
//!
//! `quinn-proto` holds a whole QUIC connection without doing I/O; `quinn` feeds it datagrams and
//! timers and carries out what it asks. [`ReceiverSession`] does the same for one session of the
//! sieve: the transport feeds it what arrived (a manifest, a data frame whose cleartext it has
//! already tagged, a DOC_END, a write that finished, a verification or commit that finished) and
//! carries out the [`Action`]s it returns (verify these ledgers, commit this file, discard that
//! one, send this acknowledgement). Because every decision is taken here, under one `&mut self`,
//! the rules that keep a receiver honest hold by construction rather than by the order in which
//! threads happen to take locks:
//!
//! - **A byte reaches the file only after its tag is recorded.** [`ReceiverSession::data`]
//!   records the frame's tags (or, for a secure frame, its extent) in the document's ledger
//!   before it answers [`Verdict::Write`]; the transport writes only what that verdict says.
//! - **A document is closed to writes before its ledger is checked.** The call that completes a
//!   document (its last byte, or its DOC_END) closes it and moves its ledgers out into an
//!   [`Action::Verify`]; any later DATA for it is a protocol error, never a write.
//! - **A commit waits for every write it covers.** [`Action::Commit`] is issued only once the
//!   document is verified and every write it was given has been reported done, so the file that
//!   is renamed into place holds exactly the bytes whose tags were verified.
//! - **What a peer can make the receiver hold is charged.** Manifests, their placements and the
//!   ledgers that grow with every piece are charged to the session's share and to a
//!   [`MemoryPool`] shared by every session; a document is dropped from memory once it is
//!   acknowledged, and only one byte per document id is kept to recognise late frames.
//! - **What a peer can make the receiver write before it is vouched for is bounded by what it
//!   sent.** Compressed frames of a document not yet verified may decompress to at most
//!   [`InflateLimit::ratio`] times their bytes on the wire, plus a small allowance per session
//!   ([`ReceiverSession::may_inflate`], asked before a frame is decompressed); a document past
//!   it is refused with LIMIT.
//!
//! `tests/receiver_props.rs` drives it through every order of late, forged and honest events.

mod action;
mod document;
mod memory;
mod refusal;
mod session;

pub use action::{
    Action, Commit, Failure, FileSpec, JoinRefusal, Lookup, ProtocolError, Verdict, Verification,
    WritePiece,
};
pub use memory::{AtomicPool, MemoryPool, UNLIMITED};
pub use session::{InflateLimit, ReceiverSession, SessionLimits};
