//! One session: the control loop of channel 0, the data channels' loops, acknowledgements, and
//! how a session ends (idle, aborted, out of frame-buffer memory).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use sieve_core::frame::FrameType;
use sieve_core::frame::Limits;
use sieve_core::message::{self, Ack, DataRef, Doc, DocCancel, DocEnd, Hello};
use sieve_core::Kind;
use tokio::sync::{watch, Notify};
use tracing::warn;

use crate::conn::{Activity, BufferExhausted, FrameReader, FrameWriter};
use crate::mac::PlainMac;
use crate::token::JoinKey;

use super::document::DocSlot;
use super::Shared;

/// One session: its channels, its documents, and the writer of channel 0 for acknowledgements.
pub(super) struct Session {
    pub(super) id: [u8; 16],
    pub(super) hello: Hello,
    pub(super) key: JoinKey,
    pub(super) mac: PlainMac,
    pub(super) shared: Arc<Shared>,
    pub(super) joined: Mutex<std::collections::HashSet<(Kind, u8)>>,
    pub(super) docs: Mutex<HashMap<u32, Arc<DocSlot>>>,
    pub(super) docs_changed: Notify,
    pub(super) ctl: tokio::sync::Mutex<FrameWriter>,
    pub(super) abort_tx: watch::Sender<bool>,
    /// Why the session was aborted (the first reason given).
    pub(super) abort_why: Mutex<Option<String>>,
    /// Set when a channel gave up waiting for frame-buffer memory: what the sender is told.
    pub(super) out_of_memory: Mutex<Option<String>>,
    /// Channels of this session waiting for frame-buffer memory now.
    pub(super) memory_waiters: Arc<AtomicU64>,
    /// When a channel of this session last took a byte (its readers report to it).
    pub(super) activity: Activity,
    pub(super) started: Instant,
    /// Temporary files open (documents receiving pieces).
    pub(super) open_docs: Arc<AtomicU64>,
    /// Documents refused at their manifest: their pieces are still on the way, and are dropped.
    pub(super) refused: Mutex<std::collections::HashSet<u32>>,
    /// Frame limit of every channel of this session ([`session_frame_limit`]).
    pub(super) frame: Limits,
    /// Where its documents are stored; `None` with `discard`.
    pub(super) store: Option<crate::store::Store>,
}

impl Session {
    pub(super) fn hex_id(&self) -> String {
        self.id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Make `reader` a channel of this session: the session's frame limit, its count of channels
    /// waiting for memory, and its activity (every byte read counts against the idle timeout).
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
        loop {
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, reader.read()) => f,
                _ = abort.changed() => return,
            };
            let result = match frame {
                Err(_) if self.idle_for() < idle => continue,
                Err(_) => Err(match self.memory_wait_error(reader) {
                    Some(e) => e.into(),
                    None => anyhow!("channel idle for {idle:?}"),
                }),
                Ok(Ok(None)) => return,
                Ok(Ok(Some((FrameType::Data, payload)))) => match DataRef::parse(payload) {
                    Ok(d) => self.data(kind, d).await,
                    Err(e) => Err(e.into()),
                },
                Ok(Ok(Some((ty, _)))) => {
                    Err(anyhow!("unexpected {} frame on a data channel", ty.name()))
                }
                Ok(Err(e)) => Err(e),
            };
            if let Err(e) = result {
                if let Some(m) = e.downcast_ref::<BufferExhausted>() {
                    if let Ok(mut o) = self.out_of_memory.lock() {
                        o.get_or_insert_with(|| m.to_string());
                    }
                }
                self.abort(&format!("{kind:?} channel failed: {e:#}"));
                return;
            }
        }
    }

    pub(super) fn abort(&self, why: &str) {
        if !*self.abort_tx.borrow() {
            if let Ok(mut w) = self.abort_why.lock() {
                w.get_or_insert_with(|| why.to_string());
            }
            warn!(session = %self.hex_id(), "session aborted: {why}");
            let _ = self.abort_tx.send(true);
        }
    }

    pub(super) async fn ack(&self, ack: Ack) {
        let mut w = self.ctl.lock().await;
        let r = async {
            w.send(|o| ack.encode(o)).await?;
            w.flush().await
        }
        .await;
        if let Err(e) = r {
            self.abort(&format!("cannot send an acknowledgement: {e:#}"));
        }
    }
}

impl Session {
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

    /// A session that failed for lack of frame-buffer memory tells its sender why (an ERROR
    /// with code LIMIT on channel 0), within a second: its sender may not be reading.
    pub(super) async fn tell_out_of_memory(&self, e: &anyhow::Error) {
        let why = match e.downcast_ref::<BufferExhausted>() {
            Some(m) => Some(m.to_string()),
            None => self.out_of_memory.lock().ok().and_then(|o| o.clone()),
        };
        let Some(why) = why else {
            return;
        };
        self.shared
            .stats
            .buffer_refusals
            .fetch_add(1, Ordering::Relaxed);
        let m = message::Error::new(message::Error::LIMIT, why);
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let mut w = self.ctl.lock().await;
            w.send(|o| m.encode(o)).await?;
            w.flush().await
        })
        .await;
    }

    pub(super) async fn control_loop(self: &Arc<Self>, reader: &mut FrameReader) -> Result<()> {
        let idle = self.shared.cfg.limits.idle_timeout;
        let mut abort = self.abort_tx.subscribe();
        loop {
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, reader.read()) => f,
                _ = abort.changed() => bail!("{}", self.abort_reason()),
            };
            let (ty, payload) = match frame {
                Err(_) if self.idle_for() < idle => continue,
                Err(_) => match self.memory_wait_error(reader) {
                    Some(e) => return Err(e.into()),
                    None => bail!("no traffic for {idle:?}"),
                },
                Ok(Ok(None)) => bail!("the sender closed channel 0 before saying goodbye"),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(Some(f))) => f,
            };
            match ty {
                FrameType::Data => self.data(Kind::Secure, DataRef::parse(payload)?).await?,
                FrameType::Doc => {
                    let doc =
                        Doc::parse_with_max_segments(payload, self.shared.cfg.limits.max_segments)?;
                    self.add_doc(doc).await?
                }
                FrameType::DocEnd => self.doc_end(DocEnd::parse(payload)?).await?,
                FrameType::DocCancel => self.doc_cancel(DocCancel::parse(payload)?).await?,
                FrameType::Bye => return Ok(()),
                other => bail!("unexpected {} frame on channel 0", other.name()),
            }
        }
    }
}
