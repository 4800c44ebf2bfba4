//! What a sender remembers of the paths to its receivers.
//!
//! `--mode auto` chooses before connecting. Over a path slower than the CPU both modes wait for
//! the wire, and there the sieve alone moves fewer bytes: it may compress its cleartext, which
//! TLS-only tools cannot do safely. A rate cannot be measured before connecting, so the sender
//! keeps, per receiver address (`--to` as written), the rate its last session to that receiver
//! achieved on the wire and whether that receiver accepted compressed cleartext, in
//! `$XDG_CACHE_HOME/sieve/paths.json` beside the calibration. A first session to a receiver
//! has no record: the model then weighs what each mode can lose over the rates the path may
//! have (`CostModel::unmeasured` in the core).
//!
//! For `--compress auto` it keeps the best level the last session that ran it to a receiver
//! measured (`Auto::level_to_keep` in the core), and what zstd 1 made of that session's first
//! frame, so that the next one starts there for data alike instead of climbing from zstd 1
//! (see `Auto::resume` in the core). A few earlier sessions' levels for other data are kept
//! beside it, so that a sender that alternates kinds of documents (logs, then the
//! documentation) starts each where the last session with data like it left off
//! ([`PathRecord::auto_start`]).
//!
//! It also keeps where each receiver's plain port was, so that the next session opens its
//! plain connections while channel 0's TLS handshake runs (or while its documents are
//! prepared) instead of after SESSION: a round trip less (see `sender/dial.rs`). SESSION still
//! says where the plain port is; a remembered address that differs is dropped unused.
//!
//! Rates are kept only of sessions to another host, and only of those whose transfer lasted
//! long enough to say something: on one host the "path" is memory and the CPU decides. Plain
//! addresses are kept of every receiver, on this host too, where a connection's set-up is a
//! good part of a small document's time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sieve_core::compress::{Codec, Compression, Encoded, Encoder};
use sieve_core::report::SessionReport;

/// The level a session of `auto` kept (see `Auto::level_to_keep` in the core), and for what
/// data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AutoStart {
    /// The zstd level it kept.
    pub level: i32,
    /// What zstd 1 made of that session's first cleartext frame (compressed / plain).
    pub anchor_ratio: f64,
}

/// Levels kept for data other than the last session's.
const MAX_OTHER_DATA: usize = 8;

/// How close (as a factor either way) two sessions' anchor ratios must be for the later
/// session's level to replace the earlier one's: tighter than [`alike`], which only says a
/// kept level may be tried on such data.
///
/// Why: zstd 1's ratio is a coarse fingerprint. The laboratory's corpora make 0.22 (JSON
/// records), 0.25 (crate sources), 0.27 (logs), 0.35 (prose), 0.38 (CSV), 0.58 (random
/// letters) and 0.04 (the Rust documentation) of their first 256 KiB, so within `alike`'s
/// factor of 1.5 the five text corpora chain into one another: each session's level
/// replaced the one before, three kinds were kept where seven were sent in turn, and the
/// JSON records, sent after the CSV and before the logs, found no level of their own and
/// climbed from zstd 1 every time (998 ms over 10 Mbit/s, where a session resuming its own
/// zstd 19 took 938 and the fixed level 915).
const SAME_DATA_TOLERANCE: f64 = 1.1;

/// Whether two anchor ratios tell data alike, as `auto`'s own check of a resumed level does.
fn alike(a: f64, b: f64) -> bool {
    a > 0.0 && sieve_core::compress::auto::alike(a, b)
}

/// Whether two anchor ratios are close enough for one session's level to stand for the other's
/// (see [`SAME_DATA_TOLERANCE`]).
fn same_data(a: f64, b: f64) -> bool {
    a > 0.0 && sieve_core::compress::auto::alike_within(a, b, SAME_DATA_TOLERANCE)
}

/// What is kept of one receiver's path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRecord {
    /// Bytes per nanosecond (GB/s) the last session put on the wire during its transfer.
    pub rate_gbps: f64,
    /// The receiver accepted compressed cleartext when it was last offered (`None`: never
    /// offered yet, as in secure-only sessions).
    pub compresses: Option<bool>,
    /// When it was recorded, seconds since the Unix epoch (the oldest records go first).
    pub seen: u64,
    /// The zstd level `--compress auto` was at when the last session that ran it to this
    /// receiver ended (`None`: none ran, or it ended sending raw). The next session with
    /// `auto` starts there rather than climbing from zstd 1 again (files written before it
    /// was kept have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_level: Option<i32>,
    /// What zstd 1 made of that session's first cleartext frame (compressed / plain): the next
    /// session resumes `auto_level` only if its own first frame compresses alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_anchor_ratio: Option<f64>,
    /// Where `auto` ended earlier sessions whose data were not nearly the same (by zstd 1) as the
    /// last one's nor as each other's, the most recent first, at most `MAX_OTHER_DATA` (8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_others: Vec<AutoStart>,
    /// The TLS suite the last session agreed on, by rustls's name (`cipher` in `--json`): a
    /// receiver without AES hardware takes ChaCha20-Poly1305 where this sender lists AES-128-GCM
    /// first, and `--mode auto` prices the suite that will be used (files written before it was
    /// kept have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher: Option<String>,
}

impl PathRecord {
    /// Whether any level of `auto` is kept.
    pub fn has_auto_level(&self) -> bool {
        self.auto_level.is_some() || !self.auto_others.is_empty()
    }

    /// Where `auto` should start, and the anchor ratio to check the first frame against, for
    /// data whose first cleartext zstd 1 shrinks to `sample_ratio` (`None`: not known): the
    /// level of the kept session whose data were most alike, if one was; without a sample, the
    /// last session's. Data alike to none start as new: the first frame's check would send
    /// such a start back to zstd 1 anyway, after frames spent at a level chosen for other data.
    pub fn auto_start(&self, sample_ratio: Option<f64>) -> Option<(i32, Option<f64>)> {
        let last = self.auto_level.map(|l| (l, self.auto_anchor_ratio));
        let Some(now) = sample_ratio.filter(|r| r.is_finite() && *r > 0.0) else {
            return last;
        };
        if let Some((level, None)) = last {
            // Kept before anchors were: nothing to compare with.
            return Some((level, None));
        }
        let distance = |a: f64| (a / now).ln().abs();
        last.and_then(|(l, a)| {
            a.map(|a| AutoStart {
                level: l,
                anchor_ratio: a,
            })
        })
        .into_iter()
        .chain(self.auto_others.iter().copied())
        .filter(|s| alike(s.anchor_ratio, now))
        .min_by(|x, y| distance(x.anchor_ratio).total_cmp(&distance(y.anchor_ratio)))
        .map(|s| (s.level, Some(s.anchor_ratio)))
    }
}

/// The other data's levels after a session of `auto` that left `new`: the level it replaces
/// joins them, and any whose data are the same as the new session's ([`same_data`]) goes (the
/// new level is what suits such data now).
fn others_after(before: Option<&PathRecord>, new: &PathRecord) -> Vec<AutoStart> {
    let Some(b) = before else {
        return Vec::new();
    };
    let previous = b
        .auto_level
        .zip(b.auto_anchor_ratio)
        .map(|(level, anchor_ratio)| AutoStart {
            level,
            anchor_ratio,
        });
    previous
        .into_iter()
        .chain(b.auto_others.iter().copied())
        .filter(|s| s.anchor_ratio.is_finite() && s.anchor_ratio > 0.0)
        .filter(|s| {
            !new.auto_anchor_ratio
                .is_some_and(|n| same_data(n, s.anchor_ratio))
        })
        .take(MAX_OTHER_DATA)
        .collect()
}

/// Transfers shorter than this say more about start-up than about the path.
const MIN_TRANSFER_MS: f64 = 100.0;
/// Nor do transfers of fewer wire bytes; but `auto`'s level is worth keeping from a session
/// that compressed at least this much cleartext, however little of it crossed the wire (see
/// [`record_of`]).
const MIN_WIRE_BYTES: u64 = 1 << 20;
/// Receivers remembered at most.
const MAX_RECORDS: usize = 256;
/// Cleartext bytes compressed to estimate what compression saves (see [`cleartext_share`]).
pub const SAMPLE_LEN: usize = 256 << 10;

/// Where a receiver's plain port was when its last session ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct PlainRecord {
    addr: SocketAddr,
    /// When it was recorded or last changed, seconds since the Unix epoch.
    seen: u64,
}

/// The default file: `$XDG_CACHE_HOME/sieve/paths.json`, else `$HOME/.cache/sieve/paths.json`.
pub fn default_file() -> Option<PathBuf> {
    Some(crate::calibrate::cache_path()?.with_file_name("paths.json"))
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Paths {
    receivers: BTreeMap<String, PathRecord>,
    /// Each receiver's plain address (files written before it was kept have none).
    #[serde(default)]
    plain: BTreeMap<String, PlainRecord>,
}

impl Paths {
    /// The records at `path`; none if it is missing or unreadable (a cache, never an error).
    fn read(path: &Path) -> Paths {
        crate::cache::read_private(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Written whole and renamed ([`crate::cache::write_private`]), so that two senders
    /// finishing at once never leave a torn file (the last one's records win).
    fn write(&self, path: &Path) -> anyhow::Result<()> {
        crate::cache::write_private(path, &serde_json::to_vec_pretty(self)?)
    }
}

/// The record of the path to `to` in `file`, if a past session left one.
pub fn recall(file: &Path, to: &str) -> Option<PathRecord> {
    Paths::read(file)
        .receivers
        .get(to)
        .cloned()
        .filter(|r| r.rate_gbps.is_finite() && r.rate_gbps > 0.0)
}

/// Where the plain port of the receiver at `to` was at the end of its last session.
pub fn recall_plain(file: &Path, to: &str) -> Option<SocketAddr> {
    Paths::read(file).plain.get(to).map(|p| p.addr)
}

/// Keep in `file` what `report`, a finished session to `to` on another host whose plain
/// channels connected to `plain`, says of the path. Sessions too short to measure it, or with a
/// document not delivered, leave the rate as it was; the file is written only if something
/// changed.
pub fn remember(file: &Path, to: &str, report: &SessionReport, plain: Option<SocketAddr>) {
    let plain = plain.filter(|_| report.docs_ok == report.docs);
    let record = record_of(report);
    if record.is_none() && plain.is_none() {
        return;
    }
    let learnt = Learnt {
        auto: ran_auto(report),
        rate: rate_measured(report),
    };
    if let Err(e) = remember_at(file, to, record, plain, learnt) {
        tracing::debug!(error = %e, "cannot record the path");
    }
}

/// Keep in `file` where the plain port of the receiver at `to` on this host was (`plain`),
/// after `report`'s session, if every document was delivered; never a rate.
pub fn remember_plain(file: &Path, to: &str, report: &SessionReport, plain: Option<SocketAddr>) {
    let Some(plain) = plain.filter(|_| report.docs_ok == report.docs) else {
        return;
    };
    if let Err(e) = remember_at(file, to, None, Some(plain), Learnt::default()) {
        tracing::debug!(error = %e, "cannot record the plain address");
    }
}

/// What the session behind a record learnt, besides what every session does.
#[derive(Debug, Clone, Copy, Default)]
struct Learnt {
    /// It ran `--compress auto`, whose level then replaces the one kept (a session with another
    /// policy learnt nothing of where `auto` should start).
    auto: bool,
    /// Its rate is a measurement ([`MIN_WIRE_BYTES`] crossed the wire); otherwise the rate kept
    /// stays, if one is.
    rate: bool,
}

/// Write `record` and `plain` for `to` into `path`, keeping of the record before what the
/// session behind `record` did not learn.
fn remember_at(
    path: &Path,
    to: &str,
    record: Option<PathRecord>,
    plain: Option<SocketAddr>,
    learnt: Learnt,
) -> anyhow::Result<()> {
    let mut paths = Paths::read(path);
    let mut changed = false;
    if let Some(mut record) = record {
        let before = paths.receivers.get(to);
        if record.compresses.is_none() {
            // A session that offered nothing learnt nothing of it: keep what was known.
            record.compresses = before.and_then(|r| r.compresses);
        }
        if !learnt.rate {
            if let Some(b) = before {
                record.rate_gbps = b.rate_gbps;
            }
        }
        if learnt.auto {
            record.auto_others = others_after(before, &record);
        } else {
            record.auto_level = before.and_then(|r| r.auto_level);
            record.auto_anchor_ratio = before.and_then(|r| r.auto_anchor_ratio);
            record.auto_others = before.map(|r| r.auto_others.clone()).unwrap_or_default();
        }
        paths.receivers.insert(to.to_string(), record);
        evict_oldest(&mut paths.receivers, |r| r.seen);
        changed = true;
    }
    if let Some(addr) = plain {
        if paths.plain.get(to).map(|p| p.addr) != Some(addr) {
            let seen = now();
            paths
                .plain
                .insert(to.to_string(), PlainRecord { addr, seen });
            evict_oldest(&mut paths.plain, |p| p.seen);
            changed = true;
        }
    }
    if changed {
        paths.write(path)?;
    }
    Ok(())
}

/// Keep at most [`MAX_RECORDS`] of `records`: the ones seen longest ago go.
fn evict_oldest<R>(records: &mut BTreeMap<String, R>, seen: impl Fn(&R) -> u64) {
    while records.len() > MAX_RECORDS {
        let oldest = records
            .iter()
            .min_by_key(|(_, r)| seen(r))
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => records.remove(&k),
            None => break,
        };
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The wire bytes of `report`'s session: its classified bytes, and its cleartext as
/// compressed.
fn wire_bytes(report: &SessionReport) -> u64 {
    let plain_wire = report.compression.as_ref().map_or(report.plain_bytes, |c| {
        report
            .plain_bytes
            .saturating_sub(c.plain_before)
            .saturating_add(c.plain_after)
    });
    report.secure_bytes.saturating_add(plain_wire)
}

/// Whether `report`'s rate measures its path: long enough, and enough bytes on the wire.
fn rate_measured(report: &SessionReport) -> bool {
    report.transfer_ms >= MIN_TRANSFER_MS && wire_bytes(report) >= MIN_WIRE_BYTES
}

/// What a session says of its path: the wire bytes (classified ones, and the cleartext as
/// compressed) over its transfer time, and where `auto` ended.
///
/// A session that ran `auto` over at least [`MIN_WIRE_BYTES`] of cleartext is kept even if
/// compression left less than that on the wire: its level is what the next session should
/// start at, and its rate stands in only until a measured one is known (see [`Learnt`]). Over
/// 10 Mbit/s, 4 MiB of the Rust documentation at P = 0.1 crosses as 0.58 MB; unkept, each session
/// to that receiver climbed from zstd 1 again (473-478 ms, 4 sends, against 419-469 at zstd 19).
fn record_of(report: &SessionReport) -> Option<PathRecord> {
    if report.docs_ok != report.docs || report.transfer_ms < MIN_TRANSFER_MS {
        return None;
    }
    let compressed_enough = ran_auto(report)
        && report
            .compression
            .as_ref()
            .is_some_and(|c| c.plain_before >= MIN_WIRE_BYTES);
    if !rate_measured(report) && !compressed_enough {
        return None;
    }
    let compresses = report.compression.as_ref().and_then(|c| {
        c.offered
            .contains("plain")
            .then(|| c.accepted.contains("plain"))
    });
    let wire = wire_bytes(report);
    let auto = report.compression.as_ref().filter(|_| ran_auto(report));
    Some(PathRecord {
        rate_gbps: wire as f64 / (report.transfer_ms * 1e6),
        compresses,
        seen: now(),
        auto_level: auto
            .and_then(|c| c.kept_level.as_deref())
            .and_then(level_of),
        auto_anchor_ratio: auto.and_then(|c| c.anchor_ratio),
        auto_others: Vec::new(),
        cipher: Some(report.cipher.clone()).filter(|c| !c.is_empty() && c != "none"),
    })
}

/// Whether `report`'s session ran `--compress auto` on cleartext the receiver accepted
/// compressed.
fn ran_auto(report: &SessionReport) -> bool {
    report
        .compression
        .as_ref()
        .is_some_and(|c| c.policy == Compression::Auto.to_string() && c.accepted.contains("plain"))
}

/// The zstd level of a report's level name (`zstd:19`), if it is one the wire carries.
fn level_of(name: &str) -> Option<i32> {
    let level = name.strip_prefix("zstd:")?.parse().ok()?;
    Codec::zstd(level).ok().map(Codec::level)
}

/// The share of `sample` (cleartext) that zstd level 1 leaves: what the plain channels'
/// compression is expected to put on the wire (1.0 when it does not shrink). Level 1 is what
/// `auto` starts at; on a slow path it climbs to levels that leave less, so this errs towards
/// the raw bytes.
pub fn cleartext_share(sample: &[u8]) -> f64 {
    let sample = &sample[..sample.len().min(SAMPLE_LEN)];
    if sample.is_empty() {
        return 1.0;
    }
    let Ok(codec) = Codec::zstd(1) else {
        return 1.0;
    };
    let mut out = Vec::new();
    match Encoder::new().and_then(|mut e| e.compress(sample, codec, &mut out)) {
        Ok(Encoded::Compressed { len, .. }) => len as f64 / sample.len() as f64,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sieve_core::report::CompressionReport;

    fn session(
        transfer_ms: f64,
        secure: u64,
        plain: u64,
        compressed: Option<u64>,
    ) -> SessionReport {
        SessionReport {
            docs: 1,
            docs_ok: 1,
            secure_bytes: secure,
            plain_bytes: plain,
            transfer_ms,
            compression: compressed.map(|after| CompressionReport {
                offered: "plain".into(),
                accepted: "plain".into(),
                plain_before: plain,
                plain_after: after,
                ..CompressionReport::default()
            }),
            ..SessionReport::default()
        }
    }

    /// The rate is what crossed the wire: classified bytes and the cleartext as compressed.
    #[test]
    fn a_session_records_its_wire_rate() {
        let r = record_of(&session(1000.0, 3_000_000, 27_000_000, Some(9_000_000))).unwrap();
        assert!((r.rate_gbps - 0.012).abs() < 1e-12, "{r:?}");
        assert_eq!(r.compresses, Some(true));
        let raw = record_of(&session(1000.0, 3_000_000, 27_000_000, None)).unwrap();
        assert!((raw.rate_gbps - 0.030).abs() < 1e-12, "{raw:?}");
        assert_eq!(raw.compresses, None);
        // The suite agreed on is kept for `auto` to price; a report without one keeps none.
        assert_eq!(raw.cipher, None);
        let chacha = SessionReport {
            cipher: "TLS13_CHACHA20_POLY1305_SHA256".into(),
            ..session(1000.0, 3_000_000, 27_000_000, None)
        };
        assert_eq!(
            record_of(&chacha).and_then(|r| r.cipher).as_deref(),
            Some("TLS13_CHACHA20_POLY1305_SHA256")
        );
    }

    /// Short sessions, small ones and failed ones say nothing of the path.
    #[test]
    fn short_small_or_failed_sessions_are_not_recorded() {
        assert!(record_of(&session(50.0, 3_000_000, 27_000_000, None)).is_none());
        assert!(record_of(&session(500.0, 1000, 1000, None)).is_none());
        let failed = SessionReport {
            docs_ok: 0,
            ..session(1000.0, 3_000_000, 27_000_000, None)
        };
        assert!(record_of(&failed).is_none());
    }

    /// Records are kept per receiver, replaced by the next session, and survive a torn or
    /// foreign file as "nothing known".
    #[test]
    fn records_round_trip_per_receiver() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sieve").join("paths.json");
        assert_eq!(recall(&path, "a:1"), None);
        let rec = |rate, seen| PathRecord {
            rate_gbps: rate,
            compresses: Some(true),
            seen,
            auto_level: None,
            auto_anchor_ratio: None,
            auto_others: Vec::new(),
            cipher: Some("TLS13_CHACHA20_POLY1305_SHA256".into()),
        };
        remember_at(
            &path,
            "a:1",
            Some(rec(0.0125, 1)),
            None,
            Learnt {
                auto: false,
                rate: true,
            },
        )
        .unwrap();
        remember_at(
            &path,
            "b:2",
            Some(rec(0.125, 2)),
            None,
            Learnt {
                auto: false,
                rate: true,
            },
        )
        .unwrap();
        assert_eq!(recall(&path, "a:1"), Some(rec(0.0125, 1)));
        remember_at(
            &path,
            "a:1",
            Some(rec(0.01, 3)),
            None,
            Learnt {
                auto: false,
                rate: true,
            },
        )
        .unwrap();
        assert_eq!(recall(&path, "a:1"), Some(rec(0.01, 3)));
        assert_eq!(recall(&path, "b:2"), Some(rec(0.125, 2)));
        // A session that did not offer compression keeps what was known of it.
        let unknown = PathRecord {
            compresses: None,
            ..rec(0.02, 4)
        };
        remember_at(
            &path,
            "b:2",
            Some(unknown),
            None,
            Learnt {
                auto: false,
                rate: true,
            },
        )
        .unwrap();
        assert_eq!(recall(&path, "b:2"), Some(rec(0.02, 4)));
        std::fs::write(&path, b"{ not json").unwrap();
        assert_eq!(recall(&path, "a:1"), None);
    }

    /// Only so many receivers are kept: the one seen longest ago goes.
    #[test]
    fn the_oldest_record_goes_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        for i in 0..=MAX_RECORDS as u64 {
            let r = PathRecord {
                rate_gbps: 0.01,
                compresses: None,
                seen: 1000 - i,
                auto_level: None,
                auto_anchor_ratio: None,
                auto_others: Vec::new(),
                cipher: None,
            };
            remember_at(
                &path,
                &format!("host{i}:1"),
                Some(r),
                None,
                Learnt {
                    auto: false,
                    rate: true,
                },
            )
            .unwrap();
        }
        let kept = Paths::read(&path).receivers;
        assert_eq!(kept.len(), MAX_RECORDS);
        assert!(!kept.contains_key(&format!("host{MAX_RECORDS}:1")));
        assert!(kept.contains_key("host0:1"));
    }

    /// A receiver's plain address is kept beside its rate, also from sessions too short to
    /// measure the path; the file is not rewritten when nothing changed.
    #[test]
    fn the_plain_address_is_remembered_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let a: SocketAddr = "10.0.0.2:7080".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:7081".parse().unwrap();
        let short = session(5.0, 1000, 1000, None);
        remember(&path, "r:7443", &short, Some(a));
        assert_eq!(recall_plain(&path, "r:7443"), Some(a));
        assert_eq!(recall(&path, "r:7443"), None, "too short for a rate");
        assert_eq!(recall_plain(&path, "other:7443"), None);
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        remember(&path, "r:7443", &short, Some(a));
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            written,
            "nothing changed: the file must not be rewritten"
        );
        remember(
            &path,
            "r:7443",
            &session(1000.0, 3_000_000, 27_000_000, None),
            Some(b),
        );
        assert_eq!(recall_plain(&path, "r:7443"), Some(b));
        assert!(recall(&path, "r:7443").is_some());
        // A failed session does not move it.
        let failed = SessionReport {
            docs_ok: 0,
            ..short.clone()
        };
        remember(&path, "r:7443", &failed, Some(a));
        assert_eq!(recall_plain(&path, "r:7443"), Some(b));
        // A file from before plain addresses were kept still reads.
        std::fs::write(&path, br#"{"receivers":{}}"#).unwrap();
        assert_eq!(recall_plain(&path, "r:7443"), None);
    }

    /// Links planted in the cache folder, at the temporary name an earlier version used and at
    /// the file's own name, are never written through (the file they point to keeps its
    /// content); the folder ends 0700 and the file, which names receivers and their ports, 0600.
    #[test]
    fn the_records_are_private_and_written_through_no_link() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let dir = base.path().join("sieve");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join("paths.json");
        let tmp = dir.join(format!(".paths.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let a: SocketAddr = "10.0.0.2:7080".parse().unwrap();
        let written = remember_at(&path, "r:7443", None, Some(a), Learnt::default());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        written.unwrap();
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!((mode(&dir), mode(&path)), (0o700, 0o600));
        assert_eq!(recall_plain(&path, "r:7443"), Some(a));
    }

    /// The level `auto` kept is kept from sessions that ran `auto`, forgotten when one kept
    /// none (raw was best), and left alone by sessions with another policy; a file from before
    /// it was kept still reads.
    #[test]
    fn the_level_auto_kept_is_kept_from_auto_sessions_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let with = |policy: &str, level: Option<&str>| {
            let mut r = session(1000.0, 3_000_000, 27_000_000, Some(9_000_000));
            if let Some(c) = r.compression.as_mut() {
                c.policy = policy.into();
                c.kept_level = level.map(String::from);
                c.anchor_ratio = Some(0.25);
            }
            r
        };
        let level = |path: &Path| recall(path, "r:7443").and_then(|r| r.auto_level);
        remember(&path, "r:7443", &with("auto", Some("zstd:19")), None);
        assert_eq!(level(&path), Some(19));
        let ratio = recall(&path, "r:7443").and_then(|r| r.auto_anchor_ratio);
        assert_eq!(ratio, Some(0.25));
        remember(&path, "r:7443", &with("zstd:3", Some("zstd:3")), None);
        assert_eq!(
            level(&path),
            Some(19),
            "a fixed level says nothing of auto's"
        );
        remember(
            &path,
            "r:7443",
            &session(1000.0, 3e6 as u64, 27e6 as u64, None),
            None,
        );
        assert_eq!(
            level(&path),
            Some(19),
            "nor does a session without compression"
        );
        remember(&path, "r:7443", &with("auto", Some("zstd:9")), None);
        assert_eq!(level(&path), Some(9));
        remember(&path, "r:7443", &with("auto", None), None);
        assert_eq!(level(&path), None, "auto ended raw: start as if new");
        remember(&path, "r:7443", &with("auto", Some("zstd:99")), None);
        assert_eq!(level(&path), None, "not a level the wire carries");
        // A receiver that refused compressed cleartext: auto never ran on it.
        let mut refused = with("auto", Some("zstd:6"));
        if let Some(c) = refused.compression.as_mut() {
            c.accepted = "none".into();
        }
        remember(&path, "r:7443", &with("auto", Some("zstd:6")), None);
        remember(&path, "r:7443", &refused, None);
        assert_eq!(level(&path), Some(6));
        std::fs::write(
            &path,
            br#"{"receivers":{"r:7443":{"rate_gbps":0.01,"compresses":true,"seen":1}}}"#,
        )
        .unwrap();
        assert_eq!(level(&path), None);
        assert!(recall(&path, "r:7443").is_some());
        // Nor did such a file keep the suite agreed on: nothing to price but what is offered.
        assert_eq!(recall(&path, "r:7443").and_then(|r| r.cipher), None);
    }

    /// A session of `auto` whose cleartext shrank below what measures a rate keeps its level,
    /// and the rate a measured session left; nothing else that small is kept. The Rust
    /// documentation over 10 Mbit/s: 0.42 MB classified, 3.77 MB of cleartext sent as 0.16 MB,
    /// in 470 ms.
    #[test]
    fn a_well_compressed_auto_session_keeps_its_level_but_not_its_rate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let docs = |policy: &str| {
            let mut r = session(470.0, 420_000, 3_774_884, Some(160_000));
            if let Some(c) = r.compression.as_mut() {
                c.policy = policy.into();
                c.kept_level = Some("zstd:9".into());
                c.anchor_ratio = Some(0.04);
            }
            r
        };
        assert!(!rate_measured(&docs("auto")));
        assert!(
            record_of(&docs("zstd:9")).is_none(),
            "a fixed level: nothing"
        );
        assert!(record_of(&session(470.0, 420_000, 500_000, None)).is_none());
        // No rate known yet: the session's own stands in.
        remember(&path, "r:7443", &docs("auto"), None);
        let r = recall(&path, "r:7443").unwrap();
        assert_eq!((r.auto_level, r.auto_anchor_ratio), (Some(9), Some(0.04)));
        assert!((r.rate_gbps - 580_000.0 / 470e6).abs() < 1e-12, "{r:?}");
        // A measured rate is not replaced by such a session.
        remember(
            &path,
            "r:7443",
            &session(1000.0, 3_000_000, 27_000_000, None),
            None,
        );
        remember(&path, "r:7443", &docs("auto"), None);
        let r = recall(&path, "r:7443").unwrap();
        assert!((r.rate_gbps - 0.030).abs() < 1e-12, "{r:?}");
        assert_eq!(r.auto_level, Some(9));
    }

    /// What a session of `auto` keeps is the level it says to keep (the best it measured),
    /// not the one in force at its end; none where sending raw was best.
    #[test]
    fn the_kept_level_is_remembered_not_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let ended = |kept: Option<&str>| {
            let mut r = session(1000.0, 1_600_000, 15_000_000, Some(4_800_000));
            if let Some(c) = r.compression.as_mut() {
                c.policy = "auto".into();
                c.final_level = Some("zstd:15".into());
                c.kept_level = kept.map(String::from);
                c.anchor_ratio = Some(0.58);
            }
            r
        };
        remember(&path, "r:7443", &ended(Some("zstd:6")), None);
        assert_eq!(recall(&path, "r:7443").unwrap().auto_level, Some(6));
        remember(&path, "r:7443", &ended(None), None);
        assert_eq!(recall(&path, "r:7443").unwrap().auto_level, None);
    }

    /// Sessions of `auto` on other data keep their levels beside the last one's: a sender
    /// that alternates logs (zstd 1 makes 0.3 of them) and the documentation (0.04) starts each
    /// where the last session with such data ended; data like none of them start as new.
    #[test]
    fn levels_are_kept_per_kind_of_data_and_chosen_by_a_sample() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let auto = |level: &str, anchor: f64| {
            let mut r = session(1000.0, 3_000_000, 27_000_000, Some(9_000_000));
            if let Some(c) = r.compression.as_mut() {
                c.policy = "auto".into();
                c.kept_level = Some(level.into());
                c.anchor_ratio = Some(anchor);
            }
            r
        };
        let get = |path: &Path| recall(path, "r:7443").unwrap();
        remember(&path, "r:7443", &auto("zstd:9", 0.3), None);
        remember(&path, "r:7443", &auto("zstd:19", 0.04), None);
        let r = get(&path);
        assert_eq!((r.auto_level, r.auto_anchor_ratio), (Some(19), Some(0.04)));
        assert_eq!(
            r.auto_others,
            vec![AutoStart {
                level: 9,
                anchor_ratio: 0.3
            }]
        );
        assert_eq!(r.auto_start(Some(0.28)), Some((9, Some(0.3))));
        assert_eq!(r.auto_start(Some(0.05)), Some((19, Some(0.04))));
        assert_eq!(
            r.auto_start(Some(0.6)),
            None,
            "random letters: start as new"
        );
        assert_eq!(r.auto_start(None), Some((19, Some(0.04))));
        // Logs again, ending at zstd 6: their old level goes, the documentation's stays.
        remember(&path, "r:7443", &auto("zstd:6", 0.32), None);
        let r = get(&path);
        assert_eq!(r.auto_level, Some(6));
        assert_eq!(
            r.auto_others,
            vec![AutoStart {
                level: 19,
                anchor_ratio: 0.04
            }]
        );
        // A fixed level leaves them all; at most MAX_OTHER_DATA are kept.
        remember(
            &path,
            "r:7443",
            &with_policy(auto("zstd:3", 0.9), "zstd:3"),
            None,
        );
        assert_eq!(get(&path).auto_others.len(), 1);
        let many = [
            0.6, 0.15, 0.01, 0.002, 0.0004, 0.00008, 0.00001, 0.000002, 4e-7,
        ];
        for (i, anchor) in many.iter().enumerate() {
            remember(
                &path,
                "r:7443",
                &auto(&format!("zstd:{}", i + 1), *anchor),
                None,
            );
        }
        let r = get(&path);
        assert_eq!(r.auto_others.len(), MAX_OTHER_DATA);
        assert_eq!(r.auto_others[0].anchor_ratio, 0.000002, "most recent first");
        // A file from before other data were kept still reads; without anchors the last
        // level is taken whatever the sample.
        let old = PathRecord {
            auto_level: Some(12),
            auto_anchor_ratio: None,
            auto_others: Vec::new(),
            ..r
        };
        assert_eq!(old.auto_start(Some(0.5)), Some((12, None)));
    }

    /// The laboratory's seven corpora sent in turn to one receiver: those zstd 1 tells apart
    /// by more than [`SAME_DATA_TOLERANCE`] keep a level each, and the next session of each
    /// starts at its own kind's level, or at the nearest kind's where two are the same to
    /// zstd 1 (crate sources and logs, prose and CSV).
    #[test]
    fn seven_kinds_sent_in_turn_each_find_their_own_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("paths.json");
        let auto = |level: i32, anchor: f64| {
            let mut r = session(1000.0, 3_000_000, 27_000_000, Some(9_000_000));
            if let Some(c) = r.compression.as_mut() {
                c.policy = "auto".into();
                c.kept_level = Some(format!("zstd:{level}"));
                c.anchor_ratio = Some(anchor);
            }
            r
        };
        // (first-frame anchor ratio, level its session kept), in the laboratory's order.
        let crates = (0.254, 15);
        let docs = (0.042, 1);
        let prose = (0.355, 9);
        let csv = (0.378, 6);
        let json = (0.223, 19);
        let logs = (0.269, 12);
        let letters = (0.58, 3);
        for (anchor, level) in [crates, docs, prose, csv, json, logs, letters] {
            remember(&path, "r:7443", &auto(level, anchor), None);
        }
        let r = recall(&path, "r:7443").unwrap();
        assert_eq!(r.auto_others.len(), 4, "{r:?}");
        let start = |(anchor, _): (f64, i32)| r.auto_start(Some(anchor)).map(|(l, _)| l);
        assert_eq!(start(json), Some(19), "the JSON records' own level");
        assert_eq!(start(docs), Some(1));
        assert_eq!(start(letters), Some(3));
        assert_eq!(start(logs), Some(12));
        assert_eq!(
            start(crates),
            Some(12),
            "the logs' level: the same to zstd 1"
        );
        assert_eq!(start(csv), Some(6));
        assert_eq!(start(prose), Some(6), "the CSV's level: the same to zstd 1");
    }

    fn with_policy(mut r: SessionReport, policy: &str) -> SessionReport {
        if let Some(c) = r.compression.as_mut() {
            c.policy = policy.into();
        }
        r
    }

    /// Prose shrinks; random bytes and nothing do not.
    #[test]
    fn the_share_is_a_samples_compressed_size() {
        let prose =
            b"the sieve compresses only what is public, never a classified byte. ".repeat(500);
        let share = cleartext_share(&prose);
        assert!(share < 0.2, "{share}");
        let mut x = 0x9e3779b97f4a7c15u64;
        let noise: Vec<u8> = (0..65536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(cleartext_share(&noise), 1.0);
        assert_eq!(cleartext_share(&[]), 1.0);
    }
}
