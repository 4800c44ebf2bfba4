//! `--mode auto`: which mode answers sooner, predicted from measured speeds.
//!
//! Both modes are safe (classified bytes never travel in the clear), so only speed is at stake.
//! The sieve spends less CPU per cleartext byte than TLS does (a MAC instead of a cipher and its
//! MAC) but pays things secure-only does not: the plain connections and their JOINs, and, for
//! inline marks, a scan of the whole document before its first byte is sent. Which side wins
//! depends on the document (size, proportion P of classified bytes), the machine (how fast it
//! seals records and tags cleartext: AES instructions change the answer) and the path (a link
//! slower than both modes makes them tie, unless the sieve compresses its cleartext, which it
//! alone may do safely: then it moves fewer bytes). The model:
//!
//! ```text
//! secure-only  T = session + n·doc +                         max(CPU(all bytes secure), wire)
//! sieve        T = session + n·(doc + sieve_doc) + plain + scan + runs
//!                  + max(CPU(P secure, 1-P plain), wire')
//! wire         = all bytes ÷ rate        wire' = (P + (1-P) · cleartext share) · bytes ÷ rate
//! CPU          = Σ bytes × (protection at both ends + overhead ÷ copy speed) ÷ cores
//! ```
//!
//! `runs` is what the sieve pays per segment of the layout (a tag, a gathered copy and a placement
//! per run of cleartext, and the scan's work per mark): nothing for the thesis's documents, whose
//! five parts per MB make a few runs, but the whole difference for dense ones, such as logs or
//! CSV exports with a classified value every hundred bytes.
//!
//! Protection is the suite's seal speed for secure bytes (the receiver opens at about the same
//! speed) and the MAC's speed for plain ones, both counted at both ends. The overhead is all the
//! rest a byte costs (system calls, the TCP stack, copies into and out of sockets and the page
//! cache), counted in memory copies, fitted from transfers on a real machine
//! ([`Overheads::MEASURED`] says how): on loopback it outweighs AES-GCM with AES instructions
//! several times, which is why the sieve gains less there than the ciphers' speeds suggest. The
//! inputs are measured, not assumed: the speeds by the transport's calibration at start, the path
//! rate from the connection, the overheads once per kind of machine. A path to another host that
//! no session has measured yet is weighed at its worst for each mode (`CostModel::unmeasured`).
//!
//! Pure: no clocks, no I/O. The transport measures and calls [`CostModel::decide`].

use crate::message::Mode;

/// The speeds of the machine that runs both ends' share of the work, in GB/s (bytes per
/// nanosecond). From the transport's calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speeds {
    /// The negotiated TLS suite sealing 16 KiB records.
    pub seal: f64,
    /// The negotiated cleartext MAC over 256 KiB units.
    pub mac: f64,
    /// The sender's marks scan, all its threads together; `f64::INFINITY` when nothing is
    /// scanned (ranges files, policies already run).
    pub scan: f64,
    /// A memory copy larger than the caches.
    pub copy: f64,
}

/// Where the two ends run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Host {
    /// Cores the transfer's busiest side can use.
    pub cores: f64,
    /// Sender and receiver share those cores (loopback, one machine): their CPU adds up.
    /// Otherwise each end has its own and the slower end sets the pace.
    pub shared: bool,
}

/// Costs besides protection, measured (see [`Overheads::MEASURED`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overheads {
    /// What each byte of a secure-only session costs besides sealing and opening, both ends
    /// together, in memory copies.
    pub secure_copies: f64,
    /// The same for a classified byte of a sieve session, which shares the cores with the plain
    /// channel's threads.
    pub sieve_secure_copies: f64,
    /// The same for a plain byte, besides its two MACs.
    pub plain_copies: f64,
    /// Milliseconds every session costs whatever its mode (TLS handshake, HELLO, SESSION).
    pub session_ms: f64,
    /// Milliseconds a sieve session costs on top: its plain connections and their JOINs.
    pub plain_ms: f64,
    /// Milliseconds each document costs in either mode (manifest, DOC_END, acknowledgement).
    pub doc_ms: f64,
    /// Milliseconds each document of a sieve session costs on top (its cleartext ledger, a
    /// DOC_END that waits for the plain channels).
    pub sieve_doc_ms: f64,
    /// Microseconds each segment of a sieve session's layouts costs, both ends together (its
    /// tag, its gathered copy, its placement at the receiver).
    pub segment_us: f64,
    /// Microseconds each segment adds to the marks scan of a document that has marks.
    pub scan_segment_us: f64,
}

impl Overheads {
    /// Measured on an AMD EPYC (2 cores, AES-NI, VAES, VPCLMULQDQ, AVX-512, shared with other
    /// tenants), `sieve send --json` against `sieve serve --discard` on loopback, both modes
    /// alternating:
    /// - the per-byte overheads and `session_ms`, `plain_ms` by `bench/cost-fit.sh 7` (1 MB,
    ///   10 MB, 64 MiB and 256 MiB at P = 0.1 and 0.9; a least-squares fit of `total_ms` with the
    ///   speeds `sieve calibrate` measured in the same run subtracted; the plain channels copying
    ///   into their sockets, as they do on one host): 17.5, 21.7 and 12.3 copies, 1.5 ms a
    ///   session, 0.34 ms for the plain connection and its JOIN, the model within 15 % of every
    ///   median but secure-only's at 10 MB (4.7 ms against 6.1). Fitted again on build
    ///   c52a8a6, three runs, with the sieve's preparation as measured taken out (the script
    ///   now does so: auto chooses after the scan, so the constants must price what follows
    ///   it): 18.1-19.1, 20.3-21.9 and 12.3-13.9 copies at copy speeds of 30.6-32.6 GB/s,
    ///   1.63-1.95 ms, 0.14-0.31 ms, every point within about 10 % but secure-only's at 10 MB
    ///   P = 0.9. These constants lie within that spread and stay. Pricing the scan at the
    ///   calibration's in-cache speed instead, as the script did before, left most of its page
    ///   faults to the per-byte constants (16.9 copies a plain byte): with those, the
    ///   laboratory's AUTO run chose secure-only at 10 MB, P = 0.1 and 100 MB, P = 0.5 on
    ///   loopback after the scan had been paid, and missed 6 points against 2;
    /// - `doc_ms`, `sieve_doc_ms`: 20 documents of 10 KB in one session against one, 11 rounds:
    ///   0.053 ms more per document secure-only, 0.12 sieve.
    ///
    /// - `segment_us`, `scan_segment_us`: 8 MiB at P = 0.1 with 40 classified parts (an x-P
    ///   file) against 8 MiB of generated logs at P = 0.1 with 70,360 (140,721 segments), 7
    ///   alternating rounds, `--compress off`: the sieve answered in 51.1 ms against 8.7 (secure-only
    ///   11.1 and 10.4), 21 ms more of it in the scan: 0.18 µs a segment to move, 0.15 to scan.
    ///   Measured again the same way on the Intel Xeon model 207 (no EPYC was at hand) once the
    ///   marks pass, the gathering of short runs and the length decoder had become cheaper per
    ///   segment (build 9779216, 15 alternating rounds, 8 MiB of log with 140,720 segments and of
    ///   CSV with 139,468 against the x-P file): the sieve answered in 35.5 and 34.0 ms against
    ///   6.1, its preparation 11.9 and 11.8 ms against 1.3: 0.13 µs a segment to move (0.134 log,
    ///   0.125 CSV), 0.075 to scan (both). At 32 MiB of CSV (557,318 segments) under the
    ///   AES-only mask these still overpriced the sieve: 152 ms predicted once its marks were
    ///   counted, against 111 measured (secure-only 123 predicted, 130 measured). Fitted a
    ///   third time on build bd842bd (the MAC's units without a walk, the placement without
    ///   decoding its own code), at two sizes, with and without that mask: generated CSV of
    ///   8 and 32 MiB at P = 0.1 against x-P letters of the same size, 15 alternating rounds,
    ///   `--compress off`, Intel Xeon model 207. The sieve's time less the letters', per
    ///   segment, was 0.146 and 0.151 µs unmasked, 0.144 and 0.144 masked, of which its
    ///   preparation 0.052-0.058: 0.09 µs a segment to move, 0.055 to scan. (On build 2175754
    ///   the same measurement gave 0.17-0.19 µs in all, 0.07 of it preparation: segments cost
    ///   the same with the mask as without, so they are not hidden behind the slow sealing.)
    ///
    /// The copy speeds above were timed without untimed passes first (calibration versions 1
    /// and 2). On the Intel Xeon model 207 the first passes over fresh buffers ran at half the
    /// steady speed, so there the copy measured 6.0-6.4 GB/s cold against 10.7-11.4 warm, as it
    /// is timed since version 3; with the warm figure the laboratory's AUTO run met more points
    /// (13 of 45 against 8) and predicted times closer to the measured ones. Whether the EPYC's
    /// 30.6-32.6 were cold figures too was not measured again.
    ///
    /// A receiver that writes (fsync, rename) adds a per-document cost equal in both modes,
    /// which changes no decision.
    pub const MEASURED: Overheads = Overheads {
        secure_copies: 17.5,
        sieve_secure_copies: 21.7,
        plain_copies: 12.3,
        session_ms: 1.5,
        plain_ms: 0.34,
        doc_ms: 0.05,
        sieve_doc_ms: 0.07,
        segment_us: 0.09,
        scan_segment_us: 0.055,
    };
}

/// One document as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DocShape {
    /// Bytes sent (the document's length).
    pub bytes: u64,
    /// Bytes the sieve would send over TLS (P × bytes).
    pub classified: u64,
    /// Whether the sieve must scan the document for inline marks before sending it.
    pub scanned: bool,
    /// Segments of its layout (classified and cleartext runs alternate; an x-P file of the
    /// thesis has ten per MB, a log with a classified value per line thousands).
    pub segments: u64,
    /// Of its cleartext, the share the sieve puts on the wire: 1.0 sent raw, less where the
    /// plain channels compress it (a sample's ratio). Only a path slower than the CPU sees it.
    pub cleartext_wire: f64,
}

/// What both modes are predicted to take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Predicted {
    /// Milliseconds for the sieve.
    pub sieve: f64,
    /// Milliseconds for secure-only.
    pub secure_only: f64,
}

/// The choice, its prediction, and why, in one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Sieve or secure-only.
    pub mode: Mode,
    /// Both predicted times, so a report can show how close the call was.
    pub predicted_ms: Predicted,
    /// One line for the report, e.g. "CPU-bound: the cleartext's MAC saves 310 ms of sealing".
    pub reason: String,
}

/// How much faster the sieve must be predicted to be before it is chosen: within this, the two
/// are a tie, and secure-only (fewer connections, nothing on the plain path) is taken. Over a
/// path to another host whose rate is not known yet, [`CostModel::unmeasured`] decides instead.
pub(crate) const SIEVE_MARGIN: f64 = 0.02;

/// The slowest path the model allows for before a receiver elsewhere has been measured:
/// 100 Mbit/s (0.0125 GB/s), the laboratory's WAN link. Slower links only widen what the
/// compressed cleartext saves, so this is the cautious end.
pub const SLOWEST_UNMEASURED_GBPS: f64 = 0.0125;

/// Whether the sieve is chosen, predicted `p`, over a known path or on this host.
fn sieve_wins(p: Predicted) -> bool {
    p.sieve < p.secure_only * (1.0 - SIEVE_MARGIN)
}

/// What each mode can cost at worst against the other, over the rates a path not measured yet
/// may have ([`CostModel::unmeasured`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Regret {
    /// Milliseconds the sieve can lose: on a fast path, its extra CPU and connections.
    sieve: f64,
    /// Milliseconds secure-only can lose: on a slow path, the bytes compression would have saved.
    secure_only: f64,
    /// The rate (GB/s) at which secure-only loses them.
    at_gbps: f64,
}

/// The model: a machine's speeds, where the ends run, and the fitted overheads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Seal, MAC, scan and copy speeds, from the transport's calibration at start.
    pub speeds: Speeds,
    /// How many cores, and whether sender and receiver share them.
    pub host: Host,
    /// Per-byte and per-session costs besides protection, fitted once per kind of machine.
    pub overheads: Overheads,
}

/// Milliseconds to process `bytes` at `gbps` GB/s (zero bytes take none, whatever the speed).
fn ms(bytes: f64, gbps: f64) -> f64 {
    if bytes <= 0.0 {
        0.0
    } else if gbps.is_finite() && gbps > 0.0 {
        bytes / gbps / 1e6
    } else if gbps == f64::INFINITY {
        0.0
    } else {
        f64::INFINITY
    }
}

impl CostModel {
    /// CPU milliseconds (both ends together) of `secure` and `plain` bytes, in a sieve session
    /// when `sieve`.
    fn cpu_ms(&self, secure: f64, plain: f64, sieve: bool) -> f64 {
        let (s, o) = (&self.speeds, &self.overheads);
        let secure_copies = if sieve {
            o.sieve_secure_copies
        } else {
            o.secure_copies
        };
        2.0 * ms(secure, s.seal)
            + 2.0 * ms(plain, s.mac)
            + ms(secure * secure_copies + plain * o.plain_copies, s.copy)
    }

    /// Milliseconds the bytes take once the CPU work is shared out: both ends on `cores` when
    /// they share the host, else half the work (one end's) on each end's cores. Secure-only
    /// when `plain` is zero.
    fn transfer_ms(&self, secure: f64, plain: f64) -> f64 {
        let cpu = self.cpu_ms(secure, plain, plain > 0.0);
        let cores = self.host.cores.max(1.0);
        if self.host.shared {
            cpu / cores
        } else {
            cpu / 2.0 / cores
        }
    }

    /// The prediction for `docs` sent in one session over a path of `rate` GB/s (`None`: not
    /// known, taken as faster than either mode).
    pub fn predict(&self, docs: &[DocShape], rate: Option<f64>) -> Predicted {
        let o = &self.overheads;
        let n = docs.len() as f64;
        let bytes: f64 = docs.iter().map(|d| d.bytes as f64).sum();
        let secure: f64 = docs.iter().map(|d| d.classified.min(d.bytes) as f64).sum();
        let scanned: f64 = docs
            .iter()
            .filter(|d| d.scanned)
            .map(|d| d.bytes as f64)
            .sum();
        let runs_us: f64 = docs
            .iter()
            .map(|d| {
                let per = o.segment_us + if d.scanned { o.scan_segment_us } else { 0.0 };
                d.segments as f64 * per
            })
            .sum();
        let wire = rate.map_or(0.0, |r| ms(bytes, r));
        let wire_sieve = rate.map_or(0.0, |r| ms(sieve_wire_bytes(docs), r));
        let fixed = o.session_ms + n * o.doc_ms;
        Predicted {
            secure_only: fixed + self.transfer_ms(bytes, 0.0).max(wire),
            sieve: fixed
                + n * o.sieve_doc_ms
                + o.plain_ms
                + ms(scanned, self.speeds.scan)
                + runs_us / 1000.0
                + self.transfer_ms(secure, bytes - secure).max(wire_sieve),
        }
    }

    /// The choice over a path to another host not measured yet: the mode whose worst loss
    /// against the other, over the rates the path may have (from [`SLOWEST_UNMEASURED_GBPS`]
    /// up), is smaller. Pricing such a path as free lets the CPU alone decide; but what it
    /// leaves out is one-sided: on a slow link the sieve compresses its cleartext and wins by
    /// its compression ratio, on a fast one it loses at most its extra CPU. In the laboratory's
    /// AUTO run of 001d63f a first session over 100 Mbit/s, priced as free, was predicted at
    /// 3.42 ms in the sieve against 3.46 and went secure-only in 859.5 ms, where the sieve takes
    /// about 473; 32 MiB of prose with 226,838 segments (predicted 87.9 against 7.2 ms) went
    /// secure-only in 2826 ms, where the sieve takes about 1137.
    ///
    /// Both predictions are piecewise linear in the link's time, so their difference is
    /// largest at the slowest rate, at a rate where one mode's CPU meets its wire, or on a
    /// path faster than both. The session measures the path either way; the next choices rest
    /// on its rate.
    fn unmeasured(&self, docs: &[DocShape]) -> Regret {
        let bytes: f64 = docs.iter().map(|d| d.bytes as f64).sum();
        let secure: f64 = docs.iter().map(|d| d.classified.min(d.bytes) as f64).sum();
        let mut rates = vec![None, Some(SLOWEST_UNMEASURED_GBPS)];
        for (wire_bytes, cpu) in [
            (bytes, self.transfer_ms(bytes, 0.0)),
            (
                sieve_wire_bytes(docs),
                self.transfer_ms(secure, bytes - secure),
            ),
        ] {
            let rate = wire_bytes / (cpu * 1e6);
            if rate.is_finite() && rate > SLOWEST_UNMEASURED_GBPS {
                rates.push(Some(rate));
            }
        }
        let mut r = Regret {
            sieve: 0.0,
            secure_only: 0.0,
            at_gbps: SLOWEST_UNMEASURED_GBPS,
        };
        for rate in rates {
            let p = self.predict(docs, rate);
            r.sieve = r.sieve.max(p.sieve - p.secure_only);
            if p.secure_only - p.sieve > r.secure_only {
                r.secure_only = p.secure_only - p.sieve;
                r.at_gbps = rate.unwrap_or(f64::INFINITY);
            }
        }
        r
    }

    /// The mode for one document over a path of `rate` GB/s, if known.
    pub fn decide(&self, doc: DocShape, rate: Option<f64>) -> Decision {
        self.decide_batch(&[doc], rate)
    }

    /// The mode for a session carrying `docs` (one mode for all: a sieve session pays for its
    /// plain connections once, whatever the number of documents).
    pub fn decide_batch(&self, docs: &[DocShape], rate: Option<f64>) -> Decision {
        let p = self.predict(docs, rate);
        let bytes: f64 = docs.iter().map(|d| d.bytes as f64).sum();
        let secure: f64 = docs.iter().map(|d| d.classified.min(d.bytes) as f64).sum();
        let cpu_so = self.transfer_ms(bytes, 0.0);
        let cpu_sv = self.transfer_ms(secure, bytes - secure);
        let wire = rate.map_or(0.0, |r| ms(bytes, r));
        let wire_sv = rate.map_or(0.0, |r| ms(sieve_wire_bytes(docs), r));
        let unmeasured = (rate.is_none() && !self.host.shared).then(|| self.unmeasured(docs));
        let sieve = match unmeasured {
            Some(r) => r.sieve < r.secure_only,
            None => sieve_wins(p),
        };
        let reason = if let Some(r) = unmeasured.filter(|_| sieve != sieve_wins(p)) {
            let at = if r.at_gbps.is_finite() {
                format!(
                    "a {:.0} Mbit/s path, where the compressed cleartext pays",
                    r.at_gbps * 8000.0
                )
            } else {
                "a fast path, where the cheaper CPU pays".to_string()
            };
            format!(
                "path not measured yet: over the rates it may have, the sieve loses at most \
                 {:.1} ms against secure-only, secure-only at most {:.1} ms against the sieve \
                 ({at})",
                r.sieve, r.secure_only
            )
        } else if wire >= cpu_so && wire_sv >= cpu_sv && wire_sv < wire {
            format!(
                "link-bound: the path takes {wire:.0} ms for every byte over TLS, {wire_sv:.0} ms \
                 for the classified bytes and the compressed cleartext"
            )
        } else if wire >= cpu_so && wire >= cpu_sv {
            format!(
                "link-bound: the path takes {wire:.0} ms either way, so the sieve's extra \
                 connections and scan decide"
            )
        } else if sieve {
            format!(
                "CPU-bound: the cleartext's MAC saves {:.0} ms of sealing, more than the \
                 {:.0} ms the plain connections, the marks scan and the segments cost",
                cpu_so.max(wire) - cpu_sv.max(wire),
                p.sieve - cpu_sv.max(wire) - (p.secure_only - cpu_so.max(wire)),
            )
        } else if p.sieve < p.secure_only {
            format!(
                "a tie: the sieve is predicted {:.1} ms faster ({:.1} %), within the {:.0} % it \
                 must win by before its second connection is worth opening",
                p.secure_only - p.sieve,
                100.0 * (1.0 - p.sieve / p.secure_only),
                100.0 * SIEVE_MARGIN,
            )
        } else if cpu_sv < cpu_so {
            format!(
                "fixed costs: the MAC would save {:.1} ms of sealing, not enough for the \
                 {:.1} ms the plain connections, the marks scan and the segments cost",
                cpu_so.max(wire) - cpu_sv.max(wire),
                p.sieve - cpu_sv.max(wire) - (p.secure_only - cpu_so.max(wire)),
            )
        } else {
            format!(
                "the sieve would spend {:.1} ms more: its classified bytes share the cores with \
                 the plain channels, and its cleartext saves too little sealing to make up for it",
                cpu_sv - cpu_so
            )
        };
        Decision {
            mode: if sieve { Mode::Sieve } else { Mode::SecureOnly },
            predicted_ms: p,
            reason,
        }
    }
}

/// Bytes the sieve puts on the wire for `docs`: the classified ones, and the cleartext at its
/// share ([`DocShape::cleartext_wire`]).
fn sieve_wire_bytes(docs: &[DocShape]) -> f64 {
    docs.iter()
        .map(|d| {
            let secure = d.classified.min(d.bytes) as f64;
            let share = if d.cleartext_wire.is_finite() {
                d.cleartext_wire.clamp(0.0, 1.0)
            } else {
                1.0
            };
            secure + (d.bytes as f64 - secure) * share
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;
    const GIB: u64 = 1 << 30;

    fn doc(bytes: u64, p: f64) -> DocShape {
        DocShape {
            bytes,
            classified: (bytes as f64 * p) as u64,
            scanned: true,
            // An x-P file: five classified parts per MB, each between two cleartext runs.
            segments: 1 + 10 * bytes.div_ceil(MB),
            cleartext_wire: 1.0,
        }
    }

    /// This project's machine as `sieve calibrate` measures it: AES-128-GCM ~4-5 GB/s (16 KiB
    /// records), GMAC ~20, a two-thread scan ~12, copies ~8; both ends on its two cores.
    fn aes_machine() -> CostModel {
        CostModel {
            speeds: Speeds {
                seal: 4.5,
                mac: 20.0,
                scan: 12.0,
                copy: 8.0,
            },
            host: Host {
                cores: 2.0,
                shared: true,
            },
            overheads: Overheads::MEASURED,
        }
    }

    /// The same machine with AES-NI and carry-less multiply masked (`OPENSSL_ia32cap=
    /// ~0x200000200000000`): AES-128-GCM ~0.35 GB/s, the MAC keyed BLAKE3 ~4.
    fn no_aes_machine() -> CostModel {
        let mut m = aes_machine();
        m.speeds.seal = 0.35;
        m.speeds.mac = 4.0;
        m
    }

    fn elsewhere(m: CostModel) -> CostModel {
        CostModel {
            host: Host {
                shared: false,
                ..m.host
            },
            ..m
        }
    }

    /// Over a path to another host not measured yet, the mode whose worst loss is smaller.
    /// 32 MiB of prose with a classified value every 150 bytes costs the sieve 29 ms more CPU
    /// than secure-only, but compressed to a third its cleartext saves seconds on a 100 Mbit/s
    /// path: the sieve. Raw, it can save nothing on any path: secure-only, as the CPU says.
    #[test]
    fn an_unmeasured_path_elsewhere_weighs_the_worst_loss_of_each_mode() {
        let m = elsewhere(aes_machine());
        let raw = DocShape {
            segments: 226_838,
            ..doc(32 * MB, 0.1)
        };
        let prose = DocShape {
            cleartext_wire: 0.3,
            ..raw
        };
        let free = m.predict(&[prose], None);
        assert!(free.sieve > free.secure_only + 25.0, "{free:?}");
        let d = m.decide(prose, None);
        assert_eq!(d.mode, Mode::Sieve, "{d:?}");
        assert!(
            d.reason.starts_with("path not measured yet"),
            "{}",
            d.reason
        );
        let r = m.unmeasured(&[prose]);
        assert!(
            (r.sieve - (free.sieve - free.secure_only)).abs() < 1e-9,
            "{r:?}"
        );
        let slow = m.predict(&[prose], Some(SLOWEST_UNMEASURED_GBPS));
        assert!((r.secure_only - (slow.secure_only - slow.sieve)).abs() < 1e-9);
        assert!(r.secure_only > 1000.0, "{r:?}");
        assert_eq!(r.at_gbps, SLOWEST_UNMEASURED_GBPS);

        assert_eq!(m.decide(raw, None).mode, Mode::SecureOnly);
        // On this host the link is free whatever the cleartext's ratio: the CPU decides.
        assert_eq!(aes_machine().decide(prose, None).mode, Mode::SecureOnly);
        // Once the path is measured and fast, it decides.
        assert_eq!(m.decide(prose, Some(10.0)).mode, Mode::SecureOnly);
    }

    /// Raw cleartext on a path not measured yet: where the links bind, the modes tie but for
    /// the sieve's fixed costs, so its worst loss is those; secure-only's is what the sieve's CPU
    /// saves on a fast path. A 1 % lead on CPU (the 3.42 against 3.46 ms of the AUTO run of
    /// 001d63f) does not outweigh the plain connection; a wide one does.
    #[test]
    fn raw_cleartext_on_an_unmeasured_path_goes_where_the_worst_loss_is_smaller() {
        let m = elsewhere(no_aes_machine());
        let big = doc(GIB, 0.1);
        let d = m.decide(big, None);
        assert_eq!(d.mode, Mode::Sieve, "{d:?}");
        let r = m.unmeasured(&[big]);
        assert!(r.secure_only > 10.0 * r.sieve, "{r:?}");
        assert!(r.at_gbps.is_infinite(), "{r:?}");
        // With AES instructions the CPU lead of the sieve grows with the size; until it
        // outweighs the sieve's fixed costs, which a slow path would leave it with, secure-only.
        let m = elsewhere(aes_machine());
        let (mut near, mut wide) = (0, 0);
        for mb in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] {
            let shape = DocShape {
                scanned: false,
                ..doc(mb * MB, 0.1)
            };
            let free = m.predict(&[shape], None);
            let slow = m.predict(&[shape], Some(SLOWEST_UNMEASURED_GBPS));
            let (lead, fixed) = (free.secure_only - free.sieve, slow.sieve - slow.secure_only);
            let d = m.decide(shape, None);
            assert_eq!(d.mode == Mode::Sieve, lead > fixed, "{mb} MB: {d:?}");
            near += usize::from(lead > 0.0 && lead < fixed);
            wide += usize::from(lead > fixed);
        }
        assert!(near > 0 && wide > 0, "{near} {wide}");
    }

    /// Over a known path or on this host, the sieve must be predicted 2 % faster.
    #[test]
    fn a_tie_goes_to_secure_only() {
        let tie = Predicted {
            sieve: 3.42,
            secure_only: 3.46,
        };
        assert!(!sieve_wins(tie));
        assert!(sieve_wins(Predicted {
            sieve: 3.0,
            secure_only: 3.46,
        }));
    }

    /// 8 MiB of logs at P = 0.1 with a classified value every 120 bytes: the same bytes as an
    /// x-P file that the sieve wins with, but 140,000 segments that it pays for one by one.
    #[test]
    fn a_dense_document_goes_secure_only_where_a_sparse_one_of_its_size_is_sieved() {
        let sparse = doc(8 << 20, 0.1);
        let dense = DocShape {
            segments: 140_721,
            ..sparse
        };
        let m = aes_machine();
        let d = m.decide(dense, None);
        assert_eq!(d.mode, Mode::SecureOnly, "{d:?}");
        assert!(d.reason.contains("segments"), "{}", d.reason);
        let s = m.decide(sparse, None);
        // 140,721 segments at 0.145 µs: 20 ms.
        assert!(
            s.predicted_ms.sieve + 18.0 < d.predicted_ms.sieve,
            "{s:?} {d:?}"
        );
        // Given by a ranges file, the scan's share goes; the segments still cost.
        let ranged = m.predict(
            &[DocShape {
                scanned: false,
                ..dense
            }],
            None,
        );
        assert!(ranged.sieve < d.predicted_ms.sieve);
        // 140,721 segments at 0.09 µs: 13 ms.
        assert!(ranged.sieve > s.predicted_ms.sieve + 11.0, "{ranged:?}");
    }

    /// Without AES instructions, sealing a byte costs so much more that a dense document's
    /// segments can be worth paying for: 32 MiB of generated CSV at P = 0.1 (557,318
    /// segments), which the sieve (build bd842bd) sent in 110 ms against secure-only's 130 under
    /// the AES-only mask (Intel Xeon model 207, 15 alternating rounds), is sieved, with the
    /// speeds `sieve calibrate` measured under that mask (AES-128-GCM 0.38 GB/s; GMAC 26.9, as
    /// aws-lc's AVX-512 GHASH is left unmasked; a two-thread scan 40; copies 8.9). Its runs
    /// collected or only counted: counted, the second pass the sieve would then make is charged
    /// (0.055 µs a segment), and it still wins. With the constants fitted before bd842bd (0.13
    /// and 0.075 µs) the counted document went secure-only.
    #[test]
    fn a_dense_document_without_aes_is_sieved() {
        let csv = DocShape {
            segments: 557_318,
            scanned: false,
            ..doc(35_783_704, 0.1)
        };
        let mut m = aes_machine();
        m.speeds = Speeds {
            seal: 0.38,
            mac: 26.9,
            scan: 40.0,
            copy: 8.9,
        };
        let collected = m.decide(csv, None);
        assert_eq!(collected.mode, Mode::Sieve, "{collected:?}");
        let counted = m.decide(
            DocShape {
                scanned: true,
                ..csv
            },
            None,
        );
        // The second pass: the bytes at the scan's speed and 0.055 µs a segment.
        let second =
            35_783_704.0 / 40.0 / 1e6 + 557_318.0 * Overheads::MEASURED.scan_segment_us / 1e3;
        let extra = counted.predicted_ms.sieve - collected.predicted_ms.sieve;
        assert!((extra - second).abs() < 1e-6, "{extra} against {second}");
        assert_eq!(counted.mode, Mode::Sieve, "{counted:?}");
        // With AES instructions, secure-only by far.
        let aes = aes_machine().decide(csv, None);
        assert_eq!(aes.mode, Mode::SecureOnly, "{aes:?}");
        assert!(
            aes.predicted_ms.sieve > 1.5 * aes.predicted_ms.secure_only,
            "{aes:?}"
        );
    }

    #[test]
    fn a_large_mostly_clear_document_without_aes_goes_through_the_sieve() {
        let d = no_aes_machine().decide(doc(GIB, 0.1), None);
        assert_eq!(d.mode, Mode::Sieve, "{d:?}");
        assert!(
            d.predicted_ms.sieve * 2.0 < d.predicted_ms.secure_only,
            "{d:?}"
        );
        assert!(d.reason.starts_with("CPU-bound"), "{}", d.reason);
    }

    #[test]
    fn a_small_mostly_classified_document_with_aes_goes_secure_only() {
        let d = aes_machine().decide(doc(MB, 0.9), None);
        assert_eq!(d.mode, Mode::SecureOnly, "{d:?}");
        assert!(d.predicted_ms.sieve > d.predicted_ms.secure_only, "{d:?}");
        assert!(
            d.reason.starts_with("the sieve would spend") || d.reason.starts_with("fixed costs"),
            "{}",
            d.reason
        );
        // At P = 0.1 the same small document is a matter of fixed costs.
        let d = aes_machine().decide(doc(MB, 0.1), None);
        assert!(
            d.reason.starts_with("fixed costs") || d.mode == Mode::Sieve,
            "{d:?}"
        );
    }

    /// The reason never contradicts its numbers: "fixed costs" only where the sieve is predicted
    /// slower, "a tie" where it is predicted faster but by less than [`SIEVE_MARGIN`]. (A 10 MB
    /// document at P = 0.5 once read "would save 0.5 ms of sealing, not enough for the 0.4 ms"
    /// the sieve adds.)
    #[test]
    fn the_reason_agrees_with_the_predictions() {
        let mut ties = 0;
        for machine in [aes_machine(), no_aes_machine()] {
            for bytes in (0..40).map(|i| (MB as f64 * 1.25f64.powi(i)) as u64) {
                for p in [0.05, 0.1, 0.25, 0.5, 0.75, 0.9] {
                    let d = machine.decide(doc(bytes, p), None);
                    let (sv, so) = (d.predicted_ms.sieve, d.predicted_ms.secure_only);
                    if d.reason.starts_with("fixed costs") {
                        assert!(sv >= so, "{d:?}");
                    }
                    if d.reason.starts_with("a tie") {
                        assert!(sv < so && sv >= so * (1.0 - SIEVE_MARGIN), "{d:?}");
                        assert_eq!(d.mode, Mode::SecureOnly, "{d:?}");
                        ties += 1;
                    }
                    if d.mode == Mode::SecureOnly && sv < so {
                        assert!(d.reason.starts_with("a tie"), "{d:?}");
                    }
                }
            }
        }
        // The sweep crosses from one mode to the other, through the margin.
        assert!(ties > 0);
    }

    /// At 100 Mbit/s (0.0125 GB/s) the AES machine's CPU outruns the link in either mode: a tie
    /// on the wire, which the sieve's extra connection loses. A device that seals slower than
    /// the link (every CPU feature masked: AES-GCM ~0.008 GB/s here) is CPU-bound in
    /// secure-only, and there the cheaper CPU of the sieve wins even on that link.
    #[test]
    fn a_slow_link_lets_the_cheaper_cpu_win_only_where_cpu_binds() {
        let link = Some(0.0125);
        let aes = aes_machine().decide(doc(GIB, 0.1), link);
        assert_eq!(aes.mode, Mode::SecureOnly, "{aes:?}");
        assert!(aes.reason.starts_with("link-bound"), "{}", aes.reason);
        // A tie on the wire: the sieve is slower by exactly what it adds before sending.
        let gap = aes.predicted_ms.sieve - aes.predicted_ms.secure_only;
        let o = Overheads::MEASURED;
        let segments = doc(GIB, 0.1).segments as f64;
        let extra = o.plain_ms
            + o.sieve_doc_ms
            + GIB as f64 / 12.0 / 1e6
            + segments * (o.segment_us + o.scan_segment_us) / 1e3;
        assert!((gap - extra).abs() < 1e-6, "{gap} against {extra}: {aes:?}");
        // Without a link limit the same machine and document choose by CPU.
        assert_eq!(aes_machine().decide(doc(GIB, 0.1), None).mode, Mode::Sieve);

        let mut slow = no_aes_machine();
        slow.speeds.seal = 0.008;
        let d = slow.decide(doc(GIB, 0.1), link);
        assert_eq!(d.mode, Mode::Sieve, "{d:?}");
        assert!(d.reason.starts_with("CPU-bound"), "{}", d.reason);
    }

    /// On a 100 Mbit/s path both modes are link-bound on the AES machine; raw, they tie and
    /// the sieve's extra costs choose secure-only. With the cleartext compressed to a third
    /// the sieve moves 0.4 of the bytes and wins, and says why.
    #[test]
    fn compressed_cleartext_wins_on_a_slow_path() {
        let link = Some(0.0125);
        let m = aes_machine();
        let raw = doc(32 * MB, 0.1);
        assert_eq!(m.decide(raw, link).mode, Mode::SecureOnly);
        let compressed = DocShape {
            cleartext_wire: 1.0 / 3.0,
            ..raw
        };
        let d = m.decide(compressed, link);
        assert_eq!(d.mode, Mode::Sieve, "{d:?}");
        assert!(d.reason.contains("compressed cleartext"), "{}", d.reason);
        let ratio = d.predicted_ms.sieve / d.predicted_ms.secure_only;
        assert!((0.35..0.45).contains(&ratio), "{ratio}");
        // Without a path rate the share does not count: the CPU decides, as before.
        assert_eq!(m.decide(compressed, None).mode, m.decide(raw, None).mode);
        // A share outside 0..1 is clamped, not trusted.
        let odd = DocShape {
            cleartext_wire: f64::NAN,
            ..raw
        };
        assert_eq!(m.decide(odd, link).mode, Mode::SecureOnly);
    }

    #[test]
    fn scanning_and_separate_hosts_are_counted() {
        let m = aes_machine();
        let marked = m.predict(&[doc(256 * MB, 0.1)], None);
        let ranged = m.predict(
            &[DocShape {
                scanned: false,
                ..doc(256 * MB, 0.1)
            }],
            None,
        );
        let segments = doc(256 * MB, 0.1).segments as f64;
        let scan =
            256.0 * MB as f64 / 12.0 / 1e6 + segments * Overheads::MEASURED.scan_segment_us / 1e3;
        assert!((marked.sieve - ranged.sieve - scan).abs() < 1e-6);
        assert_eq!(marked.secure_only, ranged.secure_only);
        // Ends on hosts of their own: each does half the work.
        let mut apart = m;
        apart.host.shared = false;
        let a = apart.predict(&[doc(256 * MB, 0.1)], None);
        assert!(a.secure_only < marked.secure_only);
    }

    /// A batch pays the plain connections once: many small documents that each alone would go
    /// secure-only can together be worth a sieve session.
    #[test]
    fn a_batch_shares_the_fixed_cost_of_the_plain_channels() {
        let mut m = no_aes_machine();
        m.overheads.plain_ms = 5.0;
        let small = doc(MB / 10, 0.1);
        assert_eq!(m.decide(small, None).mode, Mode::SecureOnly);
        let batch = vec![small; 50];
        assert_eq!(m.decide_batch(&batch, None).mode, Mode::Sieve);
    }

    #[test]
    fn empty_and_degenerate_inputs_do_not_break_the_model() {
        let m = aes_machine();
        let d = m.decide_batch(&[], None);
        assert_eq!(d.mode, Mode::SecureOnly);
        assert!(d.predicted_ms.sieve.is_finite() && d.predicted_ms.secure_only.is_finite());
        let all_secure = m.decide(doc(GIB, 1.0), None);
        assert_eq!(all_secure.mode, Mode::SecureOnly, "{all_secure:?}");
        let mut broken = m;
        broken.speeds.mac = 0.0;
        assert_eq!(broken.decide(doc(GIB, 0.1), None).mode, Mode::SecureOnly);
    }
}
