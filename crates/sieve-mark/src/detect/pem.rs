//! PEM blocks (RFC 7468): `-----BEGIN LABEL-----` … `-----END LABEL-----`, classified whole when
//! the label names a private key or a certificate.

use std::ops::Range;

/// The marker every PEM block starts with.
pub const BEGIN: &[u8] = b"-----BEGIN ";

/// Longest block sought: an 8192-bit RSA key in PEM is about 6.5 KB; certificate chains are
/// found block by block.
pub const MAX_BLOCK: usize = 32 << 10;

/// The block starting at `at` (where [`BEGIN`] is), if its label contains one of `labels` and
/// its end line follows within [`MAX_BLOCK`] bytes.
pub fn block_at(s: &[u8], at: usize, labels: &[Vec<u8>]) -> Option<Range<usize>> {
    let rest = &s[at + BEGIN.len()..s.len().min(at + MAX_BLOCK)];
    // The label and the names sought in it are a few bytes each: plain comparisons, rather
    // than a searcher built for every block.
    let close = find_short(&rest[..rest.len().min(80)], b"-----")?;
    let label = &rest[..close];
    if label.contains(&b'\n') || !labels.iter().any(|l| find_short(label, l).is_some()) {
        return None;
    }
    // The first `-----END <label>-----`: each `-----END ` in turn (one searcher built once; a
    // block's body holds no `-`, so the first is nearly always the one), then its label.
    static END: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(END_MARK));
    let tail = |e: usize| rest[e + END_MARK.len()..].strip_prefix(label);
    let e = END
        .find_iter(rest)
        .find(|&e| tail(e).is_some_and(|t| t.starts_with(b"-----")))?;
    Some(at..at + BEGIN.len() + e + END_MARK.len() + label.len() + 5)
}

/// Where `needle` first occurs in `hay`, compared at every position (for a short `hay`).
fn find_short(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What every end line starts with.
const END_MARK: &[u8] = b"-----END ";

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The plain search finds what `memmem` finds, first occurrence and all.
        #[test]
        fn the_plain_search_is_memmem(
            hay in prop::collection::vec(prop::sample::select(b"-KEY \nA".to_vec()), 0..90),
            needle in prop::collection::vec(prop::sample::select(b"-KEY \nA".to_vec()), 0..6),
        ) {
            prop_assert_eq!(find_short(&hay, &needle), memchr::memmem::find(&hay, &needle));
        }
    }

    #[test]
    fn keys_and_certificates_whole_and_others_not() {
        let labels = vec![b"PRIVATE KEY".to_vec(), b"CERTIFICATE".to_vec()];
        let doc = b"x -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- y";
        assert_eq!(block_at(doc, 2, &labels), Some(2..doc.len() - 2));
        let pubkey = b"-----BEGIN PUBLIC KEY-----\nMII\n-----END PUBLIC KEY-----";
        assert_eq!(block_at(pubkey, 0, &labels), None);
        let open = b"-----BEGIN CERTIFICATE-----\nMII\n";
        assert_eq!(block_at(open, 0, &labels), None);
        // Another block's end line, or a longer label's, is passed by.
        let mixed = b"-----BEGIN CERTIFICATE-----\nMII\n-----END OTHER-----\n\
                      -----END CERTIFICATEX-----\n-----END CERTIFICATE-----\n";
        assert_eq!(block_at(mixed, 0, &labels), Some(0..mixed.len() - 1));
        let cut = b"-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE----";
        assert_eq!(block_at(cut, 0, &labels), None);
    }
}
