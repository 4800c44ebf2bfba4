//! `Bye`: orderly end of a session. Empty payload.
//!
//! The thesis ended a transfer by closing sockets, so a reset and the end looked the same. A
//! channel that closes without `Bye` is a broken transfer.

use super::wire::Reader;
use super::{write_frame, MessageError};
use crate::frame::FrameType;

/// The session is over; no more frames follow on this channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bye {}

impl Bye {
    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Bye, |_| {});
    }

    /// Parse a payload (must be empty).
    pub fn parse(payload: &[u8]) -> Result<Bye, MessageError> {
        Reader::new("Bye", payload).finish()?;
        Ok(Bye {})
    }
}
