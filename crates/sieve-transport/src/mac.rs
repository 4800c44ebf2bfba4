//! Integrity of the plain channels: a keyed MAC of all cleartext, unit by unit.
//!
//! The plain channels cross the network in the clear, so their bytes must be checked before a
//! document is committed (DESIGN §3). Every *unit* of a plain frame (see [`units`]) gets an
//! AES-GMAC tag (AES-128-GCM over no plaintext, the unit as associated data) under a key that
//! both ends derive from channel 0's TLS exporter, with the unit's `(document, offset)` as the
//! 96-bit nonce, unique within a session. The tags never leave either end: each side folds them,
//! ordered by offset, into a ledger digest (`sieve_core::ledger`) and the sender's digest travels
//! inside TLS.
//!
//! Why GMAC and not a plain hash: the point of the sieve is to spend less CPU on cleartext than
//! TLS would; on CPUs with AES and carry-less multiply instructions GMAC runs at several times
//! the speed of BLAKE3 (measured here: ~25 GB/s against ~4.7 GB/s), so integrity costs a small
//! fraction of what encrypting the same bytes would.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use sieve_core::sieve::{OutOfStream, Placement};
use sieve_core::Kind;

/// A unit's stream offset, length and tag.
pub type Tag = (u64, u64, [u8; 32]);

/// Why cleartext could not be tagged.
#[derive(Debug, thiserror::Error)]
pub enum MacError {
    /// The frame reaches beyond the document's plain stream.
    #[error(transparent)]
    OutOfStream(#[from] OutOfStream),
    /// The cipher refused to seal. Sealing an empty plaintext does not fail in practice; if it
    /// ever did, a made-up tag would be worse than none: an all-zero tag is the same for any
    /// bytes, so two ends that both failed would agree on altered cleartext.
    #[error("cannot compute the MAC of the cleartext at offset {offset} of document {doc}")]
    Seal { doc: u32, offset: u64 },
}

/// Most bytes one tag covers: units never cross a multiple of this in the plain stream.
pub const MAC_BLOCK: u64 = 256 << 10;

/// Runs of the layout shorter than this (within a block) do not get units of their own: they
/// are tagged together with their neighbours.
pub const MIN_RUN_UNIT: u64 = 16 << 10;

/// The units of the plain frame at stream `offset`, `len` bytes long: `f(within, n)` for each, in
/// order, `within` relative to the frame.
///
/// Units never cross a [`MAC_BLOCK`]-aligned block of the stream, which keeps each one small
/// enough to still be in cache when it is sent. Within a block they are cut where one run of the
/// layout (`streams`, from the manifest, which both ends hold) ends and the next begins, when
/// both sides of the cut are at least [`MIN_RUN_UNIT`] long: a frame of a mapped document spans
/// several runs, which are not next to each other in the file (the classified parts and marks
/// sit between them), and a tag covers contiguous bytes, so cutting at long runs lets the sender
/// tag the file's bytes where they lie. Short runs (a classified field on every line of a CSV)
/// are tagged together, from a copy, rather than one tag (and one ledger entry) each: the sender
/// copies at most a block, and the count of tags is bounded by the frame's length. Neither cut
/// shows on the wire: frames are cut by the scheduler alone, so the plain channels do not tell
/// where the classified parts sat.
pub fn units(
    streams: &Placement,
    offset: u64,
    len: u64,
    mut f: impl FnMut(u64, u64),
) -> Result<(), OutOfStream> {
    // The unit being grown: its start in the stream and its length.
    let mut cur: Option<(u64, u64)> = None;
    streams.place(Kind::Plain, offset, len, |_, within, n| {
        let (mut at, end) = (offset + within, offset + within + n);
        let mut run_starts = true;
        while at < end {
            let block_end = (at / MAC_BLOCK + 1) * MAC_BLOCK;
            let take = block_end.min(end) - at;
            cur = match cur {
                Some((s, l)) if !(run_starts && l >= MIN_RUN_UNIT && take >= MIN_RUN_UNIT) => {
                    Some((s, l + take))
                }
                Some((s, l)) => {
                    f(s - offset, l);
                    Some((at, take))
                }
                None => Some((at, take)),
            };
            if at + take == block_end {
                if let Some((s, l)) = cur.take() {
                    f(s - offset, l);
                }
            }
            at += take;
            run_starts = false;
        }
    })?;
    if let Some((s, l)) = cur {
        f(s - offset, l);
    }
    Ok(())
}

/// The per-session MAC key of the plain channels.
pub struct PlainMac(LessSafeKey);

impl PlainMac {
    /// Derive the key from channel 0's exported keying material and the session id.
    pub fn derive(exported: &[u8; 32], session_id: &[u8; 16]) -> PlainMac {
        let mut ikm = [0u8; 48];
        ikm[..32].copy_from_slice(exported);
        ikm[32..].copy_from_slice(session_id);
        let k = blake3::derive_key("security sieve v1 plain-channel GMAC key", &ikm);
        // AES-128 accepts any 16-byte key, so this cannot fail.
        let key = UnboundKey::new(&AES_128_GCM, &k[..16]).expect("16-byte AES-128 key");
        PlainMac(LessSafeKey::new(key))
    }

    /// The tags of every unit (see [`units`]) of the contiguous plain frame `bytes` of `doc` at
    /// stream `offset`: `(offset, length, tag)` of each, in order, as the ledger records them.
    pub fn frame_tags(
        &self,
        streams: &Placement,
        doc: u32,
        offset: u64,
        bytes: &[u8],
    ) -> Result<Vec<Tag>, MacError> {
        let mut tags = Vec::new();
        let mut failed = None;
        units(streams, offset, bytes.len() as u64, |within, n| {
            let at = offset + within;
            let unit = &bytes[within as usize..(within + n) as usize];
            match self.tag(doc, at, unit) {
                Ok(t) => tags.push((at, n, t)),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(tags),
        }
    }

    /// The tag of the unit of `doc` at plain-stream `offset`, widened for the ledger.
    pub fn tag(&self, doc: u32, offset: u64, bytes: &[u8]) -> Result<[u8; 32], MacError> {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&doc.to_be_bytes());
        n[4..].copy_from_slice(&offset.to_be_bytes());
        let sealed = self.0.seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(n),
            Aad::from(bytes),
            &mut [],
        );
        widen(
            sealed.as_ref().map(|t| t.as_ref()).map_err(|_| ()),
            doc,
            offset,
        )
    }
}

/// A sealed tag widened to the ledger's 32 bytes, or the error that sealing failed (never a
/// tag made up in its place).
fn widen(sealed: Result<&[u8], ()>, doc: u32, offset: u64) -> Result<[u8; 32], MacError> {
    let t = sealed.map_err(|()| MacError::Seal { doc, offset })?;
    let mut out = [0u8; 32];
    out[..t.len().min(32)].copy_from_slice(&t[..t.len().min(32)]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sieve_core::layout::Layout;

    #[test]
    fn units_cut_at_blocks_and_between_long_runs_only() {
        // Plain runs of 100 B, 600 KiB and 50 B between classified parts: the short runs are
        // tagged with their neighbours, within blocks.
        let b = 600 << 10;
        let layout = Layout::from_ranges(100 + 7 + b + 9 + 50, &[100..107, 107 + b..116 + b]);
        let p = Placement::new(&layout, None).unwrap();
        let mut got = Vec::new();
        units(&p, 0, 100 + b + 50, |w, n| got.push((w, n))).unwrap();
        let m = MAC_BLOCK;
        assert_eq!(got, vec![(0, m), (m, m), (2 * m, 100 + b + 50 - 2 * m)]);
        // Two long runs within one block are cut where one ends.
        let (r1, r2) = (40 << 10, 30 << 10);
        let classified = std::iter::once(r1..r1 + 5).collect::<Vec<_>>();
        let layout = Layout::from_ranges(r1 + 5 + r2, &classified);
        let two = Placement::new(&layout, None).unwrap();
        let mut got = Vec::new();
        units(&two, 0, r1 + r2, |w, n| got.push((w, n))).unwrap();
        assert_eq!(got, vec![(0, r1), (r1, r2)]);
        // A frame starting inside a run: units are relative to the frame, blocks to the stream.
        let mut got = Vec::new();
        units(&p, m - 10, 30, |w, n| got.push((w, n))).unwrap();
        assert_eq!(got, vec![(0, 10), (10, 20)]);
        assert!(units(&p, 0, 100 + b + 51, |_, _| {}).is_err());
    }

    proptest::proptest! {
        /// However the runs and the frame fall, units cover the frame exactly, in order, never
        /// cross a block, and are few: at most one per block, per long run and per frame end.
        #[test]
        fn units_cover_frames_and_stay_few(
            runs in proptest::collection::vec(1u64..40_000, 1..200),
            start in 0u64..1_000_000,
            len in 0u64..3_000_000,
        ) {
            let mut ranges = Vec::new();
            let mut at = 0;
            for r in &runs {
                at += r;
                ranges.push(at..at + 3);
                at += 3;
            }
            let layout = Layout::from_ranges(at, &ranges);
            let p = Placement::new(&layout, None).unwrap();
            let plain = p.stream_len(Kind::Plain);
            let start = start.min(plain);
            let len = len.min(plain - start);
            let mut got = Vec::new();
            units(&p, start, len, |w, n| got.push((w, n))).unwrap();
            let mut pos = 0;
            for &(w, n) in &got {
                proptest::prop_assert_eq!(w, pos);
                proptest::prop_assert!(n > 0);
                let s = start + w;
                proptest::prop_assert_eq!(s / MAC_BLOCK, (s + n - 1) / MAC_BLOCK);
                pos += n;
            }
            proptest::prop_assert_eq!(pos, len);
            let long = runs.iter().filter(|&&r| r >= MIN_RUN_UNIT).count() as u64;
            let bound = len / MAC_BLOCK + 2 * long + 2;
            proptest::prop_assert!(got.len() as u64 <= bound, "{} units", got.len());
        }
    }

    #[test]
    fn a_sealing_failure_is_an_error_not_a_tag() {
        assert!(matches!(
            widen(Err(()), 3, 99),
            Err(MacError::Seal { doc: 3, offset: 99 })
        ));
        let t = widen(Ok(&[7u8; 16]), 0, 0).unwrap();
        assert_eq!((&t[..16], &t[16..]), (&[7u8; 16][..], &[0u8; 16][..]));
    }

    #[test]
    fn tags_bind_key_bytes_and_position() {
        let a = PlainMac::derive(&[1; 32], &[2; 16]);
        let b = PlainMac::derive(&[1; 32], &[3; 16]);
        let tag = |m: &PlainMac, doc, off, b: &[u8]| m.tag(doc, off, b).unwrap();
        let t = tag(&a, 0, 0, b"hello");
        assert_ne!(t, [0; 32]);
        assert_eq!(t, tag(&a, 0, 0, b"hello"));
        assert_ne!(t, tag(&a, 0, 0, b"hellp"));
        assert_ne!(t, tag(&a, 0, 1, b"hello"));
        assert_ne!(t, tag(&a, 1, 0, b"hello"));
        assert_ne!(t, tag(&b, 0, 0, b"hello"));
    }
}
