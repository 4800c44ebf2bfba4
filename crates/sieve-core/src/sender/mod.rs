//! The sender's protocol, as a state machine that never touches a socket, a file or a clock.
//!
//! [`SenderSession`] is to `sieve send` what [`crate::receiver::ReceiverSession`] is to `sieve
//! serve`, and `quinn-proto` to `quinn`: the transport opens the connections, reads and writes
//! frames, reads the files and computes their MACs, and feeds the session what happened; the
//! session decides what goes where and when:
//!
//! - **HELLO and SESSION.** [`SenderSession::new`] builds the HELLO from the configuration
//!   (channel counts within the protocol's limits, frame sizes from [`Chunk`], the MACs and
//!   compressed frames offered). [`SenderSession::on_hello_answer`] refuses an ERROR, a MAC that
//!   was not offered and a frame limit without room for data, and takes from SESSION the frame
//!   sizes and the window of unacknowledged documents; [`SenderSession::join`] says what each
//!   extra channel's JOIN carries.
//! - **Which bytes next.** [`SenderSession::plan`] splits the streams (the thesis's ES/SS/BFS/
//!   BES/BSS, or the dynamic scheduler); [`SenderSession::advance`] hands each channel its next
//!   piece and says when it must wait for the window (the receiver holds a file open per
//!   document in progress, and says how many it can).
//! - **How each document ends.** Once every piece of a document is out, and only then, the
//!   transport reports its cleartext digest or that its file changed, and the session queues its
//!   DOC_END or DOC_CANCEL ([`SenderSession::poll_control`]). A document the receiver has
//!   answered already (a failure) gets neither, and its remaining pieces need not be sent.
//! - **What was delivered.** [`SenderSession::on_answer`] records each acknowledgement and ends
//!   the session on ERROR, an unexpected message, or an acknowledgement twice or out of range;
//!   [`SenderSession::answers`] is what the report and the list of undelivered documents are
//!   made of.
//!
//! The session is a plain value: the transport shares it between its channel tasks behind one
//! lock, taken once per piece ([`SenderSession::advance`]), never per frame.
//! `tests/sender_props.rs` drives it through honest and failing sessions.

mod action;
mod chunk_size;
mod config;
mod document;
mod session;
mod work;

pub use action::{
    Answered, Assignment, Channel, Control, Ended, Finish, JoinRefused, ManifestError, Progress,
    SessionRefused, TooEarly,
};
pub use chunk_size::{Chunk, AUTO_CHUNKS_PER_CHANNEL, AUTO_CHUNK_MAX, AUTO_CHUNK_MIN};
pub use config::{SenderConfig, MAX_UNACKED_DOCS};
pub use document::DocSpec;
pub use session::SenderSession;
