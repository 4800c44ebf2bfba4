//! Split and combine for one document over `k` channels of one kind (thesis §4.3.3-4.3.4).
//!
//! The sieve leaves two streams per document, one per [`Kind`](crate::Kind): the concatenation
//! of its segments of that kind (the thesis's sieved data list). With several channels of a kind,
//! a *splitter* decides which channel carries which bytes and a *binder* puts them back.
//!
//! * **ES**, even split (§4.3.3): every segment is cut in `k`; channels `0..k-1` get
//!   `floor(len / k)` bytes and the last one also gets the remainder. Balanced to the byte, but
//!   every segment becomes `k` pieces.
//! * **SS**, segment split (§4.3.4): segments are never cut. The first `k` segments fill the `k`
//!   empty channels in turn; every further segment goes to the channel with the fewest bytes so
//!   far (ties to the lowest index). Fewer pieces, possibly uneven.
//!
//! Both are pure functions of the segment lengths, which the receiver learns from the manifest,
//! so the receiver recomputes the same [`Plan`] instead of reading the thesis's in-band `order`
//! string. [`combine`] then copies every piece once into a buffer allocated once per stream: the
//! thesis's ES combine concatenated strings and took 13.5 ms for a 10MB-50 file (Table 5.2);
//! here ES and SS combine do the same work, one copy of every byte.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use thiserror::Error;

use crate::plan::{Piece, Plan};

/// Which single-document split a sender uses; the receiver must be told the same one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Channels ask for the next fixed-size chunk when they are free ([`crate::chunk`]).
    #[default]
    Dynamic,
    /// ES (§4.3.3): [`even_split`].
    Even,
    /// SS (§4.3.4): [`segment_split`].
    Segment,
}

impl Split {
    /// The names accepted by [`FromStr`], in declaration order.
    pub(crate) const NAMES: [&'static str; 3] = ["dynamic", "even", "segment"];

    /// The recomputable plan for the segment lengths `lens` over `k` channels, or `None` for
    /// [`Split::Dynamic`], whose assignment is only decided while sending.
    pub fn plan(self, lens: &[u64], k: usize) -> Option<Plan> {
        match self {
            Split::Dynamic => None,
            Split::Even => Some(even_split(lens, k)),
            Split::Segment => Some(segment_split(lens, k)),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Split::Dynamic => "dynamic",
            Split::Even => "even",
            Split::Segment => "segment",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Split {
    type Err = ParseSplitError;

    fn from_str(s: &str) -> Result<Split, ParseSplitError> {
        match s {
            "dynamic" => Ok(Split::Dynamic),
            "even" => Ok(Split::Even),
            "segment" => Ok(Split::Segment),
            _ => Err(ParseSplitError {
                input: s.to_owned(),
                expected: &Split::NAMES,
            }),
        }
    }
}

/// An algorithm name that is not one of the expected ones.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown split algorithm {input:?} (expected one of: {})", expected.join(", "))]
pub struct ParseSplitError {
    /// What was given.
    pub input: String,
    /// What would have been accepted.
    pub expected: &'static [&'static str],
}

/// Why channel bytes could not be cut out of, or put back into, the streams.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CombineError {
    /// The number of channel buffers differs from the plan's channel count.
    #[error("the plan has {plan} channels but {got} channel buffers were given")]
    ChannelCount {
        /// Channels in the plan.
        plan: usize,
        /// Channel buffers given.
        got: usize,
    },
    /// A channel delivered more or fewer bytes than the plan assigns to it.
    #[error("channel {channel} carried {got} bytes, the plan assigns it {expected}")]
    ChannelLength {
        /// Index of the channel, as in [`Plan::channels`].
        channel: usize,
        /// Bytes the plan assigns it (`u64::MAX` if its pieces add up to more than that).
        expected: u64,
        /// Bytes it delivered.
        got: u64,
    },
    /// A piece names a document for which no stream length was given.
    #[error("piece {piece:?} on channel {channel} names a document beyond the {docs} given")]
    NoSuchDocument {
        /// Index of the channel, as in [`Plan::channels`].
        channel: usize,
        /// The offending piece of the plan.
        piece: Piece,
        /// Streams (or stream lengths) given; valid document indices are `0..docs`.
        docs: usize,
    },
    /// A piece reaches past the end of its document's stream.
    #[error("piece {piece:?} on channel {channel} does not fit in a stream of {stream_len} bytes")]
    PieceOutOfRange {
        /// Index of the channel, as in [`Plan::channels`].
        channel: usize,
        /// The offending piece of the plan.
        piece: Piece,
        /// Length in bytes of that document's stream.
        stream_len: u64,
    },
    /// The channels together carried a different number of bytes than the streams add up to
    /// (`announced` is `None` if the stream lengths overflow a `u64`).
    #[error(
        "the channels carried {received} bytes in all, the stream lengths add up to {}",
        announced.map_or_else(|| "more than u64::MAX".to_owned(), |a| a.to_string())
    )]
    TotalLength {
        /// Sum of the stream lengths, from the manifest.
        announced: Option<u64>,
        /// Sum of the bytes the channels delivered.
        received: u64,
    },
    /// Plan pieces leave a gap in, or overlap within, a stream (see [`check_cover`]).
    #[error("the plan does not cover document {doc}'s stream of {stream_len} bytes exactly once")]
    NotACover {
        /// Index of the document whose stream is not covered exactly once.
        doc: usize,
        /// Its length in bytes.
        stream_len: u64,
    },
}

/// ES (§4.3.3) over the segments `lens` of one kind of one document, onto `k` channels.
///
/// For each segment in order, `c = floor(len / k)`: channels `0..k-1` get `c` bytes each and the
/// last channel gets the remaining `len - (k-1)c`. Empty pieces are not recorded. All pieces are
/// for document 0. `k == 0` is treated as 1: a plan always has a channel.
pub fn even_split(lens: &[u64], k: usize) -> Plan {
    let mut plan = Plan::new(k.max(1));
    even_split_into(&mut plan, 0, lens);
    plan
}

/// ES of the secure-only system (§4.3.3): the whole document of `len` bytes is one segment.
pub fn even_split_document(len: u64, k: usize) -> Plan {
    even_split(&[len], k)
}

/// SS (§4.3.4) over the segments `lens` of one kind of one document, onto `k` channels.
///
/// Segment `i < k` goes to channel `i` (the fill phase counts segments, so an empty segment still
/// fills its channel); every later segment goes to the channel with the fewest bytes, ties to the
/// lowest index. A segment is never cut; empty segments produce no piece. `k == 0` is treated
/// as 1.
pub fn segment_split(lens: &[u64], k: usize) -> Plan {
    let mut plan = Plan::new(k.max(1));
    segment_split_into(&mut plan, 0, lens);
    plan
}

/// ES of one document's list, appended to `plan` (shared with BES).
pub(crate) fn even_split_into(plan: &mut Plan, doc: u32, lens: &[u64]) {
    let k = plan.channels.len();
    let last = k - 1;
    let mut offset = 0u64;
    for &len in lens {
        let c = len / k as u64;
        if c > 0 {
            for channel in &mut plan.channels[..last] {
                channel.push(Piece {
                    doc,
                    offset,
                    len: c,
                });
                offset = offset.saturating_add(c);
            }
        }
        let rest = len - c * last as u64;
        if rest > 0 {
            plan.channels[last].push(Piece {
                doc,
                offset,
                len: rest,
            });
            offset = offset.saturating_add(rest);
        }
    }
}

/// SS of one document's list, appended to `plan` with a fresh fill phase and byte count
/// (shared with BSS, which calls SS once per list).
pub(crate) fn segment_split_into(plan: &mut Plan, doc: u32, lens: &[u64]) {
    let mut offset = 0u64;
    least_loaded(plan.channels.len(), lens, |channel, len| {
        if len > 0 {
            plan.channels[channel].push(Piece { doc, offset, len });
        }
        offset = offset.saturating_add(len);
    });
}

/// The assignment rule shared by SS, BFS and BSS: unit `i < k` goes to channel `i`, every later
/// unit to the channel with the fewest bytes so far (the thesis's `findSmallestIndex()` over the
/// SDLL array, which returns the first minimum). Calls `assign(channel, len)` in unit order.
pub(crate) fn least_loaded(k: usize, units: &[u64], mut assign: impl FnMut(usize, u64)) {
    let mut sdll = vec![0u64; k];
    for (i, &len) in units.iter().enumerate() {
        let channel = if i < k {
            i
        } else {
            // First index of the minimum; `k >= 1` here because `i >= k`.
            let mut best = 0;
            for (c, &bytes) in sdll.iter().enumerate().skip(1) {
                if bytes < sdll[best] {
                    best = c;
                }
            }
            best
        };
        sdll[channel] = sdll[channel].saturating_add(len);
        assign(channel, len);
    }
}

/// The byte range of `piece` inside a stream of `stream_len` bytes, if it fits.
fn piece_range(piece: &Piece, stream_len: usize) -> Option<Range<usize>> {
    let start = usize::try_from(piece.offset).ok()?;
    let len = usize::try_from(piece.len).ok()?;
    let end = start.checked_add(len)?;
    (end <= stream_len).then_some(start..end)
}

/// What each channel's send loop writes, in order: zero-copy slices of the `streams`
/// (indexed by [`Piece::doc`]).
///
/// # Panics
///
/// If a piece does not fit in its stream, i.e. the plan was not computed from these streams'
/// lengths. Use `try_channel_slices` when that is not guaranteed.
pub fn channel_slices<'a>(plan: &Plan, streams: &[&'a [u8]]) -> Vec<Vec<&'a [u8]>> {
    match try_channel_slices(plan, streams) {
        Ok(slices) => slices,
        Err(e) => panic!("plan does not match the streams: {e}"),
    }
}

/// [`channel_slices`], reporting a piece outside its stream instead of panicking.
pub(crate) fn try_channel_slices<'a>(
    plan: &Plan,
    streams: &[&'a [u8]],
) -> Result<Vec<Vec<&'a [u8]>>, CombineError> {
    plan.channels
        .iter()
        .enumerate()
        .map(|(channel, pieces)| {
            pieces
                .iter()
                .map(|piece| {
                    let stream = stream_of(streams, channel, piece)?;
                    piece_range(piece, stream.len()).map(|r| &stream[r]).ok_or(
                        CombineError::PieceOutOfRange {
                            channel,
                            piece: *piece,
                            stream_len: stream.len() as u64,
                        },
                    )
                })
                .collect()
        })
        .collect()
}

fn stream_of<'s, 'a>(
    streams: &'s [&'a [u8]],
    channel: usize,
    piece: &Piece,
) -> Result<&'s &'a [u8], CombineError> {
    usize::try_from(piece.doc)
        .ok()
        .and_then(|d| streams.get(d))
        .ok_or(CombineError::NoSuchDocument {
            channel,
            piece: *piece,
            docs: streams.len(),
        })
}

/// Each channel's bytes as one contiguous buffer, as a receiver reads them off that channel.
///
/// # Panics
///
/// As [`channel_slices`].
pub fn channel_bytes(plan: &Plan, streams: &[&[u8]]) -> Vec<Vec<u8>> {
    channel_slices(plan, streams)
        .into_iter()
        .map(|slices| {
            let mut out = Vec::with_capacity(slices.iter().map(|s| s.len()).sum());
            for s in slices {
                out.extend_from_slice(s);
            }
            out
        })
        .collect()
}

/// Rebuild every document's stream from the contiguous bytes each channel delivered.
///
/// `stream_lens[d]` is the length of document `d`'s stream (from the manifest) and `plan` is the
/// plan the sender used, recomputed from the same lengths. Each output stream is allocated once
/// and each piece is copied once, `O(bytes + pieces · channels)`; nothing is allocated until the
/// channel lengths agree with the plan and with `stream_lens`. Mismatched input is an error,
/// never a panic, and a plan that does not cover every stream exactly once is refused.
///
/// Every plan of this crate lists each channel's pieces in stream order, so the streams are
/// rebuilt by merging the channels: each output is created with its exact capacity and only
/// appended to, which also proves the plan covers it. Any other plan (say, dynamic chunks in the
/// order they happened to be sent) is checked with [`check_cover`] and its pieces are written
/// at their offsets into zeroed buffers.
pub fn combine(
    plan: &Plan,
    channels: &[&[u8]],
    stream_lens: &[u64],
) -> Result<Vec<Vec<u8>>, CombineError> {
    if channels.len() != plan.channels.len() {
        return Err(CombineError::ChannelCount {
            plan: plan.channels.len(),
            got: channels.len(),
        });
    }
    for (channel, (pieces, bytes)) in plan.channels.iter().zip(channels).enumerate() {
        let expected = pieces
            .iter()
            .try_fold(0u64, |sum, p| sum.checked_add(p.len));
        if expected != Some(bytes.len() as u64) {
            return Err(CombineError::ChannelLength {
                channel,
                expected: expected.unwrap_or(u64::MAX),
                got: bytes.len() as u64,
            });
        }
    }
    // Bound the allocation by what actually arrived: a cover carries exactly the streams' bytes.
    let received: u64 = channels.iter().map(|c| c.len() as u64).sum();
    let announced = stream_lens
        .iter()
        .try_fold(0u64, |sum, &l| sum.checked_add(l));
    if announced != Some(received) {
        return Err(CombineError::TotalLength {
            announced,
            received,
        });
    }
    // Cannot fail from here on: every length is at most `received`, which is in memory.
    let lens: Vec<usize> = stream_lens
        .iter()
        .map(|&l| usize::try_from(l))
        .collect::<Result<_, _>>()
        .map_err(|_| CombineError::TotalLength {
            announced,
            received,
        })?;
    if let Some(out) = combine_in_order(plan, channels, &lens) {
        return Ok(out);
    }
    check_cover(plan, stream_lens)?;
    let mut out: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0u8; l]).collect();
    for (channel, (pieces, bytes)) in plan.channels.iter().zip(channels).enumerate() {
        let mut at = 0usize;
        for piece in pieces {
            let docs = out.len();
            let stream = usize::try_from(piece.doc)
                .ok()
                .and_then(|d| out.get_mut(d))
                .ok_or(CombineError::NoSuchDocument {
                    channel,
                    piece: *piece,
                    docs,
                })?;
            let stream_len = stream.len();
            let dst = piece_range(piece, stream_len).ok_or(CombineError::PieceOutOfRange {
                channel,
                piece: *piece,
                stream_len: stream_len as u64,
            })?;
            // The channel's length equals the sum of its pieces (checked above), so this fits.
            let n = dst.len();
            stream[dst].copy_from_slice(&bytes[at..at + n]);
            at += n;
        }
    }
    Ok(out)
}

/// The merge: for each stream in turn, repeatedly find the channel whose next piece starts where
/// the stream rebuilt so far ends, and append it. `None` if the plan is not in that order (or is
/// not a cover); the caller has checked that each channel's length is the sum of its pieces.
fn combine_in_order(plan: &Plan, channels: &[&[u8]], lens: &[usize]) -> Option<Vec<Vec<u8>>> {
    let k = plan.channels.len();
    let mut next = vec![0usize; k]; // index of each channel's next piece
    let mut pos = vec![0usize; k]; // where that piece starts in the channel's bytes
    let mut c = 0; // where to look first: ES goes round the channels in turn
    let mut out = Vec::with_capacity(lens.len());
    for (doc, &len) in lens.iter().enumerate() {
        let mut stream = Vec::with_capacity(len);
        while stream.len() < len {
            let at = stream.len() as u64;
            let (channel, piece) = (0..k).map(|i| (c + i) % k).find_map(|ch| {
                let piece = plan.channels[ch].get(next[ch])?;
                (piece.doc as usize == doc && piece.offset == at).then_some((ch, piece))
            })?;
            let n = usize::try_from(piece.len)
                .ok()
                .filter(|&n| n <= len - stream.len())?;
            stream.extend_from_slice(channels[channel].get(pos[channel]..pos[channel] + n)?);
            pos[channel] += n;
            next[channel] += 1;
            c = (channel + 1) % k;
        }
        out.push(stream);
    }
    // Left-over (empty) pieces: let `check_cover` judge them.
    next.iter()
        .zip(&plan.channels)
        .all(|(&i, ch)| i == ch.len())
        .then_some(out)
}

/// Check that `plan` covers each stream `0..stream_lens[d]` exactly once: no piece outside its
/// stream, no overlap, no gap. Sorts a copy of the pieces, so `O(pieces log pieces)`; the
/// receiver needs this only for plans it did not compute itself.
pub fn check_cover(plan: &Plan, stream_lens: &[u64]) -> Result<(), CombineError> {
    let mut all: Vec<(usize, Piece)> = Vec::with_capacity(plan.channels.iter().map(Vec::len).sum());
    for (channel, pieces) in plan.channels.iter().enumerate() {
        for piece in pieces {
            let doc = usize::try_from(piece.doc)
                .ok()
                .filter(|&d| d < stream_lens.len())
                .ok_or(CombineError::NoSuchDocument {
                    channel,
                    piece: *piece,
                    docs: stream_lens.len(),
                })?;
            let stream_len = stream_lens[doc];
            match piece.offset.checked_add(piece.len) {
                Some(end) if end <= stream_len => {}
                _ => {
                    return Err(CombineError::PieceOutOfRange {
                        channel,
                        piece: *piece,
                        stream_len,
                    })
                }
            }
            if piece.len > 0 {
                all.push((channel, *piece));
            }
        }
    }
    all.sort_unstable_by_key(|(_, p)| (p.doc, p.offset));
    let mut pieces = all.iter().map(|(_, p)| p).peekable();
    for (doc, &stream_len) in stream_lens.iter().enumerate() {
        let mut at = 0u64;
        while let Some(p) = pieces.next_if(|p| p.doc as usize == doc) {
            if p.offset != at {
                return Err(CombineError::NotACover { doc, stream_len });
            }
            at += p.len;
        }
        if at != stream_len {
            return Err(CombineError::NotACover { doc, stream_len });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(offset: u64, len: u64) -> Piece {
        Piece {
            doc: 0,
            offset,
            len,
        }
    }

    #[test]
    fn even_split_gives_the_remainder_to_the_last_channel() {
        let plan = even_split(&[10, 2, 0, 3], 3);
        assert_eq!(plan.channels[0], vec![p(0, 3), p(12, 1)]);
        assert_eq!(plan.channels[1], vec![p(3, 3), p(13, 1)]);
        // 10 -> 3,3,4; 2 -> 0,0,2; 0 -> nothing; 3 -> 1,1,1.
        assert_eq!(plan.channels[2], vec![p(6, 4), p(10, 2), p(14, 1)]);
    }

    #[test]
    fn segment_split_fill_phase_counts_empty_segments() {
        // The empty segment fills channel 1, so 5 goes to the least loaded channel: 1 (0 bytes).
        let plan = segment_split(&[7, 0, 4, 5], 3);
        assert_eq!(
            plan.channels,
            vec![vec![p(0, 7)], vec![p(11, 5)], vec![p(7, 4)]]
        );
    }

    #[test]
    fn zero_channels_means_one() {
        assert_eq!(even_split(&[5], 0).channels, vec![vec![p(0, 5)]]);
        assert_eq!(
            segment_split(&[5, 6], 0).channels,
            vec![vec![p(0, 5), p(5, 6)]]
        );
    }

    #[test]
    fn split_names_round_trip() {
        for s in [Split::Dynamic, Split::Even, Split::Segment] {
            assert_eq!(s.to_string().parse::<Split>(), Ok(s));
        }
        assert_eq!(Split::default(), Split::Dynamic);
        let err = "evenly".parse::<Split>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown split algorithm \"evenly\" (expected one of: dynamic, even, segment)"
        );
    }

    #[test]
    fn combine_rejects_mismatched_input() {
        let plan = even_split(&[4], 2);
        let lens = [4u64];
        assert_eq!(
            combine(&plan, &[b"ab", b"cd"], &lens),
            Ok(vec![b"abcd".to_vec()])
        );
        assert!(matches!(
            combine(&plan, &[b"ab"], &lens),
            Err(CombineError::ChannelCount { .. })
        ));
        assert!(matches!(
            combine(&plan, &[b"ab", b"c"], &lens),
            Err(CombineError::ChannelLength {
                channel: 1,
                expected: 2,
                got: 1
            })
        ));
        assert!(matches!(
            combine(&plan, &[b"ab", b"cd"], &[3]),
            Err(CombineError::TotalLength {
                announced: Some(3),
                received: 4
            })
        ));
        assert!(matches!(
            combine(&plan, &[b"ab", b"cd"], &[u64::MAX, 5]),
            Err(CombineError::TotalLength {
                announced: None,
                ..
            })
        ));
        assert_eq!(
            combine(&plan, &[b"ab", b"cd"], &[u64::MAX, 5])
                .unwrap_err()
                .to_string(),
            "the channels carried 4 bytes in all, the stream lengths add up to more than u64::MAX"
        );
        assert!(matches!(
            combine(&plan, &[b"ab", b"cd"], &[2, 2]),
            Err(CombineError::PieceOutOfRange { .. })
        ));
        let other_doc = Plan {
            channels: vec![vec![Piece {
                doc: 1,
                offset: 0,
                len: 1,
            }]],
        };
        assert!(matches!(
            combine(&other_doc, &[b"a"], &[1]),
            Err(CombineError::NoSuchDocument { .. })
        ));
        let huge = Plan {
            channels: vec![vec![p(u64::MAX, 1)]],
        };
        assert!(matches!(
            combine(&huge, &[b"a"], &[1]),
            Err(CombineError::PieceOutOfRange { .. })
        ));
        let wrapping = Plan {
            channels: vec![vec![p(0, u64::MAX), p(0, 2)]],
        };
        assert!(matches!(
            combine(&wrapping, &[b"a"], &[1]),
            Err(CombineError::ChannelLength { .. })
        ));
    }

    #[test]
    fn combine_merges_plans_in_stream_order_and_checks_others() {
        let lens = [9u64, 0, 7, 3, 12, 1];
        let total = lens.iter().sum::<u64>();
        let stream: Vec<u8> = (0..total as u8).collect();
        let docs = [&lens[..2], &lens[2..], &[][..], &lens[..]];
        let doc_lens: Vec<u64> = docs.iter().map(|d| d.iter().sum()).collect();
        let doc_streams: Vec<Vec<u8>> = doc_lens
            .iter()
            .map(|&l| stream[..l as usize].to_vec())
            .collect();
        let doc_refs: Vec<&[u8]> = doc_streams.iter().map(Vec::as_slice).collect();
        for k in 1..=4 {
            for plan in [even_split(&lens, k), segment_split(&lens, k)] {
                let wire = channel_bytes(&plan, &[&stream]);
                let wire: Vec<&[u8]> = wire.iter().map(Vec::as_slice).collect();
                let merged = combine_in_order(&plan, &wire, &[total as usize]);
                assert_eq!(merged, Some(vec![stream.clone()]));
            }
            for plan in [
                crate::batch::batch_file_split(&docs, k),
                crate::batch::batch_even_split(&docs, k),
                crate::batch::batch_segment_split(&docs, k),
            ] {
                let wire = channel_bytes(&plan, &doc_refs);
                let wire: Vec<&[u8]> = wire.iter().map(Vec::as_slice).collect();
                let lens: Vec<usize> = doc_lens.iter().map(|&l| l as usize).collect();
                assert_eq!(
                    combine_in_order(&plan, &wire, &lens),
                    Some(doc_streams.clone())
                );
            }
        }
        // Pieces out of stream order on a channel: not mergeable, still a cover, still combined.
        let swapped = Plan {
            channels: vec![vec![p(2, 2), p(0, 2)]],
        };
        assert_eq!(combine_in_order(&swapped, &[b"cdab"], &[4]), None);
        assert_eq!(
            combine(&swapped, &[b"cdab"], &[4]),
            Ok(vec![b"abcd".to_vec()])
        );
        // The right number of bytes, but an overlap and a gap: refused.
        let bad = Plan {
            channels: vec![vec![p(0, 2)], vec![p(1, 2)]],
        };
        assert_eq!(
            combine(&bad, &[b"ab", b"bc"], &[4]),
            Err(CombineError::NotACover {
                doc: 0,
                stream_len: 4
            })
        );
        // A stray empty piece is harmless.
        let stray = Plan {
            channels: vec![vec![p(0, 4), p(1, 0)]],
        };
        assert_eq!(
            combine(&stray, &[b"abcd"], &[4]),
            Ok(vec![b"abcd".to_vec()])
        );
    }

    #[test]
    fn check_cover_finds_gaps_and_overlaps() {
        assert_eq!(check_cover(&even_split(&[9, 0, 4], 4), &[13]), Ok(()));
        let gap = Plan {
            channels: vec![vec![p(0, 2)], vec![p(3, 1)]],
        };
        assert!(matches!(
            check_cover(&gap, &[4]),
            Err(CombineError::NotACover { doc: 0, .. })
        ));
        let overlap = Plan {
            channels: vec![vec![p(0, 2)], vec![p(1, 3)]],
        };
        assert!(check_cover(&overlap, &[4]).is_err());
        let short = Plan {
            channels: vec![vec![p(0, 2)]],
        };
        assert!(check_cover(&short, &[4]).is_err());
        assert!(check_cover(&short, &[1]).is_err());
    }

    #[test]
    fn slices_and_bytes_follow_the_plan() {
        let stream = b"0123456789";
        let plan = segment_split(&[3, 3, 4], 2);
        let slices = channel_slices(&plan, &[stream]);
        assert_eq!(
            slices,
            vec![vec![&b"012"[..], &b"6789"[..]], vec![&b"345"[..]]]
        );
        assert_eq!(
            channel_bytes(&plan, &[stream]),
            vec![b"0126789".to_vec(), b"345".to_vec()]
        );
        assert!(try_channel_slices(&plan, &[b"01234"]).is_err());
        assert!(try_channel_slices(&plan, &[]).is_err());
    }
}
