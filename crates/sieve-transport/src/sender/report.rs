//! The session's report ([`SessionReport`]) from what the receiver answered and what the
//! compressor did.

use anyhow::{Context, Result};
use sieve_core::message::{Ack, AckStatus};
use sieve_core::Kind;

use crate::source::Source;

use super::channel::Shared;
use super::{CompressionReport, DocReport, SendConfig, SessionReport};

/// Each document's outcome and the receiver's timings. The byte figures count what was stored,
/// not what was offered.
pub(super) fn add_answers(
    report: &mut SessionReport,
    acks: Vec<Option<Ack>>,
    sources: &[Source],
) -> Result<()> {
    for (a, src) in acks.into_iter().zip(sources) {
        let a = a.context("internal error: missing acknowledgement")?;
        report.combine_ms += a.receive_us as f64 / 1000.0;
        report.integrate_ms += a.integrate_us as f64 / 1000.0;
        report.commit_ms += a.commit_us as f64 / 1000.0;
        let ok = a.status == AckStatus::Ok;
        let d = DocReport {
            name: src.name.clone(),
            path: src.path.clone(),
            bytes: src.output_len(),
            ok,
            error: (!ok).then(|| format!("{:?}: {}", a.status, a.message)),
        };
        if ok {
            report.docs_ok += 1;
            report.bytes += src.output_len();
            report.secure_bytes += src.stream_len(Kind::Secure);
            report.plain_bytes += src.stream_len(Kind::Plain);
            report.marks_bytes += src.output_len() - src.content_len();
        } else {
            report.failures.push(d.clone());
        }
        report.documents.push(d);
    }
    Ok(())
}

/// What compression did to the cleartext (or that it was off).
pub(super) fn add_compression(report: &mut SessionReport, cfg: &SendConfig, shared: &Shared) {
    let plain_sent = shared
        .sources
        .iter()
        .map(|s| s.stream_len(Kind::Plain))
        .sum();
    report.compression = Some(match &shared.compressor {
        Some(c) => c.report().with_raw_plain(plain_sent),
        None => CompressionReport::uncompressed(cfg.compress, plain_sent),
    });
}
