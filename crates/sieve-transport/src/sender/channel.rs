//! Phase 4 of a send, *transfer*, as each channel sees it: take the next piece of its stream (from
//! the thesis's plan or the dynamic scheduler), send it as DATA frames, MAC the cleartext, and
//! close each document with its DOC_END once its last byte is out.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use sieve_core::chunk::ChunkScheduler;
use sieve_core::ledger::Ledger;
use sieve_core::message::DocEnd;
use sieve_core::{Kind, Piece, Plan};
use tokio::sync::Mutex as AsyncMutex;

use crate::conn::FrameWriter;
use crate::mac::PlainMac;
use crate::source::Source;

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
}

impl Shared {
    pub(super) async fn send_doc_end(&self, doc: usize) -> Result<()> {
        let src = &self.sources[doc];
        let digest = self.plain_ledgers[doc]
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
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
            self.send_doc_end(doc as usize).await?;
        }
        Ok(())
    }

    /// Send every piece this channel is given. `w` is `None` for channel 0, which shares `ctl`.
    pub(super) async fn channel(
        &self,
        kind: Kind,
        idx: usize,
        mut w: Option<FrameWriter>,
        counter: Arc<AtomicU64>,
    ) -> Result<()> {
        let chunk = self.chunks[kind.index()];
        let mut buf = vec![0u8; chunk];
        // Mapped bytes this channel has sent since it last released pages: (document, raw range).
        let mut sent: Option<(usize, std::ops::Range<u64>)> = None;
        while let Some(piece) = self.work[kind.index()].next(idx) {
            if let Some(need) = piece.doc.checked_sub(self.window) {
                // The receiver holds a file open per document in progress: start this one only
                // once the document `window` places back (and all before it) is acknowledged.
                // Flush first: that document may still have bytes in our buffer.
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
            let src = &self.sources[piece.doc as usize];
            let mut off = piece.offset;
            let end = piece.offset + piece.len;
            while off < end {
                if self.answered[piece.doc as usize].load(Ordering::Acquire) {
                    // The receiver failed this document already and drops whatever else of it
                    // comes: the rest of the piece is not worth the bandwidth.
                    let n = end - off;
                    self.progress.skipped.fetch_add(n, Ordering::Relaxed);
                    self.piece_done(piece.doc, n, &mut w).await?;
                    break;
                }
                let max = ((end - off) as usize).min(chunk);
                // Reads may block on the disk; a slice of a mapping is taken at once (its pages
                // are faulted in later, as the MAC and the socket read them).
                let frame = if src.is_mapped() {
                    src.frame(kind, off, max, &mut buf)
                } else {
                    tokio::task::block_in_place(|| src.frame(kind, off, max, &mut buf))
                }?;
                let bytes = frame.bytes;
                let n = bytes.len();
                if kind == Kind::Plain {
                    let h = self.mac.tag(piece.doc, off, bytes);
                    self.plain_ledgers[piece.doc as usize]
                        .lock()
                        .map_err(|_| anyhow!("poisoned"))?
                        .record_hashed(off, n as u64, h);
                }
                match (w.as_mut(), frame.at) {
                    // Cleartext straight from the page cache (see `FrameWriter::data_from_file`).
                    (Some(w), Some(at)) if kind == Kind::Plain => {
                        w.data_from_file(piece.doc, off, bytes, src.file(), at)
                            .await?
                    }
                    (Some(w), _) => w.data(piece.doc, off, bytes).await?,
                    (None, _) => {
                        let mut c = self.ctl.lock().await;
                        c.data(piece.doc, off, bytes).await?;
                    }
                }
                if let Some(at) = frame.at {
                    // The bytes are in the kernel (or our buffer) now: let the pages go every
                    // few MiB, so that resident memory stays small whatever the document size.
                    let doc = piece.doc as usize;
                    match &mut sent {
                        Some((d, r)) if *d == doc => {
                            r.start = r.start.min(at);
                            r.end = r.end.max(at + n as u64);
                        }
                        _ => {
                            if let Some((d, r)) = sent.take() {
                                self.sources[d].release(r);
                            }
                            sent = Some((doc, at..at + n as u64));
                        }
                    }
                    if let Some((d, r)) = sent
                        .as_mut()
                        .filter(|(_, r)| r.end - r.start >= RELEASE_EVERY)
                    {
                        self.sources[*d].release(r.clone());
                        r.start = r.end;
                    }
                }
                counter.fetch_add(n as u64, Ordering::Relaxed);
                off += n as u64;
                self.piece_done(piece.doc, n as u64, &mut w).await?;
            }
        }
        if let Some((d, r)) = sent {
            self.sources[d].release(r);
        }
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

/// How many mapped bytes a channel sends between releases of their pages.
const RELEASE_EVERY: u64 = 8 << 20;
