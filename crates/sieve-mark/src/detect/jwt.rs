//! JSON Web Tokens (RFC 7519): three base64url parts joined by dots, the first of which decodes
//! to a JSON object naming its algorithm (`alg`).

use std::ops::Range;

use base64::Engine;

/// The base64url alphabet, as a table: a token's parts are walked byte by byte, and a lookup
/// is cheaper than the comparisons it stands for.
static B64URL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        i += 1;
    }
    t
};

#[inline]
fn b64url(b: u8) -> bool {
    B64URL[usize::from(b)]
}

/// The end of the base64url run from `start`, read up to `limit` bytes: the first position
/// that is past `s`, `limit` bytes on, or not base64url. Eight bytes are tested at a time where
/// eight can be read (one branch for them, not three per byte), the rest one by one.
#[inline]
fn run_end(s: &[u8], start: usize, limit: usize) -> usize {
    let end = s.len().min(start.saturating_add(limit));
    let mut e = start;
    while let Some(b) = s.get(e..e + 8).filter(|_| e + 8 <= end) {
        if !b.iter().fold(true, |all, &c| all & b64url(c)) {
            break;
        }
        e += 8;
    }
    while e < end && b64url(s[e]) {
        e += 1;
    }
    e
}

/// The token starting at `at` (where `eyJ`, the base64 of `{"`, is), if it is one.
pub fn token_at(s: &[u8], at: usize) -> Option<Range<usize>> {
    token_at_with(s, at, &mut Headers::default())
}

/// Headers met lately and whether each is a JWT header. The tokens of one log or export share
/// a handful of headers (`{"alg":"HS256","typ":"JWT"}`), and decoding one and reading it as JSON
/// costs more than the rest of the check.
#[derive(Debug, Default)]
pub struct Headers {
    seen: Vec<(Box<[u8]>, bool)>,
    next: usize,
}

/// Headers remembered, and the longest remembered.
const KEPT: usize = 4;
const KEPT_LEN: usize = 256;

impl Headers {
    fn valid(&mut self, h: &[u8]) -> bool {
        if let Some((_, ok)) = self.seen.iter().find(|(k, _)| **k == *h) {
            return *ok;
        }
        let ok = header_valid(h);
        if h.len() <= KEPT_LEN {
            let e = (h.into(), ok);
            if self.seen.len() < KEPT {
                self.seen.push(e);
            } else {
                self.seen[self.next] = e;
                self.next = (self.next + 1) % KEPT;
            }
        }
        ok
    }
}

/// Whether the base64url text `h` decodes to a JSON object naming its algorithm.
fn header_valid(h: &[u8]) -> bool {
    let Ok(header) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(h) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&header).is_ok_and(|v| v.get("alg").is_some())
}

/// [`token_at`], remembering headers in `headers`.
pub fn token_at_with(s: &[u8], at: usize, headers: &mut Headers) -> Option<Range<usize>> {
    if at > 0 && (b64url(s[at - 1]) || s[at - 1] == b'.') {
        return None;
    }
    let mut dots = [0usize; 2];
    let mut e = at;
    for d in &mut dots {
        let start = e;
        e = run_end(s, start, 16 << 10);
        if e == start || e >= s.len() || s[e] != b'.' {
            return None;
        }
        *d = e;
        e += 1;
    }
    e = run_end(s, e, 2048);
    if e < s.len() && (b64url(s[e]) || s[e] == b'.') {
        return None;
    }
    headers.valid(&s[at..dots[0]]).then_some(at..e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The run's end, eight bytes at a time, is the byte-by-byte walk's.
        #[test]
        fn runs_end_where_the_byte_walk_ends(
            s in prop::collection::vec(
                prop_oneof![8 => prop::sample::select(b"aZ09-_".to_vec()), 1 => any::<u8>()],
                0..100,
            ),
            start in 0usize..110,
            limit in prop_oneof![0usize..40, Just(2048usize), Just(16 << 10), Just(usize::MAX)],
        ) {
            let start = start.min(s.len());
            let mut e = start;
            while e < s.len() && e - start < limit && b64url(s[e]) {
                e += 1;
            }
            prop_assert_eq!(run_end(&s, start, limit), e);
        }
    }

    #[test]
    fn a_real_token_and_look_alikes() {
        let t = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c rest";
        let at = t.find("eyJ").unwrap();
        let r = token_at(t.as_bytes(), at).unwrap();
        assert_eq!(&t[r.end..], " rest");
        // The payload's own eyJ is not a token start.
        let p = t[at + 5..].find("eyJ").unwrap() + at + 5;
        assert_eq!(token_at(t.as_bytes(), p), None);
        assert_eq!(token_at(b"eyJub3QiOiJqd3QifQ.eyJ4IjoxfQ.sig", 0), None);
        assert_eq!(token_at(b"eyJhbGciOi", 0), None);
        // Remembered headers give the answers they gave the first time.
        let mut h = Headers::default();
        let doc =
            format!("{t} eyJub3QiOiJqd3QifQ.eyJ4IjoxfQ.sig {t} eyJub3QiOiJqd3QifQ.eyJ4IjoxfQ.sig");
        let b = doc.as_bytes();
        let found: Vec<bool> = (0..b.len())
            .filter(|&i| b[i..].starts_with(b"eyJ"))
            .map(|i| token_at_with(b, i, &mut h) == token_at(b, i))
            .collect();
        assert!(found.len() > 4 && found.iter().all(|&x| x));
        for k in 0..10 {
            let other = format!("{{\"alg\":\"x{k}\"}}");
            let enc = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(other);
            assert!(h.valid(enc.as_bytes()));
            assert!(!h.valid(b"eyJub3QiOiJqd3QifQ"));
        }
    }
}
