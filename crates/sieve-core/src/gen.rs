//! The thesis's synthetic workload: x-P files (§5.1.2).
//!
//! A 1MB-P file holds five equal classified components of `l = x·P/5` bytes spread through the
//! text; an xMB-P file is the 1MB-P file repeated x times. The text has no meaning, only the right
//! number of bytes, classified bytes and marks. We keep that construction exactly and make the
//! sizes exact: `size` counts content bytes (marks excluded) and the classified share is
//! `round(unit·P)` bytes per unit. Generation is deterministic for a seed.

use std::io::{self, Write};
use std::ops::Range;

/// Bytes of one repeated block: the thesis's "1MB".
pub const MB: u64 = 1_000_000;
/// Binary megabyte, used as the unit when a size is a whole number of MiB but not of MB.
pub const MIB: u64 = 1 << 20;
/// Bytes a writer of x-P files hands the kernel at a time (the capacity of its `BufWriter`):
/// large writes leave a document in the page cache in large folios, as reading it from disk
/// would, so that mapping it costs what it costs for a document a user has read (see
/// `bench/transfer.sh`).
pub const WRITE_CHUNK: usize = 4 << 20;
/// Classified components per unit block.
pub(crate) const COMPONENTS: u64 = 5;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XpSpec {
    /// Content bytes (marks excluded).
    pub size: u64,
    /// Proportion of classified content, 0..=1.
    pub proportion: f64,
    /// Seeds the filler text only: the same spec always writes the same bytes, and the
    /// classified components sit at the same offsets whatever the seed.
    pub seed: u64,
}

/// What was generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XpStats {
    /// Content bytes written (marks excluded): the spec's `size`.
    pub content_len: u64,
    /// Content bytes inside classified components: about `size`·P, rounded per unit block.
    pub classified_len: u64,
    /// Classified components written: five per whole unit block, none when P rounds to zero.
    pub components: u64,
    /// File length including marks.
    pub file_len: u64,
}

/// Segment lengths of one block of `unit` content bytes: `(plain, secure)` five times, then a
/// trailing plain run holding the rounding remainder.
pub(crate) fn block_shape(unit: u64, p: f64) -> (Vec<(u64, u64)>, u64) {
    let secure = ((unit as f64) * p.clamp(0.0, 1.0)).round() as u64;
    let plain = unit - secure;
    if secure == 0 {
        return (Vec::new(), unit);
    }
    let comps: Vec<(u64, u64)> = (0..COMPONENTS)
        .map(|i| {
            let s = secure / COMPONENTS + u64::from(i < secure % COMPONENTS);
            (plain / COMPONENTS, s)
        })
        .collect();
    (comps, plain % COMPONENTS)
}

/// The unit block a spec repeats: 1 MB, or 1 MiB for sizes in whole MiB, or the size itself.
pub(crate) fn unit_for(size: u64) -> u64 {
    if size >= MB && size.is_multiple_of(MB) {
        MB
    } else if size >= MIB && size.is_multiple_of(MIB) {
        MIB
    } else {
        size.min(MB)
    }
}

struct Text(u64);

impl Text {
    /// Lower-case words and spaces; never produces a mark or escape byte.
    fn fill(&mut self, out: &mut Vec<u8>, n: u64) {
        for _ in 0..n {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56;
            out.push(if r < 40 { b' ' } else { b'a' + (r % 26) as u8 });
        }
    }
}

/// One marked block of `unit` content bytes and its classified ranges (content coordinates).
pub fn block(unit: u64, p: f64, seed: u64) -> (Vec<u8>, Vec<Range<u64>>) {
    block_with(unit, p, seed, true)
}

/// Like [`block`]; without marks when `marked` is false (the ranges then describe the bytes).
pub(crate) fn block_with(unit: u64, p: f64, seed: u64, marked: bool) -> (Vec<u8>, Vec<Range<u64>>) {
    let (comps, tail) = block_shape(unit, p);
    let mut text = Text(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = Vec::with_capacity(unit as usize + comps.len() * 8);
    let mut ranges = Vec::with_capacity(comps.len());
    let mut pos = 0u64;
    for (plain, secure) in comps {
        text.fill(&mut out, plain);
        pos += plain;
        if marked {
            out.extend_from_slice(b"<$S>");
        }
        text.fill(&mut out, secure);
        if marked {
            out.extend_from_slice(b"<$E>");
        }
        ranges.push(pos..pos + secure);
        pos += secure;
    }
    text.fill(&mut out, tail);
    (out, ranges)
}

/// Write an x-P file, marked inline.
pub fn write_xp(spec: XpSpec, out: &mut impl Write) -> io::Result<XpStats> {
    write_xp_with(spec, true, out, |_| {})
}

/// Write an x-P file; with `marked` false the file has no marks and every classified range
/// (content = file coordinates) is passed to `range`, for a ranges file.
pub(crate) fn write_xp_with(
    spec: XpSpec,
    marked: bool,
    out: &mut impl Write,
    mut range: impl FnMut(Range<u64>),
) -> io::Result<XpStats> {
    let unit = unit_for(spec.size);
    let mut stats = XpStats::default();
    if spec.size == 0 {
        return Ok(stats);
    }
    let (blk, ranges) = block_with(unit, spec.proportion, spec.seed, marked);
    let full = spec.size / unit;
    for i in 0..full {
        out.write_all(&blk)?;
        for r in &ranges {
            range(r.start + i * unit..r.end + i * unit);
        }
    }
    let per_block_secure: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    stats.content_len = full * unit;
    stats.classified_len = full * per_block_secure;
    stats.components = full * ranges.len() as u64;
    stats.file_len = full * blk.len() as u64;
    let rest = spec.size % unit;
    if rest > 0 {
        let (b, r) = block_with(rest, spec.proportion, spec.seed, marked);
        out.write_all(&b)?;
        for x in &r {
            range(x.start + full * unit..x.end + full * unit);
        }
        stats.content_len += rest;
        stats.classified_len += r.iter().map(|r| r.end - r.start).sum::<u64>();
        stats.components += r.len() as u64;
        stats.file_len += b.len() as u64;
    }
    Ok(stats)
}

/// Parse a size such as `1MB`, `10MiB`, `1GiB`, `512k`, `4096`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size: expected a number such as 10MB or 1GiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => MB,
        "mib" => MIB,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{s}': use B, KB, KiB, MB, MiB, GB or GiB"
            ))
        }
    };
    if n < 0.0 || !n.is_finite() {
        return Err(format!("'{s}' is not a size"));
    }
    Ok((n * mult as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::{parse_all, MarkConfig};

    fn check(size: u64, p: f64) {
        let mut buf = Vec::new();
        let st = write_xp(
            XpSpec {
                size,
                proportion: p,
                seed: 7,
            },
            &mut buf,
        )
        .unwrap();
        assert_eq!(st.file_len, buf.len() as u64);
        let parsed = parse_all(&MarkConfig::default(), &buf).unwrap();
        assert_eq!(parsed.content_len, size);
        let classified: u64 = parsed.ranges.iter().map(|r| r.end - r.start).sum();
        assert_eq!(classified, st.classified_len);
        let units = size / unit_for(size);
        let unit = unit_for(size);
        assert_eq!(classified, units * ((unit as f64 * p).round() as u64));
        assert_eq!(
            parsed.ranges.len() as u64,
            if p > 0.0 { units * 5 } else { 0 }
        );
        // Five equal components per block (to the byte, up to rounding of P·unit/5).
        let l = (unit as f64 * p / 5.0).round() as i64;
        for r in &parsed.ranges {
            assert!(
                ((r.end - r.start) as i64 - l).abs() <= 1,
                "component {:?} vs l = {l}",
                r
            );
        }
    }

    #[test]
    fn component_sizes_and_proportion_are_exact() {
        for p in [0.1, 0.25, 0.5, 0.75, 0.9, 1.0] {
            check(MB, p);
            check(3 * MB, p);
        }
        check(2 * MIB, 0.1);
        let mut empty = Vec::new();
        let st = write_xp(
            XpSpec {
                size: 0,
                proportion: 0.5,
                seed: 1,
            },
            &mut empty,
        )
        .unwrap();
        assert_eq!((st, empty.len()), (XpStats::default(), 0));
    }

    #[test]
    fn thesis_component_length() {
        // l = x·P/5: 1MB-10 has components of 20 000 bytes.
        let (b, r) = block(MB, 0.1, 1);
        assert_eq!(r.len(), 5);
        assert!(r.iter().all(|r| r.end - r.start == 20_000));
        assert_eq!(b.len() as u64, MB + 40);
        // A 10MB-P file is the 1MB-P file ten times.
        let mut ten = Vec::new();
        write_xp(
            XpSpec {
                size: 10 * MB,
                proportion: 0.1,
                seed: 1,
            },
            &mut ten,
        )
        .unwrap();
        assert_eq!(ten, b.repeat(10));
    }

    #[test]
    fn unmarked_file_and_ranges_agree_with_marked() {
        let spec = XpSpec {
            size: 2 * MB + 12_345,
            proportion: 0.25,
            seed: 3,
        };
        let mut marked = Vec::new();
        write_xp(spec, &mut marked).unwrap();
        let parsed = parse_all(&MarkConfig::default(), &marked).unwrap();
        let mut plain = Vec::new();
        let mut ranges = Vec::new();
        let st = write_xp_with(spec, false, &mut plain, |r| ranges.push(r)).unwrap();
        assert_eq!(st.file_len, spec.size);
        assert_eq!(ranges, parsed.ranges);
        let content: Vec<u8> = parsed
            .extents
            .iter()
            .flat_map(|e| {
                marked[e.raw as usize..(e.raw + e.len) as usize]
                    .iter()
                    .copied()
            })
            .collect();
        assert_eq!(content, plain);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1.5k"), Ok(1500));
        assert!(parse_size("ten").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }
}
