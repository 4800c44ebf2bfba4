//! Cloud and API keys with a known prefix: AWS access key ids, GitHub, GitLab, Slack, Stripe,
//! Google, npm, SendGrid, OpenAI, Anthropic, Hugging Face, Shopify and DigitalOcean tokens.
//!
//! Each rule names the characters and the length of what follows the prefix; a finding must be
//! exactly that (a longer run of the same characters is something else).

use std::ops::Range;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chars {
    /// A-Z and 0-9.
    Upper,
    /// Letters and digits.
    Alnum,
    /// Letters, digits, `_` and `-`.
    Url,
    /// Letters, digits, `_`, `-` and `.`.
    UrlDot,
    /// Lowercase hexadecimal.
    Hex,
}

impl Chars {
    /// Whether `b` is one of these characters: a bit of a table per kind, as a key's body is
    /// walked byte by byte.
    #[inline]
    pub fn has(self, b: u8) -> bool {
        CHARS[usize::from(b)] & 1 << self as u8 != 0
    }

    /// [`Chars::has`] by its definition, from which the table is built.
    const fn defines(self, b: u8) -> bool {
        match self {
            Chars::Upper => b.is_ascii_uppercase() || b.is_ascii_digit(),
            Chars::Alnum => b.is_ascii_alphanumeric(),
            Chars::Url => b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
            Chars::UrlDot => b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.',
            Chars::Hex => b.is_ascii_digit() || matches!(b, b'a'..=b'f'),
        }
    }
}

/// Bit `k` of entry `b`: whether `b` is one of the characters of the `k`-th [`Chars`].
static CHARS: [u8; 256] = {
    const ALL: [Chars; 5] = [
        Chars::Upper,
        Chars::Alnum,
        Chars::Url,
        Chars::UrlDot,
        Chars::Hex,
    ];
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let mut k = 0;
        while k < ALL.len() {
            if ALL[k].defines(i as u8) {
                t[i] |= 1 << ALL[k] as u8;
            }
            k += 1;
        }
        i += 1;
    }
    t
};

#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub prefix: &'static str,
    pub chars: Chars,
    pub min: usize,
    pub max: usize,
}

const fn r(prefix: &'static str, chars: Chars, min: usize, max: usize) -> Rule {
    Rule {
        prefix,
        chars,
        min,
        max,
    }
}

/// The known prefixes (from the providers' documentation of their token formats).
pub const RULES: &[Rule] = &[
    r("AKIA", Chars::Upper, 16, 16),
    r("ASIA", Chars::Upper, 16, 16),
    r("ghp_", Chars::Alnum, 36, 36),
    r("gho_", Chars::Alnum, 36, 36),
    r("ghu_", Chars::Alnum, 36, 36),
    r("ghs_", Chars::Alnum, 36, 36),
    r("ghr_", Chars::Alnum, 36, 36),
    r("github_pat_", Chars::Url, 82, 82),
    r("glpat-", Chars::Url, 20, 20),
    r("xoxb-", Chars::Url, 10, 120),
    r("xoxp-", Chars::Url, 10, 120),
    r("xoxa-", Chars::Url, 10, 120),
    r("xoxr-", Chars::Url, 10, 120),
    r("xoxs-", Chars::Url, 10, 120),
    r("xapp-", Chars::Url, 10, 160),
    r("sk_live_", Chars::Alnum, 24, 99),
    r("sk_test_", Chars::Alnum, 24, 99),
    r("rk_live_", Chars::Alnum, 24, 99),
    r("AIza", Chars::Url, 35, 35),
    r("npm_", Chars::Alnum, 36, 36),
    r("SG.", Chars::UrlDot, 66, 66),
    r("sk-proj-", Chars::Url, 40, 200),
    r("sk-ant-", Chars::Url, 40, 200),
    r("sk-", Chars::Alnum, 48, 48),
    r("hf_", Chars::Alnum, 34, 34),
    r("shpat_", Chars::Hex, 32, 32),
    r("shpss_", Chars::Hex, 32, 32),
    r("dop_v1_", Chars::Hex, 64, 64),
];

/// The key whose prefix starts at `at`, if what follows fits the rule.
pub fn key_at(s: &[u8], at: usize, rule: &Rule) -> Option<Range<usize>> {
    if at > 0 && (super::is_word(s[at - 1]) || s[at - 1] == b'-') {
        return None;
    }
    let body = at + rule.prefix.len();
    let mut e = body;
    while e < s.len() && e - body <= rule.max && rule.chars.has(s[e]) {
        e += 1;
    }
    let n = e - body;
    if n < rule.min || n > rule.max {
        return None;
    }
    // A key ends where its characters do; a word character after it means something else.
    if e < s.len() && super::is_word(s[e]) {
        return None;
    }
    // A prefix followed by one repeated character is a placeholder, not a key.
    let first = s[body];
    if s[body..e].iter().all(|&b| b == first) {
        return None;
    }
    Some(at..e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(s: &str, prefix: &str) -> Option<usize> {
        let rule = RULES.iter().find(|r| r.prefix == prefix).unwrap();
        key_at(s.as_bytes(), s.find(prefix)?, rule).map(|r| r.len())
    }

    #[test]
    fn the_table_holds_each_kind_of_characters() {
        for c in [
            Chars::Upper,
            Chars::Alnum,
            Chars::Url,
            Chars::UrlDot,
            Chars::Hex,
        ] {
            for b in 0u8..=255 {
                assert_eq!(c.has(b), c.defines(b), "{c:?} {b}");
            }
        }
        assert!(Chars::Hex.has(b'f') && !Chars::Hex.has(b'F') && Chars::UrlDot.has(b'.'));
    }

    #[test]
    fn exact_formats_only() {
        assert_eq!(find("id=AKIAIOSFODNN7EXAMPLE;", "AKIA"), Some(20));
        assert_eq!(find("AKIAIOSFODNN7EXAMPLEX", "AKIA"), None);
        assert_eq!(find("xAKIAIOSFODNN7EXAMPLE", "AKIA"), None);
        assert_eq!(find("AKIAXXXXXXXXXXXXXXXX", "AKIA"), None);
        assert_eq!(
            find("token ghp_16C7e42F292c6912E7710c838347Ae178B4a end", "ghp_"),
            Some(40)
        );
        assert_eq!(find("xoxb-1234-5678-abcdefgh", "xoxb-"), Some(23));
    }
}
