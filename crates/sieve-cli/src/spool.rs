//! Inputs that are not files one can map or read twice: standard input (`-`) and named pipes.
//!
//! A document must be sieved (its marks found, or its policy run) before any byte of it is sent,
//! and its manifest announces its length; a stream gives neither until it ends. So a stream is
//! first copied into a temporary file (in `$TMPDIR`), which is then sent like any file and removed
//! when the command ends. Devices (`/dev/null`, a disk) and sockets are refused: they have no
//! content to send as a document, and reading a disk whole is never what a user meant.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sieve_transport::sender::inputs::Input;
use tempfile::TempPath;

/// Standard input, and the named pipes among `paths`, copied into temporary files; the other
/// paths are left to [`sieve_transport::sender::inputs::expand`].
pub struct Spooled {
    /// Documents read from streams, under their names.
    pub inputs: Vec<Input>,
    /// The other paths, in their order.
    pub rest: Vec<PathBuf>,
    /// Removed when dropped: keep until the send is over.
    pub _temps: Vec<TempPath>,
}

/// Split `paths` into streams (spooled now) and files. `name` names standard input.
pub fn spool(paths: &[PathBuf], name: Option<&str>) -> Result<Spooled> {
    let mut out = Spooled {
        inputs: Vec::new(),
        rest: Vec::new(),
        _temps: Vec::new(),
    };
    if name.is_some() && !paths.iter().any(|p| p == Path::new("-")) {
        bail!("--name names standard input, given as `-`; no `-` was given");
    }
    let mut stdin_seen = false;
    for p in paths {
        if p == Path::new("-") {
            if stdin_seen {
                bail!("`-` (standard input) was given twice");
            }
            stdin_seen = true;
            let name = name.context(
                "standard input has no name: give the name the receiver stores it under, e.g. \
                 `sieve send - --name report.csv`",
            )?;
            sieve_core::name::check(name).with_context(|| format!("--name {name}"))?;
            let temp = copy(std::io::stdin().lock(), "standard input")?;
            out.inputs.push(Input {
                path: temp.to_path_buf(),
                name: name.to_string(),
            });
            out._temps.push(temp);
            continue;
        }
        let md = std::fs::metadata(p).with_context(|| format!("cannot open {}", p.display()))?;
        let ft = md.file_type();
        if ft.is_fifo() {
            let f = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            let temp = copy(f, &p.display().to_string())?;
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .with_context(|| format!("{} has no usable name", p.display()))?
                .to_string();
            out.inputs.push(Input {
                path: temp.to_path_buf(),
                name,
            });
            out._temps.push(temp);
        } else if ft.is_char_device() || ft.is_block_device() || ft.is_socket() {
            bail!(
                "{} is a device or socket, not a document: to send what a program writes, pipe it \
                 to `sieve send - --name NAME`",
                p.display()
            );
        } else {
            out.rest.push(p.clone());
        }
    }
    Ok(out)
}

/// Copy `from` into a new temporary file, private to this user.
fn copy(mut from: impl Read, what: &str) -> Result<TempPath> {
    let mut f = tempfile::Builder::new()
        .prefix("sieve-send-")
        .tempfile()
        .context("cannot create a temporary file to hold a stream ($TMPDIR)")?;
    std::io::copy(&mut from, f.as_file_mut()).with_context(|| format!("cannot read {what}"))?;
    f.as_file()
        .sync_data()
        .with_context(|| format!("cannot keep a copy of {what}"))?;
    Ok(f.into_temp_path())
}
