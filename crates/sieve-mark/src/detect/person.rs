//! Names after a title (`Mr. John Smith`, `Dr Ada Lovelace`, `Dear Jane Doe`): one to three
//! capitalised words. Names in free text without a title need a language model and are not
//! sought; names in CSV columns, JSON fields and log keys are found by their field.

/// Titles that precede a name, with the space after them.
pub const TITLES: &[&str] = &[
    "Mr. ", "Mrs. ", "Ms. ", "Dr. ", "Prof. ", "Mr ", "Mrs ", "Ms ", "Dr ", "Prof ", "Miss ",
    "Mx. ", "Dear ", "Sir ", "Madam ",
];

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
    if TITLES
        .iter()
        .any(|t| t.trim_end().trim_end_matches('.').as_bytes() == word)
    {
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
    fn names_after_titles() {
        let s = b"Dear Jane Doe, and Mr. J. R. Ewing. MrX Bad";
        assert_eq!(name_after(s, 0, 5), Some(5..13));
        assert_eq!(name_after(s, 19, 23), Some(23..34));
        assert_eq!(name_after(b"Dr  lower", 0, 3), None);
        assert_eq!(name_after(b"Dear Mr. Al", 0, 5), None);
    }
}
