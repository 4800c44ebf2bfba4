//! `JoinOk`: receiver → joining channel, the token was right. Empty payload.
//!
//! A channel whose token is wrong gets no answer: it is dropped and counted.

use super::wire::Reader;
use super::{write_frame, MessageError};
use crate::frame::FrameType;

/// A [`super::Join`] was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct JoinOk {}

impl JoinOk {
    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::JoinOk, |_| {});
    }

    /// Parse a payload (must be empty).
    pub fn parse(payload: &[u8]) -> Result<JoinOk, MessageError> {
        Reader::new("JoinOk", payload).finish()?;
        Ok(JoinOk {})
    }
}
