//! One document of a session: its manifest, its pieces written by position into a temporary
//! file, the integrity check, the commit and its acknowledgement.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use sieve_core::ledger::Ledger;
use sieve_core::message::{Ack, AckStatus, DataRef, Doc, DocCancel, DocEnd, Mode};
use sieve_core::sieve::Placement;
use sieve_core::Kind;
use tracing::{info, warn};

use crate::store::{CommitError, PartFile};

use super::limits::Held;
use super::session::Session;

pub(super) struct DocSlot {
    pub(super) doc: Doc,
    pub(super) placement: Placement,
    pub(super) io: RwLock<DocIo>,
    pub(super) progress: Mutex<DocProgress>,
}

#[derive(Default)]
pub(super) struct DocIo {
    pub(super) file: Option<DocFile>,
    pub(super) closed: bool,
    /// Could not be stored (and the sender was told): its remaining pieces are dropped.
    pub(super) failed: bool,
}

/// A document's temporary file, counted in its session's and the receiver's open files until it
/// is committed or dropped.
pub(super) struct DocFile {
    pub(super) part: PartFile,
    pub(super) _in_session: Held,
    pub(super) _in_receiver: Held,
}

impl DocFile {
    pub(super) fn commit(self) -> Result<PathBuf, CommitError> {
        self.part.commit()
    }
}

/// The acknowledgement status of a document the store would not take.
fn commit_status(e: CommitError) -> (AckStatus, anyhow::Error) {
    let status = match &e {
        CommitError::Exists { .. } => AckStatus::Exists,
        CommitError::Refused { .. } => AckStatus::Refused,
        CommitError::Io { .. } => AckStatus::StoreError,
    };
    (status, e.into())
}

/// What the sender is told about a document that could not be stored. The receiver's paths stay
/// in its own log; the sender learns the cause.
pub(super) fn store_reason(name: &str, e: &anyhow::Error) -> String {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>());
    match io {
        Some(io) => match io.raw_os_error() {
            Some(ENOSPC) => {
                format!("cannot store {name}: no space left on the receiver's disk ({io})")
            }
            Some(EDQUOT) => {
                format!("cannot store {name}: the receiver's disk quota is exhausted ({io})")
            }
            Some(EMFILE | ENFILE) => {
                format!("cannot store {name}: the receiver has too many open files ({io})")
            }
            _ => format!("cannot store {name} on the receiver: {io}"),
        },
        None => format!("cannot store {name}: {e:#}"),
    }
}

#[derive(Default)]
pub(super) struct DocProgress {
    pub(super) ledgers: [Ledger; 2],
    pub(super) end: Option<DocEnd>,
    pub(super) finalizing: bool,
    pub(super) first_data: Option<Instant>,
}

impl Session {
    /// The document's slot, once its manifest has come; `None` if the document was refused.
    pub(super) async fn slot(&self, doc: u32) -> Result<Option<Arc<DocSlot>>> {
        let deadline = Instant::now() + self.shared.cfg.limits.idle_timeout;
        loop {
            let notified = self.docs_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(s) = self.docs.lock().map_err(|_| anyhow!("poisoned"))?.get(&doc) {
                return Ok(Some(s.clone()));
            }
            if self
                .refused
                .lock()
                .map_err(|_| anyhow!("poisoned"))?
                .contains(&doc)
            {
                return Ok(None);
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                bail!("data for document {doc}, whose manifest never came");
            }
        }
    }

    pub(super) async fn data(self: &Arc<Self>, kind: Kind, d: DataRef<'_>) -> Result<()> {
        let Some(slot) = self.slot(d.doc).await? else {
            // A refused document: the sender did not wait for our answer before sending it.
            return Ok(());
        };
        let len = d.payload.len() as u64;
        let discard = self.shared.cfg.discard;
        if !discard {
            let mut err = None;
            let write = |io: &DocIo, err: &mut Option<anyhow::Error>| -> Result<()> {
                let f = &io.file.as_ref().context("document already closed")?.part;
                slot.placement
                    .place(kind, d.offset, len, |out, within, n| {
                        if err.is_none() {
                            if let Err(e) =
                                f.write_at(out, &d.payload[within as usize..(within + n) as usize])
                            {
                                *err = Some(e);
                            }
                        }
                    })?;
                Ok(())
            };
            let need_create = {
                let io = slot.io.read().map_err(|_| anyhow!("poisoned"))?;
                if io.failed {
                    // Its failure is already reported: the rest of it is dropped.
                    return Ok(());
                }
                if io.closed {
                    bail!("data for document {} after it was complete", d.doc);
                }
                if io.file.is_some() {
                    write(&io, &mut err)?;
                    false
                } else {
                    true
                }
            };
            if need_create {
                let mut io = slot.io.write().map_err(|_| anyhow!("poisoned"))?;
                if io.failed {
                    return Ok(());
                }
                if io.closed {
                    bail!("data for document {} after it was complete", d.doc);
                }
                if io.file.is_none() {
                    match self.create_part(&slot, true) {
                        Ok(f) => io.file = Some(f),
                        Err(e) => err = Some(e),
                    }
                }
                if err.is_none() {
                    write(&io, &mut err)?;
                }
            }
            if let Some(e) = err {
                // A store error (disk full, no descriptor) fails this document, not the session.
                self.fail_doc(&slot, &e).await;
                return Ok(());
            }
        } else {
            // Still check that the piece lies inside the stream.
            slot.placement.place(kind, d.offset, len, |_, _, _| {})?;
        }
        let tags = if kind == Kind::Plain {
            self.mac
                .frame_tags(&slot.placement, d.doc, d.offset, d.payload)?
        } else {
            Vec::new()
        };
        self.shared
            .stats
            .bytes_received
            .fetch_add(len, Ordering::Relaxed);
        {
            let mut p = slot.progress.lock().map_err(|_| anyhow!("poisoned"))?;
            p.first_data.get_or_insert_with(Instant::now);
            if kind == Kind::Plain {
                for (at, n, h) in tags {
                    p.ledgers[Kind::Plain.index()].record_hashed(at, n, h);
                }
            } else {
                p.ledgers[Kind::Secure.index()].record_unhashed(d.offset, len);
            }
        }
        self.maybe_finalize(&slot);
        Ok(())
    }

    /// `limited`: the file stays open while the document's pieces arrive, so it counts against
    /// the session's limit of open documents.
    pub(super) fn create_part(&self, slot: &DocSlot, limited: bool) -> Result<DocFile> {
        let session_limit = if limited {
            self.shared.fds.session_docs()
        } else {
            u64::MAX
        };
        let Some(in_session) = Held::take(&self.open_docs, session_limit) else {
            bail!(
                "more than {session_limit} documents of one session in progress at once (the \
                 receiver's SESSION said so; wait for acknowledgements before starting more)"
            );
        };
        let shared = &self.shared;
        let Some(in_receiver) = Held::take(&shared.fds_used, shared.fds.doc_limit) else {
            shared
                .stats
                .fd_limit_refusals
                .fetch_add(1, Ordering::Relaxed);
            bail!("{}", shared.fd_limit_message());
        };
        let part = self
            .store
            .as_ref()
            .context("internal error: no store for a document to be written")?
            .create(
                &format!("{}-{}", self.hex_id(), slot.doc.doc),
                &slot.doc.name,
                slot.placement.output_len(),
            )?;
        Ok(DocFile {
            part,
            _in_session: in_session,
            _in_receiver: in_receiver,
        })
    }

    /// A document that cannot be stored (disk full, no file descriptor): remove its temporary
    /// file, tell the sender why, and go on with the session's other documents. Its remaining
    /// pieces are dropped as they come.
    pub(super) async fn fail_doc(self: &Arc<Self>, slot: &Arc<DocSlot>, e: &anyhow::Error) {
        let first = match slot.progress.lock() {
            Ok(mut p) => {
                // `finalizing` marks a document whose outcome is decided.
                let first = !p.finalizing;
                p.finalizing = true;
                if first {
                    p.ledgers = Default::default();
                }
                first
            }
            Err(_) => false,
        };
        if !first {
            return;
        }
        if let Ok(mut io) = slot.io.write() {
            io.closed = true;
            io.failed = true;
            // Dropping the file removes it.
            io.file.take();
        }
        let name = &slot.doc.name;
        self.shared
            .stats
            .docs_failed
            .fetch_add(1, Ordering::Relaxed);
        warn!(session = %self.hex_id(), doc = slot.doc.doc, %name, "document failed: {e:#}");
        self.ack(Ack {
            doc: slot.doc.doc,
            status: AckStatus::StoreError,
            message: store_reason(name, e),
            receive_us: 0,
            integrate_us: 0,
            commit_us: 0,
        })
        .await;
    }

    pub(super) fn maybe_finalize(self: &Arc<Self>, slot: &Arc<DocSlot>) {
        let ready = {
            let Ok(mut p) = slot.progress.lock() else {
                return;
            };
            let ready = !p.finalizing
                && p.end.is_some()
                && p.ledgers[Kind::Secure.index()].bytes()
                    >= slot.placement.stream_len(Kind::Secure)
                && p.ledgers[Kind::Plain.index()].bytes() >= slot.placement.stream_len(Kind::Plain);
            if ready {
                p.finalizing = true;
            }
            ready
        };
        if ready {
            let s = self.clone();
            let slot = slot.clone();
            tokio::spawn(async move { s.finalize(slot).await });
        }
    }

    /// Verify, restore marks, commit, acknowledge.
    pub(super) async fn finalize(self: Arc<Self>, slot: Arc<DocSlot>) {
        let s = self.clone();
        let sl = slot.clone();
        let outcome = tokio::task::spawn_blocking(move || s.commit_doc(&sl)).await;
        let (status, message, times) = match outcome {
            Ok(Ok(times)) => (AckStatus::Ok, String::new(), times),
            Ok(Err((AckStatus::StoreError, e))) => (
                AckStatus::StoreError,
                store_reason(&slot.doc.name, &e),
                (0, 0, 0),
            ),
            Ok(Err((status, e))) => (status, format!("{e:#}"), (0, 0, 0)),
            Err(e) => (
                AckStatus::StoreError,
                format!("internal error: {e}"),
                (0, 0, 0),
            ),
        };
        let name = &slot.doc.name;
        if status == AckStatus::Ok {
            self.shared
                .stats
                .docs_committed
                .fetch_add(1, Ordering::Relaxed);
            info!(session = %self.hex_id(), doc = slot.doc.doc, %name, bytes = slot.placement.output_len(), "document committed");
        } else {
            self.shared
                .stats
                .docs_failed
                .fetch_add(1, Ordering::Relaxed);
            warn!(session = %self.hex_id(), doc = slot.doc.doc, %name, "document failed: {message}");
            // The document is finished: remove its temporary file now, not when the session ends.
            if let Ok(mut io) = slot.io.write() {
                io.closed = true;
                io.file.take();
            }
        }
        self.ack(Ack {
            doc: slot.doc.doc,
            status,
            message,
            receive_us: times.0,
            integrate_us: times.1,
            commit_us: times.2,
        })
        .await;
        // The slot stays in the map so late duplicates are recognised, but its memory is freed.
        if let Ok(mut p) = slot.progress.lock() {
            p.ledgers = Default::default();
        }
    }
    pub(super) fn commit_doc(
        &self,
        slot: &DocSlot,
    ) -> Result<(u64, u64, u64), (AckStatus, anyhow::Error)> {
        let t0 = Instant::now();
        let integrity =
            |e: sieve_core::ledger::LedgerError| (AckStatus::IntegrityError, anyhow::Error::new(e));
        {
            let mut p = slot
                .progress
                .lock()
                .map_err(|_| (AckStatus::StoreError, anyhow!("poisoned")))?;
            let end = p
                .end
                .ok_or_else(|| (AckStatus::ProtocolError, anyhow!("no DOC_END")))?;
            p.ledgers[Kind::Secure.index()]
                .finish(slot.placement.stream_len(Kind::Secure))
                .map_err(integrity)?;
            p.ledgers[Kind::Plain.index()]
                .verify(slot.placement.stream_len(Kind::Plain), &end.plain_digest)
                .map_err(integrity)?;
        }
        let t1 = Instant::now();
        #[cfg(feature = "test-hooks")]
        super::hooks::run(&super::hooks::BEFORE_COMMIT);
        let store_err = |e: anyhow::Error| (AckStatus::StoreError, e);
        let mut io = slot
            .io
            .write()
            .map_err(|_| (AckStatus::StoreError, anyhow!("poisoned")))?;
        if io.closed {
            // The session ended (and removed the temporary file) while this document was being
            // verified: there is nothing to commit.
            return Err((
                AckStatus::StoreError,
                anyhow!("the session ended before the document could be committed"),
            ));
        }
        io.closed = true;
        if self.shared.cfg.discard {
            return Ok((us(t1 - t0), 0, 0));
        }
        let no_pieces = slot.placement.stream_len(Kind::Secure) == 0
            && slot.placement.stream_len(Kind::Plain) == 0;
        let file = match io.file.take() {
            Some(f) => f,
            // A document with no pieces: its file is created, committed and closed right here.
            None if no_pieces => self.create_part(slot, false).map_err(store_err)?,
            None => {
                return Err((
                    AckStatus::StoreError,
                    anyhow!("internal error: the document's temporary file is gone"),
                ))
            }
        };
        drop(io);
        if let Some((start, end)) = &slot.doc.marks {
            for &(off, is_start) in slot.placement.mark_offsets() {
                file.part
                    .write_at(off, if is_start { start } else { end })
                    .map_err(store_err)?;
            }
        }
        let t2 = Instant::now();
        file.commit().map_err(commit_status)?;
        Ok((us(t1 - t0), us(t2 - t1), us(t2.elapsed())))
    }

    pub(super) async fn add_doc(self: &Arc<Self>, doc: Doc) -> Result<()> {
        let limits = &self.shared.cfg.limits;
        let refuse = |(status, why): (AckStatus, String)| Ack {
            doc: doc.doc,
            status,
            message: why,
            receive_us: 0,
            integrate_us: 0,
            commit_us: 0,
        };
        let marks = doc
            .marks
            .as_ref()
            .map(|(s, e)| (s.len() as u64, e.len() as u64));
        let placement = Placement::new(&doc.layout, marks);
        let name_ok = match &self.store {
            Some(store) => store.precheck(&doc.name).map_err(|e| {
                let (status, e) = commit_status(e);
                (status, format!("{e:#}"))
            }),
            None => sieve_core::name::check(&doc.name)
                .map_err(|e| (AckStatus::Refused, format!("refused file name: {e}"))),
        };
        let problem = if let Err(refusal) = name_ok {
            Some(refusal)
        } else if placement.output_len() > limits.max_doc_bytes {
            Some((
                AckStatus::Refused,
                format!(
                    "{} bytes exceed this receiver's limit of {} bytes",
                    placement.output_len(),
                    limits.max_doc_bytes
                ),
            ))
        } else if self.hello.mode == Mode::SecureOnly && placement.stream_len(Kind::Plain) > 0 {
            Some((
                AckStatus::Refused,
                "plain bytes in a secure-only session".into(),
            ))
        } else {
            None
        };
        if let Some((status, why)) = problem {
            warn!(session = %self.hex_id(), doc = doc.doc, name = %doc.name, "document refused: {why}");
            self.shared
                .stats
                .docs_failed
                .fetch_add(1, Ordering::Relaxed);
            if !self
                .refused
                .lock()
                .map_err(|_| anyhow!("poisoned"))?
                .insert(doc.doc)
            {
                bail!("document {} announced twice", doc.doc);
            }
            self.docs_changed.notify_waiters();
            self.ack(refuse((status, why))).await;
            return Ok(());
        }
        let mut docs = self.docs.lock().map_err(|_| anyhow!("poisoned"))?;
        if docs.len() as u32 >= limits.max_docs_per_session {
            bail!(
                "more than {} documents in one session",
                limits.max_docs_per_session
            );
        }
        if docs.contains_key(&doc.doc) {
            bail!("document {} announced twice", doc.doc);
        }
        let id = doc.doc;
        let slot = Arc::new(DocSlot {
            doc,
            placement,
            io: RwLock::new(DocIo::default()),
            progress: Mutex::new(DocProgress::default()),
        });
        docs.insert(id, slot);
        drop(docs);
        self.docs_changed.notify_waiters();
        Ok(())
    }

    pub(super) async fn doc_end(self: &Arc<Self>, end: DocEnd) -> Result<()> {
        let slot = self
            .docs
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .get(&end.doc)
            .cloned();
        let Some(slot) = slot else {
            // A refused document: its end is expected and ignored.
            return Ok(());
        };
        if end.secure_len != slot.placement.stream_len(Kind::Secure)
            || end.plain_len != slot.placement.stream_len(Kind::Plain)
        {
            bail!(
                "DOC_END for document {} disagrees with its manifest",
                end.doc
            );
        }
        {
            let mut p = slot.progress.lock().map_err(|_| anyhow!("poisoned"))?;
            if p.end.is_some() {
                bail!("DOC_END for document {} sent twice", end.doc);
            }
            p.end = Some(end);
        }
        self.maybe_finalize(&slot);
        Ok(())
    }
}

impl Session {
    /// The sender gave up on a document (its file changed while it was sent): remove its
    /// temporary file and acknowledge the cancellation. A document already answered for (refused
    /// at its manifest, or failed) needs nothing more.
    pub(super) async fn doc_cancel(self: &Arc<Self>, m: DocCancel) -> Result<()> {
        let slot = self
            .docs
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .get(&m.doc)
            .cloned();
        let Some(slot) = slot else {
            if self
                .refused
                .lock()
                .map_err(|_| anyhow!("poisoned"))?
                .contains(&m.doc)
            {
                return Ok(());
            }
            bail!(
                "DOC_CANCEL for document {}, which was never announced",
                m.doc
            );
        };
        {
            let mut p = slot.progress.lock().map_err(|_| anyhow!("poisoned"))?;
            if p.end.is_some() {
                bail!("DOC_CANCEL for document {} after its DOC_END", m.doc);
            }
            if p.finalizing {
                // Already failed and answered for.
                return Ok(());
            }
            p.finalizing = true;
            p.ledgers = Default::default();
        }
        if let Ok(mut io) = slot.io.write() {
            io.closed = true;
            io.failed = true;
            // Dropping the file removes it.
            io.file.take();
        }
        self.shared
            .stats
            .docs_failed
            .fetch_add(1, Ordering::Relaxed);
        let name = &slot.doc.name;
        warn!(session = %self.hex_id(), doc = m.doc, %name, "document cancelled by the sender: {}", m.reason);
        self.ack(Ack {
            doc: m.doc,
            status: AckStatus::Cancelled,
            message: format!("the sender cancelled it: {}", m.reason),
            receive_us: 0,
            integrate_us: 0,
            commit_us: 0,
        })
        .await;
        Ok(())
    }
}

pub(super) fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}
