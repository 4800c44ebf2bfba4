//! The primitive encodings every message uses, in one place.
//!
//! - integers: fixed width, big-endian;
//! - byte strings: LEB128 varint length, then the bytes;
//! - enums: one byte, unknown values rejected.
//!
//! Decoding goes through [`Reader`], which checks every length against the bytes that remain
//! *before* it slices or allocates, so a hostile length costs nothing. Varints must be minimal
//! (no redundant `0x80` continuation bytes) so every message has exactly one encoding: what parses
//! re-encodes to the same bytes.

use super::MessageError;
use crate::layout::Kind;

/// Largest encoding of a `u64` varint.
pub(crate) const MAX_VARINT_LEN: usize = 10;

/// Bytes a varint encoding of `v` takes.
pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

pub(crate) fn kind_code(kind: Kind) -> u8 {
    match kind {
        Kind::Plain => 0,
        Kind::Secure => 1,
    }
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a character boundary.
pub(crate) fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A cursor over one message payload. Every error names the message and the field.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    msg: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(msg: &'static str, buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, msg }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// What is left to read, without reading it.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.buf
    }

    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], MessageError> {
        match self.buf.split_at_checked(n) {
            Some((head, tail)) => {
                self.buf = tail;
                Ok(head)
            }
            None => Err(MessageError::Truncated {
                msg: self.msg,
                field,
                need: n as u64,
                have: self.buf.len(),
            }),
        }
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], MessageError> {
        let bytes = self.take(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, MessageError> {
        Ok(u8::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, MessageError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, MessageError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, MessageError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    /// A minimal LEB128 `u64`.
    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u64, MessageError> {
        let mut v = 0u64;
        for i in 0..MAX_VARINT_LEN {
            let Some((&b, tail)) = self.buf.split_first() else {
                return Err(MessageError::Truncated {
                    msg: self.msg,
                    field,
                    need: i as u64 + 1,
                    have: i,
                });
            };
            self.buf = tail;
            let bits = u64::from(b & 0x7f);
            // The tenth byte holds bit 63 only.
            if i == MAX_VARINT_LEN - 1 && b > 1 {
                return Err(MessageError::BadVarint {
                    msg: self.msg,
                    field,
                });
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                // A zero final byte after the first means a redundant (non-minimal) encoding.
                if b == 0 && i > 0 {
                    return Err(MessageError::BadVarint {
                        msg: self.msg,
                        field,
                    });
                }
                return Ok(v);
            }
        }
        Err(MessageError::BadVarint {
            msg: self.msg,
            field,
        })
    }

    /// A length-prefixed byte string of at most `max` bytes, borrowed.
    pub(crate) fn bytes(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<&'a [u8], MessageError> {
        let n = self.varint(field)?;
        if n > max as u64 {
            return Err(MessageError::TooLong {
                msg: self.msg,
                field,
                len: n,
                max,
            });
        }
        if n > self.buf.len() as u64 {
            return Err(MessageError::Truncated {
                msg: self.msg,
                field,
                need: n,
                have: self.buf.len(),
            });
        }
        self.take(n as usize, field)
    }

    /// A length-prefixed UTF-8 string of at most `max` bytes, borrowed.
    pub(crate) fn str(&mut self, field: &'static str, max: usize) -> Result<&'a str, MessageError> {
        let bytes = self.bytes(field, max)?;
        std::str::from_utf8(bytes).map_err(|_| MessageError::BadUtf8 {
            msg: self.msg,
            field,
        })
    }

    /// A length-prefixed UTF-8 string of at most `max` bytes.
    pub(crate) fn string(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<String, MessageError> {
        let bytes = self.bytes(field, max)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(MessageError::BadUtf8 {
                msg: self.msg,
                field,
            }),
        }
    }

    pub(crate) fn kind(&mut self, field: &'static str) -> Result<Kind, MessageError> {
        match self.u8(field)? {
            0 => Ok(Kind::Plain),
            1 => Ok(Kind::Secure),
            value => Err(self.unknown(field, value)),
        }
    }

    pub(crate) fn unknown(&self, field: &'static str, value: u8) -> MessageError {
        MessageError::UnknownValue {
            msg: self.msg,
            field,
            value,
        }
    }

    /// The message must end here.
    pub(crate) fn finish(self) -> Result<(), MessageError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(MessageError::TrailingBytes {
                msg: self.msg,
                extra: self.buf.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        out
    }

    #[test]
    fn varint_round_trip_and_length() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let e = enc(v);
            assert_eq!(e.len(), varint_len(v));
            let mut r = Reader::new("t", &e);
            assert_eq!(r.varint("v").unwrap(), v);
            r.finish().unwrap();
        }
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(u64::MAX).len(), MAX_VARINT_LEN);
    }

    #[test]
    fn varint_rejects_non_minimal_overflow_and_truncation() {
        let bad: [&[u8]; 5] = [
            &[0x80, 0x00],
            &[0xff, 0x80, 0x00],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[
                0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
            ],
            &[0x80],
        ];
        for b in bad {
            assert!(Reader::new("t", b).varint("v").is_err(), "{b:?}");
        }
    }

    #[test]
    fn truncate_on_char_boundary() {
        assert_eq!(truncate_str("héllo", 2), "h");
        assert_eq!(truncate_str("héllo", 3), "hé");
        assert_eq!(truncate_str("abc", 10), "abc");
    }
}
