//! Where the commands write a file they are given the path of (`sieve mark -o/--marked`,
//! `sieve gen -o/--ranges-out`, `sieve certs`, `sieve serve --ready-file`, the marking page's
//! save): one rule for all of them.
//!
//! - `-` (and `/dev/stdout`) is standard output, whatever it is: a pipe, a terminal, a file.
//! - A path that does not exist, or names a regular file, gets a new file written whole beside
//!   it under a random name (`O_CREAT|O_EXCL`, never through a link) and renamed over it: a
//!   failure leaves no half-written file under the name, and a reader sees the old file or the
//!   new one. A regular file that was there is replaced (a new inode; its hard links keep the
//!   old content), unless the caller asks never to replace one ([`Output::replace`]).
//! - A character device or a named pipe, or a symbolic link to one (`/dev/null`, a FIFO a
//!   script reads), is written through, never replaced.
//! - Anything else is refused with the reason, and left as it was: a folder, a symbolic link to
//!   a file or a folder (written through, it would let whoever planted it choose what a command
//!   overwrites; replaced, it would lose the link, as it once replaced the machine's
//!   `/dev/stdout`), a dangling link, a socket or a block device.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// An output path the rule refuses (see the module's doc); the marking page answers it with
/// 400, as a request it cannot carry out.
#[derive(Debug)]
pub struct Refused {
    pub path: PathBuf,
    pub why: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refusing to write {}: {}", self.path.display(), self.why)
    }
}

impl std::error::Error for Refused {}

/// What an output path names, by the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `-` or `/dev/stdout`.
    Stdout,
    /// A character device or a named pipe, or a link to one: written through.
    Through,
    /// Nothing yet, or a regular file: a new file renamed over the name.
    File,
}

/// An output path and how a file written there is made.
#[derive(Debug, Clone)]
pub struct Output<'a> {
    path: &'a Path,
    mode: Option<u32>,
    replace: bool,
    sync: bool,
}

/// Whether `path` means standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-" || path == Path::new("/dev/stdout")
}

impl<'a> Output<'a> {
    /// A private file (0600) that replaces a regular file of that name, flushed to disk before
    /// it is renamed into place.
    pub fn new(path: &'a Path) -> Output<'a> {
        Output {
            path,
            mode: Some(0o600),
            replace: true,
            sync: true,
        }
    }

    /// The new file's mode, exactly (the umask does not narrow it); `None` for what
    /// `File::create` gives (0666 less the umask).
    pub fn mode(mut self, mode: Option<u32>) -> Self {
        self.mode = mode;
        self
    }

    /// Whether a regular file already there is replaced (otherwise it is an error, checked
    /// again at the rename, so a file that appears meanwhile is kept as well).
    pub fn replace(mut self, replace: bool) -> Self {
        self.replace = replace;
        self
    }

    /// Whether the new file and its folder are flushed to disk before the command says it
    /// wrote it (off for large scratch files such as `sieve gen`'s).
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    fn refused(&self, why: impl Into<String>) -> anyhow::Error {
        Refused {
            path: self.path.to_path_buf(),
            why: why.into(),
        }
        .into()
    }

    /// What the path names, or why it is refused; nothing is opened, so a command can check
    /// its outputs before long work.
    pub fn check(&self) -> Result<Kind> {
        if is_stdout(self.path) {
            return Ok(Kind::Stdout);
        }
        let meta = match fs::symlink_metadata(self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Kind::File),
            Err(e) => return Err(e).with_context(|| format!("cannot use {}", self.path.display())),
        };
        let t = meta.file_type();
        if t.is_file() {
            if !self.replace {
                return Err(self.refused("it exists"));
            }
            return Ok(Kind::File);
        }
        if t.is_char_device() || t.is_fifo() {
            return Ok(Kind::Through);
        }
        if t.is_dir() {
            return Err(self.refused("it is a folder; name a file (or - for standard output)"));
        }
        if t.is_symlink() {
            let to = fs::read_link(self.path)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "?".into());
            return match fs::metadata(self.path) {
                Ok(m) if m.file_type().is_char_device() || m.file_type().is_fifo() => {
                    Ok(Kind::Through)
                }
                Ok(m) => Err(self.refused(format!(
                    "it is a symbolic link to {to}, {}; name the {} itself, or remove the link \
                     (a link is written through only to a device or a pipe, and never replaced)",
                    if m.is_dir() { "a folder" } else { "a file" },
                    if m.is_dir() { "file in it" } else { "file" },
                ))),
                Err(_) => Err(self.refused(format!(
                    "it is a symbolic link to {to}, which does not exist; remove the link or \
                     name another file"
                ))),
            };
        }
        Err(self.refused(
            "it is neither a file, a character device nor a pipe (a socket or a block device)",
        ))
    }

    /// Write `bytes` there.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        self.write_with(|w| w.write_all(bytes))
    }

    /// Write there what `fill` writes, through a buffer.
    pub fn write_with<T>(&self, fill: impl FnOnce(&mut dyn Write) -> io::Result<T>) -> Result<T> {
        let cannot = || format!("cannot write {}", self.path.display());
        match self.check()? {
            Kind::Stdout => {
                let out = io::stdout();
                let mut w = BufWriter::with_capacity(1 << 20, out.lock());
                let v = fill(&mut w).with_context(cannot)?;
                w.flush().with_context(cannot)?;
                Ok(v)
            }
            Kind::Through => {
                // No O_CREAT, no O_TRUNC: nothing is made or emptied; what was opened is
                // checked again, so a name swapped for a file meanwhile is not written.
                let f = fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
                    .open(self.path)
                    .with_context(cannot)?;
                let t = f.metadata().with_context(cannot)?.file_type();
                if !(t.is_char_device() || t.is_fifo()) {
                    return Err(self.refused("it changed into a file while it was opened"));
                }
                let mut w = BufWriter::with_capacity(1 << 20, f);
                let v = fill(&mut w).with_context(cannot)?;
                w.flush().with_context(cannot)?;
                Ok(v)
            }
            Kind::File => self.write_file(fill),
        }
    }

    fn write_file<T>(&self, fill: impl FnOnce(&mut dyn Write) -> io::Result<T>) -> Result<T> {
        let cannot = || format!("cannot write {}", self.path.display());
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut b = tempfile::Builder::new();
        b.prefix(".sieve-").suffix(".tmp");
        b.permissions(fs::Permissions::from_mode(self.mode.unwrap_or(0o666)));
        let tmp = b
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        if let Some(mode) = self.mode {
            // The mode asked for exactly, whatever the umask.
            rustix::fs::fchmod(tmp.as_file(), rustix::fs::Mode::from_raw_mode(mode))
                .with_context(cannot)?;
        }
        let mut w = BufWriter::with_capacity(1 << 20, tmp);
        let v = fill(&mut w).with_context(cannot)?;
        let tmp = w
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(cannot)?;
        if self.sync {
            tmp.as_file().sync_all().with_context(cannot)?;
        }
        if self.replace {
            tmp.persist(self.path).with_context(cannot)?;
        } else {
            tmp.persist_noclobber(self.path)
                .map_err(|e| e.error)
                .with_context(cannot)?;
        }
        if self.sync {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn files_are_made_with_the_mode_asked_and_existing_ones_kept_if_asked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        Output::new(&p).write(b"one").unwrap();
        assert_eq!((fs::read(&p).unwrap(), mode(&p)), (b"one".to_vec(), 0o600));
        Output::new(&p).mode(Some(0o644)).write(b"two").unwrap();
        assert_eq!((fs::read(&p).unwrap(), mode(&p)), (b"two".to_vec(), 0o644));
        let e = Output::new(&p).replace(false).write(b"three").unwrap_err();
        assert!(e.downcast_ref::<Refused>().is_some(), "{e:#}");
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f"], "temporary files left");
    }

    #[test]
    fn what_a_path_names() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
        let kind = |p: &Path| Output::new(p).check().map_err(|e| format!("{e:#}"));
        assert_eq!(kind(Path::new("-")), Ok(Kind::Stdout));
        assert_eq!(kind(Path::new("/dev/stdout")), Ok(Kind::Stdout));
        assert_eq!(kind(Path::new("/dev/null")), Ok(Kind::Through));
        assert_eq!(kind(&link), Ok(Kind::Through));
        assert_eq!(kind(&d.path().join("new")), Ok(Kind::File));
        assert!(kind(d.path()).unwrap_err().contains("is a folder"));
        assert!(kind(&dangling).unwrap_err().contains("does not exist"));
        Output::new(&link).write(b"gone").unwrap();
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("/dev/null"));
    }
}
