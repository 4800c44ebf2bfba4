//! How much around a finding is classified (see [`Granularity`]).
//!
//! Expansions look at most [`MAX_EXPAND`] bytes away from the finding, so that the engine's
//! margins hold every byte an expansion can reach: a line longer than that is classified in
//! part, up to that distance on either side.

use std::ops::Range;

use crate::policy::Granularity;

/// Furthest an expansion reaches from its finding, in bytes.
pub const MAX_EXPAND: usize = 64 << 10;

/// Context the engine keeps on each side of a chunk: more than any finding or expansion reaches
/// (a PEM block is at most 32 KiB, an expansion at most [`MAX_EXPAND`] from its finding, a
/// regular expression is looked for up to half of this past its chunk). Here, beside the
/// expansion it bounds, so that the scan and the engine both take it from below them.
pub const MARGIN: usize = 4 * MAX_EXPAND;

/// Furthest a field reaches from its finding.
const MAX_FIELD: usize = 4 << 10;

/// Bytes that end a field in free text, CSV, JSON and key=value logs.
fn field_end(b: u8) -> bool {
    b.is_ascii_whitespace() || b",;|\"'<>(){}[]=:".contains(&b)
}

/// `r` widened to the granularity `g` within `s`.
pub fn expand(s: &[u8], r: Range<usize>, g: Granularity) -> Range<usize> {
    match g {
        Granularity::Match => r,
        Granularity::Field => {
            let lo = r.start.saturating_sub(MAX_FIELD);
            let hi = (r.end + MAX_FIELD).min(s.len());
            let a = s[lo..r.start]
                .iter()
                .rposition(|&b| field_end(b))
                .map_or(lo, |p| lo + p + 1);
            let e = s[r.end..hi]
                .iter()
                .position(|&b| field_end(b))
                .map_or(hi, |p| r.end + p);
            a..e
        }
        Granularity::Line => line(s, r),
        Granularity::Record => {
            let mut l = line(s, r.clone());
            let lo = r.start.saturating_sub(MAX_EXPAND);
            let hi = (r.end + MAX_EXPAND).min(s.len());
            // Back over continuation lines to the line they continue.
            while l.start > lo + 1 && matches!(s[l.start], b' ' | b'\t') {
                let prev = line(s, l.start - 1..l.start - 1);
                if prev.start < lo {
                    break;
                }
                l.start = prev.start;
            }
            // Forward over indented lines that continue this one.
            loop {
                let mut nl = l.end;
                if nl < hi && s[nl] == b'\r' {
                    nl += 1;
                }
                if !(nl + 1 < hi && s[nl] == b'\n' && matches!(s[nl + 1], b' ' | b'\t')) {
                    break;
                }
                let next = line(s, nl + 1..nl + 1);
                if next.end > hi {
                    break;
                }
                l.end = next.end;
            }
            l
        }
    }
}

/// The lines holding `r`, without their line ends.
fn line(s: &[u8], r: Range<usize>) -> Range<usize> {
    let lo = r.start.saturating_sub(MAX_EXPAND);
    let hi = (r.end + MAX_EXPAND).min(s.len());
    let a = memchr::memrchr(b'\n', &s[lo..r.start]).map_or(lo, |p| lo + p + 1);
    let mut e = memchr::memchr(b'\n', &s[r.end..hi]).map_or(hi, |p| r.end + p);
    if e > a && e > r.end && s[e - 1] == b'\r' {
        e -= 1;
    }
    a..e.max(r.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x<'a>(s: &'a str, find: &str, g: Granularity) -> &'a str {
        let a = s.find(find).unwrap();
        &s[expand(s.as_bytes(), a..a + find.len(), g)]
    }

    #[test]
    fn each_granularity() {
        let s = "head\r\nuser=bob@x.io,id=3 tail\n  at frame one\n  at frame two\nnext";
        assert_eq!(x(s, "bob@x.io", Granularity::Match), "bob@x.io");
        assert_eq!(x(s, "ob@x.i", Granularity::Field), "bob@x.io");
        assert_eq!(
            x(s, "bob@x.io", Granularity::Line),
            "user=bob@x.io,id=3 tail"
        );
        assert_eq!(
            x(s, "bob@x.io", Granularity::Record),
            "user=bob@x.io,id=3 tail\n  at frame one\n  at frame two"
        );
        assert_eq!(
            x(s, "frame two", Granularity::Record),
            "user=bob@x.io,id=3 tail\n  at frame one\n  at frame two"
        );
        assert_eq!(x(s, "head", Granularity::Line), "head");
        assert_eq!(x(s, "next", Granularity::Record), "next");
    }
}
