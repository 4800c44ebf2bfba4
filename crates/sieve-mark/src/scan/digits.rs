//! Runs of digit groups (`4111 1111 1111 1111`, `123-45-6789`, `10.0.0.1`, `(212) 456-7890`,
//! `1984-03-12`, `March 12, 1984`) and IBANs: what each run, or each of its tails, may be.
//!
//! A run is digit groups joined by at most two separators (` -./()`). As each group ends, the
//! groups so far are looked at for every kind that may end there; most runs in a log are a
//! time or a count, rejected by their lengths alone, so the costly checks (a numbering plan, a
//! keyword before a date) come after the cheap ones.

use std::ops::Range;

use super::{Memo, Scanner, Window};
use crate::detect::{self, before, card, date, iban, ip, is_word, phone};
use crate::scan::Hit;

/// A digit group: its range in the window.
type Group = (usize, usize);

/// Separators that may join digit groups (at most two in a row).
#[inline]
pub(super) fn is_sep(b: u8) -> bool {
    matches!(b, b' ' | b'-' | b'.' | b'/' | b'(' | b')')
}

/// The end of the digits starting at `i`: eight bytes at a time where eight can be read (the
/// classic SWAR test for bytes in `0x30..=0x39`, exact per lane as no lane can carry into the
/// next), then byte by byte.
#[inline]
fn digits_end(s: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(b) = s.get(i..i + 8) {
        let mut x = [0u8; 8];
        x.copy_from_slice(b);
        let x = u64::from_le_bytes(x);
        // High bit of a lane: its byte lies strictly between 0x2f and 0x3a.
        let low = x & (ONES * 127);
        let digits =
            (ONES * (127 + 0x3a)).wrapping_sub(low) & !x & (low + ONES * (127 - 0x2f)) & HIGH;
        let others = !digits & HIGH;
        if others != 0 {
            return i + (others.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < s.len() && s[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The start of the group that follows the one ending at `e` across one or two separators.
#[inline]
fn next_group(s: &[u8], e: usize) -> Option<usize> {
    let mut k = e;
    while k < s.len() && k - e < 2 && is_sep(s[k]) {
        k += 1;
    }
    (k > e && k < s.len() && s[k].is_ascii_digit()).then_some(k)
}

impl Scanner<'_> {
    /// Everything a run of digit groups starting at `i`, not glued to a word, can be.
    pub(super) fn digit_run(&self, w: &Window<'_>, i: usize, memo: &mut Memo, out: &mut Vec<Hit>) {
        let s = w.bytes;
        // The last five groups, the newest first (no finding spans more), and the sum of their
        // lengths.
        let mut last: [Group; 5] = [(0, 0); 5];
        let mut sum5 = 0;
        let mut n = 0usize;
        let mut g_start = i;
        let mut phone_found = false;
        loop {
            let e = digits_end(s, g_start);
            sum5 = sum5 + (e - g_start) - (last[4].1 - last[4].0);
            last = [(g_start, e), last[0], last[1], last[2], last[3]];
            n += 1;
            if self.worth(s, &last, n, sum5) {
                phone_found |= self.groups_end(w, &last, n, memo, out);
            }
            match next_group(s, e) {
                Some(k) => g_start = k,
                None => break,
            }
        }
        if !phone_found && i > 0 && s[i - 1] == b'+' {
            // The run's first groups, walked again: a `+` before a run is rare.
            let mut first: [Group; 16] = [(0, 0); 16];
            let mut m = 0;
            let mut a = i;
            while m < first.len() {
                let e = digits_end(s, a);
                first[m] = (a, e);
                m += 1;
                match next_group(s, e) {
                    Some(k) => a = k,
                    None => break,
                }
            }
            self.international(w, i - 1, &first[..m], out);
        }
    }

    /// Whether anything may end with the `n`-th group, by the lengths of the last groups and
    /// the byte before the last: most groups end nothing (a time's minutes, a version's parts)
    /// and are passed by without the checks of [`Self::groups_end`], which this mirrors.
    #[inline]
    fn worth(&self, s: &[u8], last: &[Group; 5], n: usize, sum5: usize) -> bool {
        let g = |back: usize| last[back];
        let len = |back: usize| g(back).1 - g(back).0;
        let l0 = len(0);
        if !self.cards.is_empty() && sum5 >= 13 {
            return true;
        }
        if n >= 3 {
            let l = (len(2), len(1), l0);
            if (!self.ssns.is_empty() && l == (3, 2, 4))
                || (!self.dobs.is_empty() && matches!(l, (4, 1..=2, 1..=2) | (1..=2, 1..=2, 4)))
                || (!self.phones.is_empty() && l == (3, 3, 4))
            {
                return true;
            }
        }
        if n >= 4 && !self.ipv4s.is_empty() && (0..4).all(|b| len(b) <= 3) {
            return true;
        }
        let prev_end = (n > 1).then(|| g(1).1);
        !self.dobs.is_empty() && l0 == 4 && named_date_may_end(s, g(0).0, prev_end)
    }

    /// Candidates ending with the `n`-th group (the last five are in `last`, the newest
    /// first); returns whether a phone number was among them.
    fn groups_end(
        &self,
        w: &Window<'_>,
        last: &[Group; 5],
        n: usize,
        memo: &mut Memo,
        out: &mut Vec<Hit>,
    ) -> bool {
        let s = w.bytes;
        let mut phone_found = false;
        let g = |back: usize| last[back];
        let len = |back: usize| g(back).1 - g(back).0;
        let newest = g(0);
        // Most runs are a short number or two (a status code, a time): nothing to look at.
        if n == 1 && len(0) < 4 {
            return false;
        }
        if s.get(newest.1).copied().is_some_and(is_word) {
            return false;
        }
        let sep = |back: usize| {
            // Separator before group n-1-back (which must not be the first).
            let (a, _) = g(back);
            let (_, e) = g(back + 1);
            &s[e..a]
        };
        // Whether group n-1-back may start a finding: it is the run's first group and the byte
        // before it is no word character, or a separator precedes it.
        let left_ok = |back: usize| {
            if back + 1 == n {
                !before(s, g(back).0).is_some_and(|b| is_word(b) || b == b'.')
            } else {
                true
            }
        };

        // Cards: one group of 13-19 digits, or up to five joined by the same single space or dash.
        if !self.cards.is_empty() && (0..5.min(n)).map(len).sum::<usize>() >= 13 {
            let mut digits = [0u8; 19];
            for k in 0..5.min(n) {
                let total: usize = (0..=k).map(len).sum();
                if total > 19 {
                    break;
                }
                if k > 0 {
                    let s0 = sep(0);
                    if !(0..k).all(|b| sep(b) == s0 && (s0 == b" " || s0 == b"-")) {
                        break;
                    }
                }
                if total >= 13 && left_ok(k) {
                    let mut p = 0;
                    for b in (0..=k).rev() {
                        let (a, e) = g(b);
                        digits[p..p + (e - a)].copy_from_slice(&s[a..e]);
                        p += e - a;
                    }
                    if card::is_card(&digits[..total]) {
                        for &d in &self.cards {
                            self.emit(w, d, g(k).0..newest.1, out);
                        }
                        break;
                    }
                }
            }
        }
        if n >= 3 {
            let lens = (len(2), len(1), len(0));
            let ssn_shape = !self.ssns.is_empty() && lens == (3, 2, 4);
            let date_shape =
                !self.dobs.is_empty() && matches!(lens, (4, 1..=2, 1..=2) | (1..=2, 1..=2, 4));
            if ssn_shape || date_shape {
                let (s1, s2) = (sep(1), sep(0));
                let same = s1 == s2 && s1.len() == 1;
                // SSNs: 3-2-4 joined by the same dash or space.
                if ssn_shape
                    && same
                    && (s1 == b"-" || s1 == b" ")
                    && left_ok(2)
                    && ssn_groups(s, [g(2), g(1), g(0)])
                {
                    for &d in &self.ssns {
                        self.emit(w, d, g(2).0..newest.1, out);
                    }
                }
                // Dates of birth: y-m-d or d/m/y (either order of day and month).
                if date_shape
                    && same
                    && matches!(s1, b"-" | b"/" | b".")
                    && left_ok(2)
                    && date::numeric([&s[g(2).0..g(2).1], &s[g(1).0..g(1).1], &s[g(0).0..g(0).1]])
                {
                    self.dob(w, g(2).0..newest.1, memo, out);
                }
            }
            // Phones written the North American way: (212) 555-0134, 212-555-0134, 212.555.0134,
            // with an optional 1 or +1 in front.
            if !self.phones.is_empty() && len(2) == 3 && len(1) == 3 && len(0) == 4 {
                phone_found |= self.nanp(w, last, n, out);
            }
        }
        // IPv4: four groups joined by single dots, not part of a longer dotted run.
        if n >= 4 && !self.ipv4s.is_empty() && (0..4).all(|b| len(b) <= 3) {
            let dots = (0..3).all(|b| sep(b) == b".");
            let not_longer_left = n == 4 || sep(3) != b".";
            let not_longer_right = !(s.get(newest.1) == Some(&b'.')
                && s.get(newest.1 + 1).is_some_and(u8::is_ascii_digit));
            if dots && not_longer_left && not_longer_right && left_ok(3) {
                let parts = [g(3), g(2), g(1), g(0)].map(|(a, e)| &s[a..e]);
                if ip::is_ipv4(parts) {
                    for &d in &self.ipv4s {
                        self.emit(w, d, g(3).0..newest.1, out);
                    }
                }
            }
        }
        // Dates with the month's name: the year is the last group. The words before it are
        // read first: a year with no month before it (a timestamp) asks no keyword.
        let prev_end = (n > 1).then(|| g(1).1);
        if !self.dobs.is_empty() && len(0) == 4 && named_date_may_end(s, newest.0, prev_end) {
            if let Some(a) = date::named_before_year(s, newest.0..newest.1) {
                // The month's name and the day take at most 24 bytes before the year.
                let far = newest.0.saturating_sub(24 + self.p.dob_within);
                if self.keyword_in(s, far, newest.0, memo) {
                    self.dob(w, a..newest.1, memo, out);
                }
            }
        }
        phone_found
    }

    /// Returns whether a phone number was found.
    fn nanp(&self, w: &Window<'_>, last: &[Group; 5], n: usize, out: &mut Vec<Hit>) -> bool {
        let s = w.bytes;
        let g = |back: usize| last[back];
        let between = |back: usize| &s[g(back + 1).1..g(back).0];
        let area = g(2);
        let paren = area.0 > 0 && s[area.0 - 1] == b'(';
        let s1_ok = match between(1) {
            b"-" | b"." | b" " => !paren,
            b") " | b")" => paren,
            _ => false,
        };
        if !s1_ok || !matches!(between(0), b"-" | b"." | b" ") {
            return false;
        }
        let mut start = if paren { area.0 - 1 } else { area.0 };
        let mut lead = false;
        if n >= 4 {
            // A country code 1 (or +1) written before the area code.
            let c = g(3);
            let joins = match between(2) {
                b" " | b"-" | b"." => !paren,
                b" (" | b"(" => paren,
                _ => false,
            };
            if &s[c.0..c.1] == b"1" && joins && (n == 4 || between(3) == b" ") {
                start = c.0;
                if before(s, start) == Some(b'+') {
                    start -= 1;
                }
                lead = true;
            }
        }
        if !lead && n == 3 && before(s, start).is_some_and(|b| is_word(b) || b == b'.') {
            return false;
        }
        let r = start..g(0).1;
        let Ok(text) = std::str::from_utf8(&s[r.clone()]) else {
            return false;
        };
        let mut found = false;
        for &(d, region) in &self.phones {
            if phone::valid(text, region) {
                self.emit(w, d, r.clone(), out);
                found = true;
            }
        }
        found
    }

    /// A number written `+<country> ...`: the longest run of its first groups that is valid.
    fn international(&self, w: &Window<'_>, plus: usize, groups: &[Group], out: &mut Vec<Hit>) {
        let s = w.bytes;
        if self.phones.is_empty() || before(s, plus).is_some_and(is_word) {
            return;
        }
        let mut total = 0;
        let mut ends = [(0usize, 0usize); 16];
        let mut m = 0;
        for &(a, e) in groups {
            total += e - a;
            if total > 15 {
                break;
            }
            ends[m] = (e, total);
            m += 1;
        }
        for &(e, total) in ends[..m].iter().rev() {
            if total < 8 {
                break;
            }
            if s.get(e).copied().is_some_and(is_word) {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&s[plus..e]) else {
                return;
            };
            let mut found = false;
            for &(d, region) in &self.phones {
                if phone::valid(text, region) {
                    self.emit(w, d, plus..e, out);
                    found = true;
                }
            }
            if found {
                return;
            }
        }
    }

    /// A date at `r` is a date of birth if a keyword ends at most `within` bytes before it.
    fn dob(&self, w: &Window<'_>, r: Range<usize>, memo: &mut Memo, out: &mut Vec<Hit>) {
        for &(d, within) in &self.dobs {
            if self.keyword_in(w.bytes, r.start.saturating_sub(within), r.start, memo) {
                self.emit(w, d, r.clone(), out);
            }
        }
    }

    /// An IBAN whose two-letter country code starts at `a` (its check digits follow).
    pub(super) fn iban(&self, w: &Window<'_>, a: usize, out: &mut Vec<Hit>) {
        let s = w.bytes;
        if !(s[a].is_ascii_uppercase() && s[a + 1].is_ascii_uppercase())
            || before(s, a).is_some_and(|b| b.is_ascii_alphanumeric())
        {
            return;
        }
        let Some(want) = iban::length_of(&s[a..a + 2]) else {
            return;
        };
        let mut compact = [0u8; 34];
        let mut n = 0;
        let mut e = a;
        while n < want && e < s.len() {
            let b = s[e];
            if b.is_ascii_uppercase() || b.is_ascii_digit() {
                compact[n] = b;
                n += 1;
                e += 1;
            } else if b == b' '
                && n > 0
                && s.get(e + 1)
                    .is_some_and(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            {
                e += 1;
            } else {
                break;
            }
        }
        if n != want || s.get(e).copied().is_some_and(|b| b.is_ascii_alphanumeric()) {
            return;
        }
        if iban::is_iban(&compact[..n]) {
            for &d in &self.ibans {
                self.emit(w, d, a..e, out);
            }
        }
    }
}

/// Whether a named date (`March 12, 1984`) may end with the four-digit group at `year`, whose
/// run's previous group (if any) ends at `prev_end`: a later group must follow one space, and
/// a run's first group a space, comma or dot. (The run is not glued to a word, so the byte
/// before its first group is no letter or digit: without one of those there, no word of a
/// date can come before.)
#[inline]
fn named_date_may_end(s: &[u8], year: usize, prev_end: Option<usize>) -> bool {
    match prev_end {
        Some(e) => year - e == 1 && s[e] == b' ',
        None => matches!(before(s, year), Some(b' ' | b',' | b'.')),
    }
}

fn ssn_groups(s: &[u8], g: [Group; 3]) -> bool {
    let [a, b, c] = g.map(|(x, y)| &s[x..y]);
    detect::ssn::is_ssn(a, b, c)
}
