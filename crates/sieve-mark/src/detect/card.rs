//! Payment card numbers: 13 to 19 digits of a known issuer range that pass the Luhn check.

/// The Luhn (mod 10) check over ASCII digits.
pub fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Whether the leading digits belong to a card network (ISO/IEC 7812 issuer ranges of Visa,
/// Mastercard, American Express, Discover, JCB, Diners Club, UnionPay and Maestro), with a
/// length that network issues.
pub fn issuer_ok(d: &[u8]) -> bool {
    let len = d.len();
    let p = |n: usize| -> u32 {
        d[..n]
            .iter()
            .fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'))
    };
    match d[0] {
        b'4' => matches!(len, 13 | 16 | 19),
        b'2' => len == 16 && (2221..=2720).contains(&p(4)),
        b'5' => match p(2) {
            51..=55 => len == 16,
            50 | 56..=59 => (12..=19).contains(&len),
            _ => false,
        },
        b'3' => match p(2) {
            34 | 37 => len == 15,
            36 | 38 | 39 => (14..=19).contains(&len),
            30 => (300..=305).contains(&p(3)) && (14..=19).contains(&len),
            35 => (3528..=3589).contains(&p(4)) && (16..=19).contains(&len),
            _ => false,
        },
        b'6' => (12..=19).contains(&len),
        _ => false,
    }
}

/// A card number, given its digits without separators.
pub fn is_card(digits: &[u8]) -> bool {
    (13..=19).contains(&digits.len()) && issuer_ok(digits) && luhn(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_numbers_of_the_networks_pass_and_typos_fail() {
        for n in [
            "4111111111111111",
            "4012888888881881",
            "5555555555554444",
            "2223003122003222",
            "378282246310005",
            "6011111111111117",
            "3530111333300000",
            "30569309025904",
            "6200000000000005",
        ] {
            assert!(is_card(n.as_bytes()), "{n}");
        }
        for n in [
            "4111111111111112",
            "1234567812345670",
            "411111111111",
            "9111111111111111",
            "41111111111111111111",
        ] {
            assert!(!is_card(n.as_bytes()), "{n}");
        }
    }
}
