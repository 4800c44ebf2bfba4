//! The codec byte of a compressed frame: which compressor, at which level.
//!
//! One byte on the wire, read as a two's-complement `i8`: zstd at that level, for the normal
//! levels `1..=22` and zstd's fast levels `-7..=-1` (`--fast=N` of the `zstd` tool). The decoder
//! does not need the level (any zstd frame decodes the same way), but it travels anyway: the
//! receiver measures its decompression speed per level, which is the receiver's half of ACCENT's
//! floating scale (seed 004, FSCN phase 3), and it reports the level histogram of a session.
//!
//! Every other value (0, -128..=-8, 23..=127) is reserved for other codecs and refused, so a
//! receiver never guesses how to decode a frame.

use std::fmt;

/// Fastest zstd level the wire accepts (zstd's `--fast=7`).
pub(crate) const MIN_LEVEL: i32 = -7;
/// Strongest zstd level (zstd's `--ultra -22`).
pub(crate) const MAX_LEVEL: i32 = 22;

/// A compressor and level, as the codec byte of a [`crate::message::ZData`] frame names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Codec {
    level: i8,
}

/// A codec byte or level that names no codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} is not a zstd level this protocol carries: use 1 to 22, or -7 to -1 for zstd's fast levels"
)]
pub struct BadLevel(pub i32);

impl Codec {
    /// zstd at `level`, if the wire can carry it.
    pub fn zstd(level: i32) -> Result<Codec, BadLevel> {
        if level == 0 || !(MIN_LEVEL..=MAX_LEVEL).contains(&level) {
            return Err(BadLevel(level));
        }
        Ok(Codec { level: level as i8 })
    }

    /// The codec a wire byte names.
    pub fn from_byte(b: u8) -> Result<Codec, BadLevel> {
        Codec::zstd(i32::from(b as i8))
    }

    /// The wire byte.
    pub fn byte(self) -> u8 {
        self.level as u8
    }

    /// The zstd level.
    pub fn level(self) -> i32 {
        i32::from(self.level)
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zstd:{}", self.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_a_level_or_refused() {
        let mut accepted = 0;
        for b in 0..=255u8 {
            match Codec::from_byte(b) {
                Ok(c) => {
                    accepted += 1;
                    assert_eq!(c.byte(), b);
                    assert_eq!(Codec::zstd(c.level()), Ok(c));
                }
                Err(BadLevel(l)) => {
                    assert!(l == 0 || !(MIN_LEVEL..=MAX_LEVEL).contains(&l), "{l}")
                }
            }
        }
        // -7..=-1 and 1..=22.
        assert_eq!(accepted, 7 + 22);
        assert_eq!(Codec::from_byte(0xff).unwrap().level(), -1);
        assert_eq!(Codec::zstd(19).unwrap().to_string(), "zstd:19");
        assert!(Codec::zstd(23).is_err() && Codec::zstd(-8).is_err() && Codec::zstd(0).is_err());
    }
}
