//! `--compress accent`: ACCENT's policy (Park and Park, 2011), FSCN choosing the scheme each time
//! quantum and TTSC blending compressed and raw frames within it, as a state machine fed with
//! measurements.
//!
//! The paper's FSCN with TTSC reached 96.48 % of the ideal scheme's rate. We keep its policy as
//! written (see [`super::ttsc`] and [`super::fscn`] for the equations and the two places where
//! the printed formulas had to be read rather than copied), so the laboratory can put it beside
//! our own [`super::auto`] on the same links and bytes. What changes is what the schemes are:
//! no compression and zstd at a few levels instead of RLE, lzo, gzip and bzip, and "encryption"
//! is the plain channel's own encoding (tag and send) since the plain channels are not encrypted.
//! UMAC, the third mechanism, is the [`super::Encoder`] keeping one zstd context across switches.
//!
//! No clock here: the caller measures every quantum (q seconds, 200 ms in the paper's
//! evaluation) and hands in byte counts and elapsed CPU and wall times.

use super::codec::Codec;
use super::fscn::{computation_index, select, FloatingScale};
use super::ttsc::{split, Blend, Monitor};

/// One encoding scheme's Phase 1 profile (micro-benchmark), rates in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchemeProfile {
    /// `None`: no compression.
    pub codec: Option<Codec>,
    /// CD_δ: the sender's compression rate (plain bytes per second).
    pub cd: f64,
    /// CR: compressed / original.
    pub cr: f64,
    /// The receiver's decompression rate (plain bytes out per second), its CD_δ.
    pub dd: f64,
}

impl SchemeProfile {
    /// No compression: CR = 1, and no compression or decompression cost.
    pub fn off() -> SchemeProfile {
        SchemeProfile {
            codec: None,
            cd: f64::INFINITY,
            cr: 1.0,
            dd: f64::INFINITY,
        }
    }
}

/// Phase 1: every scheme's profile and both ends' encoding rates.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase1 {
    /// The schemes (no compression among them, if it is to be a choice).
    pub schemes: Vec<SchemeProfile>,
    /// ED of the sender: plain bytes per second through tagging and sending, uncompressed.
    pub ed: f64,
    /// ED of the receiver: plain bytes per second through checking and placing.
    pub ed_receiver: f64,
}

/// What the sender measured in one quantum.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SenderQuantum {
    /// Wall time of the quantum, seconds.
    pub elapsed_s: f64,
    /// Bytes the plain sockets drained (TD = this / `elapsed_s`).
    pub drained: u64,
    /// Plain bytes handed to the compressor.
    pub compress_in: u64,
    /// Bytes it produced.
    pub compress_out: u64,
    /// CPU time it took, seconds.
    pub compress_cpu_s: f64,
    /// Plain bytes sent uncompressed (ED = this / `raw_cpu_s`).
    pub raw: u64,
    /// CPU time tagging and sending them took, seconds.
    pub raw_cpu_s: f64,
}

/// What the receiver measured in one quantum, for one scheme (Phase 2 at the receiver; Phase 3
/// brings it here).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReceiverQuantum {
    /// The scheme the measured frames used (`None`: uncompressed frames).
    pub codec: Option<Codec>,
    /// Plain bytes decompressed.
    pub decompressed: u64,
    /// CPU time decompressing took, seconds.
    pub decompress_cpu_s: f64,
    /// Plain bytes checked (tag) and placed.
    pub checked: u64,
    /// CPU time that took, seconds.
    pub check_cpu_s: f64,
}

/// The policy for the next quantum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccentDecision {
    /// The scheme FSCN chose.
    pub codec: Option<Codec>,
    /// TTSC's α for it.
    pub alpha: f64,
    /// S_CE / S: the share of bytes to compress (eq. 2).
    pub share: f64,
    /// The TD the choice was made for.
    pub td: f64,
}

/// ACCENT's state: both floating scales, the schemes' latest rates, the current scheme and the
/// blend of the current quantum.
#[derive(Debug, Clone)]
pub struct Accent {
    schemes: Vec<SchemeProfile>,
    ed: f64,
    ed_receiver: f64,
    fs_s: FloatingScale,
    fs_r: FloatingScale,
    current: usize,
    decision: AccentDecision,
    blend: Blend,
}

/// Eq. 3 for a scheme, given an ED: "no compression" is ED itself.
fn ci(cd: f64, cr: f64, ed: f64) -> f64 {
    if cd.is_infinite() {
        ed
    } else {
        computation_index(cd, cr, ed)
    }
}

impl Accent {
    /// Phase 1: both scales from the profile, averaging over ω + 1 quanta (Algorithm 1).
    ///
    /// Starts with the first scheme that does not compress (or the first scheme), α = 0, until
    /// the first quantum measures TD.
    ///
    /// # Panics
    ///
    /// If there are no schemes.
    pub fn new(phase1: Phase1, omega: usize) -> Accent {
        assert!(
            !phase1.schemes.is_empty(),
            "ACCENT needs at least one scheme"
        );
        let fs_s = phase1
            .schemes
            .iter()
            .map(|s| ci(s.cd, s.cr, phase1.ed))
            .collect();
        let fs_r = phase1
            .schemes
            .iter()
            .map(|s| ci(s.dd, s.cr, phase1.ed_receiver))
            .collect();
        let current = phase1
            .schemes
            .iter()
            .position(|s| s.codec.is_none())
            .unwrap_or(0);
        Accent {
            decision: AccentDecision {
                codec: phase1.schemes[current].codec,
                alpha: 0.0,
                share: 0.0,
                td: 0.0,
            },
            schemes: phase1.schemes,
            ed: phase1.ed,
            ed_receiver: phase1.ed_receiver,
            fs_s: FloatingScale::new(fs_s, omega),
            fs_r: FloatingScale::new(fs_r, omega),
            current,
            blend: Blend::new(0.0),
        }
    }

    /// The decision in force.
    pub fn decision(&self) -> AccentDecision {
        self.decision
    }

    /// FS^S and FS^R.
    pub fn scales(&self) -> (&[f64], &[f64]) {
        (self.fs_s.values(), self.fs_r.values())
    }

    /// TTSC within the quantum: compress the next frame of `len` bytes (with this codec), or send
    /// it raw (`None`).
    pub fn next_frame(&mut self, len: u64) -> Option<Codec> {
        let codec = self.decision.codec?;
        self.blend.next(len).then_some(codec)
    }

    /// Phase 3: the receiver's measurements of a quantum float FS^R (Algorithm 1 at the
    /// receiver, its result exchanged).
    pub fn observe_receiver(&mut self, r: &ReceiverQuantum) {
        if r.check_cpu_s > 0.0 && r.checked > 0 {
            self.ed_receiver = r.checked as f64 / r.check_cpu_s;
        }
        let Some(index) = self.schemes.iter().position(|s| s.codec == r.codec) else {
            return;
        };
        if r.codec.is_some() && r.decompress_cpu_s > 0.0 && r.decompressed > 0 {
            self.schemes[index].dd = r.decompressed as f64 / r.decompress_cpu_s;
        }
        let s = self.schemes[index];
        self.fs_r.update(index, ci(s.dd, s.cr, self.ed_receiver));
    }

    /// Phase 3 from a single figure: the receiver decompresses `dd` plain bytes per second
    /// whatever the scheme (zstd decodes every level at about the same speed), as its SESSION
    /// says. Every compressing scheme's receiver index is computed afresh from it (eq. 3).
    pub(crate) fn set_receiver_speed(&mut self, dd: f64) {
        if dd.is_nan() || dd <= 0.0 {
            return;
        }
        for s in &mut self.schemes {
            if s.codec.is_some() {
                s.dd = dd;
            }
        }
        let fs_r = self
            .schemes
            .iter()
            .map(|s| ci(s.dd, s.cr, self.ed_receiver))
            .collect();
        self.fs_r = FloatingScale::new(fs_r, self.fs_r.omega());
    }

    /// End of a quantum: Algorithm 1 on FS^S with what the current scheme measured, Algorithm 2
    /// for the next scheme, eq. 1-2 for its blend.
    pub fn end_quantum(&mut self, q: &SenderQuantum) -> AccentDecision {
        if q.raw_cpu_s > 0.0 && q.raw > 0 {
            self.ed = q.raw as f64 / q.raw_cpu_s;
        }
        let cur = &mut self.schemes[self.current];
        if cur.codec.is_some() && q.compress_cpu_s > 0.0 && q.compress_in > 0 {
            cur.cd = q.compress_in as f64 / q.compress_cpu_s;
            cur.cr = q.compress_out as f64 / q.compress_in as f64;
        }
        let (cd, cr) = (cur.cd, cur.cr);
        self.fs_s.update(self.current, ci(cd, cr, self.ed));

        if q.elapsed_s.is_nan() || q.elapsed_s <= 0.0 {
            return self.decision;
        }
        let td = q.drained as f64 / q.elapsed_s;
        let next = select(self.fs_s.values(), self.fs_r.values(), td).unwrap_or(self.current);
        self.current = next;
        let s = self.schemes[next];
        let (alpha, share) = match s.codec {
            None => (0.0, 0.0),
            Some(_) => {
                let m = Monitor {
                    td,
                    ed: self.ed,
                    cd: s.cd,
                    cr: s.cr,
                };
                let alpha = m.alpha();
                // S_CE / S from eq. 2 (computed on a large S so that rounding does not show).
                const S: u64 = 1 << 40;
                (alpha, split(alpha, S, s.cd, td).0 as f64 / S as f64)
            }
        };
        self.decision = AccentDecision {
            codec: s.codec,
            alpha,
            share,
            td,
        };
        self.blend = Blend::new(share);
        self.decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-4 * b.abs().max(1.0), "{a} vs {b}");
    }

    /// The worked example, rates in MB/s, ED = ED_R = 1000:
    ///
    /// | scheme | CD | CR | DD | CI^S (eq. 3) | CI^R (eq. 3) |
    /// |---|---|---|---|---|---|
    /// | off | ∞ | 1 | ∞ | 1000 | 1000 |
    /// | A = zstd 1 | 400 | 0.5 | 800 | 333.33 + 200 = 533.33 | 571.43 + 400 = 971.43 |
    /// | B = zstd 19 | 20 | 0.25 | 400 | 19.900 + 15 = 34.900 | 363.64 + 300 = 663.64 |
    fn example() -> Accent {
        Accent::new(
            Phase1 {
                schemes: vec![
                    SchemeProfile::off(),
                    SchemeProfile {
                        codec: Some(Codec::zstd(1).unwrap()),
                        cd: 400.0 * MB,
                        cr: 0.5,
                        dd: 800.0 * MB,
                    },
                    SchemeProfile {
                        codec: Some(Codec::zstd(19).unwrap()),
                        cd: 20.0 * MB,
                        cr: 0.25,
                        dd: 400.0 * MB,
                    },
                ],
                ed: 1000.0 * MB,
                ed_receiver: 1000.0 * MB,
            },
            0,
        )
    }

    /// A quantum of one second that drained `td` MB and measured nothing else.
    fn drained(td: f64) -> SenderQuantum {
        SenderQuantum {
            elapsed_s: 1.0,
            drained: (td * MB) as u64,
            ..SenderQuantum::default()
        }
    }

    #[test]
    fn phase_1_scales() {
        let a = example();
        let (s, r) = a.scales();
        for (got, want) in s.iter().zip([1000.0, 533.333, 34.900]) {
            close(*got / MB, want);
        }
        for (got, want) in r.iter().zip([1000.0, 971.429, 663.636]) {
            close(*got / MB, want);
        }
        assert_eq!(a.decision().codec, None);
    }

    /// TD = 50: distances off 1343.5, A 1040.5, B 613.8 → B. TTSC: CED = 19.900 < 50 < ED, so
    /// α = (1000 − 50) / (1000 − 19.900) = 0.969289 and S_CE/S = α·20/50 = 0.387716.
    ///
    /// TD = 700: off 424.3, A 318.5, B 666.1 → A; α = 300 / 666.67 = 0.45,
    /// S_CE/S = 0.45·400/700 = 0.257143.
    ///
    /// TD = 1200: off 282.8, A 704.8 → off; nothing is compressed.
    #[test]
    fn three_links_three_schemes() {
        let mut a = example();
        let d = a.end_quantum(&drained(50.0));
        assert_eq!(d.codec.map(Codec::level), Some(19));
        close(d.alpha, 0.969_289);
        close(d.share, 0.387_716);

        let mut a = example();
        let d = a.end_quantum(&drained(700.0));
        assert_eq!(d.codec.map(Codec::level), Some(1));
        close(d.alpha, 0.45);
        close(d.share, 0.257_143);
        // The blend compresses that share of the frames' bytes.
        let picks = (0..7000).filter(|_| a.next_frame(1000).is_some()).count();
        assert!((picks as f64 / 7000.0 - 0.257_143).abs() < 0.001, "{picks}");

        let mut a = example();
        let d = a.end_quantum(&drained(1200.0));
        assert_eq!((d.codec, d.alpha, d.share), (None, 0.0, 0.0));
        assert!((0..100).all(|_| a.next_frame(1000).is_none()));
    }

    /// Algorithm 1 within the policy. At TD = 700 scheme A runs; then the CPU gets busy and A
    /// measures CD = 200 (CR 0.5): CI^S = 200·1000/1100 + 100 = 281.82, so with ω = 0 FS^S
    /// floats by −251.52 to (748.48, 281.82, −216.6). At TD = 700 again: off at
    /// √(48.48² + 300²) = 303.9, A at √(418.18² + 271.43²) = 498.6 → off.
    #[test]
    fn a_busy_cpu_floats_the_scale_and_turns_compression_off() {
        let mut a = example();
        assert_eq!(
            a.end_quantum(&drained(700.0)).codec.map(Codec::level),
            Some(1)
        );
        let d = a.end_quantum(&SenderQuantum {
            compress_in: (200.0 * MB) as u64,
            compress_out: (100.0 * MB) as u64,
            compress_cpu_s: 1.0,
            ..drained(700.0)
        });
        let (s, _) = a.scales();
        close(s[0] / MB, 748.485);
        close(s[1] / MB, 281.818);
        assert_eq!(d.codec, None);
    }

    /// Phase 3: a receiver that decompresses scheme A at only 100 MB/s floats FS^R: CI^R of A
    /// becomes 100·1000/1050 + 50 = 145.24, a shift of −826.19, so FS^R = (173.81, 145.24,
    /// −162.55). At TD = 700: off √(300² + 526.19²) = 605.7, A √(166.67² + 554.76²) = 579.3,
    /// B √(665.1² + 862.55²) = 1089.2 → A still, but off is now almost as near.
    #[test]
    fn the_receiver_scale_floats_too() {
        let mut a = example();
        a.observe_receiver(&ReceiverQuantum {
            codec: Some(Codec::zstd(1).unwrap()),
            decompressed: (100.0 * MB) as u64,
            decompress_cpu_s: 1.0,
            ..ReceiverQuantum::default()
        });
        let (_, r) = a.scales();
        close(r[1] / MB, 145.238);
        close(r[0] / MB, 173.810);
        assert_eq!(
            a.end_quantum(&drained(700.0)).codec.map(Codec::level),
            Some(1)
        );
    }
}
