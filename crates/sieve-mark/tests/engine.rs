//! The default policy over realistic documents, and the engine's result under any cutting.

use proptest::prelude::*;
use sieve_mark::{Marking, Policy, ScanOptions};

fn found(doc: &str, m: &Marking) -> Vec<(String, Vec<String>)> {
    m.spans
        .iter()
        .map(|s| {
            (
                doc[s.start as usize..s.end as usize].to_string(),
                m.names_of(s.detectors)
                    .iter()
                    .map(|n| n.to_string())
                    .collect(),
            )
        })
        .collect()
}

fn scan(doc: &str, name: Option<&str>) -> Marking {
    let opts = ScanOptions {
        threads: 2,
        name: name.map(String::from),
        chunk: 64,
    };
    Policy::default_policy().scan_slice(doc.as_bytes(), &opts)
}

fn texts(doc: &str, name: Option<&str>) -> Vec<String> {
    found(doc, &scan(doc, name))
        .into_iter()
        .map(|(t, _)| t)
        .collect()
}

#[test]
fn every_validated_kind_in_free_text() {
    let doc = "Dear Jane Doe,\n\
        card 4111 1111 1111 1111 and 5555-5555-5555-4444, iban DE89 3704 0044 0532 0130 00.\n\
        SSN 123-45-6789; mail jane.doe@corp.example.io; call (212) 456-7890 or +44 20 7946 0958.\n\
        from 203.0.113.77 and 2001:db8::8a2e:370:7334 (AWS AKIAIOSFODNN7EXAMPLE)\n\
        -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n\
        jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl password=hunter22 \
        api_key: 9fQ2xLk0pZ7wQ1 born on March 12, 1984.\n";
    let got = found(doc, &scan(doc, None));
    let want = [
        ("Jane Doe", "name"),
        ("4111 1111 1111 1111", "card"),
        ("5555-5555-5555-4444", "card"),
        ("DE89 3704 0044 0532 0130 00", "iban"),
        ("123-45-6789", "ssn"),
        ("jane.doe@corp.example.io", "email"),
        ("(212) 456-7890", "phone"),
        ("+44 20 7946 0958", "phone"),
        ("203.0.113.77", "ipv4"),
        ("2001:db8::8a2e:370:7334", "ipv6"),
        ("AKIAIOSFODNN7EXAMPLE", "cloud-key"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "pem",
        ),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "jwt"),
        ("hunter22", "secret"),
        ("9fQ2xLk0pZ7wQ1", "secret"),
        ("March 12, 1984", "dob"),
    ];
    let got_pairs: Vec<(String, String)> =
        got.iter().map(|(t, d)| (t.clone(), d.join("+"))).collect();
    let want_pairs: Vec<(String, String)> = want
        .iter()
        .map(|(t, d)| (t.to_string(), d.to_string()))
        .collect();
    assert_eq!(got_pairs, want_pairs);
}

#[test]
fn look_alikes_stay_in_the_clear() {
    let doc =
        "2024-01-15T12:34:56.789Z INFO GET /v1.2.3.4/items?id=4111111111111112 took 12.5 ms\n\
        order 1234-5678-9012-3456 version 10.0.0.256 build 1.2.3.4.5 at 12:34:56\n\
        mac 00:1a:2b:3c:4d:5e std::vector key=user_settings token=none sha a3f9c2e4b1d0\n\
        123-45-67890 000-12-3456 phone 123-456-7890 date 1984-03-12 (no keyword)\n\
        uuid 550e8400-e29b-41d4-a716-446655440000 noreply@example.com 127.0.0.1\n";
    assert_eq!(texts(doc, None), Vec::<String>::new());
}

#[test]
fn csv_columns_json_fields_and_log_keys() {
    let csv = "id,first_name,Email Address,amount,notes\n1,Ann,ann@x.io,10.50,ok\n2,\"Lee, Bo\",,3,\"call +1 212-456-7890\"\n";
    assert_eq!(
        texts(csv, Some("people.csv")),
        vec!["Ann", "ann@x.io", "Lee, Bo", "+1 212-456-7890"]
    );
    let nd = "{\"user\":{\"id\":7,\"name\":\"Ann\"},\"event\":\"login\",\"payment\":{\"card\":\"x\"}}\n{\"event\":\"logout\",\"email\":\"bo@y.io\"}\n";
    assert_eq!(
        texts(nd, Some("events.ndjson")),
        vec!["7", "Ann", "x", "bo@y.io"]
    );
    let log = "ts=1 level=info user=ann client_ip=10.1.2.3 msg=\"ok\" email=\"bo at y\"\n";
    assert_eq!(
        texts(log, Some("app.log")),
        vec!["ann", "10.1.2.3", "bo at y"]
    );
}

/// A document from fragments: planted items, look-alikes and filler, in any order.
fn document() -> impl Strategy<Value = String> {
    let fragments = vec![
        "4111 1111 1111 1111",
        "DE89370400440532013000",
        "123-45-6789",
        "a.b@c.io",
        "(212) 456-7890",
        "10.0.0.1",
        "fe80::1",
        "password=hunter22",
        "AKIAIOSFODNN7EXAMPLE",
        "born 1984-03-12",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        "Mr. Bo Li",
        "2024-01-15 12:34:56",
        "id=42",
        " ",
        "\n",
        "  continued\n",
        "lorem ipsum ",
        "1 2 3 ",
        ":",
        "=",
        "@",
    ];
    proptest::collection::vec(prop::sample::select(fragments), 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Cutting a document into chunks anywhere, on any number of threads, or streaming it
    /// through a reader that returns a few bytes at a time, gives the spans of one whole scan.
    #[test]
    fn the_result_does_not_depend_on_the_cutting(
        doc in document(),
        chunk in 1usize..200,
        threads in 1usize..4,
        read_size in 1usize..50,
    ) {
        let p = Policy::parse(
            "extends = \"default\"\n[[detect]]\nname = \"lines\"\nkind = \"keyword\"\nwords = [\"lorem\"]\ngranularity = \"record\"\n[[detect]]\nname = \"re\"\nkind = \"regex\"\npattern = 'id=[0-9]+'\n"
        ).unwrap();
        let whole = p.scan_slice(doc.as_bytes(), &ScanOptions { threads: 1, name: None, chunk: 1 << 20 });
        let cut = p.scan_slice(doc.as_bytes(), &ScanOptions { threads, name: None, chunk });
        prop_assert_eq!(&cut, &whole);
        struct Dribble<'a>(&'a [u8], usize);
        impl std::io::Read for Dribble<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.1.min(buf.len()).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let streamed = p
            .scan_reader(Dribble(doc.as_bytes(), read_size), &ScanOptions { threads, name: None, chunk })
            .unwrap();
        prop_assert_eq!(&streamed, &whole);
        // Spans are sorted, disjoint, not touching, and inside the document.
        for w in whole.spans.windows(2) {
            prop_assert!(w[0].end < w[1].start);
        }
        prop_assert!(whole.spans.iter().all(|s| s.start < s.end && s.end <= doc.len() as u64));
    }
}

/// Documents larger than the margins, cut into small chunks: the same spans as one chunk.
#[test]
fn large_documents_cut_small_give_the_same_spans() {
    let mut doc = String::new();
    let mut i = 0u64;
    while doc.len() < 3 << 20 {
        doc.push_str(&format!(
            "2024-01-15T12:34:{:02}Z user=u{i} ip=10.{}.{}.{} card 4111 1111 1111 1111 msg=\"ok\"\n",
            i % 60,
            i % 250,
            (i / 7) % 250,
            (i / 3) % 250
        ));
        if i.is_multiple_of(1000) {
            doc.push_str(&"x".repeat(70_000));
            doc.push('\n');
        }
        i += 1;
    }
    let p = Policy::default_policy();
    let whole = p.scan_slice(
        doc.as_bytes(),
        &ScanOptions {
            threads: 1,
            name: None,
            chunk: 64 << 20,
        },
    );
    let cut = p.scan_slice(
        doc.as_bytes(),
        &ScanOptions {
            threads: 2,
            name: None,
            chunk: 4093,
        },
    );
    assert_eq!(cut, whole);
    let read = p
        .scan_reader(
            doc.as_bytes(),
            &ScanOptions {
                threads: 2,
                name: None,
                chunk: 100_003,
            },
        )
        .unwrap();
    assert_eq!(read, whole);
    assert!(whole.counts[0] > 1000, "{:?}", whole.counts_by_name());
}
