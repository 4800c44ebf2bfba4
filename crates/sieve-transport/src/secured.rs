//! A secure channel once its handshake is done, whichever TLS library made it (rustls, or for
//! the laboratory OpenSSL with the thesis's suites): its two halves, the keying material both
//! ends export from it, and who the client is under mutual TLS.

use anyhow::Result;
use rustls::SupportedCipherSuite;
use tokio::net::TcpStream;

use crate::conn::{BoxRead, BoxWrite};

/// Label for the keying-material exporter (RFC 8446 §7.5) that derives join tokens.
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-security-sieve-join-v1";

/// A secure channel once its handshake is done, whichever TLS library made it.
pub(crate) struct Secured {
    pub read: BoxRead,
    pub write: BoxWrite,
    /// Keying material exported under [`EXPORTER_LABEL`] (join tokens and the plain MAC key).
    pub exporter: [u8; 32],
    /// The negotiated suite, for reports.
    pub cipher: String,
    /// Whether the handshake resumed an earlier session.
    pub resumed: bool,
    /// Under mutual TLS, the client certificate's identity for logs (see [`client_identity`]).
    pub client: Option<String>,
    /// The peer's certificate (DER), when it presented one: a client under mutual TLS.
    pub peer_cert: Option<Vec<u8>>,
}

impl Secured {
    /// A rustls client connection.
    pub(crate) fn from_client(tls: tokio_rustls::client::TlsStream<TcpStream>) -> Result<Secured> {
        let (exporter, cipher, resumed) = negotiated(&**tls.get_ref().1)?;
        Ok(Secured::new(tls, exporter, cipher, resumed))
    }

    /// A rustls server connection.
    pub(crate) fn from_server(tls: tokio_rustls::server::TlsStream<TcpStream>) -> Result<Secured> {
        let conn = tls.get_ref().1;
        let (exporter, cipher, resumed) = negotiated(&**conn)?;
        let peer_cert = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec());
        let mut s = Secured::new(tls, exporter, cipher, resumed);
        s.client = peer_cert.as_deref().map(client_identity);
        s.peer_cert = peer_cert;
        Ok(s)
    }

    /// Split a stream whose handshake is done into boxed halves.
    pub(crate) fn new<S>(stream: S, exporter: [u8; 32], cipher: String, resumed: bool) -> Secured
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    {
        let (r, w) = tokio::io::split(stream);
        Secured {
            read: Box::new(r),
            write: Box::new(w),
            exporter,
            cipher,
            resumed,
            client: None,
            peer_cert: None,
        }
    }
}

/// A client certificate's identity for logs: `cert <fingerprint>`, the first 8 bytes of the
/// BLAKE3 of its DER in hex. The fingerprint names one certificate exactly, whatever its
/// subject says.
pub(crate) fn client_identity(der: &[u8]) -> String {
    let h = blake3::hash(der);
    let hex: String = h.as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("cert {hex}")
}

/// What a finished rustls handshake gives a channel: the exported keying material, the
/// suite's name and whether the session was resumed.
fn negotiated<D>(conn: &rustls::ConnectionCommon<D>) -> Result<([u8; 32], String, bool)> {
    let mut exporter = [0u8; 32];
    conn.export_keying_material(&mut exporter, EXPORTER_LABEL, None)?;
    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    Ok((
        exporter,
        suite_name(conn.negotiated_cipher_suite()),
        resumed,
    ))
}

/// Human name of a negotiated suite, e.g. `TLS13_AES_128_GCM_SHA256`.
pub fn suite_name(suite: Option<SupportedCipherSuite>) -> String {
    suite
        .map(|s| format!("{:?}", s.suite()))
        .unwrap_or_else(|| "none".into())
}
