//! Join tokens: how an extra channel proves it belongs to a session.
//!
//! Both ends export 32 bytes of keying material from channel 0's TLS session (RFC 8446 §7.5),
//! bound to the session id, and derive one token per channel from it. Nobody who was not a party
//! to that handshake can compute a token. A plain channel's token crosses the network in the
//! clear once, but each (kind, index) slot can be joined only once, so a replayed token finds its
//! slot taken. Tokens are compared in constant time.

use subtle::ConstantTimeEq;

use sieve_core::Kind;

/// Secret shared by the two ends of a session.
#[derive(Clone)]
pub struct JoinKey([u8; 32]);

impl JoinKey {
    /// The key from channel 0's TLS exporter ([`crate::tls::EXPORTER_LABEL`]).
    pub fn new(exported: [u8; 32]) -> JoinKey {
        JoinKey(exported)
    }

    /// Bind the exported keying material of channel 0 to the session id the receiver chose.
    pub fn derive(exported: &[u8; 32], session_id: &[u8; 16]) -> JoinKey {
        JoinKey(*blake3::keyed_hash(exported, session_id).as_bytes())
    }

    /// The token for channel `index` of `kind`.
    pub fn token(&self, kind: Kind, index: u8) -> [u8; 32] {
        let kind_byte = match kind {
            Kind::Plain => 0u8,
            Kind::Secure => 1u8,
        };
        *blake3::keyed_hash(&self.0, &[kind_byte, index]).as_bytes()
    }

    /// Constant-time check of a presented token.
    pub fn verify(&self, kind: Kind, index: u8, presented: &[u8; 32]) -> bool {
        self.token(kind, index).ct_eq(presented).into()
    }
}

impl std::fmt::Debug for JoinKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JoinKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_per_channel_and_verify() {
        let k = JoinKey::new([7; 32]);
        let t = k.token(Kind::Plain, 0);
        assert!(k.verify(Kind::Plain, 0, &t));
        assert!(!k.verify(Kind::Plain, 1, &t));
        assert!(!k.verify(Kind::Secure, 0, &t));
        assert!(!JoinKey::new([8; 32]).verify(Kind::Plain, 0, &t));
    }
}
