//! Property tests: sieve and integrate are inverses, for any bytes and any valid ranges, and the
//! marks parser gives the same answer however its input is cut into chunks or parts parsed on
//! separate threads.

use std::ops::Range;

use proptest::prelude::*;
use sieve_core::marks::{self, Collector, Counter, Event, MarkConfig, MarkParser};
use sieve_core::marks_fast::{self, Fast};
use sieve_core::marks_parallel::{count_parallel_releasing, parse_parallel};
use sieve_core::ranges::ClassifiedRanges;
use sieve_core::sieve::{integrate, sieve, sieve_marked, Marks, Placement};
use sieve_core::Kind;

/// Bytes biased towards the characters of marks and escapes, so literal marks, escape runs and
/// near-misses are common; plus NUL and invalid UTF-8.
fn content() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => any::<u8>(),
        2 => Just(b'<'),
        2 => Just(b'$'),
        1 => Just(b'S'),
        1 => Just(b'E'),
        2 => Just(b'>'),
        3 => Just(b'\\'),
        1 => Just(0u8),
        1 => Just(0xffu8),
    ];
    let token = prop_oneof![
        Just(b"<$S>".to_vec()),
        Just(b"<$E>".to_vec()),
        Just(b"\\<$S>".to_vec()),
        Just(b"\\\\".to_vec()),
    ];
    prop::collection::vec(
        prop_oneof![6 => byte.prop_map(|b| vec![b]), 1 => token],
        0..300,
    )
    .prop_map(|v| v.concat())
}

fn doc_and_ranges() -> impl Strategy<Value = (Vec<u8>, Vec<Range<u64>>)> {
    content()
        .prop_flat_map(|c| {
            let len = c.len() as u64;
            (Just(c), prop::collection::vec(0..=len, 0..12))
        })
        .prop_map(|(c, mut cuts)| {
            cuts.sort_unstable();
            let ranges = cuts.chunks_exact(2).map(|p| p[0]..p[1]).collect();
            (c, ranges)
        })
}

fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..40, 1..20)
}

fn default_marks() -> Marks<'static> {
    Marks {
        start: b"<$S>",
        end: b"<$E>",
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn integrate_inverts_sieve_over_ranges((doc, ranges) in doc_and_ranges()) {
        let cr = ClassifiedRanges::new(ranges.clone(), doc.len() as u64).unwrap();
        let s = sieve(&doc, &cr);
        prop_assert_eq!(s.layout.ranges(), ranges);
        prop_assert_eq!(integrate(&s.layout, &s.secure, &s.plain, None).unwrap(), doc);
    }

    #[test]
    fn integrate_inverts_sieve_over_marks((content, ranges) in doc_and_ranges()) {
        let strip = MarkConfig { strip: true, ..MarkConfig::default() };
        let marked = marks::mark_document(&strip, &content, &ranges);

        // Marks restored: the receiver's bytes are the sender's bytes.
        let s = sieve_marked(&marked, &MarkConfig::default()).unwrap();
        prop_assert_eq!(integrate(&s.layout, &s.secure, &s.plain, Some(default_marks())).unwrap(), marked.clone());

        // Marks stripped: the document without marks, escapes resolved (the thesis's output).
        let s = sieve_marked(&marked, &strip).unwrap();
        prop_assert_eq!(s.layout.ranges(), ranges);
        prop_assert_eq!(integrate(&s.layout, &s.secure, &s.plain, None).unwrap(), content);
    }

    #[test]
    fn chunked_parse_equals_whole((content, ranges) in doc_and_ranges(), sizes in chunk_sizes(), strip in any::<bool>()) {
        let cfg = MarkConfig { strip, ..MarkConfig::default() };
        let marked = marks::mark_document(&MarkConfig::default(), &content, &ranges);
        let whole = marks::parse_all(&cfg, &marked).unwrap();
        let mut p = MarkParser::new(cfg).unwrap();
        let mut col = Collector::default();
        let mut sink = |ev: Event<'_>| col.event(ev);
        let mut rest = &marked[..];
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].min(rest.len());
            p.feed(&rest[..n], &mut sink).unwrap();
            rest = &rest[n..];
            i += 1;
        }
        p.finish(&mut sink).unwrap();
        prop_assert_eq!(col.finish(), whole);
    }

    #[test]
    fn parallel_parse_equals_sequential((content, ranges) in doc_and_ranges(), threads in 1usize..6, min_part in 1usize..48, strip in any::<bool>()) {
        let marked = marks::mark_document(&MarkConfig { strip: true, ..MarkConfig::default() }, &content, &ranges);
        let cfg = MarkConfig { strip, ..MarkConfig::default() };
        prop_assert_eq!(
            parse_parallel(&cfg, &marked, threads, min_part),
            marks::parse_all(&cfg, &marked)
        );
    }

    /// Counting is the parse without the runs: for any bytes, well marked or not, on any
    /// number of threads, the same error or the shape of the layout the parse builds.
    #[test]
    fn counting_gives_the_parsed_layouts_shape(raw in content(), (content, ranges) in doc_and_ranges(), threads in 1usize..6, min_part in 1usize..48, strip in any::<bool>()) {
        let cfg = MarkConfig { strip, ..MarkConfig::default() };
        let marked = marks::mark_document(&MarkConfig { strip: true, ..MarkConfig::default() }, &content, &ranges);
        for input in [&raw, &marked] {
            let parsed = marks::parse_all(&cfg, input);
            let counted = marks::count_all(&cfg, input);
            let counted_parallel = count_parallel_releasing(&cfg, input, threads, min_part, &|_| {});
            prop_assert_eq!(&counted, &counted_parallel);
            match (parsed, counted) {
                (Ok(p), Ok(c)) => {
                    let layout = p.layout();
                    prop_assert_eq!(c.content_len, layout.content_len());
                    prop_assert_eq!(c.classified, layout.stream_len(Kind::Secure));
                    prop_assert_eq!(c.ranges, p.ranges.len() as u64);
                    prop_assert_eq!(c.segments(), layout.lens.len() as u64);
                }
                (Err(p), Err(c)) => prop_assert_eq!(p, c),
                (p, c) => prop_assert!(false, "parse {:?} but count {:?}", p, c),
            }
        }
    }

    /// The fast pass for the usual marks reports what the general parser reports: for any
    /// bytes, either the same runs and counts, or it leaves the part to the parser, and then
    /// only where the parser finds a mark out of place. Every well-marked document takes the
    /// fast pass, whatever its escapes and literal marks.
    #[test]
    fn fast_pass_agrees_with_the_parser(raw in content(), (content, ranges) in doc_and_ranges(), step in 1usize..400) {
        let cfg = MarkConfig::default();
        let fast = Fast::new(&cfg).expect("the default marks take the fast pass");
        let marked = marks::mark_document(&MarkConfig { strip: true, ..MarkConfig::default() }, &content, &ranges);
        for input in [&raw, &marked] {
            let mut col = Collector::default();
            let mut counter = Counter::default();
            let mut released = 0;
            let r = marks_fast::scan(&fast, input, 0, step, &mut |ev: Event<'_>| { col.event(ev); counter.event(ev) }, &mut |r| {
                assert_eq!(r.start, released);
                released = r.end;
            });
            // Counting in place gives up where the scan does, and counts what its events do.
            let mut counted_to = 0;
            let counted = marks_fast::count(&fast, input, step, &mut |r| {
                assert_eq!(r.start, counted_to);
                counted_to = r.end;
            });
            prop_assert_eq!(counted.is_ok(), r.is_ok());
            match (r, marks::parse_all(&cfg, input)) {
                (Ok(()), Ok(parsed)) => {
                    prop_assert_eq!(released, input.len());
                    prop_assert_eq!(counted_to, input.len());
                    prop_assert_eq!(col.finish(), parsed);
                    let counts = marks::count_all(&cfg, input);
                    prop_assert_eq!(Ok(counter.finish()), counts.clone());
                    prop_assert_eq!(counted.ok(), counts.ok());
                }
                (Err(_), Err(_)) => {}
                (r, p) => prop_assert!(false, "fast pass {:?}, parser {:?}", r, p.map(|_| ())),
            }
        }
        prop_assert!(marks::parse_all(&cfg, &marked).is_ok());
    }

    #[test]
    fn parallel_parse_reports_same_errors(raw in content(), threads in 1usize..6, min_part in 1usize..48) {
        let cfg = MarkConfig::default();
        prop_assert_eq!(parse_parallel(&cfg, &raw, threads, min_part), marks::parse_all(&cfg, &raw));
    }

    #[test]
    fn chunked_parse_reports_same_errors(raw in content(), sizes in chunk_sizes()) {
        // Arbitrary bytes are often badly marked: the error (and its offset) must not depend on
        // how the input was cut.
        let whole = marks::parse_all(&MarkConfig::default(), &raw);
        let mut p = MarkParser::new(MarkConfig::default()).unwrap();
        let mut col = Collector::default();
        let mut sink = |ev: Event<'_>| col.event(ev);
        let mut rest = &raw[..];
        let mut i = 0;
        let mut result = Ok(());
        while !rest.is_empty() && result.is_ok() {
            let n = sizes[i % sizes.len()].min(rest.len());
            result = p.feed(&rest[..n], &mut sink);
            rest = &rest[n..];
            i += 1;
        }
        let result = result.and_then(|_| p.finish(&mut sink)).map(|_| col.finish());
        prop_assert_eq!(result, whole);
    }

    #[test]
    fn placement_agrees_with_integrate((content, ranges) in doc_and_ranges(), restore in any::<bool>(), cut in 1u64..50) {
        let cr = ClassifiedRanges::new(ranges, content.len() as u64).unwrap();
        let s = sieve(&content, &cr);
        let m = restore.then(default_marks);
        let expected = integrate(&s.layout, &s.secure, &s.plain, m).unwrap();
        let p = Placement::new(&s.layout, m.map(|m| (m.start.len() as u64, m.end.len() as u64))).unwrap();
        prop_assert_eq!(p.output_len(), expected.len() as u64);
        let mut out = vec![0xAAu8; expected.len()];
        for (off, start) in p.mark_offsets() {
            let mk = if start { b"<$S>" } else { b"<$E>" };
            out[off as usize..off as usize + 4].copy_from_slice(mk);
        }
        for kind in [Kind::Secure, Kind::Plain] {
            let stream: Vec<u8> = s.list(kind).iter().flat_map(|c| c.iter().copied()).collect();
            // Place the stream in pieces of `cut` bytes, last piece first, to show order is free.
            let mut offs: Vec<u64> = (0..stream.len() as u64).step_by(cut as usize).collect();
            offs.reverse();
            for o in offs {
                let len = cut.min(stream.len() as u64 - o);
                p.place(kind, o, len, |out_off, within, l| {
                    let src = &stream[(o + within) as usize..(o + within + l) as usize];
                    out[out_off as usize..(out_off + l) as usize].copy_from_slice(src);
                }).unwrap();
            }
        }
        prop_assert_eq!(out, expected);
    }

    /// Layouts of hundreds of segments (many checkpoints apart), empty ones among them, marks
    /// or none: every byte of every piece lands where a naive walk of the layout puts it.
    #[test]
    fn compact_placement_agrees_with_a_naive_walk(
        lens in proptest::collection::vec(prop_oneof![Just(0u64), 1u64..5, 100u64..300], 1..400),
        secure_first in any::<bool>(),
        marks in proptest::option::of((1u64..6, 1u64..6)),
        probes in proptest::collection::vec((any::<bool>(), any::<proptest::sample::Index>(), 0u64..700), 1..20),
    ) {
        let first = if secure_first { Kind::Secure } else { Kind::Plain };
        let layout = sieve_core::Layout { first, lens: lens.clone() };
        let p = Placement::new(&layout, marks).unwrap();
        // Naive: the output offset of every byte of each stream.
        let mut maps: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        let mut naive_marks = Vec::new();
        let mut out = 0u64;
        for (kind, len) in layout.segments() {
            let (s, e) = match (kind, marks) { (Kind::Secure, Some(m)) => m, _ => (0, 0) };
            if s > 0 { naive_marks.push((out, true)); }
            out += s;
            for b in 0..len { maps[kind.index()].push(out + b); }
            out += len;
            if e > 0 { naive_marks.push((out, false)); }
            out += e;
        }
        prop_assert_eq!(p.output_len(), out);
        prop_assert_eq!(p.mark_offsets().collect::<Vec<_>>(), naive_marks);
        for (secure, at, len) in probes {
            let kind = if secure { Kind::Secure } else { Kind::Plain };
            let map = &maps[kind.index()];
            if map.is_empty() { continue; }
            let offset = at.index(map.len()) as u64;
            let len = len.min(map.len() as u64 - offset);
            let mut got = vec![u64::MAX; len as usize];
            // Runs are never empty: a receiver counts them (a classified frame may hold one).
            let mut empty_runs = 0;
            p.place(kind, offset, len, |o, within, n| {
                empty_runs += usize::from(n == 0);
                for k in 0..n { got[(within + k) as usize] = o + k; }
            }).unwrap();
            prop_assert_eq!(&got[..], &map[offset as usize..(offset + len) as usize]);
            prop_assert_eq!(empty_runs, 0);
        }
        let beyond = p.place(Kind::Plain, p.stream_len(Kind::Plain), 1, |_, _, _| {});
        prop_assert!(beyond.is_err());
    }
}
