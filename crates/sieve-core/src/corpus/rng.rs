//! The generators' random numbers: SplitMix64, seeded, the same on every platform.
//!
//! Why not `rand`: the corpus must be the same bytes for a seed in every version of the project
//! (`rand` does not promise value stability across versions), and the core carries no dependency
//! for twenty lines.

/// SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next();
        r
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One item, uniformly.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// One item, the first ones far more often (roughly Zipf's law, as words in prose are): the
    /// index is `n^u − 1` for `u` uniform in 0..1, so item `i` has probability near
    /// `ln((i+2)/(i+1)) / ln(n+1)`.
    pub(crate) fn zipf<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let n = items.len() as f64;
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let i = ((n + 1.0).powf(u) - 1.0) as usize;
        &items[i.min(items.len() - 1)]
    }

    /// `n` decimal digits.
    pub(crate) fn digits(&mut self, out: &mut Vec<u8>, n: usize) {
        for _ in 0..n {
            out.push(b'0' + self.below(10) as u8);
        }
    }

    /// `n` lower-case hexadecimal digits.
    pub(crate) fn hex(&mut self, out: &mut Vec<u8>, n: usize) {
        for _ in 0..n {
            out.push(b"0123456789abcdef"[self.below(16) as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_values_for_a_seed() {
        // SplitMix64's published first output for state 0 after one step is 0xE220A8397B1DCDAF.
        let mut r = Rng(0);
        assert_eq!(r.next(), 0xE220_A839_7B1D_CDAF);
        let a: Vec<u64> = (0..4).map(|_| Rng::new(7, 1).below(1000)).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut r = Rng::new(1, 2);
        assert!((0..1000).all(|_| r.range(3, 5) >= 3 && r.range(3, 5) <= 5));
        let words = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let firsts = (0..10_000).filter(|_| *r.zipf(&words) == "a").count();
        let lasts = (0..10_000).filter(|_| *r.zipf(&words) == "h").count();
        assert!(firsts > 2 * lasts, "{firsts} vs {lasts}");
    }
}
