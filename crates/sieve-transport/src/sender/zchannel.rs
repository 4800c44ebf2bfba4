//! A channel whose frames may be compressed: the same pieces, frames and accounting as
//! [`Shared::channel`], with a short pipeline in front of the socket so that frames compress on
//! worker threads while earlier ones are written (as many at once as the policy has workers:
//! several cores when the link is faster than one core's compressor).
//!
//! Each frame is read (copied out of the file, under the file's gate, so that what is compressed
//! is exactly what was classified) and handed to a worker, or kept to be sent raw when the policy
//! says so; frames leave in the order they were cut. Classified frames are cut at the end of
//! every classified segment, so that each compressed classified frame holds bytes of one segment
//! only, compressed alone (`--compress-classified`); a run of classified segments each shorter
//! than [`ALONE_MIN`] goes in one frame instead, in the field code, which codes every byte alone
//! with a fixed model ([`sieve_core::compress::fields`]), or raw if that does not shrink it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, Result};
use sieve_core::compress::FrameCodec;
use sieve_core::{Kind, Piece};
use tokio::task::JoinHandle;

use crate::conn::FrameWriter;

use super::channel::{Release, Shared};
use super::compress::{Compressor, Outgoing};

/// Classified segments shorter than this are not compressed by zstd (`--compress-classified`): a
/// run of them, one after the other in the stream, goes in one frame in the field code. Each
/// zstd frame of classified bytes must hold one segment alone, so zstd on short ones would cost a
/// frame, a compression and a worker's round trip per value (32 MiB of generated prose whose
/// classified values average 15 bytes took 21 s on a 100 Mbit/s link, against 1.3 s without), and
/// zstd gains little on a few hundred bytes compressed alone; the field code, which has no
/// context to share, codes a whole run of them in one frame.
const ALONE_MIN: u64 = 4 << 10;

/// Frames of at most this many bytes are compressed on the channel's task instead of a worker:
/// the hand-over to a worker thread and back costs more than compressing them (16 KiB take well
/// under a millisecond up to level 9, a few at level 19).
const INLINE_MAX: usize = 16 << 10;

/// A frame cut and waiting to be sent, and the piece it ends, if it is its piece's last: the
/// session learns a piece is out once its last frame is.
struct Queued {
    item: Pending,
    ends: Option<Piece>,
}

/// What a queued frame holds.
enum Pending {
    /// To be sent as it is, read when its turn comes (the raw path: `sendfile` where it can).
    Raw { doc: u32, off: u64, n: usize },
    /// Being compressed on a worker; its input (the frame's bytes) comes back with the result.
    Job {
        doc: u32,
        off: u64,
        n: usize,
        job: JoinHandle<(Vec<u8>, Result<Outgoing>)>,
    },
    /// Compressed already, on the channel's task (a short frame, see [`INLINE_MAX`]).
    Done {
        doc: u32,
        off: u64,
        input: Vec<u8>,
        outgoing: Result<Outgoing>,
    },
    /// Skipped: the document was answered for or its file changed.
    Skip { n: u64 },
}

/// Where the channel is in its pieces.
struct Cursor {
    piece: Option<Piece>,
    off: u64,
}

impl Shared {
    /// [`Shared::channel`] for a kind the session compresses (see the module documentation).
    pub(super) async fn channel_compressed(
        &self,
        kind: Kind,
        idx: usize,
        mut w: Option<FrameWriter>,
        counter: Arc<AtomicU64>,
        comp: Arc<Compressor>,
    ) -> Result<()> {
        let chunk = self.chunks[kind.index()];
        let mut buf = Vec::new();
        let mut release = Release::default();
        let mut queue: VecDeque<Queued> = VecDeque::new();
        let ch = super::channel::channel(kind, idx);
        let mut at = Cursor {
            piece: None,
            off: 0,
        };
        let mut done = false;
        loop {
            // Cut frames ahead while the pipeline has room: one being written, plus as many
            // compressing as the policy has workers (none while `auto` waits for a check).
            while !done && queue.len() <= comp.ahead() {
                if at.piece.is_none_or(|p| at.off >= p.offset + p.len) {
                    let next = self.sm()?.next_piece(ch);
                    let Some(a) = next else {
                        done = true;
                        break;
                    };
                    let piece = a.piece;
                    if a.after.is_some() && !queue.is_empty() {
                        // Its window may wait for documents whose frames are queued here:
                        // send those first.
                        self.send_pending(
                            kind,
                            &mut w,
                            &mut queue,
                            &counter,
                            &comp,
                            &mut buf,
                            &mut release,
                        )
                        .await?;
                    }
                    self.wait_for_window(a, &mut w).await?;
                    at = Cursor {
                        piece: Some(piece),
                        off: piece.offset,
                    };
                }
                let Some(piece) = at.piece else { break };
                let end = piece.offset + piece.len;
                let mut n = ((end - at.off) as usize).min(chunk);
                let src = &self.sources[piece.doc as usize];
                let mut short_run = false;
                if kind == Kind::Secure {
                    // A compressed classified frame never spans two segments; a run of short
                    // segments goes raw, together (see `ALONE_MIN`).
                    let (mut first, mut run, mut open) = (None, 0u64, true);
                    src.streams().place(kind, at.off, n as u64, |_, _, len| {
                        first.get_or_insert(len);
                        if open && len < ALONE_MIN {
                            run += len;
                        } else {
                            open = false;
                        }
                    })?;
                    if run > 0 {
                        n = n.min(run as usize);
                        short_run = true;
                    } else {
                        n = n.min(first.unwrap_or(n as u64) as usize);
                    }
                }
                let plan = comp.plan(kind, n)?;
                if let Some(limit) = plan.limit {
                    n = n.min(limit);
                }
                // A run of short classified segments is never zstd's (it would share a context):
                // it goes in the field code, which codes every byte alone.
                let codec = plan.codec.map(|c| {
                    if short_run {
                        FrameCodec::Fields
                    } else {
                        FrameCodec::Zstd(c)
                    }
                });
                let item = match codec {
                    None => Pending::Raw {
                        doc: piece.doc,
                        off: at.off,
                        n,
                    },
                    Some(codec) => {
                        let reading = src.watch().gate().read().await;
                        if self.skip(piece.doc) {
                            drop(reading);
                            let rest = end - at.off;
                            at.off = end;
                            queue.push_back(Queued {
                                item: Pending::Skip { n: rest },
                                ends: Some(piece),
                            });
                            continue;
                        }
                        let mut input = comp.buffer();
                        let raw = read_frame(src, kind, at.off, n, &mut input)?;
                        drop(reading);
                        if let Some(raw) = raw {
                            release.add(&self.sources, piece.doc as usize, raw);
                        }
                        let (doc, off) = (piece.doc, at.off);
                        if n <= INLINE_MAX {
                            let outgoing = comp.encode(kind, doc, off, &input, codec);
                            Pending::Done {
                                doc,
                                off,
                                input,
                                outgoing,
                            }
                        } else {
                            let c = comp.clone();
                            let job = tokio::task::spawn_blocking(move || {
                                let r = c.encode(kind, doc, off, &input, codec);
                                (input, r)
                            });
                            Pending::Job { doc, off, n, job }
                        }
                    }
                };
                at.off += n as u64;
                queue.push_back(Queued {
                    item,
                    ends: (at.off == end).then_some(piece),
                });
            }
            if queue.is_empty() {
                break;
            }
            self.send_one(
                kind,
                &mut w,
                &mut queue,
                &counter,
                &comp,
                &mut buf,
                &mut release,
            )
            .await?;
        }
        release.finish(&self.sources);
        self.close(&mut w).await
    }

    /// Send everything queued.
    #[allow(clippy::too_many_arguments)]
    async fn send_pending(
        &self,
        kind: Kind,
        w: &mut Option<FrameWriter>,
        queue: &mut VecDeque<Queued>,
        counter: &AtomicU64,
        comp: &Compressor,
        buf: &mut Vec<u8>,
        release: &mut Release,
    ) -> Result<()> {
        while !queue.is_empty() {
            self.send_one(kind, w, queue, counter, comp, buf, release)
                .await?;
        }
        Ok(())
    }

    /// Send the frame at the head of the queue.
    #[allow(clippy::too_many_arguments)]
    async fn send_one(
        &self,
        kind: Kind,
        w: &mut Option<FrameWriter>,
        queue: &mut VecDeque<Queued>,
        counter: &AtomicU64,
        comp: &Compressor,
        buf: &mut Vec<u8>,
        release: &mut Release,
    ) -> Result<()> {
        let Some(Queued { item, ends }) = queue.pop_front() else {
            return Ok(());
        };
        self.send_item(kind, w, item, counter, comp, buf, release)
            .await?;
        match ends {
            Some(piece) => self.piece_done(piece, w).await,
            None => Ok(()),
        }
    }

    /// Send (or skip) one queued frame.
    #[allow(clippy::too_many_arguments)]
    async fn send_item(
        &self,
        kind: Kind,
        w: &mut Option<FrameWriter>,
        item: Pending,
        counter: &AtomicU64,
        comp: &Compressor,
        buf: &mut Vec<u8>,
        release: &mut Release,
    ) -> Result<()> {
        let n = match item {
            Pending::Skip { n } => {
                self.progress.skipped.fetch_add(n, Ordering::Relaxed);
                return Ok(());
            }
            Pending::Raw { doc, off, n } => {
                let src = &self.sources[doc as usize];
                let reading = src.watch().gate().read().await;
                if self.skip(doc) {
                    drop(reading);
                    self.progress.skipped.fetch_add(n as u64, Ordering::Relaxed);
                    return Ok(());
                }
                let raw = self.send_raw(kind, w, doc, off, n, buf).await?;
                drop(reading);
                if let Some(raw) = raw {
                    release.add(&self.sources, doc as usize, raw);
                }
                comp.sent(kind, None, n as u64, n as u64);
                n
            }
            Pending::Job { doc, off, n, job } => {
                let (input, outgoing) = job
                    .await
                    .map_err(|e| anyhow!("a compression worker failed: {e}"))?;
                self.send_compressed(kind, w, (doc, off), input, outgoing, comp)
                    .await?;
                n
            }
            Pending::Done {
                doc,
                off,
                input,
                outgoing,
            } => {
                let n = input.len();
                self.send_compressed(kind, w, (doc, off), input, outgoing, comp)
                    .await?;
                n
            }
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Send a frame that went to the compressor: `input`, the frame's bytes of `doc`'s `kind`
    /// stream at `off`, and what compressing them gave.
    async fn send_compressed(
        &self,
        kind: Kind,
        w: &mut Option<FrameWriter>,
        (doc, off): (u32, u64),
        input: Vec<u8>,
        outgoing: Result<Outgoing>,
        comp: &Compressor,
    ) -> Result<()> {
        let n = input.len();
        let link = comp.link(kind);
        if let Some(l) = link {
            l.mark();
        }
        match outgoing? {
            Outgoing::Raw => {
                // It did not shrink: the bytes read go as they are.
                if kind == Kind::Plain {
                    let src = &self.sources[doc as usize];
                    let tags = self.mac.frame_tags(src.streams(), doc, off, &input)?;
                    self.record(doc, tags)?;
                }
                match w.as_mut() {
                    Some(w) => w.data(doc, off, &input).await?,
                    None => self.ctl.lock().await.data(doc, off, &input).await?,
                }
                comp.sent(kind, None, n as u64, n as u64);
            }
            Outgoing::Z(z) => {
                if kind == Kind::Plain {
                    // One tag over what travels, for the frame's whole length.
                    let tag = self.mac.zdata_tag(doc, off, z.payload())?;
                    self.record(doc, vec![(off, n as u64, tag)])?;
                }
                match w.as_mut() {
                    Some(w) => w.frame_bytes(&z.bytes).await?,
                    None => self.ctl.lock().await.frame_bytes(&z.bytes).await?,
                }
                comp.sent(kind, Some(z.codec), n as u64, z.payload().len() as u64);
                comp.give_back(z.bytes);
            }
        }
        if let Some(l) = link {
            l.mark();
        }
        comp.give_back(input);
        Ok(())
    }
}

/// Copy `n` bytes of the `kind` stream from `off` into `into`: out of the mapping, or read.
/// Returns the span of the file they came from, if mapped.
fn read_frame(
    src: &crate::source::Source,
    kind: Kind,
    off: u64,
    n: usize,
    into: &mut Vec<u8>,
) -> Result<Option<std::ops::Range<u64>>> {
    into.clear();
    if src.is_mapped() {
        let slices = src.slices(kind, off, n as u64)?;
        into.reserve(n);
        let mut raw: Option<std::ops::Range<u64>> = None;
        for (a, b) in slices {
            let e = a + b.len() as u64;
            raw = Some(raw.map_or(a..e, |r| r.start.min(a)..r.end.max(e)));
            into.extend_from_slice(b);
        }
        Ok(raw)
    } else {
        into.resize(n, 0);
        tokio::task::block_in_place(|| src.read(kind, off, into))?;
        Ok(None)
    }
}
