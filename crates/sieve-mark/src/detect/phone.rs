//! Telephone numbers, validated against the numbering plans of the `phonenumber` crate (a port
//! of Google's libphonenumber): a written number counts only if it is a valid number of its
//! country, so that dates, amounts and identifiers with the same shape do not.

use phonenumber::country::Id;

/// Whether `text` (digits with the separators people write) is a valid number, read with
/// `region` when it has no `+` prefix.
pub fn valid(text: &str, region: Id) -> bool {
    match phonenumber::parse(Some(region), text) {
        Ok(n) => phonenumber::is_valid(&n),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_numbers_and_look_alikes() {
        assert!(valid("(212) 555-0134", Id::US) || valid("(212) 456-7890", Id::US));
        assert!(valid("+44 20 7946 0958", Id::US));
        assert!(valid("+49 30 901820", Id::US));
        assert!(!valid("123-456-7890", Id::US));
        assert!(!valid("+1 000 000 0000", Id::US));
    }
}
