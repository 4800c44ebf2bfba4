//! Field names: when a CSV header, a JSON key or a log key names something classified.
//!
//! People write the same field many ways: `email`, `Email Address`, `customer_email`,
//! `emailAddress`, `EMAIL`. A listed name matches a field name when it equals
//! the whole name with case and separators ignored (`dateofbirth` matches `Date of Birth`), or
//! when it equals one of the name's words, split at separators and at lower-to-upper case changes
//! (`email` matches `customer_email` and `emailAddress`). Words are not searched inside words:
//! `name` does not match `hostname`, and `key` does not match `monkey`.

use std::collections::HashSet;

/// A set of listed names, normalised once.
#[derive(Debug, Clone, Default)]
pub struct Names {
    set: HashSet<String>,
    /// Whether a word of a field name may match, or only the whole name.
    words: bool,
}

impl Names {
    /// Names matched as the whole field name or one of its words.
    pub fn words<S: AsRef<str>>(list: &[S]) -> Names {
        Names {
            set: list.iter().map(|s| normalise(s.as_ref())).collect(),
            words: true,
        }
    }

    /// Names matched only as the whole field name (case and separators ignored).
    pub fn exact<S: AsRef<str>>(list: &[S]) -> Names {
        Names {
            set: list.iter().map(|s| normalise(s.as_ref())).collect(),
            words: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Whether the field called `field` is listed.
    pub fn matches(&self, field: &[u8]) -> bool {
        if self.set.is_empty() || field.len() > 256 {
            return false;
        }
        let whole: String = field
            .iter()
            .filter(|b| b.is_ascii_alphanumeric())
            .map(|b| b.to_ascii_lowercase() as char)
            .collect();
        if self.set.contains(&whole) {
            return true;
        }
        self.words && split_words(field).any(|w| self.set.contains(&w))
    }
}

/// Lowercase ASCII letters and digits only.
pub fn normalise(s: &str) -> String {
    s.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| b.to_ascii_lowercase() as char)
        .collect()
}

/// The words of a field name: split at anything not a letter or digit, and where a lowercase
/// letter or digit is followed by an uppercase one (`cardNumber` → `card`, `number`).
fn split_words(field: &[u8]) -> impl Iterator<Item = String> + '_ {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for &b in field {
        if !b.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if b.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
        cur.push(b.to_ascii_lowercase() as char);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.into_iter()
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
