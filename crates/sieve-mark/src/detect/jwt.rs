//! JSON Web Tokens (RFC 7519): three base64url parts joined by dots, the first of which decodes
//! to a JSON object naming its algorithm (`alg`).

use std::ops::Range;

use base64::Engine;

fn b64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The token starting at `at` (where `eyJ`, the base64 of `{"`, is), if it is one.
pub fn token_at(s: &[u8], at: usize) -> Option<Range<usize>> {
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
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&s[at..dots[0]])
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&header).ok()?;
    v.get("alg")?;
    Some(at..e)
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
    }
}
