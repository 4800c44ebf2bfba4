//! One session on the receiving side: joins, manifests, pieces, ends, verification, commits and
//! acknowledgements, as events in and [`Action`]s out.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::compress::FrameCodec;
use crate::ledger::{LedgerError, UnitTag};
use crate::message::{Ack, AckStatus, CompressFlags, DocEnd, DocRef, Hello, HelloRefusal, Mode};
use crate::name;
use crate::sieve::Placement;
use crate::Kind;

use super::action::{
    Action, Commit, Failure, FileSpec, JoinRefusal, Lookup, ProtocolError, Verdict, Verification,
    WritePiece,
};
use super::document::{Document, Phase, State};
use super::memory::{manifest_cost, Account, MemoryPool, LEDGERS_FIXED, LEDGER_BLOCK, PHASE_BLOCK};
use super::refusal::{InflateRefusal, ManifestRefusal, MemoryRefusal};
use crate::ledger::Ledger;

/// What a receiver allows one session.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    /// Largest document, in bytes of output.
    pub max_doc_bytes: u64,
    /// Most documents one session may announce.
    pub max_docs: u32,
    /// Most segments in one manifest.
    pub max_segments: usize,
    /// This session's share of the memory its documents may hold (manifests, placements,
    /// ledgers, the table of finished documents), in bytes.
    pub memory: u64,
    /// Most documents with a temporary file open at once (told to the sender in SESSION).
    pub max_open_docs: u64,
    /// Verify and acknowledge, but write nothing (benchmarks).
    pub discard: bool,
    /// The compressed frames this receiver accepts (the session agrees to those of them the
    /// HELLO offers).
    pub accept_compression: CompressFlags,
    /// How far compressed frames may inflate before their document is verified.
    pub inflate: InflateLimit,
}

/// How many bytes compressed frames of documents not yet verified may decompress to, for the
/// bytes they took on the wire.
///
/// A compressed frame is decompressed and written as it arrives; what vouches for it, the digest
/// in DOC_END, comes at the end of its document, and a peer that never sends a right one can
/// still have its frames written meanwhile. A zstd frame of zeros declaring 16 MiB is about
/// 530 bytes, so without a bound a few kilobytes on the wire fill gigabytes of temporary files.
/// The bound: a document's compressed frames, taken together, may decompress to [`ratio`]
/// times their bytes on the wire; what goes beyond that, summed over the session's documents
/// not yet verified, may reach [`allowance`] (so that a small file of zeros, or a run of them
/// inside a document, still passes). A verified document gives its share back; a document
/// that fails keeps it charged until the session ends, so that a peer cannot refill it by
/// starting documents it never finishes.
///
/// Honest data stays below the default ratio: the most repetitive logs measured, health checks
/// that differ only in their timestamps, compress up to 149:1 (100-byte lines) and 217:1 (JSON
/// lines of 280 bytes) at zstd 19 in the sender's frames; generated and real logs 3:1 to 12:1
/// (SECURITY.md §3.14). A log compresses about as many times as its lines are longer than what
/// changes between them, so the default leaves room for lines of a kilobyte. Data of one
/// repeated byte or line (2,000:1 to 30,000:1) passes only within the allowance, or with the
/// ratio raised.
///
/// [`ratio`]: InflateLimit::ratio
/// [`allowance`]: InflateLimit::allowance
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InflateLimit {
    /// Most bytes a document's compressed frames may decompress to per byte they took on the
    /// wire, before it is verified; 0: no bound.
    pub ratio: u32,
    /// Bytes beyond `ratio` that a session's documents not yet verified may hold together.
    pub allowance: u64,
}

impl InflateLimit {
    /// Default of [`InflateLimit::ratio`]: between the most repetitive logs (a few hundred to
    /// one) and data of one repeated byte or line (thousands to one).
    pub const DEFAULT_RATIO: u32 = 1024;
    /// Default of [`InflateLimit::allowance`].
    pub const DEFAULT_ALLOWANCE: u64 = 8 << 20;
    /// No bound at all.
    pub const NONE: InflateLimit = InflateLimit {
        ratio: 0,
        allowance: 0,
    };
}

impl Default for InflateLimit {
    fn default() -> Self {
        InflateLimit {
            ratio: Self::DEFAULT_RATIO,
            allowance: Self::DEFAULT_ALLOWANCE,
        }
    }
}

/// The receiving side of one session (see the [module documentation](super)).
pub struct ReceiverSession {
    hello: Hello,
    limits: SessionLimits,
    account: Account,
    /// Channels joined so far, one bit per index, by [`Kind::index`]; channel 0 is joined by
    /// the HELLO itself.
    joined: [u32; 2],
    docs: HashMap<u32, Document>,
    /// What became of every document id seen (one byte each, charged).
    phases: Vec<Phase>,
    /// Documents with a temporary file.
    open_files: u64,
    actions: VecDeque<Action>,
    ended: bool,
    /// The compressed frames both ends agreed to.
    compression: CompressFlags,
    /// Bytes beyond the inflate ratio that documents of this session not verified hold (see
    /// [`InflateLimit`]).
    inflate_excess: u64,
}

impl ReceiverSession {
    /// Start a session for `hello`, or say why not. `pool` is shared by every session of the
    /// receiver; `limits.memory` is this session's share of it.
    pub fn new(
        hello: Hello,
        limits: SessionLimits,
        pool: Arc<dyn MemoryPool>,
    ) -> Result<ReceiverSession, HelloRefusal> {
        hello.validate(limits.max_docs)?;
        let account = Account::new(pool, limits.memory);
        let compression = hello.compression.intersect(limits.accept_compression);
        Ok(ReceiverSession {
            compression,
            hello,
            limits,
            account,
            joined: [0, 1],
            docs: HashMap::new(),
            phases: Vec::new(),
            open_files: 0,
            actions: VecDeque::new(),
            ended: false,
            inflate_excess: 0,
        })
    }

    /// What the client asked for.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The compressed frames this session agreed to: what the HELLO offered and the receiver
    /// accepts. SESSION tells the sender.
    pub fn compression(&self) -> CompressFlags {
        self.compression
    }

    /// A compressed frame of `kind` in `codec` arrived for `doc`, declaring `declared_len` bytes
    /// at stream `offset`: may it be decompressed? Call before decompressing; then hand the
    /// decompressed bytes to [`ReceiverSession::data`] as usual (a plain frame with the one tag
    /// of what travelled).
    ///
    /// Refused: a kind of compressed frame the session did not agree to, and a classified zstd
    /// frame whose bytes belong to more than one classified segment (each segment is compressed
    /// alone, so that no compression context holds two secrets). A frame in the field code may
    /// hold several: it has no context, every byte is coded alone
    /// ([`crate::compress::fields`]). A frame of a document that is not being received passes:
    /// [`ReceiverSession::data`] then says what becomes of it.
    pub fn compressed(
        &self,
        kind: Kind,
        codec: FrameCodec,
        doc: u32,
        offset: u64,
        declared_len: u64,
    ) -> Result<(), ProtocolError> {
        if !self.compression.allows(kind) {
            return Err(ProtocolError::CompressionRefused { kind });
        }
        if kind == Kind::Secure {
            if let Some(d) = self.docs.get(&doc) {
                let mut runs = 0u32;
                d.placement
                    .place(kind, offset, declared_len, |_, _, _| runs += 1)?;
                if runs > 1 && codec != FrameCodec::Fields {
                    return Err(ProtocolError::SegmentsMixed {
                        offset,
                        len: declared_len,
                    });
                }
            }
        }
        Ok(())
    }

    /// A compressed frame of `doc`, `wire` bytes as it travelled, passed its own checks and
    /// will decompress to `declared` bytes: may it, before the document is verified (see
    /// [`InflateLimit`])? Call after [`ReceiverSession::compressed`] and the decompressor's check
    /// of the frame, before decompressing it.
    ///
    /// `false`: the document is refused with LIMIT (its acknowledgement and the discard of its
    /// file are queued); drop the frame. A frame of a document not being received passes:
    /// [`ReceiverSession::data`] then says what becomes of it.
    pub fn may_inflate(&mut self, doc: u32, declared: u64, wire: u64) -> bool {
        let limit = self.limits.inflate;
        if limit.ratio == 0 || self.limits.discard {
            return true;
        }
        let Some(d) = self.docs.get_mut(&doc) else {
            return true;
        };
        if d.state != State::Receiving {
            return true;
        }
        let inflated = d.inflated.saturating_add(declared);
        let wire = d.wire.saturating_add(wire);
        let excess = inflated.saturating_sub(wire.saturating_mul(u64::from(limit.ratio)));
        let others = self.inflate_excess - d.excess;
        if others.saturating_add(excess) > limit.allowance {
            let why = InflateRefusal {
                inflated,
                wire,
                ratio: limit.ratio,
                allowance: limit.allowance,
                others,
            };
            self.fail(doc, AckStatus::Refused, why.to_string());
            return false;
        }
        (d.inflated, d.wire, d.excess) = (inflated, wire, excess);
        self.inflate_excess = others + excess;
        true
    }

    /// Bytes beyond the inflate ratio that this session's documents not yet verified hold, of
    /// its [`InflateLimit::allowance`].
    pub fn inflate_excess(&self) -> u64 {
        self.inflate_excess
    }

    /// A channel presented a valid token for `(kind, index)`: take its slot. Each slot is taken
    /// once, so a replayed token finds it taken.
    pub fn join(&mut self, kind: Kind, index: u8) -> Result<(), JoinRefusal> {
        let count = match kind {
            Kind::Secure => self.hello.secure_channels,
            Kind::Plain => self.hello.plain_channels,
        };
        if index >= count || index >= 32 {
            return Err(JoinRefusal::Index { kind, index });
        }
        let bit = 1u32 << index;
        let joined = &mut self.joined[kind.index()];
        if *joined & bit != 0 {
            return Err(JoinRefusal::Taken { kind, index });
        }
        *joined |= bit;
        Ok(())
    }

    /// The next thing the transport must do, if any. Call after every event.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Documents announced and not yet answered.
    pub fn in_progress(&self) -> usize {
        self.docs.len()
    }

    /// Bytes of memory this session holds now.
    pub fn memory_held(&self) -> u64 {
        self.account.held()
    }

    fn max_doc_id(&self) -> u32 {
        if self.hello.docs > 0 {
            self.hello.docs
        } else {
            self.limits.max_docs
        }
    }

    fn phase(&self, doc: u32) -> Phase {
        self.phases.get(doc as usize).copied().unwrap_or_default()
    }

    fn set_phase(&mut self, doc: u32, phase: Phase) {
        if let Some(p) = self.phases.get_mut(doc as usize) {
            *p = phase;
        }
    }

    /// A manifest arrived on channel 0. A document the receiver will not take is answered with
    /// a refusal (its pieces are then dropped as they come); only a broken protocol ends the
    /// session.
    pub fn manifest(&mut self, doc: &DocRef<'_>) -> Result<(), ProtocolError> {
        let id = doc.doc;
        let max = self.max_doc_id();
        if id >= max {
            return Err(ProtocolError::DocOutOfRange { doc: id, max });
        }
        if self.phase(id) != Phase::Unseen {
            return Err(ProtocolError::Announced(id));
        }
        if !self.remember(id) {
            return Ok(());
        }
        match self.admit(doc) {
            Ok((placement, cost)) => {
                let file = FileSpec {
                    doc: id,
                    name: doc.name.to_string(),
                    len: placement.output_len(),
                };
                let marks = doc.marks.map(|(s, e)| (s.to_vec(), e.to_vec()));
                self.docs
                    .insert(id, Document::new(file, placement, marks, cost));
                self.set_phase(id, Phase::Active);
            }
            Err(why) => {
                self.set_phase(id, Phase::Refused);
                self.refuse(id, doc.name.to_string(), why.to_string());
            }
        }
        Ok(())
    }

    /// Take a manifest if the receiver will: its name, segment count, size and mode are checked
    /// and its memory is charged before its placement is built. Returns the placement and what
    /// was charged, or why it is refused.
    fn admit(&mut self, doc: &DocRef<'_>) -> Result<(Placement, u64), ManifestRefusal> {
        name::check(doc.name)?;
        let segments = doc.segments;
        if segments > self.limits.max_segments {
            return Err(ManifestRefusal::TooManySegments {
                segments,
                max: self.limits.max_segments,
            });
        }
        if self.hello.mode == Mode::SecureOnly && doc.stream_len[Kind::Plain.index()] > 0 {
            return Err(ManifestRefusal::PlainInSecureOnly);
        }
        let cost = manifest_cost(segments, doc.lens.len(), doc.name.len());
        if let Err(short) = self.account.charge(cost) {
            let what = format!("the manifest of {segments} segments");
            return Err(MemoryRefusal::new(short, cost, what).into());
        }
        let marks = doc.marks.map(|(s, e)| (s.len() as u64, e.len() as u64));
        let placement = match Placement::from_manifest(doc, marks) {
            Ok(p) => p,
            Err(e) => {
                self.account.release(cost);
                return Err(e.into());
            }
        };
        if placement.output_len() > self.limits.max_doc_bytes {
            self.account.release(cost);
            return Err(ManifestRefusal::TooLarge {
                len: placement.output_len(),
                max: self.limits.max_doc_bytes,
            });
        }
        Ok((placement, cost))
    }

    fn refuse(&mut self, doc: u32, name: String, why: String) {
        self.refuse_with(doc, name, AckStatus::Refused, why)
    }

    fn refuse_with(&mut self, doc: u32, name: String, status: AckStatus, why: String) {
        self.answer(
            Ack {
                doc,
                status,
                message: why,
                receive_us: 0,
                integrate_us: 0,
                commit_us: 0,
            },
            name,
        );
    }

    fn answer(&mut self, ack: Ack, name: String) {
        self.actions.push_back(Action::Ack { ack, name });
    }

    /// Refuse a manifest for a reason the transport found: its store will not take the name
    /// (`status` [`AckStatus::Exists`] or [`AckStatus::Refused`]), or it could not read it
    /// (`doc` is then read from its first field and `name` is empty). Its pieces are dropped as
    /// they come.
    pub fn refuse_manifest(
        &mut self,
        doc: u32,
        name: String,
        status: AckStatus,
        why: String,
    ) -> Result<(), ProtocolError> {
        let max = self.max_doc_id();
        if doc >= max {
            return Err(ProtocolError::DocOutOfRange { doc, max });
        }
        if self.phase(doc) != Phase::Unseen {
            return Err(ProtocolError::Announced(doc));
        }
        if self.remember(doc) {
            self.set_phase(doc, Phase::Refused);
        }
        self.refuse_with(doc, name, status, why);
        Ok(())
    }

    /// The sender gave up on a document (its file changed while it was being sent): it fails
    /// as [`AckStatus::Cancelled`], its file goes. It must come instead of the document's
    /// DOC_END; for a document already refused or failed it changes nothing.
    pub fn cancel(&mut self, doc: u32, reason: &str) -> Result<(), ProtocolError> {
        match self.phase(doc) {
            Phase::Unseen => return Err(ProtocolError::CancelUnknown(doc)),
            Phase::Refused | Phase::Failed => return Ok(()),
            Phase::Stored => return Err(ProtocolError::CancelAfterEnd(doc)),
            Phase::Active => {}
        }
        if self.docs.get(&doc).is_some_and(|d| d.end.is_some()) {
            return Err(ProtocolError::CancelAfterEnd(doc));
        }
        self.fail(
            doc,
            AckStatus::Cancelled,
            format!("the sender cancelled it: {reason}"),
        );
        Ok(())
    }

    /// Grow the table of phases to cover `doc`, paying for it; `false` if it cannot be paid
    /// for (a refusal is then queued).
    fn remember(&mut self, doc: u32) -> bool {
        if (doc as usize) < self.phases.len() {
            return true;
        }
        let len = (doc as usize + 1).next_multiple_of(PHASE_BLOCK);
        let grow = (len - self.phases.len()) as u64;
        if let Err(short) = self.account.charge(grow) {
            // Not even its phase can be remembered: refuse it without one. The sender is told;
            // a frame of it would wait for a manifest that never comes.
            let why = MemoryRefusal::new(short, grow, "the documents of this session");
            self.refuse(doc, String::new(), why.to_string());
            return false;
        }
        self.phases.resize(len, Phase::Unseen);
        true
    }

    /// Where `doc`'s streams go, so that the transport can tag a cleartext frame of it before
    /// handing the frame to [`ReceiverSession::data`].
    pub fn lookup(&self, doc: u32) -> Result<Lookup, ProtocolError> {
        match self.phase(doc) {
            Phase::Unseen if doc >= self.max_doc_id() => Err(ProtocolError::DocOutOfRange {
                doc,
                max: self.max_doc_id(),
            }),
            Phase::Unseen => Ok(Lookup::NotYet),
            Phase::Refused | Phase::Failed => Ok(Lookup::Drop),
            Phase::Stored => Err(ProtocolError::AfterComplete(doc)),
            Phase::Active => match self.docs.get(&doc) {
                Some(d) if d.state == State::Receiving => {
                    Ok(Lookup::Placement(d.placement.clone()))
                }
                _ => Err(ProtocolError::AfterComplete(doc)),
            },
        }
    }

    /// A data frame of `len` bytes of `doc`'s `kind` stream at `offset` arrived. For a plain
    /// frame, `tags` are the tags of its units (see the transport's MAC), computed before this
    /// call; a secure frame has none.
    ///
    /// On [`Verdict::Write`] the tags are recorded, and the transport writes the pieces and then
    /// reports [`ReceiverSession::write_done`] once.
    pub fn data(
        &mut self,
        kind: Kind,
        doc: u32,
        offset: u64,
        len: u64,
        tags: &[UnitTag],
        now: Instant,
    ) -> Result<Verdict, ProtocolError> {
        if kind == Kind::Plain && self.hello.mode == Mode::SecureOnly {
            return Err(ProtocolError::WrongKind { kind });
        }
        match self.phase(doc) {
            Phase::Unseen if doc >= self.max_doc_id() => {
                return Err(ProtocolError::DocOutOfRange {
                    doc,
                    max: self.max_doc_id(),
                })
            }
            Phase::Unseen => return Ok(Verdict::NotYet),
            Phase::Refused | Phase::Failed => return Ok(Verdict::Drop),
            Phase::Stored => return Err(ProtocolError::AfterComplete(doc)),
            Phase::Active => {}
        }
        let Some(d) = self.docs.get_mut(&doc) else {
            return Err(ProtocolError::AfterComplete(doc));
        };
        if d.state != State::Receiving {
            return Err(ProtocolError::AfterComplete(doc));
        }
        let mut pieces = Vec::new();
        d.placement
            .place(kind, offset, len, |output, within, len| {
                pieces.push(WritePiece {
                    output,
                    within,
                    len,
                })
            })?;
        if kind == Kind::Plain {
            let mut at = offset;
            for &(o, n, _) in tags {
                if o != at {
                    return Err(ProtocolError::Tags { offset, len });
                }
                at += n;
            }
            if at != offset + len {
                return Err(ProtocolError::Tags { offset, len });
            }
        }
        // Pay for the ledger's growth before recording anything.
        let entries = d.entries()
            + if kind == Kind::Plain {
                tags.len() as u64
            } else {
                1
            };
        let first = d.ledgers.is_none();
        if entries > d.entries_paid || first {
            let more = if entries > d.entries_paid {
                (entries - d.entries_paid)
                    .max(d.entries_paid)
                    .max(LEDGER_BLOCK)
            } else {
                0
            };
            let cost = more * Ledger::ENTRY_BYTES + if first { LEDGERS_FIXED } else { 0 };
            if let Err(short) = self.account.charge(cost) {
                let what = format!("document {doc}'s record of {entries} pieces");
                let why = MemoryRefusal::new(short, cost, what);
                self.fail(doc, AckStatus::Refused, why.to_string());
                return Ok(Verdict::Drop);
            }
            let d = self.docs.get_mut(&doc).expect("checked above");
            d.entries_paid += more;
            d.charged += cost;
        }
        let d = self.docs.get_mut(&doc).expect("checked above");
        let ledger = &mut d.ledgers.get_or_insert_with(Default::default)[kind.index()];
        if kind == Kind::Plain {
            for &(o, n, t) in tags {
                ledger.record_hashed(o, n, t);
            }
        } else {
            ledger.record_unhashed(offset, len);
        }
        d.first_data.get_or_insert(now);
        let verdict = if self.limits.discard {
            Verdict::Recorded
        } else {
            if !d.opened {
                if self.open_files >= self.limits.max_open_docs {
                    let why = format!(
                        "more than {} documents of one session in progress at once (the \
                         receiver's SESSION said so; wait for acknowledgements before starting \
                         more)",
                        self.limits.max_open_docs
                    );
                    self.fail(doc, AckStatus::StoreError, why);
                    return Ok(Verdict::Drop);
                }
                let d = self.docs.get_mut(&doc).expect("checked above");
                d.opened = true;
                self.open_files += 1;
            }
            let d = self.docs.get_mut(&doc).expect("checked above");
            d.pending_writes += 1;
            Verdict::Write {
                file: d.file.clone(),
                pieces,
            }
        };
        self.maybe_close(doc, now);
        Ok(verdict)
    }

    /// The writes of one [`Verdict::Write`] are done (or failed, which fails the document).
    pub fn write_done(&mut self, doc: u32, result: Result<(), Failure>) {
        let Some(d) = self.docs.get_mut(&doc) else {
            // Failed meanwhile: already answered.
            return;
        };
        d.pending_writes = d.pending_writes.saturating_sub(1);
        match result {
            Ok(()) => self.maybe_commit(doc),
            Err(f) => self.fail(doc, f.status, f.message),
        }
    }

    /// DOC_END arrived on channel 0: the sender has sent every piece, and commits to the
    /// cleartext's digest.
    pub fn doc_end(&mut self, end: DocEnd, now: Instant) -> Result<(), ProtocolError> {
        match self.phase(end.doc) {
            Phase::Unseen => return Err(ProtocolError::EndUnknown(end.doc)),
            // The sender may not have heard of the refusal or failure yet.
            Phase::Refused | Phase::Failed => return Ok(()),
            Phase::Stored => return Err(ProtocolError::EndTwice(end.doc)),
            Phase::Active => {}
        }
        let Some(d) = self.docs.get_mut(&end.doc) else {
            return Err(ProtocolError::EndUnknown(end.doc));
        };
        if end.secure_len != d.placement.stream_len(Kind::Secure)
            || end.plain_len != d.placement.stream_len(Kind::Plain)
        {
            return Err(ProtocolError::EndMismatch(end.doc));
        }
        if d.end.is_some() {
            return Err(ProtocolError::EndTwice(end.doc));
        }
        d.end = Some(end);
        self.maybe_close(end.doc, now);
        Ok(())
    }

    /// Close a document whose every byte and DOC_END have come: no piece is written after this,
    /// and its ledgers go out to be checked.
    fn maybe_close(&mut self, doc: u32, now: Instant) {
        let Some(d) = self.docs.get_mut(&doc) else {
            return;
        };
        if d.state != State::Receiving || !d.complete() {
            return;
        }
        d.state = State::Verifying;
        d.closed_at = Some(now);
        let Some(end) = d.end else {
            return;
        };
        let verification = Verification {
            doc,
            ledgers: d.ledgers.take().unwrap_or_default(),
            lens: [
                d.placement.stream_len(Kind::Plain),
                d.placement.stream_len(Kind::Secure),
            ],
            digest: end.plain_digest,
        };
        self.actions.push_back(Action::Verify(verification));
    }

    /// The outcome of an [`Action::Verify`], and how long it took.
    pub fn verified(&mut self, doc: u32, result: Result<(), LedgerError>, took: Duration) {
        let Some(d) = self.docs.get_mut(&doc) else {
            return;
        };
        if d.state != State::Verifying {
            return;
        }
        match result {
            Ok(()) => {
                d.state = State::Verified;
                d.verify_us = took.as_micros() as u64;
                // Vouched for: what it inflated beyond the ratio no longer counts.
                self.inflate_excess -= std::mem::take(&mut d.excess);
                self.maybe_commit(doc);
            }
            Err(e) => self.fail(doc, AckStatus::IntegrityError, e.to_string()),
        }
    }

    /// Commit a verified document once its last write has landed.
    fn maybe_commit(&mut self, doc: u32) {
        let discard = self.limits.discard;
        let Some(d) = self.docs.get_mut(&doc) else {
            return;
        };
        if d.state != State::Verified || d.pending_writes > 0 {
            return;
        }
        if discard {
            let ack = Ack {
                doc,
                status: AckStatus::Ok,
                message: String::new(),
                receive_us: d.receive_us(),
                integrate_us: d.verify_us,
                commit_us: 0,
            };
            let name = d.file.name.clone();
            self.finish(doc, Phase::Stored);
            self.answer(ack, name);
            return;
        }
        d.state = State::Committing;
        let commit = Commit {
            file: d.file.clone(),
            opened: d.opened,
            marks: d.marks.clone(),
            placement: d.placement.clone(),
        };
        self.actions.push_back(Action::Commit(commit));
    }

    /// The outcome of an [`Action::Commit`]: `integrate` is the time spent restoring marks,
    /// `durable` the fsync and rename.
    pub fn committed(&mut self, doc: u32, result: Result<(Duration, Duration), Failure>) {
        let Some(d) = self.docs.get_mut(&doc) else {
            return;
        };
        if d.state != State::Committing {
            return;
        }
        match result {
            Ok((integrate, durable)) => {
                let ack = Ack {
                    doc,
                    status: AckStatus::Ok,
                    message: String::new(),
                    receive_us: d.receive_us(),
                    integrate_us: d.verify_us + integrate.as_micros() as u64,
                    commit_us: durable.as_micros() as u64,
                };
                // The commit took the file: nothing is left to discard.
                let name = d.file.name.clone();
                self.finish(doc, Phase::Stored);
                self.answer(ack, name);
            }
            Err(f) => {
                let name = d.file.name.clone();
                self.finish(doc, Phase::Failed);
                self.acknowledge_failure(doc, name, f.status, f.message);
            }
        }
    }

    /// Fail a document: its file goes, its memory is given back, the sender is told why, and
    /// its remaining pieces are dropped as they come.
    pub fn fail(&mut self, doc: u32, status: AckStatus, message: String) {
        let Some(d) = self.docs.get(&doc) else {
            return;
        };
        if d.state == State::Committing {
            // The commit owns the file now; its outcome answers for the document.
            return;
        }
        let name = d.file.name.clone();
        if d.opened {
            self.actions.push_back(Action::Discard { doc });
        }
        self.finish(doc, Phase::Failed);
        self.acknowledge_failure(doc, name, status, message);
    }

    fn acknowledge_failure(&mut self, doc: u32, name: String, status: AckStatus, message: String) {
        self.answer(
            Ack {
                doc,
                status,
                message,
                receive_us: 0,
                integrate_us: 0,
                commit_us: 0,
            },
            name,
        );
    }

    /// Drop a document's slot and give back what it held.
    fn finish(&mut self, doc: u32, phase: Phase) {
        if let Some(d) = self.docs.remove(&doc) {
            if d.opened {
                self.open_files -= 1;
            }
            self.account.release(d.charged);
        }
        self.set_phase(doc, phase);
    }

    /// The session is over (ended, failed or aborted): every document not being committed
    /// loses its file. Nothing more is acknowledged.
    pub fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let mut ids: Vec<u32> = self.docs.keys().copied().collect();
        ids.sort_unstable();
        for doc in ids {
            let Some(d) = self.docs.get(&doc) else {
                continue;
            };
            if d.state == State::Committing {
                continue;
            }
            if d.opened {
                self.actions.push_back(Action::Discard { doc });
            }
            self.finish(doc, Phase::Failed);
        }
        self.actions.retain(|a| !matches!(a, Action::Ack { .. }));
    }

    /// Whether [`ReceiverSession::end`] was called.
    pub fn is_ended(&self) -> bool {
        self.ended
    }
}
