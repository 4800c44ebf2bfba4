//! `ErrorMsg`: a fatal problem with the session, sent before closing the channel.
//!
//! The message is for humans (logs, the command line); the code is for programs.

use super::wire::{put_bytes, truncate_str, Reader};
use super::{write_frame, MessageError, MAX_TEXT_LEN};
use crate::frame::FrameType;

/// The peer gives up on the session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    /// One of the `ErrorMsg::*` codes (or an application's own above 1000).
    pub code: u16,
    /// What went wrong, UTF-8, at most [`MAX_TEXT_LEN`] bytes (cut on a character boundary when
    /// encoding a longer one, so an error can always be sent).
    pub message: String,
}

impl ErrorMsg {
    /// A frame or message could not be parsed, or came at the wrong time.
    pub const PROTOCOL: u16 = 1;
    /// The peer speaks another [`super::PROTOCOL_VERSION`].
    pub(crate) const VERSION: u16 = 2;
    /// A request exceeds what this peer accepts (channels, sizes, documents).
    pub const LIMIT: u16 = 3;
    /// A join failed or the session is unknown.
    pub const AUTH: u16 = 4;
    /// Something failed inside the peer (disk, resources).
    pub const INTERNAL: u16 = 5;
    /// The peer is shutting down.
    pub const SHUTDOWN: u16 = 6;

    /// An error with `code` and `message`.
    pub fn new(code: u16, message: impl Into<String>) -> ErrorMsg {
        ErrorMsg {
            code,
            message: message.into(),
        }
    }

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Error, |out| {
            out.extend_from_slice(&self.code.to_be_bytes());
            put_bytes(out, truncate_str(&self.message, MAX_TEXT_LEN).as_bytes());
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<ErrorMsg, MessageError> {
        let mut r = Reader::new("Error", payload);
        let error = ErrorMsg {
            code: r.u16("code")?,
            message: r.string("message", MAX_TEXT_LEN)?,
        };
        r.finish()?;
        Ok(error)
    }
}

impl std::fmt::Display for ErrorMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "peer error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorMsg {}
