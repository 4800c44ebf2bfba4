//! Phase 4 of a send, *transfer*, as the session sees it: announce the documents, start a task
//! per channel, collect the receiver's answers, and end the session.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use sieve_core::ledger::Ledger;
use sieve_core::message::Ack;
use sieve_core::sender::{ManifestError, SenderSession};
use sieve_core::Kind;
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinSet;

use crate::change::Leases;
use crate::source::Source;

use super::answers::await_answers;
use super::channel::Shared;
use super::compress::Compressor;
use super::connect::Connected;
use super::{Progress, SendConfig};

/// A planned session, ready to send its documents over the channels it connected.
pub(super) struct Transfer {
    pub(super) sm: SenderSession,
    pub(super) sources: Vec<Source>,
    /// Keeps the files' read leases answered while they are sent.
    pub(super) leases: Option<Leases>,
    pub(super) compressor: Option<Arc<Compressor>>,
    pub(super) progress: Arc<Progress>,
}

impl Transfer {
    /// Send every document and wait for every answer; returns what the channels shared (the
    /// documents, the compressor's figures) and each document's answer.
    pub(super) async fn run(
        self,
        cfg: &SendConfig,
        connected: Connected,
    ) -> Result<(Arc<Shared>, Vec<Option<Ack>>)> {
        let Transfer {
            mut sm,
            sources,
            leases,
            compressor,
            progress,
        } = self;
        // Every manifest is checked before any is sent, so an oversized one fails the session
        // cleanly.
        let empty = sm.announce().map_err(|e| manifest_error(e, &sources))?;
        let chunks = [Kind::Plain, Kind::Secure].map(|k| sm.chunk(k) as usize);
        let Connected {
            mut reader0,
            writer0,
            mac,
            secure_writers,
            plain_writers,
            mut plain_joins,
            queues,
            ..
        } = connected;
        let shared = Arc::new(Shared {
            plain_ledgers: sources.iter().map(|_| Mutex::new(Ledger::new())).collect(),
            stop: sources.iter().map(|_| AtomicBool::new(false)).collect(),
            sources,
            sm: Mutex::new(sm),
            ctl: AsyncMutex::new(writer0),
            chunks,
            mac,
            acked_below: tokio::sync::watch::Sender::new(0),
            progress: progress.clone(),
            leases,
            compressor,
        });
        shared.send_control().await?;
        // Documents without a byte are complete already.
        for doc in empty {
            shared.finish_doc(doc).await?;
        }
        let mut counters = Vec::new();
        let mut tasks: JoinSet<Result<()>> = JoinSet::new();
        // Secure channels first, then plain ones: the order of `Progress::per_channel`.
        let kinds = [
            (Kind::Secure, "secure", secure_writers),
            (Kind::Plain, "plain", plain_writers),
        ];
        for (kind, what, writers) in kinds {
            for (i, w) in writers.into_iter().enumerate() {
                let c = Arc::new(AtomicU64::new(0));
                counters.push(c.clone());
                let sh = shared.clone();
                tasks.spawn(async move {
                    sh.channel(kind, i, w, c)
                        .await
                        .with_context(|| format!("{what} channel {i}"))
                });
            }
        }
        if let Ok(mut pc) = progress.per_channel.lock() {
            *pc = counters;
        }

        // Acknowledgements arrive on channel 0 while the channels send.
        let acks = await_answers(
            cfg,
            &shared,
            tasks,
            &mut plain_joins,
            &mut reader0,
            &queues,
            &progress,
        )
        .await?;
        if let Some(l) = &shared.leases {
            // A changed file's writer waits until the sockets delivered what they held; the
            // session must not end (closing them) before.
            l.settle(crate::change::DRAIN_LIMIT + Duration::from_secs(1))
                .await;
        }
        shared.sm()?.close();
        shared.send_control().await?;
        let _ = shared.ctl.lock().await.shutdown().await;
        Ok((shared, acks))
    }
}

/// Why a document cannot be announced, naming its file.
fn manifest_error(e: ManifestError, sources: &[Source]) -> anyhow::Error {
    let path = |doc: u32| sources[doc as usize].path.display().to_string();
    match e {
        ManifestError::Invalid { doc, source } => anyhow::Error::new(source)
            .context(format!("{} cannot be described to the receiver", path(doc))),
        ManifestError::TooLarge {
            doc,
            segments,
            len,
            max,
        } => anyhow!(
            "{} has {segments} segments; its manifest ({len} bytes) exceeds the receiver's frame \
             limit of {max} bytes. Merge adjacent classified parts or split the document",
            path(doc)
        ),
        ManifestError::Order(e) => e.into(),
    }
}
