//! The temporary files of a session's documents: created on a document's first write, written
//! by position, and committed or discarded when the state machine says so.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use sieve_core::message::AckStatus;
use sieve_core::receiver::{Commit, Failure, FileSpec, ReceiverSession, WritePiece};

use crate::store::{CommitError, PartFile, Store};

use super::limits::Held;
use super::Shared;

/// A document's temporary file, counted in the receiver's open files until it is committed or
/// dropped (dropping it removes it).
struct Open {
    part: PartFile,
    _fd: Held,
}

/// Created by whichever channel writes to the document first; the others wait for it.
#[derive(Default)]
struct DocFile {
    file: OnceLock<Result<Open, Failure>>,
    /// Held while a frame's pieces are written: a block patched in memory ([`write_patched`])
    /// is read and written back whole, and no other channel's write may land in it meanwhile.
    writing: Mutex<()>,
}

/// The files of one session's documents.
pub(super) struct Files {
    shared: Arc<Shared>,
    /// Where they go: the output folder, or this client's folder beneath it; `None` when the
    /// receiver discards what it verifies (it then never asks for a file).
    pub(super) store: Option<Store>,
    /// The session's id in hex, part of every temporary file's name.
    session: String,
    map: Mutex<HashMap<u32, Arc<DocFile>>>,
}

impl Files {
    pub(super) fn new(shared: Arc<Shared>, store: Option<Store>, session: String) -> Files {
        Files {
            shared,
            store,
            session,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<DocFile>>> {
        // Only plain inserts and removes happen under this lock: a poisoned one is consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Create a document's temporary file with its final length, if the receiver has a file
    /// descriptor to spare.
    fn create(&self, spec: &FileSpec) -> Result<Open, Failure> {
        let shared = &self.shared;
        let Some(fd) = Held::take(&shared.fds_used, shared.fds.doc_limit) else {
            shared
                .stats
                .fd_limit_refusals
                .fetch_add(1, Ordering::Relaxed);
            return Err(Failure {
                status: AckStatus::StoreError,
                message: shared.fd_limit_message(),
            });
        };
        let store = self.store.as_ref().ok_or_else(|| Failure {
            status: AckStatus::StoreError,
            message: "internal error: no store for a document to be written".into(),
        })?;
        let part = store
            .create(
                &format!("{}-{}", self.session, spec.doc),
                &spec.name,
                spec.len,
            )
            .map_err(|e| commit_failure(&spec.name, e))?;
        Ok(Open { part, _fd: fd })
    }

    /// Write `pieces` of `payload` into the document's file, creating it on its first write.
    pub(super) fn write(
        &self,
        spec: &FileSpec,
        pieces: &[WritePiece],
        payload: &[u8],
    ) -> Result<(), Failure> {
        let doc = self.map().entry(spec.doc).or_default().clone();
        let open = doc
            .file
            .get_or_init(|| self.create(spec))
            .as_ref()
            .map_err(Clone::clone)?;
        let pieces = pieces
            .iter()
            .map(|p| {
                usize::try_from(p.within)
                    .ok()
                    .zip(usize::try_from(p.len).ok())
                    .and_then(|(at, n)| payload.get(at..at.checked_add(n)?))
                    .map(|bytes| (p.output, bytes))
                    .ok_or_else(|| Failure {
                        status: AckStatus::StoreError,
                        message: "internal error: a write outside its frame".into(),
                    })
            })
            .collect::<Result<Vec<_>, Failure>>()?;
        let _writing = doc.writing.lock().unwrap_or_else(|p| p.into_inner());
        write_patched(&open.part, pieces.into_iter()).map_err(|e| failure(&spec.name, &e))
    }

    /// Drop a document's file (removing it). A write still in flight keeps it open, unlinked,
    /// until it ends.
    pub(super) fn discard(&self, doc: u32) {
        self.map().remove(&doc);
    }

    /// Restore marks, make the file durable, and move it to its name: unless the session has
    /// ended meanwhile, which is checked under the state machine's lock, so that nothing is
    /// renamed into place after a session was torn down. Returns the time spent restoring marks
    /// and making the file durable.
    pub(super) async fn commit(
        self: &Arc<Self>,
        c: Commit,
        sm: &Arc<Mutex<ReceiverSession>>,
    ) -> Result<(Duration, Duration), Failure> {
        let doc = c.file.doc;
        let entry = self.map().remove(&doc);
        let (files, sm) = (self.clone(), sm.clone());
        let name = c.file.name.clone();
        let result = tokio::task::spawn_blocking(move || {
            #[cfg(feature = "test-hooks")]
            super::hooks::run(&super::hooks::BEFORE_COMMIT);
            let open = match entry.map(Arc::try_unwrap) {
                Some(Ok(doc_file)) => match doc_file.file.into_inner() {
                    Some(r) => r?,
                    None => files.create(&c.file)?,
                },
                // Every write is reported done before a commit, so no one else holds it.
                Some(Err(_)) => {
                    return Err(Failure {
                        status: AckStatus::StoreError,
                        message: "internal error: a write outlived its report".into(),
                    })
                }
                None if !c.opened => files.create(&c.file)?,
                None => {
                    return Err(Failure {
                        status: AckStatus::StoreError,
                        message: "internal error: the document's temporary file is gone".into(),
                    })
                }
            };
            let t0 = Instant::now();
            if let Some((start, end)) = &c.marks {
                restore_marks(&open.part, (start, end), c.placement.mark_offsets())
                    .map_err(|e| failure(&c.file.name, &e))?;
            }
            let t1 = Instant::now();
            open.part.sync().map_err(|e| failure(&c.file.name, &e))?;
            // The rename happens under the state machine's lock, after a check that the session
            // is still on: its teardown takes the same lock.
            let sm = sm.lock().unwrap_or_else(|p| p.into_inner());
            if sm.is_ended() {
                return Err(Failure {
                    status: AckStatus::StoreError,
                    message: "the session ended before the document could be committed".into(),
                });
            }
            let Open { part, _fd } = open;
            let r = part.commit();
            drop(sm);
            r.map_err(|e| commit_failure(&c.file.name, e))?;
            Ok((t1 - t0, t1.elapsed()))
        })
        .await;
        result.unwrap_or_else(|e| {
            Err(failure(
                &name,
                &anyhow!("internal error: the commit task failed: {e}"),
            ))
        })
    }
}

/// A store failure as the state machine takes it (what the sender is told).
pub(super) fn failure(name: &str, e: &anyhow::Error) -> Failure {
    Failure {
        status: AckStatus::StoreError,
        message: store_reason(name, e),
    }
}

/// What the store's refusal to create or commit a document becomes: an existing name or a name
/// it will not create is the sender's doing (a refusal), anything else the receiver's.
pub(super) fn commit_failure(name: &str, e: CommitError) -> Failure {
    match e {
        CommitError::Exists { .. } => Failure {
            status: AckStatus::Exists,
            message: e.to_string(),
        },
        CommitError::Refused { .. } => Failure {
            status: AckStatus::Refused,
            message: e.to_string(),
        },
        CommitError::Io { .. } => failure(name, &anyhow::Error::new(e)),
    }
}

/// What the sender is told about a document that could not be stored. The receiver's paths stay
/// in its own log; the sender learns the cause.
pub(super) fn store_reason(name: &str, e: &anyhow::Error) -> String {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>());
    match io {
        Some(io) => match io.raw_os_error() {
            Some(ENOSPC) => {
                format!("cannot store {name}: no space left on the receiver's disk ({io})")
            }
            Some(EDQUOT) => {
                format!("cannot store {name}: the receiver's disk quota is exhausted ({io})")
            }
            Some(EMFILE | ENFILE) => {
                format!("cannot store {name}: the receiver has too many open files ({io})")
            }
            _ => format!("cannot store {name} on the receiver: {io}"),
        },
        None => format!("cannot store {name}: {e:#}"),
    }
}

/// Most bytes of the file patched in memory at once ([`write_patched`]).
const PATCH_BLOCK: u64 = 256 << 10;

/// Fewest pieces in a block for it to be patched in memory rather than piece by piece.
const MANY_PIECES: usize = 16;

/// Write the mark strings `(start, end)` back at `offsets` (ascending, as
/// [`sieve_core::sieve::Placement::mark_offsets`] gives them), once every other byte of the file
/// is written (so nothing else writes it meanwhile).
fn restore_marks(
    part: &PartFile,
    (start, end): (&[u8], &[u8]),
    offsets: impl Iterator<Item = (u64, bool)>,
) -> anyhow::Result<()> {
    write_patched(
        part,
        offsets.map(|(off, is_start)| (off, if is_start { start } else { end })),
    )
}

/// Write `pieces` (file offset, bytes; ascending and apart, as a frame's runs and a document's
/// marks are) into `part`. Where a block of at most [`PATCH_BLOCK`] bytes holds
/// [`MANY_PIECES`] or more, it is read, patched in memory and written whole; elsewhere each
/// piece is written alone. The caller keeps every other writer of the file out meanwhile (a
/// patched block is written back whole).
///
/// Why blocks: a dense document (a log or CSV export with a classified value every hundred
/// bytes) has two marks and two runs per hundred bytes, and a `pwrite` for each made its commit
/// of 8 MiB take longer than its transfer, and writing 16 MiB of log through the sieve take 8.9
/// times secure-only's time (226 ms against 25; 7 rounds, AMD EPYC). A block of runs costs two
/// system calls and two copies of at most [`PATCH_BLOCK`] bytes, whatever the runs in it.
fn write_patched<'a>(
    part: &PartFile,
    pieces: impl Iterator<Item = (u64, &'a [u8])>,
) -> anyhow::Result<()> {
    let mut block: Vec<(u64, &[u8])> = Vec::new();
    let mut buf = Vec::new();
    let mut flush = |block: &mut Vec<(u64, &[u8])>| -> anyhow::Result<()> {
        let (Some(&(first, _)), Some(&(last, last_bytes))) = (block.first(), block.last()) else {
            return Ok(());
        };
        if block.len() < MANY_PIECES {
            for &(off, bytes) in block.iter() {
                part.write_at(off, bytes)?;
            }
        } else {
            let len = usize::try_from(last - first)? + last_bytes.len();
            buf.resize(len, 0);
            part.read_at(first, &mut buf)?;
            for &(off, bytes) in block.iter() {
                let at = usize::try_from(off - first)?;
                buf[at..at + bytes.len()].copy_from_slice(bytes);
            }
            part.write_at(first, &buf)?;
        }
        block.clear();
        Ok(())
    };
    for (off, bytes) in pieces {
        let len = bytes.len() as u64;
        let fits = match (block.first(), block.last()) {
            (Some(&(first, _)), Some(&(last, last_bytes))) => {
                off >= last + last_bytes.len() as u64 && off + len <= first + PATCH_BLOCK
            }
            _ => true,
        };
        if !fits {
            flush(&mut block)?;
        }
        block.push((off, bytes));
    }
    flush(&mut block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;
    use proptest::prelude::*;

    /// Restored marks land where they belong, whether a block is patched in memory or mark by
    /// mark, and the bytes between them are left as written.
    fn check(gaps: &[(u16, bool)]) {
        let (start, end) = (b"<$S>".as_slice(), b"<$E>".as_slice());
        // Lay out content, then a mark, for every gap; remember where marks go.
        let mut expected = Vec::new();
        let mut offsets = Vec::new();
        for (i, &(gap, is_start)) in gaps.iter().enumerate() {
            expected.extend((0..gap).map(|j| b'a' + ((i + usize::from(j)) % 26) as u8));
            offsets.push((expected.len() as u64, is_start));
            expected.extend_from_slice(if is_start { start } else { end });
        }
        expected.extend_from_slice(b"tail");
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), StoreOptions::default()).unwrap();
        let part = store.create("1", "doc.txt", expected.len() as u64).unwrap();
        // Every byte but the marks' written first, as the channels would.
        let mut at = 0;
        for &(off, is_start) in &offsets {
            part.write_at(at, &expected[at as usize..off as usize])
                .unwrap();
            at = off + if is_start { start.len() } else { end.len() } as u64;
        }
        part.write_at(at, &expected[at as usize..]).unwrap();
        restore_marks(&part, (start, end), offsets.into_iter()).unwrap();
        part.commit().unwrap();
        assert_eq!(std::fs::read(d.path().join("doc.txt")).unwrap(), expected);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn marks_are_restored_in_place(gaps in prop::collection::vec((0u16..400, any::<bool>()), 0..600)) {
            check(&gaps);
        }
    }

    /// A document's runs, alternating between two streams, arrive as frames of `per_frame`
    /// runs each, the two streams' frames in the order `order` picks (as two channels deliver
    /// them): every byte lands where it belongs, whether a frame's runs are written as patched
    /// blocks or one by one, and a block patched for one stream leaves the other's bytes as
    /// they were.
    fn check_runs(runs: &[u32], per_frame: usize, order: &[bool]) {
        let mut expected = Vec::new();
        // Per stream, its frames: the (offset, range of `expected`) of their runs.
        type Frame = Vec<(u64, std::ops::Range<usize>)>;
        let mut frames: [Vec<Frame>; 2] = [Vec::new(), Vec::new()];
        for (i, &len) in runs.iter().enumerate() {
            let at = expected.len();
            expected.extend((0..len).map(|j| b'a' + ((i * 7 + j as usize) % 26) as u8));
            let stream = &mut frames[i % 2];
            if stream.last().is_none_or(|f| f.len() >= per_frame) {
                stream.push(Vec::new());
            }
            if let Some(f) = stream.last_mut() {
                f.push((at as u64, at..expected.len()));
            }
        }
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path(), StoreOptions::default()).unwrap();
        let part = store.create("1", "doc.txt", expected.len() as u64).unwrap();
        let mut next = [0usize; 2];
        let mut picks = order.iter().cycle();
        while next[0] < frames[0].len() || next[1] < frames[1].len() {
            let want = usize::from(*picks.next().unwrap_or(&false));
            let k = if next[want] < frames[want].len() {
                want
            } else {
                1 - want
            };
            let frame = &frames[k][next[k]];
            next[k] += 1;
            write_patched(
                &part,
                frame.iter().map(|(off, r)| (*off, &expected[r.clone()])),
            )
            .unwrap();
        }
        part.commit().unwrap();
        assert_eq!(std::fs::read(d.path().join("doc.txt")).unwrap(), expected);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn runs_land_in_place_in_any_order(
            runs in prop::collection::vec(0u32..300, 0..800),
            per_frame in 1usize..200,
            order in prop::collection::vec(any::<bool>(), 1..16),
        ) {
            check_runs(&runs, per_frame, &order);
        }
    }

    /// Dense runs across several blocks (patched), and long runs (one by one).
    #[test]
    fn dense_and_long_runs() {
        check_runs(&vec![60; 20_000], 5000, &[true, false, false]);
        check_runs(&[40_000, 10, 300_000, 5, 70_000], 2, &[false, true]);
    }

    /// Dense marks across several blocks, and sparse ones far apart (one by one).
    #[test]
    fn dense_and_sparse_marks() {
        check(&vec![(90, true); 6000]);
        check(&[
            (0, true),
            (60_000, false),
            (0, true),
            (0, false),
            (65_000, true),
        ]);
    }
}
