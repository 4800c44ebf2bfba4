//! Compression of the cleartext (after ACCENT; docs/DESIGN.md §5), the parts that need no
//! transport.
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
//! | the codec byte: zstd and its level, or the field code | [`codec`] |
//! | classified values too short for zstd, each byte coded alone (`--compress-classified`) | [`fields`] |
//! | one frame compressed alone, raw when it does not shrink by 5 % | [`encoder`] |
//! | one frame decompressed, never past its declared length | [`decoder`] |
//! | the frame on the wire | [`crate::message::ZData`] |
//! | ACCENT's TTSC: α and the blend of compressed and raw (eq. 1-2) | [`ttsc`] |
//! | ACCENT's FSCN: CI, floating scales, Algorithms 1-2 (eq. 3-4) | [`fscn`] |
//! | ACCENT's policy, FSCN and TTSC together (`--compress accent`) | [`accent`] |
//! | our policy (`--compress auto`) | [`auto`] |
//! | the user's choice | [`choice`] |
//! | whichever runs, behind one interface | [`policy`] |
//!
//! # Integrity: tag what travels, before decompressing
//!
//! A compressed plain frame's MAC covers what travels: the whole [`crate::message::ZData`]
//! payload, that is the document, the stream offset, the declared decompressed length, the codec
//! byte and the compressed bytes ([`crate::message::ZDataRef::authenticated_prefix`] and then
//! the bytes). Both ends record that one tag for the frame's whole declared length, and the
//! receiver computes it before it decompresses anything, so the ledger binds what crossed the
//! network: a changed byte, offset, length or codec fails the document at its DOC_END like any
//! tampered cleartext. Tags never travel, so the receiver cannot tell a frame is authentic
//! before it decompresses it: libzstd does see bytes an attacker on the path may have changed.
//! That is why the [`Decoder`] never produces more or fewer bytes than declared, its working
//! memory is fixed, the output buffer is charged to the receiver's memory budget from the
//! declared length alone before decompressing, a frame that does not decode fails its document
//! at once, and the path is fuzzed (`fuzz/fuzz_targets/decompress.rs`). The transport computes
//! the tags; nothing here holds a key.

pub mod accent;
pub mod auto;
pub mod choice;
pub mod codec;
pub mod decoder;
pub mod encoder;
pub mod fields;
pub mod fscn;
pub mod policy;
pub mod ttsc;

pub use accent::Accent;
pub use auto::{Auto, AutoConfig};
pub use choice::{BadCompression, Compression};
pub use codec::{BadLevel, Codec, FrameCodec, UnknownCodec};
pub use decoder::{decompress, Decoder, DecompressError};
pub use encoder::{shrinks, CompressError, Encoded, Encoder, RAW_ABOVE_RATIO};
pub use policy::{Policy, Quantum};
