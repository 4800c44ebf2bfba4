//! Allow-list patterns: regular expressions a whole finding must match to stay in the clear.
//!
//! Every finding is checked against them, and a regular expression has a start-up cost far above
//! the few dozen bytes of a finding. Most allow patterns hold a literal every match contains
//! (`@example\.(com|org|net)$` holds `@example.`), so that literal is searched first (its first
//! byte with `memchr`, then the rest), and the expression runs only on the findings that contain
//! it.
//!
//! [`AllowList`] is what the scan asks: one detector's values and the policy's patterns, with
//! the lengths of the values as a bit mask, so that a finding no value is as long as (nearly
//! every one) is turned away without a comparison, and a detector with nothing to allow costs
//! one test.

use regex::bytes::Regex;
use regex_syntax::hir::{Hir, HirKind};

/// One compiled allow pattern.
#[derive(Debug, Clone)]
pub struct AllowPattern {
    re: Regex,
    /// A literal every match contains, if the pattern has one.
    needle: Option<Vec<u8>>,
}

impl AllowPattern {
    pub fn new(pattern: &str) -> Result<AllowPattern, regex::Error> {
        let re = Regex::new(pattern)?;
        let needle = regex_syntax::parse(pattern)
            .ok()
            .and_then(|hir| required_literal(&hir))
            .filter(|l| !l.is_empty());
        Ok(AllowPattern { re, needle })
    }

    /// Whether the pattern matches somewhere in `bytes`.
    #[inline]
    pub fn is_match(&self, bytes: &[u8]) -> bool {
        if let Some(n) = &self.needle {
            if !contains(bytes, n) {
                return false;
            }
        }
        self.re.is_match(bytes)
    }
}

/// Whether `needle` (not empty) occurs in `hay`: its first byte found with `memchr` (in a
/// plain loop over a short `hay`, as most findings are: `memchr`'s set-up costs more than a
/// few dozen compares), then the rest compared.
#[inline]
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    if hay.len() < needle.len() {
        return false;
    }
    if hay.len() <= SHORT {
        // Only where the needle still fits.
        let last = hay.len() - needle.len();
        return (0..=last).any(|p| hay[p] == first && hay[p..].starts_with(needle));
    }
    memchr::memchr_iter(first, hay).any(|p| hay[p..].starts_with(needle))
}

/// Findings up to this long are searched by the plain loop of [`contains`].
const SHORT: usize = 32;

/// The allow-list one detector answers to: the policy's values and its own, and the policy's
/// patterns (see the module documentation).
#[derive(Debug, Clone)]
pub struct AllowList {
    values: Vec<Vec<u8>>,
    /// Bit `n` for a value of `n` bytes; bit 63 for every value of 63 bytes or more.
    lengths: u64,
    patterns: Vec<AllowPattern>,
}

impl AllowList {
    pub fn new<'a>(
        values: impl IntoIterator<Item = &'a [u8]>,
        patterns: &[AllowPattern],
    ) -> AllowList {
        let values: Vec<Vec<u8>> = values.into_iter().map(<[u8]>::to_vec).collect();
        let lengths = values.iter().fold(0, |m, v| m | length_bit(v.len()));
        AllowList {
            values,
            lengths,
            patterns: patterns.to_vec(),
        }
    }

    /// Whether `bytes` equals one of the values or matches one of the patterns.
    #[inline]
    pub fn allows(&self, bytes: &[u8]) -> bool {
        (self.lengths & length_bit(bytes.len()) != 0 && self.values.iter().any(|v| v == bytes))
            || (!self.patterns.is_empty() && self.patterns.iter().any(|p| p.is_match(bytes)))
    }
}

#[inline]
fn length_bit(n: usize) -> u64 {
    1 << n.min(63)
}

/// The longest literal that every match of `hir` contains, if one is evident from its shape: a
/// literal, a group or a repetition of at least once around one, or a sequence holding one.
/// Alternations, classes and optional parts give none (which only means no shortcut).
fn required_literal(hir: &Hir) -> Option<Vec<u8>> {
    match hir.kind() {
        HirKind::Literal(l) => Some(l.0.to_vec()),
        HirKind::Capture(c) => required_literal(&c.sub),
        HirKind::Repetition(r) if r.min >= 1 => required_literal(&r.sub),
        HirKind::Concat(parts) => parts
            .iter()
            .filter_map(required_literal)
            .max_by_key(|l| l.len()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PATTERNS: &[&str] = &[
        r"@example\.(com|org|net)$",
        r"^test-[0-9]+$",
        r"(?i)@EXAMPLE\.com",
        r"(ab)+c",
        r"x?yz",
        r"a|bc",
        r"^\d{3}-00-\d{4}$",
        r"(?:foo){2,}bar",
        r"é+",
    ];

    #[test]
    fn literals_every_match_holds() {
        let lit = |p: &str| required_literal(&regex_syntax::parse(p).unwrap());
        assert_eq!(lit(PATTERNS[0]), Some(b"@example.".to_vec()));
        // Case folds the letters into classes; `@` and `.` stay literals.
        assert_eq!(lit(PATTERNS[2]).map(|l| l.len()), Some(1));
        assert_eq!(lit(PATTERNS[3]), Some(b"ab".to_vec()));
        assert_eq!(lit(PATTERNS[5]), None);
        assert_eq!(lit(PATTERNS[6]), Some(b"-00-".to_vec()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The shortcut never changes the answer of the expression itself.
        #[test]
        fn the_shortcut_answers_as_the_expression(
            hay in prop::collection::vec(
                prop::sample::select(vec![
                    &b"@example."[..], b"@EXAMPLE.", b"com", b"org", b"net", b"uk", b"test-",
                    b"123", b"4", b"-00-", b"ab", b"c", b"a", b"b", b"x", b"y", b"z", b"foo",
                    b"bar", b"\xc3\xa9", b".", b"@", b"\xff",
                ]),
                0..12,
            ).prop_map(|v| v.concat()),
            k in 0usize..PATTERNS.len(),
        ) {
            let p = AllowPattern::new(PATTERNS[k]).unwrap();
            prop_assert_eq!(p.is_match(&hay), Regex::new(PATTERNS[k]).unwrap().is_match(&hay));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The literal search answers as a plain substring test.
        #[test]
        fn the_literal_search_finds_what_a_plain_search_finds(
            hay in prop::collection::vec(prop::sample::select(b"@ex.ampl".to_vec()), 0..90),
            needle in prop::collection::vec(prop::sample::select(b"@ex.ampl".to_vec()), 0..4),
        ) {
            let plain = needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle);
            prop_assert_eq!(contains(&hay, &needle), plain);
        }

        /// An allow-list answers as its definition: equal to a value, or matched by a pattern.
        #[test]
        fn the_allow_list_answers_as_its_definition(
            values in prop::collection::vec(pieces(), 0..4),
            finding in pieces(),
            long in 0usize..80,
            pick in prop::collection::vec(0usize..PATTERNS.len(), 0..3),
            copy in any::<prop::sample::Index>(),
            use_copy in any::<bool>(),
        ) {
            let patterns: Vec<AllowPattern> =
                pick.iter().map(|&k| AllowPattern::new(PATTERNS[k]).unwrap()).collect();
            // Findings and values of 63 bytes or more share a length bit.
            let mut values = values;
            values.push([&b"x".repeat(long)[..], b"@example.com"].concat());
            let finding = match use_copy {
                true => values[copy.index(values.len())].clone(),
                false => finding,
            };
            let list = AllowList::new(values.iter().map(Vec::as_slice), &patterns);
            let definition = values.contains(&finding)
                || pick.iter().any(|&k| Regex::new(PATTERNS[k]).unwrap().is_match(&finding));
            prop_assert_eq!(list.allows(&finding), definition);
        }
    }

    /// Findings made of the pieces the patterns look for.
    fn pieces() -> impl Strategy<Value = Vec<u8>> {
        crate::pieces::concat_of(
            vec![
                &b"@example."[..],
                b"com",
                b"org",
                b"test-",
                b"123",
                b"-00-",
                b"ab",
                b"c",
                b"x",
                b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                b".",
                b"@",
            ],
            8,
        )
    }

    #[test]
    fn planted_matches_are_found() {
        let p = AllowPattern::new(PATTERNS[0]).unwrap();
        assert!(p.is_match(b"bob@example.org") && !p.is_match(b"bob@example.org.uk"));
        assert!(!p.is_match(b"bob@corp.example.net"));
    }
}
