//! IP addresses: dotted-quad IPv4 (each part 0-255, no leading zeros) and IPv6 in any of its
//! written forms, checked by the standard library's parser.

use std::ops::Range;

/// Whether the digit groups (ASCII, each 1-3 digits) form an IPv4 address.
pub fn is_ipv4(parts: [&[u8]; 4]) -> bool {
    parts.iter().all(|p| {
        !p.is_empty()
            && p.len() <= 3
            && (p.len() == 1 || p[0] != b'0')
            && p.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0')) <= 255
    })
}

fn v6_char(b: u8) -> bool {
    b.is_ascii_hexdigit() || b == b':' || b == b'.'
}

/// Whether the `:` at `at` is the first colon of its run of IPv6 characters (so each address is
/// looked at once, whichever chunk holds it).
pub fn is_first_colon(s: &[u8], at: usize) -> bool {
    // An address's colon has a hex digit or another colon on each side (`::` at an end).
    let hexish = |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii_hexdigit() || b == b':');
    if !hexish(s.get(at + 1)) || !(at == 0 || hexish(s.get(at - 1)) || s.get(at + 1) == Some(&b':'))
    {
        return false;
    }
    let mut i = at;
    while i > 0 && at - i < 5 && s[i - 1].is_ascii_hexdigit() {
        i -= 1;
    }
    !(i > 0 && s[i - 1] == b':')
}

/// The IPv6 address whose first colon is at `at`, if there is one.
pub fn ipv6_at(s: &[u8], at: usize) -> Option<Range<usize>> {
    let mut a = at;
    while a > 0 && at - a < 4 && s[a - 1].is_ascii_hexdigit() {
        a -= 1;
    }
    if a > 0 && (s[a - 1].is_ascii_alphanumeric() || s[a - 1] == b'.' || s[a - 1] == b'_') {
        return None;
    }
    let mut e = at;
    while e < s.len() && e - a < 45 && v6_char(s[e]) {
        e += 1;
    }
    // A sentence may end right after an address.
    while e > a && s[e - 1] == b'.' {
        e -= 1;
    }
    if e < s.len() && (s[e].is_ascii_alphanumeric() || s[e] == b'_') {
        return None;
    }
    let text = std::str::from_utf8(&s[a..e]).ok()?;
    let colons = text.bytes().filter(|&b| b == b':').count();
    let hex = text.bytes().filter(u8::is_ascii_hexdigit).count();
    if colons < 2 || hex < 2 {
        return None;
    }
    text.parse::<std::net::Ipv6Addr>().ok().map(|_| a..e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> Option<&str> {
        let at = s.find(':')?;
        ipv6_at(s.as_bytes(), at).map(|r| &s[r])
    }

    #[test]
    fn forms_of_ipv6_and_look_alikes() {
        assert_eq!(
            v6("from 2001:db8::8a2e:370:7334."),
            Some("2001:db8::8a2e:370:7334")
        );
        assert_eq!(
            v6("fe80::1ff:fe23:4567:890a"),
            Some("fe80::1ff:fe23:4567:890a")
        );
        assert_eq!(v6("::ffff:192.0.2.128 x"), Some("::ffff:192.0.2.128"));
        assert_eq!(v6("at 12:34:56 UTC"), None);
        assert_eq!(v6("00:1a:2b:3c:4d:5e"), None);
        assert_eq!(v6("std::vector"), None);
        assert_eq!(v6("x2001:db8::1"), None);
        assert!(is_first_colon(b"2001:db8::1", 4) && !is_first_colon(b"2001:db8::1", 8));
        assert!(is_ipv4([b"192", b"168", b"0", b"1"]));
        assert!(!is_ipv4([b"256", b"1", b"1", b"1"]) && !is_ipv4([b"01", b"1", b"1", b"1"]));
    }
}
