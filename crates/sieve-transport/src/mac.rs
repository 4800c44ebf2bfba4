//! Integrity of the plain channels: a keyed MAC of all cleartext, unit by unit.
//!
//! The plain channels cross the network in the clear, so their bytes must be checked before a
//! document is committed (docs/DESIGN.md §3.5). Every *unit* of a plain frame (see [`units`]) gets
//! a tag under a key that both ends derive from channel 0's TLS exporter, bound to the unit's
//! `(document, offset)`, unique within a session. The tags never leave either end: each side folds
//! them, ordered by offset, into a ledger digest (`sieve_core::ledger`) and the sender's digest
//! travels inside TLS.
//!
//! Which MAC is negotiated per session ([`sieve_core::mac`]), because the cheapest one depends
//! on the CPU. The point of the sieve is to spend less CPU on cleartext than TLS would; on CPUs
//! with AES and carry-less multiply instructions AES-GMAC runs at about three times the speed
//! of keyed BLAKE3 (AMD EPYC, `sieve calibrate`: 31 GB/s against 10), so integrity costs a small
//! fraction of what encrypting the same bytes would. Without carry-less multiply GHASH runs in
//! software, and NH-Poly1305 ([`nh`]: 33 GB/s there with AVX-512), keyed BLAKE3 or Poly1305 is
//! several times faster than GMAC.
//!
//! | algorithm | tag of a unit |
//! |---|---|
//! | AES-GMAC | AES-128-GCM seal of no plaintext, the unit as associated data, nonce `doc ‖ offset` |
//! | keyed BLAKE3 | `BLAKE3(key; unit ‖ doc ‖ offset)`: the fixed-size suffix keeps the unit's bytes on BLAKE3's 1 KiB chunk boundaries, so the SIMD path hashes them in place |
//! | ChaCha20-Poly1305 | ChaCha20-Poly1305 seal of no plaintext, the unit as associated data, nonce `doc ‖ offset`: Poly1305 under a one-time key from ChaCha20's keystream for that nonce |
//! | NH-Poly1305 | `NHPoly1305(K; unit) + BLAKE3(K'; doc ‖ offset ‖ length)[..16]` mod 2¹²⁸ ([`nh`]): a Wegman–Carter MAC, the pad fresh for every unit because `(doc, offset)` is; the length is in the pad because NH zero-pads the unit |

pub mod nh;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, CHACHA20_POLY1305};
use sieve_core::mac::MacAlg;
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
    Seal {
        /// The document.
        doc: u32,
        /// Where in its plain stream the frame starts.
        offset: u64,
    },
}

/// Set in the nonce of a compressed frame's tag (see [`PlainMac::zdata_tag`]).
const ZDATA_NONCE_BIT: u64 = 1 << 63;

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
    if streams.longest(Kind::Plain) < MIN_RUN_UNIT {
        // No run is long enough to be cut at, so the units are the blocks: no walk over the
        // layout, whose segments a dense document has by the hundred thousand. Both ends walked
        // it here for every plain frame: 12 % of a receiver's CPU samples for 32 MiB of
        // generated CSV (557,318 segments), Intel Xeon model 207.
        let end = streams.check_piece(Kind::Plain, offset, len)?;
        let mut at = offset;
        while at < end {
            let take = ((at / MAC_BLOCK + 1) * MAC_BLOCK).min(end) - at;
            f(at - offset, take);
            at += take;
        }
        return Ok(());
    }
    units_by_walk(streams, offset, len, f)
}

/// [`units`] for a layout with long runs: a walk over the frame's runs.
fn units_by_walk(
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

/// The per-session MAC of the plain channels: the negotiated algorithm and its key.
pub struct PlainMac {
    alg: MacAlg,
    key: Key,
}

enum Key {
    /// An AEAD sealed over no plaintext: AES-128-GCM (GMAC) or ChaCha20-Poly1305.
    Aead(LessSafeKey),
    Blake3([u8; 32]),
    /// NH-Poly1305's key and the pad's BLAKE3 key.
    Nh(Box<(nh::NhPoly1305, [u8; 32])>),
}

impl PlainMac {
    /// The AES-GMAC key ([`MacAlg::Gmac`]) from channel 0's exported keying material and the
    /// session id; [`PlainMac::derive_for`] derives any algorithm's.
    pub fn derive(exported: &[u8; 32], session_id: &[u8; 16]) -> PlainMac {
        PlainMac::derive_for(MacAlg::Gmac, exported, session_id)
    }

    /// The key of `alg` from channel 0's exported keying material and the session id, under the
    /// algorithm's own label ([`MacAlg::key_context`]): the keys of two algorithms are
    /// independent even within one session.
    pub fn derive_for(alg: MacAlg, exported: &[u8; 32], session_id: &[u8; 16]) -> PlainMac {
        let mut ikm = [0u8; 48];
        ikm[..32].copy_from_slice(exported);
        ikm[32..].copy_from_slice(session_id);
        let k = blake3::derive_key(alg.key_context(), &ikm);
        let key = match alg {
            MacAlg::NhPoly1305 => {
                // The hash's key and the pad's, from one stream of the same derivation (whose
                // first 32 bytes are `k`, unused here).
                let mut stream = [0u8; 32 + nh::KEY_BYTES + 32];
                let mut h = blake3::Hasher::new_derive_key(alg.key_context());
                h.update(&ikm);
                h.finalize_xof().fill(&mut stream);
                let mut hash_key = [0u8; nh::KEY_BYTES];
                hash_key.copy_from_slice(&stream[32..32 + nh::KEY_BYTES]);
                let mut pad_key = [0u8; 32];
                pad_key.copy_from_slice(&stream[32 + nh::KEY_BYTES..]);
                Key::Nh(Box::new((nh::NhPoly1305::new(&hash_key), pad_key)))
            }
            // Both AEADs accept any key of their length (16 and 32 bytes), so these cannot fail.
            MacAlg::Gmac => Key::Aead(LessSafeKey::new(
                UnboundKey::new(&AES_128_GCM, &k[..16]).expect("16-byte AES-128 key"),
            )),
            MacAlg::Poly1305 => Key::Aead(LessSafeKey::new(
                UnboundKey::new(&CHACHA20_POLY1305, &k).expect("32-byte ChaCha20 key"),
            )),
            MacAlg::Blake3 => Key::Blake3(k),
        };
        PlainMac { alg, key }
    }

    /// The algorithm.
    pub fn alg(&self) -> MacAlg {
        self.alg
    }

    /// The tags of every unit (see [`units`]) of the contiguous plain frame `bytes` of `doc` at
    /// stream `offset`: `(offset, length, tag)` of each, in order, as the ledger records them.
    pub(crate) fn frame_tags(
        &self,
        streams: &Placement,
        doc: u32,
        offset: u64,
        bytes: &[u8],
    ) -> Result<Vec<Tag>, MacError> {
        FrameTagger::new(streams, doc, offset, bytes.len() as u64)?.finish(self, bytes)
    }

    /// The tag of a compressed plain frame ([`sieve_core::message::ZData`]) of `doc` at
    /// plain-stream `offset`: `payload` is the frame's whole payload as it travels (document,
    /// offset, declared length, codec, compressed bytes). Both ends record it for the frame's
    /// declared length. Its nonce has the top bit of the offset set, which no unit's offset has
    /// (streams are far shorter than 2^63 bytes), so no tag of a compressed frame ever shares a
    /// nonce with the tag of a raw unit.
    pub(crate) fn zdata_tag(
        &self,
        doc: u32,
        offset: u64,
        payload: &[u8],
    ) -> Result<[u8; 32], MacError> {
        self.tag(doc, offset | ZDATA_NONCE_BIT, payload)
            .map_err(|_| MacError::Seal { doc, offset })
    }

    /// The tag of the unit of `doc` at plain-stream `offset`, widened for the ledger.
    pub fn tag(&self, doc: u32, offset: u64, bytes: &[u8]) -> Result<[u8; 32], MacError> {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&doc.to_be_bytes());
        n[4..].copy_from_slice(&offset.to_be_bytes());
        match &self.key {
            Key::Aead(key) => {
                let sealed = key.seal_in_place_separate_tag(
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
            Key::Blake3(key) => {
                let mut h = blake3::Hasher::new_keyed(key);
                h.update(bytes);
                h.update(&n);
                Ok(*h.finalize().as_bytes())
            }
            Key::Nh(keys) => {
                let (hash, pad_key) = &**keys;
                let mut h = blake3::Hasher::new_keyed(pad_key);
                h.update(&n);
                h.update(&(bytes.len() as u64).to_be_bytes());
                let mut pad = [0u8; 16];
                pad.copy_from_slice(&h.finalize().as_bytes()[..16]);
                let mut out = [0u8; 32];
                out[..16].copy_from_slice(&hash.hash(bytes, &pad));
                Ok(out)
            }
        }
    }
}

/// The tags of one plain frame, taken unit by unit as its bytes arrive.
///
/// A receiver that tags a frame once all of it has come reads it back from memory: a frame of
/// a few MiB no longer fits in the core's cache by the time its last byte is copied out of the
/// socket. Tagging each unit as soon as its last byte has come reads it while the copy has just
/// left it in cache. With a receiver confined to half a core and 16 senders of 10 MB documents
/// at P = 0.1 on loopback (Intel Xeon model 207), GHASH took about a fifth of the receiver's CPU
/// when 3.4 MiB frames were tagged whole. The tags are the same either way: [`units`] cuts the
/// frame, whatever pieces it arrives in.
#[derive(Debug)]
pub(crate) struct FrameTagger {
    doc: u32,
    offset: u64,
    len: u64,
    /// Each unit's start within the frame and its length, in order.
    units: Vec<(u64, u64)>,
    /// The tags of the first `tags.len()` units.
    tags: Vec<Tag>,
    failed: Option<MacError>,
}

impl FrameTagger {
    /// A tagger for the plain frame of `doc` at stream `offset`, `len` bytes long; an error if
    /// the frame reaches beyond the document's plain stream.
    pub(crate) fn new(
        streams: &Placement,
        doc: u32,
        offset: u64,
        len: u64,
    ) -> Result<FrameTagger, MacError> {
        let mut cut = Vec::new();
        units(streams, offset, len, |within, n| cut.push((within, n)))?;
        Ok(FrameTagger {
            doc,
            offset,
            len,
            tags: Vec::with_capacity(cut.len()),
            units: cut,
            failed: None,
        })
    }

    /// Whether this tagger is for the frame of `doc` at `offset`, `len` bytes long.
    pub(crate) fn is_for(&self, doc: u32, offset: u64, len: u64) -> bool {
        (self.doc, self.offset, self.len) == (doc, offset, len)
    }

    /// Tag every unit not tagged yet that lies wholly within `arrived`, the frame's first bytes.
    pub(crate) fn advance(&mut self, mac: &PlainMac, arrived: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        while let Some(&(within, n)) = self.units.get(self.tags.len()) {
            let Some(unit) = arrived.get(within as usize..(within + n) as usize) else {
                return;
            };
            let at = self.offset + within;
            match mac.tag(self.doc, at, unit) {
                Ok(t) => self.tags.push((at, n, t)),
                Err(e) => {
                    self.failed = Some(e);
                    return;
                }
            }
        }
    }

    /// The tags of all the frame's units, `bytes` being the whole frame.
    pub(crate) fn finish(mut self, mac: &PlainMac, bytes: &[u8]) -> Result<Vec<Tag>, MacError> {
        self.advance(mac, bytes);
        match self.failed {
            Some(e) => Err(e),
            None if self.tags.len() == self.units.len() => Ok(self.tags),
            // Only a frame shorter than the tagger's: a caller's mistake, refused as unsealable.
            None => Err(MacError::Seal {
                doc: self.doc,
                offset: self.offset,
            }),
        }
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
    use proptest::prelude::*;
    use sieve_core::layout::Layout;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// However a frame arrives (any steps, each possibly ending mid-unit, some repeated),
        /// tagging its units as they come gives exactly the tags of the whole frame.
        #[test]
        fn tags_taken_while_a_frame_arrives_are_the_whole_frames(
            classified in proptest::collection::vec((0u64..900_000, 1u64..40_000), 0..12),
            start in 0u64..300_000,
            len in 1u64..700_000,
            steps in proptest::collection::vec(0usize..800_000, 0..12),
            alg in proptest::sample::select(MacAlg::ALL.to_vec()),
        ) {
            let total = 1_000_000u64;
            let mut ranges: Vec<std::ops::Range<u64>> = Vec::new();
            for (at, n) in classified {
                let r = at..(at + n).min(total);
                if ranges.iter().all(|q| r.end <= q.start || r.start >= q.end) {
                    ranges.push(r);
                }
            }
            ranges.sort_by_key(|r| r.start);
            let layout = Layout::from_ranges(total, &ranges);
            let p = Placement::new(&layout, None).unwrap();
            let plain = layout.stream_len(Kind::Plain);
            prop_assume!(plain > 0);
            let offset = start % plain;
            let len = len.min(plain - offset);
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 + i / 977) as u8).collect();
            let mac = PlainMac::derive_for(alg, &[9; 32], &[2; 16]);
            let whole = mac.frame_tags(&p, 5, offset, &bytes).unwrap();
            let mut t = FrameTagger::new(&p, 5, offset, len).unwrap();
            prop_assert!(t.is_for(5, offset, len));
            let mut steps = steps;
            steps.sort_unstable();
            for s in steps {
                t.advance(&mac, &bytes[..s.min(bytes.len())]);
            }
            prop_assert_eq!(t.finish(&mac, &bytes).unwrap(), whole);
        }
    }

    #[test]
    fn a_frame_shorter_than_its_tagger_is_refused() {
        let layout = Layout::from_ranges(1000, &[]);
        let p = Placement::new(&layout, None).unwrap();
        let mac = PlainMac::derive(&[1; 32], &[1; 16]);
        let t = FrameTagger::new(&p, 0, 0, 1000).unwrap();
        assert!(t.finish(&mac, &[0; 999]).is_err());
        assert!(
            FrameTagger::new(&p, 0, 10, 1000).is_err(),
            "beyond the stream"
        );
    }

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
        /// Where no run is long enough to be cut at, the blocks that [`units`] gives without a
        /// walk are the units the walk gives, wherever the frame lies.
        #[test]
        fn short_runs_give_the_units_of_the_walk(
            runs in proptest::collection::vec(0u64..MIN_RUN_UNIT, 1..400),
            marks in proptest::collection::vec(0u64..9, 1..400),
            start in 0u64..2_000_000,
            len in 0u64..2_000_000,
        ) {
            let mut ranges = Vec::new();
            let mut at = 0;
            for (r, m) in runs.iter().zip(marks.iter().cycle()) {
                at += r;
                ranges.push(at..at + m);
                at += m;
            }
            let layout = Layout::from_ranges(at + 1, &ranges);
            let p = Placement::new(&layout, None).unwrap();
            proptest::prop_assert!(p.longest(Kind::Plain) < MIN_RUN_UNIT);
            let plain = p.stream_len(Kind::Plain);
            let start = start % (plain + 1);
            let len = len % (plain - start + 1);
            let (mut fast, mut walked) = (Vec::new(), Vec::new());
            units(&p, start, len, |w, n| fast.push((w, n))).unwrap();
            units_by_walk(&p, start, len, |w, n| walked.push((w, n))).unwrap();
            proptest::prop_assert_eq!(fast, walked);
            // Beyond the stream, both refuse alike.
            let over = plain - start + 1;
            proptest::prop_assert_eq!(
                units(&p, start, over, |_, _| {}).unwrap_err(),
                units_by_walk(&p, start, over, |_, _| {}).unwrap_err()
            );
        }

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
        for alg in MacAlg::ALL {
            let a = PlainMac::derive_for(alg, &[1; 32], &[2; 16]);
            let b = PlainMac::derive_for(alg, &[1; 32], &[3; 16]);
            assert_eq!(a.alg(), alg);
            let tag = |m: &PlainMac, doc, off, b: &[u8]| m.tag(doc, off, b).unwrap();
            let t = tag(&a, 0, 0, b"hello");
            assert_ne!(t, [0; 32], "{alg}");
            assert_eq!(t, tag(&a, 0, 0, b"hello"), "{alg}");
            assert_ne!(t, tag(&a, 0, 0, b"hellp"), "{alg}");
            assert_ne!(t, tag(&a, 0, 1, b"hello"), "{alg}");
            assert_ne!(t, tag(&a, 1, 0, b"hello"), "{alg}");
            assert_ne!(t, tag(&b, 0, 0, b"hello"), "{alg}");
            // A unit's bytes and its position cannot trade places (BLAKE3 appends the position).
            assert_ne!(tag(&a, 0, 0, b""), tag(&a, 0, 0, &[0; 12]), "{alg}");
            // Trailing zeros count (NH pads with them; its pad binds the length).
            assert_ne!(tag(&a, 0, 0, b"ab"), tag(&a, 0, 0, b"ab\0"), "{alg}");
            assert_ne!(tag(&a, 0, 0, &[0; 16]), tag(&a, 0, 0, &[0; 32]), "{alg}");
        }
        assert_eq!(
            PlainMac::derive(&[1; 32], &[2; 16])
                .tag(0, 0, b"x")
                .unwrap(),
            PlainMac::derive_for(MacAlg::Gmac, &[1; 32], &[2; 16])
                .tag(0, 0, b"x")
                .unwrap()
        );
    }

    /// Each algorithm has its own key and construction: the same session never gives two
    /// algorithms the same tag, and each matches its reference construction.
    #[test]
    fn algorithms_are_distinct_and_match_their_references() {
        let (exp, sid) = ([9u8; 32], [8u8; 16]);
        let tags: Vec<[u8; 32]> = MacAlg::ALL
            .iter()
            .map(|&a| {
                PlainMac::derive_for(a, &exp, &sid)
                    .tag(5, 1 << 20, b"cleartext")
                    .unwrap()
            })
            .collect();
        let distinct: std::collections::HashSet<_> = tags.iter().collect();
        assert_eq!(distinct.len(), MacAlg::COUNT);
        let mut ikm = [0u8; 48];
        ikm[..32].copy_from_slice(&exp);
        ikm[32..].copy_from_slice(&sid);
        let k = blake3::derive_key(MacAlg::Blake3.key_context(), &ikm);
        let mut suffixed = b"cleartext".to_vec();
        suffixed.extend_from_slice(&5u32.to_be_bytes());
        suffixed.extend_from_slice(&(1u64 << 20).to_be_bytes());
        assert_eq!(tags[1], *blake3::keyed_hash(&k, &suffixed).as_bytes());
        // GMAC's and the Poly1305s' tags are 16 bytes, zero-padded for the ledger.
        for t in [tags[0], tags[2], tags[3]] {
            assert_eq!(&t[16..], &[0u8; 16][..]);
        }
        // NH-Poly1305: the hash of the unit under the derivation's bytes 32.., plus the pad.
        let mut stream = [0u8; 32 + nh::KEY_BYTES + 32];
        let mut h = blake3::Hasher::new_derive_key(MacAlg::NhPoly1305.key_context());
        h.update(&ikm);
        h.finalize_xof().fill(&mut stream);
        let hash = nh::NhPoly1305::new(stream[32..32 + nh::KEY_BYTES].try_into().unwrap());
        let pad_key: [u8; 32] = stream[32 + nh::KEY_BYTES..].try_into().unwrap();
        let mut nonce = suffixed[9..].to_vec();
        nonce.extend_from_slice(&9u64.to_be_bytes());
        let pad: [u8; 16] = blake3::keyed_hash(&pad_key, &nonce).as_bytes()[..16]
            .try_into()
            .unwrap();
        assert_eq!(&tags[3][..16], &hash.hash(b"cleartext", &pad)[..]);
    }

    #[test]
    fn a_compressed_frames_tag_is_never_a_units_tag() {
        for alg in MacAlg::ALL {
            let a = PlainMac::derive_for(alg, &[1; 32], &[2; 16]);
            let t = a.tag(0, 0, b"hello").unwrap();
            assert_ne!(a.zdata_tag(0, 0, b"hello").unwrap(), t, "{alg}");
            assert_eq!(
                a.zdata_tag(0, 0, b"hello").unwrap(),
                a.zdata_tag(0, 0, b"hello").unwrap(),
                "{alg}"
            );
        }
    }
}
