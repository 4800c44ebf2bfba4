//! What compression a session may use: one byte in [`super::Hello`] (what the sender may send)
//! and in [`super::SessionMsg`] (what the receiver accepts of that).
//!
//! Two kinds of compressed frames ([`super::ZData`]) exist, and each must be agreed on:
//!
//! - [`CompressFlags::PLAIN`]: cleartext frames on the plain channels. They hold public bytes
//!   only, so compressing them leaks nothing an observer does not already read.
//! - [`CompressFlags::CLASSIFIED`]: classified frames inside TLS, each holding bytes of one
//!   classified segment only, compressed alone (`sieve send --compress-classified`). The
//!   compressed length of a segment still tells an observer how well that segment compresses:
//!   off unless the user asks for it.
//!
//! The other six bits are reserved: a message that sets one does not parse, so the encoding stays
//! canonical and a receiver never accepts a kind of frame it does not know.

use std::fmt;

/// A set of the kinds of compressed frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompressFlags(u8);

impl CompressFlags {
    /// No compressed frame at all.
    pub const NONE: CompressFlags = CompressFlags(0);
    /// Compressed cleartext on the plain channels.
    pub const PLAIN: CompressFlags = CompressFlags(1);
    /// Compressed classified segments inside TLS.
    pub const CLASSIFIED: CompressFlags = CompressFlags(2);
    /// Both.
    pub const ALL: CompressFlags = CompressFlags(3);

    /// The flags a byte names, or `None` if it sets a reserved bit.
    pub fn from_byte(b: u8) -> Option<CompressFlags> {
        (b & !Self::ALL.0 == 0).then_some(CompressFlags(b))
    }

    /// The wire byte.
    pub fn byte(self) -> u8 {
        self.0
    }

    /// Whether every kind in `other` is in `self`.
    pub fn contains(self, other: CompressFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The kinds in both.
    pub fn intersect(self, other: CompressFlags) -> CompressFlags {
        CompressFlags(self.0 & other.0)
    }

    /// The kinds in either.
    pub fn union(self, other: CompressFlags) -> CompressFlags {
        CompressFlags(self.0 | other.0)
    }

    /// The flag for compressed frames of one stream kind.
    pub fn of(kind: crate::Kind) -> CompressFlags {
        match kind {
            crate::Kind::Plain => Self::PLAIN,
            crate::Kind::Secure => Self::CLASSIFIED,
        }
    }

    /// Whether compressed frames of `kind` are in the set.
    pub fn allows(self, kind: crate::Kind) -> bool {
        self.contains(Self::of(kind))
    }
}

impl fmt::Display for CompressFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.contains(Self::PLAIN), self.contains(Self::CLASSIFIED)) {
            (false, false) => f.write_str("none"),
            (true, false) => f.write_str("plain"),
            (false, true) => f.write_str("classified"),
            (true, true) => f.write_str("plain+classified"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;

    #[test]
    fn reserved_bits_are_refused_and_sets_combine() {
        for b in 0..=255u8 {
            match CompressFlags::from_byte(b) {
                Some(f) => {
                    assert!(b < 4);
                    assert_eq!(f.byte(), b);
                }
                None => assert!(b >= 4),
            }
        }
        let all = CompressFlags::ALL;
        assert!(all.allows(Kind::Plain) && all.allows(Kind::Secure));
        assert_eq!(all.intersect(CompressFlags::PLAIN), CompressFlags::PLAIN);
        assert_eq!(
            CompressFlags::PLAIN.union(CompressFlags::CLASSIFIED),
            CompressFlags::ALL
        );
        assert!(!CompressFlags::PLAIN.allows(Kind::Secure));
        assert!(!CompressFlags::NONE.allows(Kind::Plain));
        assert_eq!(CompressFlags::ALL.to_string(), "plain+classified");
        assert_eq!(CompressFlags::default(), CompressFlags::NONE);
    }
}
