//! The sender's state machine against every order in which its channels, the window and the
//! receiver's answers can interleave: a proptest-chosen schedule decides which channel sends its
//! piece next and when the simulated receiver answers a document it has the DOC_END of.
//!
//! Whatever the order: every byte of every stream is handed out exactly once, no piece of a
//! document beyond the window is sent, a DOC_END comes only after every piece of its document,
//! and an honest session delivers every document. A failure answered early fails exactly that
//! document; a changed file is cancelled, never vouched for.

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use sieve_core::batch::BatchSplit;
use sieve_core::layout::{Kind, Layout};
use sieve_core::mac::{MacAlg, MacOffer};
use sieve_core::message::golomb::EncodedLens;
use sieve_core::message::{
    Ack, AckStatus, CompressFlags, ErrorMsg, JoinOk, Message, Mode, SessionMsg, DATA_PREFIX_LEN,
    MAX_PLAIN_CHANNELS, MAX_SECURE_CHANNELS, PROTOCOL_VERSION,
};
use sieve_core::sender::{
    Assignment, Channel, Chunk, Control, DocSpec, Ended, Finish, JoinRefused, ManifestError,
    SenderConfig, SenderSession, SessionRefused,
};
use sieve_core::split::Split;
use sieve_core::Piece;

fn config(mode: Mode, n: u8, m: u8, split: Split, batch: BatchSplit, chunk: u32) -> SenderConfig {
    SenderConfig {
        mode,
        secure_channels: n,
        plain_channels: m,
        split,
        batch_split: batch,
        chunk: Chunk::Bytes(chunk),
        macs: MacOffer::only(MacAlg::Gmac),
        compression: CompressFlags::NONE,
    }
}

fn session_msg(max_open_docs: u32) -> SessionMsg {
    SessionMsg {
        session_id: [7; 16],
        plain_addr: "127.0.0.1:7080".into(),
        max_payload: 64 << 10,
        max_open_docs,
        mac: MacAlg::Gmac,
        compression: CompressFlags::NONE,
        decompress_mbps: 0,
        decompress_cores: 1,
    }
}

/// Every other spec brings its lengths encoded, as the transport's do, and the rest leave
/// them to the session: both must announce the same manifests.
fn spec(i: usize, first: Kind, lens: Vec<u64>) -> DocSpec {
    let layout = Layout { first, lens };
    DocSpec {
        name: format!("doc-{i}.txt"),
        lens: i.is_multiple_of(2).then(|| EncodedLens::of(&layout)),
        layout,
        marks: None,
    }
}

/// A session through HELLO, SESSION, every JOIN, the plan and the manifests: returns the
/// documents complete at once (no bytes).
fn open(s: &mut SenderSession, max_open_docs: u32) -> Vec<u32> {
    s.on_hello_answer(Message::Session(session_msg(max_open_docs)))
        .expect("an honest SESSION is taken");
    let extra: Vec<Channel> = s.extra_channels().collect();
    assert!(!s.all_joined() || extra.is_empty());
    for c in extra {
        let join = s.join(c, [1; 32]).unwrap();
        assert_eq!(
            (join.kind, join.index, join.session_id),
            (c.kind, c.index, [7; 16])
        );
        s.on_join_answer(c, Message::JoinOk(JoinOk {})).unwrap();
    }
    assert!(s.all_joined());
    s.plan().unwrap();
    s.announce().unwrap()
}

fn ok(doc: u32, status: AckStatus) -> Ack {
    Ack {
        doc,
        status,
        message: String::new(),
        receive_us: 0,
        integrate_us: 0,
        commit_us: 0,
    }
}

/// What the simulated transport saw.
#[derive(Default)]
struct Seen {
    /// Bytes handed out, per (doc, kind): offset → len.
    pieces: BTreeMap<(u32, Kind), BTreeMap<u64, u64>>,
    manifests: Vec<u32>,
    ends: Vec<u32>,
    cancels: Vec<(u32, String)>,
}

impl Seen {
    fn sent(&self, doc: u32, kind: Kind) -> u64 {
        self.pieces
            .get(&(doc, kind))
            .map_or(0, |m| m.values().sum())
    }

    fn record(&mut self, kind: Kind, p: Piece) {
        let m = self.pieces.entry((p.doc, kind)).or_default();
        // No byte is handed out twice.
        if let Some((&o, &l)) = m.range(..=p.offset).next_back() {
            assert!(o + l <= p.offset, "{p:?} overlaps {o}+{l}");
        }
        if let Some((&o, _)) = m.range(p.offset..).next() {
            assert!(p.offset + p.len <= o, "{p:?} overlaps the piece at {o}");
        }
        m.insert(p.offset, p.len);
    }
}

/// Run a session whose receiver answers `fail` (if any) with a store error as soon as one piece
/// of it is out, and whose files `changed` change before they end.
fn drive(
    cfg: &SenderConfig,
    docs: Vec<DocSpec>,
    max_open_docs: u32,
    schedule: &[u16],
    fail: Option<u32>,
    changed: &HashSet<u32>,
) -> (SenderSession, Seen) {
    let lens: Vec<[u64; 2]> = docs
        .iter()
        .map(|d| [Kind::Plain, Kind::Secure].map(|k| d.layout.stream_len(k)))
        .collect();
    let mut s = SenderSession::new(cfg, docs);
    let mut seen = Seen::default();
    let mut finishing: Vec<u32> = open(&mut s, max_open_docs);
    let channels: Vec<Channel> = [Kind::Secure, Kind::Plain]
        .into_iter()
        .flat_map(|kind| (0..s.channels(kind)).map(move |index| Channel { kind, index }))
        .collect();
    let mut held: Vec<Option<Assignment>> =
        channels.iter().map(|&c| s.advance(c, None).next).collect();
    let mut ended: Vec<u32> = Vec::new();
    let mut failed_early = false;
    let mut step = 0usize;
    loop {
        // The transport finishes what completed, and writes what the session queued.
        for doc in finishing.drain(..) {
            let how = if changed.contains(&doc) {
                Finish::Changed {
                    why: "its size changed".into(),
                }
            } else {
                Finish::Sent {
                    plain_digest: [doc as u8; 32],
                }
            };
            s.finish_doc(doc, how);
        }
        while let Some(c) = s.poll_control() {
            match c {
                Control::Doc(d) => seen.manifests.push(d.doc().doc),
                Control::DocEnd(e) => {
                    let i = e.doc as usize;
                    // Only after every piece of its document, with the manifest's lengths.
                    assert_eq!([e.plain_len, e.secure_len], lens[i]);
                    assert_eq!(seen.sent(e.doc, Kind::Plain), lens[i][0], "DOC_END early");
                    assert_eq!(seen.sent(e.doc, Kind::Secure), lens[i][1], "DOC_END early");
                    assert_eq!(e.plain_digest, [e.doc as u8; 32]);
                    assert!(!changed.contains(&e.doc), "a changed file vouched for");
                    seen.ends.push(e.doc);
                    ended.push(e.doc);
                }
                Control::DocCancel(c) => {
                    seen.cancels.push((c.doc, c.reason));
                    ended.push(c.doc);
                }
                Control::Bye(_) => panic!("BYE before every answer"),
            }
        }
        // Once every document is answered, channels still report the pieces they hold (a
        // failed document's, skipped).
        if s.all_answered() && held.iter().all(Option::is_none) {
            break;
        }
        let pick = schedule
            .get(step % schedule.len().max(1))
            .copied()
            .unwrap_or(0) as usize;
        step += 1;
        // Who can move: a channel holding a piece the window lets it send, or the receiver
        // with a document it can answer.
        let ready: Vec<usize> = (0..channels.len())
            .filter(|&i| held[i].is_some_and(|a| s.may_send(a.piece.doc)))
            .collect();
        let answer_first = pick.is_multiple_of(3) && !ended.is_empty();
        if ready.is_empty() || answer_first {
            if ended.is_empty() {
                panic!("stuck: nothing to send and nothing to answer; held {held:?}");
            }
            let doc = ended.remove(pick % ended.len());
            let status = if changed.contains(&doc) {
                AckStatus::Cancelled
            } else {
                AckStatus::Ok
            };
            let a = s.on_answer(Message::Ack(ok(doc, status))).unwrap();
            assert_eq!(a.delivered, status == AckStatus::Ok);
            continue;
        }
        let i = ready[pick % ready.len()];
        let Some(a) = held[i] else { continue };
        let doc = a.piece.doc;
        // The window: every document `window` places back is answered.
        assert!(
            doc < s.acked_below() + s.window(),
            "document {doc} sent with only {} answered (window {})",
            s.acked_below(),
            s.window()
        );
        seen.record(channels[i].kind, a.piece);
        if fail == Some(doc) && !failed_early {
            failed_early = true;
            let a = s
                .on_answer(Message::Ack(ok(doc, AckStatus::StoreError)))
                .unwrap();
            assert!(!a.delivered);
        }
        let p = s.advance(channels[i], Some(a.piece));
        finishing.extend(p.finished);
        held[i] = p.next;
    }
    assert!(held.iter().all(Option::is_none), "pieces left: {held:?}");
    assert!(s.close());
    assert!(matches!(s.poll_control(), Some(Control::Bye(_))));
    (s, seen)
}

fn layouts() -> impl Strategy<Value = Vec<(bool, Vec<u64>)>> {
    prop::collection::vec(
        (any::<bool>(), prop::collection::vec(1u64..3000, 0..6)),
        1..7,
    )
}

fn splits() -> impl Strategy<Value = (Split, BatchSplit)> {
    (
        prop::sample::select(vec![Split::Dynamic, Split::Even, Split::Segment]),
        prop::sample::select(vec![
            BatchSplit::Dynamic,
            BatchSplit::Even,
            BatchSplit::Segment,
            BatchSplit::File,
        ]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn an_honest_session_delivers_every_document_within_the_window(
        layouts in layouts(),
        secure_only in any::<bool>(),
        (n, m) in (1u8..4, 1u8..4),
        (split, batch) in splits(),
        chunk in 300u32..5000,
        max_open in 1u32..4,
        schedule in prop::collection::vec(any::<u16>(), 1..64),
    ) {
        let mode = if secure_only { Mode::SecureOnly } else { Mode::Sieve };
        let docs: Vec<DocSpec> = layouts
            .into_iter()
            .enumerate()
            .map(|(i, (secure_first, lens))| {
                if secure_only {
                    spec(i, Kind::Secure, vec![lens.iter().sum::<u64>()].into_iter().filter(|&l| l > 0).collect())
                } else {
                    spec(i, if secure_first { Kind::Secure } else { Kind::Plain }, lens)
                }
            })
            .collect();
        let n_docs = docs.len();
        let cfg = config(mode, n, m, split, batch, chunk);
        let (s, seen) = drive(&cfg, docs, max_open, &schedule, None, &HashSet::new());
        prop_assert_eq!(seen.manifests, (0..n_docs as u32).collect::<Vec<_>>());
        let mut ends = seen.ends.clone();
        ends.sort_unstable();
        prop_assert_eq!(ends, (0..n_docs as u32).collect::<Vec<_>>());
        prop_assert!(seen.cancels.is_empty());
        prop_assert!(s.answers().iter().all(|a| a.as_ref().is_some_and(|a| a.status == AckStatus::Ok)));
        if secure_only {
            prop_assert_eq!(s.hello().plain_channels, 0);
        }
    }

    #[test]
    fn an_early_failure_fails_exactly_that_document(
        layouts in layouts(),
        (n, m) in (1u8..4, 1u8..4),
        (split, batch) in splits(),
        max_open in 1u32..4,
        fail in any::<prop::sample::Index>(),
        schedule in prop::collection::vec(any::<u16>(), 1..64),
    ) {
        let docs: Vec<DocSpec> = layouts
            .into_iter()
            .enumerate()
            .map(|(i, (f, mut lens))| {
                lens.push(100); // every document has a byte, so it can fail mid-way
                spec(i, if f { Kind::Secure } else { Kind::Plain }, lens)
            })
            .collect();
        let failed = fail.index(docs.len()) as u32;
        let cfg = config(Mode::Sieve, n, m, split, batch, 512);
        let (s, seen) = drive(&cfg, docs, max_open, &schedule, Some(failed), &HashSet::new());
        for (i, a) in s.answers().iter().enumerate() {
            let a = a.as_ref().expect("every document answered");
            prop_assert_eq!(a.status == AckStatus::Ok, i as u32 != failed, "document {}", i);
        }
        // The failed document is vouched for only if its last piece went out before the
        // failure came; never after.
        prop_assert!(seen.cancels.is_empty());
    }

    #[test]
    fn a_changed_file_is_cancelled_not_vouched_for(
        layouts in layouts(),
        which in prop::collection::hash_set(0u32..7, 0..4),
        schedule in prop::collection::vec(any::<u16>(), 1..64),
    ) {
        let docs: Vec<DocSpec> = layouts
            .into_iter()
            .enumerate()
            .map(|(i, (f, lens))| spec(i, if f { Kind::Secure } else { Kind::Plain }, lens))
            .collect();
        let changed: HashSet<u32> = which.into_iter().filter(|&d| (d as usize) < docs.len()).collect();
        let cfg = config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic, 1000);
        let (s, seen) = drive(&cfg, docs, 2, &schedule, None, &changed);
        let cancelled: HashSet<u32> = seen.cancels.iter().map(|c| c.0).collect();
        prop_assert_eq!(&cancelled, &changed);
        for (doc, reason) in &seen.cancels {
            prop_assert!(reason.starts_with(&format!("doc-{doc}.txt changed while it was being sent")), "{}", reason);
        }
        for e in &seen.ends {
            prop_assert!(!changed.contains(e));
        }
        for (i, a) in s.answers().iter().enumerate() {
            let want = if changed.contains(&(i as u32)) { AckStatus::Cancelled } else { AckStatus::Ok };
            prop_assert_eq!(a.as_ref().map(|a| a.status), Some(want));
        }
    }
}

fn one_doc_session() -> SenderSession {
    let cfg = config(Mode::Sieve, 2, 2, Split::Dynamic, BatchSplit::Dynamic, 4096);
    SenderSession::new(&cfg, vec![spec(0, Kind::Plain, vec![10, 20, 30])])
}

#[test]
fn hello_says_what_the_configuration_asks_within_the_protocols_limits() {
    let cfg = config(Mode::Sieve, 200, 0, Split::Even, BatchSplit::File, 4096);
    let s = SenderSession::new(&cfg, vec![spec(0, Kind::Plain, vec![5])]);
    let h = s.hello();
    assert_eq!(h.version, PROTOCOL_VERSION);
    assert_eq!(
        (h.secure_channels, h.plain_channels),
        (MAX_SECURE_CHANNELS, 1)
    );
    assert_eq!(
        (h.split, h.batch_split, h.chunk_size, h.docs),
        (Split::Even, BatchSplit::File, 4096, 1)
    );
    let cfg = config(
        Mode::SecureOnly,
        3,
        MAX_PLAIN_CHANNELS,
        Split::Dynamic,
        BatchSplit::Dynamic,
        4096,
    );
    let s = SenderSession::new(&cfg, vec![spec(0, Kind::Secure, vec![5])]);
    assert_eq!(
        (s.hello().secure_channels, s.hello().plain_channels),
        (3, 0)
    );
    assert_eq!(s.extra_channels().count(), 2);
}

#[test]
fn a_refused_or_unusable_session_is_refused_with_a_clear_error() {
    // The receiver refuses another protocol version with ERROR.
    let mut s = one_doc_session();
    let e = s
        .on_hello_answer(Message::Error(ErrorMsg::new(
            1,
            "protocol version 4 is not supported",
        )))
        .unwrap_err();
    assert_eq!(
        e,
        SessionRefused::Refused("protocol version 4 is not supported".into())
    );
    assert!(
        e.to_string()
            .contains("refused the session: protocol version 4"),
        "{e}"
    );

    // A MAC the HELLO did not offer: tags would never verify.
    let mut s = one_doc_session();
    let mut msg = session_msg(8);
    msg.mac = MacAlg::Blake3;
    let e = s.on_hello_answer(Message::Session(msg)).unwrap_err();
    assert!(
        matches!(
            e,
            SessionRefused::MacNotOffered {
                chose: MacAlg::Blake3,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("did not offer"), "{e}");

    // A frame limit without room for one byte of data.
    let mut s = one_doc_session();
    let mut msg = session_msg(8);
    msg.max_payload = DATA_PREFIX_LEN as u32;
    let e = s.on_hello_answer(Message::Session(msg)).unwrap_err();
    assert!(matches!(e, SessionRefused::NoRoom { .. }), "{e:?}");

    // Anything else.
    let mut s = one_doc_session();
    let e = s.on_hello_answer(Message::JoinOk(JoinOk {})).unwrap_err();
    assert!(
        e.to_string().starts_with("unexpected answer to HELLO"),
        "{e}"
    );
    assert!(s.session().is_none());
    assert!(
        s.plan().is_err() && s.announce().is_err(),
        "nothing goes before SESSION"
    );
}

#[test]
fn session_limits_shape_the_frames_and_the_window() {
    let cfg = config(
        Mode::Sieve,
        1,
        1,
        Split::Dynamic,
        BatchSplit::Dynamic,
        1 << 20,
    );
    let mut s = SenderSession::new(&cfg, vec![spec(0, Kind::Plain, vec![5])]);
    let mut msg = session_msg(0);
    msg.max_payload = 64 << 10;
    s.on_hello_answer(Message::Session(msg)).unwrap();
    assert_eq!(s.chunk(Kind::Plain), (64 << 10) - DATA_PREFIX_LEN as u32);
    assert_eq!(
        s.window(),
        1,
        "a receiver that holds none open still gets one at a time"
    );
    let mut s = SenderSession::new(&cfg, vec![spec(0, Kind::Plain, vec![5])]);
    let mut msg = session_msg(100_000);
    msg.max_payload = 16 << 20;
    s.on_hello_answer(Message::Session(msg)).unwrap();
    assert_eq!(s.window(), sieve_core::sender::MAX_UNACKED_DOCS);
    assert_eq!(s.chunk(Kind::Plain), 1 << 20);
}

#[test]
fn a_refused_join_says_why() {
    let mut s = one_doc_session();
    s.on_hello_answer(Message::Session(session_msg(4))).unwrap();
    let c = s.extra_channels().next().unwrap();
    let e = s
        .on_join_answer(c, Message::Error(ErrorMsg::new(2, "bad token")))
        .unwrap_err();
    assert_eq!(e, JoinRefused::Refused("bad token".into()));
    assert!(!s.all_joined());
}

#[test]
fn an_ack_twice_out_of_range_or_an_error_ends_the_session() {
    let mut s = one_doc_session();
    assert!(open(&mut s, 4).is_empty());
    assert_eq!(s.on_ack(ok(1, AckStatus::Ok)), Err(Ended::BadAck(1)));
    let a = s.on_ack(ok(0, AckStatus::StoreError)).unwrap();
    assert!(!a.delivered && a.unfinished);
    assert_eq!(s.on_ack(ok(0, AckStatus::Ok)), Err(Ended::BadAck(0)));
    let e = s
        .on_answer(Message::Error(ErrorMsg::new(3, "shutting down")))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the receiver ended the session: shutting down"
    );
    assert!(matches!(
        s.on_answer(Message::JoinOk(JoinOk {})),
        Err(Ended::Unexpected(_))
    ));
}

#[test]
fn empty_documents_are_finished_at_once() {
    let cfg = config(Mode::Sieve, 1, 1, Split::Dynamic, BatchSplit::Dynamic, 4096);
    let docs = vec![
        spec(0, Kind::Plain, vec![]),
        spec(1, Kind::Plain, vec![9]),
        spec(2, Kind::Secure, vec![]),
    ];
    let mut s = SenderSession::new(&cfg, docs);
    assert_eq!(open(&mut s, 8), vec![0, 2]);
}

#[test]
fn a_manifest_beyond_the_frame_limit_is_refused_before_any_is_queued() {
    let cfg = config(Mode::Sieve, 1, 1, Split::Dynamic, BatchSplit::Dynamic, 4096);
    let many: Vec<u64> = vec![1; 40_000];
    let mut s = SenderSession::new(
        &cfg,
        vec![spec(0, Kind::Plain, vec![3]), spec(1, Kind::Plain, many)],
    );
    let mut msg = session_msg(4);
    msg.max_payload = 16 << 10;
    s.on_hello_answer(Message::Session(msg)).unwrap();
    s.plan().unwrap();
    let e = s.announce().unwrap_err();
    assert!(
        matches!(
            e,
            ManifestError::TooLarge {
                doc: 1,
                segments: 40_000,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        s.poll_control().is_none(),
        "no manifest goes when one cannot"
    );
    // Marks are never empty.
    let bad = DocSpec {
        marks: Some((Vec::new(), b"<$E>".to_vec())),
        ..spec(0, Kind::Plain, vec![3])
    };
    let mut s = SenderSession::new(&cfg, vec![bad]);
    s.on_hello_answer(Message::Session(session_msg(4))).unwrap();
    assert!(matches!(
        s.announce(),
        Err(ManifestError::Invalid { doc: 0, .. })
    ));
}
