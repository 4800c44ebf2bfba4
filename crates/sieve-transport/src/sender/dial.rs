//! Opening connections ahead: channel 0's TCP connection and TLS handshake, and the plain
//! connections to a receiver's remembered plain address, started while the documents are still
//! being prepared.
//!
//! Preparing a document (the marks scan, a policy, `--mode auto`'s choice) and connecting to
//! the receiver (a TCP round trip, the TLS handshake's, its key exchange) do not depend on each
//! other, and before this the one waited for the other: on loopback a 1 MB document was
//! prepared in 0.2-0.4 ms and connected in about 1 ms, one after the other. A [`Dial`] runs
//! them side by side. Nothing is said on the connections until the documents are ready: HELLO
//! needs them (their mode, how many), and a file that turns out badly marked fails the send
//! with nothing sent, as before; the connections are then dropped unused.
//!
//! A receiver drops a connection that says nothing for its `--join-timeout` (2 s by default)
//! after its handshake. A connection that has waited longer than [`EARLY_MAX_AGE`] is not used:
//! the send dials again. Documents so large that preparing them takes longer are not dialled
//! ahead at all ([`DIAL_AHEAD_MAX_BYTES`]): the handshake is then a small part of the send and
//! the receiver would only see a connection come and go.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::explain;
use crate::sendq::SendQueues;
use crate::tls::Secured;

use super::SendConfig;

/// A connection opened ahead older than this is not used: a receiver drops a connection that
/// has not sent its HELLO or JOIN within 2 s (its default `--join-timeout`), and one sent now
/// might come too late.
pub(super) const EARLY_MAX_AGE: Duration = Duration::from_secs(1);

/// Documents of more bytes than this in all are not dialled ahead: the marks scan reads several
/// GB/s and a policy about 0.5 GB/s per core, so preparing this much may outlast
/// [`EARLY_MAX_AGE`], and beside such a send the handshake's milliseconds do not count.
pub(super) const DIAL_AHEAD_MAX_BYTES: u64 = 256 << 20;

/// Whether the plain connections opened ahead are wanted after all, once `--mode auto` can
/// say: `Some(false)` when it will send secure-only whatever the documents hold (they would
/// only be opened and dropped: on loopback that cost 1 MB sends 0.2-0.4 ms of their 2.4-2.5,
/// AMD EPYC). A connection waits for the answer; a sender that drops it unanswered wants none.
pub(super) type PlainWanted = tokio::sync::watch::Receiver<Option<bool>>;

/// Channel 0 after its handshake.
pub(super) struct Opened {
    pub tls: Secured,
    /// The receiver runs on this host (see [`is_same_host`]).
    pub same_host: bool,
    /// When the handshake finished.
    pub done: Instant,
}

/// A plain connection opened ahead, and when it was established.
pub(super) type Early = JoinHandle<std::io::Result<(TcpStream, Instant)>>;

/// Connections being opened for one session: channel 0 and, where a past session remembered
/// the receiver's plain address, the plain channels. Dropping it aborts whatever is still
/// being opened and closes what was.
pub(super) struct Dial {
    channel0: Option<JoinHandle<Result<Opened>>>,
    /// When dialling started.
    pub started: Instant,
    /// The plain address the early connections go to, if any was remembered.
    pub guess: Option<SocketAddr>,
    /// One per plain channel, while not yet taken.
    pub early: Vec<Option<Early>>,
    pub connector: TlsConnector,
    pub name: ServerName<'static>,
    /// The sockets of every channel, and of each kind (see `Connected`).
    pub queues: Arc<SendQueues>,
    pub kind_queues: [Arc<SendQueues>; 2],
}

impl Dial {
    /// Start opening channel 0 to `cfg.to`, and `n_plain` plain connections to the receiver's
    /// remembered plain address if there is one (once `wanted` says they are, if given). Must
    /// run inside the tokio runtime. Fails only when `--to`'s host is not a valid server name.
    pub fn start(cfg: &SendConfig, n_plain: u8, wanted: Option<PlainWanted>) -> Result<Dial> {
        let host = cfg.server_name.clone().unwrap_or_else(|| host_of(&cfg.to));
        let name = ServerName::try_from(host.clone())
            .map_err(|_| anyhow!("'{host}' is not a valid server name"))?;
        let connector = TlsConnector::from(cfg.tls.clone());
        let queues = Arc::new(SendQueues::default());
        let kind_queues = [
            Arc::new(SendQueues::default()),
            Arc::new(SendQueues::default()),
        ];
        // Taken before anything is started: a thread descheduled here must not make the
        // handshake look as if it finished before dialling began.
        let started = Instant::now();
        let channel0 = {
            let (cfg, connector, name) = (cfg.clone(), connector.clone(), name.clone());
            let q = (
                queues.clone(),
                kind_queues[sieve_core::Kind::Secure.index()].clone(),
            );
            tokio::spawn(async move {
                let (tls, same_host) = tls_connect(&cfg, &connector, &name, (&q.0, &q.1)).await?;
                Ok(Opened {
                    tls,
                    same_host,
                    done: Instant::now(),
                })
            })
        };
        // The plain channels need the receiver's plain address, which SESSION gives. A past
        // session to this receiver gave it too: connecting to it now saves a round trip. No
        // JOIN goes until SESSION confirms the address. Read once channel 0's handshake is
        // under way: the handshake is the longer of the two, and reading and parsing the path
        // memory took tens of microseconds that it used to wait for.
        let guess = match (&cfg.path_memory, n_plain) {
            (Some(file), 1..) => crate::paths::recall_plain(file, &cfg.to),
            _ => None,
        };
        let early = connect_early(guess, n_plain, wanted);
        Ok(Dial {
            channel0: Some(channel0),
            started,
            guess,
            early,
            connector,
            name,
            queues,
            kind_queues,
        })
    }

    /// Channel 0, once its handshake is done. `fresh` says whether a connection that finished
    /// long ago may be used: `Ok(None)` when it may not (it was opened ahead, has waited longer
    /// than [`EARLY_MAX_AGE`], and the caller should dial again).
    pub async fn channel0(&mut self, fresh: bool) -> Result<Option<Opened>> {
        let Some(handle) = self.channel0.take() else {
            return Ok(None);
        };
        let opened = handle
            .await
            .map_err(|e| anyhow!("connecting to the receiver stopped: {e}"))??;
        if fresh || opened.done.elapsed() <= EARLY_MAX_AGE {
            Ok(Some(opened))
        } else {
            Ok(None)
        }
    }

    /// Give up the plain connections opened ahead (none are needed, or they lead elsewhere).
    pub fn drop_early(&mut self) {
        for e in self.early.drain(..).flatten() {
            e.abort();
        }
    }
}

impl Drop for Dial {
    fn drop(&mut self) {
        if let Some(h) = self.channel0.take() {
            h.abort();
        }
        self.drop_early();
    }
}

/// Open a connection to `guess`, a receiver's plain address remembered from a past session,
/// for each of `n_plain` channels, without waiting (but for `wanted`'s answer, if given: one not
/// wanted fails, and is never taken).
fn connect_early(
    guess: Option<SocketAddr>,
    n_plain: u8,
    wanted: Option<PlainWanted>,
) -> Vec<Option<Early>> {
    let Some(addr) = guess else {
        return Vec::new();
    };
    (0..n_plain)
        .map(|_| {
            let wanted = wanted.clone();
            Some(tokio::spawn(async move {
                if let Some(mut w) = wanted {
                    let go = matches!(w.wait_for(Option::is_some).await.as_deref(), Ok(Some(true)));
                    if !go {
                        return Err(std::io::Error::other("not wanted: auto sends secure-only"));
                    }
                }
                let tcp = TcpStream::connect(addr).await?;
                Ok((tcp, Instant::now()))
            }))
        })
        .collect()
}

/// The early connection `early`, if it opened, is young enough and the receiver has not closed
/// it (nothing may be read on it before the JOIN's answer: a readable end or error means it is
/// gone).
pub(super) async fn take_early(early: Early) -> Option<TcpStream> {
    let (tcp, at) = early.await.ok()?.ok()?;
    if at.elapsed() > EARLY_MAX_AGE {
        return None;
    }
    let mut probe = [0u8; 1];
    match tcp.try_read(&mut probe) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Some(tcp),
        _ => None,
    }
}

/// A TLS channel to `cfg.to`: TCP connection and handshake, its socket watched by `queues`
/// (every channel's) and `secure` (the secure channels'); also whether the receiver runs on
/// this host.
pub(super) async fn tls_connect(
    cfg: &SendConfig,
    connector: &TlsConnector,
    name: &ServerName<'static>,
    (queues, secure): (&SendQueues, &SendQueues),
) -> Result<(Secured, bool)> {
    let tcp = TcpStream::connect(&cfg.to).await.with_context(|| {
        format!(
            "cannot connect to the receiver at {} (is `sieve serve` running there?)",
            cfg.to
        )
    })?;
    let _ = tcp.set_nodelay(true);
    queues.watch(&tcp);
    secure.watch(&tcp);
    let same_host = is_same_host(&tcp);
    let handshake = async {
        match &cfg.legacy {
            None => Secured::from_client(
                connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(anyhow::Error::from)?,
            ),
            #[cfg(feature = "insecure-thesis-suites")]
            Some(l) => l.connect(tcp, &name.to_str()).await,
            #[cfg(not(feature = "insecure-thesis-suites"))]
            Some(never) => match *never {},
        }
    };
    let secured = tokio::time::timeout(cfg.idle_timeout, handshake)
        .await
        .map_err(|_| {
            anyhow!(
                "TLS handshake with {} did not finish within {:?}",
                cfg.to,
                cfg.idle_timeout
            )
        })?;
    secured
        .map(|s| (s, same_host))
        .map_err(|e| match explain::tls_failure(&e) {
            Some(why) => anyhow!("TLS handshake with {} failed: {why}", cfg.to),
            None => anyhow!(
                "TLS handshake with {} failed: {}. Check that --ca is the CA that signed the \
             receiver's certificate and that the certificate is valid for the host name you used",
                cfg.to,
                explain::without_urls(&format!("{e:#}"))
            ),
        })
}

/// The receiver runs on this host: it was reached at a loopback address or at the address the
/// connection comes from.
pub(super) fn is_same_host(tcp: &TcpStream) -> bool {
    match (tcp.peer_addr(), tcp.local_addr()) {
        (Ok(p), Ok(l)) => p.ip().is_loopback() || p.ip() == l.ip(),
        _ => false,
    }
}

/// The host part of `addr` (`host:port`), without IPv6 brackets.
fn host_of(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        None => addr.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;
    use tokio::sync::watch;

    /// Nothing connects within `wait`.
    async fn no_connection(l: &TcpListener, wait: Duration) -> bool {
        tokio::time::timeout(wait, l.accept()).await.is_err()
    }

    /// Plain connections opened ahead under `auto` wait for its answer: not wanted, or left
    /// unanswered, they never reach the receiver and are never taken; wanted, they connect.
    #[tokio::test]
    async fn plain_connections_wait_until_wanted() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();

        let (tx, rx) = watch::channel(None);
        let early = connect_early(Some(addr), 2, Some(rx));
        tx.send(Some(false)).unwrap();
        for e in early {
            assert!(take_early(e.unwrap()).await.is_none());
        }
        let (tx, rx) = watch::channel(None);
        let early = connect_early(Some(addr), 1, Some(rx));
        drop(tx);
        for e in early {
            assert!(take_early(e.unwrap()).await.is_none());
        }
        assert!(no_connection(&l, Duration::from_millis(50)).await);

        let (tx, rx) = watch::channel(None);
        let mut early = connect_early(Some(addr), 1, Some(rx));
        assert!(no_connection(&l, Duration::from_millis(20)).await, "waits");
        tx.send(Some(true)).unwrap();
        let (_peer, _) = l.accept().await.unwrap();
        let e = early.pop().flatten().unwrap();
        assert!(take_early(e).await.is_some());

        // Without a question to wait for, at once.
        let mut early = connect_early(Some(addr), 1, None);
        let (_peer, _) = l.accept().await.unwrap();
        assert!(take_early(early.pop().flatten().unwrap()).await.is_some());
    }
}
