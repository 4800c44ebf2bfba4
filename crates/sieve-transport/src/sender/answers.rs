//! The end of phase 4: the receiver's answers (one ACK per document, sent once the document is
//! durably stored) arrive on channel 0 while the channels are still sending. The session is
//! delivered when every document is answered; it fails, saying what was delivered, when a
//! channel fails, the receiver ends the session, or nothing moves for the idle timeout.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use sieve_core::message::{self, Message};
use tokio::task::JoinSet;

use crate::conn::FrameReader;
use crate::explain;
use crate::sendq::SendQueues;

use super::channel::Shared;
use super::{Progress, SendConfig, Undelivered};

/// Bytes per second the sockets' queues must drain, averaged over the idle timeout, to count as
/// progress when nothing else moves: 32 KiB/s (256 kbit/s). Slower links need a longer
/// `--idle-timeout`.
pub const DRAIN_FLOOR: u64 = 32 << 10;

/// Wait for an answer to every document of `shared` while `tasks` (the channels) send, then for
/// the channels to finish.
pub(super) async fn await_answers(
    cfg: &SendConfig,
    shared: &Shared,
    mut tasks: JoinSet<Result<()>>,
    reader0: &mut FrameReader,
    queues: &SendQueues,
    progress: &Progress,
) -> Result<Vec<Option<message::Ack>>> {
    let n_docs = shared.sources.len();
    let mut acks: Vec<Option<message::Ack>> = vec![None; n_docs];
    let mut acked = 0usize;
    let mut sending_done = false;
    // Progress is a byte handed to a socket, an answer, or the sockets' queues draining (on a
    // slow link they drain long after the last write) by at least DRAIN_FLOOR per second of
    // the timeout: a receiver that stopped reading still lets its kernel take a trickle of
    // bytes (on loopback about 17 KB/s while its receive queue is collapsed), which must not
    // keep a dead session alive.
    let mut last = (progress.sent(), acked);
    let mut queued_at_last = queues.pending();
    let drain_floor = (DRAIN_FLOOR as f64 * cfg.idle_timeout.as_secs_f64()) as u64;
    let mut since = Instant::now();
    // Progress is sampled ten times per idle timeout, so that giving up comes within a tenth of
    // it of the timeout (a receiver that stops answering at any moment is given up on after
    // --idle-timeout, not after up to twice that).
    let tick = (cfg.idle_timeout / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Every way out of this loop short of an answer for each document says what was delivered.
    let undelivered =
        |what: String, acks: &[Option<message::Ack>]| Undelivered::new(what, acks, &shared.sources);
    while acked < n_docs {
        tokio::select! {
            r = tasks.join_next(), if !sending_done => match r {
                None => sending_done = true,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => {
                    tasks.abort_all();
                    tracing::debug!("a channel failed: {e:#}");
                    let what = format!("sending failed: {}", explain::connection_lost(&e, "the receiver"));
                    return Err(anyhow!(undelivered(what, &acks)));
                }
                Some(Err(e)) => {
                    tasks.abort_all();
                    return Err(anyhow!("{e}").context(undelivered("a channel task failed".into(), &acks)));
                }
            },
            _ = ticker.tick() => {
                let now = (progress.sent(), acked);
                let queued = queues.pending();
                if now != last || queued.saturating_add(drain_floor) <= queued_at_last {
                    last = now;
                    queued_at_last = queued;
                    since = Instant::now();
                } else if since.elapsed() >= cfg.idle_timeout {
                    tasks.abort_all();
                    let what = format!(
                        "no progress for {:.1} s (--idle-timeout): the receiver stopped answering",
                        since.elapsed().as_secs_f64()
                    );
                    return Err(anyhow!(undelivered(what, &acks)));
                }
            }
            // Reading a frame is cancel-safe: a tick that wins keeps the bytes read so far.
            m = reader0.message() => match m {
                Err(e) => {
                    tasks.abort_all();
                    tracing::debug!("channel 0 failed: {e:#}");
                    let what = explain::connection_lost(&e, "the receiver");
                    return Err(anyhow!(undelivered(what, &acks)));
                }
                Ok(Message::Ack(a)) => {
                    let i = a.doc as usize;
                    if i >= n_docs || acks[i].is_some() {
                        tasks.abort_all();
                        let what = format!("the receiver acknowledged document {} twice or out of range", a.doc);
                        return Err(anyhow!(undelivered(what, &acks)));
                    }
                    shared.answered[i].store(true, Ordering::Release);
                    acks[i] = Some(a);
                    acked += 1;
                    let below = *shared.acked_below.borrow() as usize;
                    let below = below + acks[below..].iter().take_while(|a| a.is_some()).count();
                    shared.acked_below.send_replace(below as u32);
                    progress.docs_acked.store(acked as u64, Ordering::Relaxed);
                    if acks[i].as_ref().is_some_and(|a| a.status == message::AckStatus::Ok) {
                        if let Ok(mut d) = progress.delivered.lock() {
                            d.push(shared.sources[i].name.clone());
                        }
                    }
                }
                Ok(Message::Error(e)) => {
                    tasks.abort_all();
                    let what = format!("the receiver ended the session: {}", e.message);
                    return Err(anyhow!(undelivered(what, &acks)));
                }
                Ok(other) => {
                    tasks.abort_all();
                    let what = format!("unexpected message from the receiver: {other:?}");
                    return Err(anyhow!(undelivered(what, &acks)));
                }
            }
        }
    }
    // Every document is answered; refused ones may leave channels with nothing to do.
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| anyhow!("a channel task failed: {e}"))
            .and_then(|r| r)
            .map_err(|e| {
                e.context(undelivered(
                    "a channel failed after the last answer".into(),
                    &acks,
                ))
            })?;
    }
    Ok(acks)
}
