//! Properties of every split: whatever the segment lengths (empty ones included) and channel
//! count, the plan covers each stream exactly once, is a pure function of its inputs, and
//! combine (or the reassembler, for the dynamic split) gives back exactly the bytes that went in.

use proptest::prelude::*;
use sieve_core::batch::{batch_even_split, batch_file_split, batch_segment_split};
use sieve_core::chunk::{ChunkScheduler, ReassembleError, Reassembler};
use sieve_core::split::{
    channel_bytes, channel_slices, combine, even_split, even_split_document, segment_split,
    CombineError,
};
use sieve_core::{Piece, Plan};

/// A small deterministic PRNG (xorshift64*), so that stream bytes and shuffles come from one
/// shrinkable seed instead of large generated vectors.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: u64) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// Segment lengths: often empty, often tiny (smaller than k), sometimes a few thousand bytes.
fn seg_len() -> impl Strategy<Value = u64> {
    prop_oneof![2 => Just(0u64), 3 => 1u64..12, 3 => 12u64..300, 1 => 300u64..3000]
}

fn lens() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(seg_len(), 0..14)
}

fn batch() -> impl Strategy<Value = Vec<Vec<u64>>> {
    prop::collection::vec(prop::collection::vec(seg_len(), 0..6), 0..6)
}

/// Independent of the library's own `check_cover`: count how often each byte is carried.
fn assert_exact_cover(plan: &Plan, stream_lens: &[u64], k: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.channels.len(), k);
    let mut count: Vec<Vec<u8>> = stream_lens.iter().map(|&l| vec![0u8; l as usize]).collect();
    for piece in plan.channels.iter().flatten() {
        prop_assert!(piece.len > 0, "empty piece {:?}", piece);
        let stream = &mut count[piece.doc as usize];
        prop_assert!(
            piece.offset + piece.len <= stream.len() as u64,
            "{:?} out of range",
            piece
        );
        for c in &mut stream[piece.offset as usize..(piece.offset + piece.len) as usize] {
            *c += 1;
        }
    }
    for (doc, c) in count.iter().enumerate() {
        prop_assert!(
            c.iter().all(|&n| n == 1),
            "doc {} not covered exactly once: {:?}",
            doc,
            c
        );
    }
    prop_assert!(sieve_core::split::check_cover(plan, stream_lens).is_ok());
    Ok(())
}

/// Split, send (as contiguous per-channel buffers), combine, compare.
fn assert_round_trip(plan: &Plan, streams: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let refs: Vec<&[u8]> = streams.iter().map(Vec::as_slice).collect();
    let lens: Vec<u64> = streams.iter().map(|s| s.len() as u64).collect();
    let wire = channel_bytes(plan, &refs);
    let slices = channel_slices(plan, &refs);
    for (bytes, parts) in wire.iter().zip(&slices) {
        prop_assert_eq!(bytes, &parts.concat());
    }
    prop_assert_eq!(
        wire.iter().map(|c| c.len() as u64).collect::<Vec<_>>(),
        plan.channel_bytes()
    );
    let wire_refs: Vec<&[u8]> = wire.iter().map(Vec::as_slice).collect();
    let back = combine(plan, &wire_refs, &lens).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(back, streams.to_vec());
    Ok(())
}

fn streams_for(docs: &[Vec<u64>], seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    docs.iter().map(|d| rng.bytes(d.iter().sum())).collect()
}

/// Offsets of each segment within its stream.
fn seg_offsets(lens: &[u64]) -> Vec<u64> {
    lens.iter()
        .scan(0u64, |at, &l| {
            let o = *at;
            *at += l;
            Some(o)
        })
        .collect()
}

fn even_split_round_trips_case(lens: Vec<u64>, seed: u64) -> Result<(), TestCaseError> {
    let streams = streams_for(std::slice::from_ref(&lens), seed);
    let total = streams[0].len() as u64;
    for k in 1..=8 {
        let plan = even_split(&lens, k);
        prop_assert_eq!(&plan, &even_split(&lens, k));
        assert_exact_cover(&plan, &[total], k)?;
        assert_round_trip(&plan, &streams)?;
        // ES shape: each segment gives floor(len/k) to channels 0..k-1, the rest to the last.
        let bytes = plan.channel_bytes();
        let c: u64 = lens.iter().map(|l| l / k as u64).sum();
        prop_assert!(
            bytes[..k - 1].iter().all(|&b| b == c),
            "{:?} {:?}",
            lens,
            bytes
        );
        prop_assert_eq!(bytes[k - 1], total - c * (k as u64 - 1));

        let doc_plan = even_split_document(total, k);
        prop_assert_eq!(&doc_plan, &even_split(&[total], k));
        assert_exact_cover(&doc_plan, &[total], k)?;
        assert_round_trip(&doc_plan, &streams)?;
    }
    Ok(())
}

fn segment_split_round_trips_case(lens: Vec<u64>, seed: u64) -> Result<(), TestCaseError> {
    let streams = streams_for(std::slice::from_ref(&lens), seed);
    let total = streams[0].len() as u64;
    let offsets = seg_offsets(&lens);
    for k in 1..=8 {
        let plan = segment_split(&lens, k);
        prop_assert_eq!(&plan, &segment_split(&lens, k));
        assert_exact_cover(&plan, &[total], k)?;
        assert_round_trip(&plan, &streams)?;
        // SS never cuts a segment, and the first k segments fill channels 0..k in turn.
        let mut load = vec![0u64; k];
        for (i, (&len, &offset)) in lens.iter().zip(&offsets).enumerate() {
            let piece = Piece {
                doc: 0,
                offset,
                len,
            };
            let channel = plan.channels.iter().position(|c| c.contains(&piece));
            if len == 0 {
                prop_assert_eq!(channel, None);
                if i < k {
                    continue;
                }
            }
            let expected = if i < k {
                i
            } else {
                let min = *load.iter().min().unwrap();
                load.iter().position(|&b| b == min).unwrap()
            };
            if len > 0 {
                prop_assert_eq!(
                    channel,
                    Some(expected),
                    "segment {} of {:?}, k = {}",
                    i,
                    lens,
                    k
                );
            }
            load[expected] += len;
        }
    }
    Ok(())
}

fn batch_splits_round_trip_case(docs: Vec<Vec<u64>>, seed: u64) -> Result<(), TestCaseError> {
    let streams = streams_for(&docs, seed);
    let lens: Vec<u64> = streams.iter().map(|s| s.len() as u64).collect();
    let refs: Vec<&[u64]> = docs.iter().map(Vec::as_slice).collect();
    for k in 1..=8 {
        for (name, plan, again) in [
            (
                "BFS",
                batch_file_split(&docs, k),
                batch_file_split(&refs, k),
            ),
            (
                "BES",
                batch_even_split(&docs, k),
                batch_even_split(&refs, k),
            ),
            (
                "BSS",
                batch_segment_split(&docs, k),
                batch_segment_split(&refs, k),
            ),
        ] {
            prop_assert_eq!(&plan, &again, "{} not deterministic", name);
            assert_exact_cover(&plan, &lens, k)?;
            assert_round_trip(&plan, &streams)?;
        }
        // BFS never cuts a document; BES and BSS are ES and SS per document.
        let bfs = batch_file_split(&docs, k);
        for piece in bfs.channels.iter().flatten() {
            prop_assert_eq!((piece.offset, piece.len), (0, lens[piece.doc as usize]));
        }
        let bes = batch_even_split(&docs, k);
        let bss = batch_segment_split(&docs, k);
        for (d, list) in docs.iter().enumerate() {
            let only = |plan: &Plan| -> Vec<Vec<Piece>> {
                plan.channels
                    .iter()
                    .map(|c| {
                        c.iter()
                            .filter(|p| p.doc as usize == d)
                            .map(|p| Piece { doc: 0, ..*p })
                            .collect()
                    })
                    .collect()
            };
            prop_assert_eq!(only(&bes), even_split(list, k).channels);
            prop_assert_eq!(only(&bss), segment_split(list, k).channels);
        }
    }
    Ok(())
}

fn dynamic_chunks_round_trip_in_any_order_over_any_channels_case(
    docs: Vec<Vec<u64>>,
    seed: u64,
    chunk: u64,
    k: usize,
) -> Result<(), TestCaseError> {
    let streams = streams_for(&docs, seed);
    let lens: Vec<u64> = streams.iter().map(|s| s.len() as u64).collect();
    let mut sched = ChunkScheduler::new(&lens, chunk);
    let total: u64 = lens.iter().sum();
    prop_assert_eq!(sched.remaining_bytes(), total);
    let mut pieces = Vec::new();
    while let Some(piece) = sched.next() {
        prop_assert!(piece.len > 0 && piece.len <= chunk);
        pieces.push(piece);
        prop_assert_eq!(
            sched.remaining_bytes(),
            total - pieces.iter().map(|p| p.len).sum::<u64>()
        );
    }
    // Handed out in document order, each document front to back.
    let mut sorted = pieces.clone();
    sorted.sort_by_key(|p| (p.doc, p.offset));
    prop_assert_eq!(&sorted, &pieces);

    // Spread the chunks randomly over k channels, shuffled; the plan they form is a cover.
    let mut rng = Rng::new(seed.rotate_left(17) ^ chunk);
    rng.shuffle(&mut pieces);
    let mut plan = Plan::new(k);
    for piece in &pieces {
        plan.channels[rng.below(k)].push(*piece);
    }
    assert_exact_cover(&plan, &lens, k)?;
    // ... so the static combine agrees too.
    assert_round_trip(&plan, &streams)?;

    // The receiver drains channels in a random interleaving.
    let mut cursors = vec![0usize; k];
    let mut r = Reassembler::new(&lens);
    let mut placed = 0;
    while placed < pieces.len() {
        let c = rng.below(k);
        if let Some(piece) = plan.channels[c].get(cursors[c]) {
            prop_assert!(!r.is_complete());
            let s = &streams[piece.doc as usize];
            r.place(
                *piece,
                &s[piece.offset as usize..(piece.offset + piece.len) as usize],
            )
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
            cursors[c] += 1;
            placed += 1;
        }
    }
    prop_assert!(r.is_complete());
    prop_assert_eq!(r.missing_bytes(), 0);
    prop_assert_eq!(
        r.into_streams()
            .map_err(|e| TestCaseError::fail(e.to_string()))?,
        streams
    );
    Ok(())
}

fn combine_rejects_a_channel_one_byte_short_or_long_case(
    lens: Vec<u64>,
    seed: u64,
    k: usize,
    segment: bool,
) -> Result<(), TestCaseError> {
    let streams = streams_for(std::slice::from_ref(&lens), seed);
    let total = [streams[0].len() as u64];
    let plan = if segment {
        segment_split(&lens, k)
    } else {
        even_split(&lens, k)
    };
    let wire = channel_bytes(&plan, &[&streams[0]]);
    let mut rng = Rng::new(seed ^ 0x5eed);
    let nonempty: Vec<usize> = (0..k).filter(|&c| !wire[c].is_empty()).collect();
    let short = nonempty[rng.below(nonempty.len())];
    let long = rng.below(k);
    for (channel, delta) in [(short, -1i64), (long, 1)] {
        let mut bad = wire.clone();
        if delta < 0 {
            bad[channel].pop();
        } else {
            bad[channel].push(0xAA);
        }
        let refs: Vec<&[u8]> = bad.iter().map(Vec::as_slice).collect();
        let expected = wire[channel].len() as u64;
        let got = (expected as i64 + delta) as u64;
        prop_assert_eq!(
            combine(&plan, &refs, &total),
            Err(CombineError::ChannelLength {
                channel,
                expected,
                got
            })
        );
    }
    // Stream lengths that disagree with what arrived are refused too.
    let refs: Vec<&[u8]> = wire.iter().map(Vec::as_slice).collect();
    prop_assert!(combine(&plan, &refs, &[total[0] + 1]).is_err());
    prop_assert!(combine(&plan, &refs, &[total[0] - 1]).is_err());
    prop_assert!(combine(&plan, &refs[1..], &total).is_err());
    // A plan that is not a cover, though every length adds up: one piece moved by a byte.
    let mut moved = plan.clone();
    let channel = nonempty[rng.below(nonempty.len())];
    let i = rng.below(moved.channels[channel].len());
    let piece = &mut moved.channels[channel][i];
    piece.offset = if piece.offset > 0 && rng.next() & 1 == 0 {
        piece.offset - 1
    } else {
        piece.offset + 1
    };
    prop_assert!(
        combine(&moved, &refs, &total).is_err(),
        "{:?} accepted",
        moved
    );
    Ok(())
}

fn reassembler_rejects_duplicates_and_overlaps_case(
    docs: Vec<Vec<u64>>,
    seed: u64,
    chunk: u64,
) -> Result<(), TestCaseError> {
    let streams = streams_for(&docs, seed);
    let lens: Vec<u64> = streams.iter().map(|s| s.len() as u64).collect();
    let mut pieces: Vec<Piece> = ChunkScheduler::new(&lens, chunk).collect();
    let mut rng = Rng::new(seed ^ chunk);
    rng.shuffle(&mut pieces);
    let bytes_of =
        |p: &Piece| &streams[p.doc as usize][p.offset as usize..(p.offset + p.len) as usize];
    let mut r = Reassembler::new(&lens);
    for (i, piece) in pieces.iter().enumerate() {
        r.place(*piece, bytes_of(piece))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        // The same piece again, or any range that shares a byte with a placed piece.
        let dup = pieces[rng.below(i + 1)];
        prop_assert_eq!(
            r.place(dup, bytes_of(&dup)),
            Err(ReassembleError::Overlap { piece: dup })
        );
        let stream_len = lens[dup.doc as usize];
        let inside = dup.offset + rng.next() % dup.len;
        let start = inside - rng.next() % (inside + 1);
        let end = (inside + 1 + rng.next() % (stream_len - inside)).min(stream_len);
        let overlapping = Piece {
            doc: dup.doc,
            offset: start,
            len: end - start,
        };
        prop_assert_eq!(
            r.place(overlapping, bytes_of(&overlapping)),
            Err(ReassembleError::Overlap { piece: overlapping })
        );
    }
    // Refused pieces changed nothing.
    prop_assert!(r.is_complete());
    prop_assert_eq!(
        r.into_streams()
            .map_err(|e| TestCaseError::fail(e.to_string()))?,
        streams
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn even_split_round_trips(
        lens in lens(),
        seed in any::<u64>(),
    ) {
        even_split_round_trips_case(lens, seed)?;
    }

    #[test]
    fn segment_split_round_trips(
        lens in lens(),
        seed in any::<u64>(),
    ) {
        segment_split_round_trips_case(lens, seed)?;
    }

    #[test]
    fn batch_splits_round_trip(
        docs in batch(),
        seed in any::<u64>(),
    ) {
        batch_splits_round_trip_case(docs, seed)?;
    }

    #[test]
    fn dynamic_chunks_round_trip_in_any_order_over_any_channels(
        docs in batch(),
        seed in any::<u64>(),
        chunk in prop_oneof![1u64..8, 8u64..700, 700u64..5000],
        k in 1usize..=8,
    ) {
        dynamic_chunks_round_trip_in_any_order_over_any_channels_case(docs, seed, chunk, k)?;
    }

    #[test]
    fn combine_rejects_a_channel_one_byte_short_or_long(
        lens in lens().prop_filter("some bytes", |l| l.iter().sum::<u64>() > 0),
        seed in any::<u64>(),
        k in 1usize..=8,
        segment in any::<bool>(),
    ) {
        combine_rejects_a_channel_one_byte_short_or_long_case(lens, seed, k, segment)?;
    }

    #[test]
    fn reassembler_rejects_duplicates_and_overlaps(
        docs in batch().prop_filter("some bytes", |d| d.iter().flatten().sum::<u64>() > 0),
        seed in any::<u64>(),
        chunk in 1u64..600,
    ) {
        reassembler_rejects_duplicates_and_overlaps_case(docs, seed, chunk)?;
    }
}
