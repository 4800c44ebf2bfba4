//! The receiver's state machine against every order of events a network and a thread pool can
//! produce: honest frames on any channel, DOC_END, a forged cleartext frame injected before,
//! between or after them, writes that land late, verifications and commits that finish late.
//!
//! A small simulated transport carries out the actions (it writes into a byte vector, checks the
//! ledgers, "commits" by taking a snapshot of the file) and a proptest-chosen schedule decides
//! which enabled step runs next. Whatever the order, a document acknowledged as stored holds
//! exactly the honest bytes, and without a forgery every document is stored.

// One classified range is the normal case here, not a mistaken list of indices.
#![allow(clippy::single_range_in_vec_init)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sieve_core::compress::FrameCodec;
use sieve_core::layout::{Kind, Layout};
use sieve_core::ledger::{Ledger, UnitTag};
use sieve_core::message::{
    AckStatus, CompressFlags, Doc, DocEnd, DocRef, Hello, Mode, PROTOCOL_VERSION,
};
use sieve_core::receiver::{
    Action, AtomicPool, Failure, InflateLimit, ProtocolError, ReceiverSession, SessionLimits,
    Verdict, WritePiece,
};
use sieve_core::sieve::Placement;

/// Hand a manifest to the state machine as the transport does: encoded, then read in place.
fn announce(s: &mut ReceiverSession, doc: Doc) -> Result<(), ProtocolError> {
    let mut frame = Vec::new();
    doc.encode(&mut frame);
    let m = DocRef::parse(&frame[sieve_core::frame::HEADER_LEN..]).expect("a valid manifest");
    s.manifest(&m)
}

/// The test's cleartext MAC: any keyed function of (offset, bytes) will do for the state
/// machine, which only records and folds tags.
fn tag(offset: u64, bytes: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(&[7; 32]);
    h.update(&offset.to_be_bytes());
    h.update(bytes);
    *h.finalize().as_bytes()
}

fn limits() -> SessionLimits {
    SessionLimits {
        max_doc_bytes: 1 << 20,
        max_docs: 16,
        max_segments: 1000,
        memory: 1 << 20,
        max_open_docs: 4,
        discard: false,
        accept_compression: CompressFlags::ALL,
        inflate: InflateLimit::NONE,
    }
}

fn hello(mode: Mode, docs: u32) -> Hello {
    Hello {
        version: PROTOCOL_VERSION,
        mode,
        secure_channels: 2,
        plain_channels: if mode == Mode::Sieve { 2 } else { 0 },
        split: Default::default(),
        batch_split: Default::default(),
        chunk_size: 1 << 16,
        docs,
        macs: Default::default(),
        compression: CompressFlags::NONE,
    }
}

/// One data frame as it comes off a channel.
#[derive(Debug, Clone)]
struct Frame {
    kind: Kind,
    offset: u64,
    bytes: Vec<u8>,
}

/// A step the simulated world may take next.
#[derive(Debug)]
enum Step {
    Deliver(Frame),
    End,
    /// A write handed out: its bytes not yet in the file.
    Perform {
        pieces: Vec<WritePiece>,
        bytes: Vec<u8>,
    },
    /// A write in the file, not yet reported.
    Report,
    Verify(sieve_core::receiver::Verification),
    Commit(sieve_core::receiver::Commit),
}

struct World {
    session: ReceiverSession,
    file: Option<Vec<u8>>,
    committed: Option<Vec<u8>>,
    acks: Vec<(AckStatus, String)>,
    /// Frames and the DOC_END not yet delivered (network), then in-flight work (threads).
    steps: Vec<Step>,
    aborted: Option<ProtocolError>,
    output_len: u64,
}

impl World {
    fn drain(&mut self) {
        while let Some(a) = self.session.poll_action() {
            match a {
                Action::Verify(v) => self.steps.push(Step::Verify(v)),
                Action::Commit(c) => self.steps.push(Step::Commit(c)),
                Action::Discard { .. } => self.file = None,
                Action::Ack { ack: a, .. } => self.acks.push((a.status, a.message)),
            }
        }
    }

    fn abort(&mut self, e: ProtocolError) {
        self.aborted.get_or_insert(e);
        self.session.end();
        // The network is cut: undelivered frames and DOC_END never arrive.
        self.steps
            .retain(|s| !matches!(s, Step::Deliver(_) | Step::End));
    }

    fn step(&mut self, s: Step, end: &DocEnd) {
        let now = Instant::now();
        match s {
            Step::Deliver(f) => {
                let tags: Vec<UnitTag> = if f.kind == Kind::Plain {
                    vec![(f.offset, f.bytes.len() as u64, tag(f.offset, &f.bytes))]
                } else {
                    Vec::new()
                };
                match self
                    .session
                    .data(f.kind, 0, f.offset, f.bytes.len() as u64, &tags, now)
                {
                    Ok(Verdict::Write { file, pieces }) => {
                        self.file.get_or_insert_with(|| vec![0; file.len as usize]);
                        self.steps.push(Step::Perform {
                            pieces,
                            bytes: f.bytes,
                        });
                    }
                    Ok(Verdict::Recorded | Verdict::Drop) => {}
                    Ok(Verdict::NotYet) => panic!("the manifest came first"),
                    Err(e) => self.abort(e),
                }
            }
            Step::End => {
                if let Err(e) = self.session.doc_end(*end, now) {
                    self.abort(e);
                }
            }
            Step::Perform { pieces, bytes } => {
                // A file discarded meanwhile takes writes that go nowhere.
                if let Some(file) = self.file.as_mut() {
                    for p in pieces {
                        let (o, w, n) = (p.output as usize, p.within as usize, p.len as usize);
                        file[o..o + n].copy_from_slice(&bytes[w..w + n]);
                    }
                }
                self.steps.push(Step::Report);
            }
            Step::Report => self.session.write_done(0, Ok(())),
            Step::Verify(v) => {
                let doc = v.doc;
                let r = v.run();
                self.session.verified(doc, r, Duration::ZERO);
            }
            Step::Commit(c) => {
                let mut file = if c.opened {
                    self.file.take().expect("an opened document has its file")
                } else {
                    vec![0; c.file.len as usize]
                };
                if let Some((s, e)) = &c.marks {
                    for (at, start) in c.placement.mark_offsets() {
                        let m = if start { s } else { e };
                        file[at as usize..at as usize + m.len()].copy_from_slice(m);
                    }
                }
                assert_eq!(file.len() as u64, self.output_len);
                self.committed = Some(file);
                self.session
                    .committed(0, Ok((Duration::ZERO, Duration::ZERO)));
            }
        }
        self.drain();
    }
}

/// A document: content, its classified ranges (merged), and how each stream is cut into frames.
type Case = (Vec<u8>, Vec<(u64, u64)>, Vec<usize>, Vec<usize>);

fn case() -> impl Strategy<Value = Case> {
    (1usize..200)
        .prop_flat_map(|len| {
            (
                proptest::collection::vec(any::<u8>(), len),
                proptest::collection::vec((0..len as u64, 0..len as u64), 0..4),
                proptest::collection::vec(1usize..40, 1..10),
                proptest::collection::vec(1usize..40, 1..10),
            )
        })
        .prop_map(|(content, raw, pcuts, scuts)| {
            let mut ranges: Vec<(u64, u64)> =
                raw.into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
            ranges.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for (a, b) in ranges {
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            (content, merged, pcuts, scuts)
        })
}

fn frames(kind: Kind, stream: &[u8], cuts: &[usize]) -> Vec<Frame> {
    let mut out = Vec::new();
    let (mut at, mut i) = (0usize, 0usize);
    while at < stream.len() {
        let n = cuts[i % cuts.len()].min(stream.len() - at);
        out.push(Frame {
            kind,
            offset: at as u64,
            bytes: stream[at..at + n].to_vec(),
        });
        at += n;
        i += 1;
    }
    out
}

fn stream(content: &[u8], layout: &Layout, kind: Kind) -> Vec<u8> {
    let p = Placement::new(layout, None).unwrap();
    let mut s = vec![0; layout.stream_len(kind) as usize];
    p.place(kind, 0, s.len() as u64, |o, w, n| {
        s[w as usize..(w + n) as usize].copy_from_slice(&content[o as usize..(o + n) as usize])
    })
    .unwrap();
    s
}

/// Run one document through the world in the order `choices` picks; `forge`: which honest plain
/// frame a forged copy (one byte changed) of is injected, if any.
fn run(
    content: &[u8],
    ranges: &[(u64, u64)],
    pcuts: &[usize],
    scuts: &[usize],
    forge: Option<usize>,
    choices: &[usize],
) -> World {
    let ranges: Vec<std::ops::Range<u64>> = ranges.iter().map(|&(a, b)| a..b).collect();
    let layout = Layout::from_ranges(content.len() as u64, &ranges);
    let plain = stream(content, &layout, Kind::Plain);
    let secure = stream(content, &layout, Kind::Secure);
    let mut honest = frames(Kind::Plain, &plain, pcuts);
    let mut sender = Ledger::new();
    for f in &honest {
        sender.record_hashed(f.offset, f.bytes.len() as u64, tag(f.offset, &f.bytes));
    }
    let digest = sender.finish(plain.len() as u64).unwrap();
    let forged = forge.and_then(|i| {
        let f = honest.get(i % honest.len().max(1))?;
        let mut bytes = f.bytes.clone();
        bytes[0] ^= 0x5a;
        Some(Frame { bytes, ..f.clone() })
    });
    honest.extend(frames(Kind::Secure, &secure, scuts));
    let end = DocEnd {
        doc: 0,
        plain_digest: digest,
        secure_len: secure.len() as u64,
        plain_len: plain.len() as u64,
    };
    let pool = Arc::new(AtomicPool::new(1 << 22));
    let session = ReceiverSession::new(hello(Mode::Sieve, 1), limits(), pool).unwrap();
    let mut w = World {
        session,
        file: None,
        committed: None,
        acks: Vec::new(),
        steps: honest.into_iter().map(Step::Deliver).collect(),
        aborted: None,
        output_len: content.len() as u64,
    };
    w.steps.push(Step::End);
    if let Some(f) = forged {
        w.steps.push(Step::Deliver(f));
    }
    announce(
        &mut w.session,
        Doc {
            doc: 0,
            name: "doc".into(),
            layout,
            marks: None,
            padding: 0,
        },
    )
    .unwrap();
    w.drain();
    let mut pick = choices.iter().copied().collect::<VecDeque<_>>();
    while !w.steps.is_empty() {
        let i = pick.pop_front().unwrap_or(0) % w.steps.len();
        let s = w.steps.swap_remove(i);
        w.step(s, &end);
    }
    w
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Without a forgery, every order of frames, DOC_END and completions stores the document,
    /// byte for byte, and gives back every byte of memory it was charged.
    #[test]
    fn honest_documents_are_stored_in_any_order(
        (content, ranges, pcuts, scuts) in case(),
        choices in proptest::collection::vec(any::<usize>(), 0..200),
    ) {
        let w = run(&content, &ranges, &pcuts, &scuts, None, &choices);
        prop_assert!(w.aborted.is_none(), "{:?}", w.aborted);
        prop_assert_eq!(w.acks.len(), 1);
        prop_assert_eq!(w.acks[0].0, AckStatus::Ok, "{}", &w.acks[0].1);
        prop_assert_eq!(w.committed.as_deref(), Some(&content[..]));
        prop_assert_eq!(w.session.in_progress(), 0);
    }

    /// A forged cleartext frame over bytes an honest frame covers, injected at any point (before
    /// the honest one, between it and DOC_END, while the document is verified, while its last
    /// write is in flight, after the commit began): the document is never acknowledged as stored
    /// with anything but the honest bytes, and the forged frame is never written after the
    /// document closed.
    #[test]
    fn a_forged_frame_is_never_committed(
        (content, ranges, pcuts, scuts) in case(),
        forge in any::<usize>(),
        choices in proptest::collection::vec(any::<usize>(), 0..200),
    ) {
        let w = run(&content, &ranges, &pcuts, &scuts, Some(forge), &choices);
        for (status, msg) in &w.acks {
            if *status == AckStatus::Ok {
                prop_assert_eq!(w.committed.as_deref(), Some(&content[..]), "{}", msg);
            }
        }
        if w.acks.iter().all(|(s, _)| *s != AckStatus::Ok) {
            // Refused or failed: whatever was committed (nothing) is not the forgery.
            prop_assert!(w.committed.is_none() || w.committed.as_deref() == Some(&content[..]));
        }
    }
}

/// The attack of the security review, step by step: the last honest plain frame is held back
/// until DOC_END has passed, then released and followed on the same stream by a forged frame
/// over offsets already covered. The honest frame closes the document; the forged one is refused
/// before anything of it is written, and the document commits the honest bytes.
#[test]
fn a_frame_after_the_closing_one_is_refused_not_written() {
    let content = b"public public SECRET public tail".to_vec();
    // Plain stream: 26 bytes in two frames of 13.
    let layout = Layout::from_ranges(content.len() as u64, &[14..20]);
    let plain = stream(&content, &layout, Kind::Plain);
    let secure = stream(&content, &layout, Kind::Secure);
    let pool = Arc::new(AtomicPool::new(1 << 22));
    let mut s = ReceiverSession::new(hello(Mode::Sieve, 1), limits(), pool.clone()).unwrap();
    announce(
        &mut s,
        Doc {
            doc: 0,
            name: "doc".into(),
            layout,
            marks: None,
            padding: 0,
        },
    )
    .unwrap();
    let now = Instant::now();
    let t = |o: u64, b: &[u8]| vec![(o, b.len() as u64, tag(o, b))];
    let mut sender = Ledger::new();
    sender.record_hashed(0, 13, tag(0, &plain[..13]));
    sender.record_hashed(13, 13, tag(13, &plain[13..]));
    let end = DocEnd {
        doc: 0,
        plain_digest: sender.finish(26).unwrap(),
        secure_len: secure.len() as u64,
        plain_len: 26,
    };
    assert!(matches!(
        s.data(Kind::Secure, 0, 0, 6, &[], now),
        Ok(Verdict::Write { .. })
    ));
    assert!(matches!(
        s.data(Kind::Plain, 0, 0, 13, &t(0, &plain[..13]), now),
        Ok(Verdict::Write { .. })
    ));
    s.doc_end(end, now).unwrap();
    assert!(s.poll_action().is_none(), "not complete yet");
    // The held-back honest frame closes the document: its ledgers go out to be checked.
    assert!(matches!(
        s.data(Kind::Plain, 0, 13, 13, &t(13, &plain[13..]), now),
        Ok(Verdict::Write { .. })
    ));
    let Some(Action::Verify(v)) = s.poll_action() else {
        panic!("expected a verification")
    };
    // The forged frame right behind it is refused; nothing of it is to be written.
    let forged = b"XXXXXXXXXXXXX";
    assert_eq!(
        s.data(Kind::Plain, 0, 0, 13, &t(0, forged), now),
        Err(ProtocolError::AfterComplete(0))
    );
    assert!(v.run().is_ok(), "the ledgers hold the honest tags only");
    // No commit while writes are in flight.
    s.verified(0, Ok(()), Duration::ZERO);
    assert!(s.poll_action().is_none());
    s.write_done(0, Ok(()));
    s.write_done(0, Ok(()));
    assert!(s.poll_action().is_none());
    s.write_done(0, Ok(()));
    assert!(matches!(s.poll_action(), Some(Action::Commit(_))));
    s.committed(0, Ok((Duration::ZERO, Duration::ZERO)));
    assert!(
        matches!(s.poll_action(), Some(Action::Ack { ack: a, .. }) if a.status == AckStatus::Ok)
    );
}

/// Compressed frames: only the kinds both ends agreed to, and a classified one only within one
/// classified segment. A compressed plain frame is then recorded like any other, with the one
/// tag of what travelled covering its declared length.
#[test]
fn compressed_frames_need_agreement_and_classified_ones_one_segment() {
    // Classified: "SECRET" (14..20) and "KEY" (26..29); both segments are 6 and 3 bytes of the
    // secure stream, at 0..6 and 6..9.
    let content = b"public public SECRET plain KEY tail".to_vec();
    let layout = Layout::from_ranges(content.len() as u64, &[14..20, 26..29]);
    let manifest = || Doc {
        doc: 0,
        name: "doc".into(),
        layout: layout.clone(),
        marks: None,
        padding: 0,
    };
    let pool = Arc::new(AtomicPool::new(1 << 22));
    // The sender offered nothing: every compressed frame is refused.
    let mut s = ReceiverSession::new(hello(Mode::Sieve, 1), limits(), pool.clone()).unwrap();
    announce(&mut s, manifest()).unwrap();
    assert_eq!(s.compression(), CompressFlags::NONE);
    assert_eq!(
        s.compressed(Kind::Plain, z3(), 0, 0, 10),
        Err(ProtocolError::CompressionRefused { kind: Kind::Plain })
    );
    // Offered both, the receiver accepts plain only.
    let mut h = hello(Mode::Sieve, 1);
    h.compression = CompressFlags::ALL;
    let only_plain = SessionLimits {
        accept_compression: CompressFlags::PLAIN,
        ..limits()
    };
    let mut s = ReceiverSession::new(h, only_plain, pool.clone()).unwrap();
    announce(&mut s, manifest()).unwrap();
    assert_eq!(s.compression(), CompressFlags::PLAIN);
    assert_eq!(s.compressed(Kind::Plain, z3(), 0, 0, 26), Ok(()));
    assert_eq!(
        s.compressed(Kind::Secure, z3(), 0, 0, 6),
        Err(ProtocolError::CompressionRefused { kind: Kind::Secure })
    );
    // Both accepted: a classified frame within one segment passes, across two it does not.
    let mut s = ReceiverSession::new(h, limits(), pool).unwrap();
    announce(&mut s, manifest()).unwrap();
    assert_eq!(s.compression(), CompressFlags::ALL);
    assert_eq!(s.compressed(Kind::Secure, z3(), 0, 0, 6), Ok(()));
    assert_eq!(s.compressed(Kind::Secure, z3(), 0, 6, 3), Ok(()));
    assert_eq!(s.compressed(Kind::Secure, z3(), 0, 2, 3), Ok(()));
    assert_eq!(
        s.compressed(Kind::Secure, z3(), 0, 4, 4),
        Err(ProtocolError::SegmentsMixed { offset: 4, len: 4 })
    );
    assert!(matches!(
        s.compressed(Kind::Secure, z3(), 0, 8, 4),
        Err(ProtocolError::OutOfStream(_))
    ));
    // In the field code, which codes every byte alone, a frame may hold several segments; it
    // must still lie within the stream.
    assert_eq!(
        s.compressed(Kind::Secure, FrameCodec::Fields, 0, 4, 4),
        Ok(())
    );
    assert_eq!(
        s.compressed(Kind::Secure, FrameCodec::Fields, 0, 0, 9),
        Ok(())
    );
    assert!(matches!(
        s.compressed(Kind::Secure, FrameCodec::Fields, 0, 8, 4),
        Err(ProtocolError::OutOfStream(_))
    ));
    // A whole plain stream in one compressed frame: one tag covers all of it.
    let plain = stream(&content, &layout, Kind::Plain);
    let n = plain.len() as u64;
    assert!(matches!(
        s.data(Kind::Plain, 0, 0, n, &[(0, n, tag(0, b"what travelled"))], Instant::now()),
        Ok(Verdict::Write { pieces, .. }) if pieces.len() == 3
    ));
}

/// Manifests are paid for: one whose placement and ledgers the session cannot afford is refused
/// with a LIMIT message, memory taken is given back when documents finish, and a store failure
/// fails one document, not the session.
#[test]
fn manifests_are_charged_and_refused_beyond_the_share() {
    let pool = Arc::new(AtomicPool::new(1 << 30));
    let mut l = limits();
    l.memory = 64 << 10;
    l.max_segments = 1 << 20;
    let mut s = ReceiverSession::new(hello(Mode::Sieve, 3), l, pool.clone()).unwrap();
    let big = Layout {
        first: Kind::Plain,
        lens: vec![1; 100_000],
    };
    announce(
        &mut s,
        Doc {
            doc: 0,
            name: "big".into(),
            layout: big,
            marks: None,
            padding: 0,
        },
    )
    .unwrap();
    let Some(Action::Ack { ack: a, .. }) = s.poll_action() else {
        panic!("expected a refusal")
    };
    assert_eq!(a.status, AckStatus::Refused);
    assert!(a.message.starts_with("LIMIT:"), "{}", a.message);
    // Frames of a refused document are dropped, not errors.
    assert_eq!(
        s.data(Kind::Plain, 0, 0, 1, &[(0, 1, [0; 32])], Instant::now()),
        Ok(Verdict::Drop)
    );
    let small = Layout::whole(Kind::Plain, 4);
    announce(
        &mut s,
        Doc {
            doc: 1,
            name: "small".into(),
            layout: small,
            marks: None,
            padding: 0,
        },
    )
    .unwrap();
    let held = s.memory_held();
    assert!(held > 0 && pool.used() == held);
    assert!(matches!(
        s.data(Kind::Plain, 1, 0, 4, &[(0, 4, [1; 32])], Instant::now()),
        Ok(Verdict::Write { .. })
    ));
    s.write_done(
        1,
        Err(Failure {
            status: AckStatus::StoreError,
            message: "disk full".into(),
        }),
    );
    assert!(matches!(s.poll_action(), Some(Action::Discard { doc: 1 })));
    assert!(
        matches!(s.poll_action(), Some(Action::Ack { ack: a, .. }) if a.status == AckStatus::StoreError)
    );
    // Only the table of phases (one byte per id, in blocks) is still held.
    assert_eq!(s.memory_held(), 4096);
    drop(s);
    assert_eq!(pool.used(), 0);
}

/// Frames of a document whose ledger would grow beyond the session's share (a sender cutting
/// its cleartext into tiny frames and sending them last first, so that none can be folded)
/// fail that document instead of growing without bound.
#[test]
fn ledgers_cannot_grow_without_bound() {
    let pool = Arc::new(AtomicPool::new(1 << 30));
    let mut l = limits();
    l.memory = 200 << 10;
    l.max_doc_bytes = 1 << 30;
    let mut s = ReceiverSession::new(hello(Mode::Sieve, 1), l, pool).unwrap();
    announce(
        &mut s,
        Doc {
            doc: 0,
            name: "d".into(),
            layout: Layout::whole(Kind::Plain, 1 << 20),
            marks: None,
            padding: 0,
        },
    )
    .unwrap();
    let now = Instant::now();
    let mut refused = None;
    for i in (0..(1u64 << 20)).rev() {
        match s.data(Kind::Plain, 0, i, 1, &[(i, 1, [0; 32])], now) {
            Ok(Verdict::Write { .. }) => s.write_done(0, Ok(())),
            Ok(Verdict::Drop) => {
                refused = Some(i);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let at = refused.expect("the ledger was capped");
    let recorded = (1u64 << 20) - at;
    assert!(
        recorded <= (200 << 10) / Ledger::ENTRY_BYTES,
        "{recorded} one-byte frames were held"
    );
    assert!(s.memory_held() <= 200 << 10);
}

/// DOC_END that disagrees, a document announced twice, data beyond the announced documents and
/// a second DOC_END are protocol errors; DOC_END for a refused document is not.
#[test]
fn protocol_errors_end_the_session() {
    let pool = Arc::new(AtomicPool::new(1 << 30));
    let mut s = ReceiverSession::new(hello(Mode::Sieve, 2), limits(), pool).unwrap();
    let doc = |id: u32, name: &str| Doc {
        doc: id,
        name: name.into(),
        layout: Layout::whole(Kind::Plain, 4),
        marks: None,
        padding: 0,
    };
    announce(&mut s, doc(0, "a")).unwrap();
    assert_eq!(
        announce(&mut s, doc(0, "a")),
        Err(ProtocolError::Announced(0))
    );
    assert!(matches!(
        announce(&mut s, doc(2, "c")),
        Err(ProtocolError::DocOutOfRange { doc: 2, max: 2 })
    ));
    announce(&mut s, doc(1, "../escape")).unwrap();
    assert!(
        matches!(s.poll_action(), Some(Action::Ack { ack: a, .. }) if a.status == AckStatus::Refused)
    );
    let end = |id: u32, plain: u64| DocEnd {
        doc: id,
        plain_digest: [0; 32],
        secure_len: 0,
        plain_len: plain,
    };
    let now = Instant::now();
    assert_eq!(s.doc_end(end(1, 4), now), Ok(()));
    assert_eq!(
        s.doc_end(end(0, 5), now),
        Err(ProtocolError::EndMismatch(0))
    );
    s.doc_end(end(0, 4), now).unwrap();
    assert_eq!(s.doc_end(end(0, 4), now), Err(ProtocolError::EndTwice(0)));
    assert!(matches!(
        s.data(Kind::Plain, 0, 2, 4, &[(2, 4, [0; 32])], now),
        Err(ProtocolError::OutOfStream(_))
    ));
    assert!(matches!(
        s.data(Kind::Plain, 7, 0, 1, &[(0, 1, [0; 32])], now),
        Err(ProtocolError::DocOutOfRange { doc: 7, .. })
    ));
}

/// Secure-only sessions have no plain stream: a plain frame is a protocol error and a manifest
/// with cleartext is refused. Joins take each slot once.
#[test]
fn secure_only_sessions_and_joins() {
    let pool = Arc::new(AtomicPool::new(1 << 30));
    let mut s = ReceiverSession::new(hello(Mode::SecureOnly, 1), limits(), pool).unwrap();
    assert!(s.join(Kind::Secure, 1).is_ok());
    assert!(s.join(Kind::Secure, 1).is_err(), "replayed");
    assert!(
        s.join(Kind::Secure, 0).is_err(),
        "channel 0 is the HELLO's own"
    );
    assert!(s.join(Kind::Plain, 0).is_err(), "no plain channels");
    assert!(matches!(
        s.data(Kind::Plain, 0, 0, 1, &[], Instant::now()),
        Err(ProtocolError::WrongKind { .. })
    ));
    announce(
        &mut s,
        Doc {
            doc: 0,
            name: "x".into(),
            layout: Layout::whole(Kind::Plain, 3),
            marks: None,
            padding: 0,
        },
    )
    .unwrap();
    assert!(
        matches!(s.poll_action(), Some(Action::Ack { ack: a, .. }) if a.message.contains("secure-only"))
    );
}

/// A session that bounds inflation at `ratio` to 1 plus `allowance`, with `docs` plain documents
/// of `len` bytes announced.
fn inflating_session(ratio: u32, allowance: u64, docs: u32, len: u64) -> ReceiverSession {
    let mut h = hello(Mode::Sieve, docs);
    h.compression = CompressFlags::ALL;
    let l = SessionLimits {
        inflate: InflateLimit { ratio, allowance },
        max_docs: docs.max(1),
        ..limits()
    };
    let mut s = ReceiverSession::new(h, l, Arc::new(AtomicPool::new(1 << 30))).unwrap();
    for doc in 0..docs {
        announce(
            &mut s,
            Doc {
                doc,
                name: format!("d{doc}"),
                layout: Layout::whole(Kind::Plain, len),
                marks: None,
                padding: 0,
            },
        )
        .unwrap();
    }
    s
}

/// Compressed frames of documents not yet verified inflate only so far: a document's frames may
/// decompress to `ratio` times their bytes on the wire; beyond that the session's documents
/// share the allowance; the document that would exceed it is refused with LIMIT before its frame
/// is decompressed; a verified document gives its share back, a failed one keeps it.
#[test]
fn compressed_frames_inflate_only_so_far_before_verification() {
    let mut s = inflating_session(4, 100, 4, 1000);
    // Within the ratio: nothing of the allowance is spent.
    assert!(s.may_inflate(0, 40, 10));
    assert_eq!(s.inflate_excess(), 0);
    // 140 bytes from 20: 60 beyond the ratio.
    assert!(s.may_inflate(0, 100, 10));
    assert_eq!(s.inflate_excess(), 60);
    // Frames that compress less earn the ratio's room back, never below nothing.
    assert!(s.may_inflate(0, 10, 100));
    assert_eq!(s.inflate_excess(), 0);
    // Documents share the allowance: 86 for document 1, then 26 more for document 2 is too much.
    assert!(s.may_inflate(1, 90, 1));
    assert_eq!(s.inflate_excess(), 86);
    assert!(s.poll_action().is_none());
    assert!(!s.may_inflate(2, 30, 1));
    match s.poll_action() {
        Some(Action::Ack { ack, .. }) => {
            assert_eq!((ack.doc, ack.status), (2, AckStatus::Refused), "{ack:?}");
            assert!(ack.message.starts_with("LIMIT: "), "{}", ack.message);
            assert!(ack.message.contains("30 bytes from 1"), "{}", ack.message);
            assert!(
                ack.message.contains("--max-compression-ratio"),
                "{}",
                ack.message
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(s.inflate_excess(), 86);
    // The refused document's frames are dropped.
    let now = Instant::now();
    assert!(s.may_inflate(2, 30, 1));
    assert!(matches!(
        s.data(Kind::Plain, 2, 0, 30, &[(0, 30, [0; 32])], now),
        Ok(Verdict::Drop)
    ));
    // A document that fails keeps what it took until the session ends.
    s.cancel(1, "changed").unwrap();
    assert_eq!(s.inflate_excess(), 86);
    assert!(!s.may_inflate(3, 20, 1));

    // A verified document gives its share back.
    let mut s = inflating_session(4, 100, 2, 8);
    let bytes = b"zzzzzzzz";
    assert!(s.may_inflate(0, 8, 1));
    assert_eq!(s.inflate_excess(), 4);
    let t = tag(0, b"what travelled");
    let Ok(Verdict::Write { .. }) = s.data(Kind::Plain, 0, 0, 8, &[(0, 8, t)], now) else {
        panic!("the frame is written");
    };
    s.write_done(0, Ok(()));
    let mut ledger = Ledger::new();
    ledger.record_hashed(0, bytes.len() as u64, t);
    let end = DocEnd {
        doc: 0,
        plain_digest: ledger.finish(8).unwrap(),
        secure_len: 0,
        plain_len: 8,
    };
    s.doc_end(end, now).unwrap();
    let Some(Action::Verify(v)) = s.poll_action() else {
        panic!("the document is verified");
    };
    s.verified(0, v.run(), Duration::ZERO);
    assert_eq!(s.inflate_excess(), 0);
    assert!(s.may_inflate(1, 104, 1));

    // Ratio 0: no bound.
    let mut s = inflating_session(0, 0, 1, 1 << 30);
    assert!(s.may_inflate(0, 1 << 24, 1));
}

proptest! {
    /// Whatever frames a peer sends, the session's documents never hold more than the allowance
    /// beyond the ratio, and a document whose frames stay within the ratio is never refused
    /// however the others inflate.
    #[test]
    fn inflation_stays_within_the_ratio_and_allowance(
        frames in proptest::collection::vec((0u32..3, 1u64..5000, 1u64..100), 1..200),
        honest in proptest::collection::vec((1u64..=8, 1u64..100), 1..50),
    ) {
        let (ratio, allowance) = (8u32, 4096u64);
        let mut s = inflating_session(ratio, allowance, 4, 1 << 40);
        let mut accepted = [(0u64, 0u64); 3];
        let mut honest = honest.into_iter().cycle();
        for (doc, declared, wire) in frames {
            let refused_before = matches!(s.lookup(doc), Ok(sieve_core::receiver::Lookup::Drop));
            if s.may_inflate(doc, declared, wire) && !refused_before {
                accepted[doc as usize].0 += declared;
                accepted[doc as usize].1 += wire;
            }
            prop_assert!(s.inflate_excess() <= allowance);
            let (inflated, on_wire): (u64, u64) = accepted
                .iter()
                .fold((0, 0), |(a, b), &(x, y)| (a + x, b + y));
            prop_assert!(inflated <= on_wire * u64::from(ratio) + allowance);
            // Document 3 compresses as honest data does, within the ratio.
            let (per_byte, w) = honest.next().unwrap();
            prop_assert!(s.may_inflate(3, per_byte * w, w), "an honest frame was refused");
        }
    }
}

fn z3() -> FrameCodec {
    FrameCodec::Zstd(sieve_core::compress::Codec::zstd(3).unwrap())
}
