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
        while e < s.len() && e - start < 16 << 10 && b64url(s[e]) {
            e += 1;
        }
        if e == start || e >= s.len() || s[e] != b'.' {
            return None;
        }
        *d = e;
        e += 1;
    }
    let sig = e;
    while e < s.len() && e - sig < 2048 && b64url(s[e]) {
        e += 1;
    }
    if e < s.len() && (b64url(s[e]) || s[e] == b'.') {
        return None;
    }
    headers.valid(&s[at..dots[0]]).then_some(at..e)
}

#[cfg(test)]
mod tests {
    use super::*;

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
