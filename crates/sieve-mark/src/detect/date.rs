//! Calendar dates, for dates of birth: `1984-03-12`, `12/03/1984`, `03.12.1984`,
//! `March 12, 1984`, `12 March 1984`, `12th of March 1984`.

use std::ops::Range;

pub fn days_in(month: u32, year: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        _ => 0,
    }
}

/// A plausible birth date: years 1900 to 2099.
pub fn valid(y: u32, m: u32, d: u32) -> bool {
    (1900..=2099).contains(&y) && (1..=12).contains(&m) && d >= 1 && d <= days_in(m, y)
}

fn num(d: &[u8]) -> u32 {
    d.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'))
}

/// Three digit groups joined by one separator (`-`, `/` or `.`, the same twice): year first
/// (`1984-03-12`), or year last with day and month either way round.
pub fn numeric(g: [&[u8]; 3]) -> bool {
    match (g[0].len(), g[1].len(), g[2].len()) {
        (4, 1..=2, 1..=2) => valid(num(g[0]), num(g[1]), num(g[2])),
        (1..=2, 1..=2, 4) => {
            let (a, b, y) = (num(g[0]), num(g[1]), num(g[2]));
            valid(y, b, a) || valid(y, a, b)
        }
        _ => false,
    }
}

/// The month named by the word `w` (full or three-letter, any case), 1-12.
fn month(w: &[u8]) -> Option<u32> {
    const FULL: [&[u8]; 12] = [
        b"january",
        b"february",
        b"march",
        b"april",
        b"may",
        b"june",
        b"july",
        b"august",
        b"september",
        b"october",
        b"november",
        b"december",
    ];
    if w.len() < 3 || w.len() > 9 {
        return None;
    }
    FULL.iter()
        .position(|f| {
            w.eq_ignore_ascii_case(f)
                || w.eq_ignore_ascii_case(&f[..3])
                || (f[..3] == *b"sep" && w.eq_ignore_ascii_case(b"sept"))
        })
        .map(|i| i as u32 + 1)
}

/// A day number with an optional ordinal suffix (`12`, `12th`, `1st`): its value.
fn day(w: &[u8]) -> Option<u32> {
    let digits = w.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=2).contains(&digits) {
        return None;
    }
    let suffix = &w[digits..];
    if !(suffix.is_empty()
        || [&b"st"[..], b"nd", b"rd", b"th"]
            .iter()
            .any(|x| suffix.eq_ignore_ascii_case(x)))
    {
        return None;
    }
    Some(num(&w[..digits]))
}

/// Words (letters or digits) ending before `end`, last first, with their ranges; at most three.
fn words_before(s: &[u8], mut end: usize) -> ([Range<usize>; 3], usize) {
    let mut out = [0..0, 0..0, 0..0];
    let mut n = 0;
    while n < 3 {
        // Skip separators: spaces, one comma, one dot.
        let mut i = end;
        while i > 0 && end - i < 3 && matches!(s[i - 1], b' ' | b',' | b'.') {
            i -= 1;
        }
        if i == end && n > 0 {
            break;
        }
        let e = i;
        while i > 0 && e - i < 10 && s[i - 1].is_ascii_alphanumeric() {
            i -= 1;
        }
        if i == e {
            break;
        }
        out[n] = i..e;
        n += 1;
        end = i;
    }
    (out, n)
}

/// A date written with the month's name whose four-digit year is `year` (a range of `s`): the
/// start of the whole date, if the words before the year make one.
pub fn named_before_year(s: &[u8], year: Range<usize>) -> Option<usize> {
    let y = num(&s[year.clone()]);
    if !(1900..=2099).contains(&y) {
        return None;
    }
    let (w, n) = words_before(s, year.start);
    let w = &w[..n];
    let text = |r: &Range<usize>| &s[r.clone()];
    // "March 12, 1984" / "Mar 12 1984"
    if w.len() >= 2 {
        if let (Some(d), Some(m)) = (day(text(&w[0])), month(text(&w[1]))) {
            if valid(y, m, d) {
                return Some(w[1].start);
            }
        }
    }
    // "12 March 1984" / "12th of March 1984"
    if w.len() >= 2 {
        if let Some(m) = month(text(&w[0])) {
            let d_word = if text(&w[1]).eq_ignore_ascii_case(b"of") {
                w.get(2)
            } else {
                Some(&w[1])
            };
            if let Some(dw) = d_word {
                if let Some(d) = day(text(dw)) {
                    if valid(y, m, d) {
                        return Some(dw.start);
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_and_named_dates() {
        assert!(numeric([b"1984", b"03", b"12"]));
        assert!(numeric([b"31", b"12", b"1999"]) && numeric([b"12", b"31", b"1999"]));
        assert!(!numeric([b"1984", b"13", b"12"]) && !numeric([b"30", b"02", b"2000"]));
        assert!(numeric([b"29", b"2", b"2000"]) && !numeric([b"29", b"2", b"1900"]));
        let s = b"born on March 12, 1984 in";
        assert_eq!(named_before_year(s, 18..22), Some(8));
        let s = b"DOB: 12th of Sept 1984";
        assert_eq!(named_before_year(s, 18..22), Some(5));
        let s = b"in the year 1984";
        assert_eq!(named_before_year(s, 12..16), None);
        let s = b"on February 30 1984";
        assert_eq!(named_before_year(s, 15..19), None);
    }
}
