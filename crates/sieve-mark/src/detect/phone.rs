//! Telephone numbers, validated against the numbering plans of the `phonenumber` crate (a port
//! of Google's libphonenumber): a written number counts only if it is a valid number of its
//! country, so that dates, amounts and identifiers with the same shape do not.

use phonenumber::country::Id;

/// Whether `text` (digits with the separators people write) is a valid number, read with
/// `region` when it has no `+` prefix.
///
/// North American numbers, by far the most common here, are checked by the plan's own rules
/// ([`nanp`]) without the crate: its parser costs microseconds per call, which a log full of
/// phone-shaped numbers would pay on every line.
pub fn valid(text: &str, region: Id) -> bool {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_digit).collect();
    let plus = text.trim_start().starts_with('+');
    let nanp_region = matches!(region, Id::US | Id::CA);
    match (plus, digits.len()) {
        (false, 10) if nanp_region => return nanp(&digits),
        (false, 11) | (true, 11) if digits[0] == b'1' && (plus || nanp_region) => {
            return nanp(&digits[1..])
        }
        (true, n) => {
            if let Some(ok) = by_length(&digits, n) {
                return ok;
            }
        }
        _ => {}
    }
    match phonenumber::parse(Some(region), text) {
        Ok(n) => phonenumber::is_valid(&n),
        Err(_) => false,
    }
}

/// National number lengths of the most common country codes (ITU-T E.164 assignments and the
/// national plans as libphonenumber's metadata states them), so that `+44 20 7946 0958` is
/// judged without the parser; other codes go to the crate. `None`: not in the table.
fn by_length(d: &[u8], n: usize) -> Option<bool> {
    const PLANS: &[(&[u8], usize, usize)] = &[
        (b"44", 9, 10),
        (b"49", 6, 13),
        (b"33", 9, 9),
        (b"34", 9, 9),
        (b"39", 6, 11),
        (b"31", 9, 9),
        (b"41", 9, 9),
        (b"43", 4, 13),
        (b"32", 8, 9),
        (b"46", 7, 13),
        (b"47", 8, 8),
        (b"45", 8, 8),
        (b"61", 9, 9),
        (b"81", 9, 10),
        (b"91", 10, 10),
        (b"86", 10, 11),
        (b"55", 10, 11),
        (b"52", 10, 10),
        (b"353", 7, 9),
        (b"48", 9, 9),
    ];
    let (cc, lo, hi) = PLANS.iter().find(|(cc, _, _)| d.starts_with(cc))?;
    let national = &d[cc.len()..];
    // A national number never starts with the trunk prefix 0 once the country code is written.
    Some(national.first() != Some(&b'0') && (*lo..=*hi).contains(&(n - cc.len())))
}

/// The North American Numbering Plan's rules for a 10-digit number: area code and exchange
/// both `[2-9]XX` and not `N11` (service codes), the area code's middle digit not 9 (reserved
/// for expansion), and not 555-01XX (reserved for fiction).
pub fn nanp(d: &[u8]) -> bool {
    if d.len() != 10 {
        return false;
    }
    let n11 = |x: &[u8]| x[1] == b'1' && x[2] == b'1';
    let (area, exch, line) = (&d[..3], &d[3..6], &d[6..]);
    area[0] >= b'2'
        && area[1] != b'9'
        && !n11(area)
        && exch[0] >= b'2'
        && !n11(exch)
        && !(exch == b"555" && line[0] == b'0' && line[1] == b'1')
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
        assert!(!valid("212-555-0134", Id::US) && !valid("911-456-7890", Id::US));
        assert!(!valid("292-456-7890", Id::US) && valid("1-415-456-7890", Id::US));
        // The plan's rules agree with the crate's metadata on numbers of valid areas.
        for n in [
            "(212) 456-7890",
            "415.234.5678",
            "+1 617 890 1234",
            "303-299-0000",
        ] {
            let p = phonenumber::parse(Some(Id::US), n).unwrap();
            assert_eq!(valid(n, Id::US), phonenumber::is_valid(&p), "{n}");
        }
    }
}
