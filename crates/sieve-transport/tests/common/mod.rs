//! Shared helpers for the end-to-end tests: certificates, an in-process receiver in a temporary
//! folder, sender configurations, test documents, a tampering TCP proxy, and a hand-driven
//! protocol client for what an honest sender never does.

#![allow(dead_code)]

pub mod proxy;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::ServerName;
use sieve_core::batch::BatchSplit;
use sieve_core::frame::Limits;
use sieve_core::ledger::Ledger;
use sieve_core::mac::MacOffer;
use sieve_core::marks::{mark_document, MarkConfig};
use sieve_core::message::{self, Hello, Message, Mode, SessionMsg};
use sieve_core::split::Split;
use sieve_transport::conn::{FrameReader, FrameWriter};
use sieve_transport::mac::PlainMac;
use sieve_transport::receiver::{Receiver, ServeConfig, ServeLimits, Stats};
use sieve_transport::sender::{self, Chunk, Progress, SendConfig, Sendfile, SessionReport};
use sieve_transport::source::Classify;
use sieve_transport::store::{StoreOptions, TEMP_PREFIX};
use sieve_transport::tls::{ClientTls, ServerTls, EXPORTER_LABEL};
use sieve_transport::token::JoinKey;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

/// Bytes per data frame in tests: small, so that modest documents still need many frames.
pub const CHUNK: u32 = 16 * 1024;

/// Logs of receiver and sender, shown for failing tests; set `RUST_LOG` (default: warnings).
pub fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// A temporary folder on tmpfs when there is one: thousands of fsyncs cost nothing there.
pub fn fast_tempdir() -> TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("sieve-test-")
            .tempdir_in(shm)
        {
            return d;
        }
    }
    tempfile::tempdir().expect("temporary folder")
}

/// A development CA and a server certificate for localhost/127.0.0.1, as `sieve certs` writes.
pub struct Certs {
    pub dir: TempDir,
}

impl Certs {
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "sieve test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let mut server =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "sieve test receiver");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().unwrap();
        let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.path().join("server.pem"), server_cert.pem()).unwrap();
        std::fs::write(dir.path().join("server.key"), server_key.serialize_pem()).unwrap();
        Certs { dir }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn server(&self) -> Arc<rustls::ServerConfig> {
        ServerTls {
            cert: self.dir.path().join("server.pem"),
            key: self.dir.path().join("server.key"),
            client_ca: None,
        }
        .config()
        .expect("server TLS configuration")
    }

    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        ClientTls {
            ca: &self.ca(),
            cipher: None,
            identity: None,
        }
        .config()
        .expect("client TLS configuration")
    }
}

/// A receiver running in this process on 127.0.0.1 (ports chosen by the system), writing into
/// `root/out`. Stopped when dropped.
pub struct TestReceiver {
    pub root: TempDir,
    pub out: PathBuf,
    pub certs: Certs,
    pub addr: SocketAddr,
    pub plain: SocketAddr,
    pub stats: Arc<Stats>,
    task: JoinHandle<Result<()>>,
}

impl TestReceiver {
    pub async fn start() -> TestReceiver {
        Self::start_with(tempfile::tempdir().expect("temporary folder"), |_| {}).await
    }

    /// Start in `root` (its `out` subfolder is the output folder); `adjust` may change the
    /// configuration before binding.
    pub async fn start_with(root: TempDir, adjust: impl FnOnce(&mut ServeConfig)) -> TestReceiver {
        init_tracing();
        let certs = Certs::new();
        let out = root.path().join("out");
        std::fs::create_dir(&out).expect("output folder");
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut cfg = ServeConfig {
            dir: out.clone(),
            tls: certs.server(),
            listen: any,
            plain_listen: any,
            plain_advertise: None,
            discard: false,
            legacy: None,
            limits: ServeLimits {
                idle_timeout: Duration::from_secs(20),
                ..ServeLimits::default()
            },
            store: StoreOptions::default(),
            macs: Default::default(),
            accept_compression: message::CompressFlags::ALL,
        };
        adjust(&mut cfg);
        let receiver = Receiver::bind(cfg).await.expect("receiver binds");
        let (addr, plain, stats) = (receiver.tls_addr(), receiver.plain_addr(), receiver.stats());
        let task = tokio::spawn(receiver.run());
        TestReceiver {
            root,
            out,
            certs,
            addr,
            plain,
            stats,
            task,
        }
    }

    /// A sender configuration for this receiver.
    pub fn config(
        &self,
        mode: Mode,
        n: u8,
        m: u8,
        split: Split,
        batch_split: BatchSplit,
    ) -> SendConfig {
        SendConfig {
            to: self.addr.to_string(),
            server_name: Some("localhost".into()),
            tls: self.certs.client(),
            mode: mode.into(),
            secure_channels: n,
            plain_channels: m,
            split,
            batch_split,
            classify: Classify::Marks(MarkConfig::default()),
            chunk: Chunk::Bytes(CHUNK),
            idle_timeout: Duration::from_secs(20),
            mmap: true,
            sendfile: Sendfile::default(),
            require_classified: false,
            // These tests exercise the sieve itself, often on unmarked cleartext, so they send
            // what nothing classified in the clear; `e2e.rs` checks the default, secure-only.
            allow_clear: true,
            skip_invalid: false,
            legacy: None,
            compress: sieve_core::compress::Compression::Auto,
            compress_classified: false,
            path_memory: None,
        }
    }

    /// Sieve mode, one channel of each kind, dynamic splits.
    pub fn simple(&self, mode: Mode) -> SendConfig {
        self.config(mode, 1, 1, Split::Dynamic, BatchSplit::Dynamic)
    }

    /// Send `files` in one session and require every document to be acknowledged.
    /// Wait until the receiver has ended every session it started (it counts a session once the
    /// session has ended, which may be after the sender returned on the last ACK).
    pub async fn sessions_settle(&self) {
        let st = self.stats.clone();
        wait_for(
            "the receiver to end every session",
            Duration::from_secs(20),
            || {
                st.sessions_started.load(Ordering::Relaxed)
                    == st.sessions_completed.load(Ordering::Relaxed)
                        + st.sessions_failed.load(Ordering::Relaxed)
            },
        )
        .await;
    }

    pub async fn send_ok(&self, cfg: &SendConfig, files: &[PathBuf]) -> SessionReport {
        let r = send(cfg, files)
            .await
            .unwrap_or_else(|e| panic!("send failed: {e:#}"));
        assert_eq!(r.docs, files.len());
        assert_eq!(r.docs_ok, files.len(), "failures: {:?}", r.failures);
        assert!(r.failures.is_empty());
        r
    }

    /// The received file `name` must hold exactly `expected`.
    pub fn assert_received(&self, name: &str, expected: &[u8]) {
        let got = std::fs::read(self.out.join(name))
            .unwrap_or_else(|e| panic!("{name} not received: {e}"));
        if got != expected {
            let at = got
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expected.len()));
            panic!(
                "{name}: received {} bytes, expected {}; first difference at byte {at}",
                got.len(),
                expected.len()
            );
        }
    }

    /// Names in the output folder, sorted (temporary files included).
    pub fn out_names(&self) -> Vec<String> {
        names_in(&self.out)
    }

    /// Wait until no temporary file is left in the output folder.
    pub async fn assert_no_partials_soon(&self) {
        let out = self.out.clone();
        wait_for(
            "temporary files to be removed",
            Duration::from_secs(10),
            || partials(&out).is_empty(),
        )
        .await;
    }
}

impl Drop for TestReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn send(cfg: &SendConfig, files: &[PathBuf]) -> Result<SessionReport> {
    sender::send(cfg, files, Arc::new(Progress::default())).await
}

pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list folder")
        .map(|e| {
            e.expect("folder entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

pub fn partials(dir: &Path) -> Vec<String> {
    names_in(dir)
        .into_iter()
        .filter(|n| n.starts_with(TEMP_PREFIX))
        .collect()
}

/// Poll `cond` until it holds; panic with `what` after `limit`.
pub async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Write `bytes` to `dir/name` and return the path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write a test document");
    p
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

/// Text content with literal marks, escapes and binary bytes sprinkled in, and random classified
/// ranges (some empty, some adjacent). Returns (content, marked document).
pub fn marked_doc(seed: u64, len: usize, segments: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let alphabet = b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ.,;\n0123456789<$SE>\\";
    let mut content: Vec<u8> = (0..len)
        .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
        .collect();
    // Literal marks, escapes and bytes that are not UTF-8.
    let specials: [&[u8]; 6] = [
        b"<$S>",
        b"<$E>",
        b"\\",
        b"\\<$E>",
        b"\0\xff\xfe",
        b"\\\\<$S>",
    ];
    for i in 0..(len / 512) {
        let s = specials[i % specials.len()];
        let at = rng.gen_range(0..len.saturating_sub(s.len()).max(1));
        if at + s.len() <= len {
            content[at..at + s.len()].copy_from_slice(s);
        }
    }
    let mut cuts: Vec<u64> = (0..segments * 2)
        .map(|_| rng.gen_range(0..=len as u64))
        .collect();
    cuts.sort_unstable();
    let ranges: Vec<_> = cuts.chunks(2).map(|c| c[0]..c[1]).collect();
    let marked = mark_document(&MarkConfig::default(), &content, &ranges);
    (content, marked)
}

/// Every byte value, NULs and invalid UTF-8 included.
pub fn binary(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

// ---------------------------------------------------------------------------------------------
// A TCP proxy that can change one byte
// ---------------------------------------------------------------------------------------------

/// A proxy's listening socket, bound before its target is known (the receiver must be told the
/// proxy's address with `plain_advertise` before it binds).
pub struct ProxyListener {
    pub addr: SocketAddr,
    listener: TcpListener,
}

impl ProxyListener {
    pub async fn bind() -> ProxyListener {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        ProxyListener {
            addr: listener.local_addr().unwrap(),
            listener,
        }
    }

    /// Forward every connection to `target`. With `flip_at = Some(k)`, the byte at offset `k` of
    /// the client-to-server stream of the *first* connection is inverted; later connections pass
    /// through unchanged.
    pub fn forward(self, target: SocketAddr, flip_at: Option<u64>) -> Proxy {
        let ProxyListener { addr, listener } = self;
        let connections = Arc::new(AtomicU64::new(0));
        let flipped = Arc::new(AtomicU64::new(0));
        let upstream = Arc::new(Mutex::new(Vec::new()));
        let (c, f, rec) = (connections.clone(), flipped.clone(), upstream.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let first = c.fetch_add(1, Ordering::Relaxed) == 0;
                let flip_at = flip_at.filter(|_| first);
                let f = f.clone();
                let rec = rec.clone();
                let conn = {
                    let mut r = rec.lock().unwrap();
                    r.push(Vec::new());
                    r.len() - 1
                };
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let up = async move {
                        let mut buf = vec![0u8; 32 * 1024];
                        let mut pos = 0u64;
                        loop {
                            let n = match cr.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if let Some(k) = flip_at {
                                if (pos..pos + n as u64).contains(&k) {
                                    buf[(k - pos) as usize] ^= 0xff;
                                    f.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            pos += n as u64;
                            rec.lock().unwrap()[conn].extend_from_slice(&buf[..n]);
                            if sw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = sw.shutdown().await;
                    };
                    let down = async move {
                        let _ = tokio::io::copy(&mut sr, &mut cw).await;
                        let _ = cw.shutdown().await;
                    };
                    tokio::join!(up, down);
                });
            }
        });
        Proxy {
            addr,
            connections,
            flipped,
            upstream,
            task,
        }
    }
}

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    /// Connections accepted.
    pub connections: Arc<AtomicU64>,
    /// Bytes changed.
    pub flipped: Arc<AtomicU64>,
    /// Every byte each connection sent towards the server, as it left the proxy.
    pub upstream: Arc<Mutex<Vec<Vec<u8>>>>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// A hand-driven client, for what an honest sender never does
// ---------------------------------------------------------------------------------------------

/// Channel 0 of a session opened by hand: HELLO sent, SESSION received.
pub struct RawSession {
    pub reader: FrameReader,
    pub writer: FrameWriter,
    pub session: SessionMsg,
    pub key: JoinKey,
    /// Keying material exported from this TLS connection (what tokens and MACs derive from).
    pub exported: [u8; 32],
}

/// A TCP connection to `to` from the loopback address `from` (any of 127.0.0.0/8), so that a
/// test can stand for several client machines.
pub async fn connect_from(from: std::net::Ipv4Addr, to: SocketAddr) -> Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    Ok(socket.connect(to).await?)
}

impl RawSession {
    pub async fn open(
        rx: &TestReceiver,
        mode: Mode,
        secure: u8,
        plain: u8,
        docs: u32,
    ) -> Result<RawSession> {
        Self::open_from(rx, std::net::Ipv4Addr::LOCALHOST, mode, secure, plain, docs).await
    }

    /// [`RawSession::open`] from the loopback address `from`.
    pub async fn open_from(
        rx: &TestReceiver,
        from: std::net::Ipv4Addr,
        mode: Mode,
        secure: u8,
        plain: u8,
        docs: u32,
    ) -> Result<RawSession> {
        Self::open_offering(rx, from, (mode, secure, plain, docs), MacOffer::default()).await
    }

    /// [`RawSession::open_from`] offering the cleartext MACs `macs`; an [`message::ErrorMsg`]
    /// answer becomes an error carrying its text.
    pub async fn open_offering(
        rx: &TestReceiver,
        from: std::net::Ipv4Addr,
        (mode, secure, plain, docs): (Mode, u8, u8, u32),
        macs: MacOffer,
    ) -> Result<RawSession> {
        let offer = (macs, message::CompressFlags::NONE);
        Self::open_full(rx, from, mode, (secure, plain), docs, offer).await
    }

    /// [`RawSession::open`] with a HELLO that offers the compressed frames `compression`.
    pub async fn open_with(
        rx: &TestReceiver,
        mode: Mode,
        secure: u8,
        plain: u8,
        docs: u32,
        compression: message::CompressFlags,
    ) -> Result<RawSession> {
        let lo = std::net::Ipv4Addr::LOCALHOST;
        let offer = (MacOffer::default(), compression);
        Self::open_full(rx, lo, mode, (secure, plain), docs, offer).await
    }

    async fn open_full(
        rx: &TestReceiver,
        from: std::net::Ipv4Addr,
        mode: Mode,
        (secure, plain): (u8, u8),
        docs: u32,
        (macs, compression): (MacOffer, message::CompressFlags),
    ) -> Result<RawSession> {
        let tcp = connect_from(from, rx.addr).await?;
        let connector = TlsConnector::from(rx.certs.client());
        let tls = connector
            .connect(ServerName::try_from("localhost")?, tcp)
            .await?;
        let mut exported = [0u8; 32];
        tls.get_ref()
            .1
            .export_keying_material(&mut exported, EXPORTER_LABEL, None)?;
        let (r, w) = tokio::io::split(tls);
        let mut reader = FrameReader::new(Box::new(r), Limits::default());
        let mut writer = FrameWriter::new(Box::new(w));
        let hello = Hello {
            version: message::PROTOCOL_VERSION,
            mode,
            secure_channels: secure,
            plain_channels: plain,
            split: Default::default(),
            batch_split: Default::default(),
            chunk_size: CHUNK,
            docs,
            macs,
            compression,
        };
        writer.send(|o| hello.encode(o)).await?;
        writer.flush().await?;
        let session = match reader.message().await? {
            Message::Session(s) => s,
            Message::Error(e) => bail!("refused ({}): {}", e.code, e.message),
            other => bail!("expected SESSION, got {other:?}"),
        };
        let key = JoinKey::derive(&exported, &session.session_id);
        Ok(RawSession {
            reader,
            writer,
            session,
            key,
            exported,
        })
    }

    /// The ledger digest of a plain stream sent as `pieces` (offset, bytes) for document `doc`.
    pub fn plain_digest(&self, doc: u32, pieces: &[(u64, &[u8])]) -> [u8; 32] {
        let mac = PlainMac::derive_for(self.session.mac, &self.exported, &self.session.session_id);
        let mut ledger = Ledger::new();
        let mut len = 0;
        for &(off, bytes) in pieces {
            let tag = mac.tag(doc, off, bytes).expect("tag");
            ledger.record_hashed(off, bytes.len() as u64, tag);
            len += bytes.len() as u64;
        }
        ledger.finish(len).expect("pieces cover the stream")
    }

    /// Queue a frame and send it now.
    pub async fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        self.writer.send(encode).await?;
        self.writer.flush().await
    }

    /// The next message, within `limit`.
    pub async fn next(&mut self, limit: Duration) -> Result<Message> {
        tokio::time::timeout(limit, self.reader.message())
            .await
            .map_err(|_| anyhow!("no answer within {limit:?}"))?
    }
}

/// Open a plain TCP connection and send `join`. `Ok(Some(writer))` when the receiver answers
/// JOIN_OK (the writer carries the channel's data), `Ok(None)` when it closes the connection.
pub async fn plain_join(addr: SocketAddr, join: message::Join) -> Result<Option<FrameWriter>> {
    let tcp = TcpStream::connect(addr)
        .await
        .context("connect to the plain port")?;
    let (r, w) = tcp.into_split();
    let mut reader = FrameReader::new(Box::new(r), Limits::default());
    let mut writer = FrameWriter::new(Box::new(w));
    writer.send(|o| join.encode(o)).await?;
    writer.flush().await?;
    match tokio::time::timeout(Duration::from_secs(10), reader.read()).await {
        Err(_) => bail!("the receiver neither accepted nor closed the connection"),
        Ok(Err(_)) | Ok(Ok(None)) => Ok(None),
        Ok(Ok(Some((ty, payload)))) => match Message::parse(ty, payload)? {
            Message::JoinOk(_) => Ok(Some(writer)),
            other => bail!("unexpected answer to a JOIN: {other:?}"),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Documents built piece by piece, with their expected outputs
// ---------------------------------------------------------------------------------------------

/// A marked document and, computed independently of the parser, the document the receiver
/// writes with `--strip-marks` (marks removed, escapes resolved). Without stripping the receiver
/// writes `raw` itself.
#[derive(Debug, Clone, Default)]
pub struct Marked {
    pub raw: Vec<u8>,
    pub stripped: Vec<u8>,
}

impl Marked {
    pub fn new() -> Marked {
        Marked::default()
    }

    /// Content; the caller makes sure it forms no mark and does not end in an escape.
    pub fn text(mut self, b: &[u8]) -> Marked {
        self.raw.extend_from_slice(b);
        self.stripped.extend_from_slice(b);
        self
    }

    pub fn start(mut self) -> Marked {
        self.raw.extend_from_slice(b"<$S>");
        self
    }

    pub fn end(mut self) -> Marked {
        self.raw.extend_from_slice(b"<$E>");
        self
    }

    /// `\<$S>`: a literal start mark.
    pub fn literal_start(mut self) -> Marked {
        self.raw.extend_from_slice(b"\\<$S>");
        self.stripped.extend_from_slice(b"<$S>");
        self
    }

    /// `\<$E>`: a literal end mark.
    pub fn literal_end(mut self) -> Marked {
        self.raw.extend_from_slice(b"\\<$E>");
        self.stripped.extend_from_slice(b"<$E>");
        self
    }

    /// `\\` before a mark: one literal backslash; the mark that follows is real.
    pub fn escaped_escape(mut self) -> Marked {
        self.raw.extend_from_slice(b"\\\\");
        self.stripped.extend_from_slice(b"\\");
        self
    }

    /// Filler text up to `len` bytes of raw document.
    pub fn fill_to(self, len: usize, seed: u64) -> Marked {
        let n = len
            .checked_sub(self.raw.len())
            .expect("fill_to goes forward");
        let t = filler(seed, n);
        self.text(&t)
    }
}

/// Text with no `<` and no `\`: it can never form or escape a mark.
pub fn filler(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let alphabet = b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?\n0123456789$SE>";
    (0..len)
        .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
        .collect()
}

/// Random bytes (NULs and invalid UTF-8 included) with no `<` and no `\`, so that they form no
/// mark and escape nothing.
pub fn safe_binary(seed: u64, len: usize) -> Vec<u8> {
    let mut v = binary(seed, len);
    for b in &mut v {
        if *b == b'<' || *b == b'\\' {
            *b = 0;
        }
    }
    v
}

/// Resident memory of this process, in bytes.
pub fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// File descriptors this process holds open.
pub fn fd_count() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}
