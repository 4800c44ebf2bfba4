//! How large the sender cuts its data frames: the chunk of the dynamic split, and the most bytes
//! one DATA frame carries.

use crate::budget::stall_free_payload;
use crate::Kind;

/// The chunk of classified bytes, and the smallest chunk of cleartext, that [`Chunk::Auto`]
/// picks.
pub const AUTO_CHUNK_MIN: u32 = 256 << 10;

/// Largest chunk of cleartext [`Chunk::Auto`] picks.
pub const AUTO_CHUNK_MAX: u32 = 4 << 20;

/// How many chunks [`Chunk::Auto`] wants each plain channel to take from the cleartext, so that
/// the dynamic split can still even out channels of different speeds.
pub const AUTO_CHUNKS_PER_CHANNEL: u64 = 8;

/// How large the dynamic split's chunks are; a data frame never holds more than one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Classified bytes in chunks of [`AUTO_CHUNK_MIN`]; cleartext in chunks sized to the
    /// session: its bytes over [`AUTO_CHUNKS_PER_CHANNEL`] chunks per plain channel, within
    /// [`AUTO_CHUNK_MIN`] and [`AUTO_CHUNK_MAX`], and never above what keeps the receiver's
    /// frame-buffer budget safe for sessions of this many channels ([`stall_free_payload`]; 256 KiB
    /// for 16 + 16 channels).
    ///
    /// Why the two kinds differ: every cleartext frame costs a MAC, a socket write and its push
    /// through the TCP stack, a wake-up and a frame's bookkeeping at the receiver, so large
    /// documents want large frames (1 GiB at P = 0.1 over 1 + 1 channels on loopback answered
    /// about 4 % sooner with 4 MiB frames than with 256 KiB ones, 10 order-balanced rounds).
    /// TLS cuts its records at 16 KiB whatever the frame, and secure-only answered no sooner
    /// with larger frames (1.02 [0.89..1.17] of the time with 256 KiB ones), so classified
    /// bytes, and with them the secure-only baseline, keep the small chunk. Documents of the
    /// thesis's sizes (a few MB) need small chunks anyway, to spread over several channels.
    Auto,
    /// This many bytes, for both kinds.
    Bytes(u32),
}

impl Chunk {
    /// The chunk of each kind's stream, indexed by [`Kind::index`], for a session whose streams
    /// hold `bytes[kind]` bytes over `channels[kind]` channels.
    pub fn sizes(self, bytes: [u64; 2], channels: [u64; 2]) -> [u32; 2] {
        match self {
            Chunk::Bytes(n) => [n, n],
            Chunk::Auto => {
                let plain = Kind::Plain.index();
                let min = u64::from(AUTO_CHUNK_MIN);
                let max = stall_free_payload(channels.iter().sum())
                    .min(u64::from(AUTO_CHUNK_MAX))
                    .max(min);
                let per_channel =
                    bytes[plain].div_ceil(channels[plain].max(1) * AUTO_CHUNKS_PER_CHANNEL);
                // Whole 64 KiB units (`min` is one, so the cap never falls below it).
                let unit = 64 << 10;
                let n = per_channel
                    .next_multiple_of(unit)
                    .clamp(min, max / unit * unit);
                let mut sizes = [AUTO_CHUNK_MIN; 2];
                sizes[plain] = u32::try_from(n).unwrap_or(AUTO_CHUNK_MIN);
                sizes
            }
        }
    }
}

impl std::str::FromStr for Chunk {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Chunk::Auto);
        }
        let n = crate::gen::parse_size(s)?;
        if !(1024..=(8 << 20)).contains(&n) {
            return Err(format!("chunk size {s} is outside 1KiB..8MiB"));
        }
        Ok(Chunk::Bytes(n as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::{Chunk, AUTO_CHUNK_MAX, AUTO_CHUNK_MIN};
    use crate::budget::{stall_free_buffer_bytes, FRAME_BUFFER_KIB};
    use crate::message::{DATA_PREFIX_LEN, MAX_CHANNELS, MAX_PLAIN_CHANNELS, MAX_SECURE_CHANNELS};

    const GIB: u64 = 1 << 30;

    #[test]
    fn auto_chunk_grows_with_each_plain_channels_share() {
        // [plain, secure], as `Kind::index`.
        let auto =
            |plain: u64, secure: u64, m: u64, n: u64| Chunk::Auto.sizes([plain, secure], [m, n]);
        let small = AUTO_CHUNK_MIN;
        // The benchmark's 1 GiB at P = 0.1 over 1 + 1 channels: large cleartext frames,
        // classified ones as small as ever; secure-only is not changed at all.
        assert_eq!(
            auto(GIB - GIB / 10, GIB / 10, 1, 1),
            [AUTO_CHUNK_MAX, small]
        );
        assert_eq!(auto(0, GIB, 0, 1), [small, small]);
        // The thesis's sizes: 1 MB over 1 + 1 channels keeps small chunks; 10 MB at P = 0.1
        // over 3 + 3 gives each plain channel eight chunks of 384 KiB.
        assert_eq!(auto(9_000_000, 1_000_000, 3, 3), [384 << 10, small]);
        assert_eq!(auto(900_000, 100_000, 1, 1), [small, small]);
        // In between: 40 MB of cleartext over 2 channels is 2.5 MB per chunk, in 64 KiB units.
        assert_eq!(auto(40_000_000, 400_000_000, 2, 1), [2_555_904, small]);
        // Nothing to send, or an explicit size for both kinds.
        assert_eq!(auto(0, 0, 1, 1), [small, small]);
        assert_eq!(Chunk::Bytes(5000).sizes([GIB, GIB], [1, 1]), [5000, 5000]);
    }

    #[test]
    fn auto_chunks_keep_the_receivers_honest_budget() {
        // However many channels, a session's frames (all but one channel's) take no more of the
        // receiver's budget than 31 channels of 256 KiB frames, the case `stall_free_buffer_bytes`
        // is computed for; so that bound still rules out honest sessions stalling each other.
        let per_session = stall_free_buffer_bytes(1) - (FRAME_BUFFER_KIB << 10);
        let buffer = |c: u32| (u64::from(c) + DATA_PREFIX_LEN as u64).div_ceil(1024) * 1024;
        for n in 1..=u64::from(MAX_SECURE_CHANNELS) {
            for m in 0..=u64::from(MAX_PLAIN_CHANNELS) {
                let [plain, secure] = Chunk::Auto.sizes([GIB * 4, GIB * 4], [m, n]);
                let held = if m == 0 {
                    (n - 1) * buffer(secure)
                } else {
                    // The worst case: the one channel without a buffer is a secure one.
                    (n - 1) * buffer(secure) + m * buffer(plain)
                };
                assert!(
                    held <= per_session,
                    "{n} + {m} channels: {plain}-byte chunks"
                );
                assert!(
                    plain >= AUTO_CHUNK_MIN && plain % (64 << 10) == 0,
                    "{plain}"
                );
            }
        }
        assert_eq!(
            Chunk::Auto.sizes([GIB, GIB], [16, 16]),
            [256 << 10, 256 << 10]
        );
        assert_eq!(MAX_CHANNELS, 32);
    }

    #[test]
    fn chunk_parses_auto_and_sizes() {
        assert_eq!("auto".parse::<Chunk>().unwrap(), Chunk::Auto);
        assert_eq!("1MiB".parse::<Chunk>().unwrap(), Chunk::Bytes(1 << 20));
        assert!("512".parse::<Chunk>().unwrap_err().contains("1KiB..8MiB"));
        assert!("9MiB".parse::<Chunk>().is_err());
        assert!("lots".parse::<Chunk>().is_err());
    }
}
