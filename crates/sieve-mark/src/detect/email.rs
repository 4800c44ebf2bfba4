//! E-mail addresses: a local part, `@`, and a domain of at least two labels whose last is
//! alphabetic (RFC 5321's dot-atom form, which is what people write; quoted local parts are not
//! sought).

use std::ops::Range;

/// Bytes of a local part (bit 0) and of a domain (bit 1), as a table: the walks around an
/// `@` ask it of every byte.
static CHARS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let local =
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-' | b'\'');
        let domain = b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
        t[i] = local as u8 | (domain as u8) << 1;
        i += 1;
    }
    t
};

#[inline]
fn local_char(b: u8) -> bool {
    CHARS[usize::from(b)] & 1 != 0
}

#[inline]
fn domain_char(b: u8) -> bool {
    CHARS[usize::from(b)] & 2 != 0
}

/// The address around the `@` at `at`, if there is one.
pub fn around(s: &[u8], at: usize) -> Option<Range<usize>> {
    // Local part: at most 64 bytes back.
    let mut a = at;
    while a > 0 && at - a < 64 && local_char(s[a - 1]) {
        a -= 1;
    }
    // A quote or dot may surround an address in text ('bob@x.com', ...bob@x.com.).
    while a < at && (s[a] == b'.' || s[a] == b'\'') {
        a += 1;
    }
    if a == at || s[at - 1] == b'.' || (a > 0 && s[a - 1] == b'@') {
        return None;
    }
    let mut e = at + 1;
    while e < s.len() && e - at <= 253 && domain_char(s[e]) {
        e += 1;
    }
    // Trailing dots and hyphens end a sentence, not a domain.
    while e > at + 1 && (s[e - 1] == b'.' || s[e - 1] == b'-') {
        e -= 1;
    }
    if e < s.len() && s[e] == b'@' {
        return None;
    }
    let domain = &s[at + 1..e];
    let mut labels = 0;
    let mut last: &[u8] = &[];
    for label in domain.split(|&b| b == b'.') {
        if label.is_empty()
            || label.len() > 63
            || label[0] == b'-'
            || label[label.len() - 1] == b'-'
        {
            return None;
        }
        labels += 1;
        last = label;
    }
    let tld_ok = (2..=24).contains(&last.len()) && last.iter().all(u8::is_ascii_alphabetic);
    (labels >= 2 && tld_ok).then_some(a..e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_the_characters_of_each_part() {
        for b in 0u8..=255 {
            let local = b.is_ascii_alphanumeric() || b"._%+-'".contains(&b);
            let domain = b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
            assert_eq!((local_char(b), domain_char(b)), (local, domain), "{b}");
        }
    }

    fn find(s: &str) -> Option<&str> {
        let at = s.find('@')?;
        around(s.as_bytes(), at).map(|r| &s[r])
    }

    #[test]
    fn addresses_in_text() {
        assert_eq!(
            find("mail jane.doe+x@mail.example.co.uk."),
            Some("jane.doe+x@mail.example.co.uk")
        );
        assert_eq!(find("<o'brien@corp.ie>"), Some("o'brien@corp.ie"));
        assert_eq!(find("'bob@x.io'"), Some("bob@x.io"));
        assert_eq!(find("a@b"), None);
        assert_eq!(find("user@localhost"), None);
        assert_eq!(find("@twitter handle"), None);
        assert_eq!(find("x@1.2.3.4"), None);
        assert_eq!(find("me@-bad.com"), None);
        assert_eq!(find("git@github.com:org/repo"), Some("git@github.com"));
    }
}
