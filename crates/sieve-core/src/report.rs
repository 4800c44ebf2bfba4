//! What one session did, as `sieve send --json` prints it (docs/DESIGN.md §7.1).
//!
//! One type for the writer (the sender fills it) and every reader (the laboratory parses the
//! sender's output into it), so a field added, renamed or retyped changes both sides at once:
//! a copy in the reader would keep parsing and silently miss what it no longer finds. The types
//! are plain data with serde; the names of modes and splits are the command line's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::batch::BatchSplit;
use crate::compress::Compression;
use crate::message::{CompressFlags, Mode};
use crate::split::Split;

/// One session's measurements, printed by `sieve send --json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionReport {
    /// The mode used (what `auto` chose, when it was asked for).
    pub mode: Mode,
    /// What `--mode auto` chose and why; absent when a mode was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionReport>,
    /// N: TLS channels, channel 0 included.
    pub secure_channels: u8,
    /// M: plain TCP channels (0 in secure-only mode).
    pub plain_channels: u8,
    /// How one document's streams were split over the channels.
    pub split: Split,
    /// How the batch was split over the channels.
    pub batch_split: BatchSplit,
    /// Documents in the session.
    pub docs: usize,
    /// Documents acknowledged as stored.
    pub docs_ok: usize,
    /// Bytes of the delivered documents as stored: `secure_bytes + plain_bytes + marks_bytes`.
    pub bytes: u64,
    /// Classified bytes of the delivered documents (over TLS).
    pub secure_bytes: u64,
    /// Cleartext bytes of the delivered documents (over the plain channels).
    pub plain_bytes: u64,
    /// Bytes of marks (`<$S>`, `<$E>`) the delivered documents hold: they never travel, the
    /// receiver writes them back from the manifest.
    pub marks_bytes: u64,
    /// Connecting, every channel (the thesis's total time less its response time).
    pub connect_ms: f64,
    /// Of which the first TLS handshake: what the send still waited for it once its documents
    /// were prepared.
    pub connect_first_tls_ms: f64,
    /// Connecting channel 0 while the documents were prepared (begun before them, the two
    /// overlap): in neither `connect_ms` nor `response_ms`'s other phases, so that `total_ms`
    /// stays the time from the first byte read to the last acknowledgement.
    #[serde(default)]
    pub connect_ahead_ms: f64,
    /// Of which the extra TLS channels (resumed sessions).
    pub connect_extra_tls_ms: f64,
    /// Of which the plain channels: connecting (unless opened during the handshake) and
    /// sending their JOIN, whose answer is read while they send.
    pub connect_plain_ms: f64,
    /// Plain channels whose TCP connection opened while channel 0's TLS handshake ran, to the
    /// address a past session to this receiver gave (SESSION confirmed it).
    #[serde(default)]
    pub connect_plain_early: usize,
    /// Extra TLS channels that resumed a session instead of a full handshake.
    pub tls_resumed: usize,
    /// The thesis's response time: sieve, split and transfer until the last acknowledgement.
    pub response_ms: f64,
    /// The thesis's total time: connect plus response.
    pub total_ms: f64,
    /// Finding the classified parts (marks scan, ranges files, policies).
    pub sieve_ms: f64,
    /// Emulated additional processing (the thesis's AP, §5.2.4.1): only the laboratory's build
    /// of `sieve send` (its `lab` feature) emulates it; zero otherwise. Part of the response.
    #[serde(default)]
    pub processing_ms: f64,
    /// Planning the split.
    pub split_ms: f64,
    /// Moving the bytes until every acknowledgement.
    pub transfer_ms: f64,
    /// The receiver's combine, as it reported it.
    pub combine_ms: f64,
    /// The receiver's integrate, as it reported it.
    pub integrate_ms: f64,
    /// The receiver's durable commit, as it reported it.
    pub commit_ms: f64,
    /// CPU time of the sending process, every thread.
    pub cpu_ms: f64,
    /// The TLS suite negotiated (its IANA name).
    pub cipher: String,
    /// The cleartext MAC the receiver chose among the sender's offer (`aes-gmac`, `blake3`,
    /// `chacha20-poly1305`); empty in reports written before it was kept.
    #[serde(default)]
    pub mac: String,
    /// Documents sent in sieve mode without a classified byte: entirely in the clear (only
    /// where a ranges file, a policy or `--allow-clear` said so).
    pub unclassified: Vec<String>,
    /// Documents for which no classification was given (no inline mark, no ranges file, no
    /// policy), sent secure-only for that reason.
    #[serde(default)]
    pub unmarked: Vec<String>,
    /// Documents whose files a read lease watched for changes (the others were watched by their
    /// size and times only).
    pub docs_leased: usize,
    /// Findings per detector when the documents were classified by a policy (`--policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detections: Option<BTreeMap<String, u64>>,
    /// Documents the receiver answered with a failure.
    pub failures: Vec<DocReport>,
    /// Documents not sent at all (`--skip-invalid`), each with why.
    pub skipped: Vec<DocReport>,
    /// Every document, for the human summary; not printed.
    #[serde(skip)]
    pub documents: Vec<DocReport>,
    /// What compression did: bytes before and after, frames per level, switches.
    #[serde(default)]
    pub compression: Option<CompressionReport>,
}

/// One document's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DocReport {
    /// The name the receiver stores it under.
    pub name: String,
    /// Where it was read from.
    pub path: PathBuf,
    /// Its bytes as stored.
    pub bytes: u64,
    /// Acknowledged as stored.
    pub ok: bool,
    /// Why not, when not.
    pub error: Option<String>,
}

/// Both modes' predicted times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PredictedMs {
    /// The sieve's.
    pub sieve: f64,
    /// Secure-only's.
    pub secure_only: f64,
}

/// What `auto` chose and why: the report's `decision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionReport {
    /// The mode used.
    pub chosen: Mode,
    /// The mode asked for (`auto`).
    pub requested: String,
    /// What the cost model predicted for each mode; absent when the choice was not the
    /// model's (nothing in the documents was classified, so they went secure-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<PredictedMs>,
    /// One line: what bounds the transfer and what tipped the choice.
    pub reason: String,
}

impl DecisionReport {
    /// A few words for the summary line, e.g. "auto chose secure-only (fixed costs; predicted
    /// 2.1 ms against 2.6 ms for the sieve)".
    pub fn summary(&self) -> String {
        let why = self.reason.split(':').next().unwrap_or_default();
        let Some(p) = self.predicted_ms else {
            return format!("{} sent {} ({why})", self.requested, self.chosen);
        };
        let (mine, other, other_name) = match self.chosen {
            Mode::Sieve => (p.sieve, p.secure_only, "secure-only"),
            Mode::SecureOnly => (p.secure_only, p.sieve, "the sieve"),
        };
        format!(
            "{} chose {} ({why}; predicted {} ms against {} ms for {other_name})",
            self.requested,
            self.chosen,
            short_ms(mine),
            short_ms(other),
        )
    }
}

/// Milliseconds to two significant figures or so: "0.53", "2.1", "480".
fn short_ms(v: f64) -> String {
    if !v.is_finite() {
        "∞".into()
    } else if v < 1.0 {
        format!("{v:.2}")
    } else if v < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Per level (and "raw"): frames and bytes before and after.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LevelCount {
    /// Frames sent at this level.
    pub frames: u64,
    /// Their payload before compression.
    pub bytes_before: u64,
    /// And after.
    pub bytes_after: u64,
}

/// What compression did in one session (`--json`'s `compression`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CompressionReport {
    /// `--compress`.
    pub policy: String,
    /// What the sender offered ("none", "plain", "classified", "plain+classified").
    pub offered: String,
    /// What the receiver accepted, in the same words.
    pub accepted: String,
    /// Payload bytes of the streams that could be compressed, before (raw frames count the
    /// same on both sides).
    pub bytes_before: u64,
    /// And after.
    pub bytes_after: u64,
    /// Cleartext before.
    pub plain_before: u64,
    /// Cleartext after.
    pub plain_after: u64,
    /// Classified bytes before.
    pub classified_before: u64,
    /// Classified bytes after.
    pub classified_after: u64,
    /// Frames per level ("zstd:N"), "fields" for runs of short classified values in the field
    /// code (`--compress-classified`), "raw" for frames sent uncompressed.
    pub levels: BTreeMap<String, LevelCount>,
    /// Times the policy changed the level (or turned compression on or off).
    pub switches: u64,
    /// Frames the policy compressed (or sent raw) to measure rather than because it chose to.
    pub probes: u64,
    /// Quanta the policy decided at.
    pub quanta: u64,
    /// CPU time spent compressing, all workers.
    pub compress_cpu_ms: f64,
    /// The link's rate as the policy last estimated it (wire Mbit/s).
    pub link_mbit: Option<f64>,
    /// The receiver's decompression speed from its SESSION, MB/s per core.
    pub receiver_decompress_mbps: u32,
    /// The level in force at the end (`null`: raw).
    pub final_level: Option<String>,
    /// The level the next session to this receiver starts at for data alike (`auto`: the
    /// best of the levels this session measured; `null`: raw).
    #[serde(default)]
    pub kept_level: Option<String>,
    /// The level `auto` started at because the last session to this receiver kept it
    /// (`null`: it started as a first session does).
    #[serde(default)]
    pub resumed_level: Option<String>,
    /// What zstd 1, the level `auto` measures the others against, made of the first frame of
    /// this session's cleartext it compressed (compressed / plain; `null`: none): kept with the
    /// final level, so that the next session resumes that level only for data alike.
    #[serde(default)]
    pub anchor_ratio: Option<f64>,
}

impl CompressionReport {
    /// Count the cleartext that never passed through the compressor (a policy that is off sends
    /// it by the raw path) as sent raw: `plain` is the session's whole cleartext.
    pub fn with_raw_plain(mut self, plain: u64) -> CompressionReport {
        let rest = plain.saturating_sub(self.plain_before);
        self.plain_before += rest;
        self.plain_after += rest;
        self.bytes_before += rest;
        self.bytes_after += rest;
        self
    }

    /// The report of a session that offered no compression (`--compress off`, or secure-only
    /// without `--compress-classified`): its `plain` bytes went as they were.
    pub fn uncompressed(policy: Compression, plain: u64) -> CompressionReport {
        CompressionReport {
            policy: policy.to_string(),
            offered: CompressFlags::NONE.to_string(),
            accepted: CompressFlags::NONE.to_string(),
            bytes_before: plain,
            bytes_after: plain,
            plain_before: plain,
            plain_after: plain,
            ..CompressionReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names on the wire of `--json` are the command line's, and what the sender prints
    /// parses back into the same report (the laboratory's reading).
    #[test]
    fn a_report_round_trips_through_json_with_the_command_line_names() {
        let r = SessionReport {
            mode: Mode::SecureOnly,
            split: Split::Segment,
            batch_split: BatchSplit::File,
            decision: Some(DecisionReport {
                chosen: Mode::SecureOnly,
                requested: "auto".into(),
                predicted_ms: Some(PredictedMs {
                    sieve: 2.6,
                    secure_only: 2.1,
                }),
                reason: "fixed costs: two connections".into(),
            }),
            compression: Some(CompressionReport::uncompressed(Compression::Off, 7)),
            docs: 3,
            docs_ok: 2,
            ..SessionReport::default()
        };
        let text = serde_json::to_string(&r).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["mode"], "secure-only");
        assert_eq!(v["split"], "segment");
        assert_eq!(v["batch_split"], "file");
        assert_eq!(v["decision"]["chosen"], "secure-only");
        let back: SessionReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back.mode, Mode::SecureOnly);
        assert_eq!(back.split, Split::Segment);
        assert_eq!(back.batch_split, BatchSplit::File);
        assert_eq!(back.decision, r.decision);
        assert_eq!((back.docs, back.docs_ok), (3, 2));
        assert_eq!(back.compression.map(|c| c.plain_after), Some(7));
    }

    #[test]
    fn the_summary_names_the_choice_and_both_predictions() {
        let d = DecisionReport {
            chosen: Mode::Sieve,
            requested: "auto".into(),
            predicted_ms: Some(PredictedMs {
                sieve: 480.4,
                secure_only: 0.534,
            }),
            reason: "protection: AES-GCM is slow here".into(),
        };
        assert_eq!(
            d.summary(),
            "auto chose sieve (protection; predicted 480 ms against 0.53 ms for secure-only)"
        );
    }

    #[test]
    fn a_session_sent_secure_only_for_want_of_marks_says_so_without_predictions() {
        let d = DecisionReport {
            chosen: Mode::SecureOnly,
            requested: "sieve".into(),
            predicted_ms: None,
            reason: "unmarked: no classification was given".into(),
        };
        assert_eq!(d.summary(), "sieve sent secure-only (unmarked)");
        let v = serde_json::to_value(&d).unwrap();
        assert!(v.get("predicted_ms").is_none(), "{v}");
        let back: DecisionReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }
}
