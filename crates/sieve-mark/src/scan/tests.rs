//! The fast scan against its plain reference (`reference.rs`): the same findings on every
//! document and for every part of it a chunk may own.

use proptest::prelude::*;

use super::reference;
use super::{Hit, Scanner, Window};
use crate::labelled::{Format, Gen};
use crate::Policy;

/// The findings of both scans over `own` of `doc`, sorted.
fn both(p: &Policy, doc: &[u8], own: std::ops::Range<usize>) -> (Vec<Hit>, Vec<Hit>) {
    let w = Window {
        bytes: doc,
        base: 7,
        own,
    };
    let (mut fast, mut slow) = (Vec::new(), Vec::new());
    Scanner::new(p).scan(&w, &mut fast);
    reference::Scanner::new(p).scan(&w, &mut slow);
    let key = |h: &Hit| (h.start, h.end, h.det);
    fast.sort_by_key(key);
    slow.sort_by_key(key);
    (fast, slow)
}

/// The default policy, and one with every granularity and the other kinds.
fn policies() -> Vec<Policy> {
    vec![
        Policy::default_policy(),
        Policy::parse(
            r#"
            extends = "default"
            [[detect]]
            name = "lines"
            kind = "keyword"
            words = ["lorem"]
            granularity = "record"
            [[detect]]
            name = "re"
            kind = "regex"
            pattern = 'id=[0-9]+'
            [[detect]]
            name = "card-line"
            kind = "card"
            granularity = "line"
            [[detect]]
            name = "ip-field"
            kind = "ipv4"
            granularity = "field"
            [[detect]]
            name = "dob-x"
            kind = "dob"
            keywords = ["x", "geboren"]
            within = 10
            "#,
        )
        .unwrap(),
        // Detectors that need no digits, or only some trigger bytes.
        Policy::parse("[[detect]]\nkind = \"email\"\n[[detect]]\nkind = \"person-title\"\n")
            .unwrap(),
        Policy::parse("[[detect]]\nkind = \"ipv6\"\n[[detect]]\nkind = \"iban\"\n").unwrap(),
    ]
}

/// Fragments that make and nearly make every kind of finding, with the bytes around them that
/// decide (glued letters, separators, signs, capitals).
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "378282246310005",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "xDE89370400440532013000",
        "DE",
        "GB",
        "123-45-6789",
        "123 45 6789",
        "a.b@c.io",
        "x@example.com",
        "@",
        "(212) 456-7890",
        "212.456.7890",
        "+1 415 456 7890",
        "+44 20 7946 0958",
        "+",
        "10.0.0.1",
        "1.2.3.4.5",
        "127.0.0.1",
        "fe80::1",
        "2001:db8::8a2e:370:7334",
        "::",
        "xfe80::1",
        "abcde:1::2",
        ".fe80::1",
        "_fe80::1",
        "[fe80::1]",
        "ip:fe80::1",
        "password=hunter22",
        "token: 9fQ2xLk0pZ7wQ1",
        "\"api_key\": \"wJalrXUtnFEMI/K7MDENG\"",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
        "user=ann",
        "2fa_password=hunter22",
        "-password=hunter22",
        ".password=hunter22",
        "\"password\"  = \"hunter22\"",
        "password :hunter22",
        "'token'=9fQ2xLk0pZ7wQ1",
        "client_ip=10.1.2.3",
        "AKIAIOSFODNN7EXAMPLE",
        "x.AKIAIOSFODNN7EXAMPLE",
        "-AKIAIOSFODNN7EXAMPLE",
        "sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
        "sk-proj-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOP",
        "SG.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.abcd",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
        "eyJ",
        "sk",
        "a_very_long_key_name_for_the_cache_password=abc12345",
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk_token=9fQ2xLk0pZ7wQ1",
        "session_token=9fQ2xLk0pZ7wQ1",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "born 1984-03-12",
        "DOB: 12/03/1984",
        "date of birth: March 12, 1984",
        "born on 12th of Sept 1984",
        "geboren 1.2.1990",
        "x 2000-02-29",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        "Mr. Bo Li",
        "Dear Jane Doe",
        "Dr Ada",
        "Miss X",
        "MrX",
        "2024-01-15 12:34:56",
        "2024-01-15T12:34:56.789Z",
        "id=42",
        "lorem ipsum ",
        "1 2 3 ",
        "12",
        "1984",
        "0",
        "abc",
        "ZW7go3SNLHGiJN4NOgrE/2gGP/reJlL3I+9kqh",
        "_",
        " ",
        "  ",
        "\n",
        "\r\n",
        "  continued\n",
        ".",
        "-",
        "/",
        "(",
        ")",
        ":",
        "=",
        ",",
        "\"",
        "é",
    ])
}

fn document() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(fragment(), 0..120).prop_map(|v| v.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Documents of fragments in any order, scanned whole and in any part a chunk may own.
    #[test]
    fn the_fast_scan_finds_what_the_reference_does(
        doc in document(),
        a in 0usize..4000,
        b in 0usize..4000,
    ) {
        let (lo, hi) = (a.min(b).min(doc.len()), a.max(b).min(doc.len()));
        for p in &policies() {
            let (fast, slow) = both(p, &doc, 0..doc.len());
            prop_assert_eq!(fast, slow);
            let (fast, slow) = both(p, &doc, lo..hi);
            prop_assert_eq!(fast, slow);
        }
    }

    /// Any bytes at all, from an alphabet rich in the bytes the scan looks at.
    #[test]
    fn any_bytes_give_the_reference_findings(
        doc in prop::collection::vec(
            prop::sample::select(b"0123456789 -./()+@:=_AZDMPSrsaeixfcGBE\n\"'xyz\x00\xff".to_vec()),
            0..600,
        ),
        a in 0usize..600,
    ) {
        let lo = a.min(doc.len());
        for p in &policies() {
            let (fast, slow) = both(p, &doc, lo..doc.len());
            prop_assert_eq!(fast, slow);
        }
    }
}

/// The generated evaluation documents of every format: the same findings, in chunks of odd
/// sizes.
#[test]
fn generated_documents_give_the_reference_findings() {
    let p = &policies()[0];
    for seed in 0..3 {
        for f in Format::ALL {
            let doc = Gen::new(seed).document(f, 96 << 10).bytes;
            let mut lo = 0;
            for size in [1, 63, 64, 65, 4097, 20_000, doc.len()].iter().cycle() {
                if lo >= doc.len() {
                    break;
                }
                let hi = (lo + size).min(doc.len());
                let (fast, slow) = both(p, &doc, lo..hi);
                assert_eq!(fast, slow, "{f:?} seed {seed} at {lo}..{hi}");
                lo = hi;
            }
        }
    }
}

#[test]
fn every_title_passes_the_block_filter() {
    let c = crate::classify::Classifier::new(b"", b"");
    for t in crate::detect::person::TITLES {
        let k = c.block_at(t.as_bytes(), 0);
        assert_eq!(k.title & 1, 1, "{t}");
    }
}

/// Runs of digit groups in every shape the block filter of `shape.rs` looks at: one to five
/// groups (short ones, years, a card, a phone number) joined by one or two separators, glued or
/// not at either end, after `+`, a space, a comma, a dot or the words of a named date.
fn digit_run() -> impl Strategy<Value = String> {
    let before = prop::sample::select(vec![
        "",
        "\n",
        " ",
        ",",
        ".",
        "+",
        "x",
        "=",
        "/",
        "March 12, ",
        "born March ",
        "dob ",
        "T",
    ]);
    let group = prop::sample::select(vec![
        "2024",
        "03",
        "7",
        "123",
        "94676",
        "4111111111111111",
        "411111111111",
        "1111",
        "14154567890",
        "415",
        "456",
        "7890",
        "12",
        "1984",
    ]);
    let sep = prop::sample::select(vec!["-", ".", " ", "/", "  ", "-.", " (", ") ", "("]);
    let after = prop::sample::select(vec!["T", "ms", "x", "_", "", " ", "\n", ":", ","]);
    // Findings that end at a group which more groups follow.
    let found = prop::sample::select(vec![
        "10.0.0.1",
        "123-45-6789",
        "415 456 7890",
        "(212) 456-7890",
        "1 415 456 7890",
        "4111 1111 1111 1111",
        "1984-03-12",
        "12/03/1984",
        "14154567890",
        "44 20 7946 0958",
        "12 1984",
    ]);
    let first = prop_oneof![group.clone(), found];
    (
        before,
        prop::collection::vec((sep, group), 0..5),
        first,
        after,
    )
        .prop_map(|(b, rest, first, a)| {
            let mut r = format!("{b}{first}");
            for (s, g) in rest {
                r.push_str(s);
                r.push_str(g);
            }
            r.push_str(a);
            r
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Digit runs of every shape: the scan, which passes some of them by on their masks, finds
    /// what the reference, which walks every run, finds.
    #[test]
    fn runs_passed_by_their_masks_hold_nothing(
        runs in prop::collection::vec(digit_run(), 1..6),
        a in 0usize..300,
    ) {
        let doc = runs.concat().into_bytes();
        let lo = a.min(doc.len());
        for p in &policies() {
            let (fast, slow) = both(p, &doc, 0..doc.len());
            prop_assert_eq!(fast, slow);
            let (fast, slow) = both(p, &doc, lo..doc.len());
            prop_assert_eq!(fast, slow);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The literal searches' findings put among the loop's give the order the engine's stable
    /// sort gives (literal findings first at the same place), and always the same findings.
    #[test]
    fn literal_findings_merge_in_order(
        before in prop::collection::vec((0u64..50, 0u64..5), 0..4),
        main in prop::collection::vec((0u64..50, 0u64..5), 0..30),
        lits in prop::collection::vec((0u64..50, 0u64..5), 0..10),
        sorted in any::<bool>(),
    ) {
        let hits = |v: &[(u64, u64)], det: u16| -> Vec<Hit> {
            let mut h: Vec<Hit> = v
                .iter()
                .enumerate()
                .map(|(i, &(s, l))| Hit { start: s, end: s + l, det: det + i as u16 })
                .collect();
            if sorted {
                h.sort_by_key(|h| (h.start, h.end));
            }
            h
        };
        let (before, main, lits) = (hits(&before, 1000), hits(&main, 0), hits(&lits, 500));
        let mut out = [before.clone(), main.clone()].concat();
        super::merge_into(&mut out, before.len(), &lits);
        let key = |h: &Hit| (h.start, h.end, h.det);
        prop_assert_eq!(&out[..before.len()], &before[..]);
        let mut got = out[before.len()..].to_vec();
        let mut want = [lits.clone(), main.clone()].concat();
        if sorted {
            want.sort_by_key(|h| (h.start, h.end));
            prop_assert_eq!(&got, &want);
        }
        got.sort_by_key(key);
        want.sort_by_key(key);
        prop_assert_eq!(got, want);
    }
}
