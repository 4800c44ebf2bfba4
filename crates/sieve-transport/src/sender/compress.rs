//! The sender's side of compression: which frames go compressed, compressing them, and what was
//! measured on the way. The channels ask it about each frame and carry out the answer.
//!
//! The interface is small on purpose, so that it can move into a sans-IO sender unchanged:
//!
//! - [`Compressor::plan`]: raw or a level for the next frame of a stream (the policy decides;
//!   cheap, under a lock);
//! - [`Compressor::compress`]: compress one frame's bytes into a whole `ZData` frame
//!   ([`Outgoing::Z`]) or say it does not shrink ([`Outgoing::Raw`]); CPU work, run on a worker
//!   thread, its thread CPU time measured and reported to the policy;
//! - [`Compressor::sent`] and the [`LinkMonitor`] around every write: what went on the wire,
//!   and how fast the sockets drained;
//! - [`Compressor::report`]: the session's figures for `--json`.
//!
//! The policy itself (`auto`, ACCENT, a fixed level) is pure and lives in
//! [`sieve_core::compress::Policy`]; time is cut into quanta here, and each quantum's
//! measurements go in at its end.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use sieve_core::compress::accent::{Phase1, SchemeProfile, SenderQuantum};
use sieve_core::compress::auto::CompressSample;
use sieve_core::compress::{
    fields, shrinks, Codec, Compression, Encoded, Encoder, FrameCodec, Policy, Quantum,
};
use sieve_core::frame::HEADER_LEN;
use sieve_core::message::{CompressFlags, Mode, ZData, ZDATA_HEADER_LEN, ZDATA_PREFIX_LEN};
use sieve_core::report::CompressionReport;
use sieve_core::Kind;

use crate::cpu::thread_cpu_time;
use crate::lock::lock;
use crate::sendq::SendQueues;

use super::link::LinkMonitor;

use super::SendConfig;

/// What the sender offers in HELLO: compressed cleartext unless `--compress off` (and only in
/// sieve mode, where there is cleartext), compressed classified segments with
/// `--compress-classified`.
pub(super) fn offer(cfg: &SendConfig, mode: Mode) -> CompressFlags {
    let mut f = CompressFlags::NONE;
    if cfg.compress != Compression::Off {
        if mode == Mode::Sieve {
            f = f.union(CompressFlags::PLAIN);
        }
        if cfg.compress_classified {
            f = f.union(CompressFlags::CLASSIFIED);
        }
    }
    f
}

/// Length of a quantum once the policy has settled; the first few are shorter, so that a
/// transfer of a few hundred milliseconds is not spent at the starting level (on loopback,
/// compression must be off after the first frames).
const QUANTUM: Duration = Duration::from_millis(100);
const FIRST_QUANTA: u32 = 4;
const FIRST_QUANTUM: Duration = Duration::from_millis(20);

/// Compress `bytes` at `codec` into `out`: what the policy learns of it (the worker's wall
/// time or its CPU time, whichever is longer: the wall time counts what other processes, the
/// receiver on this machine or anything else, took from the same cores, which thread CPU time
/// would hide), whether it shrank enough to go compressed, and the thread's CPU seconds.
fn timed(
    enc: &mut Encoder,
    bytes: &[u8],
    codec: Codec,
    out: &mut Vec<u8>,
) -> (CompressSample, Result<bool>, f64) {
    let (cpu0, wall0) = (thread_cpu_time(), Instant::now());
    let r = enc.compress(bytes, codec, out);
    let cpu = thread_cpu_time().saturating_sub(cpu0).as_secs_f64();
    let wall = wall0.elapsed().as_secs_f64();
    let (len, r) = match r {
        Ok(Encoded::Compressed { len, .. }) => (len, Ok(true)),
        Ok(Encoded::Raw { compressed_len }) => (compressed_len, Ok(false)),
        Err(e) => (bytes.len(), Err(e.into())),
    };
    let sample = CompressSample {
        codec,
        plain: bytes.len() as u64,
        compressed: len as u64,
        cpu_s: wall.max(cpu),
    };
    (sample, r, cpu)
}

/// Bytes of cleartext ACCENT's Phase 1 compresses at each of its schemes.
const PHASE1_SAMPLE: usize = 64 << 10;

/// ACCENT's schemes besides "no compression": from fast to strong, as its RLE, lzo, gzip, bzip.
const ACCENT_LEVELS: [i32; 4] = [1, 3, 9, 19];

/// What to do with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Plan {
    /// Compress at this level, or send raw.
    pub codec: Option<Codec>,
    /// Cut the frame to at most this many bytes: a raw probe measures the link with a small
    /// frame, so that on a slow link it costs little, and `auto` bounds the work in one
    /// compressed frame (see `Auto::frame_limit`). Either size comes from measurements of the
    /// cleartext and the link, never from the layout of classified parts.
    pub limit: Option<usize>,
}

/// Most bytes a plain socket holds not sent yet while frames may be compressed (see
/// [`SendQueues::limit_unsent`]): 40 ms of a 100 Mbit/s link, 4 ms of a 1 Gbit/s one, and what
/// one core compresses at level 1 in about a millisecond, so the link never waits for the
/// sender to refill it.
const UNSENT_LIMIT: u32 = 512 << 10;

/// Most unsent bytes a plain socket holds while `auto` has not measured the link yet.
///
/// Until then every frame is compressed at the starting level, and the socket takes frames as
/// long as fewer than its limit of bytes wait in it: with [`UNSENT_LIMIT`], on a slow link and
/// compressible text (the Rust documentation shrinks twentyfold at level 1) the whole of a
/// 4 MiB document went at the starting level before the first quantum ended, since nothing
/// blocked the writes that end quanta. A small limit makes the queue stand at once, so the link
/// is measured within the first quanta, and commits at most this many wire bytes at a guess.
/// At 1 Gbit/s it is half a millisecond of the link, which compressing workers refill.
const EXPLORE_UNSENT: u32 = 64 << 10;

/// Seconds of the link the plain sockets' unsent bytes may hold once the link is measured.
const UNSENT_TIME_S: f64 = 0.04;

/// Unsent bytes a plain socket may hold on a link of `rate` wire bytes per second:
/// [`UNSENT_TIME_S`] of it, between [`EXPLORE_UNSENT`] and [`UNSENT_LIMIT`].
///
/// A level chosen now applies to the frames written from now on, which leave after what is
/// queued before them: 512 KiB is 40 ms of a 100 Mbit/s link but 0.4 s of a 10 Mbit/s one, over
/// which `auto` took a second to walk from zstd 1 to 19 on 4 MiB of generated text, each step
/// applied only after the queue of the step before had drained.
fn unsent_for(rate: Option<f64>) -> u32 {
    rate.map_or(UNSENT_LIMIT, |r| {
        (r * UNSENT_TIME_S).clamp(f64::from(EXPLORE_UNSENT), f64::from(UNSENT_LIMIT)) as u32
    })
}

/// Bytes of a raw probe frame.
pub(super) const RAW_PROBE: usize = 256 << 10;

/// A frame after [`Compressor::compress`].
pub(super) enum Outgoing {
    /// It does not shrink by 5 %: send the bytes as they are.
    Raw,
    /// A whole `ZData` frame (header, prefix, compressed bytes), ready to write.
    Z(ZFrame),
}

/// A compressed frame, ready to go.
pub(super) struct ZFrame {
    /// The frame's bytes: [`ZDATA_HEADER_LEN`] of header and prefix, then the compressed bytes.
    pub bytes: Vec<u8>,
    pub codec: FrameCodec,
}

impl ZFrame {
    /// The payload as it travels, which a plain frame's tag covers.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[HEADER_LEN..]
    }
}

struct State {
    policy: Policy,
    quantum_start: Instant,
    quanta: u32,
    acc: SenderQuantum,
    report: CompressionReport,
    current: Option<Codec>,
    /// Unsent bytes the plain sockets may hold now (0: not limited): [`EXPLORE_UNSENT`] until
    /// the link is measured, then [`unsent_for`] the link.
    unsent: u32,
}

/// The sender's compression, shared by its channels (see the module documentation).
pub(super) struct Compressor {
    /// What the receiver accepted.
    pub accepted: CompressFlags,
    state: Mutex<State>,
    link: LinkMonitor,
    /// The kind of stream whose sockets measure the link: plain if there are plain channels.
    link_kind: Kind,
    encoders: Mutex<Vec<Encoder>>,
    buffers: Mutex<Vec<Vec<u8>>>,
}

impl Compressor {
    /// The compressor of a session: the user's `choice`, what the receiver `accepted`, its
    /// decompression speed, the sockets whose drain measures the link (those of `link_kind`, and
    /// `shared`, the other kind's when they go to the same address: see [`LinkMonitor`]),
    /// for ACCENT a sample of the cleartext for its Phase 1 profile, whether the receiver is
    /// on this host, and for `auto` the level the last session to this receiver kept
    /// (`resume`, see [`sieve_core::compress::Auto::resume`]).
    ///
    /// `auto` does not compress for a receiver on this host. There the "link" is memory and the
    /// two ends share the cores, so compressing only moves CPU time from the cheap raw path to
    /// zstd at both ends; and the drain the policy would measure is the receiver's own pace,
    /// which for compressed frames is set by its decompression, so it would look like a slow
    /// link that compression helps. (Measured on loopback with 213 MiB of crate sources: `auto`
    /// deciding by measurement alone took 0.8-3.6 s against 0.3-0.6 s without compression.)
    pub(super) fn new(
        choice: Compression,
        (offered, accepted): (CompressFlags, CompressFlags),
        receiver: (u32, u8),
        (link_kind, queues, shared): (Kind, Arc<SendQueues>, Option<Arc<SendQueues>>),
        sample: &[u8],
        same_host: bool,
        resume: Option<(Codec, Option<f64>)>,
    ) -> Result<Compressor> {
        let cores = u32::try_from(crate::cpu::cores()).unwrap_or(u32::MAX);
        let phase1 = match choice {
            Compression::Accent if accepted != CompressFlags::NONE => {
                Some(phase1(sample, receiver.0)?)
            }
            _ => None,
        };
        let choice = if accepted == CompressFlags::NONE {
            Compression::Off
        } else {
            choice
        };
        let mut policy = if same_host && choice == Compression::Auto {
            Policy::Off
        } else {
            Policy::new(choice, cores, phase1)
        };
        policy.observe_receiver(receiver.0, receiver.1);
        let resumed = match (resume, &policy) {
            (Some((level, anchor_ratio)), Policy::Auto(_)) if accepted.allows(link_kind) => {
                policy.resume(level, anchor_ratio);
                (policy.current() == Some(level)).then_some(level)
            }
            _ => None,
        };
        if let Some(rtt) = queues.min_rtt() {
            policy.observe_rtt(rtt.as_secs_f64());
        }
        let unsent = match (
            policy.may_compress() && accepted.allows(link_kind),
            policy.exploring(),
        ) {
            (false, _) => 0,
            (true, true) => EXPLORE_UNSENT,
            (true, false) => UNSENT_LIMIT,
        };
        if unsent > 0 {
            queues.limit_unsent(unsent);
        }
        let current = policy.current();
        Ok(Compressor {
            accepted,
            state: Mutex::new(State {
                policy,
                quantum_start: Instant::now(),
                quanta: 0,
                acc: SenderQuantum::default(),
                report: CompressionReport {
                    policy: choice.to_string(),
                    offered: offered.to_string(),
                    accepted: accepted.to_string(),
                    receiver_decompress_mbps: receiver.0,
                    resumed_level: resumed.map(|c| c.to_string()),
                    ..CompressionReport::default()
                },
                current,
                unsent,
            }),
            link: LinkMonitor::new(queues, shared),
            link_kind,
            encoders: Mutex::new(Vec::new()),
            buffers: Mutex::new(Vec::new()),
        })
    }

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        lock(&self.state, "the compressor's state")
    }

    /// Whether frames of `kind` may ever be compressed in this session.
    pub(super) fn active(&self, kind: Kind) -> bool {
        self.accepted.allows(kind)
            && self
                .state
                .lock()
                .map(|s| s.policy.may_compress())
                .unwrap_or(false)
    }

    /// Frames one channel may plan ahead of the one it writes ([`Policy::ahead`]).
    pub(super) fn ahead(&self) -> usize {
        self.state
            .lock()
            .map(|s| s.policy.ahead() as usize)
            .unwrap_or(1)
    }

    /// Raw or a level for the next frame of `kind`, `len` bytes. Ends the quantum first if it
    /// is over. Classified frames follow the level chosen for the cleartext, never its probes.
    pub(super) fn plan(&self, kind: Kind, len: usize) -> Result<Plan> {
        if !self.accepted.allows(kind) {
            return Ok(Plan {
                codec: None,
                limit: None,
            });
        }
        let mut s = self.state()?;
        let quantum = if s.quanta < FIRST_QUANTA {
            FIRST_QUANTUM
        } else {
            QUANTUM
        };
        let elapsed = s.quantum_start.elapsed();
        if elapsed >= quantum {
            self.end_quantum(&mut s, elapsed);
        } else if let Some(next) = s.policy.redecide() {
            Self::switch(&mut s, next);
        }
        if kind != self.link_kind {
            return Ok(Plan {
                codec: s.current,
                limit: None,
            });
        }
        let choice = s.policy.next_frame(len as u64);
        if choice.probe {
            s.report.probes += 1;
        }
        let limit = match choice.codec {
            None => choice.probe.then_some(RAW_PROBE),
            Some(codec) => s
                .policy
                .frame_limit(codec)
                .map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
        };
        Ok(Plan {
            codec: choice.codec,
            limit,
        })
    }

    fn end_quantum(&self, s: &mut State, elapsed: Duration) {
        let elapsed_s = elapsed.as_secs_f64();
        let (link, own) = self.link.sample(elapsed_s);
        let mut acc = std::mem::take(&mut s.acc);
        acc.elapsed_s = elapsed_s;
        // ACCENT, as its paper has it, measures the rate of its own stream.
        acc.drained = own;
        tracing::trace!(?link, own, "a quantum of compression ended");
        let next = s.policy.end_quantum(&Quantum { link, accent: acc });
        Self::switch(s, next);
        if s.unsent > 0 && !s.policy.exploring() {
            let want = unsent_for(s.policy.link_rate());
            // Only a change worth a system call per socket.
            if want.abs_diff(s.unsent) > s.unsent / 4 {
                s.unsent = want;
                self.link.queues.limit_unsent(want);
            }
        }
        s.quanta = s.quanta.saturating_add(1);
        s.report.quanta += 1;
        s.quantum_start = Instant::now();
    }

    /// Take the policy's choice `next` for the frames to come.
    fn switch(s: &mut State, next: Option<Codec>) {
        if next != s.current {
            s.report.switches += 1;
            tracing::debug!(
                from = ?s.current.map(|c| c.to_string()),
                to = ?next.map(|c| c.to_string()),
                link_mbit = ?s.policy.link_rate().map(|r| r * 8e-6),
                "compression level changed"
            );
        }
        s.current = next;
    }

    /// Compress `bytes`, the frame of `doc`'s `kind` stream at `offset`, with `codec`: a whole
    /// `ZData` frame, or [`Outgoing::Raw`] if it does not shrink. CPU work: call it on a worker
    /// thread. Its thread CPU time and ratio go to the policy. While the policy is measuring
    /// `codec` against its anchor ([`Policy::pair_for`]), the bytes are compressed at the
    /// anchor too, for the measurement only.
    pub(super) fn compress(
        &self,
        kind: Kind,
        doc: u32,
        offset: u64,
        bytes: &[u8],
        codec: Codec,
    ) -> Result<Outgoing> {
        let mut enc = match self.encoders.lock().ok().and_then(|mut e| e.pop()) {
            Some(e) => e,
            None => Encoder::new()?,
        };
        let pair = if kind == self.link_kind {
            self.state()?.policy.pair_for(codec)
        } else {
            None
        };
        let mut out = self.buffer();
        let (main, r, cpu) = timed(&mut enc, bytes, codec, &mut out);
        let paired = match pair.filter(|_| r.is_ok()) {
            Some(anchor) => {
                let mut scratch = self.buffer();
                let (sample, r, cpu) = timed(&mut enc, bytes, anchor, &mut scratch);
                self.give_back(scratch);
                r?;
                Some((sample, cpu))
            }
            None => None,
        };
        if let Ok(mut e) = self.encoders.lock() {
            e.push(enc);
        }
        let outgoing = r?;
        let len = main.compressed as usize;
        // What the policy learns of each frame, for `RUST_LOG=sieve_transport=trace`: which
        // level a frame went at, what it made of it and how fast, is what explains a choice.
        tracing::trace!(
            doc,
            offset,
            level = %codec,
            plain = main.plain,
            compressed = main.compressed,
            mb_per_s = main.plain as f64 / main.cpu_s.max(1e-9) * 1e-6,
            sent_compressed = outgoing,
            anchor_compressed = paired.map(|(a, _)| a.compressed),
            "frame compressed"
        );
        {
            let mut s = self.state()?;
            if kind == self.link_kind {
                match paired {
                    Some((anchor, _)) => s.policy.observe_pair(main, anchor),
                    None => s.policy.observe_compress(main),
                }
                s.acc.compress_in += bytes.len() as u64;
                s.acc.compress_out += len as u64;
                s.acc.compress_cpu_s += cpu;
            }
            let pair_cpu = paired.map_or(0.0, |(_, c)| c);
            s.report.compress_cpu_ms += (cpu + pair_cpu) * 1e3;
        }
        self.finish((doc, offset, bytes.len()), codec.into(), out, len, outgoing)
    }

    /// [`Compressor::compress`] or [`Compressor::code_fields`], as `codec` says.
    pub(super) fn encode(
        &self,
        kind: Kind,
        doc: u32,
        offset: u64,
        bytes: &[u8],
        codec: FrameCodec,
    ) -> Result<Outgoing> {
        match codec {
            FrameCodec::Zstd(c) => self.compress(kind, doc, offset, bytes, c),
            FrameCodec::Fields => self.code_fields(doc, offset, bytes),
        }
    }

    /// Code `bytes`, a run of short classified segments of `doc` at `offset` in its classified
    /// stream, in the field code ([`fields`]: each byte alone, one fixed model), or say it does
    /// not shrink. The policy learns nothing from it: its level is for the cleartext, and this
    /// code has none.
    fn code_fields(&self, doc: u32, offset: u64, bytes: &[u8]) -> Result<Outgoing> {
        let cpu0 = thread_cpu_time();
        let mut out = self.buffer();
        fields::encode(bytes, &mut out);
        let cpu = thread_cpu_time().saturating_sub(cpu0).as_secs_f64();
        self.state()?.report.compress_cpu_ms += cpu * 1e3;
        let len = out.len();
        let shrank = shrinks(bytes.len(), len);
        self.finish(
            (doc, offset, bytes.len()),
            FrameCodec::Fields,
            out,
            len,
            shrank,
        )
    }

    /// What goes out for a frame of `doc` at `offset`, `plain` bytes coded in `codec` into the
    /// first `len` bytes of `out` (given back to the pool): the whole `ZData` frame, header and
    /// prefix in front of the coded bytes, if it `shrank`, else raw.
    fn finish(
        &self,
        (doc, offset, plain): (u32, u64, usize),
        codec: FrameCodec,
        out: Vec<u8>,
        len: usize,
        shrank: bool,
    ) -> Result<Outgoing> {
        if !shrank {
            self.give_back(out);
            return Ok(Outgoing::Raw);
        }
        let declared = u32::try_from(plain)
            .map_err(|_| anyhow!("internal error: a frame longer than 4 GiB"))?;
        let mut frame = self.buffer();
        frame.reserve(ZDATA_HEADER_LEN + len);
        frame.extend_from_slice(&ZData::encode_header(doc, offset, declared, codec, len));
        frame.extend_from_slice(&out[..len]);
        self.give_back(out);
        debug_assert_eq!(frame.len(), ZDATA_HEADER_LEN + len);
        debug_assert!(frame.len() - HEADER_LEN >= ZDATA_PREFIX_LEN);
        Ok(Outgoing::Z(ZFrame {
            bytes: frame,
            codec,
        }))
    }

    /// A buffer from the pool (buffers of 4 MiB frames are kept rather than returned to the
    /// system and faulted in again for every frame).
    pub(super) fn buffer(&self) -> Vec<u8> {
        let mut b = self
            .buffers
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default();
        b.clear();
        b
    }

    /// Give a buffer back to the pool.
    pub(super) fn give_back(&self, b: Vec<u8>) {
        if let Ok(mut p) = self.buffers.lock() {
            if p.len() < MAX_POOLED {
                p.push(b);
            }
        }
    }

    /// A frame of `kind` went out: `before` bytes of the stream as `after` bytes of payload,
    /// at `codec` (`None`: raw).
    pub(super) fn sent(&self, kind: Kind, codec: Option<FrameCodec>, before: u64, after: u64) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let r = &mut s.report;
        r.bytes_before += before;
        r.bytes_after += after;
        match kind {
            Kind::Plain => {
                r.plain_before += before;
                r.plain_after += after;
            }
            Kind::Secure => {
                r.classified_before += before;
                r.classified_after += after;
            }
        }
        let key = codec.map_or_else(|| "raw".to_string(), |c| c.to_string());
        let l = r.levels.entry(key).or_default();
        l.frames += 1;
        l.bytes_before += before;
        l.bytes_after += after;
    }

    /// The link monitor, if writes of `kind` are what it watches.
    pub(super) fn link(&self, kind: Kind) -> Option<&LinkMonitor> {
        (kind == self.link_kind).then_some(&self.link)
    }

    /// The session's figures.
    pub(super) fn report(&self) -> CompressionReport {
        let Ok(s) = self.state.lock() else {
            return CompressionReport::default();
        };
        let mut r = s.report.clone();
        r.link_mbit = s.policy.link_rate().map(|b| b * 8e-6);
        r.final_level = s.current.map(|c| c.to_string());
        r.kept_level = s.policy.level_to_keep().map(|c| c.to_string());
        r.anchor_ratio = s.policy.anchor_ratio();
        r
    }
}

/// Buffers kept in the pool: a few frames in flight per channel.
const MAX_POOLED: usize = 16;

/// ACCENT's Phase 1: each scheme's compression speed and ratio on a sample of the cleartext,
/// the raw path's speed (tagging and copying it), and the receiver's decompression speed.
fn phase1(sample: &[u8], receiver_mbps: u32) -> Result<Phase1> {
    let sample = &sample[..sample.len().min(PHASE1_SAMPLE)];
    let mut schemes = vec![SchemeProfile::off()];
    let dd = if receiver_mbps > 0 {
        f64::from(receiver_mbps) * 1e6
    } else {
        1e9
    };
    let mut enc = Encoder::new()?;
    let mut out = Vec::new();
    for level in ACCENT_LEVELS {
        let codec = Codec::zstd(level)?;
        let (cd, cr) = if sample.is_empty() {
            (f64::INFINITY, 1.0)
        } else {
            let t = thread_cpu_time();
            let len = match enc.compress(sample, codec, &mut out)? {
                Encoded::Compressed { len, .. } => len,
                Encoded::Raw { compressed_len } => compressed_len,
            };
            let s = thread_cpu_time().saturating_sub(t).as_secs_f64().max(1e-6);
            (
                sample.len() as f64 / s,
                (len as f64 / sample.len() as f64).min(1.0),
            )
        };
        schemes.push(SchemeProfile {
            codec: Some(codec),
            cd,
            cr,
            dd,
        });
    }
    // ED: the raw path copies and tags every byte: a copy of the sample stands for both.
    let t = thread_cpu_time();
    let mut copy = Vec::with_capacity(sample.len());
    for _ in 0..8 {
        copy.clear();
        copy.extend_from_slice(sample);
        std::hint::black_box(&copy);
    }
    let s = thread_cpu_time().saturating_sub(t).as_secs_f64();
    let ed = if s > 0.0 && !sample.is_empty() {
        (8 * sample.len()) as f64 / s
    } else {
        10e9
    };
    Ok(Phase1 {
        schemes,
        ed,
        ed_receiver: ed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sieve_core::message::ZDataRef;

    /// The unsent queue holds 40 ms of the link, within its bounds; unknown, the most.
    #[test]
    fn the_unsent_queue_follows_the_link() {
        assert_eq!(unsent_for(None), UNSENT_LIMIT);
        assert_eq!(unsent_for(Some(1.25e6)), EXPLORE_UNSENT, "10 Mbit/s: 50 KB");
        assert_eq!(unsent_for(Some(6.75e6)), 270_000, "54 Mbit/s");
        assert_eq!(unsent_for(Some(125e6)), UNSENT_LIMIT, "1 Gbit/s: 5 MB");
    }

    /// Under `auto`, the first frames of a level other than the anchor are compressed at the
    /// anchor too, and the policy learns from both: once enough are paired, no more are; the
    /// compressed frame that goes out is the level's, and the pairing's CPU is reported.
    #[test]
    fn auto_measures_a_new_level_against_the_anchor_on_the_same_frames() {
        let c = compressor(Compression::Auto);
        let z3 = Codec::zstd(3).unwrap();
        let bytes = b"one frame of public text, measured at two levels. ".repeat(4000);
        let pair = |c: &Compressor| c.state().unwrap().policy.pair_for(z3);
        assert_eq!(pair(&c), Some(Codec::zstd(1).unwrap()));
        for k in 0..sieve_core::compress::auto::PAIRED_FRAMES {
            let Outgoing::Z(z) = c.compress(Kind::Plain, 0, 0, &bytes, z3).unwrap() else {
                panic!("text shrinks");
            };
            assert_eq!(z.codec, FrameCodec::Zstd(z3), "frame {k}");
        }
        assert_eq!(pair(&c), None);
        assert!(c.report().compress_cpu_ms > 0.0);
    }

    fn compressor(choice: Compression) -> Compressor {
        let text = b"the security sieve compresses only what is public. ".repeat(2000);
        Compressor::new(
            choice,
            (CompressFlags::ALL, CompressFlags::ALL),
            (1000, 2),
            (Kind::Plain, Arc::new(SendQueues::default()), None),
            &text,
            false,
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_compressed_frame_is_a_zdata_frame_that_decompresses_to_the_bytes() {
        let c = compressor(Compression::Fixed(Codec::zstd(3).unwrap()));
        assert!(c.active(Kind::Plain) && c.active(Kind::Secure));
        let plan = c.plan(Kind::Plain, 1 << 20).unwrap();
        assert_eq!(plan.codec, Some(Codec::zstd(3).unwrap()));
        let bytes = b"cleartext cleartext cleartext ".repeat(10_000);
        let Outgoing::Z(z) = c
            .compress(Kind::Plain, 4, 1 << 20, &bytes, plan.codec.unwrap())
            .unwrap()
        else {
            panic!("text did not shrink")
        };
        let (f, rest) =
            sieve_core::frame::parse(&z.bytes, &sieve_core::frame::Limits::default()).unwrap();
        assert_eq!(rest, z.bytes.len());
        let zd = ZDataRef::parse(f.payload).unwrap();
        assert_eq!(f.payload, z.payload());
        assert_eq!(
            (zd.doc, zd.offset, zd.declared_len),
            (4, 1 << 20, bytes.len() as u32)
        );
        let r = decoded_and_counted(&c, Kind::Plain, &z, &bytes);
        assert_eq!(r.levels["zstd:3"].frames, 1);
        assert!(r.bytes_after < r.bytes_before / 10);
        assert!(r.compress_cpu_ms > 0.0);
        // Random bytes do not shrink: raw.
        let mut x = 1u64;
        let noise: Vec<u8> = (0..100_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        assert!(matches!(
            c.compress(Kind::Plain, 0, 0, &noise, Codec::zstd(3).unwrap())
                .unwrap(),
            Outgoing::Raw
        ));
    }

    /// Decode `z`, check that it gives `plain`, count it as sent on `kind`, and return the
    /// session's report.
    fn decoded_and_counted(
        c: &Compressor,
        kind: Kind,
        z: &ZFrame,
        plain: &[u8],
    ) -> CompressionReport {
        let zd = ZDataRef::parse(z.payload()).unwrap();
        let back =
            sieve_core::compress::decompress(zd.codec, zd.compressed, plain.len() as u64).unwrap();
        assert_eq!(back, plain);
        let wire = z.payload().len() as u64;
        c.sent(kind, Some(z.codec), plain.len() as u64, wire);
        c.report()
    }

    /// A run of short classified values goes in the field code, in a frame that decodes to it
    /// and is counted under "fields"; bytes the code cannot shrink go raw.
    #[test]
    fn short_classified_values_are_field_coded() {
        let c = compressor(Compression::Fixed(Codec::zstd(3).unwrap()));
        let values = b"Mary Clark2024-01-191.83AT30 9696 7656 7873 8872 57".repeat(50);
        let Outgoing::Z(z) = c
            .encode(Kind::Secure, 2, 77, &values, FrameCodec::Fields)
            .unwrap()
        else {
            panic!("values did not shrink")
        };
        assert_eq!(z.codec, FrameCodec::Fields);
        let zd = ZDataRef::parse(z.payload()).unwrap();
        assert_eq!((zd.doc, zd.offset, zd.codec), (2, 77, FrameCodec::Fields));
        assert!(zd.compressed.len() < values.len() * 8 / 10);
        let r = decoded_and_counted(&c, Kind::Secure, &z, &values);
        assert_eq!(r.levels["fields"].frames, 1);
        assert!(r.classified_after < r.classified_before);
        let binary: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        assert!(matches!(
            c.encode(Kind::Secure, 2, 0, &binary, FrameCodec::Fields)
                .unwrap(),
            Outgoing::Raw
        ));
    }

    #[test]
    fn nothing_is_compressed_that_the_receiver_did_not_accept() {
        let c = Compressor::new(
            Compression::Auto,
            (CompressFlags::ALL, CompressFlags::PLAIN),
            (1000, 2),
            (Kind::Plain, Arc::new(SendQueues::default()), None),
            b"",
            false,
            None,
        )
        .unwrap();
        assert!(c.active(Kind::Plain));
        assert!(!c.active(Kind::Secure));
        assert_eq!(c.plan(Kind::Secure, 1000).unwrap().codec, None);
        let none = Compressor::new(
            Compression::Auto,
            (CompressFlags::PLAIN, CompressFlags::NONE),
            (0, 1),
            (Kind::Plain, Arc::new(SendQueues::default()), None),
            b"",
            false,
            None,
        )
        .unwrap();
        assert!(!none.active(Kind::Plain));
        assert_eq!(none.report().policy, "off");
        // On this host, auto does not compress; a fixed level still does.
        let local = |choice| {
            Compressor::new(
                choice,
                (CompressFlags::PLAIN, CompressFlags::PLAIN),
                (1000, 2),
                (Kind::Plain, Arc::new(SendQueues::default()), None),
                b"",
                true,
                None,
            )
            .unwrap()
        };
        assert!(!local(Compression::Auto).active(Kind::Plain));
        assert_eq!(local(Compression::Auto).report().policy, "auto");
        assert!(local(Compression::Fixed(Codec::zstd(1).unwrap())).active(Kind::Plain));
    }

    /// `auto` starts at the level the last session to this receiver kept, says so in the
    /// report, and still measures it against the anchor; other policies, a receiver on this
    /// host and one that refused compressed cleartext ignore it.
    #[test]
    fn auto_resumes_at_the_remembered_level() {
        let z19 = Codec::zstd(19).unwrap();
        let with = |choice, accepted, same_host| {
            Compressor::new(
                choice,
                (CompressFlags::PLAIN, accepted),
                (1000, 2),
                (Kind::Plain, Arc::new(SendQueues::default()), None),
                b"",
                same_host,
                Some((z19, Some(0.3))),
            )
            .unwrap()
        };
        let c = with(Compression::Auto, CompressFlags::PLAIN, false);
        assert_eq!(c.plan(Kind::Plain, 1 << 20).unwrap().codec, Some(z19));
        assert_eq!(c.report().resumed_level.as_deref(), Some("zstd:19"));
        assert_eq!(
            c.state().unwrap().policy.pair_for(z19),
            Some(Codec::zstd(1).unwrap())
        );
        let z3 = Codec::zstd(3).unwrap();
        let fixed = with(Compression::Fixed(z3), CompressFlags::PLAIN, false);
        assert_eq!(fixed.plan(Kind::Plain, 1 << 20).unwrap().codec, Some(z3));
        assert_eq!(fixed.report().resumed_level, None);
        let local = with(Compression::Auto, CompressFlags::PLAIN, true);
        assert_eq!(local.plan(Kind::Plain, 1 << 20).unwrap().codec, None);
        assert_eq!(local.report().resumed_level, None);
        let refused = with(Compression::Auto, CompressFlags::NONE, false);
        assert_eq!(refused.report().resumed_level, None);
        // Without a memory, zstd 1 as always.
        let cold = compressor(Compression::Auto);
        assert_eq!(
            cold.plan(Kind::Plain, 1 << 20).unwrap().codec,
            Some(Codec::zstd(1).unwrap())
        );
        assert_eq!(cold.report().resumed_level, None);
    }

    #[test]
    fn accent_profiles_its_schemes_first() {
        let c = compressor(Compression::Accent);
        assert!(c.active(Kind::Plain));
        // ACCENT starts with no compression until a quantum has measured the link.
        assert_eq!(c.plan(Kind::Plain, 1 << 16).unwrap().codec, None);
        let p = phase1(&b"abc".repeat(30_000), 900).unwrap();
        assert_eq!(p.schemes.len(), 1 + ACCENT_LEVELS.len());
        assert!(p.schemes[1..]
            .iter()
            .all(|s| s.cd > 0.0 && s.cr < 0.5 && s.dd == 900e6));
        assert!(p.ed > 0.0);
    }
}
