//! Allow-list patterns: regular expressions a whole finding must match to stay in the clear.
//!
//! Every finding is checked against them, and a regular expression has a start-up cost far above
//! the few dozen bytes of a finding. Most allow patterns hold a literal every match contains
//! (`@example\.(com|org|net)$` holds `@example.`), so that literal is searched first (its first
//! byte with `memchr`, then the rest), and the expression runs only on the findings that contain
//! it.

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
            if !memchr::memchr_iter(n[0], bytes).any(|p| bytes[p..].starts_with(n)) {
                return false;
            }
        }
        self.re.is_match(bytes)
    }
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

    #[test]
    fn planted_matches_are_found() {
        let p = AllowPattern::new(PATTERNS[0]).unwrap();
        assert!(p.is_match(b"bob@example.org") && !p.is_match(b"bob@example.org.uk"));
        assert!(!p.is_match(b"bob@corp.example.net"));
    }
}
