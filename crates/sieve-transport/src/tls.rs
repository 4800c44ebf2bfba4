//! TLS 1.3 configuration: certificates, cipher suites, resumption, and the join-token exporter.
//!
//! Real TLS with verification on by default (docs/DESIGN.md §6). Extra secure channels reuse the
//! first handshake's session through rustls's resumption cache, which is what made the thesis's
//! further channels cost 230 ms instead of 755 ms.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use rustls::crypto::{aws_lc_rs, CryptoProvider};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

/// The TLS 1.3 cipher suites a user may pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cipher {
    #[default]
    /// TLS_AES_128_GCM_SHA256 (first where AES-GCM runs in hardware).
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384.
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256 (first without AES instructions).
    Chacha20,
}

/// Whether this process's libcrypto (aws-lc, which rustls seals with) runs AES-GCM in
/// hardware, that is with AES instructions and carry-less multiply as aws-lc sees them: after
/// any `OPENSSL_ia32cap` mask, so the laboratory's emulation of a device without them is
/// honoured. Without them AES-GCM runs in software, 4 to 8 times slower than
/// ChaCha20-Poly1305 (`sieve calibrate` under the masks on an Intel Xeon).
pub fn hardware_aes() -> bool {
    static HARDWARE_AES: OnceLock<bool> = OnceLock::new();
    *HARDWARE_AES.get_or_init(|| {
        // Sets up aws-lc's CPU capabilities (reading OPENSSL_ia32cap) before they are asked.
        ::aws_lc_rs::init();
        // SAFETY: `EVP_has_aes_hardware` takes no arguments and only reads aws-lc's CPU
        // capability words, which `init` above has set up (and which aws-lc also sets up on
        // first use by itself); it has no preconditions and is safe from any thread. The
        // `aws-lc-sys` it comes from is the one `aws-lc-rs` links (one version in Cargo.lock).
        #[allow(unsafe_code)]
        let has = unsafe { aws_lc_sys::EVP_has_aes_hardware() };
        has == 1
    })
}

/// The order in which a sender offers the suites, and a receiver without AES hardware prefers
/// them: AES-128-GCM first where AES-GCM runs in hardware ([`hardware_aes`]), ChaCha20-Poly1305
/// first where it does not (what BoringSSL and Go's TLS do). The sieve gains most on devices
/// without AES instructions, and its classified bytes are then sealed at ChaCha20's speed.
pub fn preferred_ciphers(hardware_aes: bool) -> [Cipher; 3] {
    if hardware_aes {
        [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Chacha20]
    } else {
        [Cipher::Chacha20, Cipher::Aes128Gcm, Cipher::Aes256Gcm]
    }
}

impl Cipher {
    /// Every suite, in the order the command line lists them.
    pub const ALL: [Cipher; 3] = [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Chacha20];

    /// The suite a client configuration asks for first: the one its sessions will use with a
    /// receiver that accepts it (`None` when it is none of [`Cipher::ALL`]).
    pub(crate) fn of_config(cfg: &ClientConfig) -> Option<Cipher> {
        Cipher::of_rustls(cfg.crypto_provider().cipher_suites.first()?)
    }

    /// The suites a sender's configuration offers, in its order.
    pub(crate) fn offered(cfg: &ClientConfig) -> Vec<Cipher> {
        cfg.crypto_provider()
            .cipher_suites
            .iter()
            .filter_map(Cipher::of_rustls)
            .collect()
    }

    /// Which of these a rustls suite is (`None`: none of [`Cipher::ALL`]).
    fn of_rustls(s: &SupportedCipherSuite) -> Option<Cipher> {
        Cipher::ALL
            .into_iter()
            .find(|c| c.suite().suite() == s.suite())
    }

    /// The suite rustls names `name` (as `--json`'s `cipher` gives it), if it is one of these.
    pub(crate) fn of_suite_name(name: &str) -> Option<Cipher> {
        Cipher::ALL
            .into_iter()
            .find(|c| crate::secured::suite_name(Some(c.suite())) == name)
    }

    fn suite(self) -> SupportedCipherSuite {
        match self {
            Cipher::Aes128Gcm => aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
            Cipher::Aes256Gcm => aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384,
            Cipher::Chacha20 => aws_lc_rs::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cipher::Aes128Gcm => "aes128gcm",
            Cipher::Aes256Gcm => "aes256gcm",
            Cipher::Chacha20 => "chacha20",
        })
    }
}

impl FromStr for Cipher {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "aes128gcm" | "aes128" | "aes-128-gcm" => Ok(Cipher::Aes128Gcm),
            "aes256gcm" | "aes256" | "aes-256-gcm" => Ok(Cipher::Aes256Gcm),
            "chacha20" | "chacha20poly1305" | "chacha20-poly1305" => Ok(Cipher::Chacha20),
            _ => Err(format!(
                "unknown cipher '{s}': use aes128gcm, aes256gcm or chacha20"
            )),
        }
    }
}

/// aws-lc's provider, offering `ciphers` in that order.
fn provider(ciphers: &[Cipher]) -> Arc<CryptoProvider> {
    let mut p = aws_lc_rs::default_provider();
    p.cipher_suites = ciphers.iter().map(|c| c.suite()).collect();
    Arc::new(p)
}

pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read certificates from {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} is not a PEM certificate file", path.display()))?;
    if certs.is_empty() {
        bail!(
            "{} holds no PEM certificate (expected '-----BEGIN CERTIFICATE-----')",
            path.display()
        );
    }
    Ok(certs)
}

pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .with_context(|| format!("cannot read a PEM private key from {}", path.display()))
}

fn roots(ca: &Path) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca)? {
        roots.add(c).with_context(|| {
            format!(
                "{} holds a certificate that cannot be used as a trust anchor",
                ca.display()
            )
        })?;
    }
    Ok(roots)
}

/// Receiver side.
pub struct ServerTls {
    /// The receiver's certificate chain (PEM).
    pub cert: std::path::PathBuf,
    /// Its private key (PEM).
    pub key: std::path::PathBuf,
    /// Require client certificates signed by this CA (mutual TLS).
    pub client_ca: Option<std::path::PathBuf>,
}

impl ServerTls {
    /// The rustls configuration: TLS 1.3 only, session tickets for the extra channels'
    /// resumption. A receiver with AES hardware takes the suite the sender lists first (a sender
    /// without it lists ChaCha20-Poly1305 first); one without takes ChaCha20-Poly1305 whenever
    /// the sender offers it. So ChaCha20 is chosen when either end lacks AES hardware, and the
    /// slower end sets the pace.
    pub fn config(&self) -> Result<Arc<ServerConfig>> {
        let hardware = hardware_aes();
        let provider = provider(&preferred_ciphers(hardware));
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3 is not available in this build")?;
        let builder = match &self.client_ca {
            Some(ca) => {
                let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider)
                    .build()
                    .map_err(|e| anyhow!("cannot use {} to verify clients: {e}", ca.display()))?;
                builder.with_client_cert_verifier(v)
            }
            None => builder.with_no_client_auth(),
        };
        let mut cfg = builder
            .with_single_cert(load_certs(&self.cert)?, load_key(&self.key)?)
            .context("the server certificate and key do not match or are not supported")?;
        // Clients resume with tickets from the first handshake for their extra channels.
        cfg.send_tls13_tickets = 16;
        cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
        cfg.ignore_client_order = !hardware;
        Ok(Arc::new(cfg))
    }
}

/// Sender side.
pub struct ClientTls<'a> {
    /// The CA certificate the receiver's certificate must chain to (PEM).
    pub ca: &'a Path,
    /// Offer only this suite (`None`: all, in [`preferred_ciphers`]'s order for this machine).
    pub cipher: Option<Cipher>,
    /// Client certificate and key, for receivers that require mutual TLS.
    pub identity: Option<(&'a Path, &'a Path)>,
}

impl ClientTls<'_> {
    /// The rustls configuration: TLS 1.3 only, the chosen suites, resumption for the extra
    /// channels.
    pub fn config(&self) -> Result<Arc<ClientConfig>> {
        let ciphers = match self.cipher {
            Some(c) => vec![c],
            None => preferred_ciphers(hardware_aes()).to_vec(),
        };
        let builder = ClientConfig::builder_with_provider(provider(&ciphers))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3 is not available in this build")?
            .with_root_certificates(roots(self.ca)?);
        let cfg = match self.identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                .context("the client certificate and key do not match or are not supported")?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(cfg))
    }
}

pub(crate) use crate::secured::Secured;
pub use crate::secured::{suite_name, EXPORTER_LABEL};

/// How a receiver makes its secure channels.
#[derive(Clone)]
pub(crate) enum Acceptor {
    Rustls(tokio_rustls::TlsAcceptor),
    /// OpenSSL with the thesis's TLS 1.2 suites as well (INSECURE; laboratory only).
    #[cfg(feature = "insecure-thesis-suites")]
    Legacy(Arc<crate::legacy_tls::LegacyServer>),
}

impl Acceptor {
    pub async fn accept(&self, tcp: TcpStream) -> Result<Secured> {
        match self {
            Acceptor::Rustls(a) => {
                Secured::from_server(a.accept(tcp).await.context("TLS handshake failed")?)
            }
            #[cfg(feature = "insecure-thesis-suites")]
            Acceptor::Legacy(a) => a.accept(tcp).await,
        }
    }
}

/// The thesis-suite client of a sender (only constructible with `insecure-thesis-suites`).
#[cfg(feature = "insecure-thesis-suites")]
pub type LegacyConnector = Arc<crate::legacy_tls::LegacyClient>;
/// The thesis-suite client of a sender (only constructible with `insecure-thesis-suites`).
#[cfg(not(feature = "insecure-thesis-suites"))]
pub type LegacyConnector = std::convert::Infallible;

/// The thesis-suite server of a receiver (only constructible with `insecure-thesis-suites`).
#[cfg(feature = "insecure-thesis-suites")]
pub type LegacyAcceptor = Arc<crate::legacy_tls::LegacyServer>;
/// The thesis-suite server of a receiver (only constructible with `insecure-thesis-suites`).
#[cfg(not(feature = "insecure-thesis-suites"))]
pub type LegacyAcceptor = std::convert::Infallible;
