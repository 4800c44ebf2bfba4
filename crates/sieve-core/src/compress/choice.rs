//! `--compress auto|accent|off|zstd:N`: what the user chose for the plain channels.

use std::fmt;
use std::str::FromStr;

use super::codec::{Codec, MAX_LEVEL, MIN_LEVEL};

/// How the cleartext is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Our policy ([`super::Auto`]): off or a level, from measured speeds, ratios and the link.
    #[default]
    Auto,
    /// ACCENT's policy ([`super::Accent`]): FSCN's scheme and TTSC's blend.
    Accent,
    /// Never compress.
    Off,
    /// Always this codec and level (frames that do not shrink still go raw).
    Fixed(Codec),
}

/// Why a `--compress` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadCompression {
    /// Not one of the forms.
    #[error(
        "unknown compression '{0}': use auto, accent, off or zstd:N (N from 1 to 22, or -7 to -1)"
    )]
    Unknown(String),
    /// `zstd:` with a level out of range or not a number.
    #[error("'{0}' has no valid zstd level: use zstd:N with N from {MIN_LEVEL} to -1 or 1 to {MAX_LEVEL}")]
    Level(String),
}

impl FromStr for Compression {
    type Err = BadCompression;

    fn from_str(s: &str) -> Result<Compression, BadCompression> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "auto" => return Ok(Compression::Auto),
            "accent" => return Ok(Compression::Accent),
            "off" | "none" => return Ok(Compression::Off),
            _ => {}
        }
        let Some((name, level)) = t.split_once(':') else {
            return Err(BadCompression::Unknown(s.to_owned()));
        };
        if !name.eq_ignore_ascii_case("zstd") {
            return Err(BadCompression::Unknown(s.to_owned()));
        }
        level
            .trim()
            .parse::<i32>()
            .ok()
            .and_then(|l| Codec::zstd(l).ok())
            .map(Compression::Fixed)
            .ok_or_else(|| BadCompression::Level(s.to_owned()))
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::Auto => f.write_str("auto"),
            Compression::Accent => f.write_str("accent"),
            Compression::Off => f.write_str("off"),
            Compression::Fixed(c) => write!(f, "{c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_displays_back() {
        for (s, want) in [
            ("auto", Compression::Auto),
            ("accent", Compression::Accent),
            ("off", Compression::Off),
            ("zstd:1", Compression::Fixed(Codec::zstd(1).unwrap())),
            ("zstd:19", Compression::Fixed(Codec::zstd(19).unwrap())),
            ("zstd:22", Compression::Fixed(Codec::zstd(22).unwrap())),
            ("zstd:-7", Compression::Fixed(Codec::zstd(-7).unwrap())),
        ] {
            let got: Compression = s.parse().unwrap();
            assert_eq!(got, want);
            assert_eq!(got.to_string(), s);
        }
        assert_eq!(
            " ZSTD:3 ".parse(),
            Ok(Compression::Fixed(Codec::zstd(3).unwrap()))
        );
        assert_eq!("none".parse(), Ok(Compression::Off));
        assert_eq!("Auto".parse(), Ok(Compression::Auto));
        assert_eq!(Compression::default(), Compression::Auto);
    }

    #[test]
    fn bad_values_say_what_to_write() {
        for s in [
            "zstd:0", "zstd:23", "zstd:-8", "zstd:", "zstd:x", "zstd:1.5",
        ] {
            let e = s.parse::<Compression>().unwrap_err();
            assert_eq!(e, BadCompression::Level(s.into()));
            assert!(e.to_string().contains("zstd:N"), "{e}");
        }
        for s in ["", "lz4", "gzip:9", "zstd", "fast"] {
            let e = s.parse::<Compression>().unwrap_err();
            assert_eq!(e, BadCompression::Unknown(s.into()));
            assert!(e.to_string().contains("auto, accent, off or zstd:N"), "{e}");
        }
    }
}
