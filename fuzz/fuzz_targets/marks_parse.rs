//! The streaming mark parser must not depend on how its input is chunked.
//!
//! Byte 0 is the split position (scaled over the input), byte 1 picks a configuration; the rest
//! is the document. Feeding it in two chunks, and one byte at a time, must give exactly what
//! `parse_all` gives (the same `ParsedMarks`, or the same error), and every content event must be
//! a verbatim slice of the input at the offset it reports. The parallel parse
//! (`marks_parallel`) must agree too, and so must the parallel count (which counts marks in
//! place, without the parser's events, where the marks allow): the same counts, or an error
//! where the parse fails.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sieve_core::marks::{self, Collector, Event, MarkConfig, MarkError, MarkParser, ParsedMarks};
use sieve_core::marks_parallel::{count_parallel_releasing, parse_parallel};

fuzz_target!(|data: &[u8]| {
    let [split, sel, input @ ..] = data else {
        return;
    };
    let cfg = config(*sel);
    if cfg.validate().is_err() {
        return;
    }
    let whole = marks::parse_all(&cfg, input);

    let at = input.len() * usize::from(*split) / 255;
    let (a, b) = input.split_at(at);
    assert_eq!(chunked(&cfg, input, &[a, b]), whole, "split at {at}");

    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(chunked(&cfg, input, &bytes), whole, "byte by byte");

    // Parts parsed on separate threads, cut after end marks: the same result, errors included.
    let min_part = 1 + usize::from(*split % 16);
    for threads in [2, 3] {
        assert_eq!(
            parse_parallel(&cfg, input, threads, min_part),
            whole,
            "{threads} threads, parts of at least {min_part}"
        );
        assert_eq!(
            count_parallel_releasing(&cfg, input, threads, min_part, &|_| {}),
            marks::count_all(&cfg, input),
            "counting on {threads} threads, parts of at least {min_part}"
        );
    }

    if let Ok(parsed) = &whole {
        let content: u64 = parsed.extents.iter().map(|e| e.len).sum();
        assert_eq!(content, parsed.content_len);
        for r in &parsed.ranges {
            assert!(r.start <= r.end && r.end <= parsed.content_len);
        }
    }
});

fn config(sel: u8) -> MarkConfig {
    let base = MarkConfig {
        strip: sel & 1 != 0,
        ..MarkConfig::default()
    };
    match (sel >> 1) % 4 {
        0 => base,
        // Multi-byte escape.
        1 => MarkConfig {
            escape: b"%%".to_vec(),
            ..base
        },
        // Single-byte marks sharing nothing.
        2 => MarkConfig {
            start: b"[".to_vec(),
            end: b"]".to_vec(),
            ..base
        },
        // Strings that share a prefix (the parser may refuse this configuration).
        _ => MarkConfig {
            start: b"<<S".to_vec(),
            end: b"<<E".to_vec(),
            escape: b"<".to_vec(),
            ..base
        },
    }
}

fn chunked(cfg: &MarkConfig, input: &[u8], chunks: &[&[u8]]) -> Result<ParsedMarks, MarkError> {
    let mut parser = MarkParser::new(cfg.clone())?;
    let mut col = Collector::default();
    let mut sink = |ev: Event<'_>| {
        if let Event::Data { at, bytes } = ev {
            let start = usize::try_from(at).expect("offset fits");
            assert_eq!(
                input.get(start..start + bytes.len()),
                Some(bytes),
                "data event at {at}"
            );
        }
        col.event(ev);
    };
    for chunk in chunks {
        parser.feed(chunk, &mut sink)?;
    }
    parser.finish(&mut sink)?;
    Ok(col.finish())
}
