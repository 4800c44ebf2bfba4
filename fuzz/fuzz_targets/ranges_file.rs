//! Arbitrary bytes as a ranges file (`sieve send --ranges`), against a document length chosen by
//! the fuzzer. Beyond "never panics": whatever parses is valid (sorted, disjoint, inside the
//! document) and survives a round trip through the canonical JSON form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sieve_core::ranges_file;

fuzz_target!(|data: &[u8]| {
    let Some((len_bytes, json)) = data.split_at_checked(8) else {
        return;
    };
    let doc_len = u64::from_le_bytes(len_bytes.try_into().unwrap_or([0; 8])) >> (len_bytes[0] % 64);
    if let Ok(r) = ranges_file::parse(json, doc_len) {
        let mut prev_end = 0;
        for x in r.as_slice() {
            assert!(x.start <= x.end && x.start >= prev_end && x.end <= doc_len);
            prev_end = x.end;
        }
        let again = ranges_file::parse(ranges_file::to_json(&r).as_bytes(), doc_len).expect("canonical form parses");
        assert_eq!(again, r);
    }
});
