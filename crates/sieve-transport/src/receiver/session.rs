//! One session's I/O: the control loop of channel 0 and the data channels' loops feed the
//! session's protocol state machine ([`sieve_core::receiver::ReceiverSession`]) and carry out
//! what it asks: writes, verifications, commits, discards and acknowledgements.
//!
//! Every decision about a document is the state machine's, taken under one lock; this file only
//! moves bytes. A frame's cleartext is tagged before the state machine sees it, and written only
//! where, and only if, the state machine's verdict says so.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use sieve_core::frame::{FrameType, Limits};
use sieve_core::ledger::UnitTag;
use sieve_core::message::{self, Ack, AckStatus, DataRef, DocCancel, DocEnd, DocRef, ZDataRef};
use sieve_core::receiver::{Action, Lookup, ReceiverSession, Verdict};
use sieve_core::Kind;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::conn::{BudgetError, BufferExhausted, FrameReader, FrameWriter, ReadError};
use crate::mac::{FrameTagger, PlainMac};
use crate::progress::Activity;
use crate::token::JoinKey;

use super::admission::ClientKey;
use super::arriving::Arriving;
use super::files::{commit_failure, Files};
use super::inflate::Inflate;
use super::Shared;
use crate::store::Store;

/// One session: its state machine, its documents' files, and the writer of channel 0 for
/// acknowledgements.
pub(super) struct Session {
    pub(super) id: [u8; 16],
    pub(super) key: JoinKey,
    pub(super) mac: PlainMac,
    pub(super) shared: Arc<Shared>,
    /// Who opened it: the address of channel 0, and the client certificate's name under mutual
    /// TLS. Every log line of the session names them.
    pub(super) peer: SocketAddr,
    pub(super) client: Option<String>,
    /// What it is counted against: its address, network and certificate.
    pub(super) keys: Vec<ClientKey>,
    /// Set when the session was ended to admit a newcomer: what its sender is told.
    evicted: Mutex<Option<String>>,
    /// The protocol: every event goes through it, under this lock, and nothing else decides.
    sm: Arc<Mutex<ReceiverSession>>,
    /// Woken when a manifest arrives (frames of a document may overtake its manifest).
    manifests: Notify,
    /// The temporary files of documents being received.
    pub(super) files: Arc<Files>,
    pub(super) ctl: tokio::sync::Mutex<FrameWriter>,
    pub(super) abort_tx: watch::Sender<bool>,
    /// Why the session was aborted (the first reason given).
    abort_why: Mutex<Option<String>>,
    /// Set when a channel gave up waiting for frame-buffer memory, or its frame gave way to
    /// others that waited: what the sender is told.
    out_of_memory: Mutex<Option<String>>,
    /// Channels of this session waiting for frame-buffer memory now.
    memory_waiters: Arc<AtomicU64>,
    /// What the channels of this session move (its readers report to it): its idle check, and
    /// its rate when a newcomer needs its place.
    pub(super) activity: Activity,
    pub(super) started: Instant,
    /// Frame limit of every channel of this session ([`super::session_frame_limit`]).
    pub(super) frame: Limits,
}

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        id: [u8; 16],
        sm: ReceiverSession,
        (key, mac): (JoinKey, PlainMac),
        (shared, store): (Arc<Shared>, Option<Store>),
        writer: FrameWriter,
        (peer, client, keys): (SocketAddr, Option<String>, Vec<ClientKey>),
        frame: Limits,
    ) -> Session {
        let (abort_tx, _) = watch::channel(false);
        let activity = Activity::new(shared.cfg.limits.min_session_rate);
        Session {
            id,
            key,
            mac,
            files: Arc::new(Files::new(shared.clone(), store, hex(&id))),
            shared,
            peer,
            client,
            keys,
            evicted: Mutex::new(None),
            sm: Arc::new(Mutex::new(sm)),
            manifests: Notify::new(),
            ctl: tokio::sync::Mutex::new(writer),
            abort_tx,
            abort_why: Mutex::new(None),
            out_of_memory: Mutex::new(None),
            memory_waiters: Arc::new(AtomicU64::new(0)),
            activity,
            started: Instant::now(),
            frame,
        }
    }

    pub(super) fn hex_id(&self) -> String {
        hex(&self.id)
    }

    /// Who is on the other end, for logs: the peer's address and, under mutual TLS, its name.
    pub(super) fn who(&self) -> String {
        match &self.client {
            Some(c) => format!("{} ({c})", self.peer),
            None => self.peer.to_string(),
        }
    }

    /// The state machine. A poisoned lock means a panic elsewhere while it was held; the
    /// machine's state is still consistent (each event is applied whole or not at all as far as
    /// the transport can tell), so the session goes on to fail cleanly rather than panic again.
    pub(super) fn sm(&self) -> MutexGuard<'_, ReceiverSession> {
        self.sm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Everything the state machine asks for now.
    fn take_actions(sm: &mut ReceiverSession) -> Vec<Action> {
        std::iter::from_fn(|| sm.poll_action()).collect()
    }

    /// Make `reader` a channel of this session: the session's frame limit, its count of channels
    /// waiting for memory, and its activity (what it reads counts against the idle timeout and
    /// for the session's rate).
    pub(super) fn attach(&self, reader: &mut FrameReader) {
        reader.set_limits(self.frame);
        reader.count_waits_in(self.memory_waiters.clone());
        reader.report_activity_to(self.activity.clone());
    }

    pub(super) fn idle_for(&self) -> Duration {
        self.activity.idle_for()
    }

    /// Read DATA frames from an extra channel until it closes or the session ends.
    pub(super) async fn run_channel(self: &Arc<Self>, kind: Kind, reader: &mut FrameReader) {
        let mut abort = self.abort_tx.subscribe();
        let idle = self.shared.cfg.limits.idle_timeout;
        let mut inflate = None;
        // Kept across reads cancelled by the idle timeout: the next read goes on with the frame.
        let mut arriving = Arriving::default();
        loop {
            let mut seen = |ty, len, so_far: &[u8]| {
                let lookup = |doc| self.sm().lookup(doc);
                arriving.observe(&self.mac, lookup, kind, (ty, len, so_far));
            };
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, reader.read_observed(&mut seen)) => f,
                _ = abort.changed() => return,
            };
            let result = match frame {
                Err(_) if self.idle_for() < idle => continue,
                Err(_) => Err(match self.memory_wait_error(reader) {
                    Some(e) => self.ran_out_of_memory(e),
                    None => anyhow!("no whole frame for {idle:?}"),
                }),
                Ok(Ok(None)) => return,
                Ok(Ok(Some((FrameType::Data, payload)))) => match DataRef::parse(payload) {
                    Ok(d) => {
                        let early = arriving.take_for(d.doc, d.offset, d.payload.len() as u64);
                        self.data(kind, d, early).await
                    }
                    Err(e) => Err(e.into()),
                },
                Ok(Ok(Some((FrameType::ZData, payload)))) => match ZDataRef::parse(payload) {
                    Ok(z) => self.zdata(kind, z, payload, &mut inflate).await,
                    Err(e) => Err(e.into()),
                },
                Ok(Ok(Some((ty, _)))) => {
                    Err(anyhow!("unexpected {} frame on a data channel", ty.name()))
                }
                Ok(Err(e)) => Err(self.read_failed(e)),
            };
            if let Err(e) = result {
                self.abort(&format!("{kind:?} channel failed: {e:#}"));
                return;
            }
        }
    }

    /// Channel 0: manifests, classified data, DOC_ENDs, until BYE.
    pub(super) async fn control_loop(self: &Arc<Self>, reader: &mut FrameReader) -> Result<()> {
        let idle = self.shared.cfg.limits.idle_timeout;
        let mut abort = self.abort_tx.subscribe();
        let mut inflate = None;
        loop {
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, reader.read()) => f,
                _ = abort.changed() => bail!("{}", self.abort_reason()),
            };
            let (ty, payload) = match frame {
                Err(_) if self.idle_for() < idle => continue,
                Err(_) => match self.memory_wait_error(reader) {
                    Some(e) => return Err(self.ran_out_of_memory(e)),
                    None => bail!("no whole frame for {idle:?}"),
                },
                Ok(Ok(None)) => bail!("the sender closed channel 0 before saying goodbye"),
                Ok(Err(e)) => return Err(self.read_failed(e)),
                Ok(Ok(Some(f))) => f,
            };
            match ty {
                FrameType::Data => {
                    self.data(Kind::Secure, DataRef::parse(payload)?, None)
                        .await?
                }
                FrameType::ZData => {
                    let z = ZDataRef::parse(payload)?;
                    self.zdata(Kind::Secure, z, payload, &mut inflate).await?
                }
                FrameType::Doc => self.manifest(&DocRef::parse(payload)?).await?,
                FrameType::DocEnd => self.doc_end(DocEnd::parse(payload)?).await?,
                FrameType::DocCancel => self.doc_cancel(DocCancel::parse(payload)?).await?,
                FrameType::Bye => return Ok(()),
                other => bail!("unexpected {} frame on channel 0", other.name()),
            }
        }
    }

    async fn manifest(self: &Arc<Self>, doc: &DocRef<'_>) -> Result<()> {
        // The store looks at its folder first: a name it will not create, or (without
        // --overwrite) one that exists, is refused before any byte of the document travels.
        let refused = match &self.files.store {
            Some(store) => store
                .precheck(doc.name)
                .err()
                .map(|e| commit_failure(doc.name, e)),
            None => None,
        };
        let actions = {
            let mut sm = self.sm();
            match refused {
                Some(f) => {
                    sm.refuse_manifest(doc.doc, doc.name.to_string(), f.status, f.message)?
                }
                None => sm.manifest(doc)?,
            }
            Self::take_actions(&mut sm)
        };
        self.manifests.notify_waiters();
        self.run_actions(actions).await;
        Ok(())
    }

    async fn doc_cancel(self: &Arc<Self>, m: DocCancel) -> Result<()> {
        let actions = {
            let mut sm = self.sm();
            sm.cancel(m.doc, &m.reason)?;
            Self::take_actions(&mut sm)
        };
        self.run_actions(actions).await;
        Ok(())
    }

    async fn doc_end(self: &Arc<Self>, end: DocEnd) -> Result<()> {
        let actions = {
            let mut sm = self.sm();
            sm.doc_end(end, Instant::now())?;
            Self::take_actions(&mut sm)
        };
        self.run_actions(actions).await;
        Ok(())
    }

    /// Where a document's frames go, waiting (up to the idle timeout) for its manifest if the
    /// frame overtook it; `None` if the document is refused or failed.
    async fn lookup(&self, doc: u32) -> Result<Option<Lookup>> {
        let deadline = Instant::now() + self.shared.cfg.limits.idle_timeout;
        loop {
            let notified = self.manifests.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.sm().lookup(doc)? {
                Lookup::NotYet => {}
                Lookup::Drop => return Ok(None),
                found => return Ok(Some(found)),
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                bail!("data for document {doc}, whose manifest never came");
            }
        }
    }

    /// One data frame: tag its cleartext (off the lock; `early` holds the tags of the units
    /// taken while it arrived, if any), let the state machine record it, then write it where the
    /// verdict says and report the write done.
    pub(super) async fn data(
        self: &Arc<Self>,
        kind: Kind,
        d: DataRef<'_>,
        early: Option<FrameTagger>,
    ) -> Result<()> {
        let len = d.payload.len() as u64;
        let tags = match self.lookup(d.doc).await? {
            None => return Ok(()),
            Some(Lookup::Placement(p)) if kind == Kind::Plain => match early {
                Some(t) => t.finish(&self.mac, d.payload)?,
                None => self.mac.frame_tags(&p, d.doc, d.offset, d.payload)?,
            },
            Some(_) => Vec::new(),
        };
        self.shared
            .stats
            .bytes_received
            .fetch_add(len, Ordering::Relaxed);
        self.record_and_write(kind, d.doc, d.offset, d.payload, &tags)
            .await
    }

    /// One compressed frame: take the tag of what travelled (a plain frame's whole payload)
    /// before anything is decompressed, check that the session agreed to such frames and that
    /// the document may inflate that far before it is verified, decompress
    /// into the channel's buffer (charged to the frame-buffer budget from the declared length),
    /// then record and write the declared bytes like any data frame, the one tag covering them.
    /// A frame that does not decompress fails its document: on a plain channel it was changed on
    /// the way; inside TLS the sender is broken.
    pub(super) async fn zdata(
        self: &Arc<Self>,
        kind: Kind,
        z: ZDataRef<'_>,
        payload: &[u8],
        inflate: &mut Option<Inflate>,
    ) -> Result<()> {
        let declared = u64::from(z.declared_len);
        if self.lookup(z.doc).await?.is_none() {
            return Ok(());
        }
        self.sm()
            .compressed(kind, z.codec, z.doc, z.offset, declared)?;
        let tags: Vec<UnitTag> = match kind {
            Kind::Plain => vec![(
                z.offset,
                declared,
                self.mac.zdata_tag(z.doc, z.offset, payload)?,
            )],
            Kind::Secure => Vec::new(),
        };
        self.shared
            .stats
            .bytes_received
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        let inf = match inflate {
            Some(i) => i,
            None => inflate.insert(Inflate::new(
                self.frame.max_payload as usize,
                self.shared.buffers.clone(),
            )?),
        };
        // A frame that passes its own checks may still inflate too far for a document nobody
        // has vouched for yet: the state machine refuses the document before a byte is
        // decompressed. (A frame that fails them fails its document below, as it always did.)
        if inf.check(z.codec, z.compressed, declared).is_ok() {
            let refused = {
                let mut sm = self.sm();
                let wire = payload.len() as u64;
                (!sm.may_inflate(z.doc, declared, wire)).then(|| Self::take_actions(&mut sm))
            };
            if let Some(actions) = refused {
                self.shared
                    .stats
                    .inflate_refusals
                    .fetch_add(1, Ordering::Relaxed);
                self.run_actions(actions).await;
                return Ok(());
            }
        }
        let inflated = inf
            .inflate(z.codec, z.compressed, declared)
            .await
            .map_err(|e| self.budget_failed(e))?;
        let bytes = match inflated {
            Ok(b) => b,
            Err(e) => {
                let (status, why) = match kind {
                    Kind::Plain => (
                        AckStatus::IntegrityError,
                        format!(
                            "a compressed frame of its cleartext (offset {}) does not decompress: \
                             {e}; a plain channel was tampered with",
                            z.offset
                        ),
                    ),
                    Kind::Secure => (
                        AckStatus::ProtocolError,
                        format!(
                            "a compressed classified frame (offset {}) does not decompress: {e}",
                            z.offset
                        ),
                    ),
                };
                let actions = {
                    let mut sm = self.sm();
                    sm.fail(z.doc, status, why);
                    Self::take_actions(&mut sm)
                };
                self.run_actions(actions).await;
                return Ok(());
            }
        };
        self.shared
            .stats
            .frames_decompressed
            .fetch_add(1, Ordering::Relaxed);
        self.shared
            .stats
            .bytes_decompressed
            .fetch_add(declared, Ordering::Relaxed);
        let r = self
            .record_and_write(kind, z.doc, z.offset, bytes, &tags)
            .await;
        inf.settle();
        r
    }

    /// Hand a frame's `bytes` (at stream `offset` of `doc`, tagged with `tags` if plain) to the
    /// state machine, then write them where its verdict says and report the write done.
    async fn record_and_write(
        self: &Arc<Self>,
        kind: Kind,
        doc: u32,
        offset: u64,
        bytes: &[u8],
        tags: &[UnitTag],
    ) -> Result<()> {
        let len = bytes.len() as u64;
        let (verdict, actions) = {
            let mut sm = self.sm();
            let v = sm.data(kind, doc, offset, len, tags, Instant::now())?;
            (v, Self::take_actions(&mut sm))
        };
        self.run_actions(actions).await;
        match verdict {
            Verdict::Write { file, pieces } => {
                let result = self.files.write(&file, &pieces, bytes);
                let actions = {
                    let mut sm = self.sm();
                    sm.write_done(doc, result);
                    Self::take_actions(&mut sm)
                };
                self.run_actions(actions).await;
            }
            Verdict::Recorded | Verdict::Drop => {}
            // The manifest was looked up a moment ago, so it cannot be missing now.
            Verdict::NotYet => bail!("internal error: document {doc} lost its manifest"),
        }
        Ok(())
    }

    /// Carry out what the state machine asked for, and what that in turn asks for. (Boxed: a
    /// commit's task runs the actions that its outcome brings, through this same function.)
    pub(super) fn run_actions(
        self: &Arc<Self>,
        actions: Vec<Action>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.run_actions_inner(actions))
    }

    async fn run_actions_inner(self: &Arc<Self>, actions: Vec<Action>) {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Verify(v) => {
                    // A closed document's ledgers: checking them needs no lock, and nothing
                    // can be added to them any more.
                    let doc = v.doc;
                    let t = Instant::now();
                    let result = v.run();
                    let mut sm = self.sm();
                    sm.verified(doc, result, t.elapsed());
                    queue.extend(Self::take_actions(&mut sm));
                }
                Action::Commit(c) => {
                    // Restoring marks and fsync take time: off this task, which reads a channel.
                    let s = self.clone();
                    tokio::spawn(async move {
                        let doc = c.file.doc;
                        let result = s.files.commit(c, &s.sm).await;
                        let actions = {
                            let mut sm = s.sm();
                            sm.committed(doc, result);
                            Self::take_actions(&mut sm)
                        };
                        s.run_actions(actions).await;
                    });
                }
                Action::Discard { doc } => self.files.discard(doc),
                Action::Ack { ack, name } => self.answer(ack, name).await,
            }
        }
    }

    /// Log, count and send one acknowledgement.
    async fn answer(&self, a: Ack, name: String) {
        if a.status == AckStatus::Ok {
            self.shared
                .stats
                .docs_committed
                .fetch_add(1, Ordering::Relaxed);
            info!(session = %self.hex_id(), peer = %self.who(), doc = a.doc, %name, "document committed");
        } else {
            self.shared
                .stats
                .docs_failed
                .fetch_add(1, Ordering::Relaxed);
            warn!(session = %self.hex_id(), peer = %self.who(), doc = a.doc, %name, status = ?a.status, "document not stored: {}", a.message);
        }
        let mut w = self.ctl.lock().await;
        let r = async {
            w.send(|o| a.encode(o)).await?;
            w.flush().await
        }
        .await;
        if let Err(e) = r {
            self.abort(&format!("cannot send an acknowledgement: {e:#}"));
        }
    }

    /// End the session to admit a newcomer (see [`Shared::make_room_for`]); `why` is what its
    /// sender is told. `false` if it was already being ended so.
    pub(super) fn evict(&self, why: String) -> bool {
        {
            let mut e = self.evicted.lock().unwrap_or_else(|p| p.into_inner());
            if e.is_some() {
                return false;
            }
            *e = Some(why.clone());
        }
        self.abort(&why);
        true
    }

    pub(super) fn is_evicted(&self) -> bool {
        self.evicted.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    pub(super) fn abort(&self, why: &str) {
        if !*self.abort_tx.borrow() {
            if let Ok(mut w) = self.abort_why.lock() {
                w.get_or_insert_with(|| why.to_string());
            }
            warn!(session = %self.hex_id(), peer = %self.who(), "session aborted: {why}");
            let _ = self.abort_tx.send(true);
        }
    }

    /// The session is over: nothing more is written, and every document not being committed
    /// loses its temporary file now (not when the process ends).
    pub(super) fn end(&self) {
        let _ = self.abort_tx.send(true);
        let actions = {
            let mut sm = self.sm();
            sm.end();
            Self::take_actions(&mut sm)
        };
        for a in actions {
            if let Action::Discard { doc } = a {
                self.files.discard(doc);
            }
        }
    }

    /// Why a channel of this session saw no frame for the idle timeout, if it is for lack of
    /// frame-buffer memory: this channel, or another of the session, is waiting for it.
    pub(super) fn memory_wait_error(&self, reader: &FrameReader) -> Option<BufferExhausted> {
        if let Some(e) = reader.memory_wait_error() {
            return Some(e);
        }
        (self.memory_waiters.load(Ordering::Acquire) > 0).then(|| BufferExhausted {
            what: "a frame of another channel of this session".into(),
            waited: self.idle_for(),
            limit_bytes: self.shared.buffers.limit_bytes(),
        })
    }

    pub(super) fn abort_reason(&self) -> String {
        self.abort_why
            .lock()
            .ok()
            .and_then(|w| w.clone())
            .unwrap_or_else(|| "a data channel failed".into())
    }

    /// A channel of this session gave up waiting for frame-buffer memory, or its frame gave
    /// way to others that waited: the first such reason is what the sender will be told
    /// ([`Session::tell_why_it_ended`]).
    fn ran_out_of_memory(&self, e: impl Into<anyhow::Error> + std::fmt::Display) -> anyhow::Error {
        if let Ok(mut o) = self.out_of_memory.lock() {
            o.get_or_insert_with(|| e.to_string());
        }
        e.into()
    }

    /// A channel's read failed: noted if for lack of memory, then reported like any failure.
    fn read_failed(&self, e: ReadError) -> anyhow::Error {
        match e {
            ReadError::Budget(b) => self.budget_failed(b),
            other => other.into(),
        }
    }

    /// The frame-buffer budget gave a channel no memory, or ended its frame: noted to tell the
    /// sender, then reported like any failure.
    fn budget_failed(&self, e: BudgetError) -> anyhow::Error {
        match e {
            BudgetError::Exhausted(m) => self.ran_out_of_memory(m),
            BudgetError::Evicted(m) => self.ran_out_of_memory(m),
            BudgetError::OverShare(m) => self.ran_out_of_memory(m),
            other => other.into(),
        }
    }

    /// A session that failed for lack of frame-buffer memory (any of its channels, see
    /// [`Session::ran_out_of_memory`]), or was ended to admit a newcomer, tells its sender why
    /// (an ERROR with code LIMIT on channel 0), within a second: its sender may not be reading.
    pub(super) async fn tell_why_it_ended(&self) {
        let evicted = self.evicted.lock().ok().and_then(|e| e.clone());
        let why = match self.out_of_memory.lock().ok().and_then(|o| o.clone()) {
            Some(why) => {
                self.shared
                    .stats
                    .buffer_refusals
                    .fetch_add(1, Ordering::Relaxed);
                why
            }
            None => match evicted {
                Some(why) => why,
                None => return,
            },
        };
        let m = message::ErrorMsg::new(message::ErrorMsg::LIMIT, why);
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let mut w = self.ctl.lock().await;
            w.send(|o| m.encode(o)).await?;
            w.flush().await
        })
        .await;
    }
}

/// Lower-case hex of a session id, for logs and temporary file names.
pub(super) fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
