//! The durable store: where received documents become files, all or nothing, beneath the output
//! folder only.
//!
//! Every document is written by position into a hidden temporary file in the output folder,
//! checked, fsynced and moved to its final name in one step (`PartFile::commit`); only then is
//! it acknowledged. A failed or interrupted transfer leaves at most a temporary file, which is
//! removed when the failure is noticed and, after a crash, when the receiver next starts. Nothing
//! partial ever appears under a final name.
//!
//! What a sender may and may not do with names (docs/DESIGN.md §6: it must not write outside
//! the output folder):
//! - names are relative paths checked by [`sieve_core::name::check`] (no `..`, nothing absolute,
//!   nothing hidden, nothing that displays as another name), and with `--portable-names` by
//!   [`sieve_core::name::check_portable`] (nothing Windows cannot hold);
//! - they are resolved one component at a time from the output folder's directory descriptor,
//!   held from start-up, with `O_NOFOLLOW`: a symbolic link anywhere in the path (planted by
//!   anyone) refuses the document rather than being followed, and no path string is ever
//!   resolved from the root;
//! - the final step is `renameat2(RENAME_NOREPLACE)`: an existing file is never replaced unless the
//!   receiver was started with `--overwrite` (docs/DESIGN.md §7.1), and the check cannot race with
//!   another writer because the kernel makes it;
//! - files are created `0600` (`--file-mode` widens them), folders likewise with search rights.
//!
//! The commit is one action (`PartFile::commit`) behind a small type, so that another store (an
//! object store, docs/DESIGN.md §7.2) can take its place.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use sieve_core::name;
use tracing::info;

/// Prefix of temporary files; never a valid final name (names beginning with `.` are refused).
pub const TEMP_PREFIX: &str = ".sieve-partial-";

/// Mode of received files unless `--file-mode` says otherwise: readable by the receiver's user
/// only, since documents hold classified parts.
pub(crate) const DEFAULT_FILE_MODE: u32 = 0o600;

/// How the store treats what senders send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Replace an existing file of the same name (`sieve serve --overwrite`).
    pub overwrite: bool,
    /// Permission bits of received files (at most `0o777`); folders get the same bits plus
    /// search (`x`) wherever read is granted.
    pub file_mode: u32,
    /// One subfolder per client certificate (`--per-client-dirs`, with mutual TLS).
    pub per_client_dirs: bool,
    /// Refuse names Windows cannot hold as well (`--portable-names`, see
    /// [`sieve_core::name::check_portable`]), for a folder shared with Windows.
    pub portable_names: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            overwrite: false,
            file_mode: DEFAULT_FILE_MODE,
            per_client_dirs: false,
            portable_names: false,
        }
    }
}

impl StoreOptions {
    /// The mode of folders the store creates: the file mode plus search wherever read is given.
    pub(crate) fn dir_mode(&self) -> u32 {
        self.file_mode | ((self.file_mode & 0o444) >> 2)
    }
}

/// Parse an octal mode such as `600`, `0640` or `0o644` (what `--file-mode` takes).
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    let mode = u32::from_str_radix(digits, 8)
        .map_err(|_| format!("'{s}' is not an octal file mode such as 600 or 640"))?;
    if mode > 0o777 {
        return Err(format!(
            "file mode {s} has bits beyond 777 (setuid, setgid or sticky); give permission bits only"
        ));
    }
    if mode & 0o600 != 0o600 {
        return Err(format!(
            "file mode {s} does not let the receiver's own user read and write its files; \
             include 600"
        ));
    }
    Ok(mode)
}

/// Why a document cannot be stored under its name. `Exists` and `Refused` are the sender's doing
/// (the receiver answers with a refusal); `Io` is the receiver's (disk full, permissions).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommitError {
    /// A file (or folder) of that name exists and the store does not replace files.
    #[error(
        "{name} already exists on the receiver, which replaces files only when started with \
         --overwrite; send it under another name"
    )]
    Exists { name: String },
    /// The name is not one the store will create (see [`sieve_core::name`]), or its path meets
    /// a symbolic link or a file where a folder should be.
    #[error("{why}")]
    Refused { why: String },
    /// The system refused an operation.
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: &'static str, path: &Path, e: Errno) -> CommitError {
    CommitError::Io {
        what,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// The output folder (or one client's folder beneath it), held open as a directory descriptor.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    /// Where temporary files live: always the output folder itself, so that one listing finds
    /// every leftover after a crash.
    temp_dir: Arc<OwnedFd>,
    /// Folder that names are relative to.
    base: Arc<OwnedFd>,
    base_path: PathBuf,
    opts: StoreOptions,
}

impl Store {
    /// Open the output folder `dir`, creating it (and its parents) if it is missing, check that
    /// it is writable, and remove temporary files an interrupted receiver left in it.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Store> {
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(opts.dir_mode())
                .create(dir)
                .with_context(|| format!("cannot create the output folder {}", dir.display()))?;
            info!(dir = %dir.display(), "created the output folder");
        }
        let md = std::fs::metadata(dir)
            .with_context(|| format!("cannot use the output folder {}", dir.display()))?;
        if !md.is_dir() {
            bail!("{} is not a folder", dir.display());
        }
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)
        .with_context(|| format!("cannot open the output folder {}", dir.display()))?;
        let fd = Arc::new(fd);
        let store = Store {
            temp_dir: fd.clone(),
            base: fd,
            base_path: dir.to_path_buf(),
            opts,
        };
        let probe = format!("{TEMP_PREFIX}probe-{}", std::process::id());
        store
            .create_temp(&probe)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("the output folder {} is not writable", dir.display()))?;
        let _ = rustix::fs::unlinkat(&*store.temp_dir, probe.as_str(), AtFlags::empty());
        let n = store.clean_stale()?;
        if n > 0 {
            info!(
                removed = n,
                "removed temporary files left by an interrupted receiver"
            );
        }
        Ok(store)
    }

    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    /// Remove temporary files left by a receiver that crashed.
    pub(crate) fn clean_stale(&self) -> Result<usize> {
        let mut n = 0;
        let root = self.temp_root();
        for e in std::fs::read_dir(&root)
            .with_context(|| format!("cannot list the output folder {}", root.display()))?
        {
            let e = e?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(TEMP_PREFIX) {
                rustix::fs::unlinkat(&*self.temp_dir, name, AtFlags::empty())
                    .map_err(std::io::Error::from)
                    .with_context(|| format!("cannot remove stale {}", e.path().display()))?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// The output folder itself (where temporary files are), for listing it.
    fn temp_root(&self) -> PathBuf {
        // A client's store shares the output folder's descriptor for temporary files.
        if Arc::ptr_eq(&self.temp_dir, &self.base) {
            self.base_path.clone()
        } else {
            self.base_path
                .parent()
                .map_or_else(|| self.base_path.clone(), Path::to_path_buf)
        }
    }

    /// The store of one client (`--per-client-dirs`): a folder named after its certificate (see
    /// [`client_folder`]) beneath the output folder, created if missing. Temporary files stay
    /// in the output folder.
    pub(crate) fn for_client(&self, cert_der: &[u8]) -> Result<Store, CommitError> {
        let folder = client_folder(cert_der, self.opts.portable_names);
        let fd = self.open_dirs(&[folder.as_str()], true)?;
        Ok(Store {
            temp_dir: self.temp_dir.clone(),
            base: Arc::new(fd),
            base_path: self.base_path.join(&folder),
            opts: self.opts,
        })
    }

    /// Whether the store creates `name`: [`name::check`], and with `portable_names`
    /// [`name::check_portable`].
    fn check_name(&self, name: &str) -> Result<(), CommitError> {
        let checked = if self.opts.portable_names {
            name::check_portable(name)
        } else {
            name::check(name)
        };
        checked.map_err(|e| CommitError::Refused {
            why: format!("refused file name: {e}"),
        })
    }

    /// Check a document's name before any of it arrives: a name the store would refuse, a path
    /// through a symbolic link or a file, or (without `--overwrite`) an existing file is
    /// refused now rather than after its bytes have crossed the network. The commit checks again.
    pub(crate) fn precheck(&self, name: &str) -> Result<(), CommitError> {
        self.check_name(name)?;
        let (dirs, last) = name::split(name);
        let parent = match self.open_dirs(&dirs, false) {
            Ok(fd) => fd,
            // A folder not there yet is created at the commit.
            Err(CommitError::Io { source, .. })
                if source.raw_os_error() == Some(Errno::NOENT.raw_os_error()) =>
            {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if !self.opts.overwrite
            && rustix::fs::statat(&parent, last, AtFlags::SYMLINK_NOFOLLOW).is_ok()
        {
            return Err(CommitError::Exists {
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// Create the temporary file of a document that will be stored as `name` (a relative name,
    /// checked again here), `len` bytes long. `unique` tells temporary files apart.
    pub fn create(&self, unique: &str, name: &str, len: u64) -> Result<PartFile, CommitError> {
        self.check_name(name)?;
        let temp = format!("{TEMP_PREFIX}{unique}");
        let file = self.create_temp(&temp)?;
        let part = PartFile {
            file,
            store: self.clone(),
            temp,
            name: name.to_string(),
            done: false,
        };
        part.file.set_len(len).map_err(|e| CommitError::Io {
            what: "reserve space for",
            path: part.dest(),
            source: e,
        })?;
        Ok(part)
    }

    fn create_temp(&self, temp: &str) -> Result<File, CommitError> {
        let fd = rustix::fs::openat(
            &*self.temp_dir,
            temp,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(DEFAULT_FILE_MODE),
        )
        .map_err(|e| io("create", &self.temp_root().join(temp), e))?;
        Ok(File::from(fd))
    }

    /// Open the folders `dirs` beneath the base, one at a time and never through a symbolic
    /// link; with `create`, make those that are missing.
    fn open_dirs(&self, dirs: &[&str], create: bool) -> Result<OwnedFd, CommitError> {
        let mut at = rustix::io::dup(&*self.base).map_err(|e| io("open", &self.base_path, e))?;
        let mut path = self.base_path.clone();
        for &d in dirs {
            // Names are checked before they get here; a component that could leave the folder
            // is refused again, whatever the caller checked.
            if d.is_empty() || d == "." || d == ".." || d.contains('/') {
                return Err(CommitError::Refused {
                    why: format!("refused file name: the folder name {d:?}"),
                });
            }
            path.push(d);
            let open = |parent: &OwnedFd| {
                rustix::fs::openat(
                    parent,
                    d,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            let next = match open(&at) {
                Ok(fd) => fd,
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&at, d, Mode::from_raw_mode(self.opts.dir_mode())) {
                        Ok(()) => {
                            let fd = open(&at).map_err(|e| io("open", &path, e))?;
                            // Exactly the mode asked for, whatever the umask.
                            let _ =
                                rustix::fs::fchmod(&fd, Mode::from_raw_mode(self.opts.dir_mode()));
                            // Make the new folder's entry durable before anything relies on it.
                            let _ = rustix::fs::fsync(&at);
                            fd
                        }
                        // Another document created it meanwhile.
                        Err(Errno::EXIST) => open(&at).map_err(|e| self.not_a_folder(&path, e))?,
                        Err(e) => return Err(io("create the folder", &path, e)),
                    }
                }
                Err(e) => return Err(self.not_a_folder(&path, e)),
            };
            at = next;
        }
        Ok(at)
    }

    /// What an `openat(O_DIRECTORY | O_NOFOLLOW)` failure means for a sender's name.
    fn not_a_folder(&self, path: &Path, e: Errno) -> CommitError {
        let shown = path.strip_prefix(&self.base_path).unwrap_or(path).display();
        match e {
            // ELOOP: a symbolic link; ENOTDIR: a file (or a link, on some systems).
            Errno::LOOP | Errno::NOTDIR => CommitError::Refused {
                why: format!(
                    "refused file name: {shown} is a symbolic link or a file on the receiver, \
                     not a folder"
                ),
            },
            e => io("open", path, e),
        }
    }
}

/// The folder name of a client certificate (DER) under `--per-client-dirs`.
///
/// Its subject's common name when that is a plain name (ASCII letters, digits, `.`, `-`, `_`,
/// `@`, not beginning with `.`, at most 64 bytes); otherwise that name with every other character
/// replaced by `_`, followed by `-` and 8 hex digits of its hash, so that two names that differ
/// only in replaced characters stay apart; a certificate without a common name gets `cert-` and
/// 16 hex digits of the certificate's hash. The result is always a single component that
/// [`sieve_core::name::check`] accepts, and with `portable` one that
/// [`sieve_core::name::check_portable`] accepts (a common name such as `aux` or `bob.` takes the
/// hashed form).
pub(crate) fn client_folder(cert_der: &[u8], portable: bool) -> String {
    let hex = |b: &[u8], n: usize| -> String {
        blake3::hash(b).as_bytes()[..n / 2]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect()
    };
    let cn = x509_parser::parse_x509_certificate(cert_der)
        .ok()
        .and_then(|(_, c)| {
            c.subject()
                .iter_common_name()
                .next()
                .and_then(|a| a.as_str().ok().map(str::to_string))
        })
        .filter(|cn| !cn.is_empty());
    let Some(cn) = cn else {
        return format!("cert-{}", hex(cert_der, 16));
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@');
    if cn.len() <= 64
        && !cn.starts_with('.')
        && cn.chars().all(plain)
        && (!portable || name::check_portable(&cn).is_ok())
    {
        return cn;
    }
    let mut safe: String = cn
        .chars()
        .map(|c| if plain(c) { c } else { '_' })
        .take(48)
        .collect();
    if safe.starts_with('.') {
        safe.replace_range(..1, "_");
    }
    format!("{safe}-{}", hex(cn.as_bytes(), 8))
}

/// A document being received: a temporary file that becomes `name` when committed, or
/// disappears.
#[derive(Debug)]
pub(crate) struct PartFile {
    file: File,
    store: Store,
    temp: String,
    name: String,
    /// Committed: nothing left for Drop to clean.
    done: bool,
}

impl PartFile {
    /// Where the document will be, for messages.
    fn dest(&self) -> PathBuf {
        self.store.base_path.join(&self.name)
    }

    /// Write `bytes` at `offset`. Safe to call from several threads at once.
    pub(crate) fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all_at(bytes, offset)
            .with_context(|| format!("cannot write the temporary file of {}", self.name))
    }

    /// Read `buf.len()` bytes at `offset` (written before; see [`PartFile::write_at`]).
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .with_context(|| format!("cannot read back the temporary file of {}", self.name))
    }

    /// fsync the file's data and size. [`PartFile::commit`] does it too; called first, it does
    /// the slow part away from whatever lock the commit itself must be made under.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_all()
            .with_context(|| format!("cannot flush the temporary file of {} to disk", self.name))
    }

    /// Give the file its mode, fsync it, create its folders (never through a symbolic link),
    /// move it to its name (never over an existing file unless the store overwrites) and make
    /// the move durable. Returns the final path.
    pub fn commit(mut self) -> Result<PathBuf, CommitError> {
        let dest = self.dest();
        let mode = self.store.opts.file_mode;
        if mode != DEFAULT_FILE_MODE {
            rustix::fs::fchmod(&self.file, Mode::from_raw_mode(mode))
                .map_err(|e| io("set the mode of", &dest, e))?;
        }
        self.file.sync_all().map_err(|e| CommitError::Io {
            what: "flush to disk",
            path: dest.clone(),
            source: e,
        })?;
        let (dirs, last) = name::split(&self.name);
        let parent = self.store.open_dirs(&dirs, true)?;
        let temp_dir = self.store.temp_dir.as_fd();
        if self.store.opts.overwrite {
            rustix::fs::renameat(temp_dir, self.temp.as_str(), &parent, last)
                .map_err(|e| io("move the received file to", &dest, e))?;
        } else {
            match rustix::fs::renameat_with(
                temp_dir,
                self.temp.as_str(),
                &parent,
                last,
                RenameFlags::NOREPLACE,
            ) {
                Ok(()) => {}
                Err(Errno::EXIST) => {
                    return Err(CommitError::Exists {
                        name: self.name.clone(),
                    })
                }
                // A file system without RENAME_NOREPLACE: a hard link fails on an existing
                // name just as atomically; then the temporary name goes.
                Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP) => {
                    match rustix::fs::linkat(
                        temp_dir,
                        self.temp.as_str(),
                        &parent,
                        last,
                        AtFlags::empty(),
                    ) {
                        Ok(()) => {
                            let _ = rustix::fs::unlinkat(
                                temp_dir,
                                self.temp.as_str(),
                                AtFlags::empty(),
                            );
                        }
                        Err(Errno::EXIST) => {
                            return Err(CommitError::Exists {
                                name: self.name.clone(),
                            })
                        }
                        Err(e) => return Err(io("move the received file to", &dest, e)),
                    }
                }
                Err(e) => return Err(io("move the received file to", &dest, e)),
            }
        }
        self.done = true;
        // Make the rename itself durable; not every file system supports fsync on a folder.
        let _ = rustix::fs::fsync(&parent);
        if dirs.is_empty() && !Arc::ptr_eq(&self.store.temp_dir, &self.store.base) {
            let _ = rustix::fs::fsync(temp_dir);
        }
        Ok(dest)
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        // Not committed (an error path or an abandoned session): never leave the temp file.
        if !self.done {
            let _ =
                rustix::fs::unlinkat(&*self.store.temp_dir, self.temp.as_str(), AtFlags::empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn mode_of(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn commit_is_atomic_private_and_drop_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path(), StoreOptions::default()).unwrap();
        let p = s.create("1", "out.bin", 4).unwrap();
        p.write_at(2, b"cd").unwrap();
        p.write_at(0, b"ab").unwrap();
        assert!(!d.path().join("out.bin").exists());
        p.commit().unwrap();
        assert_eq!(fs::read(d.path().join("out.bin")).unwrap(), b"abcd");
        assert_eq!(mode_of(&d.path().join("out.bin")), 0o600);
        let p = s.create("2", "gone.bin", 4).unwrap();
        drop(p);
        assert_eq!(names(d.path()), vec!["out.bin"]);
    }

    #[test]
    fn existing_files_are_never_replaced_unless_asked() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("x.txt"), b"old").unwrap();
        let s = Store::open(d.path(), StoreOptions::default()).unwrap();
        assert!(matches!(
            s.precheck("x.txt"),
            Err(CommitError::Exists { .. })
        ));
        // Created after the check (another session): the commit still refuses, atomically.
        let p = s.create("1", "y.txt", 3).unwrap();
        p.write_at(0, b"new").unwrap();
        fs::write(d.path().join("y.txt"), b"old").unwrap();
        let e = p.commit().unwrap_err();
        assert!(
            matches!(e, CommitError::Exists { ref name } if name == "y.txt"),
            "{e}"
        );
        assert!(e.to_string().contains("--overwrite"), "{e}");
        assert_eq!(fs::read(d.path().join("y.txt")).unwrap(), b"old");
        assert_eq!(names(d.path()), vec!["x.txt", "y.txt"]);

        let s = Store::open(
            d.path(),
            StoreOptions {
                overwrite: true,
                file_mode: 0o640,
                ..StoreOptions::default()
            },
        )
        .unwrap();
        s.precheck("x.txt").unwrap();
        let p = s.create("2", "x.txt", 3).unwrap();
        p.write_at(0, b"new").unwrap();
        p.commit().unwrap();
        assert_eq!(fs::read(d.path().join("x.txt")).unwrap(), b"new");
        assert_eq!(mode_of(&d.path().join("x.txt")), 0o640);
    }

    #[test]
    fn folders_are_created_beneath_and_never_through_links() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let outside = d.path().join("outside");
        fs::create_dir(&outside).unwrap();
        // The output folder is created if missing.
        let s = Store::open(&out, StoreOptions::default()).unwrap();
        let p = s.create("1", "a/b/c.txt", 2).unwrap();
        p.write_at(0, b"hi").unwrap();
        assert_eq!(p.commit().unwrap(), out.join("a/b/c.txt"));
        assert_eq!(fs::read(out.join("a/b/c.txt")).unwrap(), b"hi");
        assert_eq!(mode_of(&out.join("a/b")), 0o700);

        std::os::unix::fs::symlink(&outside, out.join("link")).unwrap();
        fs::write(out.join("file"), b"").unwrap();
        for bad in [
            "link/x",
            "a/../link/x",
            "file/x",
            "../outside/x",
            ".hidden",
            "/tmp/x",
        ] {
            assert!(
                matches!(s.precheck(bad), Err(CommitError::Refused { .. })),
                "{bad} passed the precheck"
            );
        }
        // A link planted after the document was accepted: the commit refuses it.
        let p = s.create("3", "late/x", 1).unwrap();
        p.write_at(0, b"!").unwrap();
        std::os::unix::fs::symlink(&outside, out.join("late")).unwrap();
        assert!(matches!(p.commit(), Err(CommitError::Refused { .. })));
        // A link as the final name is an existing name, and with --overwrite the link itself is
        // replaced, never the file it points to.
        fs::write(outside.join("target"), b"keep").unwrap();
        std::os::unix::fs::symlink(outside.join("target"), out.join("t.txt")).unwrap();
        assert!(matches!(
            s.precheck("t.txt"),
            Err(CommitError::Exists { .. })
        ));
        let ow = Store::open(
            &out,
            StoreOptions {
                overwrite: true,
                ..StoreOptions::default()
            },
        )
        .unwrap();
        let p = ow.create("4", "t.txt", 3).unwrap();
        p.write_at(0, b"new").unwrap();
        p.commit().unwrap();
        assert_eq!(fs::read(outside.join("target")).unwrap(), b"keep");
        assert_eq!(names(&outside), vec!["target"]);
        assert!(partial_free(&out));
    }

    fn partial_free(d: &Path) -> bool {
        names(d).iter().all(|n| !n.starts_with(TEMP_PREFIX))
    }

    #[test]
    fn stale_temporaries_are_removed_at_start() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(format!("{TEMP_PREFIX}old")), b"x").unwrap();
        fs::write(d.path().join("keep.txt"), b"x").unwrap();
        Store::open(d.path(), StoreOptions::default()).unwrap();
        assert_eq!(names(d.path()), vec!["keep.txt"]);
    }

    #[test]
    fn client_stores_live_in_their_own_folder() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path(), StoreOptions::default()).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice@lab");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let c = s.for_client(cert.der()).unwrap();
        let p = c.create("1", "r.txt", 1).unwrap();
        p.write_at(0, b"a").unwrap();
        assert_eq!(p.commit().unwrap(), d.path().join("alice@lab/r.txt"));
        assert!(partial_free(d.path()) && partial_free(&d.path().join("alice@lab")));
    }

    #[test]
    fn client_folder_names_are_always_one_safe_component() {
        let cert = |cn: Option<&str>| {
            let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            p.distinguished_name = rcgen::DistinguishedName::new();
            if let Some(cn) = cn {
                p.distinguished_name.push(rcgen::DnType::CommonName, cn);
            }
            let key = rcgen::KeyPair::generate().unwrap();
            p.self_signed(&key).unwrap().der().to_vec()
        };
        assert_eq!(client_folder(&cert(Some("bob")), false), "bob");
        assert_eq!(client_folder(&cert(Some("bob")), true), "bob");
        assert_eq!(client_folder(&cert(Some("aux")), false), "aux");
        for cn in ["aux", "bob.", "COM1"] {
            let f = client_folder(&cert(Some(cn)), true);
            assert_eq!(name::check_portable(&f), Ok(()), "{cn:?} -> {f:?}");
        }
        for cn in [
            "../../etc",
            ".hidden",
            "a/b",
            "security sieve sender",
            "日本",
            "x\ny",
        ] {
            let f = client_folder(&cert(Some(cn)), false);
            assert_eq!(name::check(&f), Ok(()), "{cn:?} -> {f:?}");
            assert!(!f.contains('/'), "{f}");
        }
        assert_ne!(
            client_folder(&cert(Some("a b")), false),
            client_folder(&cert(Some("a_b")), false)
        );
        let f = client_folder(&cert(None), false);
        assert!(f.starts_with("cert-") && name::check(&f).is_ok(), "{f}");
        assert!(client_folder(b"not a certificate", false).starts_with("cert-"));
    }

    #[test]
    fn modes_parse_as_octal_permission_bits() {
        assert_eq!(parse_mode("600"), Ok(0o600));
        assert_eq!(parse_mode("0640"), Ok(0o640));
        assert_eq!(parse_mode("0o644"), Ok(0o644));
        assert!(parse_mode("4755").is_err());
        assert!(parse_mode("400").is_err());
        assert!(parse_mode("rw").is_err());
        assert_eq!(
            StoreOptions {
                file_mode: 0o640,
                ..StoreOptions::default()
            }
            .dir_mode(),
            0o750
        );
    }
}
