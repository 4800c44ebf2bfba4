//! Noticing that a document changes while it is being sent.
//!
//! The sender classifies a document once (its marks or ranges give the layout) and reads its
//! bytes again as it sends them, tagging what it reads. If another program rewrites the file in
//! between, a classified part may move into a range that travels in the clear, and the
//! receiver's integrity check still passes, since the tags cover what was read. So every
//! document's file is watched from the moment it is opened until its last byte is sent, and a
//! document whose file changed is cancelled (`DOC_CANCEL` instead of `DOC_END`): the receiver
//! removes it and nothing is stored under its name.
//!
//! Two watches, the first where the system allows it:
//! - **a read lease** (`fcntl(F_SETLEASE, F_RDLCK)`, Linux, on files the sender's user owns or
//!   with `CAP_LEASE`, when no one has the file open for writing): the kernel signals the sender
//!   (`SIGIO`) when another process opens the file for writing or truncates it, and holds that
//!   process back until the sender lets go or `/proc/sys/fs/lease-break-time` (45 s) passes. The
//!   sender marks the document changed, waits until no channel is reading the file's bytes
//!   (frames in flight finish) and until what its sockets held then has been acknowledged by
//!   the receiver (`sendfile(2)` queues references to the file's pages, which would go out as
//!   the writer leaves them), and only then releases the lease: no byte written after the
//!   change is read or sent, and a truncation cannot fault a mapped read (SIGBUS).
//! - **metadata**, always: size, modification and change times as `fstat` gives them when the
//!   file is opened, compared before every frame and after the last one, and the file's device
//!   and inode under its path after the last one (a file replaced by another). Without a lease
//!   a change is noticed only after it happened: the document still fails and nothing is
//!   committed, but bytes read after the change may already have crossed a plain channel; and
//!   a rewrite within one tick of the file system's clock that keeps the size is not seen.
//!
//! Neither makes it safe to send a file another program is writing: do not. `--no-mmap` only
//! turns a truncation during the send into a read error instead of SIGBUS.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::RwLock;
use tracing::{debug, warn};

use crate::sendq::SendQueues;

/// Longest a broken lease is held while the sockets deliver what they held at the break: below
/// the kernel's default `lease-break-time` (45 s), after which it would take the lease anyway.
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// What `fstat` said of a file when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Snapshot {
    // The fields' types differ between platforms; the casts are no-ops on some.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &rustix::fs::Stat) -> Snapshot {
        Snapshot {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// How `now` differs, in words, if it does.
    fn differs(&self, now: &Snapshot) -> Option<String> {
        if now.size != self.size {
            Some(format!(
                "its size went from {} to {} bytes",
                self.size, now.size
            ))
        } else if now.mtime != self.mtime {
            Some("it was modified".into())
        } else if now.ctime != self.ctime {
            Some("its status changed (written, renamed or its permissions changed)".into())
        } else {
            None
        }
    }
}

/// One document's file, opened for reading and watched for changes.
#[derive(Debug)]
pub struct Watched {
    file: File,
    path: PathBuf,
    snapshot: Snapshot,
    /// A read lease is held (or was, until it broke).
    leased: bool,
    /// The lease broke and is being (or was) released.
    lease_broken: AtomicBool,
    /// The first change noticed, in words that do not name the file (the sender's paths are
    /// its own business; callers name the file as they see fit).
    changed: Mutex<Option<String>>,
    /// Set as soon as a change is noticed (cheap to test before every frame).
    has_changed: AtomicBool,
    /// Held (shared) by every read of the file's bytes; a broken lease is released only once it
    /// can be taken exclusively, that is when no read is under way.
    gate: RwLock<()>,
}

impl Watched {
    /// Open `path` read-only, note its metadata, and take a read lease through `leases` when
    /// one is given and the system allows it.
    pub(crate) fn open(path: &Path, leases: Option<&Leases>) -> Result<Arc<Watched>> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let st = rustix::fs::fstat(&file)
            .map_err(std::io::Error::from)
            .with_context(|| format!("cannot stat {}", path.display()))?;
        let leased = leases.is_some_and(|_| take_lease(&file, path));
        let w = Arc::new(Watched {
            file,
            path: path.to_path_buf(),
            snapshot: Snapshot::of(&st),
            leased,
            lease_broken: AtomicBool::new(false),
            changed: Mutex::new(None),
            has_changed: AtomicBool::new(false),
            gate: RwLock::new(()),
        });
        if let (true, Some(l)) = (leased, leases) {
            l.register(&w);
        }
        Ok(w)
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Size of the file when it was opened.
    pub fn len(&self) -> u64 {
        self.snapshot.size
    }

    pub fn is_empty(&self) -> bool {
        self.snapshot.size == 0
    }

    /// Whether a read lease watches this file.
    pub fn leased(&self) -> bool {
        self.leased
    }

    /// Shared by every read of the file's bytes (see [`Leases`]).
    pub(crate) fn gate(&self) -> &RwLock<()> {
        &self.gate
    }

    /// The change noticed so far, if any, in words such as "it was modified" (no system call).
    pub fn changed(&self) -> Option<String> {
        if !self.has_changed.load(Ordering::Acquire) {
            return None;
        }
        self.changed.lock().ok().and_then(|c| c.clone())
    }

    fn note(&self, why: String) {
        if let Ok(mut c) = self.changed.lock() {
            c.get_or_insert(why);
        }
        self.has_changed.store(true, Ordering::Release);
    }

    /// Compare the open file's metadata with the snapshot; `Err` (and remembered) if it changed.
    pub fn check(&self) -> Result<(), String> {
        if let Some(c) = self.changed() {
            return Err(c);
        }
        if let Ok(st) = rustix::fs::fstat(&self.file) {
            if let Some(why) = self.snapshot.differs(&Snapshot::of(&st)) {
                self.note(why);
            }
        }
        self.changed().map_or(Ok(()), Err)
    }

    /// [`Watched::check`], and that the path still names the same file: the check after a
    /// document's last byte, before it is vouched for.
    #[allow(clippy::unnecessary_cast)] // as in `Snapshot::of`
    pub(crate) fn check_final(&self) -> Result<(), String> {
        self.check()?;
        match rustix::fs::stat(&self.path) {
            Ok(st)
                if (st.st_dev as u64, st.st_ino as u64)
                    == (self.snapshot.dev, self.snapshot.ino) => {}
            Ok(_) => self.note("another file was put in its place".into()),
            Err(e) => self.note(format!("it can no longer be found ({e})")),
        }
        self.changed().map_or(Ok(()), Err)
    }
}

/// Take a read lease on `file`; false (and the metadata watch alone) when the system refuses.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn take_lease(file: &File, path: &Path) -> bool {
    // SAFETY: fcntl(F_SETLEASE) takes an int argument and touches no memory of ours; the
    // descriptor is valid for the call because `file` is borrowed. (rustix wraps no lease
    // commands.)
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
    if r != 0 {
        debug!(
            path = %path.display(),
            "no read lease ({}): changes are noticed by comparing size and times",
            std::io::Error::last_os_error()
        );
    }
    r == 0
}

#[cfg(not(target_os = "linux"))]
fn take_lease(_: &File, _: &Path) -> bool {
    false
}

/// The lease a break is taking `fd` to, or `None` if it cannot be read.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn lease_of(fd: std::os::fd::BorrowedFd<'_>) -> Option<i32> {
    // SAFETY: fcntl(F_GETLEASE) takes no argument and touches no memory of ours; `fd` is a live
    // borrowed descriptor.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETLEASE) };
    (r >= 0).then_some(r)
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn release_lease(fd: std::os::fd::BorrowedFd<'_>) {
    // SAFETY: fcntl(F_SETLEASE) takes an int argument (F_UNLCK) and touches no memory of ours;
    // `fd` is a live borrowed descriptor. (rustix wraps no lease commands.)
    let _ = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
}

/// The leases of one send, and the task that answers their breaks.
///
/// Created before the first lease is taken: it installs the process's `SIGIO` handler, whose
/// default action would end the process on the first break. Dropping it stops the task; the
/// handler stays installed (it cannot be removed), so a later break harms nothing.
pub(crate) struct Leases {
    held: Arc<Mutex<Vec<Weak<Watched>>>>,
    /// The session's sockets, once it is connected.
    sockets: Arc<Mutex<Option<Arc<SendQueues>>>>,
    /// Broken leases not yet released.
    releasing: tokio::sync::watch::Sender<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Leases {
    /// Start answering lease breaks, or `None` (no leases: metadata only) where signals cannot
    /// be had. Must be called within a tokio runtime.
    #[cfg(target_os = "linux")]
    pub fn start() -> Option<Leases> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigio = match signal(SignalKind::io()) {
            Ok(s) => s,
            Err(e) => {
                debug!("no SIGIO handler ({e}): changes are noticed by comparing size and times");
                return None;
            }
        };
        let held: Arc<Mutex<Vec<Weak<Watched>>>> = Arc::default();
        let sockets: Arc<Mutex<Option<Arc<SendQueues>>>> = Arc::default();
        let releasing = tokio::sync::watch::Sender::new(0usize);
        let (h, s, r) = (held.clone(), sockets.clone(), releasing.clone());
        let task = tokio::spawn(async move {
            while sigio.recv().await.is_some() {
                let live: Vec<Arc<Watched>> = match h.lock() {
                    Ok(mut all) => {
                        all.retain(|w| w.strong_count() > 0);
                        all.iter().filter_map(Weak::upgrade).collect()
                    }
                    Err(_) => return,
                };
                for w in live {
                    // A breaking lease reports the type it is being taken to: unlocked.
                    if lease_of(w.file.as_fd()) == Some(libc::F_RDLCK)
                        || w.lease_broken.swap(true, Ordering::AcqRel)
                    {
                        continue;
                    }
                    w.note("another program opened it for writing or truncated it".into());
                    let queues = s.lock().ok().and_then(|q| q.clone());
                    let releasing = r.clone();
                    releasing.send_modify(|n| *n += 1);
                    tokio::spawn(async move {
                        // Frames being read finish; those that start later see the change
                        // first and read nothing.
                        drop(w.gate.write().await);
                        if let Some(q) = queues {
                            drain(&q, &w.path).await;
                        }
                        release_lease(w.file.as_fd());
                        debug!(path = %w.path.display(), "read lease released after a change");
                        releasing.send_modify(|n| *n -= 1);
                    });
                }
            }
        });
        Some(Leases {
            held,
            sockets,
            releasing,
            task,
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn start() -> Option<Leases> {
        None
    }

    fn register(&self, w: &Arc<Watched>) {
        if let Ok(mut all) = self.held.lock() {
            all.push(Arc::downgrade(w));
        }
    }

    /// The session's sockets: from now on a broken lease is released only once what they held
    /// at the break has been acknowledged.
    pub(crate) fn watch_sockets(&self, queues: Arc<SendQueues>) {
        if let Ok(mut s) = self.sockets.lock() {
            *s = Some(queues);
        }
    }

    /// Wait (at most `limit`) until every broken lease is released, so that the session does
    /// not end, and its sockets close, while one waits for them.
    pub(crate) async fn settle(&self, limit: Duration) {
        let mut r = self.releasing.subscribe();
        let _ = tokio::time::timeout(limit, r.wait_for(|&n| n == 0)).await;
    }
}

/// Wait until the bytes `queues` hold now are acknowledged, at most [`DRAIN_LIMIT`].
async fn drain(queues: &SendQueues, path: &Path) {
    let mark = queues.written();
    let t = std::time::Instant::now();
    while !queues.delivered(&mark) {
        if t.elapsed() > DRAIN_LIMIT {
            warn!(
                path = %path.display(),
                "a changed file's lease is released before the sockets delivered what they \
                 held: bytes sent from the file may reflect the change"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    use std::time::Duration;

    #[test]
    fn metadata_notices_rewrites_growth_and_replacement() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        std::fs::write(&p, b"0123456789").unwrap();
        let w = Watched::open(&p, None).unwrap();
        assert!(!w.leased());
        assert_eq!(w.check(), Ok(()));
        assert_eq!(w.check_final(), Ok(()));
        // Same size, new bytes, a moment later: the modification time moves.
        std::thread::sleep(Duration::from_millis(20));
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(b"ab", 3).unwrap();
        let e = w.check().unwrap_err();
        assert_eq!(e, "it was modified");
        // Remembered, and cheap to ask.
        assert_eq!(w.changed(), Some(e));

        let w = Watched::open(&p, None).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"more")
            .unwrap();
        assert!(w.check().unwrap_err().contains("size went from 10 to 14"));

        let w = Watched::open(&p, None).unwrap();
        let q = d.path().join("new.txt");
        std::fs::write(&q, b"01234567890123").unwrap();
        std::fs::rename(&q, &p).unwrap();
        // The replaced file lost its name (its status changed), and the name is another file's.
        assert!(w.check_final().is_err());
        let w = Watched::open(&q.with_file_name("other"), None);
        assert!(w.is_err());
        let kept = d.path().join("kept.txt");
        std::fs::write(&kept, b"kept").unwrap();
        let w = Watched::open(&kept, None).unwrap();
        std::fs::remove_file(&kept).unwrap();
        let e = w.check_final().unwrap_err();
        assert!(
            e.contains("status changed") || e.contains("no longer be found"),
            "{e}"
        );
    }

    /// A writer that opens the file is held back until the sender has noticed and no read is
    /// under way; then it proceeds.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_break_is_noticed_before_the_writer_writes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("doc.txt");
        std::fs::write(&p, b"0123456789").unwrap();
        let leases = Leases::start().expect("SIGIO handler");
        let w = Watched::open(&p, Some(&leases)).unwrap();
        if !w.leased() {
            eprintln!("skipped: this file system or user gets no read lease");
            return;
        }
        let reading = w.gate().read().await;
        let (tx, rx) = std::sync::mpsc::channel();
        let path = p.clone();
        let writer = std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            tx.send(()).unwrap();
            f.write_all_at(b"XX", 0).unwrap();
        });
        // The writer's open waits for the lease; meanwhile the change is noticed.
        let t = std::time::Instant::now();
        while w.changed().is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "lease break not noticed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            rx.try_recv().is_err(),
            "the writer opened before the read finished"
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"0123456789");
        drop(reading);
        tokio::task::spawn_blocking(move || writer.join().unwrap())
            .await
            .unwrap();
        assert!(w.check().unwrap_err().contains("opened it for writing"));
    }
}
