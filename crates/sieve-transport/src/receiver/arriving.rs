//! A plain data frame while it arrives: its units are tagged as soon as their last byte has
//! come, while the socket's copy has left them in cache (see [`FrameTagger`]), instead of once
//! the whole frame is in.
//!
//! Only a frame whose document's manifest is already here is tagged early; any other (its
//! manifest not come yet, the document refused, a frame beyond its stream) is left to
//! [`Session::data`], which tags it whole and reports what is wrong with it. The tags are the
//! same either way.

use sieve_core::frame::FrameType;
use sieve_core::message::{DataRef, DATA_PREFIX_LEN};
use sieve_core::receiver::Lookup;
use sieve_core::Kind;

use crate::mac::FrameTagger;

use super::session::Session;

/// What a channel knows of the frame it is reading.
#[derive(Debug, Default)]
pub(super) enum Arriving {
    /// Nothing yet: not a plain data frame, its prefix not in, or its manifest not here yet.
    #[default]
    Unknown,
    /// Its units are being tagged.
    Tagging(FrameTagger),
    /// Tagged whole once it is in.
    Later,
}

impl Arriving {
    /// The tagger of the frame of `doc` at `offset`, `len` bytes long, if this was it; the
    /// state is reset for the next frame either way.
    pub(super) fn take_for(&mut self, doc: u32, offset: u64, len: u64) -> Option<FrameTagger> {
        match std::mem::take(self) {
            Arriving::Tagging(t) if t.is_for(doc, offset, len) => Some(t),
            _ => None,
        }
    }
}

impl Session {
    /// More of a `ty` frame, `len` bytes of payload in all, has come on a `kind` channel:
    /// `so_far` is its payload until now.
    pub(super) fn arriving(
        &self,
        kind: Kind,
        state: &mut Arriving,
        (ty, len, so_far): (FrameType, usize, &[u8]),
    ) {
        if kind != Kind::Plain || ty != FrameType::Data || so_far.len() < DATA_PREFIX_LEN {
            return;
        }
        if let Arriving::Unknown = state {
            let Ok(d) = DataRef::parse(so_far) else {
                *state = Arriving::Later;
                return;
            };
            let found = self.sm().lookup(d.doc);
            *state = match found {
                Ok(Lookup::Placement(p)) => {
                    let n = (len - DATA_PREFIX_LEN) as u64;
                    match FrameTagger::new(&p, d.doc, d.offset, n) {
                        Ok(t) => Arriving::Tagging(t),
                        Err(_) => Arriving::Later,
                    }
                }
                // Asked again at the next step: the manifest may come meanwhile.
                Ok(Lookup::NotYet) => return,
                Ok(Lookup::Drop) | Err(_) => Arriving::Later,
            };
        }
        if let Arriving::Tagging(t) = state {
            t.advance(&self.mac, &so_far[DATA_PREFIX_LEN..]);
        }
    }
}
