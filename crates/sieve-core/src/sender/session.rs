//! One session on the sending side: HELLO, SESSION, the channels' JOINs, the plan, the
//! manifests, the pieces, each document's DOC_END or DOC_CANCEL and its answer, as events in and
//! decisions out.

use std::collections::VecDeque;

use crate::message::{
    self, Ack, AckStatus, Bye, CompressFlags, Doc, DocCancel, DocEnd, Hello, Join, Manifest,
    Message, Mode, DATA_PREFIX_LEN, MAX_PLAIN_CHANNELS, MAX_SECURE_CHANNELS, PROTOCOL_VERSION,
};
use crate::Kind;

use super::action::{
    Answered, Assignment, Channel, Control, Ended, Finish, JoinRefused, ManifestError, Progress,
    SessionRefused, TooEarly,
};
use super::document::{DocSpec, Document, Phase};
use super::work::Work;
use super::{SenderConfig, MAX_UNACKED_DOCS};

/// The sending side of one session (see the [module documentation](super)).
#[derive(Debug)]
pub struct SenderSession {
    hello: Hello,
    /// The receiver's answer, once it came.
    session: Option<message::SessionMsg>,
    /// Bytes per data frame by [`Kind::index`]: what the chunk policy wants, then within the
    /// receiver's frame limit once SESSION says it.
    chunks: [u32; 2],
    split: (crate::split::Split, crate::batch::BatchSplit),
    /// The documents' manifests until they are announced.
    specs: Vec<Option<DocSpec>>,
    docs: Vec<Document>,
    /// Each document's answer, once it came.
    answers: Vec<Option<Ack>>,
    answered: usize,
    /// Every document below this index is answered.
    acked_below: u32,
    /// Most documents in progress at once.
    window: u32,
    /// Pieces of each kind, by [`Kind::index`], once planned.
    work: Option<[Work; 2]>,
    /// Channels that joined, one bit per index, by [`Kind::index`]; channel 0 joined with HELLO.
    joined: [u32; 2],
    control: VecDeque<Control>,
}

impl SenderSession {
    /// A session to send `docs` (in this order: their index is their id) as `cfg` asks.
    pub fn new(cfg: &SenderConfig, docs: Vec<DocSpec>) -> SenderSession {
        let secure_channels = cfg.secure_channels.clamp(1, MAX_SECURE_CHANNELS);
        let plain_channels = if cfg.mode == Mode::SecureOnly {
            0
        } else {
            cfg.plain_channels.clamp(1, MAX_PLAIN_CHANNELS)
        };
        let bytes =
            [Kind::Plain, Kind::Secure].map(|k| docs.iter().map(|d| d.layout.stream_len(k)).sum());
        let chunks = cfg.chunk.sizes(
            bytes,
            [u64::from(plain_channels), u64::from(secure_channels)],
        );
        let hello = Hello {
            version: PROTOCOL_VERSION,
            mode: cfg.mode,
            secure_channels,
            plain_channels,
            split: cfg.split,
            batch_split: cfg.batch_split,
            chunk_size: chunks[Kind::Plain.index()].max(chunks[Kind::Secure.index()]),
            docs: u32::try_from(docs.len()).unwrap_or(u32::MAX),
            macs: cfg.macs,
            compression: cfg.compression,
        };
        SenderSession {
            hello,
            session: None,
            chunks,
            split: (cfg.split, cfg.batch_split),
            docs: docs.iter().map(Document::new).collect(),
            answers: vec![None; docs.len()],
            specs: docs.into_iter().map(Some).collect(),
            answered: 0,
            acked_below: 0,
            window: 1,
            work: None,
            joined: [0, 1],
            control: VecDeque::new(),
        }
    }

    /// The HELLO that opens the session on channel 0.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// How many channels of `kind` the session has (channel 0 included).
    pub fn channels(&self, kind: Kind) -> u8 {
        match kind {
            Kind::Secure => self.hello.secure_channels,
            Kind::Plain => self.hello.plain_channels,
        }
    }

    /// The receiver's answer to HELLO arrived. A SESSION is checked (a MAC the HELLO offered,
    /// a frame limit with room for data) and fixes the frame sizes and the window of
    /// unacknowledged documents; an ERROR, or anything else, refuses the session.
    pub fn on_hello_answer(
        &mut self,
        answer: Message,
    ) -> Result<&message::SessionMsg, SessionRefused> {
        let session = match answer {
            Message::Session(s) => s,
            Message::Error(e) => return Err(SessionRefused::Refused(e.message)),
            other => return Err(SessionRefused::Unexpected(format!("{other:?}"))),
        };
        if !self.hello.macs.contains(session.mac) {
            let offered: Vec<&str> = self.hello.macs.algs().iter().map(|a| a.name()).collect();
            return Err(SessionRefused::MacNotOffered {
                chose: session.mac,
                offered: offered.join(", "),
            });
        }
        // Data frames must fit the receiver's frame limit, whatever chunk size was asked for.
        let room = session.max_payload.saturating_sub(DATA_PREFIX_LEN as u32);
        if room == 0 {
            return Err(SessionRefused::NoRoom {
                max_payload: session.max_payload,
                prefix: DATA_PREFIX_LEN,
            });
        }
        self.chunks = self.chunks.map(|c| c.min(room).max(1));
        // The receiver holds a file open per document in progress; it says how many it can.
        self.window = MAX_UNACKED_DOCS.min(session.max_open_docs).max(1);
        Ok(self.session.insert(session))
    }

    /// The receiver's SESSION, once it came.
    pub fn session(&self) -> Option<&message::SessionMsg> {
        self.session.as_ref()
    }

    /// The compressed frames both ends agreed to: offered by HELLO and accepted by SESSION.
    pub fn compression(&self) -> CompressFlags {
        self.session.as_ref().map_or(CompressFlags::NONE, |s| {
            s.compression.intersect(self.hello.compression)
        })
    }

    /// The channels besides channel 0, each of which must JOIN: the extra secure channels, then
    /// the plain ones.
    pub fn extra_channels(&self) -> impl Iterator<Item = Channel> {
        let secure = (1..self.hello.secure_channels).map(|index| Channel {
            kind: Kind::Secure,
            index,
        });
        let plain = (0..self.hello.plain_channels).map(|index| Channel {
            kind: Kind::Plain,
            index,
        });
        secure.chain(plain)
    }

    /// The JOIN `channel` opens with, carrying `token` (the transport derives it from channel
    /// 0's exported keying material).
    pub fn join(&self, channel: Channel, token: [u8; 32]) -> Result<Join, TooEarly> {
        let session = self.session.as_ref().ok_or(TooEarly("join a channel"))?;
        Ok(Join {
            session_id: session.session_id,
            kind: channel.kind,
            index: channel.index,
            token,
        })
    }

    /// The receiver answered `channel`'s JOIN.
    pub fn on_join_answer(&mut self, channel: Channel, answer: Message) -> Result<(), JoinRefused> {
        match answer {
            Message::JoinOk(_) => {
                if let Some(bits) = self.joined.get_mut(channel.kind.index()) {
                    *bits |= 1u32.checked_shl(u32::from(channel.index)).unwrap_or(0);
                }
                Ok(())
            }
            Message::Error(e) => Err(JoinRefused::Refused(e.message)),
            other => Err(JoinRefused::Unexpected(format!("{other:?}"))),
        }
    }

    /// Whether every channel of the session has joined.
    pub fn all_joined(&self) -> bool {
        [Kind::Plain, Kind::Secure].iter().all(|&k| {
            let n = u32::from(self.channels(k));
            let all = 1u64.checked_shl(n).map_or(u64::MAX, |b| b - 1);
            u64::from(self.joined[k.index()]) & all == all
        })
    }

    /// Most bytes of `kind` per data frame (within the receiver's limit once SESSION came).
    pub fn chunk(&self, kind: Kind) -> u32 {
        self.chunks[kind.index()]
    }

    /// Most documents in progress at once: [`MAX_UNACKED_DOCS`], or fewer if the receiver holds
    /// fewer open.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Split each kind's streams over its channels: the thesis's plan for one document
    /// ([`SenderConfig::split`]) or a batch ([`SenderConfig::batch_split`]), or the dynamic
    /// scheduler in chunks of [`SenderSession::chunk`].
    pub fn plan(&mut self) -> Result<(), TooEarly> {
        // The plan needs the frame sizes SESSION fixes, and the layouts announcing gives away.
        if self.session.is_none() || self.specs.iter().any(Option::is_none) {
            return Err(TooEarly("plan the transfer"));
        }
        let work = [Kind::Plain, Kind::Secure].map(|kind| {
            // Secure-only sessions have no plain channel and no plain byte: one empty channel.
            let k = usize::from(self.channels(kind).max(1));
            let lens: Vec<u64> = self.docs.iter().map(|d| d.len(kind)).collect();
            let segments = |s: &Option<DocSpec>| s.as_ref().map(|s| s.layout.lens_of(kind));
            let plan = if let [one] = self.specs.as_slice() {
                self.split.0.plan(&segments(one).unwrap_or_default(), k)
            } else {
                let docs: Vec<Vec<u64>> = self
                    .specs
                    .iter()
                    .map(|s| segments(s).unwrap_or_default())
                    .collect();
                self.split.1.plan(&docs, k)
            };
            Work::new(plan, &lens, u64::from(self.chunks[kind.index()]))
        });
        self.work = Some(work);
        Ok(())
    }

    /// Queue every document's manifest, padded to its size bucket so that its length (which TLS
    /// does not hide) does not tell how many segments it has. Every manifest is checked before
    /// any is queued, so a document that cannot be described fails the session cleanly.
    ///
    /// Returns the documents with no byte to send: they are complete already, and each is to
    /// be finished ([`SenderSession::finish_doc`]) now.
    pub fn announce(&mut self) -> Result<Vec<u32>, ManifestError> {
        let Some(session) = self.session.as_ref() else {
            return Err(TooEarly("announce the documents").into());
        };
        if self.specs.iter().any(Option::is_none) {
            return Err(TooEarly("announce the documents").into());
        }
        let max = session.max_payload;
        let mut manifests = Vec::with_capacity(self.specs.len());
        // A spec's encoded lengths are taken, not copied: if a manifest fails, the session fails
        // with it, and they are only a cache of what the layout gives.
        for (i, spec) in self.specs.iter_mut().flatten().enumerate() {
            let doc = i as u32;
            let mut m = Manifest::new(
                Doc {
                    doc,
                    name: spec.name.clone(),
                    layout: spec.layout.clone(),
                    marks: spec.marks.clone(),
                    padding: 0,
                },
                spec.lens.take(),
            );
            let len = m.pad_to_bucket(max);
            m.doc()
                .validate()
                .map_err(|source| ManifestError::Invalid { doc, source })?;
            if len > max as usize {
                return Err(ManifestError::TooLarge {
                    doc,
                    segments: m.doc().layout.lens.len(),
                    len,
                    max,
                });
            }
            manifests.push(m);
        }
        // The layouts now travel in the manifests; the session keeps only their lengths.
        self.specs.iter_mut().for_each(|s| *s = None);
        self.control.extend(manifests.into_iter().map(Control::Doc));
        let mut empty = Vec::new();
        for (i, d) in self.docs.iter_mut().enumerate() {
            if d.unsent == 0 && d.phase == Phase::Sending {
                d.phase = Phase::Finishing;
                empty.push(i as u32);
            }
        }
        Ok(empty)
    }

    /// The next control message to write on channel 0, in order. Call after every event.
    pub fn poll_control(&mut self) -> Option<Control> {
        self.control.pop_front()
    }

    /// `channel` asks for its next piece.
    pub fn next_piece(&mut self, channel: Channel) -> Option<Assignment> {
        let piece = self
            .work
            .as_mut()?
            .get_mut(channel.kind.index())?
            .next(usize::from(channel.index))?;
        let after = piece
            .doc
            .checked_sub(self.window)
            .filter(|&need| self.acked_below <= need);
        Some(Assignment { piece, after })
    }

    /// Whether the window lets a channel send pieces of `doc` now: every document `window`
    /// places before it is answered.
    pub fn may_send(&self, doc: u32) -> bool {
        doc.checked_sub(self.window)
            .is_none_or(|need| self.acked_below > need)
    }

    /// Every document below this index is answered.
    pub fn acked_below(&self) -> u32 {
        self.acked_below
    }

    /// `piece` is handed to its channel's socket (or skipped, its document being answered or
    /// its file changed). Returns its document if that was its last piece out and it is still
    /// to be finished.
    pub fn piece_sent(&mut self, piece: crate::Piece) -> Option<u32> {
        let answered = self.answers.get(piece.doc as usize)?.is_some();
        let d = self.docs.get_mut(piece.doc as usize)?;
        d.unsent = d.unsent.saturating_sub(piece.len);
        if d.unsent > 0 || d.phase != Phase::Sending {
            return None;
        }
        if answered {
            // Failed early: the receiver drops whatever else comes, and wants no DOC_END.
            d.phase = Phase::Ended;
            return None;
        }
        d.phase = Phase::Finishing;
        Some(piece.doc)
    }

    /// [`SenderSession::piece_sent`] for `sent`, then [`SenderSession::next_piece`]: a channel's
    /// one call between two pieces.
    pub fn advance(&mut self, channel: Channel, sent: Option<crate::Piece>) -> Progress {
        Progress {
            finished: sent.and_then(|p| self.piece_sent(p)),
            next: self.next_piece(channel),
        }
    }

    /// Say how a document whose pieces are all out ends: its DOC_END, with the digest of its
    /// cleartext, or a DOC_CANCEL if its file changed. A document the receiver already answered
    /// gets neither.
    pub fn finish_doc(&mut self, doc: u32, how: Finish) {
        let answered = self.answers.get(doc as usize).is_some_and(Option::is_some);
        let Some(d) = self.docs.get_mut(doc as usize) else {
            return;
        };
        if d.phase != Phase::Finishing {
            return;
        }
        d.phase = Phase::Ended;
        if answered {
            return;
        }
        self.control.push_back(match how {
            Finish::Sent { plain_digest } => Control::DocEnd(DocEnd {
                doc,
                plain_digest,
                secure_len: d.len(Kind::Secure),
                plain_len: d.len(Kind::Plain),
            }),
            // The receiver learns the document's name, not the sender's path.
            Finish::Changed { why } => Control::DocCancel(DocCancel {
                doc,
                reason: format!("{} changed while it was being sent: {why}", d.name),
            }),
        });
    }

    /// A message arrived on channel 0 while documents are unanswered: an acknowledgement is
    /// recorded; anything else ends the session.
    pub fn on_answer(&mut self, msg: Message) -> Result<Answered, Ended> {
        match msg {
            Message::Ack(a) => self.on_ack(a),
            Message::Error(e) => Err(Ended::Error(e.message)),
            other => Err(Ended::Unexpected(format!("{other:?}"))),
        }
    }

    /// The receiver answered a document.
    pub fn on_ack(&mut self, ack: Ack) -> Result<Answered, Ended> {
        let doc = ack.doc;
        let slot = self
            .answers
            .get_mut(doc as usize)
            .filter(|a| a.is_none())
            .ok_or(Ended::BadAck(doc))?;
        let delivered = ack.status == AckStatus::Ok;
        *slot = Some(ack);
        self.answered += 1;
        let below = self.acked_below as usize;
        let more = self.answers[below..]
            .iter()
            .take_while(|a| a.is_some())
            .count();
        self.acked_below = (below + more) as u32;
        let unfinished = self
            .docs
            .get(doc as usize)
            .is_some_and(|d| d.phase == Phase::Sending);
        Ok(Answered {
            doc,
            delivered,
            unfinished,
        })
    }

    /// Whether every document is answered.
    pub fn all_answered(&self) -> bool {
        self.answered == self.answers.len()
    }

    /// How many documents are answered.
    pub fn answered(&self) -> usize {
        self.answered
    }

    /// Each document's answer, by id; `None` while it has none. Only documents answered
    /// [`AckStatus::Ok`] were delivered: verified, durable and under their name at the receiver.
    pub fn answers(&self) -> &[Option<Ack>] {
        &self.answers
    }

    /// End the session once every document is answered: queues its BYE. Returns whether it did.
    pub fn close(&mut self) -> bool {
        if !self.all_answered() {
            return false;
        }
        self.control.push_back(Control::Bye(Bye {}));
        true
    }
}
