//! A plain data frame while it arrives: its units are tagged as soon as their last byte has
//! come, while the socket's copy has left them in cache (see [`FrameTagger`]), instead of once
//! the whole frame is in.
//!
//! Only a frame whose document's manifest is already here is tagged early; any other (its
//! manifest not come yet, the document refused, a frame beyond its stream) is left to
//! the session's `data`, which tags it whole and reports what is wrong with it. The tags are the
//! same either way.

use sieve_core::frame::FrameType;
use sieve_core::message::{DataRef, DATA_PREFIX_LEN};
use sieve_core::receiver::{Lookup, ProtocolError};
use sieve_core::Kind;

use crate::mac::{FrameTagger, PlainMac};

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
    /// More of a `ty` frame, `len` bytes of payload in all, has come on a `kind` channel:
    /// `so_far` is its payload until now. `lookup` says where a document's frames go (the
    /// session's state machine, under its lock).
    pub(super) fn observe(
        &mut self,
        mac: &PlainMac,
        lookup: impl FnOnce(u32) -> Result<Lookup, ProtocolError>,
        kind: Kind,
        (ty, len, so_far): (FrameType, usize, &[u8]),
    ) {
        if kind != Kind::Plain || ty != FrameType::Data || so_far.len() < DATA_PREFIX_LEN {
            return;
        }
        if let Arriving::Unknown = self {
            let Ok(d) = DataRef::parse(so_far) else {
                *self = Arriving::Later;
                return;
            };
            *self = match lookup(d.doc) {
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
        if let Arriving::Tagging(t) = self {
            t.advance(mac, &so_far[DATA_PREFIX_LEN..]);
        }
    }

    /// The tagger of the frame of `doc` at `offset`, `len` bytes long, if this was it; the
    /// state is reset for the next frame either way.
    pub(super) fn take_for(&mut self, doc: u32, offset: u64, len: u64) -> Option<FrameTagger> {
        match std::mem::take(self) {
            Arriving::Tagging(t) if t.is_for(doc, offset, len) => Some(t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sieve_core::layout::Layout;
    use sieve_core::sieve::Placement;

    use super::*;

    /// A DATA payload of `doc` at `offset` carrying `bytes`.
    fn payload(doc: u32, offset: u64, bytes: &[u8]) -> Vec<u8> {
        let mut p = doc.to_be_bytes().to_vec();
        p.extend_from_slice(&offset.to_be_bytes());
        p.extend_from_slice(bytes);
        p
    }

    #[test]
    fn a_plain_frame_is_tagged_in_steps_once_its_manifest_is_here() {
        let layout = Layout::from_ranges(2_000_000, std::slice::from_ref(&(100_000..100_050)));
        let placement = Arc::new(Placement::new(&layout, None).unwrap());
        let mac = PlainMac::derive(&[7; 32], &[3; 16]);
        let bytes: Vec<u8> = (0..900_000u32).map(|i| (i % 253) as u8).collect();
        let frame = payload(4, 1000, &bytes);
        let whole = mac.frame_tags(&placement, 4, 1000, &bytes).unwrap();
        let mut a = Arriving::default();
        let see = |a: &mut Arriving, lookup: Lookup, upto: usize| {
            a.observe(
                &mac,
                |doc| {
                    assert_eq!(doc, 4);
                    Ok(lookup)
                },
                Kind::Plain,
                (FrameType::Data, frame.len(), &frame[..upto]),
            )
        };
        // No manifest yet: asked again at the next step.
        see(&mut a, Lookup::NotYet, 300_000);
        assert!(matches!(a, Arriving::Unknown));
        see(&mut a, Lookup::Placement(placement.clone()), 600_000);
        see(&mut a, Lookup::Placement(placement.clone()), frame.len());
        let t = a
            .take_for(4, 1000, bytes.len() as u64)
            .expect("tagged while it arrived");
        assert!(
            matches!(a, Arriving::Unknown),
            "not reset for the next frame"
        );
        assert_eq!(t.finish(&mac, &bytes).unwrap(), whole);

        // A refused document, a secure channel, another frame type: nothing to take.
        see(&mut a, Lookup::Drop, 600_000);
        assert!(matches!(a, Arriving::Later));
        assert!(a.take_for(4, 1000, bytes.len() as u64).is_none());
        let never = |_| -> Result<Lookup, ProtocolError> { panic!("looked up") };
        let all = (FrameType::Data, frame.len(), &frame[..]);
        a.observe(&mac, never, Kind::Secure, all);
        a.observe(
            &mac,
            never,
            Kind::Plain,
            (FrameType::ZData, frame.len(), &frame[..]),
        );
        assert!(matches!(a, Arriving::Unknown));
        // A frame beyond its document's stream is left to be tagged whole (and refused there).
        let beyond = payload(4, 1_999_000, &bytes);
        let mut b = Arriving::default();
        b.observe(
            &mac,
            |_| Ok(Lookup::Placement(placement)),
            Kind::Plain,
            (FrameType::Data, beyond.len(), &beyond[..20]),
        );
        assert!(matches!(b, Arriving::Later));
    }
}
