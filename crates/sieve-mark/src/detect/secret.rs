//! Secrets after keys such as `password`, `token` or `api_key`: a value counts when it looks
//! random (long enough, letters and digits mixed, enough entropy), so that `token=none` or
//! `key=user_settings` stay in the clear while `token=9fQ2xLk0pZ7w` does not.

/// Shannon entropy of the bytes, in bits per byte.
pub fn entropy(v: &[u8]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in v {
        counts[b as usize] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// How many of lowercase, uppercase, digits and other characters occur.
pub fn classes(v: &[u8]) -> usize {
    let mut seen = [false; 4];
    for &b in v {
        let k = match b {
            b'a'..=b'z' => 0,
            b'A'..=b'Z' => 1,
            b'0'..=b'9' => 2,
            _ => 3,
        };
        seen[k] = true;
    }
    seen.iter().filter(|&&s| s).count()
}

/// Values that stand for no secret: placeholders, masks, booleans and empties.
pub fn is_placeholder(v: &[u8]) -> bool {
    let lower = v.to_ascii_lowercase();
    v.iter()
        .all(|&b| b == b'*' || b == b'x' || b == b'X' || b == b'.' || b == b'#')
        || [
            &b"null"[..],
            b"none",
            b"true",
            b"false",
            b"undefined",
            b"<redacted>",
            b"redacted",
            b"[redacted]",
            b"changeme",
        ]
        .contains(&lower.as_slice())
        || (lower.starts_with(b"${") && lower.ends_with(b"}"))
}

/// Whether a value after a non-password key is secret-like.
pub fn looks_random(v: &[u8], min_len: usize, min_entropy: f64) -> bool {
    v.len() >= min_len
        && v.iter().any(u8::is_ascii_digit)
        && v.iter().any(u8::is_ascii_alphabetic)
        && entropy(v) >= min_entropy
        && !is_placeholder(v)
        && !v.contains(&b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_pass_and_words_do_not() {
        assert!(looks_random(b"9fQ2xLk0pZ7w", 8, 3.0));
        assert!(looks_random(
            b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            8,
            3.0
        ));
        assert!(!looks_random(b"user_settings", 8, 3.0));
        assert!(!looks_random(b"********", 8, 3.0));
        assert!(!looks_random(b"abc", 8, 3.0));
        assert!(!looks_random(b"aaaaaaaa1", 8, 3.0));
        assert!(entropy(b"") == 0.0 && (entropy(b"ab") - 1.0).abs() < 1e-9);
    }
}
