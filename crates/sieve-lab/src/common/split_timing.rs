//! Timing the split and combine algorithms in process (Table 5.2 of F5.12 and Tables B.1-B.3
//! share it): the sieved lists of x-P documents, and the time to plan, slice and rebuild them.

use std::time::Instant;

use anyhow::Result;
use sieve_core::gen::{write_xp, XpSpec};
use sieve_core::marks::MarkConfig;
use sieve_core::sieve::sieve_marked;
use sieve_core::split::{channel_bytes, channel_slices, combine};
use sieve_core::{Kind, Plan};

use super::estimate::Estimate;

pub(crate) fn xp(size: u64, p: f64) -> Vec<u8> {
    let mut v = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_xp(
        XpSpec {
            size,
            proportion: p,
            seed: 1,
        },
        &mut v,
    );
    v
}

/// Sieved lists of one document: per kind, the stream bytes and segment lengths.
pub(crate) struct Lists {
    streams: [Vec<u8>; 2],
    lens: [Vec<u64>; 2],
}

pub(crate) fn lists(doc: &[u8]) -> Result<Lists> {
    let s = sieve_marked(doc, &MarkConfig::default())?;
    let mut streams = [Vec::new(), Vec::new()];
    let mut lens = [Vec::new(), Vec::new()];
    for k in [Kind::Plain, Kind::Secure] {
        for seg in s.list(k) {
            streams[k.index()].extend_from_slice(seg);
            lens[k.index()].push(seg.len() as u64);
        }
    }
    Ok(Lists { streams, lens })
}

/// Milliseconds of each of `reps` runs of `f`.
fn time_ms(reps: usize, mut f: impl FnMut()) -> Vec<f64> {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

/// Split (plan + slices) and combine of both lists, in ms: the median of `reps` runs of both
/// lists together, with its interval.
pub(crate) fn split_combine(
    docs: &[&Lists],
    k: usize,
    plan_of: &dyn Fn(&[Vec<u64>], usize) -> Plan,
    reps: usize,
) -> (Estimate, Estimate) {
    let mut split = vec![0.0; reps];
    let mut comb = vec![0.0; reps];
    let add = |acc: &mut Vec<f64>, xs: Vec<f64>| acc.iter_mut().zip(xs).for_each(|(a, x)| *a += x);
    for kind in [Kind::Plain, Kind::Secure] {
        let lens: Vec<Vec<u64>> = docs.iter().map(|d| d.lens[kind.index()].clone()).collect();
        let streams: Vec<&[u8]> = docs
            .iter()
            .map(|d| d.streams[kind.index()].as_slice())
            .collect();
        let stream_lens: Vec<u64> = streams.iter().map(|s| s.len() as u64).collect();
        add(
            &mut split,
            time_ms(reps, || {
                let plan = plan_of(&lens, k);
                std::hint::black_box(channel_slices(&plan, &streams));
            }),
        );
        let plan = plan_of(&lens, k);
        let bytes = channel_bytes(&plan, &streams);
        let refs: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
        add(
            &mut comb,
            time_ms(reps, || {
                let p = plan_of(&lens, k);
                std::hint::black_box(combine(&p, &refs, &stream_lens).ok());
            }),
        );
    }
    (Estimate::median_of(&split), Estimate::median_of(&comb))
}
