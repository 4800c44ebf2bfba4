//! The policy a sender runs, whichever the user chose (`--compress auto|accent|off|zstd:N`), behind
//! one interface: per frame, raw or a level; per quantum, the measurements in.
//!
//! The transport measures (CPU time of each compression, the sockets' drain) and carries out the
//! answers (compress on a worker, send raw); nothing here holds a clock or a socket.

use super::accent::{Accent, AccentDecision, Phase1, SenderQuantum};
use super::auto::{Auto, AutoConfig, CompressSample, FrameChoice, LinkSample, ReceiverSample};
use super::choice::Compression;
use super::codec::Codec;

/// What one quantum measured, for whichever policy runs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Quantum {
    /// The plain sockets' activity (`auto`).
    pub link: LinkSample,
    /// ACCENT's view of the same quantum: TD from the bytes drained, CD and CR from what was
    /// compressed, ED from what went raw.
    pub accent: SenderQuantum,
}

/// A running policy.
#[derive(Debug, Clone)]
pub enum Policy {
    /// Never compress.
    Off,
    /// Always this level (frames that do not shrink by 5 % still go raw), on up to `cores`.
    Fixed {
        /// The level.
        codec: Codec,
        /// Cores that may compress.
        cores: u32,
    },
    /// Ours.
    Auto(Auto),
    /// ACCENT's, with the cores it may compress on.
    Accent(Accent, u32),
}

impl Policy {
    /// The policy for the user's `choice`, compressing on at most `cores` cores. ACCENT needs its
    /// Phase 1 profile (`phase1`); without one it cannot run, and compression stays off.
    pub fn new(choice: Compression, cores: u32, phase1: Option<Phase1>) -> Policy {
        let cores = cores.max(1);
        match choice {
            Compression::Off => Policy::Off,
            Compression::Fixed(codec) => Policy::Fixed { codec, cores },
            Compression::Auto => Policy::Auto(Auto::new(AutoConfig::with_cores(cores))),
            Compression::Accent => match phase1 {
                Some(p) => Policy::Accent(Accent::new(p, ACCENT_OMEGA), cores),
                None => Policy::Off,
            },
        }
    }

    /// Whether this policy may ever compress (`Off` never does: the sender then keeps its
    /// uncompressed path).
    pub fn may_compress(&self) -> bool {
        !matches!(self, Policy::Off)
    }

    /// Raw or a level for the next frame of `len` bytes.
    pub fn next_frame(&mut self, len: u64) -> FrameChoice {
        match self {
            Policy::Off => FrameChoice {
                codec: None,
                probe: false,
            },
            Policy::Fixed { codec, .. } => FrameChoice {
                codec: Some(*codec),
                probe: false,
            },
            Policy::Auto(a) => a.next_frame(len),
            Policy::Accent(a, _) => FrameChoice {
                codec: a.next_frame(len),
                probe: false,
            },
        }
    }

    /// A frame was compressed.
    pub fn observe_compress(&mut self, s: CompressSample) {
        if let Policy::Auto(a) = self {
            a.observe_compress(s);
        }
    }

    /// The level a frame at `codec` should also be compressed at, to be measured against it
    /// (`auto` only: see [`Auto::pair_for`]).
    pub fn pair_for(&self, codec: Codec) -> Option<Codec> {
        match self {
            Policy::Auto(a) => a.pair_for(codec),
            _ => None,
        }
    }

    /// A frame compressed at `main` and, for measurement, at the anchor ([`Auto::observe_pair`]).
    pub fn observe_pair(&mut self, main: CompressSample, anchor: CompressSample) {
        if let Policy::Auto(a) = self {
            a.observe_pair(main, anchor);
        }
    }

    /// The path's round trip in seconds, measured by the transport when it connected; `auto`
    /// sizes its first frames by it ([`Auto::observe_rtt`]).
    pub fn observe_rtt(&mut self, rtt_s: f64) {
        if let Policy::Auto(a) = self {
            a.observe_rtt(rtt_s);
        }
    }

    /// Start `auto` at `codec`, the level the last session to the same receiver kept (see
    /// [`Auto::resume`]); the other policies start as they always do.
    pub fn resume(&mut self, codec: Codec, anchor_ratio: Option<f64>) {
        if let Policy::Auto(a) = self {
            a.resume(codec, anchor_ratio);
        }
    }

    /// The level the next session to this receiver should start at (`auto`: see
    /// [`Auto::level_to_keep`]; the others: the level in force).
    pub fn level_to_keep(&self) -> Option<Codec> {
        match self {
            Policy::Auto(a) => a.level_to_keep(),
            _ => self.current(),
        }
    }

    /// What `auto`'s anchor level made of this session's data (see [`Auto::anchor_ratio`]).
    pub fn anchor_ratio(&self) -> Option<f64> {
        match self {
            Policy::Auto(a) => a.anchor_ratio(),
            _ => None,
        }
    }

    /// The receiver's decompression speed (from its SESSION): `mbps` plain MB/s per core, on
    /// `cores` cores. ACCENT floats its receiver scale with it for every compressing scheme;
    /// `auto` caps every level's rate by it.
    pub fn observe_receiver(&mut self, mbps: u32, cores: u8) {
        if mbps == 0 {
            return;
        }
        let per_core = f64::from(mbps) * 1e6;
        match self {
            Policy::Auto(a) => a.observe_receiver(ReceiverSample {
                decompressed: (per_core as u64).max(1),
                cpu_s: 1.0,
                cores: u32::from(cores.max(1)),
            }),
            Policy::Accent(a, _) => a.set_receiver_speed(per_core),
            _ => {}
        }
    }

    /// End of a quantum: the level for the next one (`None`: raw).
    pub fn end_quantum(&mut self, q: &Quantum) -> Option<Codec> {
        match self {
            Policy::Off => None,
            Policy::Fixed { codec, .. } => Some(*codec),
            Policy::Auto(a) => {
                a.observe_link(q.link);
                a.decide().codec
            }
            Policy::Accent(a, _) => {
                let AccentDecision { codec, .. } = a.end_quantum(&q.accent);
                codec
            }
        }
    }

    /// The level in force (`None`: raw).
    pub fn current(&self) -> Option<Codec> {
        match self {
            Policy::Off => None,
            Policy::Fixed { codec, .. } => Some(*codec),
            Policy::Auto(a) => a.decision().codec,
            Policy::Accent(a, _) => a.decision().codec,
        }
    }

    /// How many frames may be compressing at once: as few workers as keep the link busy
    /// (`auto`), else every core allowed.
    pub fn workers(&self) -> u32 {
        match self {
            Policy::Off => 0,
            Policy::Fixed { cores, .. } | Policy::Accent(_, cores) => *cores,
            Policy::Auto(a) => a.decision().workers.max(1),
        }
    }

    /// How many frames may be planned ahead of the one being written: as many as may be
    /// compressing, except while `auto` waits for a resumed level's data check (see
    /// [`Auto::check_out`]), when none is.
    pub fn ahead(&self) -> u32 {
        match self {
            Policy::Auto(a) if a.check_out() => 0,
            _ => self.workers().max(1),
        }
    }

    /// Most plain bytes the next frame at `codec` should hold (`None`: the transport's chunk).
    /// Only `auto` cuts its frames (see [`Auto::frame_limit`]); a fixed level and ACCENT compress
    /// whole chunks, as the user or the paper chose.
    pub fn frame_limit(&self, codec: Codec) -> Option<u64> {
        match self {
            Policy::Auto(a) => a.frame_limit(codec),
            _ => None,
        }
    }

    /// A choice made between quanta, if the policy has one (`auto`, once a level was measured
    /// for the first time: see [`Auto::redecide`]); `None` keeps the current choice.
    pub fn redecide(&mut self) -> Option<Option<Codec>> {
        match self {
            Policy::Auto(a) => a.redecide().map(|d| d.codec),
            _ => None,
        }
    }

    /// Whether the policy still waits for the link's first measurement to choose: only `auto`
    /// does (a fixed level and ACCENT start as they will go on).
    pub fn exploring(&self) -> bool {
        matches!(self, Policy::Auto(a) if !a.link_measured())
    }

    /// The link's rate as the policy sees it, wire bytes per second.
    pub fn link_rate(&self) -> Option<f64> {
        match self {
            Policy::Auto(a) => a.link_rate(),
            Policy::Accent(a, _) => Some(a.decision().td).filter(|&t| t > 0.0),
            _ => None,
        }
    }
}

/// ACCENT's sliding window (Algorithm 1): ω + 1 quanta. The paper evaluated small windows for
/// quick adaptation; 2 (three quanta, 0.6 s at its 200 ms quantum) ignores one-quantum spikes.
pub(crate) const ACCENT_OMEGA: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::accent::SchemeProfile;

    /// Only `auto` explores, and only until its first quantum with the link's queue standing.
    #[test]
    fn auto_explores_until_the_link_is_measured() {
        let z3 = Codec::zstd(3).unwrap();
        assert!(!Policy::new(Compression::Fixed(z3), 2, None).exploring());
        assert!(!Policy::new(Compression::Off, 2, None).exploring());
        let mut auto = Policy::new(Compression::Auto, 2, None);
        assert!(auto.exploring());
        let idle = LinkSample {
            drained: 1000,
            own_drained: 1000,
            elapsed_s: 0.1,
            ..LinkSample::default()
        };
        auto.end_quantum(&Quantum {
            link: idle,
            accent: SenderQuantum::default(),
        });
        assert!(
            auto.exploring(),
            "a quantum without a standing queue measures nothing"
        );
        let busy = LinkSample {
            drained: 1_250_000,
            own_drained: 1_250_000,
            elapsed_s: 0.1,
            busy_s: 0.1,
            busy_drained: 1_250_000,
            ..LinkSample::default()
        };
        auto.end_quantum(&Quantum {
            link: busy,
            accent: SenderQuantum::default(),
        });
        assert!(!auto.exploring());
    }

    #[test]
    fn each_choice_runs_its_policy() {
        let z3 = Codec::zstd(3).unwrap();
        let mut off = Policy::new(Compression::Off, 2, None);
        assert!(!off.may_compress());
        assert_eq!(off.next_frame(100).codec, None);
        assert_eq!(off.workers(), 0);
        let mut fixed = Policy::new(Compression::Fixed(z3), 2, None);
        assert_eq!(fixed.next_frame(100).codec, Some(z3));
        assert_eq!(fixed.end_quantum(&Quantum::default()), Some(z3));
        assert_eq!(fixed.workers(), 2);
        let auto = Policy::new(Compression::Auto, 4, None);
        assert_eq!(auto.current(), Some(Codec::zstd(1).unwrap()));
        // ACCENT without its profile cannot choose: off.
        assert!(!Policy::new(Compression::Accent, 2, None).may_compress());
    }

    /// Frames planned ahead: one per worker, none while `auto` waits for a resumed level's
    /// data check.
    #[test]
    fn nothing_is_planned_ahead_of_a_data_check() {
        let z9 = Codec::zstd(9).unwrap();
        let fixed = Policy::new(Compression::Fixed(z9), 2, None);
        assert_eq!(fixed.ahead(), 2);
        let mut auto = Policy::new(Compression::Auto, 2, None);
        auto.resume(z9, Some(0.58));
        assert_eq!(auto.ahead(), 1, "one core until the check");
        assert_eq!(auto.next_frame(4 << 20).codec, Some(z9));
        assert_eq!(auto.ahead(), 0, "the check frame is out");
        let sample = |level: i32, ratio: f64, cpu_s: f64| CompressSample {
            codec: Codec::zstd(level).unwrap(),
            plain: 256 << 10,
            compressed: (f64::from(256 << 10) * ratio) as u64,
            cpu_s,
        };
        auto.observe_pair(sample(9, 0.62, 0.004), sample(1, 0.58, 0.0006));
        assert_eq!(auto.ahead(), 2, "alike: every core");
    }

    /// ACCENT through the policy: a slow link (TD = 50 MB/s) picks the strong level, and a
    /// receiver that decompresses slowly makes it weaker.
    #[test]
    fn accent_follows_the_link_and_the_receiver() {
        const MB: f64 = 1e6;
        let phase1 = || Phase1 {
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
        };
        let q = |td: f64| Quantum {
            accent: SenderQuantum {
                elapsed_s: 1.0,
                drained: (td * MB) as u64,
                ..SenderQuantum::default()
            },
            ..Quantum::default()
        };
        let mut p = Policy::new(Compression::Accent, 2, Some(phase1()));
        assert_eq!(p.current(), None);
        assert_eq!(p.end_quantum(&q(50.0)).map(Codec::level), Some(19));
        assert_eq!(p.workers(), 2);
        // At TD = 700 zstd 1 is chosen (the worked example of `accent`), but not for a receiver
        // that decompresses 100 MB/s: CI^R of zstd 1 falls to 145.2 and of zstd 19 to 172.6,
        // and "off" (distance 424) is nearest.
        let mut fast_rx = Policy::new(Compression::Accent, 2, Some(phase1()));
        assert_eq!(fast_rx.end_quantum(&q(700.0)).map(Codec::level), Some(1));
        let mut slow_rx = Policy::new(Compression::Accent, 2, Some(phase1()));
        slow_rx.observe_receiver(100, 1);
        assert_eq!(slow_rx.end_quantum(&q(700.0)), None);
    }
}
