//! The end of phase 4: the receiver's answers (one ACK per document, sent once the document is
//! durably stored) arrive on channel 0 while the channels are still sending. The session is
//! delivered when every document is answered; it fails, saying what was delivered, when a
//! channel fails, the receiver ends the session, or nothing moves for the idle timeout.

use std::sync::atomic::Ordering;

use anyhow::{anyhow, Result};
use sieve_core::message::{self, Message};
use tokio::task::JoinSet;

use crate::conn::FrameReader;
use crate::sendq::SendQueues;

use super::channel::Shared;
use super::{Progress, SendConfig, Undelivered};

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
    // Progress is a byte handed to a socket, a byte of the sockets' queues acknowledged by the
    // receiver (on a slow link the queues drain long after the last write) or an answer.
    let mut last_progress = (progress.sent(), queues.pending(), acked);
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
                    return Err(e.context(undelivered("sending failed".into(), &acks)));
                }
                Some(Err(e)) => {
                    tasks.abort_all();
                    return Err(anyhow!("{e}").context(undelivered("a channel task failed".into(), &acks)));
                }
            },
            m = tokio::time::timeout(cfg.idle_timeout, reader0.message()) => match m {
                Err(_) => {
                    let now = (progress.sent(), queues.pending(), acked);
                    if now == last_progress {
                        tasks.abort_all();
                        let what = format!("no progress for {:?}: the receiver stopped answering", cfg.idle_timeout);
                        return Err(anyhow!(undelivered(what, &acks)));
                    }
                    last_progress = now;
                }
                Ok(Err(e)) => {
                    tasks.abort_all();
                    return Err(e.context(undelivered("lost the connection to the receiver".into(), &acks)));
                }
                Ok(Ok(Message::Ack(a))) => {
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
                }
                Ok(Ok(Message::Error(e))) => {
                    tasks.abort_all();
                    let what = format!("the receiver ended the session: {}", e.message);
                    return Err(anyhow!(undelivered(what, &acks)));
                }
                Ok(Ok(other)) => {
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
