//! Connections: the TLS handshake and first frame, HELLO (a new session) or JOIN (a further
//! channel of one), checked before the connection may hold any of the receiver's budgets.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use sieve_core::message::{self, Hello, Join, JoinOk, Message, Mode, Session as SessionMsg};
use sieve_core::Kind;
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn};

use crate::conn::{Activity, FrameReader, FrameWriter};
use crate::mac::PlainMac;
use crate::token::JoinKey;

use super::limits::{preauth, session_frame_limit, Held};
use super::session::Session;
use super::Shared;

/// Bytes of a TLS channel that may sit in the TLS layer, out of the socket but not yet readable:
/// at most one record in part (16 KiB of plaintext and its overhead), rounded up generously.
const TLS_SLACK: usize = 32 << 10;

impl Shared {
    /// Count a just-accepted connection against the descriptor budget; `None` (and the
    /// connection is to be closed) when the receiver is at its limit.
    pub(super) fn take_conn_fd(&self) -> Option<Held> {
        let held = Held::take(&self.fds_used, self.fds.conn_limit);
        if held.is_none() {
            self.stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            self.stats.fd_limit_refusals.fetch_add(1, Ordering::Relaxed);
            debug!(
                limit = self.fds.conn_limit,
                "connection refused: at the limit of open files"
            );
        }
        held
    }

    /// Why a new session or document must wait, if the descriptor budget is spent.
    pub(super) fn files_exhausted(&self) -> Option<String> {
        (self.fds_used.load(Ordering::Acquire) >= self.fds.doc_limit)
            .then(|| self.fd_limit_message())
    }

    pub(super) fn fd_limit_message(&self) -> String {
        format!(
            "the receiver is at its limit of open files ({} connections and documents in \
             progress; its open-file limit is {}); try again later",
            self.fds_used.load(Ordering::Acquire),
            self.fds.nofile
        )
    }

    pub(super) async fn tls_conn(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let limits = &self.cfg.limits;
        let fd = tcp.as_raw_fd();
        let hs = tokio::time::timeout(limits.handshake_timeout, async {
            let tls = self.acceptor.accept(tcp).await?;
            // Keying material for join tokens; only used if this connection starts a session.
            let id: [u8; 16] = rand::random();
            let (km, cipher, w, peer_cert) = (tls.exporter, tls.cipher, tls.write, tls.peer_cert);
            let mut reader = FrameReader::new(tls.read, preauth(limits.frame));
            // `tls.read` owns (a share of) the socket behind `fd`.
            reader.batch_wakeups(fd, TLS_SLACK, limits.idle_timeout);
            let first = reader.message().await?;
            reader.set_limits(limits.frame);
            reader.set_budget(self.buffers.clone());
            anyhow::Ok((reader, w, first, id, (km, cipher, peer_cert)))
        })
        .await;
        let (mut reader, w, first, id, (km, cipher, peer_cert)) = match hs {
            Ok(r) => r?,
            Err(_) => {
                self.stats
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                bail!(
                    "no handshake and first frame within {:?}",
                    limits.handshake_timeout
                );
            }
        };
        drop(permit);
        let mut writer = FrameWriter::new(w);
        match first {
            Message::Hello(hello) => {
                if let Some(why) = self.files_exhausted() {
                    self.stats.fd_limit_refusals.fetch_add(1, Ordering::Relaxed);
                    let m = message::Error::new(message::Error::LIMIT, why.clone());
                    writer.send(|o| m.encode(o)).await?;
                    writer.flush().await?;
                    bail!("session refused ({peer}): {why}");
                }
                let Ok(session_permit) = self.session_permits.clone().try_acquire_owned() else {
                    let m = message::Error {
                        code: 3,
                        message: "the receiver is at its session limit; try again later".into(),
                    };
                    writer.send(|o| m.encode(o)).await?;
                    writer.flush().await?;
                    bail!("session limit reached ({peer})");
                };
                let r = self
                    .clone()
                    .start_session(
                        hello,
                        (JoinKey::derive(&km, &id), PlainMac::derive(&km, &id)),
                        id,
                        reader,
                        writer,
                        (cipher, peer_cert),
                    )
                    .await;
                drop(session_permit);
                r
            }
            Message::Join(join) if join.kind == Kind::Secure => {
                let session = self.find_session(&join)?;
                writer.send(|o| JoinOk {}.encode(o)).await?;
                writer.flush().await?;
                session.attach(&mut reader);
                session.run_channel(Kind::Secure, &mut reader).await;
                Ok(())
            }
            other => {
                self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
                bail!(
                    "expected HELLO or a secure JOIN, got {}",
                    other.frame_type().name()
                )
            }
        }
    }

    pub(super) async fn plain_conn(
        self: Arc<Self>,
        tcp: TcpStream,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let limits = &self.cfg.limits;
        let fd = tcp.as_raw_fd();
        let (r, w) = tcp.into_split();
        let mut reader = FrameReader::new(Box::new(r), preauth(limits.frame));
        // `r` owns (a share of) the socket behind `fd`.
        reader.batch_wakeups(fd, 0, limits.idle_timeout);
        let first = match tokio::time::timeout(limits.handshake_timeout, reader.message()).await {
            Ok(m) => m,
            Err(_) => {
                self.stats
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                bail!("no JOIN within {:?}", limits.handshake_timeout);
            }
        };
        // Errors are shown with Display only: their Debug form carries a backtrace when
        // RUST_BACKTRACE is set, and resolving it for every hostile connection costs the
        // receiver ~140 MiB of debug information and milliseconds of CPU each (see RELIABILITY.md).
        let join = match first {
            Ok(Message::Join(j)) if j.kind == Kind::Plain => j,
            Ok(other) => {
                self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
                bail!("expected a plain JOIN, got {}", other.frame_type().name());
            }
            Err(e) => {
                self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
                bail!("expected a plain JOIN: {e:#}");
            }
        };
        let session = self.find_session(&join)?;
        drop(permit);
        session.attach(&mut reader);
        reader.set_budget(self.buffers.clone());
        let mut writer = FrameWriter::new(Box::new(w));
        writer.send(|o| JoinOk {}.encode(o)).await?;
        writer.flush().await?;
        session.run_channel(Kind::Plain, &mut reader).await;
        Ok(())
    }

    /// Authenticate a JOIN and claim its channel slot.
    pub(super) fn find_session(&self, join: &Join) -> Result<Arc<Session>> {
        let session = self
            .sessions
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .get(&join.session_id)
            .cloned();
        let Some(session) = session else {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("JOIN for an unknown session");
        };
        let count = match join.kind {
            Kind::Secure => session.hello.secure_channels,
            Kind::Plain => session.hello.plain_channels,
        };
        let ok_index = join.index < count && !(join.kind == Kind::Secure && join.index == 0);
        if !ok_index || !session.key.verify(join.kind, join.index, &join.token) {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("JOIN with a wrong token or channel index");
        }
        let mut joined = session.joined.lock().map_err(|_| anyhow!("poisoned"))?;
        if !joined.insert((join.kind, join.index)) {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!(
                "channel {:?}/{} already joined (replayed token?)",
                join.kind,
                join.index
            );
        }
        drop(joined);
        Ok(session)
    }
}

impl Shared {
    /// Where a session's documents go: the output folder, or with per-client folders the
    /// folder of the client certificate `peer_cert`; `None` with `discard`.
    fn session_store(
        &self,
        peer_cert: Option<&[u8]>,
    ) -> Result<Option<crate::store::Store>, String> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        if !store.options().per_client_dirs {
            return Ok(Some(store.clone()));
        }
        let cert = peer_cert.ok_or_else(|| {
            "this receiver keeps a folder per client certificate, and none was presented"
                .to_string()
        })?;
        store
            .for_client(cert)
            .map(Some)
            .map_err(|e| format!("cannot open the folder of this client: {e}"))
    }
}

/// Validate what a sender asks for.
fn check_hello(h: &Hello) -> Result<(), String> {
    if h.version != message::PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} is not supported (this receiver speaks {})",
            h.version,
            message::PROTOCOL_VERSION
        ));
    }
    if !(1..=16).contains(&h.secure_channels) {
        return Err(format!(
            "{} secure channels requested; 1 to 16 are allowed",
            h.secure_channels
        ));
    }
    match h.mode {
        Mode::Sieve if !(1..=16).contains(&h.plain_channels) => Err(format!(
            "{} plain channels requested; sieve mode needs 1 to 16",
            h.plain_channels
        )),
        Mode::SecureOnly if h.plain_channels != 0 => {
            Err("secure-only mode uses no plain channels".into())
        }
        _ => Ok(()),
    }
}

impl Shared {
    /// Start a session on a fresh TLS connection whose first frame was HELLO.
    pub(super) async fn start_session(
        self: Arc<Self>,
        hello: Hello,
        (key, mac): (JoinKey, PlainMac),
        id: [u8; 16],
        mut reader: FrameReader,
        mut writer: FrameWriter,
        (cipher, peer_cert): (String, Option<Vec<u8>>),
    ) -> Result<()> {
        if let Err(why) = check_hello(&hello) {
            let m = message::Error {
                code: message::Error::PROTOCOL,
                message: why.clone(),
            };
            writer.send(|o| m.encode(o)).await?;
            writer.flush().await?;
            bail!("refused HELLO: {why}");
        }
        let store = match self.session_store(peer_cert.as_deref()) {
            Ok(s) => s,
            Err(why) => {
                let m = message::Error::new(message::Error::INTERNAL, why.clone());
                writer.send(|o| m.encode(o)).await?;
                writer.flush().await?;
                bail!("session refused: {why}");
            }
        };
        let frame = session_frame_limit(
            &self.cfg.limits,
            u64::from(hello.secure_channels) + u64::from(hello.plain_channels),
        );
        let reply = SessionMsg {
            session_id: id,
            plain_addr: self.advertise.clone(),
            max_payload: frame.max_payload,
            max_open_docs: u32::try_from(self.fds.session_docs()).unwrap_or(u32::MAX),
        };
        // Only buffered here: it goes out (below) once the session can be found by its JOINs.
        writer.send(|o| reply.encode(o)).await?;
        let (abort_tx, _) = watch::channel(false);
        let session = Arc::new(Session {
            id,
            hello,
            key,
            mac,
            shared: self.clone(),
            joined: Mutex::new(std::collections::HashSet::new()),
            docs: Mutex::new(HashMap::new()),
            docs_changed: Notify::new(),
            ctl: tokio::sync::Mutex::new(writer),
            abort_tx,
            abort_why: Mutex::new(None),
            out_of_memory: Mutex::new(None),
            memory_waiters: Arc::new(AtomicU64::new(0)),
            activity: Activity::default(),
            started: Instant::now(),
            open_docs: Arc::new(AtomicU64::new(0)),
            refused: Mutex::new(std::collections::HashSet::new()),
            frame,
            store,
        });
        self.sessions
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .insert(id, session.clone());
        self.stats.sessions_started.fetch_add(1, Ordering::Relaxed);
        info!(session = %session.hex_id(), mode = ?hello.mode, secure = hello.secure_channels, plain = hello.plain_channels, %cipher, "session started");
        let sent = session.ctl.lock().await.flush().await;
        session.attach(&mut reader);
        let result = match sent {
            Ok(()) => session.control_loop(&mut reader).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            session.tell_out_of_memory(e).await;
        }
        self.sessions
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .remove(&id);
        let _ = session.abort_tx.send(true);
        // Drop every unfinished document: PartFile's Drop removes its temporary file.
        let slots: Vec<_> = session
            .docs
            .lock()
            .map(|d| d.values().cloned().collect())
            .unwrap_or_default();
        for s in slots {
            if let Ok(mut io) = s.io.write() {
                io.closed = true;
                io.file.take();
            }
        }
        let secs = session.started.elapsed().as_secs_f64();
        match &result {
            Ok(()) => {
                self.stats
                    .sessions_completed
                    .fetch_add(1, Ordering::Relaxed);
                info!(session = %session.hex_id(), secs, "session finished");
            }
            Err(e) => {
                self.stats.sessions_failed.fetch_add(1, Ordering::Relaxed);
                warn!(session = %session.hex_id(), secs, "session failed: {e:#}");
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::{honest_buffer_bytes, ServeLimits, MAX_CHANNELS};

    fn hello(secure: u8, plain: u8) -> Hello {
        Hello {
            version: message::PROTOCOL_VERSION,
            mode: Mode::Sieve,
            secure_channels: secure,
            plain_channels: plain,
            split: message::SPLIT_DYNAMIC,
            batch_split: message::SPLIT_DYNAMIC,
            chunk_size: 256 << 10,
            docs: 1,
        }
    }

    /// The default frame-buffer budget lets the default number of sessions, each with as many
    /// channels as a HELLO may ask for, receive 256 KiB frames without ever all waiting.
    #[test]
    fn default_buffer_budget_fits_every_honest_channel() {
        let l = ServeLimits::default();
        assert!(check_hello(&hello(16, 16)).is_ok());
        assert!(check_hello(&hello(17, 16)).is_err() && check_hello(&hello(16, 17)).is_err());
        assert_eq!(MAX_CHANNELS, 16 + 16);
        let need = honest_buffer_bytes(l.max_sessions);
        assert!(
            l.max_buffer_bytes >= need,
            "default budget {} < {need} for {} sessions",
            l.max_buffer_bytes,
            l.max_sessions
        );
        // A 256 KiB chunk plus the DATA prefix is what honest_buffer_bytes counts per channel.
        let frame = (256 << 10) + message::DATA_PREFIX_LEN as u64;
        assert_eq!(frame.div_ceil(1024) * 1024, 257 << 10);
    }
}
