//! Masked previews of classified text, for `sieve mark --explain` and the marking page: enough
//! to recognise what was found (its shape, a few characters at its ends), never the whole of it.

/// Longest preview, in characters.
const MAX_CHARS: usize = 40;

/// A masked, one-line preview of `bytes`: letters and digits become `•` except the first two and
/// the last two of a value of at least 12 of them; punctuation and spaces stay, so the shape of
/// a card number or an address shows; line ends become `⏎`; long values are cut with `…`.
pub fn masked(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let alnum = text.chars().filter(|c| c.is_alphanumeric()).count();
    let keep = if alnum >= 12 { 2 } else { 0 };
    let mut seen = 0usize;
    let mut out = String::new();
    let mut chars = 0usize;
    let mut tail = String::new();
    for c in text.chars() {
        let shown = if c.is_alphanumeric() {
            seen += 1;
            if seen <= keep || seen > alnum - keep {
                c
            } else {
                '•'
            }
        } else if c == '\n' {
            '⏎'
        } else if c.is_control() {
            '·'
        } else {
            c
        };
        if chars < MAX_CHARS {
            out.push(shown);
        } else {
            tail.push(shown);
            if tail.chars().count() > 6 {
                tail.remove(0);
            }
        }
        chars += 1;
    }
    if chars > MAX_CHARS {
        // Keep the end visible too: its last characters are masked the same way.
        let t: String = tail
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        out.push('…');
        out.push_str(&t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_the_whole_secret() {
        assert_eq!(masked(b"4111 1111 1111 1111"), "41•• •••• •••• ••11");
        assert_eq!(masked(b"hunter22"), "••••••••");
        assert_eq!(masked(b"a\nb"), "•⏎•");
        let long = masked(&[b'x'; 100]);
        assert!(
            long.starts_with("xx••") && long.contains('…') && long.ends_with("xx"),
            "{long}"
        );
        assert!(!masked(b"jane.doe@example.org").contains("doe"));
    }
}
