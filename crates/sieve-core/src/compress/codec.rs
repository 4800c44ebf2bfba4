//! The codec byte of a compressed frame: which compressor, at which level.
//!
//! One byte on the wire, read as a two's-complement `i8`: zstd at that level, for the normal
//! levels `1..=22` and zstd's fast levels `-7..=-1` (`--fast=N` of the `zstd` tool). The decoder
//! does not need the level (any zstd frame decodes the same way), but it travels anyway: the
//! receiver measures its decompression speed per level, which is the receiver's half of ACCENT's
//! floating scale (FSCN phase 3), and it reports the level histogram of a session.
//!
//! One more value names a codec that is not zstd: `0x40`, the field code ([`super::fields`]),
//! which classified frames use for runs of values too short for zstd (`--compress-classified`).
//! A frame's codec byte is read as a [`FrameCodec`]. Every other value (0, -128..=-8, 23..=63,
//! 65..=127) is reserved and refused, so a receiver never guesses how to decode a frame.

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

/// What a compressed frame's codec byte names: zstd at a level (any stream), or the field code
/// (classified runs of short values, see [`super::fields`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameCodec {
    /// zstd at this level.
    Zstd(Codec),
    /// The field code: each byte coded alone with one fixed model.
    Fields,
}

/// A codec byte that names no codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("codec byte {0:#04x} names no codec this protocol carries")]
pub struct UnknownCodec(pub u8);

impl FrameCodec {
    /// The wire byte of [`FrameCodec::Fields`].
    pub const FIELDS_BYTE: u8 = 0x40;

    /// The codec a wire byte names.
    pub fn from_byte(b: u8) -> Result<FrameCodec, UnknownCodec> {
        if b == Self::FIELDS_BYTE {
            return Ok(FrameCodec::Fields);
        }
        Codec::from_byte(b)
            .map(FrameCodec::Zstd)
            .map_err(|_| UnknownCodec(b))
    }

    /// The wire byte.
    pub fn byte(self) -> u8 {
        match self {
            FrameCodec::Zstd(c) => c.byte(),
            FrameCodec::Fields => Self::FIELDS_BYTE,
        }
    }

    /// The zstd level, if zstd.
    pub fn zstd(self) -> Option<Codec> {
        match self {
            FrameCodec::Zstd(c) => Some(c),
            FrameCodec::Fields => None,
        }
    }
}

impl From<Codec> for FrameCodec {
    fn from(c: Codec) -> FrameCodec {
        FrameCodec::Zstd(c)
    }
}

impl fmt::Display for FrameCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameCodec::Zstd(c) => c.fmt(f),
            FrameCodec::Fields => f.write_str("fields"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_one_frame_codec_or_refused() {
        let mut accepted = 0;
        for b in 0..=255u8 {
            if let Ok(c) = FrameCodec::from_byte(b) {
                accepted += 1;
                assert_eq!(c.byte(), b);
                assert_eq!(c.zstd().is_some(), Codec::from_byte(b).is_ok());
            }
        }
        assert_eq!(accepted, 7 + 22 + 1);
        assert_eq!(FrameCodec::from_byte(0x40), Ok(FrameCodec::Fields));
        assert_eq!(FrameCodec::Fields.to_string(), "fields");
        assert_eq!(FrameCodec::from_byte(0), Err(UnknownCodec(0)));
    }

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
