//! Phase 4 of a send, *transfer*, as each channel sees it: take the next piece of its stream (from
//! the thesis's plan or the dynamic scheduler), send it as DATA frames, MAC the cleartext, and
//! close each document with its DOC_END once its last byte is out, or with a DOC_CANCEL if its
//! file changed meanwhile ([`crate::change`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use sieve_core::chunk::ChunkScheduler;
use sieve_core::ledger::Ledger;
use sieve_core::message::{DocCancel, DocEnd};
use sieve_core::{Kind, Piece, Plan};
use tokio::sync::Mutex as AsyncMutex;

use crate::change::Leases;
use crate::conn::FrameWriter;
use crate::lock::lock;
use crate::mac::{self, PlainMac, Tag, MAC_BLOCK};
use crate::source::{Slice, Source};

use super::compress::Compressor;
use super::Progress;

/// Per-kind source of pieces for the channels.
pub(super) enum Work {
    /// A precomputed thesis plan: channel i takes `plan.channels[i]` in order.
    Plan(Vec<Mutex<std::vec::IntoIter<Piece>>>),
    /// Whoever is free takes the next chunk.
    Dynamic(Mutex<ChunkScheduler>),
}

impl Work {
    pub(super) fn new(plan: Option<Plan>, lens: &[u64], chunk: u64) -> Work {
        match plan {
            Some(p) => Work::Plan(
                p.channels
                    .into_iter()
                    .map(|c| Mutex::new(c.into_iter()))
                    .collect(),
            ),
            None => Work::Dynamic(Mutex::new(ChunkScheduler::new(lens, chunk))),
        }
    }

    pub(super) fn next(&self, channel: usize) -> Option<Piece> {
        match self {
            Work::Plan(ch) => ch.get(channel)?.lock().ok()?.next(),
            Work::Dynamic(s) => s.lock().ok()?.next(),
        }
    }
}

pub(super) struct Shared {
    pub(super) sources: Vec<Source>,
    pub(super) work: [Work; 2],
    /// Bytes of each document not yet sent (both kinds).
    pub(super) remaining: Vec<AtomicU64>,
    pub(super) plain_ledgers: Vec<Mutex<Ledger>>,
    pub(super) ctl: AsyncMutex<FrameWriter>,
    /// Most bytes per data frame, by [`Kind::index`].
    pub(super) chunks: [usize; 2],
    pub(super) mac: PlainMac,
    /// Every document below this index is acknowledged.
    pub(super) acked_below: tokio::sync::watch::Sender<u32>,
    /// Most documents in progress at once (see [`MAX_UNACKED_DOCS`]).
    pub(super) window: u32,
    /// Documents the receiver has answered for; set for a failure that comes before all their
    /// bytes are sent (a full disk), whose remaining pieces the channels then skip.
    pub(super) answered: Vec<AtomicBool>,
    pub(super) progress: Arc<Progress>,
    /// Answers the documents' lease breaks while they are sent.
    pub(super) leases: Option<Leases>,
    /// Compression of the streams the session agreed to compress.
    pub(super) compressor: Option<Arc<Compressor>>,
}

impl Shared {
    /// Every byte of `doc` is sent: vouch for it with its DOC_END, or, if its file changed since
    /// it was opened, cancel it (the receiver then removes it).
    pub(super) async fn finish_doc(&self, doc: usize) -> Result<()> {
        let src = &self.sources[doc];
        match src.watch().check_final() {
            Ok(()) => self.send_doc_end(doc).await,
            Err(why) => {
                tracing::warn!(
                    "{} changed while it was being sent ({why}): the document is cancelled",
                    src.path.display()
                );
                // The receiver learns the document's name, not the sender's path.
                let m = DocCancel {
                    doc: doc as u32,
                    reason: format!("{} changed while it was being sent: {why}", src.name),
                };
                let mut w = self.ctl.lock().await;
                w.send(|o| m.encode(o)).await?;
                w.flush().await
            }
        }
    }

    async fn send_doc_end(&self, doc: usize) -> Result<()> {
        let src = &self.sources[doc];
        let digest = lock(&self.plain_ledgers[doc], "the sender's cleartext ledger")?
            .finish(src.stream_len(Kind::Plain))
            .context("internal error: the sender's own ledger is inconsistent")?;
        let end = DocEnd {
            doc: doc as u32,
            plain_digest: digest,
            secure_len: src.stream_len(Kind::Secure),
            plain_len: src.stream_len(Kind::Plain),
        };
        let mut w = self.ctl.lock().await;
        w.send(|o| end.encode(o)).await?;
        w.flush().await
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

    /// `n` more bytes of `doc` are written (or skipped); after its last byte, its DOC_END goes.
    pub(super) async fn piece_done(
        &self,
        doc: u32,
        n: u64,
        w: &mut Option<FrameWriter>,
    ) -> Result<()> {
        let left = self.remaining[doc as usize].fetch_sub(n, Ordering::AcqRel) - n;
        // A document the receiver has already answered for (a failure) needs no DOC_END, and
        // its ledger lacks the skipped pieces.
        if left == 0 && !self.answered[doc as usize].load(Ordering::Acquire) {
            // Everything of this document is written to its channels; the pieces on other
            // channels went out before their counters dropped, so flush ours too.
            if let Some(w) = w.as_mut() {
                w.flush().await?;
            } else {
                self.ctl.lock().await.flush().await?;
            }
            self.finish_doc(doc as usize).await?;
        }
        Ok(())
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
        while let Some(piece) = self.work[kind.index()].next(idx) {
            self.wait_for_window(piece.doc, &mut w).await?;
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
                    let n = end - off;
                    self.progress.skipped.fetch_add(n, Ordering::Relaxed);
                    self.piece_done(piece.doc, n, &mut w).await?;
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
                self.piece_done(piece.doc, n as u64, &mut w).await?;
            }
        }
        release.finish(&self.sources);
        self.close(&mut w).await
    }

    /// Whether the rest of `doc` is not to be sent: the receiver has answered for it already (a
    /// failure), or its file changed (it will be cancelled, and must not be read any more).
    pub(super) fn skip(&self, doc: u32) -> bool {
        self.answered[doc as usize].load(Ordering::Acquire)
            || self.sources[doc as usize].watch().check().is_err()
    }

    /// Before a piece of `doc`: the receiver holds a file open per document in progress, so
    /// start this one only once the document `window` places back (and all before it) is
    /// acknowledged. Flushes first: that document may still have bytes in our buffer.
    pub(super) async fn wait_for_window(
        &self,
        doc: u32,
        w: &mut Option<FrameWriter>,
    ) -> Result<()> {
        if let Some(need) = doc.checked_sub(self.window) {
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
