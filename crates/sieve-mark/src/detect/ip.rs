//! IP addresses: dotted-quad IPv4 (each part 0-255, no leading zeros) and IPv6 in any of its
//! written forms, by the grammar of the standard library's parser ([`is_ipv6`], which a
//! property test holds to `std::net::Ipv6Addr::from_str`; parsing a `str` into an address
//! costs several times more than reading its bytes once).

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
    // The address's bytes, counting its colons, hexadecimal digits (those before `at` are
    // all such) and dots as they are walked.
    let (mut colons, mut hex, mut dots) = (0, at - a, 0);
    let mut e = at;
    while e < s.len() && e - a < 45 {
        match s[e] {
            b':' => colons += 1,
            b'.' => dots += 1,
            b if b.is_ascii_hexdigit() => hex += 1,
            _ => break,
        }
        e += 1;
    }
    // A sentence may end right after an address.
    while e > a && s[e - 1] == b'.' {
        e -= 1;
        dots -= 1;
    }
    if e < s.len() && (s[e].is_ascii_alphanumeric() || s[e] == b'_') {
        return None;
    }
    if colons < 2 || hex < 2 {
        return None;
    }
    groups_form_ipv6(&s[a..e], dots > 0).then_some(a..e)
}

/// Whether `t` is an IPv6 address as `std::net::Ipv6Addr::from_str` reads one: groups of one to
/// four hexadecimal digits joined by `:`, eight of them, or fewer with one `::` standing for at
/// least one group of zeros; the last two groups may be written as an IPv4 address.
pub fn is_ipv6(t: &[u8]) -> bool {
    groups_form_ipv6(t, t.contains(&b'.'))
}

/// [`is_ipv6`], told whether `t` holds a `.` (without one, no group is read as an IPv4
/// address: none could be).
fn groups_form_ipv6(t: &[u8], v4: bool) -> bool {
    let (head, head_v4, mut p) = groups(t, 0, 8, v4);
    if head == 8 {
        return p == t.len();
    }
    if head_v4 || !t[p..].starts_with(b"::") {
        return false;
    }
    p += 2;
    // The `::` stands for one group at least.
    let (_, _, q) = groups(t, p, 8 - (head + 1), v4);
    p = q;
    p == t.len()
}

/// Up to `limit` groups of `t` from `p` on (each after a `:` but the first), the last two of
/// which may be an IPv4 address: how many (an address counting two), whether it ended with an
/// address, and where the groups end. A `:` not followed by a group is left unread. `v4`:
/// whether an address is looked for at all.
fn groups(t: &[u8], mut p: usize, limit: usize, v4: bool) -> (usize, bool, usize) {
    for i in 0..limit {
        let sep = usize::from(i > 0);
        if i > 0 && t.get(p) != Some(&b':') {
            return (i, false, p);
        }
        if v4 && i < limit.saturating_sub(1) {
            if let Some(e) = ipv4_at(t, p + sep) {
                return (i + 2, true, e);
            }
        }
        let start = p + sep;
        let mut e = start;
        while e < t.len() && e - start < 4 && t[e].is_ascii_hexdigit() {
            e += 1;
        }
        if e == start {
            return (i, false, p);
        }
        p = e;
    }
    (limit, false, p)
}

/// The end of a dotted-quad IPv4 address at `p` (as `std::net::Ipv4Addr` reads one: four
/// decimal parts up to 255, no leading zeros), if one is there.
fn ipv4_at(t: &[u8], mut p: usize) -> Option<usize> {
    for i in 0..4 {
        if i > 0 {
            if t.get(p) != Some(&b'.') {
                return None;
            }
            p += 1;
        }
        let start = p;
        let mut v = 0u32;
        while p < t.len() && p - start < 3 && t[p].is_ascii_digit() {
            v = v * 10 + u32::from(t[p] - b'0');
            p += 1;
        }
        let n = p - start;
        if n == 0 || v > 255 || (n > 1 && t[start] == b'0') {
            return None;
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Text made of the pieces IPv6 addresses and their look-alikes are made of.
    fn v6_text() -> impl Strategy<Value = Vec<u8>> {
        crate::pieces::concat_of(
            vec![
                &b":"[..],
                b"::",
                b":::",
                b"0",
                b"1",
                b"f",
                b"FF",
                b"db8",
                b"2001",
                b"fe80",
                b"12345",
                b"ffff",
                b"00000",
                b".",
                b"192",
                b"0.2",
                b"255",
                b"256",
                b"01",
                b"10",
                b"1.2.3.4",
                b"g",
                b"abcd",
            ],
            14,
        )
    }

    /// [`ipv6_at`] as it was first written: the bytes walked, then counted, then parsed.
    fn ipv6_at_by_definition(s: &[u8], at: usize) -> Option<Range<usize>> {
        let v6_char = |b: u8| b.is_ascii_hexdigit() || b == b':' || b == b'.';
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
        while e > a && s[e - 1] == b'.' {
            e -= 1;
        }
        if e < s.len() && (s[e].is_ascii_alphanumeric() || s[e] == b'_') {
            return None;
        }
        let text = &s[a..e];
        let colons = text.iter().filter(|&&b| b == b':').count();
        let hex = text.iter().filter(|b| b.is_ascii_hexdigit()).count();
        if colons < 2 || hex < 2 {
            return None;
        }
        let std = std::str::from_utf8(text)
            .ok()
            .is_some_and(|x| x.parse::<std::net::Ipv6Addr>().is_ok());
        std.then_some(a..e)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        /// At every colon of text made of addresses and look-alikes, with words, dots and
        /// spaces around them, the address found is the one the first version found.
        #[test]
        fn addresses_at_every_colon_as_first_written(
            parts in prop::collection::vec(
                prop_oneof![
                    v6_text(),
                    prop::sample::select(vec![
                        &b" "[..], b".", b"..", b"x", b"_", b"[", b"]", b"fe80::1", b"::ffff:1.2.3.4",
                        b"2001:db8::8a2e:370:7334.", b"abcde:",
                    ]).prop_map(<[u8]>::to_vec),
                ],
                1..5,
            ),
        ) {
            let s = parts.concat();
            for at in (0..s.len()).filter(|&i| s[i] == b':') {
                prop_assert_eq!(ipv6_at(&s, at), ipv6_at_by_definition(&s, at), "at {}", at);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// The grammar answers as the standard library's parser, on any such text.
        #[test]
        fn the_grammar_is_the_standard_parsers(t in v6_text()) {
            let std = std::str::from_utf8(&t)
                .ok()
                .is_some_and(|x| x.parse::<std::net::Ipv6Addr>().is_ok());
            prop_assert_eq!(is_ipv6(&t), std, "{}", String::from_utf8_lossy(&t));
        }
    }

    #[test]
    fn every_form_of_the_standard_parser() {
        for t in [
            "::",
            "::1",
            "1::",
            "1:2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7::",
            "::2:3:4:5:6:7:8",
            "1:2:3:4:5:6:1.2.3.4",
            "::1.2.3.4",
            "::ffff:192.0.2.128",
            "1::1.2.3.4",
            "1:2:3:4:5:6:7:8:9",
            "1:2:3:4:5:6:7:1.2.3.4",
            "1::2::3",
            ":1::",
            "1:::2",
            "12345::",
            "::01.2.3.4",
            "::1.2.3",
            "1:2:3:4:5:6:7",
            "fe80::1ff:fe23:4567:890a",
            "",
        ] {
            let std = t.parse::<std::net::Ipv6Addr>().is_ok();
            assert_eq!(is_ipv6(t.as_bytes()), std, "{t}");
        }
    }

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
