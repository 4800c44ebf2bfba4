//! Files of this user's cache (`$XDG_CACHE_HOME/sieve`): the calibration and the path records.
//!
//! The cache names receivers and their ports, and may sit in a folder others can reach (a
//! shared `XDG_CACHE_HOME`), so its folder is created 0700 and each file is written whole to a
//! new temporary file with a random name (`O_CREAT|O_EXCL`, which never follows a link), made
//! 0600, then renamed over the file's name: a link planted under either name is replaced,
//! never written through. A folder that another user owns, or that others may write to, is not
//! used at all: whoever can change it could swap the files read from it.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;

/// Write `bytes` to the cache file `path` (see the module's doc): the folder is created 0700
/// if missing, and a folder of this user's that others could read (an earlier version made
/// it 0755) is narrowed to 0700.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| anyhow::anyhow!("{} has no folder", path.display()))?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let meta = private_dir(dir).with_context(|| format!("cannot use {}", dir.display()))?;
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} private", dir.display()))?;
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".cache.")
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The content of the cache file `path`; `NotFound` if it is missing, and an error if its
/// folder is not private to this user (see the module's doc).
pub fn read_private(path: &Path) -> io::Result<Vec<u8>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        private_dir(dir)?;
    }
    fs::read(path)
}

/// The metadata of `dir` if this user owns it and no one else may write to it; `NotFound` if
/// it is missing.
fn private_dir(dir: &Path) -> io::Result<fs::Metadata> {
    let meta = fs::metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a folder",
            dir.display()
        )));
    }
    if meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not private to this user (owner {}, mode {:o}): no cache is kept there",
                dir.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder others may write to is used neither to read nor to write: whoever can change it
    /// could have swapped the files in it.
    #[test]
    fn a_folder_others_can_write_to_is_not_used() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("sieve");
        fs::create_dir(&dir).unwrap();
        let path = dir.join("paths.json");
        fs::write(&path, b"{}").unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = read_private(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        let e = write_private(&path, b"new").unwrap_err();
        assert!(format!("{e:#}").contains("not private"), "{e:#}");
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        write_private(&path, b"new").unwrap();
        assert_eq!(read_private(&path).unwrap(), b"new");
        let missing = base.path().join("none").join("paths.json");
        assert_eq!(
            read_private(&missing).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
