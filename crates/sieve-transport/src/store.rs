//! The durable store: where received documents become files, all or nothing.
//!
//! Every document is written by position into a hidden temporary file in the output folder,
//! checked, fsynced and renamed to its final name in one step; only then is it acknowledged. A
//! failed or interrupted transfer leaves at most a temporary file, which is removed when the
//! failure is noticed and, after a crash, when the receiver next starts. Nothing partial ever
//! appears under a final name.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Prefix of temporary files; never a valid final name (see [`check_name`]).
pub const TEMP_PREFIX: &str = ".sieve-partial-";

/// Refuse any name that is not a plain base name: the sender must not choose where files go.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the file name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("'{name}' is not a file name"));
    }
    if name.contains('/') || name.contains('\\') {
        return Err(format!(
            "'{name}' contains a path separator; only base names are accepted"
        ));
    }
    if name.contains('\0') {
        return Err("the file name contains a NUL byte".into());
    }
    if name.starts_with(TEMP_PREFIX) {
        return Err(format!(
            "'{name}' uses the receiver's reserved prefix {TEMP_PREFIX}"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("{name:?} contains control characters"));
    }
    Ok(())
}

/// Remove temporary files left by a receiver that crashed.
pub fn clean_stale(dir: &Path) -> Result<usize> {
    let mut n = 0;
    for e in fs::read_dir(dir)
        .with_context(|| format!("cannot list the output folder {}", dir.display()))?
    {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            fs::remove_file(e.path())
                .with_context(|| format!("cannot remove stale {}", e.path().display()))?;
            n += 1;
        }
    }
    Ok(n)
}

/// A document being received.
#[derive(Debug)]
pub struct PartFile {
    file: File,
    temp: PathBuf,
    dest: PathBuf,
    dir: PathBuf,
    /// Committed or discarded: nothing left for Drop to clean.
    done: bool,
}

impl PartFile {
    /// Create the temporary file for `name` (already checked) with its final length.
    pub fn create(dir: &Path, unique: &str, name: &str, len: u64) -> Result<PartFile> {
        let temp = dir.join(format!("{TEMP_PREFIX}{unique}"));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .with_context(|| format!("cannot create {}", temp.display()))?;
        let part = PartFile {
            file,
            temp,
            dest: dir.join(name),
            dir: dir.to_path_buf(),
            done: false,
        };
        part.file
            .set_len(len)
            .with_context(|| format!("cannot reserve {len} bytes for {name}"))?;
        Ok(part)
    }

    /// Write `bytes` at `offset`. Safe to call from several threads at once.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all_at(bytes, offset)
            .with_context(|| format!("cannot write to {}", self.temp.display()))
    }

    /// fsync the file's data and size. [`PartFile::commit`] does it too; called first, it does
    /// the slow part away from whatever lock the commit itself needs.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_all()
            .with_context(|| format!("cannot flush {} to disk", self.temp.display()))
    }

    /// fsync, rename to the final name, fsync the folder.
    pub fn commit(mut self) -> Result<PathBuf> {
        self.file
            .sync_all()
            .with_context(|| format!("cannot flush {} to disk", self.temp.display()))?;
        fs::rename(&self.temp, &self.dest)
            .with_context(|| format!("cannot move the received file to {}", self.dest.display()))?;
        if let Ok(d) = File::open(&self.dir) {
            // Make the rename itself durable; not every file system supports it.
            let _ = d.sync_all();
        }
        self.done = true;
        Ok(self.dest.clone())
    }

    /// Remove the temporary file.
    pub fn discard(self) {
        // Drop does it.
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        // Not committed (an error path or an abandoned session): never leave the temp file.
        if !self.done {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Check that the output folder exists and is writable before serving.
pub fn check_dir(dir: &Path) -> Result<()> {
    let md = fs::metadata(dir)
        .with_context(|| format!("the output folder {} does not exist", dir.display()))?;
    if !md.is_dir() {
        bail!("{} is not a folder", dir.display());
    }
    let probe = dir.join(format!("{TEMP_PREFIX}probe-{}", std::process::id()));
    File::create(&probe)
        .with_context(|| format!("the output folder {} is not writable", dir.display()))?;
    let _ = fs::remove_file(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "/etc/passwd",
            "a\\b",
            "a\0b",
            ".sieve-partial-x",
            "a\nb",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["report.txt", "..hidden", "a..b", "日本.txt", "x y"] {
            assert!(check_name(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn commit_is_atomic_and_drop_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let p = PartFile::create(d.path(), "1", "out.bin", 4).unwrap();
        p.write_at(2, b"cd").unwrap();
        p.write_at(0, b"ab").unwrap();
        assert!(!d.path().join("out.bin").exists());
        p.commit().unwrap();
        assert_eq!(fs::read(d.path().join("out.bin")).unwrap(), b"abcd");
        let p = PartFile::create(d.path(), "2", "gone.bin", 4).unwrap();
        drop(p);
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.bin")]);
    }
}
