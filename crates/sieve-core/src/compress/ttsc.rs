//! ACCENT's TTSC (ACCENT §3.1): how much of the data to compress so that neither the CPU nor
//! the link idles.
//!
//! TTSC separates the encoding thread from the I/O thread and *blends* compressed and
//! uncompressed records. Its monitor measures, per connection:
//!
//! | symbol | meaning | here |
//! |---|---|---|
//! | TD | transmission data rate | bytes the socket drained per second |
//! | ED | encryption data rate | rate of the plain path without compression (tag and send) |
//! | CD | compression data rate | plain bytes the compressor takes per second |
//! | CR | compression ratio, compressed / original | the same |
//!
//! **Definition 1.** α is the time ratio T_comp / T_total: the share of the encoder's time spent
//! on data that is compressed.
//!
//! **Eq. 1.** The encoder must produce exactly what the link takes:
//!
//! ```text
//! CD·ED / (CR·CD + ED) · α + ED · (1 − α) = TD
//! ```
//!
//! where CED = CD·ED / (CR·CD + ED) is the rate of compressing then encrypting (S / (S/CD +
//! S·CR/ED)). Solved for α:
//!
//! ```text
//! α = (ED − TD) / (ED − CED),  α = 0 when ED ≤ TD,  α = 1 when CED ≥ TD
//! ```
//!
//! The paper prints the middle case as (TD·CR − ED) / (CD/(CR·CD + ED) − ED), which does not
//! follow from eq. 1 (it subtracts a rate from a pure number); we solve eq. 1 itself, which the
//! paper says α must satisfy, and keep its boundary cases: α = 0 when the encoder cannot even keep
//! up uncompressed (the paper's "ED < TD and CD < TD"), α = 1 when it keeps up compressing all
//! (the paper's "CS > TD").
//!
//! **Eq. 2.** Of S bytes from the application, compress
//!
//! ```text
//! S_CE = α · S · CD / TD   (0 < α < 1),   S_CE = S   (α ≥ 1),   S_E = S − S_CE
//! ```
//!
//! (α·S/TD is the compressing time within the S/TD the link needs for S, and CD bytes are
//! compressed per second of it.) S_CE is capped at S, which eq. 2 leaves implicit.

/// TTSC's monitored rates (bytes per second) and ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Monitor {
    /// TD: transmission data rate.
    pub td: f64,
    /// ED: encoding rate without compression.
    pub ed: f64,
    /// CD: compression data rate.
    pub cd: f64,
    /// CR: compressed / original size.
    pub cr: f64,
}

impl Monitor {
    /// CED = CD·ED / (CR·CD + ED): plain bytes per second through compression then encryption.
    pub(crate) fn ced(&self) -> f64 {
        compress_encode_rate(self.cd, self.ed, self.cr)
    }

    /// α of eq. 1, in `0..=1`.
    pub fn alpha(&self) -> f64 {
        let ced = self.ced();
        if self.td.is_nan() || self.td <= 0.0 || self.ed.is_nan() || self.ed <= self.td {
            return 0.0;
        }
        if ced >= self.td {
            return 1.0;
        }
        ((self.ed - self.td) / (self.ed - ced)).clamp(0.0, 1.0)
    }

    /// Eq. 2: `(S_CE, S_E)` for `s` bytes, with α from [`Monitor::alpha`].
    pub fn split(&self, s: u64) -> (u64, u64) {
        split(self.alpha(), s, self.cd, self.td)
    }
}

/// CD·ED / (CR·CD + ED), the first term of eq. 1 and of eq. 3.
pub(crate) fn compress_encode_rate(cd: f64, ed: f64, cr: f64) -> f64 {
    let den = cr * cd + ed;
    if den > 0.0 {
        cd * ed / den
    } else {
        0.0
    }
}

/// Eq. 2: of `s` bytes, `(S_CE, S_E)`, the bytes to compress and the bytes to leave raw.
pub fn split(alpha: f64, s: u64, cd: f64, td: f64) -> (u64, u64) {
    let sce = if alpha >= 1.0 {
        s
    } else if alpha > 0.0 && td > 0.0 {
        ((alpha * s as f64 * cd / td).round() as u64).min(s)
    } else {
        0
    };
    (sce, s - sce)
}

/// Blends compressed and raw frames so that the compressed share of the bytes follows
/// S_CE / S: TTSC decides amounts, but the sender moves whole frames.
///
/// A frame is compressed when that keeps the compressed bytes nearest to the share of all bytes
/// so far (error diffusion), so the blend is exact to within one frame at every point, and
/// compressed frames are spread evenly rather than bunched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Blend {
    share: f64,
    total: u64,
    compressed: u64,
}

impl Blend {
    /// A blend compressing `share` (S_CE / S, clamped to `0..=1`) of the bytes.
    pub fn new(share: f64) -> Blend {
        Blend {
            share: if share.is_finite() {
                share.clamp(0.0, 1.0)
            } else {
                0.0
            },
            total: 0,
            compressed: 0,
        }
    }

    /// The share being followed.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// Compress the next frame of `len` bytes?
    pub fn next(&mut self, len: u64) -> bool {
        self.total += len;
        let target = self.share * self.total as f64;
        // Compressing brings the count to `compressed + len`; not compressing leaves it.
        let with = (self.compressed + len) as f64 - target;
        let without = target - self.compressed as f64;
        let compress = self.share > 0.0 && with.abs() <= without.abs();
        if compress {
            self.compressed += len;
        }
        compress
    }

    /// Bytes compressed and bytes seen so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.compressed, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-3 * b.abs().max(1.0), "{a} vs {b}");
    }

    /// Worked by hand: ED = 1000 MB/s, CD = 200 MB/s, CR = 0.25, TD = 500 MB/s.
    /// CED = 200·1000 / (0.25·200 + 1000) = 200 000 / 1050 = 190.476 MB/s;
    /// α = (1000 − 500) / (1000 − 190.476) = 500 / 809.524 = 0.617647;
    /// S = 1 000 000: S_CE = 0.617647 · 10⁶ · 200/500 = 247 059, S_E = 752 941.
    #[test]
    fn worked_example_between_the_bounds() {
        let m = Monitor {
            td: 500.0 * MB,
            ed: 1000.0 * MB,
            cd: 200.0 * MB,
            cr: 0.25,
        };
        close(m.ced(), 190.476 * MB);
        close(m.alpha(), 0.617_647);
        assert_eq!(m.split(1_000_000), (247_059, 752_941));
        // α satisfies eq. 1: the blended encoding rate is TD.
        let a = m.alpha();
        close(m.ced() * a + m.ed * (1.0 - a), m.td);
    }

    /// The bounds: a slow link (TD = 100 < CED = 190.476) compresses everything; a link faster
    /// than the encoder (TD = 2000 > ED = 1000) compresses nothing.
    #[test]
    fn worked_examples_at_the_bounds() {
        let slow = Monitor {
            td: 100.0 * MB,
            ed: 1000.0 * MB,
            cd: 200.0 * MB,
            cr: 0.25,
        };
        assert_eq!(slow.alpha(), 1.0);
        assert_eq!(slow.split(1000), (1000, 0));
        let fast = Monitor {
            td: 2000.0 * MB,
            ..slow
        };
        assert_eq!(fast.alpha(), 0.0);
        assert_eq!(fast.split(1000), (0, 1000));
        // A link that has not drained anything yet says nothing: compress nothing.
        assert_eq!(Monitor { td: 0.0, ..slow }.alpha(), 0.0);
    }

    /// Eq. 2's S_CE can exceed S when CD > TD / α; it is capped. α = 0.9, CD = 300, TD = 200:
    /// 0.9 · 1000 · 1.5 = 1350 → 1000.
    #[test]
    fn eq2_is_capped_at_s() {
        assert_eq!(split(0.9, 1000, 300.0, 200.0), (1000, 0));
        assert_eq!(split(0.5, 1000, 100.0, 200.0), (250, 750));
        assert_eq!(split(0.0, 1000, 100.0, 200.0), (0, 1000));
    }

    #[test]
    fn blend_follows_the_share_within_one_frame() {
        for share in [0.0, 0.1, 0.25, 0.5, 0.9, 1.0] {
            let mut b = Blend::new(share);
            let mut picks = Vec::new();
            for i in 0..1000u64 {
                let len = 1000 + (i * 7919) % 3000;
                picks.push(b.next(len));
                let (c, t) = b.counts();
                assert!(
                    (c as f64 - share * t as f64).abs() <= 4000.0,
                    "share {share}: {c} of {t}"
                );
            }
            if share == 0.0 {
                assert!(picks.iter().all(|&p| !p));
            }
            if share == 1.0 {
                assert!(picks.iter().all(|&p| p));
            }
        }
        // One frame in four, evenly spread.
        let mut b = Blend::new(0.25);
        let picks: Vec<bool> = (0..8).map(|_| b.next(100)).collect();
        assert_eq!(
            picks,
            [false, true, false, false, false, true, false, false]
        );
    }
}
