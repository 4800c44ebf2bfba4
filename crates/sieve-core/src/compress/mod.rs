//! Compression of the cleartext (seed 004, ACCENT; DESIGN §5), the parts that need no transport.
//!
//! # Why compressing only the cleartext is safe
//!
//! TLS 1.3 dropped compression because compressing secrets together with data an attacker can
//! influence leaks the secrets through the compressed lengths (CRIME, BREACH). The sieve knows
//! which bytes are public: only the plain stream, the bytes that already cross the network in the
//! clear, is compressed, each frame on its own, and never together with a classified byte. An
//! observer of the plain channels, who reads the cleartext anyway, learns the compressed sizes of
//! public data and nothing else.
//!
//! # The pieces
//!
//! | idea | file |
//! |---|---|
//! | the codec byte: zstd and its level | [`codec`] |
//! | one frame compressed alone, raw when it does not shrink by 5 % | [`encoder`] |
//! | one frame decompressed, never past its declared length | [`decoder`] |
//! | the frame on the wire | [`crate::message::ZData`] |
//! | ACCENT's TTSC: α and the blend of compressed and raw (eq. 1-2) | [`ttsc`] |
//! | ACCENT's FSCN: CI, floating scales, Algorithms 1-2 (eq. 3-4) | [`fscn`] |
//! | ACCENT's policy, FSCN and TTSC together (`--compress accent`) | [`accent`] |
//! | our policy (`--compress auto`) | [`auto`] |
//! | the user's choice | [`choice`] |
//!
//! # Integrity: authenticate before decompressing
//!
//! A compressed frame's MAC covers what travels: the whole [`crate::message::ZData`] payload,
//! that is the document, the stream offset, the declared decompressed length, the codec byte
//! and the compressed bytes ([`crate::message::ZDataRef::authenticated_prefix`] and then the
//! bytes). The receiver checks the tag first and decompresses only an authentic frame, so
//! libzstd never sees bytes an attacker on the path chose, and a tampered frame fails its
//! document like any tampered cleartext. The declared length is bound by the tag and enforced by
//! the [`Decoder`]: the receiver can count the output buffer against its memory budget before
//! decompressing, from the header alone. The transport computes the tags; nothing here holds a
//! key.

pub mod accent;
pub mod auto;
pub mod choice;
pub mod codec;
pub mod decoder;
pub mod encoder;
pub mod fscn;
pub mod ttsc;

pub use accent::Accent;
pub use auto::{Auto, AutoConfig};
pub use choice::{BadCompression, Compression};
pub use codec::{BadLevel, Codec};
pub use decoder::{decompress, Decoder, DecompressError};
pub use encoder::{CompressError, Encoded, Encoder, RAW_ABOVE_RATIO};
