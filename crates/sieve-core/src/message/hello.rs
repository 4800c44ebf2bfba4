//! `Hello`: the first frame of a session, client → receiver on TLS channel 0.
//!
//! The thesis hard-wired one TLS and one TCP port and always used as many plain channels as
//! secure ones. Here the client is told only the receiver's TLS address and says, inside TLS,
//! what it wants: the mode, N secure and M plain channels (independent, thesis §6.2), how streams
//! are split over channels and documents over batches, and how many documents will follow.

use serde::{Deserialize, Serialize};

use super::wire::Reader;
use super::{write_frame, CompressFlags, MessageError};
use crate::batch::BatchSplit;
use crate::frame::FrameType;
use crate::mac::{MacAlg, MacOffer};
use crate::split::Split;

/// Version of this wire format and of how its plain frames are authenticated; a receiver refuses
/// a `Hello` it does not speak. 3: cleartext is tagged by unit (a run of the layout within a
/// 256 KiB block), no longer by frame, so frames need not end where runs do. 4: manifests are
/// padded to size buckets ([`super::Doc::padding`]), names may be relative paths
/// ([`crate::name`]), a sender may cancel a document ([`super::DocCancel`]), and acknowledgements
/// say when a name exists or a document was cancelled. 5: the sender offers the cleartext MACs it
/// supports ([`Hello::macs`]) and the receiver names the one it chose ([`super::SessionMsg::mac`]);
/// HELLO says what compressed frames the sender may send and SESSION what the receiver accepts
/// of them, with its decompression speed ([`super::CompressFlags`], [`super::ZData`]); a
/// manifest's placement is checked as it is parsed, and runs shorter than 16 KiB share a tag
/// within their 256 KiB block. 6: a manifest writes its segment lengths in Exp-Golomb codes, one
/// order per kind ([`super::golomb`]), instead of varints. 7: a compressed frame's codec byte may
/// name the field code (`0x40`, [`crate::compress::FrameCodec::Fields`]), in which a sender with
/// `--compress-classified` codes runs of short classified values.
pub const PROTOCOL_VERSION: u16 = 7;

/// Most TLS channels (channel 0 included) a session may ask for.
pub const MAX_SECURE_CHANNELS: u8 = 16;
/// Most plain channels a session may ask for.
pub const MAX_PLAIN_CHANNELS: u8 = 16;
/// Most channels of one session, both kinds together.
pub const MAX_CHANNELS: u64 = MAX_SECURE_CHANNELS as u64 + MAX_PLAIN_CHANNELS as u64;

// Wire codes of the splits. One table for both enums, so that the same code means the same
// algorithm whether it splits one document or a batch: 0 dynamic, 1 even (ES/BES), 2 segment
// (SS/BSS), 3 whole files (BFS, batches only).
impl From<Split> for u8 {
    fn from(s: Split) -> u8 {
        match s {
            Split::Dynamic => 0,
            Split::Even => 1,
            Split::Segment => 2,
        }
    }
}

impl TryFrom<u8> for Split {
    type Error = u8;
    fn try_from(code: u8) -> Result<Split, u8> {
        match code {
            0 => Ok(Split::Dynamic),
            1 => Ok(Split::Even),
            2 => Ok(Split::Segment),
            other => Err(other),
        }
    }
}

impl From<BatchSplit> for u8 {
    fn from(s: BatchSplit) -> u8 {
        match s {
            BatchSplit::Dynamic => 0,
            BatchSplit::Even => 1,
            BatchSplit::Segment => 2,
            BatchSplit::File => 3,
        }
    }
}

impl TryFrom<u8> for BatchSplit {
    type Error = u8;
    fn try_from(code: u8) -> Result<BatchSplit, u8> {
        match code {
            0 => Ok(BatchSplit::Dynamic),
            1 => Ok(BatchSplit::Even),
            2 => Ok(BatchSplit::Segment),
            3 => Ok(BatchSplit::File),
            other => Err(other),
        }
    }
}

/// What travels where. Its serde names are the command line's (`sieve`, `secure-only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum Mode {
    /// Classified bytes over TLS, the rest over plain TCP.
    #[default]
    Sieve = 0,
    /// Every byte classified and sent over TLS: the baseline, through the same code path.
    SecureOnly = 1,
}

impl Mode {
    /// The command-line name: `sieve` or `secure-only`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sieve => "sieve",
            Mode::SecureOnly => "secure-only",
        }
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The mode with wire value `code`, if any.
    pub(crate) fn from_code(code: u8) -> Option<Mode> {
        match code {
            0 => Some(Mode::Sieve),
            1 => Some(Mode::SecureOnly),
            _ => None,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the client asks for. Every field is typed and parsed strictly (an unknown mode or split
/// code does not parse); what a receiver accepts beyond that is [`Hello::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the client.
    pub version: u16,
    /// Sieve or secure-only.
    pub mode: Mode,
    /// N: TLS channels, channel 0 included.
    pub secure_channels: u8,
    /// M: plain TCP channels (0 in secure-only mode).
    pub plain_channels: u8,
    /// How one document's streams are split over channels.
    pub split: Split,
    /// How a batch of documents is split over channels.
    pub batch_split: BatchSplit,
    /// Chunk size in bytes for the dynamic split.
    pub chunk_size: u32,
    /// Number of documents the session will carry; 0 = not known in advance.
    pub docs: u32,
    /// The compressed frames the sender may send, if the receiver accepts them (its
    /// [`super::SessionMsg::compression`] says which it does).
    pub compression: CompressFlags,
    /// The cleartext MACs the sender supports, most preferred first (by its own measurement).
    /// On the wire, after every fixed field: a count byte, then one code per algorithm
    /// ([`MacAlg::code`]).
    pub macs: MacOffer,
}

impl Hello {
    /// Payload bytes before the MAC offer.
    pub const FIXED_LEN: usize = 16;

    /// Append the whole frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_frame(out, FrameType::Hello, |out| {
            out.extend_from_slice(&self.version.to_be_bytes());
            out.extend_from_slice(&[
                self.mode.code(),
                self.secure_channels,
                self.plain_channels,
                self.split.into(),
                self.batch_split.into(),
            ]);
            out.extend_from_slice(&self.chunk_size.to_be_bytes());
            out.extend_from_slice(&self.docs.to_be_bytes());
            out.push(self.compression.byte());
            let algs = self.macs.algs();
            // At most MacAlg::COUNT distinct algorithms, so the count fits a byte.
            out.push(algs.len() as u8);
            out.extend(algs.iter().map(|a| a.code()));
        });
    }

    /// Parse a payload.
    pub fn parse(payload: &[u8]) -> Result<Hello, MessageError> {
        let mut r = Reader::new("Hello", payload);
        let version = r.u16("version")?;
        let mode = r.u8("mode")?;
        let mode = Mode::from_code(mode).ok_or_else(|| r.unknown("mode", mode))?;
        let hello = Hello {
            version,
            mode,
            secure_channels: r.u8("secure_channels")?,
            plain_channels: r.u8("plain_channels")?,
            split: {
                let code = r.u8("split")?;
                Split::try_from(code).map_err(|c| r.unknown("split", c))?
            },
            batch_split: {
                let code = r.u8("batch_split")?;
                BatchSplit::try_from(code).map_err(|c| r.unknown("batch_split", c))?
            },
            chunk_size: r.u32("chunk_size")?,
            docs: r.u32("docs")?,
            compression: {
                let b = r.u8("compression")?;
                CompressFlags::from_byte(b).ok_or_else(|| r.unknown("compression", b))?
            },
            macs: parse_offer(&mut r)?,
        };
        r.finish()?;
        Ok(hello)
    }
}

/// The MAC offer: a count, then that many distinct known codes.
fn parse_offer(r: &mut Reader<'_>) -> Result<MacOffer, MessageError> {
    let n = r.u8("macs")?;
    if usize::from(n) > MacAlg::COUNT {
        return Err(MessageError::TooLong {
            msg: "Hello",
            field: "macs",
            len: u64::from(n),
            max: MacAlg::COUNT,
        });
    }
    let mut algs = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let code = r.u8("macs")?;
        algs.push(MacAlg::from_code(code).ok_or_else(|| r.unknown("macs", code))?);
    }
    MacOffer::new(&algs).map_err(|why| MessageError::BadOffer {
        msg: "Hello",
        field: "macs",
        why,
    })
}

/// Why a receiver will not start the session a [`Hello`] asks for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloRefusal {
    /// Another wire version.
    #[error("protocol version {got} is not supported (this receiver speaks {PROTOCOL_VERSION}); use a sender of the same release")]
    Version {
        /// The client's version.
        got: u16,
    },
    /// Secure channels outside `1..=MAX_SECURE_CHANNELS`.
    #[error("{got} secure channels requested; 1 to {MAX_SECURE_CHANNELS} are allowed")]
    SecureChannels {
        /// Requested.
        got: u8,
    },
    /// Plain channels outside what the mode allows.
    #[error("{got} plain channels requested; {}", if *.secure_only { "secure-only mode uses none".to_string() } else { format!("sieve mode needs 1 to {MAX_PLAIN_CHANNELS}") })]
    PlainChannels {
        /// Requested.
        got: u8,
        /// Whether the session is secure-only.
        secure_only: bool,
    },
    /// More documents announced than the receiver takes in one session.
    #[error("{got} documents announced; this receiver takes at most {max} in one session")]
    TooManyDocs {
        /// Announced.
        got: u32,
        /// The receiver's limit.
        max: u32,
    },
}

impl HelloRefusal {
    /// The [`super::ErrorMsg`] code the receiver answers with.
    pub fn code(&self) -> u16 {
        match self {
            HelloRefusal::Version { .. } => super::ErrorMsg::VERSION,
            HelloRefusal::SecureChannels { .. } | HelloRefusal::PlainChannels { .. } => {
                super::ErrorMsg::PROTOCOL
            }
            HelloRefusal::TooManyDocs { .. } => super::ErrorMsg::LIMIT,
        }
    }
}

impl Hello {
    /// What every receiver checks before it starts a session: the version, the channel counts
    /// for the mode, and (`max_docs`) how many documents one session may announce.
    pub fn validate(&self, max_docs: u32) -> Result<(), HelloRefusal> {
        if self.version != PROTOCOL_VERSION {
            return Err(HelloRefusal::Version { got: self.version });
        }
        if !(1..=MAX_SECURE_CHANNELS).contains(&self.secure_channels) {
            return Err(HelloRefusal::SecureChannels {
                got: self.secure_channels,
            });
        }
        let plain_ok = match self.mode {
            Mode::Sieve => (1..=MAX_PLAIN_CHANNELS).contains(&self.plain_channels),
            Mode::SecureOnly => self.plain_channels == 0,
        };
        if !plain_ok {
            return Err(HelloRefusal::PlainChannels {
                got: self.plain_channels,
                secure_only: self.mode == Mode::SecureOnly,
            });
        }
        if self.docs > max_docs {
            return Err(HelloRefusal::TooManyDocs {
                got: self.docs,
                max: max_docs,
            });
        }
        Ok(())
    }

    /// Channels of both kinds.
    pub fn channels(&self) -> u64 {
        u64::from(self.secure_channels) + u64::from(self.plain_channels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(mode: Mode, secure: u8, plain: u8) -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            mode,
            secure_channels: secure,
            plain_channels: plain,
            split: Split::Dynamic,
            batch_split: BatchSplit::Dynamic,
            chunk_size: 256 << 10,
            docs: 1,
            macs: MacOffer::default(),
            compression: CompressFlags::PLAIN,
        }
    }

    #[test]
    fn split_codes_round_trip_and_unknown_codes_do_not_parse() {
        for s in [Split::Dynamic, Split::Even, Split::Segment] {
            assert_eq!(Split::try_from(u8::from(s)), Ok(s));
        }
        for s in [
            BatchSplit::Dynamic,
            BatchSplit::File,
            BatchSplit::Even,
            BatchSplit::Segment,
        ] {
            assert_eq!(BatchSplit::try_from(u8::from(s)), Ok(s));
        }
        assert_eq!(Split::try_from(3), Err(3));
        let mut out = Vec::new();
        hello(Mode::Sieve, 1, 1).encode(&mut out);
        let mut payload = out.split_off(crate::frame::HEADER_LEN);
        assert!(Hello::parse(&payload).is_ok());
        payload[5] = 3; // split: BFS is a batch split only
        assert!(matches!(
            Hello::parse(&payload),
            Err(MessageError::UnknownValue {
                field: "split",
                value: 3,
                ..
            })
        ));
        payload[5] = 0;
        payload[6] = 9;
        assert!(matches!(
            Hello::parse(&payload),
            Err(MessageError::UnknownValue {
                field: "batch_split",
                value: 9,
                ..
            })
        ));
    }

    #[test]
    fn compression_is_the_last_fixed_byte_and_reserved_bits_do_not_parse() {
        let mut h = hello(Mode::Sieve, 1, 1);
        h.compression = CompressFlags::ALL;
        let mut out = Vec::new();
        h.encode(&mut out);
        let mut payload = out.split_off(crate::frame::HEADER_LEN);
        assert_eq!(payload.len(), Hello::FIXED_LEN + 1 + h.macs.algs().len());
        assert_eq!(payload[Hello::FIXED_LEN - 1], 3);
        assert_eq!(Hello::parse(&payload), Ok(h));
        payload[Hello::FIXED_LEN - 1] = 4;
        assert!(matches!(
            Hello::parse(&payload),
            Err(MessageError::UnknownValue {
                field: "compression",
                value: 4,
                ..
            })
        ));
        // A HELLO of protocol 4 (no compression byte, no MAC offer) is truncated here.
        assert!(matches!(
            Hello::parse(&payload[..Hello::FIXED_LEN - 1]),
            Err(MessageError::Truncated { .. })
        ));
    }

    #[test]
    fn validate_checks_version_channels_and_documents() {
        assert!(hello(Mode::Sieve, 16, 16).validate(1).is_ok());
        assert!(hello(Mode::SecureOnly, 1, 0).validate(1).is_ok());
        assert_eq!(
            hello(Mode::Sieve, 17, 1).validate(1),
            Err(HelloRefusal::SecureChannels { got: 17 })
        );
        assert_eq!(
            hello(Mode::Sieve, 0, 1).validate(1),
            Err(HelloRefusal::SecureChannels { got: 0 })
        );
        assert!(matches!(
            hello(Mode::Sieve, 1, 0).validate(1),
            Err(HelloRefusal::PlainChannels { got: 0, .. })
        ));
        assert!(matches!(
            hello(Mode::Sieve, 1, 17).validate(1),
            Err(HelloRefusal::PlainChannels { got: 17, .. })
        ));
        let e = hello(Mode::SecureOnly, 1, 2).validate(1).unwrap_err();
        assert!(e.to_string().contains("secure-only mode uses none"), "{e}");
        let mut h = hello(Mode::Sieve, 1, 1);
        h.version -= 1;
        assert_eq!(
            h.validate(1).unwrap_err().code(),
            crate::message::ErrorMsg::VERSION
        );
        let mut h = hello(Mode::Sieve, 1, 1);
        h.docs = 11;
        assert_eq!(
            h.validate(10),
            Err(HelloRefusal::TooManyDocs { got: 11, max: 10 })
        );
    }
}
