//! Phase 4 of a send, *transfer*, as each channel sees it: take the next piece of its stream from
//! the session (the thesis's plan or the dynamic scheduler), send it as DATA frames, MAC the
//! cleartext, and, when the session says a document's last piece is out, report its digest (or
//! that its file changed meanwhile, [`crate::change`]) so that its DOC_END (or DOC_CANCEL) goes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use sieve_core::ledger::Ledger;
use sieve_core::sender::{Assignment, Channel, Finish, SenderSession};
use sieve_core::Kind;
use tokio::sync::Mutex as AsyncMutex;

use crate::change::Leases;
use crate::conn::FrameWriter;
use crate::lock::lock;
use crate::mac::{self, PlainMac, Tag, MAC_BLOCK};
use crate::source::{Slice, Source};

use super::compress::Compressor;
use super::Progress;

/// What the channel tasks of one session share: the protocol's state machine, channel 0's
/// writer, the documents and their cleartext ledgers.
pub(super) struct Shared {
    pub(super) sources: Vec<Source>,
    /// The session's protocol: which piece each channel sends next, when a document ends, what
    /// goes on channel 0. Taken once per piece, never per frame.
    pub(super) sm: Mutex<SenderSession>,
    pub(super) plain_ledgers: Vec<Mutex<Ledger>>,
    pub(super) ctl: AsyncMutex<FrameWriter>,
    /// Most bytes per data frame, by [`Kind::index`].
    pub(super) chunks: [usize; 2],
    pub(super) mac: PlainMac,
    /// [`SenderSession::acked_below`], published for channels waiting for the window.
    pub(super) acked_below: tokio::sync::watch::Sender<u32>,
    /// Documents whose remaining bytes are not to be sent: the receiver answered them before
    /// their last piece went (a full disk). Read per frame, so kept out of the session's lock.
    pub(super) stop: Vec<AtomicBool>,
    pub(super) progress: Arc<Progress>,
    /// Answers the documents' lease breaks while they are sent.
    pub(super) leases: Option<Leases>,
    /// Compression of the streams the session agreed to compress.
    pub(super) compressor: Option<Arc<Compressor>>,
}

impl Shared {
    /// The session's state machine.
    pub(super) fn sm(&self) -> Result<std::sync::MutexGuard<'_, SenderSession>> {
        lock(&self.sm, "the sender's session")
    }

    /// Write what the session queued for channel 0 (manifests, DOC_END, DOC_CANCEL, BYE), in its
    /// order, and flush.
    pub(super) async fn send_control(&self) -> Result<()> {
        let mut w = self.ctl.lock().await;
        loop {
            // The session's lock is not held across the write.
            let next = self.sm()?.poll_control();
            let Some(c) = next else { break };
            w.send(|o| c.encode(o)).await?;
        }
        w.flush().await
    }

    /// Every byte of `doc` is sent: vouch for it with its DOC_END, or, if its file changed since
    /// it was opened, cancel it (the receiver then removes it).
    pub(super) async fn finish_doc(&self, doc: u32) -> Result<()> {
        let src = &self.sources[doc as usize];
        let how = match src.watch().check_final() {
            Ok(()) => Finish::Sent {
                plain_digest: lock(
                    &self.plain_ledgers[doc as usize],
                    "the sender's cleartext ledger",
                )?
                .finish(src.stream_len(Kind::Plain))
                .context("internal error: the sender's own ledger is inconsistent")?,
            },
            Err(why) => {
                tracing::warn!(
                    "{} changed while it was being sent ({why}): the document is cancelled",
                    src.path.display()
                );
                Finish::Changed {
                    why: why.to_string(),
                }
            }
        };
        self.sm()?.finish_doc(doc, how);
        self.send_control().await
    }

    /// Send `len` bytes of `doc`'s cleartext from stream offset `off` as one frame, straight from
    /// the mapping, and record their tags. Returns the span of the file they came from.
    ///
    /// The frame spans whatever runs of the file it needs (see [`crate::mac::units`]); its
    /// parts go out one MAC block at a time, each tagged just before it is sent, so that the
    /// bytes the socket (or, by `sendfile`, the receiver) copies are still in cache.
    async fn send_mapped_plain(
        &self,
        w: &mut FrameWriter,
        src: &Source,
        doc: u32,
        off: u64,
        len: usize,
    ) -> Result<Option<std::ops::Range<u64>>> {
        let mut units = Vec::new();
        mac::units(src.streams(), off, len as u64, |within, n| {
            units.push((off + within, n))
        })?;
        let mut blocks = units.chunk_by(|a, b| a.0 / MAC_BLOCK == b.0 / MAC_BLOCK);
        let mut tags = Vec::with_capacity(units.len());
        let mut raw: Option<std::ops::Range<u64>> = None;
        let mut copy = Vec::new();
        let next = || -> Result<Option<Vec<Slice>>> {
            let Some(block) = blocks.next() else {
                return Ok(None);
            };
            let mut part = Vec::new();
            for &(at, n) in block {
                let slices = src.slices(Kind::Plain, at, n)?;
                let tag = match slices[..] {
                    [(_, bytes)] => self.mac.tag(doc, at, bytes),
                    // One run of the content that is two in the file (an escape sat between):
                    // a tag covers contiguous bytes, so it covers a copy.
                    _ => {
                        copy.clear();
                        slices.iter().for_each(|(_, b)| copy.extend_from_slice(b));
                        self.mac.tag(doc, at, &copy)
                    }
                }?;
                tags.push((at, n, tag));
                for &(a, b) in &slices {
                    let end = a + b.len() as u64;
                    raw = Some(
                        raw.take()
                            .map_or(a..end, |r| r.start.min(a)..r.end.max(end)),
                    );
                }
                part.extend(slices);
            }
            Ok(Some(part))
        };
        w.data_from_file(doc, off, len, src.file(), next).await?;
        self.record(doc, tags)?;
        Ok(raw)
    }

    /// Record cleartext tags in `doc`'s ledger.
    pub(super) fn record(&self, doc: u32, tags: Vec<Tag>) -> Result<()> {
        let mut ledger = lock(
            &self.plain_ledgers[doc as usize],
            "the sender's cleartext ledger",
        )?;
        for (at, n, tag) in tags {
            ledger.record_hashed(at, n, tag);
        }
        Ok(())
    }

    /// The last piece of `doc` still out is written to this channel: flush it (the pieces on
    /// other channels went out before they were reported), then end the document.
    pub(super) async fn doc_done(&self, doc: u32, w: &mut Option<FrameWriter>) -> Result<()> {
        match w.as_mut() {
            Some(w) => w.flush().await?,
            None => self.ctl.lock().await.flush().await?,
        }
        self.finish_doc(doc).await
    }

    /// `piece` is written (or skipped): if it was its document's last piece out, end the
    /// document.
    pub(super) async fn piece_done(
        &self,
        piece: sieve_core::Piece,
        w: &mut Option<FrameWriter>,
    ) -> Result<()> {
        let finished = self.sm()?.piece_sent(piece);
        match finished {
            Some(doc) => self.doc_done(doc, w).await,
            None => Ok(()),
        }
    }

    /// Send every piece this channel is given. `w` is `None` for channel 0, which shares `ctl`.
    /// Where frames of this kind may be compressed, [`Shared::channel_compressed`] does it.
    pub(super) async fn channel(
        &self,
        kind: Kind,
        idx: usize,
        mut w: Option<FrameWriter>,
        counter: Arc<AtomicU64>,
    ) -> Result<()> {
        if let Some(c) = self.compressor.as_ref().filter(|c| c.active(kind)) {
            return self
                .channel_compressed(kind, idx, w, counter, c.clone())
                .await;
        }
        let chunk = self.chunks[kind.index()];
        let mut buf = vec![0u8; chunk];
        let mut release = Release::default();
        let ch = channel(kind, idx);
        // One call to the session per piece: report the one sent, take the next.
        let mut step = self.sm()?.advance(ch, None);
        loop {
            if let Some(doc) = step.finished {
                self.doc_done(doc, &mut w).await?;
            }
            let Some(a) = step.next else { break };
            self.wait_for_window(a, &mut w).await?;
            let piece = a.piece;
            let src = &self.sources[piece.doc as usize];
            let mut off = piece.offset;
            let end = piece.offset + piece.len;
            while off < end {
                // Held while this frame reads the file: a broken lease is released (and the
                // file's writer let go) only once no frame is reading it.
                let reading = src.watch().gate().read().await;
                if self.skip(piece.doc) {
                    // The receiver failed this document already and drops whatever else of it
                    // comes, or its file changed and it will be cancelled: the rest of the piece
                    // is not worth the bandwidth (and, changed, must not be read).
                    drop(reading);
                    self.progress
                        .skipped
                        .fetch_add(end - off, Ordering::Relaxed);
                    break;
                }
                let n = ((end - off) as usize).min(chunk);
                let raw = self
                    .send_raw(kind, &mut w, piece.doc, off, n, &mut buf)
                    .await?;
                if let Some(raw) = raw {
                    release.add(&self.sources, piece.doc as usize, raw);
                }
                drop(reading);
                counter.fetch_add(n as u64, Ordering::Relaxed);
                off += n as u64;
            }
            step = self.sm()?.advance(ch, Some(piece));
        }
        release.finish(&self.sources);
        self.close(&mut w).await
    }

    /// Whether the rest of `doc` is not to be sent: the receiver has answered for it already (a
    /// failure), or its file changed (it will be cancelled, and must not be read any more).
    pub(super) fn skip(&self, doc: u32) -> bool {
        self.stop[doc as usize].load(Ordering::Acquire)
            || self.sources[doc as usize].watch().check().is_err()
    }

    /// Before a piece the session placed beyond the window (the receiver holds a file open per
    /// document in progress): wait until the documents it waits for are answered. Flushes
    /// first: those documents may still have bytes in our buffer.
    pub(super) async fn wait_for_window(
        &self,
        a: Assignment,
        w: &mut Option<FrameWriter>,
    ) -> Result<()> {
        if let Some(need) = a.after {
            match w.as_mut() {
                Some(w) => w.flush().await?,
                None => self.ctl.lock().await.flush().await?,
            }
            let mut acked = self.acked_below.subscribe();
            acked
                .wait_for(|&a| a > need)
                .await
                .map_err(|_| anyhow!("the session ended"))?;
        }
        Ok(())
    }

    /// Send `n` bytes of `doc`'s `kind` stream from `off` as one DATA frame, as they are, and
    /// record a cleartext frame's tags. Returns the span of the file they came from, if mapped.
    /// The caller holds the file's gate.
    pub(super) async fn send_raw(
        &self,
        kind: Kind,
        w: &mut Option<FrameWriter>,
        doc: u32,
        off: u64,
        n: usize,
        buf: &mut Vec<u8>,
    ) -> Result<Option<std::ops::Range<u64>>> {
        let src = &self.sources[doc as usize];
        let link = self.compressor.as_ref().and_then(|c| c.link(kind));
        if let Some(l) = link {
            l.mark();
        }
        let raw = match w.as_mut() {
            Some(w) if kind == Kind::Plain && src.is_mapped() => {
                self.send_mapped_plain(w, src, doc, off, n).await?
            }
            _ => {
                if buf.len() < n {
                    buf.resize(n, 0);
                }
                // Reads may block on the disk; a mapping is copied from memory, and only for
                // classified frames that span runs (TLS copies them anyway).
                let frame = if src.is_mapped() {
                    src.frame(kind, off, n, buf)
                } else {
                    tokio::task::block_in_place(|| src.frame(kind, off, n, buf))
                }?;
                if kind == Kind::Plain {
                    let tags = self.mac.frame_tags(src.streams(), doc, off, frame.bytes)?;
                    self.record(doc, tags)?;
                }
                match w.as_mut() {
                    Some(w) => w.data(doc, off, frame.bytes).await?,
                    None => self.ctl.lock().await.data(doc, off, frame.bytes).await?,
                }
                frame.raw
            }
        };
        if let Some(l) = link {
            l.mark();
        }
        Ok(raw)
    }

    /// The channel's last bytes: flush, and close a channel of its own.
    pub(super) async fn close(&self, w: &mut Option<FrameWriter>) -> Result<()> {
        match w.as_mut() {
            Some(w) => {
                w.flush().await?;
                w.shutdown().await?;
            }
            None => self.ctl.lock().await.flush().await?,
        }
        Ok(())
    }
}

/// The session's name for the `idx`th channel of `kind`.
pub(super) fn channel(kind: Kind, idx: usize) -> Channel {
    Channel {
        kind,
        // At most MAX_SECURE_CHANNELS or MAX_PLAIN_CHANNELS of a kind.
        index: u8::try_from(idx).unwrap_or(u8::MAX),
    }
}

/// Mapped bytes a channel has sent since it last released their pages.
#[derive(Default)]
pub(super) struct Release {
    sent: Option<(usize, std::ops::Range<u64>)>,
}

impl Release {
    /// The bytes `raw` of `doc`'s file are in the kernel (or a buffer of ours) now: let the
    /// pages go every few MiB, so that resident memory stays small whatever the document size.
    pub(super) fn add(&mut self, sources: &[Source], doc: usize, raw: std::ops::Range<u64>) {
        match &mut self.sent {
            Some((d, r)) if *d == doc => {
                r.start = r.start.min(raw.start);
                r.end = r.end.max(raw.end);
            }
            _ => {
                if let Some((d, r)) = self.sent.take() {
                    sources[d].release(r);
                }
                self.sent = Some((doc, raw));
            }
        }
        if let Some((d, r)) = self
            .sent
            .as_mut()
            .filter(|(_, r)| r.end - r.start >= RELEASE_EVERY)
        {
            sources[*d].release(r.clone());
            r.start = r.end;
        }
    }

    /// Release what is left.
    pub(super) fn finish(self, sources: &[Source]) {
        if let Some((d, r)) = self.sent {
            sources[d].release(r);
        }
    }
}

/// How many mapped bytes a channel sends between releases of their pages.
const RELEASE_EVERY: u64 = 8 << 20;
