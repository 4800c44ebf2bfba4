//! The keywords that make a date a date of birth (`born`, `dob`, `date of birth`, ...), looked
//! for in the few dozen bytes before every date the scan finds.
//!
//! A log has a date on every line, so this question is asked as often as there are lines. An
//! automaton started on each short range costs its start-up every time, and one run over the
//! whole document is slow because the keywords start with common letters. Instead, a 64-byte
//! block is searched once, with vector compares, for the places where a keyword's first two
//! bytes are (case ignored): a bit mask, remembered for the next questions about the same block.
//! Only those places are compared with the keywords.

use aho_corasick::AhoCorasick;

use crate::detect::before;

/// Most distinct first pairs the vector filter compares; more (or a one-byte keyword) and the
/// automaton answers instead.
const MAX_PAIRS: usize = 8;

/// A set of keywords, compared ignoring ASCII case.
#[derive(Debug, Clone)]
pub struct Keywords {
    words: Vec<Vec<u8>>,
    /// Distinct first two bytes of the words, each with bit 0x20 set (lowercase letters).
    pairs: Vec<[u8; 2]>,
    /// The filter cannot be used: a word of one byte, or too many pairs.
    ac: Option<AhoCorasick>,
    #[cfg(target_arch = "x86_64")]
    avx2: bool,
}

/// Candidate masks of the blocks asked about last (direct-mapped by block number).
pub struct Cache {
    tags: [usize; 4],
    masks: [u64; 4],
}

impl Cache {
    pub fn new() -> Cache {
        Cache {
            tags: [usize::MAX; 4],
            masks: [0; 4],
        }
    }
}

impl Default for Cache {
    fn default() -> Self {
        Cache::new()
    }
}

/// `b` with bit 0x20 set: a capital becomes its lowercase letter (other bytes may collide,
/// which only makes a candidate the exact comparison rejects).
#[inline]
fn fold(b: u8) -> u8 {
    b | 0x20
}

impl Keywords {
    /// The keywords (none empty).
    pub fn new(words: &[String]) -> Result<Keywords, String> {
        if words.iter().any(|w| w.is_empty()) {
            return Err("a keyword is empty".into());
        }
        let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let mut pairs: Vec<[u8; 2]> = Vec::new();
        for w in &words {
            if w.len() >= 2 {
                let p = [fold(w[0]), fold(w[1])];
                if !pairs.contains(&p) {
                    pairs.push(p);
                }
            }
        }
        let ac = if words.iter().any(|w| w.len() < 2) || pairs.len() > MAX_PAIRS {
            Some(
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&words)
                    .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        Ok(Keywords {
            words,
            pairs,
            ac,
            #[cfg(target_arch = "x86_64")]
            avx2: std::is_x86_feature_detected!("avx2"),
        })
    }

    /// Whether a keyword lies wholly in `lo..hi` of `s` with no letter just before it (so that
    /// `reborn` is no `born`). Every occurrence counts, overlapping ones too.
    pub fn any_in(&self, s: &[u8], lo: usize, hi: usize, cache: &mut Cache) -> bool {
        let word_start = |a: usize| !before(s, a).is_some_and(|b| b.is_ascii_alphabetic());
        if let Some(ac) = &self.ac {
            return hi > lo
                && ac
                    .find_overlapping_iter(&s[lo..hi])
                    .any(|m| word_start(lo + m.start()));
        }
        // Every word is at least two bytes long: it starts at most at `hi - 2`.
        if hi < lo + 2 {
            return false;
        }
        let last = hi - 2;
        for block in lo / 64..=last / 64 {
            let at = block * 64;
            let mut m = self.candidates(s, block, cache);
            // Only starts in lo..=last.
            if at < lo {
                m &= !0u64 << (lo - at);
            }
            if last - at < 63 {
                m &= (1u64 << (last - at + 1)) - 1;
            }
            while m != 0 {
                let a = at + m.trailing_zeros() as usize;
                m &= m - 1;
                if word_start(a)
                    && self
                        .words
                        .iter()
                        .any(|w| a + w.len() <= hi && s[a..a + w.len()].eq_ignore_ascii_case(w))
                {
                    return true;
                }
            }
        }
        false
    }

    /// The mask of the positions of block `block` (bytes `64 * block..`) where a word's first
    /// two bytes are, from the cache or computed.
    #[inline]
    fn candidates(&self, s: &[u8], block: usize, cache: &mut Cache) -> u64 {
        let slot = block % 4;
        if cache.tags[slot] == block {
            return cache.masks[slot];
        }
        let at = block * 64;
        let mut buf = [0u8; 65];
        let have = s.len().saturating_sub(at).min(65);
        buf[..have].copy_from_slice(&s[at..at + have]);
        let m = self.block_mask(&buf);
        cache.tags[slot] = block;
        cache.masks[slot] = m;
        m
    }

    fn block_mask(&self, b: &[u8; 65]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when the CPU reports AVX2 (`Keywords::new`), the one
            // requirement of `avx2::pairs`, which reads nothing outside `b`.
            return unsafe { avx2::pairs(b, &self.pairs) };
        }
        scalar_pairs(b, &self.pairs)
    }
}

/// The positions `k` in `0..64` where `(fold(b[k]), fold(b[k + 1]))` is one of `pairs`.
fn scalar_pairs(b: &[u8; 65], pairs: &[[u8; 2]]) -> u64 {
    let mut m = 0;
    for k in 0..64 {
        if pairs.contains(&[fold(b[k]), fold(b[k + 1])]) {
            m |= 1 << k;
        }
    }
    m
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// [`super::scalar_pairs`], 32 positions per vector operation.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn pairs(b: &[u8; 65], pairs: &[[u8; 2]]) -> u64 {
        let p = b.as_ptr();
        let fold = _mm256_set1_epi8(0x20);
        // Loads of 32 bytes at 0, 32, 1 and 33: all inside the 65 bytes of `b`.
        let x0 = _mm256_or_si256(_mm256_loadu_si256(p.cast()), fold);
        let x1 = _mm256_or_si256(_mm256_loadu_si256(p.add(32).cast()), fold);
        let y0 = _mm256_or_si256(_mm256_loadu_si256(p.add(1).cast()), fold);
        let y1 = _mm256_or_si256(_mm256_loadu_si256(p.add(33).cast()), fold);
        let mut m0 = _mm256_setzero_si256();
        let mut m1 = _mm256_setzero_si256();
        for &[a, b] in pairs {
            let (a, b) = (_mm256_set1_epi8(a as i8), _mm256_set1_epi8(b as i8));
            m0 = _mm256_or_si256(
                m0,
                _mm256_and_si256(_mm256_cmpeq_epi8(x0, a), _mm256_cmpeq_epi8(y0, b)),
            );
            m1 = _mm256_or_si256(
                m1,
                _mm256_and_si256(_mm256_cmpeq_epi8(x1, a), _mm256_cmpeq_epi8(y1, b)),
            );
        }
        let lo = _mm256_movemask_epi8(m0) as u32 as u64;
        let hi = _mm256_movemask_epi8(m1) as u32 as u64;
        lo | hi << 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(w: &[&str]) -> Keywords {
        Keywords::new(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    /// The specification: an automaton's overlapping matches in the range.
    fn reference(w: &[&str], s: &[u8], lo: usize, hi: usize) -> bool {
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(w)
            .unwrap();
        ac.find_overlapping_iter(&s[lo..hi])
            .any(|m| !before(s, lo + m.start()).is_some_and(|b| b.is_ascii_alphabetic()))
    }

    const DEFAULT: &[&str] = &[
        "date of birth",
        "birth date",
        "birthdate",
        "birthday",
        "born",
        "dob",
        "d.o.b",
    ];

    fn text() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop::sample::select(vec![
            &b"born"[..],
            b"BORN",
            b"reborn",
            b"dob",
            b"D.O.B",
            b"date of birth",
            b"birth date",
            b"Birthday",
            b"do",
            b"bi",
            b" ",
            b"x",
            b"\n",
            b"1984",
            b"@",
            b"\xc3\xa9",
            b"\x0fo",
        ]);
        prop::collection::vec(piece, 0..80).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The block filter and the exact check answer as the automaton does, for any range,
        /// with the cache warm or cold, on both paths.
        #[test]
        fn the_filter_agrees_with_an_automaton(s in text(), a in 0usize..400, b in 0usize..400) {
            let (lo, hi) = (a.min(b).min(s.len()), a.max(b).min(s.len()));
            for set in [DEFAULT, &["x", "born"][..], &["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "qr"][..]] {
                let k = words(set);
                let want = reference(set, &s, lo, hi);
                let mut cache = Cache::new();
                prop_assert_eq!(k.any_in(&s, lo, hi, &mut cache), want);
                prop_assert_eq!(k.any_in(&s, lo, hi, &mut cache), want);
                #[cfg(target_arch = "x86_64")]
                {
                    let mut plain = k.clone();
                    plain.avx2 = false;
                    prop_assert_eq!(plain.any_in(&s, lo, hi, &mut Cache::new()), want);
                }
            }
        }
    }

    #[test]
    fn words_in_ranges() {
        let k = words(DEFAULT);
        let s = b"x reborn 1984, DOB: 1984 and Date Of Birth";
        let mut c = Cache::new();
        assert!(!k.any_in(s, 0, 14, &mut c));
        assert!(k.any_in(s, 0, 18, &mut c));
        assert!(!k.any_in(s, 0, 17, &mut c));
        assert!(k.any_in(s, 28, s.len(), &mut c));
        assert!(k.any_in(s, 29, s.len(), &mut c) && !k.any_in(s, 30, s.len(), &mut c));
        assert!(!k.any_in(s, 5, 5, &mut c) && !k.any_in(s, 5, 6, &mut c));
        assert!(Keywords::new(&[String::new()]).is_err());
    }
}
