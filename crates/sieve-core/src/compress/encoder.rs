//! Compressing one plain frame: each frame alone, or raw when it would not shrink.
//!
//! Why every frame is independent: plain frames travel on several channels and arrive in any
//! order; the receiver places each at its offset as it comes. A frame that needed an earlier one
//! to decode would serialize the receiver and tie the channels together. Each frame is one whole
//! zstd frame (with its content size in the header, which the [`super::Decoder`] checks), so any
//! core can decompress any frame the moment it is authenticated.
//!
//! Why keep one context: switching levels is ACCENT's UMAC problem (ACCENT §3.3: freeing and
//! reallocating a compressor's memory at every switch cost 0.24-9 ms). A zstd context changes
//! level in place and keeps its tables allocated, so an [`Encoder`] switches at no cost.

use super::codec::Codec;

/// Compressed over plain size above which a frame goes raw: saving less than 5 % is not worth the
/// receiver's decompression, and incompressible data (already compressed media, random bytes)
/// then costs the receiver nothing.
pub const RAW_ABOVE_RATIO: f64 = 0.95;

/// Why a frame could not be compressed (libzstd failed: out of memory, or a bug).
#[derive(Debug, thiserror::Error)]
#[error("zstd could not compress a frame of {len} bytes at {codec}: {source}; send uncompressed (--compress off) if this persists")]
pub struct CompressError {
    /// Bytes of the frame.
    pub len: usize,
    /// Codec asked for.
    pub codec: Codec,
    /// What libzstd said.
    #[source]
    pub source: std::io::Error,
}

/// What [`Encoder::compress`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoded {
    /// The output buffer holds this many compressed bytes (send a `ZData` frame).
    Compressed {
        /// Codec used.
        codec: Codec,
        /// Compressed bytes in the output buffer.
        len: usize,
    },
    /// The frame did not shrink below [`RAW_ABOVE_RATIO`]: send it as it is (a `Data` frame).
    /// The output buffer's contents are meaningless.
    Raw {
        /// What it would have compressed to (for the ratio statistics).
        compressed_len: usize,
    },
}

/// A zstd compressor for plain frames, kept across frames and level switches.
pub struct Encoder {
    cctx: zstd::bulk::Compressor<'static>,
    level: Option<i32>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("level", &self.level)
            .finish()
    }
}

impl Encoder {
    /// A compressor; its memory is allocated on first use and kept.
    pub fn new() -> Result<Encoder, CompressError> {
        let codec = Codec::zstd(3).expect("3 is a zstd level");
        let cctx = zstd::bulk::Compressor::new(codec.level()).map_err(|source| CompressError {
            len: 0,
            codec,
            source,
        })?;
        Ok(Encoder {
            cctx,
            level: Some(codec.level()),
        })
    }

    /// Compress `plain` with `codec` into `out` (replacing its contents).
    ///
    /// `out` grows to zstd's worst-case bound for `plain` once and is reused: keep one buffer per
    /// compressing worker.
    pub fn compress(
        &mut self,
        plain: &[u8],
        codec: Codec,
        out: &mut Vec<u8>,
    ) -> Result<Encoded, CompressError> {
        let err = |source| CompressError {
            len: plain.len(),
            codec,
            source,
        };
        if self.level != Some(codec.level()) {
            self.level = None;
            self.cctx
                .set_compression_level(codec.level())
                .map_err(err)?;
            self.level = Some(codec.level());
        }
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(plain.len()));
        let len = self.cctx.compress_to_buffer(plain, out).map_err(err)?;
        if shrinks(plain.len(), len) {
            Ok(Encoded::Compressed { codec, len })
        } else {
            Ok(Encoded::Raw {
                compressed_len: len,
            })
        }
    }
}

/// Is `compressed` bytes for `plain` bytes worth sending compressed (at most [`RAW_ABOVE_RATIO`])?
pub fn shrinks(plain: usize, compressed: usize) -> bool {
    plain > 0 && (compressed as f64) <= RAW_ABOVE_RATIO * plain as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_shrinks_and_random_goes_raw() {
        let mut enc = Encoder::new().unwrap();
        let mut out = Vec::new();
        let text = b"the quick brown fox jumps over the lazy dog. ".repeat(1000);
        let r = enc
            .compress(&text, Codec::zstd(1).unwrap(), &mut out)
            .unwrap();
        let Encoded::Compressed { len, codec } = r else {
            panic!("{r:?}")
        };
        assert_eq!((len, codec.level()), (out.len(), 1));
        assert!(len < text.len() / 10);

        // xorshift bytes do not compress.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..65536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let r = enc
            .compress(&noise, Codec::zstd(19).unwrap(), &mut out)
            .unwrap();
        assert!(
            matches!(r, Encoded::Raw { compressed_len } if compressed_len > noise.len() * 95 / 100),
            "{r:?}"
        );
        // Nothing shrinks an empty frame.
        let r = enc
            .compress(b"", Codec::zstd(3).unwrap(), &mut out)
            .unwrap();
        assert!(matches!(r, Encoded::Raw { .. }));
    }

    #[test]
    fn the_threshold_is_inclusive() {
        assert!(shrinks(100, 95));
        assert!(!shrinks(100, 96));
        assert!(!shrinks(0, 0));
    }
}
