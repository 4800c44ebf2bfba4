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

/// [`LENGTHS`] by country code: entry `26 * (a - b'A') + (b - b'A')` for the code `ab` (zero
/// where the code issues no IBANs), so that a candidate's country is one lookup rather than a
/// search of the list.
static BY_CODE: [u8; 26 * 26] = {
    let mut t = [0u8; 26 * 26];
    let mut i = 0;
    while i < LENGTHS.len() {
        let (c, n) = LENGTHS[i];
        assert!(c[0].is_ascii_uppercase() && c[1].is_ascii_uppercase() && n > 0 && n < 256);
        t[26 * (c[0] - b'A') as usize + (c[1] - b'A') as usize] = n as u8;
        i += 1;
    }
    t
};

/// The IBAN length of a country, if it issues IBANs.
#[inline]
pub fn length_of(country: &[u8]) -> Option<usize> {
    let &[a, b] = country else {
        return None;
    };
    if !(a.is_ascii_uppercase() && b.is_ascii_uppercase()) {
        return None;
    }
    let n = BY_CODE[26 * usize::from(a - b'A') + usize::from(b - b'A')];
    (n != 0).then_some(usize::from(n))
}

/// The mod-97 check over an IBAN without spaces: letters count as 10..35, the first four
/// characters move to the end, and the number must leave 1.
///
/// The remainder is taken only when the running value could soon overflow (it stays below
/// 2^56, and one character multiplies it by at most 100 and adds at most 35), not after every
/// character: a chain of divisions, one per character, cost more than the rest of the check.
pub fn mod97(iban: &[u8]) -> bool {
    iban.len() >= 5 && remainder(iban) == Some(1)
}

/// The remainder by 97 of the IBAN's number (see [`mod97`]), if every character is a digit or
/// a capital.
#[inline]
fn remainder(iban: &[u8]) -> Option<u64> {
    const LIMIT: u64 = 1 << 56;
    let mut rem = 0u64;
    let split = iban.len().min(4);
    for &c in iban[split..].iter().chain(&iban[..split]) {
        rem = match c {
            b'0'..=b'9' => rem * 10 + u64::from(c - b'0'),
            b'A'..=b'Z' => rem * 100 + u64::from(c - b'A' + 10),
            _ => return None,
        };
        if rem >= LIMIT {
            rem %= 97;
        }
    }
    Some(rem % 97)
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
    use proptest::prelude::*;

    /// The length by a search of the list, as the table is built from it.
    fn length_by_search(country: &[u8]) -> Option<usize> {
        LENGTHS
            .iter()
            .find(|(c, _)| c[..] == *country)
            .map(|&(_, n)| n)
    }

    /// The remainder taken after every character, as the check was first written.
    fn remainder_by_definition(iban: &[u8]) -> Option<u64> {
        let split = iban.len().min(4);
        let mut rem = 0u32;
        for &c in iban[split..].iter().chain(&iban[..split]) {
            match c {
                b'0'..=b'9' => rem = (rem * 10 + u32::from(c - b'0')) % 97,
                b'A'..=b'Z' => rem = (rem * 100 + u32::from(c - b'A' + 10)) % 97,
                _ => return None,
            }
        }
        Some(u64::from(rem))
    }

    #[test]
    fn table_holds_every_country_of_the_list() {
        for a in 0u8..=255 {
            for b in 0u8..=255 {
                assert_eq!(length_of(&[a, b]), length_by_search(&[a, b]), "{a} {b}");
            }
        }
        assert_eq!(length_of(b"D"), None);
        assert_eq!(length_of(b"DEU"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        /// The deferred remainder gives the answer of the one taken at every step, on IBANs
        /// and on near misses of any length (up to far more characters than an IBAN has).
        #[test]
        fn deferred_remainder_is_the_remainder(
            v in prop::collection::vec(
                prop_oneof![
                    20 => prop::sample::select(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_vec()),
                    5 => Just(b'9'),
                    5 => Just(b'Z'),
                    1 => any::<u8>(),
                ],
                0..120,
            ),
        ) {
            prop_assert_eq!(remainder(&v), remainder_by_definition(&v));
            let by_definition = v.len() >= 5 && remainder_by_definition(&v) == Some(1);
            prop_assert_eq!(mod97(&v), by_definition);
        }
    }

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
