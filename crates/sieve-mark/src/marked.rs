//! A marked copy of a document: its classified ranges between `<$S>` and `<$E>` (or the
//! configured marks), every literal mark already in the content escaped, so that the copy parses
//! back (`sieve_core::marks`, escapes resolved) to exactly the content and the ranges.
//!
//! The bytes are those of [`sieve_core::marks::mark_document`] (the property tests compare
//! them); this version writes to any `Write` and copies the stretches between possible tokens in
//! bulk, so a large document streams through at memory speed.

use std::io::{self, Write};
use std::ops::Range;

use sieve_core::marks::MarkConfig;

/// Write `content` with `ranges` (sorted, disjoint) marked.
pub fn write_marked<W: Write>(
    cfg: &MarkConfig,
    content: &[u8],
    ranges: &[Range<u64>],
    out: &mut W,
) -> io::Result<()> {
    let mut marks: Vec<(usize, bool)> = Vec::with_capacity(ranges.len() * 2);
    for r in ranges {
        let (a, e) = (r.start as usize, r.end as usize);
        if e > content.len() || a > e {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "range {a}..{e} lies outside the document ({} bytes)",
                    content.len()
                ),
            ));
        }
        marks.push((a, true));
        marks.push((e, false));
    }
    let esc = cfg.escape.as_slice();
    let (start, end) = (cfg.start.as_slice(), cfg.end.as_slice());
    let token_len = |s: &[u8]| -> Option<usize> {
        if s.starts_with(start) {
            Some(start.len())
        } else if s.starts_with(end) {
            Some(end.len())
        } else {
            None
        }
    };
    let mut firsts: Vec<u8> = [start.first(), end.first(), esc.first()]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    firsts.sort_unstable();
    firsts.dedup();
    let find = |s: &[u8]| -> Option<usize> {
        match firsts[..] {
            [a] => memchr::memchr(a, s),
            [a, b] => memchr::memchr2(a, b, s),
            [a, b, c] => memchr::memchr3(a, b, c, s),
            _ => Some(0),
        }
    };
    let mut next = 0usize;
    let mut i = 0usize;
    loop {
        while next < marks.len() && marks[next].0 == i {
            out.write_all(if marks[next].1 { start } else { end })?;
            next += 1;
        }
        if i >= content.len() {
            break;
        }
        // Content up to the next real mark: nothing may straddle it.
        let lim = marks.get(next).map_or(content.len(), |m| m.0);
        let seg = &content[i..lim];
        let plain = find(seg).unwrap_or(seg.len());
        if plain > 0 {
            out.write_all(&seg[..plain])?;
            i += plain;
            continue;
        }
        if !esc.is_empty() && seg.starts_with(esc) {
            let mut j = i;
            let mut n = 0usize;
            while content[j..lim].starts_with(esc) {
                n += 1;
                j += esc.len();
            }
            let literal_follows = token_len(&content[j..lim]);
            let reps = if j == lim && next < marks.len() {
                2 * n // a real mark follows: keep it real
            } else if literal_follows.is_some() {
                2 * n + 1 // a literal mark follows: make it literal
            } else {
                n // escapes before ordinary bytes are ordinary bytes
            };
            for _ in 0..reps {
                out.write_all(esc)?;
            }
            i = j;
            if reps == 2 * n + 1 {
                let len = literal_follows.unwrap_or(0);
                out.write_all(&content[j..j + len])?;
                i = j + len;
            }
            continue;
        }
        if let Some(len) = token_len(seg) {
            out.write_all(esc)?;
            out.write_all(&seg[..len])?;
            i += len;
            continue;
        }
        out.write_all(&content[i..i + 1])?;
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sieve_core::marks::{mark_document, parse_all};

    fn ranges_strategy(len: usize) -> impl Strategy<Value = Vec<Range<u64>>> {
        proptest::collection::vec(0..=len as u64, 0..8).prop_map(|mut cuts| {
            cuts.sort_unstable();
            cuts.dedup();
            // Pairs of cut points: disjoint, non-empty, non-adjacent, as a marking's ranges are.
            cuts.chunks_exact(2)
                .map(|p| p[0]..p[1])
                .filter(|r| !r.is_empty())
                .collect::<Vec<_>>()
        })
    }

    proptest! {
        /// The marked copy parses back to the content and the ranges, and is byte for byte what
        /// the core's reference encoder writes.
        #[test]
        fn marked_copies_parse_back(
            (content, ranges) in proptest::collection::vec(
                prop::sample::select(b"<$SE>\\ab".to_vec()), 0..64)
                .prop_flat_map(|c| { let n = c.len(); (Just(c), ranges_strategy(n)) })
        ) {
            let ranges: Vec<Range<u64>> = {
                // Adjacent pairs from the strategy may touch; merge them as a marking would.
                let mut v: Vec<Range<u64>> = Vec::new();
                for r in ranges {
                    match v.last_mut() {
                        Some(l) if l.end >= r.start => l.end = l.end.max(r.end),
                        _ => v.push(r),
                    }
                }
                v
            };
            let cfg = MarkConfig { strip: true, ..MarkConfig::default() };
            let mut out = Vec::new();
            write_marked(&cfg, &content, &ranges, &mut out).unwrap();
            prop_assert_eq!(&out, &mark_document(&cfg, &content, &ranges));
            let parsed = parse_all(&cfg, &out).unwrap();
            let mut back = Vec::new();
            for e in &parsed.extents {
                back.extend_from_slice(&out[e.raw as usize..(e.raw + e.len) as usize]);
            }
            prop_assert_eq!(back, content);
            prop_assert_eq!(parsed.ranges, ranges);
        }
    }

    #[test]
    fn ranges_outside_the_document_are_an_error() {
        let mut out = Vec::new();
        let e = write_marked(&MarkConfig::default(), b"abc", &[1..9, 9..9], &mut out).unwrap_err();
        assert!(e.to_string().contains("outside"));
    }
}
