//! Runs of digit groups that cannot hold a finding, told from the block masks alone.
//!
//! Most runs in a log are a timestamp's date (`2024-03-24T07:22:28Z`) or a request's path and
//! status (`/orders/94676 201 25ms`): a few short groups glued at their end to a word. Walking
//! such a run byte by byte ([`super::digits`]) and asking at each group whether something ends
//! there costs more than the rest of the line; the digit and separator masks of the block and
//! the next give the same groups with a few bit searches.
//!
//! A run holds nothing when all of these hold (each kind's rule in [`super::digits`]):
//! - it has at most three groups, and fewer than 13 digits: no card ends anywhere in it (a card
//!   needs 13), and only its last group could end an SSN, a numeric date, a phone number of the
//!   North American plan or an IPv4 address (they need three groups or four);
//! - its last group is glued to a word byte (letter, digit, `_`): nothing ends there;
//! - no `+` is just before it: no international phone number;
//! - no group but the last may be the year of a named date (`March 12, 1984`): the first group
//!   is not four digits after a space, comma or dot, and the second is not four digits after
//!   one space.
//!
//! Anything else, and any run that reaches past the two blocks, goes to the full walk.

use super::Near;

/// Whether the run of digit groups starting at window position `i` (bit `k` of the current
/// block) can hold no finding (see the module documentation). `false` means only "look".
#[inline]
pub(super) fn holds_nothing(s: &[u8], i: usize, k: u32, near: &Near<'_>) -> bool {
    if i > 0 && s[i - 1] == b'+' {
        return false;
    }
    // 64 bits from the run's first byte on: the rest of the block and the start of the next.
    let from = |cur: u64, next: u64| cur >> k | (next << 1) << (63 - k);
    let (c, n) = (near.cur, near.next);
    let digit = from(c.digit, n.digit);
    let sep = from(c.sep, n.sep);
    let word = from(c.alpha | c.under, n.alpha | n.under);
    let avail = 64;
    let bit = |m: u64, at: u32| (m >> at) & 1 == 1;
    let before = i.checked_sub(1).map(|j| s[j]);
    let mut start = 0u32;
    let mut total = 0u32;
    let mut prev_end = 0u32;
    for g in 0..3 {
        let len = (digit >> start).trailing_ones();
        let end = start + len;
        // The bytes at `end`, `end + 1` and `end + 2` decide how the run goes on.
        if end + 3 > avail {
            return false;
        }
        total += len;
        // The next group, across one separator or two.
        let next = if bit(sep, end) && bit(digit, end + 1) {
            Some(end + 1)
        } else if bit(sep, end) && bit(sep, end + 1) && bit(digit, end + 2) {
            Some(end + 2)
        } else {
            None
        };
        let Some(next) = next else {
            // The last group.
            return bit(word, end) && total < 13;
        };
        // A group that is not the last: may it be a named date's year?
        let year = len == 4
            && match g {
                0 => matches!(before, Some(b' ' | b',' | b'.')),
                // One separator before it, a space.
                1 => start == prev_end + 1 && s[i + prev_end as usize] == b' ',
                _ => false,
            };
        if year {
            return false;
        }
        prev_end = end;
        start = next;
    }
    // A fourth group.
    false
}
