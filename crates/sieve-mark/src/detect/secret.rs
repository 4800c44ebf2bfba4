//! Secrets after keys such as `password`, `token` or `api_key`: a value counts when it looks
//! random (long enough, letters and digits mixed, enough entropy), so that `token=none` or
//! `key=user_settings` stay in the clear while `token=9fQ2xLk0pZ7w` does not.

/// Shannon entropy of the bytes, in bits per byte.
pub fn entropy(v: &[u8]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in v {
        counts[b as usize] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// How many of lowercase, uppercase, digits and other characters occur.
pub fn classes(v: &[u8]) -> usize {
    let mut seen = [false; 4];
    for &b in v {
        let k = match b {
            b'a'..=b'z' => 0,
            b'A'..=b'Z' => 1,
            b'0'..=b'9' => 2,
            _ => 3,
        };
        seen[k] = true;
    }
    seen.iter().filter(|&&s| s).count()
}

/// Values that stand for no secret: placeholders, masks, booleans and empties.
pub fn is_placeholder(v: &[u8]) -> bool {
    const WORDS: [&[u8]; 9] = [
        b"null",
        b"none",
        b"true",
        b"false",
        b"undefined",
        b"<redacted>",
        b"redacted",
        b"[redacted]",
        b"changeme",
    ];
    v.iter()
        .all(|&b| b == b'*' || b == b'x' || b == b'X' || b == b'.' || b == b'#')
        || WORDS.iter().any(|w| v.eq_ignore_ascii_case(w))
        || (v.starts_with(b"${") && v.ends_with(b"}"))
}

/// Whether a value after a non-password key is secret-like: at least `min_len` bytes, letters
/// and digits, no space, no placeholder, and at least `min_entropy` bits per byte.
///
/// A log repeats such values on many lines (session ids, bearer tokens), so the entropy is
/// bounded before it is computed: it is at most `log2` of the number of distinct bytes, and at
/// least the collision entropy `-log2(sum p^2)`, known at the end of one counting pass (the
/// distinct bytes take a second walk, asked only of values below that bound). Only a value whose bounds straddle the threshold (by more than rounding could blur) pays for
/// [`entropy`] itself, so the answer is the one [`entropy`] gives.
pub fn looks_random(v: &[u8], min_len: usize, min_entropy: f64) -> bool {
    if v.len() < min_len || v.is_empty() {
        return false;
    }
    if v.len() > usize::from(u16::MAX) {
        // Counts of one byte could overflow the table below; values are never that long.
        return looks_random_by_definition(v, min_len, min_entropy);
    }
    // One pass counts the bytes and gathers their kinds (a table lookup, no branch), and with
    // them the sum of squared counts (a count going from `c` to `c + 1` adds `2c + 1` to its
    // square, so the sum is `n` plus twice the counts met), so that nothing walks the 256
    // counts afterwards: values are a few dozen bytes.
    let mut counts = [0u16; 256];
    let mut kinds = 0u8;
    let mut met = 0u64;
    for &b in v {
        kinds |= KIND[usize::from(b)];
        let c = counts[usize::from(b)];
        counts[usize::from(b)] = c + 1;
        met += u64::from(c);
    }
    let squares = v.len() as u64 + 2 * met;
    let (digit, alpha, space) = (kinds & DIGIT != 0, kinds & ALPHA != 0, kinds & SPACE != 0);
    if !digit || !alpha || space || is_placeholder(v) {
        return false;
    }
    // Far more than the rounding of either bound or of `entropy`.
    const SLACK: f64 = 1e-9;
    let n = v.len() as f64;
    // Collision entropy `log2(n^2 / sum c^2)`, first: most values that get here pass by it,
    // most of them by a whole power of two, which integers tell without a logarithm: `2^p`
    // with `p` the integer above `min_entropy + SLACK`. (`n^2` is below 2^32, exact in a
    // double; the quotient and `log2` round by far less than `SLACK`.)
    let p = (min_entropy + SLACK) as i64 + 1;
    if (0..=64).contains(&p) && u128::from(v.len() as u64).pow(2) >= u128::from(squares) << p {
        return true;
    }
    if (n * n / squares as f64).log2() >= min_entropy + SLACK {
        return true;
    }
    // The distinct bytes, only now that they are asked for (a second walk, clearing the
    // count of each byte the first time it is met).
    let mut distinct = 0u32;
    for &b in v {
        let c = &mut counts[usize::from(b)];
        distinct += u32::from(*c != 0);
        *c = 0;
    }
    if f64::from(distinct).log2() < min_entropy - SLACK {
        return false;
    }
    entropy(v) >= min_entropy
}

const DIGIT: u8 = 1;
const ALPHA: u8 = 2;
const SPACE: u8 = 4;

/// The kinds of every byte that [`looks_random`] asks about.
static KIND: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = if b.is_ascii_digit() {
            DIGIT
        } else if b.is_ascii_alphabetic() {
            ALPHA
        } else if b == b' ' {
            SPACE
        } else {
            0
        };
        i += 1;
    }
    t
};

/// [`looks_random`] by its definition: the checks in turn and the entropy computed in full.
pub(crate) fn looks_random_by_definition(v: &[u8], min_len: usize, min_entropy: f64) -> bool {
    v.len() >= min_len
        && v.iter().any(u8::is_ascii_digit)
        && v.iter().any(u8::is_ascii_alphabetic)
        && entropy(v) >= min_entropy
        && !is_placeholder(v)
        && !v.contains(&b' ')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The bounded test answers as the definition does, near the threshold too.
        #[test]
        fn bounds_give_the_answer_of_the_definition(
            v in prop::collection::vec(
                prop_oneof![
                    prop::sample::select(b"aA0 x*.${}#_-/+=".to_vec()),
                    0u8..128,
                    any::<u8>(),
                ],
                0..80,
            ),
            min_len in 0usize..12,
            min_entropy in prop_oneof![Just(3.0f64), Just(2.0), Just(0.0), 0.0f64..6.5],
        ) {
            prop_assert_eq!(
                looks_random(&v, min_len, min_entropy),
                looks_random_by_definition(&v, min_len, min_entropy)
            );
        }
    }

    #[test]
    fn values_at_the_threshold() {
        // Eight distinct bytes once each: exactly 3 bits per byte.
        for v in [
            &b"abcd1234"[..],
            b"aabbccdd11223344",
            b"abcdefg1",
            b"abcdefg12",
        ] {
            for t in [2.999_999_999, 3.0, 3.000_000_001] {
                assert_eq!(looks_random(v, 8, t), looks_random_by_definition(v, 8, t));
            }
        }
        assert!(looks_random(b"abcd1234", 8, 3.0) && !looks_random(b"abcd1234", 8, 3.0001));
        let long = [b'a', b'1'].repeat(600);
        assert!(!looks_random(&long, 8, 1.5) && looks_random(&long, 8, 1.0));
    }

    #[test]
    fn random_values_pass_and_words_do_not() {
        assert!(looks_random(b"9fQ2xLk0pZ7w", 8, 3.0));
        assert!(looks_random(
            b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            8,
            3.0
        ));
        assert!(!looks_random(b"user_settings", 8, 3.0));
        assert!(!looks_random(b"********", 8, 3.0));
        assert!(!looks_random(b"abc", 8, 3.0));
        assert!(!looks_random(b"aaaaaaaa1", 8, 3.0));
        assert!(entropy(b"") == 0.0 && (entropy(b"ab") - 1.0).abs() < 1e-9);
    }
}
