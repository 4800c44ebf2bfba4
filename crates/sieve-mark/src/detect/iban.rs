//! International Bank Account Numbers: the country's length and the ISO 13616 mod-97 check.

/// IBAN length by country (SWIFT IBAN registry).
const LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NL", 18),
    (b"NO", 15),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"SA", 24),
    (b"SC", 31),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
];

/// The IBAN length of a country, if it issues IBANs.
pub fn length_of(country: &[u8]) -> Option<usize> {
    LENGTHS
        .iter()
        .find(|(c, _)| c[..] == *country)
        .map(|&(_, n)| n)
}

/// The mod-97 check over an IBAN without spaces: letters count as 10..35, the first four
/// characters move to the end, and the number must leave 1.
pub fn mod97(iban: &[u8]) -> bool {
    if iban.len() < 5 {
        return false;
    }
    let mut rem = 0u32;
    for &c in iban[4..].iter().chain(&iban[..4]) {
        match c {
            b'0'..=b'9' => rem = (rem * 10 + u32::from(c - b'0')) % 97,
            b'A'..=b'Z' => rem = (rem * 100 + u32::from(c - b'A' + 10)) % 97,
            _ => return false,
        }
    }
    rem == 1
}

/// Whether `compact` (no spaces) is a valid IBAN.
pub fn is_iban(compact: &[u8]) -> bool {
    compact.len() >= 15
        && length_of(&compact[..2]) == Some(compact.len())
        && compact[2].is_ascii_digit()
        && compact[3].is_ascii_digit()
        && mod97(compact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_examples_pass_and_changed_ones_fail() {
        for i in [
            "DE89370400440532013000",
            "GB29NWBK60161331926819",
            "FR1420041010050500013M02606",
            "NL91ABNA0417164300",
            "NO9386011117947",
            "CH9300762011623852957",
        ] {
            assert!(is_iban(i.as_bytes()), "{i}");
        }
        for i in [
            "DE89370400440532013001",
            "GB29NWBK6016133192681",
            "XX89370400440532013000",
            "de89370400440532013000",
        ] {
            assert!(!is_iban(i.as_bytes()), "{i}");
        }
    }
}
