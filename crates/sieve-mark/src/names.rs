//! Field names: when a CSV header, a JSON key or a log key names something classified.
//!
//! People write the same field many ways: `email`, `Email Address`, `customer_email`,
//! `emailAddress`, `EMAIL`. A listed name matches a field name when it equals
//! the whole name with case and separators ignored (`dateofbirth` matches `Date of Birth`), or
//! when it equals one of the name's words, split at separators and at lower-to-upper case changes
//! (`email` matches `customer_email` and `emailAddress`). Words are not searched inside words:
//! `name` does not match `hostname`, and `key` does not match `monkey`.

/// A set of listed names, normalised once.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Lowercase letters and digits; few enough that a scan beats hashing.
    list: Vec<Vec<u8>>,
    /// Whether a word of a field name may match, or only the whole name.
    words: bool,
    /// A bit per length of the listed names (below 64), to reject most words at once.
    lengths: u64,
}

/// Longest field name compared.
const MAX_NAME: usize = 128;

impl Names {
    /// Names matched as the whole field name or one of its words.
    pub fn words<S: AsRef<str>>(list: &[S]) -> Names {
        Names::new(list, true)
    }

    /// Names matched only as the whole field name (case and separators ignored).
    pub fn exact<S: AsRef<str>>(list: &[S]) -> Names {
        Names::new(list, false)
    }

    fn new<S: AsRef<str>>(list: &[S], words: bool) -> Names {
        let list: Vec<Vec<u8>> = list
            .iter()
            .map(|s| normalise(s.as_ref()).into_bytes())
            .filter(|w| !w.is_empty() && w.len() < 64)
            .collect();
        let lengths = list.iter().fold(0u64, |m, w| m | 1 << w.len());
        Names {
            list,
            words,
            lengths,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn listed(&self, w: &[u8]) -> bool {
        !w.is_empty()
            && w.len() < 64
            && self.lengths & (1 << w.len()) != 0
            && self.list.iter().any(|x| x.as_slice() == w)
    }

    /// Whether the field called `field` is listed.
    pub fn matches(&self, field: &[u8]) -> bool {
        self.matches_name(&FieldName::new(field))
    }

    /// Whether a field name, split once for several lists, is listed.
    pub fn matches_name(&self, f: &FieldName) -> bool {
        if self.list.is_empty() || f.whole == 0 {
            return false;
        }
        if self.listed(&f.buf[..f.whole]) {
            return true;
        }
        self.words
            && f.words[..f.n_words]
                .iter()
                .any(|&(a, e)| self.listed(&f.buf[a as usize..e as usize]))
    }
}

/// A field name split into its normalised whole and its words, without allocating: it is
/// built for every `key=value` in a log.
pub struct FieldName {
    buf: [u8; MAX_NAME],
    whole: usize,
    words: [(u8, u8); 16],
    n_words: usize,
}

impl FieldName {
    pub fn new(field: &[u8]) -> FieldName {
        let mut f = FieldName {
            buf: [0; MAX_NAME],
            whole: 0,
            words: [(0, 0); 16],
            n_words: 0,
        };
        if field.len() > MAX_NAME {
            return f;
        }
        // Words split at non-alphanumerics and where a lowercase letter or digit is followed
        // by an uppercase one (`cardNumber` -> `card`, `number`); their letters, concatenated,
        // are the whole name.
        let mut start = 0usize;
        let mut prev_lower = false;
        for &b in field {
            let alnum = b.is_ascii_alphanumeric();
            let boundary = !alnum || (b.is_ascii_uppercase() && prev_lower);
            if boundary && f.whole > start {
                f.push_word(start, f.whole);
                start = f.whole;
            }
            if alnum {
                f.buf[f.whole] = b.to_ascii_lowercase();
                f.whole += 1;
                prev_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
            } else {
                prev_lower = false;
            }
        }
        if f.whole > start {
            f.push_word(start, f.whole);
        }
        f
    }

    fn push_word(&mut self, a: usize, e: usize) {
        if self.n_words < self.words.len() {
            self.words[self.n_words] = (a as u8, e as u8);
            self.n_words += 1;
        }
    }
}

/// Lowercase ASCII letters and digits only.
pub fn normalise(s: &str) -> String {
    s.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| b.to_ascii_lowercase() as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_names_and_words_match_but_not_inside_words() {
        let n = Names::words(&["email", "name", "dateofbirth", "key"]);
        for yes in [
            &b"email"[..],
            b"EMAIL",
            b"customer_email",
            b"emailAddress",
            b"Email Address",
            b"first_name",
            b"lastName",
            b"Date of Birth",
            b"date-of-birth",
            b"api_key",
            b"accessKeyId",
        ] {
            assert!(n.matches(yes), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b"hostname"[..],
            b"monkey",
            b"e",
            b"",
            b"emails_sent_total2x",
        ] {
            assert!(!n.matches(no), "{}", String::from_utf8_lossy(no));
        }
        let e = Names::exact(&["client_ip"]);
        assert!(e.matches(b"client_ip") && e.matches(b"clientIp") && !e.matches(b"client_ip_v6"));
    }
}
