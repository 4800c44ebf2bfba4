//! Connections: the TLS handshake and first frame, HELLO (a new session) or JOIN (a further
//! channel of one), checked before the connection may hold any of the receiver's budgets.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use sieve_core::mac::negotiate;
use sieve_core::message::{self, Hello, Join, JoinOk, Message, SessionMsg};
use sieve_core::receiver::{ReceiverSession, SessionLimits};
use sieve_core::Kind;
use tokio::net::TcpStream;
use tracing::{debug, info, warn};

use crate::conn::{FrameReader, FrameWriter};
use crate::lock::lock;
use crate::mac::PlainMac;
use crate::token::JoinKey;

use super::admission::{network, ClientHold, ClientKey, Ticket};
use super::limits::{preauth, protocol_memory_share, session_frame_limit, Held};
use super::session::Session;
use super::Shared;

/// How long a newcomer waits for the place of a session ended to admit it (see
/// [`Shared::make_room_for`]): that session only has to wind down, in milliseconds, or a second
/// at most if its sender does not read.
const ROOM_WAIT: Duration = Duration::from_secs(3);

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

    /// A connection to the TLS port: its handshake, then HELLO (a new session) or a secure JOIN.
    pub(super) async fn tls_conn(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        ticket: Ticket,
    ) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let limits = &self.cfg.limits;
        let fd = tcp.as_raw_fd();
        let hs = async {
            let tls =
                match tokio::time::timeout(limits.handshake_timeout, self.acceptor.accept(tcp))
                    .await
                {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        // Logged where an operator looks: a client with a certificate from another
                        // CA, or none where one is required, fails here.
                        info!(%peer, "TLS handshake refused: {e:#}");
                        return Err(e);
                    }
                    Err(_) => bail!("no TLS handshake within {:?}", limits.handshake_timeout),
                };
            // Keying material for join tokens; only used if this connection starts a session.
            let id: [u8; 16] = rand::random();
            let (km, cipher, w) = (tls.exporter, tls.cipher, tls.write);
            let (client, peer_cert) = (tls.client.clone(), tls.peer_cert.clone());
            let mut reader = FrameReader::new(tls.read, preauth(limits.frame));
            // `tls.read` owns (a share of) the socket behind `fd`.
            reader.batch_wakeups(fd, TLS_SLACK, limits.idle_timeout);
            let first = tokio::time::timeout(limits.join_timeout, reader.message())
                .await
                .map_err(|_| anyhow!("no HELLO or JOIN within {:?}", limits.join_timeout))??;
            reader.set_limits(limits.frame);
            reader.set_budget_shared(self.buffers.clone(), network(peer.ip().to_canonical()));
            anyhow::Ok((reader, w, first, id, (km, cipher), (client, peer_cert)))
        };
        let hs = tokio::select! {
            r = hs => r,
            _ = ticket.evicted() => Err(anyhow!("dropped to make room for newer connections")),
        };
        let (mut reader, w, first, id, (km, cipher), (client, peer_cert)) = match hs {
            Ok(r) => r,
            Err(e) => {
                self.stats
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        drop(ticket);
        let mut writer = FrameWriter::new(w);
        match first {
            Message::Hello(hello) => {
                if let Some(why) = self.files_exhausted() {
                    self.stats.fd_limit_refusals.fetch_add(1, Ordering::Relaxed);
                    let m = message::ErrorMsg::new(message::ErrorMsg::LIMIT, why.clone());
                    writer.send(|o| m.encode(o)).await?;
                    writer.flush().await?;
                    bail!("session refused ({peer}): {why}");
                }
                let keys = ClientKey::of(peer.ip(), client.as_deref());
                let (hold, session_permit) = match self.admit(&keys, peer).await {
                    Ok(admitted) => admitted,
                    Err(why) => {
                        let m = message::ErrorMsg::new(message::ErrorMsg::LIMIT, why.clone());
                        writer.send(|o| m.encode(o)).await?;
                        writer.flush().await?;
                        bail!("session refused ({peer}): {why}");
                    }
                };
                let r = self
                    .clone()
                    .start_session(
                        hello,
                        (JoinKey::derive(&km, &id), km),
                        id,
                        reader,
                        writer,
                        (cipher, peer_cert),
                        (peer, client, keys),
                    )
                    .await;
                drop((session_permit, hold));
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

    /// A connection to the plain port: its JOIN, then the channel's data.
    pub(super) async fn plain_conn(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        ticket: Ticket,
    ) -> Result<()> {
        let _ = tcp.set_nodelay(true);
        let limits = &self.cfg.limits;
        let fd = tcp.as_raw_fd();
        let (r, w) = tcp.into_split();
        let mut reader = FrameReader::new(Box::new(r), preauth(limits.frame));
        // `r` owns (a share of) the socket behind `fd`.
        reader.batch_wakeups(fd, 0, limits.idle_timeout);
        let first = tokio::select! {
            r = tokio::time::timeout(limits.join_timeout, reader.message()) => r.ok(),
            _ = ticket.evicted() => None,
        };
        let Some(first) = first else {
            self.stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            bail!("no JOIN from {peer} within {:?}", limits.join_timeout);
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
        drop(ticket);
        session.attach(&mut reader);
        reader.set_budget_shared(self.buffers.clone(), network(peer.ip().to_canonical()));
        let mut writer = FrameWriter::new(Box::new(w));
        writer.send(|o| JoinOk {}.encode(o)).await?;
        writer.flush().await?;
        session.run_channel(Kind::Plain, &mut reader).await;
        Ok(())
    }

    /// Admit a new session of the client known by `keys` (from `peer`): a place among its
    /// address's, network's and certificate's sessions, then among the receiver's. Where one is
    /// full, the session of it furthest behind the minimum rate is ended to make room, if one
    /// is behind ([`Shared::make_room_for`]); else the newcomer is refused, and told why.
    async fn admit(
        &self,
        keys: &[ClientKey],
        peer: SocketAddr,
    ) -> Result<(ClientHold, tokio::sync::OwnedSemaphorePermit), String> {
        let deadline = Instant::now() + ROOM_WAIT;
        let hold = self
            .clients
            .take_or_make_room(keys, deadline, |full| self.make_room_for(Some(full), peer))
            .await
            .map_err(|full| {
                format!(
                    "{full} already has {} sessions with this receiver, each moving data; wait \
                     for one to end",
                    self.clients.cap(&full)
                )
            })?;
        let full = || "the receiver is at its session limit; try again later".to_string();
        let permit = match self.session_permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) if self.make_room_for(None, peer) => {
                match tokio::time::timeout_at(
                    deadline.into(),
                    self.session_permits.clone().acquire_owned(),
                )
                .await
                {
                    Ok(Ok(p)) => p,
                    _ => return Err(full()),
                }
            }
            Err(_) => return Err(full()),
        };
        Ok((hold, permit))
    }

    /// A newcomer from `peer` finds `full` (one of its [`ClientKey`]s, or with `None` the
    /// receiver itself) at its limit of sessions: end the session of it that is furthest behind
    /// the minimum rate ([`ServeLimits::min_session_rate`](super::ServeLimits)), if any is
    /// behind. Whether one was ended (its place comes free once it has wound down).
    ///
    /// Only a session that moved less than the minimum rate over the last
    /// [`CREDIT_WINDOW`](crate::progress::CREDIT_WINDOW) can be ended, so that a newcomer, however
    /// many there are, never ends one that sends a document at a useful rate. A session that
    /// has just started is behind by no more than the little time it has had, so a trickling
    /// session, behind for longer, goes first.
    pub(super) fn make_room_for(&self, full: Option<&ClientKey>, peer: SocketAddr) -> bool {
        let Ok(sessions) = lock(&self.sessions, "the receiver's table of sessions") else {
            return false;
        };
        let victim = sessions
            .values()
            .filter(|s| full.is_none_or(|k| s.keys.contains(k)) && !s.is_evicted())
            .map(|s| (s.activity.credit(), s))
            .filter(|(credit, _)| *credit < 0.0)
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, s)| s.clone());
        drop(sessions);
        let Some(victim) = victim else {
            return false;
        };
        let limit = match full {
            Some(k) => format!("{k}'s limit of {} sessions", self.clients.cap(k)),
            None => format!("its limit of {} sessions", self.cfg.limits.max_sessions),
        };
        let why = format!(
            "this session was ended to admit another: the receiver is at {limit}, and this \
             session moved less than {} bytes a second over the last {} s, the least of them \
             (sieve serve --min-session-rate)",
            victim.activity.min_rate(),
            crate::progress::CREDIT_WINDOW.as_secs()
        );
        if !victim.evict(why) {
            return false;
        }
        self.stats.sessions_evicted.fetch_add(1, Ordering::Relaxed);
        info!(session = %victim.hex_id(), peer = %victim.who(), newcomer = %peer, "session ended to admit a newcomer: it moved less than the minimum rate");
        true
    }

    /// Authenticate a JOIN and claim its channel slot.
    pub(super) fn find_session(&self, join: &Join) -> Result<Arc<Session>> {
        let session = lock(&self.sessions, "the receiver's table of sessions")?
            .get(&join.session_id)
            .cloned();
        let Some(session) = session else {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("JOIN for an unknown session");
        };
        if !session.key.verify(join.kind, join.index, &join.token) {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("JOIN with a wrong token");
        }
        if let Err(e) = session.sm().join(join.kind, join.index) {
            self.stats.bad_joins.fetch_add(1, Ordering::Relaxed);
            bail!("{e}");
        }
        Ok(session)
    }
}

impl Shared {
    /// Where a session's documents go: the output folder, or with per-client folders the
    /// folder of the client certificate `peer_cert`; `None` with `discard`.
    fn session_store(
        &self,
        peer_cert: Option<&[u8]>,
    ) -> Result<Option<crate::store::Store>, NoClientStore> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        if !store.options().per_client_dirs {
            return Ok(Some(store.clone()));
        }
        let cert = peer_cert.ok_or(NoClientStore::NoCertificate)?;
        store
            .for_client(cert)
            .map(Some)
            .map_err(NoClientStore::Folder)
    }
}

/// Why a session has nowhere to put its documents (with per-client folders); the sender is told
/// (an ERROR with code INTERNAL) and the session refused.
#[derive(Debug, thiserror::Error)]
enum NoClientStore {
    #[error("this receiver keeps a folder per client certificate, and none was presented")]
    NoCertificate,
    #[error("cannot open the folder of this client: {0}")]
    Folder(crate::store::CommitError),
}

impl Shared {
    /// The limits a new session gets: the receiver's, with its share of the memory the
    /// protocol may hold and of the documents that may be open at once.
    fn session_limits(&self) -> SessionLimits {
        let l = &self.cfg.limits;
        SessionLimits {
            max_doc_bytes: l.max_doc_bytes,
            max_docs: l.max_docs_per_session,
            max_segments: l.max_segments,
            memory: protocol_memory_share(l),
            max_open_docs: self.fds.session_docs(),
            discard: self.cfg.discard,
            accept_compression: self.cfg.accept_compression,
            inflate: l.inflate,
        }
    }

    /// Start a session on a fresh TLS connection whose first frame was HELLO.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start_session(
        self: Arc<Self>,
        hello: Hello,
        (key, km): (JoinKey, [u8; 32]),
        id: [u8; 16],
        mut reader: FrameReader,
        mut writer: FrameWriter,
        (cipher, peer_cert): (String, Option<Vec<u8>>),
        who: (SocketAddr, Option<String>, Vec<ClientKey>),
    ) -> Result<()> {
        let sm = match ReceiverSession::new(
            hello,
            self.session_limits(),
            self.protocol_memory.clone(),
        ) {
            Ok(sm) => sm,
            Err(why) => {
                let m = message::ErrorMsg::new(why.code(), why.to_string());
                writer.send(|o| m.encode(o)).await?;
                writer.flush().await?;
                bail!("refused HELLO from {}: {why}", who.0);
            }
        };
        // The cleartext MAC: this receiver's fastest among what the sender offers.
        let mac = match negotiate(&hello.macs, &self.cfg.macs) {
            Ok(alg) => PlainMac::derive_for(alg, &km, &id),
            Err(why) => {
                let m = message::ErrorMsg::new(message::ErrorMsg::PROTOCOL, why.to_string());
                writer.send(|o| m.encode(o)).await?;
                writer.flush().await?;
                bail!("refused HELLO from {}: {why}", who.0);
            }
        };
        let store = match self.session_store(peer_cert.as_deref()) {
            Ok(s) => s,
            Err(why) => {
                let m = message::ErrorMsg::new(message::ErrorMsg::INTERNAL, why.to_string());
                writer.send(|o| m.encode(o)).await?;
                writer.flush().await?;
                bail!("session refused ({}): {why}", who.0);
            }
        };
        let frame = session_frame_limit(&self.cfg.limits, hello.channels());
        let reply = SessionMsg {
            session_id: id,
            plain_addr: self.advertise.clone(),
            max_payload: frame.max_payload,
            max_open_docs: u32::try_from(self.fds.session_docs()).unwrap_or(u32::MAX),
            mac: mac.alg(),
            compression: sm.compression(),
            decompress_mbps: self.decompress_mbps,
            decompress_cores: std::thread::available_parallelism()
                .map_or(1, |n| u8::try_from(n.get()).unwrap_or(u8::MAX)),
        };
        // Only buffered here: it goes out (below) once the session can be found by its JOINs.
        writer.send(|o| reply.encode(o)).await?;
        let session = Arc::new(Session::new(
            id,
            sm,
            (key, mac),
            (self.clone(), store),
            writer,
            who,
            frame,
        ));
        lock(&self.sessions, "the receiver's table of sessions")?.insert(id, session.clone());
        self.stats.sessions_started.fetch_add(1, Ordering::Relaxed);
        info!(session = %session.hex_id(), peer = %session.who(), mode = ?hello.mode, secure = hello.secure_channels, plain = hello.plain_channels, %cipher, mac = %reply.mac, "session started");
        let sent = session.ctl.lock().await.flush().await;
        session.attach(&mut reader);
        let result = match sent {
            Ok(()) => session.control_loop(&mut reader).await,
            Err(e) => Err(e),
        };
        if result.is_err() {
            session.tell_why_it_ended().await;
        }
        lock(&self.sessions, "the receiver's table of sessions")?.remove(&id);
        // Every unfinished document loses its temporary file now.
        session.end();
        let secs = session.started.elapsed().as_secs_f64();
        match &result {
            Ok(()) => {
                self.stats
                    .sessions_completed
                    .fetch_add(1, Ordering::Relaxed);
                info!(session = %session.hex_id(), peer = %session.who(), secs, "session finished");
            }
            Err(e) => {
                self.stats.sessions_failed.fetch_add(1, Ordering::Relaxed);
                warn!(session = %session.hex_id(), peer = %session.who(), secs, "session failed: {e:#}");
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use crate::receiver::{stall_free_buffer_bytes, ServeLimits};
    use sieve_core::message::{self, MAX_CHANNELS};

    /// The default frame-buffer budget lets the default number of sessions, each with as many
    /// channels as a HELLO may ask for, receive 256 KiB frames without ever all waiting.
    #[test]
    fn default_buffer_budget_fits_every_honest_channel() {
        let l = ServeLimits::default();
        let need = stall_free_buffer_bytes(l.max_sessions);
        assert!(
            l.max_buffer_bytes >= need,
            "default budget {} < {need} for {} sessions of {MAX_CHANNELS} channels",
            l.max_buffer_bytes,
            l.max_sessions
        );
        // A 256 KiB chunk plus the DATA prefix is what stall_free_buffer_bytes counts per channel.
        let frame = (256 << 10) + message::DATA_PREFIX_LEN as u64;
        assert_eq!(frame.div_ceil(1024) * 1024, 257 << 10);
    }
}
