//! Names after a title (`Mr. John Smith`, `Dr Ada Lovelace`, `Dear Jane Doe`): one to three
//! capitalised words. Names in free text without a title need a language model and are not
//! sought; names in CSV columns, JSON fields and log keys are found by their field.

/// Titles that precede a name, with the space after them.
pub const TITLES: &[&str] = &[
    "Mr. ", "Mrs. ", "Ms. ", "Dr. ", "Prof. ", "Mr ", "Mrs ", "Ms ", "Dr ", "Prof ", "Miss ",
    "Mx. ", "Dear ", "Sir ", "Madam ",
];

/// The titles without their space and dot, as a name's first word is compared with them.
const TITLE_WORDS: [&[u8]; 15] = [
    b"Mr", b"Mrs", b"Ms", b"Dr", b"Prof", b"Mr", b"Mrs", b"Ms", b"Dr", b"Prof", b"Miss", b"Mx",
    b"Dear", b"Sir", b"Madam",
];

/// Each title as the low bytes of a little-endian word and a mask of them (every title is at
/// most eight bytes).
const TITLE_WORDS64: [(u64, u64); 15] = {
    let mut out = [(0u64, 0u64); 15];
    let mut i = 0;
    while i < TITLES.len() {
        let t = TITLES[i].as_bytes();
        assert!(t.len() <= 8);
        let mut k = 0;
        while k < t.len() {
            out[i].0 |= (t[k] as u64) << (8 * k);
            out[i].1 |= 0xff << (8 * k);
            k += 1;
        }
        i += 1;
    }
    out
};

/// The length of the first title in [`TITLES`] that `s` holds at `at`: eight bytes loaded once
/// and compared with each title under its mask.
#[inline]
pub fn title_at(s: &[u8], at: usize) -> Option<usize> {
    let mut b = [0u8; 8];
    let have = s.len().saturating_sub(at).min(8);
    b[..have].copy_from_slice(&s[at..at + have]);
    let x = u64::from_le_bytes(b);
    TITLE_WORDS64
        .iter()
        .zip(TITLES)
        .find(|((v, m), t)| x & m == *v && t.len() <= have)
        .map(|(_, t)| t.len())
}

fn cap_word_end(s: &[u8], i: usize) -> Option<usize> {
    if i >= s.len() || !s[i].is_ascii_uppercase() {
        return None;
    }
    let mut e = i + 1;
    while e < s.len() && e - i < 30 && (s[e].is_ascii_lowercase() || s[e] == b'\'' || s[e] == b'-')
    {
        e += 1;
    }
    // An initial: "J." counts as a word.
    if e == i + 1 {
        return (e < s.len() && s[e] == b'.').then_some(e + 1);
    }
    Some(e)
}

/// The name following a title that ends at `at`, if one does.
pub fn name_after(s: &[u8], title_start: usize, at: usize) -> Option<std::ops::Range<usize>> {
    if title_start > 0 && super::is_word(s[title_start - 1]) {
        return None;
    }
    let mut e = cap_word_end(s, at)?;
    // "Dear Mr. Smith": the title after "Dear" is not the name; the one after it is.
    let word = s[at..e].strip_suffix(b".").unwrap_or(&s[at..e]);
    if TITLE_WORDS.contains(&word) {
        return None;
    }
    for _ in 0..2 {
        if e + 1 < s.len() && s[e] == b' ' {
            if let Some(n) = cap_word_end(s, e + 1) {
                e = n;
                continue;
            }
        }
        break;
    }
    if e < s.len() && super::is_word(s[e]) {
        return None;
    }
    Some(at..e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_words_and_words_are_the_titles() {
        for (t, w) in TITLES.iter().zip(TITLE_WORDS) {
            assert_eq!(t.trim_end().trim_end_matches('.').as_bytes(), w);
        }
        let s = b"Dear Mrs. Mr Ms.Miss Madam Madame Pro Prof. Sir";
        for at in 0..=s.len() {
            let want = TITLES
                .iter()
                .find(|t| s[at..].starts_with(t.as_bytes()))
                .map(|t| t.len());
            assert_eq!(title_at(s, at), want, "at {at}");
        }
    }

    #[test]
    fn names_after_titles() {
        let s = b"Dear Jane Doe, and Mr. J. R. Ewing. MrX Bad";
        assert_eq!(name_after(s, 0, 5), Some(5..13));
        assert_eq!(name_after(s, 19, 23), Some(23..34));
        assert_eq!(name_after(b"Dr  lower", 0, 3), None);
        assert_eq!(name_after(b"Dear Mr. Al", 0, 5), None);
    }
}
