//! The end of phase 4: the receiver's answers (one ACK per document, sent once the document is
//! durably stored) arrive on channel 0 while the channels are still sending. The session is
//! delivered when every document is answered; it fails, saying what was delivered, when a
//! channel fails, a plain channel's JOIN is refused, the receiver ends the session, or nothing
//! moves for the idle timeout.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use sieve_core::message;
use tokio::task::JoinSet;

use crate::conn::FrameReader;
use crate::explain;
use crate::sendq::SendQueues;

use super::channel::Shared;
use super::connect::{check_plain_join, PlainJoin};
use super::{Progress, SendConfig, Undelivered};

/// Bytes per second the sockets' queues must drain, averaged over the idle timeout, to count as
/// progress when nothing else moves: 32 KiB/s (256 kbit/s). Slower links need a longer
/// `--idle-timeout`.
pub const DRAIN_FLOOR: u64 = 32 << 10;

/// How long a failed channel's error waits for a JOIN answer that may explain it: a receiver
/// that refuses a JOIN answers and closes at once, so the refusal is on its way when writing fails.
const REFUSAL_GRACE: Duration = Duration::from_millis(200);

/// Wait for an answer to every document of `shared` while `tasks` (the channels) send, then for
/// the channels to finish. The plain channels' JOIN answers (`plain_joins`) arrive meanwhile;
/// a refusal fails the session.
pub(super) async fn await_answers(
    cfg: &SendConfig,
    shared: &Shared,
    mut tasks: JoinSet<Result<()>>,
    plain_joins: &mut JoinSet<PlainJoin>,
    reader0: &mut FrameReader,
    queues: &SendQueues,
    progress: &Progress,
) -> Result<Vec<Option<message::Ack>>> {
    let mut acked = shared.sm()?.answered();
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
    let undelivered = |what: String| match shared.sm() {
        Ok(sm) => Undelivered::new(what, sm.answers(), &shared.sources),
        Err(e) => Undelivered::new(format!("{what} ({e})"), &[], &shared.sources),
    };
    while !shared.sm()?.all_answered() {
        tokio::select! {
            r = tasks.join_next(), if !sending_done => match r {
                None => sending_done = true,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => {
                    tasks.abort_all();
                    tracing::debug!("a channel failed: {e:#}");
                    // A refused JOIN closes its channel: say why rather than "reset by peer".
                    if let Some(refused) = refusal(shared, plain_joins).await {
                        return Err(refused.context(undelivered("a plain channel was not accepted".into())));
                    }
                    let what = format!("sending failed: {}", explain::connection_lost(&e, "the receiver"));
                    return Err(anyhow!(undelivered(what)));
                }
                Some(Err(e)) => {
                    tasks.abort_all();
                    return Err(anyhow!("{e}").context(undelivered("a channel task failed".into())));
                }
            },
            j = plain_joins.join_next(), if !plain_joins.is_empty() => {
                let checked = match j {
                    Some(Ok(join)) => check_plain_join(&mut *shared.sm()?, join),
                    Some(Err(e)) => Err(anyhow!("a plain channel's JOIN task failed: {e}")),
                    None => Ok(()),
                };
                if let Err(e) = checked {
                    tasks.abort_all();
                    return Err(e.context(undelivered("a plain channel was not accepted".into())));
                }
            }
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
                    return Err(anyhow!(undelivered(what)));
                }
            }
            // Reading a frame is cancel-safe: a tick that wins keeps the bytes read so far.
            m = reader0.message() => match m {
                Err(e) => {
                    tasks.abort_all();
                    tracing::debug!("channel 0 failed: {e:#}");
                    let what = explain::connection_lost(&e, "the receiver");
                    return Err(anyhow!(undelivered(what)));
                }
                Ok(msg) => {
                    let answer = shared.sm()?.on_answer(msg);
                    let a = match answer {
                        Ok(a) => a,
                        Err(ended) => {
                            tasks.abort_all();
                            return Err(anyhow!(undelivered(ended.to_string())));
                        }
                    };
                    if a.unfinished {
                        // Its remaining bytes are dropped by the receiver: read no more of them.
                        shared.stop[a.doc as usize].store(true, Ordering::Release);
                    }
                    let below = {
                        let sm = shared.sm()?;
                        acked = sm.answered();
                        sm.acked_below()
                    };
                    shared.acked_below.send_replace(below);
                    progress.docs_acked.store(acked as u64, Ordering::Relaxed);
                    if a.delivered {
                        if let Ok(mut d) = progress.delivered.lock() {
                            d.push(shared.sources[a.doc as usize].name.clone());
                        }
                    }
                }
            }
        }
    }
    // Every document is answered; refused ones may leave channels with nothing to do.
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| anyhow!("a channel task failed: {e}"))
            .and_then(|r| r)
            .map_err(|e| e.context(undelivered("a channel failed after the last answer".into())))?;
    }
    Ok(shared.sm()?.answers().to_vec())
}

/// The first refused (or unanswered) JOIN among the answers that arrive within
/// [`REFUSAL_GRACE`], if any.
async fn refusal(shared: &Shared, plain_joins: &mut JoinSet<PlainJoin>) -> Option<anyhow::Error> {
    let deadline = tokio::time::Instant::now() + REFUSAL_GRACE;
    while let Ok(Some(j)) = tokio::time::timeout_at(deadline, plain_joins.join_next()).await {
        let checked = match (j, shared.sm()) {
            (Ok(join), Ok(mut sm)) => check_plain_join(&mut sm, join),
            (Err(e), _) => Err(anyhow!("a plain channel's JOIN task failed: {e}")),
            (_, Err(e)) => Err(e),
        };
        if let Err(e) = checked {
            return Some(e);
        }
    }
    None
}
