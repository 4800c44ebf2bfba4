//! `Join`: the first frame on every channel but channel 0.
//!
//! The thesis's plain channels accepted whoever connected. Here a channel proves it belongs to the
//! session with a token an on-path observer cannot learn (e.g. derived from the TLS exporter of
//! channel 0); the receiver compares it in constant time and drops a connection that fails.

use super::wire::{kind_code, Reader};
use super::{write_frame, MessageError};
use crate::frame::FrameType;
use crate::layout::Kind;

/// A channel asks to join a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Join {
    /// From [`super::SessionMsg::session_id`].
    pub session_id: [u8; 16],
    /// Secure (TLS) or plain (TCP) channel.
    pub kind: Kind,
    /// Index of the channel among those of its kind (secure channel 0 is the control channel).
    pub index: u8,
    /// Proof of membership.
    pub token: [u8; 32],
}

impl Join {
    /// Payload bytes.
    pub const PAYLOAD_LEN: usize = 16 + 1 + 1 + 32;

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Join, |out| {
            out.extend_from_slice(&self.session_id);
            out.extend_from_slice(&[kind_code(self.kind), self.index]);
            out.extend_from_slice(&self.token);
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<Join, MessageError> {
        let mut r = Reader::new("Join", payload);
        let join = Join {
            session_id: r.array("session_id")?,
            kind: r.kind("kind")?,
            index: r.u8("index")?,
            token: r.array("token")?,
        };
        r.finish()?;
        Ok(join)
    }
}
