//! Decompressing one authenticated frame, never past the length it declared.
//!
//! The declared length travels in the frame and is covered by the MAC (see [`super`]), so by the
//! time a frame reaches the [`Decoder`] its bytes are the sender's. The bound is still enforced
//! here, for three reasons: a sender can be hostile too (docs/DESIGN.md §6), a compressed frame is
//! a decompression bomb waiting to happen (a few bytes of zstd can claim gigabytes), and the
//! receiver counts the output buffer against its memory budget *before* decompressing, from the
//! declared length alone.
//!
//! So the frame must be exactly one zstd frame, its header must state its content size and that
//! size must be the declared length, and libzstd writes into a slice of exactly the declared
//! length: it cannot produce one byte more, whatever the input. libzstd's one-shot decoder keeps
//! no window of its own (the output is the window), so its working memory is a fixed context of
//! about 160 KiB, whatever the frame claims. A frame in the field code ([`super::fields`]) is
//! decoded into the same slice of exactly the declared length, after a check that its length
//! can hold that many bytes at all.

use super::codec::FrameCodec;

/// Why a compressed frame was refused. Every case fails the document, as a tampered plain frame
/// does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    /// A compressed frame that declares no content: the sender never makes one.
    #[error("compressed frame declares 0 bytes: a sender sends empty data raw, so the frame is malformed")]
    Empty,
    /// The declared length is over the receiver's limit for one frame.
    #[error("compressed frame declares {declared} bytes, over this receiver's limit of {max} per frame; the sender must cut smaller frames")]
    TooLarge {
        /// Declared decompressed length.
        declared: u64,
        /// The limit.
        max: usize,
    },
    /// The bytes do not start with a zstd frame header (or it is corrupt).
    #[error("compressed frame is not a zstd frame: {0}")]
    NotZstd(&'static str),
    /// The zstd header does not state the content size.
    #[error("compressed frame's zstd header does not state its content size")]
    NoContentSize,
    /// The zstd header's content size is not the declared length.
    #[error("compressed frame declares {declared} bytes but its zstd header says {frame}")]
    SizeMismatch {
        /// Declared decompressed length.
        declared: u64,
        /// Content size in the zstd header.
        frame: u64,
    },
    /// Bytes follow the zstd frame.
    #[error("compressed frame has {extra} bytes after its zstd frame")]
    TrailingBytes {
        /// Bytes after the frame.
        extra: usize,
    },
    /// libzstd refused the data (corrupt, truncated).
    #[error("compressed frame is corrupt: {0}")]
    Corrupt(String),
    /// libzstd could not make a decompression context (out of memory).
    #[error("cannot create a zstd decompression context: {0}")]
    NoContext(String),
    /// The frame decoded to fewer bytes than declared.
    #[error("compressed frame decoded to {got} bytes, {declared} declared")]
    Short {
        /// Declared decompressed length.
        declared: u64,
        /// Bytes decoded.
        got: usize,
    },
}

/// A decompressor for compressed frames (zstd, or the field code of [`super::fields`]), kept
/// across frames.
pub struct Decoder {
    dctx: zstd::bulk::Decompressor<'static>,
    max_len: usize,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("max_len", &self.max_len)
            .finish()
    }
}

impl Decoder {
    /// A decompressor that refuses frames declaring more than `max_len` bytes.
    pub fn new(max_len: usize) -> Result<Decoder, DecompressError> {
        let dctx = zstd::bulk::Decompressor::new()
            .map_err(|e| DecompressError::NoContext(e.to_string()))?;
        Ok(Decoder { dctx, max_len })
    }

    /// Largest declared length accepted.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Check what can be checked before any output is allocated: the declared length against the
    /// limit, and the zstd header (or the field code's length) against the declared length.
    pub fn check(
        &self,
        codec: FrameCodec,
        compressed: &[u8],
        declared: u64,
    ) -> Result<usize, DecompressError> {
        if declared == 0 {
            return Err(DecompressError::Empty);
        }
        let declared_len = usize::try_from(declared)
            .ok()
            .filter(|&n| n <= self.max_len)
            .ok_or(DecompressError::TooLarge {
                declared,
                max: self.max_len,
            })?;
        if codec == FrameCodec::Fields {
            // The field code spends at least 3.4 bits on a byte (its likeliest, the space, has
            // probability 387/4096): a frame claiming more than that allows is refused before
            // its output is allocated. A word of slack covers the coder's rounding.
            let bits = (compressed.len() as u64 + 2) * 8;
            if bits < declared.saturating_mul(3) {
                return Err(DecompressError::Corrupt(format!(
                    "a field-coded frame of {} bytes cannot hold {declared} bytes",
                    compressed.len()
                )));
            }
            return Ok(declared_len);
        }
        match zstd::zstd_safe::get_frame_content_size(compressed) {
            Err(_) => return Err(DecompressError::NotZstd("no valid zstd frame header")),
            Ok(None) => return Err(DecompressError::NoContentSize),
            Ok(Some(frame)) if frame != declared => {
                return Err(DecompressError::SizeMismatch { declared, frame })
            }
            Ok(Some(_)) => {}
        }
        let size = zstd::zstd_safe::find_frame_compressed_size(compressed)
            .map_err(|_| DecompressError::NotZstd("the zstd frame is truncated or corrupt"))?;
        if size != compressed.len() {
            return Err(DecompressError::TrailingBytes {
                extra: compressed.len().saturating_sub(size),
            });
        }
        Ok(declared_len)
    }

    /// Decompress `compressed`, which declares `declared` bytes, into `out` (replacing its
    /// contents; on error `out` is left empty).
    ///
    /// `out` is reused: a buffer that already held a frame this large is not zeroed again.
    pub fn decompress_into(
        &mut self,
        codec: FrameCodec,
        compressed: &[u8],
        declared: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), DecompressError> {
        let result = self.decode(codec, compressed, declared, out);
        if result.is_err() {
            out.clear();
        }
        result
    }

    fn decode(
        &mut self,
        codec: FrameCodec,
        compressed: &[u8],
        declared: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), DecompressError> {
        let n = self.check(codec, compressed, declared)?;
        if out.len() < n {
            out.resize(n, 0);
        } else {
            out.truncate(n);
        }
        if codec == FrameCodec::Fields {
            return super::fields::decode(compressed, &mut out[..n])
                .map_err(|e| DecompressError::Corrupt(e.to_string()));
        }
        // A slice of exactly `n` bytes: libzstd cannot write past it.
        let got = self
            .dctx
            .decompress_to_buffer(compressed, &mut out[..n])
            .map_err(|e| DecompressError::Corrupt(e.to_string()))?;
        if got != n {
            return Err(DecompressError::Short { declared, got });
        }
        Ok(())
    }
}

/// Decompress one frame into a new buffer (tests, tools; the receiver keeps a [`Decoder`]).
pub fn decompress(
    codec: FrameCodec,
    compressed: &[u8],
    declared: u64,
) -> Result<Vec<u8>, DecompressError> {
    let max = usize::try_from(declared).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    Decoder::new(max)?.decompress_into(codec, compressed, declared, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zstd, at whatever level: the decoder does not need it.
    fn zs() -> FrameCodec {
        FrameCodec::Zstd(super::super::Codec::zstd(3).unwrap())
    }

    fn zstd_frame(plain: &[u8], level: i32) -> Vec<u8> {
        zstd::bulk::compress(plain, level).unwrap()
    }

    #[test]
    fn round_trip_and_reuse() {
        let mut d = Decoder::new(1 << 20).unwrap();
        let mut out = vec![7u8; 10];
        let a = b"abcabcabcabcabcabcabc".repeat(50);
        d.decompress_into(zs(), &zstd_frame(&a, 3), a.len() as u64, &mut out)
            .unwrap();
        assert_eq!(out, a);
        let b = b"xyz".repeat(7);
        d.decompress_into(zs(), &zstd_frame(&b, 1), b.len() as u64, &mut out)
            .unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn every_bad_frame_is_refused_with_its_reason() {
        let plain = b"hello hello hello hello hello".repeat(40);
        let z = zstd_frame(&plain, 3);
        let n = plain.len() as u64;
        let mut d = Decoder::new(plain.len()).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            d.decompress_into(zs(), &z, 0, &mut out),
            Err(DecompressError::Empty)
        );
        assert_eq!(
            d.decompress_into(zs(), &z, n + 1, &mut out),
            Err(DecompressError::TooLarge {
                declared: n + 1,
                max: plain.len()
            })
        );
        let mut big = Decoder::new(1 << 20).unwrap();
        assert_eq!(
            big.decompress_into(zs(), &z, n - 1, &mut out),
            Err(DecompressError::SizeMismatch {
                declared: n - 1,
                frame: n
            })
        );
        assert!(matches!(
            d.decompress_into(zs(), b"not zstd at all", n, &mut out),
            Err(DecompressError::NotZstd(_))
        ));
        let mut trailing = z.clone();
        trailing.extend_from_slice(&z);
        assert_eq!(
            d.decompress_into(zs(), &trailing, n, &mut out),
            Err(DecompressError::TrailingBytes { extra: z.len() })
        );
        assert!(matches!(
            d.decompress_into(zs(), &z[..z.len() - 1], n, &mut out),
            Err(DecompressError::NotZstd(_))
        ));
        // A frame without a content size (streaming encoders write such frames).
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut e, &plain).unwrap();
        let no_size = e.finish().unwrap();
        assert_eq!(
            d.decompress_into(zs(), &no_size, n, &mut out),
            Err(DecompressError::NoContentSize)
        );
        assert!(out.is_empty());
        // The good frame still decodes after all that.
        d.decompress_into(zs(), &z, n, &mut out).unwrap();
        assert_eq!(out, plain);
    }

    #[test]
    fn field_coded_frames_decode_to_their_declared_length_or_are_refused() {
        let plain = b"Mary Clark 2024-01-19 1.83 AT30 9696 7656 7873 8872 57 ".repeat(20);
        let n = plain.len() as u64;
        let mut packed = Vec::new();
        super::super::fields::encode(&plain, &mut packed);
        let mut d = Decoder::new(plain.len()).unwrap();
        let mut out = vec![1u8; 3];
        let f = FrameCodec::Fields;
        d.decompress_into(f, &packed, n, &mut out).unwrap();
        assert_eq!(out, plain);
        // A zstd frame is not field-coded, nor the other way round.
        assert!(d.decompress_into(zs(), &packed, n, &mut out).is_err());
        assert!(out.is_empty());
        // The bound holds for the most compressible input there is: the likeliest byte only.
        let spaces = vec![b' '; 100_000];
        let mut coded = Vec::new();
        super::super::fields::encode(&spaces, &mut coded);
        let mut d2 = Decoder::new(spaces.len()).unwrap();
        d2.decompress_into(f, &coded, spaces.len() as u64, &mut out)
            .unwrap();
        assert_eq!(out, spaces);
        // Nor does a run of the least likely symbol at the end escape it (it once coded to
        // nothing, and the bound then refused an honest frame).
        let zeros = [&b"Mary Clark"[..], &[0u8; 1000]].concat();
        super::super::fields::encode(&zeros, &mut coded);
        d2.decompress_into(f, &coded, zeros.len() as u64, &mut out)
            .unwrap();
        assert_eq!(out, zeros);
        // Claiming more than the length can code is refused before decoding.
        let big = Decoder::new(1 << 20).unwrap();
        assert!(matches!(
            big.check(f, &packed, n * 4),
            Err(DecompressError::Corrupt(_))
        ));
        // Too large, empty and corrupt, as for zstd.
        assert_eq!(
            d.decompress_into(f, &packed, n + 1, &mut out),
            Err(DecompressError::TooLarge {
                declared: n + 1,
                max: plain.len()
            })
        );
        assert_eq!(
            d.decompress_into(f, &packed, 0, &mut out),
            Err(DecompressError::Empty)
        );
        assert!(d
            .decompress_into(f, &packed[..packed.len() - 1], n, &mut out)
            .is_err());
        assert!(out.is_empty());
    }
}
