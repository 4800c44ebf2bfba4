//! **INSECURE**: the thesis's own TLS 1.2 suites, through OpenSSL, for the laboratory only.
//!
//! The thesis measured its secure channel with 3DES-EDE-CBC and AES-256-CBC, each with
//! HMAC-SHA1, in TLS 1.2 (F5.3-5.4). Neither is acceptable today: 3DES has 64-bit blocks
//! (Sweet32) and CBC-then-MAC invited padding oracles; rustls rightly implements neither. To put
//! today's suites beside the thesis's on the same machine, this module opens the secure channels
//! with OpenSSL built from source with its weak suites enabled. It exists only behind the cargo
//! feature `insecure-thesis-suites` (off by default), is selected only by the flags
//! `sieve serve --insecure-thesis-suites` and `sieve send --insecure-thesis-suite S`, and every
//! report that uses it names the suite as insecure.
//!
//! Our certificates carry ECDSA keys, so the suites are the ECDHE-ECDSA variants of the thesis's
//! RSA ones: the bulk cipher and MAC, which are what the transfer measurements depend on, are the
//! same; only the key exchange of the handshake differs. Extra secure channels do full
//! handshakes here (no resumption), and client certificates are not supported.

use std::path::Path;
use std::pin::Pin;

use anyhow::{bail, Context, Result};
use openssl::ssl::{
    Ssl, SslAcceptor, SslConnector, SslContextBuilder, SslFiletype, SslMethod, SslVersion,
};
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use crate::secured::{Secured, EXPORTER_LABEL};

/// A thesis suite. Insecure; for measurements only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacySuite {
    /// TLS 1.2, 3DES-EDE-CBC with HMAC-SHA1 (the thesis's `SSL_RSA_WITH_3DES_EDE_CBC_SHA`).
    TripleDesEdeCbcSha,
    /// TLS 1.2, AES-256-CBC with HMAC-SHA1 (the thesis's `TLS_RSA_WITH_AES_256_CBC_SHA`).
    Aes256CbcSha,
}

impl LegacySuite {
    /// Both suites, in the order the command line lists them.
    pub const ALL: [LegacySuite; 2] = [LegacySuite::TripleDesEdeCbcSha, LegacySuite::Aes256CbcSha];

    /// The OpenSSL name of the suite.
    pub(crate) fn openssl_name(self) -> &'static str {
        match self {
            LegacySuite::TripleDesEdeCbcSha => "ECDHE-ECDSA-DES-CBC3-SHA",
            LegacySuite::Aes256CbcSha => "ECDHE-ECDSA-AES256-SHA",
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LegacySuite::TripleDesEdeCbcSha => "3des-ede-cbc-sha",
            LegacySuite::Aes256CbcSha => "aes256-cbc-sha",
        }
    }

    /// The suite named `s` on the command line (any case), or an error naming the choices.
    pub fn parse(s: &str) -> Result<LegacySuite> {
        LegacySuite::ALL
            .into_iter()
            .find(|x| x.name() == s.to_ascii_lowercase())
            .with_context(|| {
                format!("unknown thesis suite '{s}': use 3des-ede-cbc-sha or aes256-cbc-sha")
            })
    }
}

/// Both thesis suites, for a server that accepts either.
fn cipher_list() -> String {
    let names: Vec<&str> = LegacySuite::ALL.iter().map(|s| s.openssl_name()).collect();
    // Security level 0: OpenSSL refuses SHA-1 MACs and 3DES above it.
    format!("{}:@SECLEVEL=0", names.join(":"))
}

/// The client side: one suite, TLS 1.2 only, the CA and host name verified as usual.
pub struct LegacyClient {
    connector: SslConnector,
    suite: LegacySuite,
}

impl LegacyClient {
    /// A client that trusts the CA certificate `ca` and offers only `suite`; fails if this OpenSSL
    /// no longer has it.
    pub fn new(ca: &Path, suite: LegacySuite) -> Result<LegacyClient> {
        let mut b = SslConnector::builder(SslMethod::tls_client())?;
        b.set_ca_file(ca)
            .with_context(|| format!("cannot load the CA certificate {}", ca.display()))?;
        pin_tls12(&mut b)?;
        b.set_cipher_list(&format!("{}:@SECLEVEL=0", suite.openssl_name()))
            .with_context(|| {
                format!(
                    "this OpenSSL does not offer {} (built without weak suites?)",
                    suite.openssl_name()
                )
            })?;
        Ok(LegacyClient {
            connector: b.build(),
            suite,
        })
    }

    /// The suite this client offers.
    pub fn suite(&self) -> LegacySuite {
        self.suite
    }

    /// Handshake over `tcp`, verifying the certificate for `host`.
    pub(crate) async fn connect(&self, tcp: TcpStream, host: &str) -> Result<Secured> {
        let ssl = self.connector.configure()?.into_ssl(host)?;
        let mut s = SslStream::new(ssl, tcp)?;
        Pin::new(&mut s)
            .connect()
            .await
            .context("TLS 1.2 handshake (thesis suite) failed")?;
        finish(s, false)
    }
}

/// The server side: TLS 1.3 as usual plus TLS 1.2 with the two thesis suites.
pub struct LegacyServer {
    acceptor: SslAcceptor,
}

impl LegacyServer {
    /// A server with the certificate chain `cert` and its private key `key` (PEM).
    pub fn new(cert: &Path, key: &Path) -> Result<LegacyServer> {
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
        b.set_certificate_chain_file(cert)
            .with_context(|| format!("cannot load the certificate {}", cert.display()))?;
        b.set_private_key_file(key, SslFiletype::PEM)
            .with_context(|| format!("cannot load the key {}", key.display()))?;
        b.check_private_key()
            .context("the key does not match the certificate")?;
        b.set_cipher_list(&cipher_list()).context(
            "this OpenSSL does not offer the thesis suites (built without weak suites?)",
        )?;
        b.set_security_level(0);
        Ok(LegacyServer {
            acceptor: b.build(),
        })
    }

    pub(crate) async fn accept(&self, tcp: TcpStream) -> Result<Secured> {
        let ssl = Ssl::new(self.acceptor.context())?;
        let mut s = SslStream::new(ssl, tcp)?;
        Pin::new(&mut s)
            .accept()
            .await
            .context("TLS handshake failed")?;
        finish(s, false)
    }
}

fn pin_tls12(b: &mut SslContextBuilder) -> Result<()> {
    b.set_min_proto_version(Some(SslVersion::TLS1_2))?;
    b.set_max_proto_version(Some(SslVersion::TLS1_2))?;
    b.set_security_level(0);
    Ok(())
}

fn finish(s: SslStream<TcpStream>, resumed: bool) -> Result<Secured> {
    let mut exporter = [0u8; 32];
    let label = std::str::from_utf8(EXPORTER_LABEL).context("exporter label")?;
    s.ssl()
        .export_keying_material(&mut exporter, label, None)
        .context("exporting keying material")?;
    let Some(c) = s.ssl().current_cipher() else {
        bail!("no cipher was negotiated");
    };
    let insecure = if s.ssl().version2() == Some(SslVersion::TLS1_3) {
        ""
    } else {
        " (INSECURE thesis suite)"
    };
    let cipher = format!("{} {}{insecure}", s.ssl().version_str(), c.name());
    Ok(Secured::new(s, exporter, cipher, resumed))
}
