//! What to send, and under which names: files by their base name, folders (`-r`) as relative
//! paths, checked against what a receiver accepts and against each other before anything is
//! opened.
//!
//! Folders are sent the way `scp -r` and `rsync -r DIR` (without a trailing slash) send them: the
//! folder's own name is kept, so `sieve send -r photos` stores `photos/2024/a.jpg`. A folder
//! given as `.` (or ending in `..`) has no name of its own, and its contents are sent instead.
//! Inside folders, hidden entries (names beginning with `.`, which receivers refuse), symbolic
//! links (which could lead anywhere, or in circles) and special files are skipped, and each skip
//! is reported; with `--ranges-beside`, the ranges files are not documents of their own.
//!
//! Two documents of one session must not share a name: the receiver would keep one and the other
//! would be lost (or refused), so such a send is refused before anything is sent. The same
//! goes for a name that is both a file and a folder (`a` and `a/b`).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sieve_core::name;

/// One document to send: where it is, and the name the receiver stores it under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The file to read.
    pub path: PathBuf,
    /// A base name, or a relative path with `/` between folders.
    pub name: String,
}

/// The documents found in the paths given, and what was left out (one line each, to show).
#[derive(Debug, Default)]
pub struct Expanded {
    /// The documents to send, in the order found.
    pub inputs: Vec<Input>,
    /// What was left out and why (links, devices...), one line each.
    pub skipped: Vec<String>,
}

/// Each file in `paths` under its base name; folders are an error (they need `recursive`).
pub fn files(paths: &[PathBuf]) -> Result<Vec<Input>> {
    Ok(expand(paths, false, false)?.inputs)
}

/// The documents in `paths`: files under their base names, and, with `recursive`, every file
/// beneath each folder under its path relative to the folder's parent. `ranges_beside`: leave
/// out each `X.ranges.json` whose `X` is sent too. The names are checked (see
/// [`sieve_core::name`]) and must be unique ([`check_unique`]).
pub fn expand(paths: &[PathBuf], recursive: bool, ranges_beside: bool) -> Result<Expanded> {
    let mut out = Expanded::default();
    for p in paths {
        let md = fs::metadata(p).with_context(|| format!("cannot open {}", p.display()))?;
        if md.is_dir() {
            if !recursive {
                bail!(
                    "{} is a folder: pass -r to send it with everything beneath it",
                    p.display()
                );
            }
            let prefix = match p.file_name() {
                Some(n) => Some(
                    n.to_str()
                        .with_context(|| format!("the name of {} is not UTF-8", p.display()))?
                        .to_string(),
                ),
                None => None,
            };
            let before = out.inputs.len();
            walk(p, prefix.as_deref(), ranges_beside, &mut out)?;
            if out.inputs.len() == before {
                bail!("{} holds no file to send", p.display());
            }
        } else {
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .with_context(|| format!("{} has no usable file name (UTF-8)", p.display()))?;
            out.inputs.push(Input {
                path: p.clone(),
                name: name.to_string(),
            });
        }
    }
    if ranges_beside && !recursive {
        // Ranges files named on the command line alongside their documents are not documents.
        let names: HashSet<PathBuf> = out.inputs.iter().map(|i| i.path.clone()).collect();
        out.inputs.retain(|i| {
            !i.name.ends_with(".ranges.json")
                || !names.contains(
                    &i.path
                        .with_file_name(i.name.trim_end_matches(".ranges.json")),
                )
        });
    }
    check_names(&out.inputs)?;
    check_unique(&out.inputs)?;
    Ok(out)
}

/// Add every file beneath `dir` (named `prefix/...`, or relative to `dir` without a prefix), in
/// name order.
fn walk(dir: &Path, prefix: Option<&str>, ranges_beside: bool, out: &mut Expanded) -> Result<()> {
    let mut entries: Vec<(String, PathBuf, fs::FileType)> = Vec::new();
    for e in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let e = e.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = e.path();
        let ty = e
            .file_type()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        match e.file_name().into_string() {
            Ok(n) => entries.push((n, path, ty)),
            Err(_) => out
                .skipped
                .push(format!("{}: the name is not UTF-8", path.display())),
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let files: HashSet<&str> = entries
        .iter()
        .filter(|(_, _, t)| t.is_file())
        .map(|(n, _, _)| n.as_str())
        .collect();
    let join = |n: &str| match prefix {
        Some(p) => format!("{p}/{n}"),
        None => n.to_string(),
    };
    let mut dirs = Vec::new();
    for (n, path, ty) in &entries {
        if n.starts_with('.') {
            out.skipped.push(format!(
                "{}: hidden (receivers refuse names beginning with '.')",
                path.display()
            ));
        } else if ty.is_symlink() {
            out.skipped
                .push(format!("{}: a symbolic link", path.display()));
        } else if ty.is_dir() {
            dirs.push((n, path));
        } else if ty.is_file() {
            let beside_of = n.strip_suffix(".ranges.json");
            if ranges_beside && beside_of.is_some_and(|d| files.contains(d)) {
                continue;
            }
            out.inputs.push(Input {
                path: path.clone(),
                name: join(n),
            });
        } else {
            out.skipped.push(format!(
                "{}: not a regular file (a pipe, socket or device)",
                path.display()
            ));
        }
    }
    for (n, path) in dirs {
        walk(path, Some(&join(n)), ranges_beside, out)?;
    }
    Ok(())
}

/// Every name must be one a receiver accepts: refuse the send, naming each file, before anything
/// is opened.
fn check_names(inputs: &[Input]) -> Result<()> {
    let bad: Vec<String> = inputs
        .iter()
        .filter_map(|i| {
            name::check(&i.name)
                .err()
                .map(|e| format!("  {}: {e}", i.path.display()))
        })
        .collect();
    if !bad.is_empty() {
        bail!(
            "{} file{} would be refused by the receiver for {} name:\n{}\n\
             rename {} (or copy it under another name) and send again",
            bad.len(),
            if bad.len() == 1 { "" } else { "s" },
            if bad.len() == 1 { "its" } else { "their" },
            bad.join("\n"),
            if bad.len() == 1 { "it" } else { "them" },
        );
    }
    Ok(())
}

/// No two documents may share a name, and no name may be both a file and a folder.
pub fn check_unique(inputs: &[Input]) -> Result<()> {
    let mut by_name: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
    for i in inputs {
        by_name.entry(&i.name).or_default().push(&i.path);
    }
    let mut problems = Vec::new();
    for (name, paths) in &by_name {
        if paths.len() > 1 {
            let same = paths.windows(2).all(|w| w[0] == w[1]);
            let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            problems.push(if same {
                format!("  {} is given {} times", list[0], paths.len())
            } else {
                format!("  {} would all be stored as {name}", list.join(", "))
            });
        }
        // `a` and `a/b`: a file where the other needs a folder.
        let mut at = 0;
        while let Some(i) = name[at..].find('/') {
            let folder = &name[..at + i];
            if let Some(f) = by_name.get(folder) {
                problems.push(format!(
                    "  {} would be stored as {folder}, which {} needs as a folder",
                    f[0].display(),
                    paths[0].display()
                ));
            }
            at += i + 1;
        }
    }
    if !problems.is_empty() {
        bail!(
            "two documents of one send cannot have the same name on the receiver (one would be \
             lost):\n{}\nsend them in separate sessions, rename one, or send their folders with \
             -r so that each keeps its folder's name",
            problems.join("\n")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(e: &Expanded) -> Vec<&str> {
        e.inputs.iter().map(|i| i.name.as_str()).collect()
    }

    #[test]
    fn folders_keep_their_relative_paths() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("data");
        fs::create_dir_all(root.join("b/c")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("a.txt"), b"a").unwrap();
        fs::write(root.join("b/x.txt"), b"x").unwrap();
        fs::write(root.join("b/c/y.txt"), b"y").unwrap();
        fs::write(root.join(".env"), b"secret").unwrap();
        fs::write(root.join(".git/config"), b"").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        let e = expand(std::slice::from_ref(&root), true, false).unwrap();
        assert_eq!(names(&e), ["data/a.txt", "data/b/x.txt", "data/b/c/y.txt"]);
        assert_eq!(e.skipped.len(), 3, "{:?}", e.skipped);
        // `.` sends the contents.
        let e = expand(&[root.join(".")], true, false).unwrap();
        assert_eq!(names(&e), ["data/a.txt", "data/b/x.txt", "data/b/c/y.txt"]);
        // A folder without a name of its own (ending in `..`): its contents.
        let e = expand(&[root.join("b/..")], true, false).unwrap();
        assert_eq!(names(&e), ["a.txt", "b/x.txt", "b/c/y.txt"]);
        // Without -r a folder is an error that says what to do.
        let err = expand(&[root], false, false).unwrap_err().to_string();
        assert!(err.contains("pass -r"), "{err}");
    }

    #[test]
    fn duplicate_names_are_refused_before_sending() {
        let d = tempfile::tempdir().unwrap();
        for dir in ["a", "b"] {
            fs::create_dir(d.path().join(dir)).unwrap();
            fs::write(d.path().join(dir).join("same.txt"), dir).unwrap();
        }
        let a = d.path().join("a/same.txt");
        let b = d.path().join("b/same.txt");
        let err = format!(
            "{:#}",
            expand(&[a.clone(), b.clone()], false, false).unwrap_err()
        );
        assert!(err.contains("would all be stored as same.txt"), "{err}");
        let err = format!(
            "{:#}",
            expand(&[a.clone(), a.clone()], false, false).unwrap_err()
        );
        assert!(err.contains("is given 2 times"), "{err}");
        // With -r their folders keep them apart.
        let e = expand(&[d.path().join("a"), d.path().join("b")], true, false).unwrap();
        assert_eq!(names(&e), ["a/same.txt", "b/same.txt"]);
        // A file and a folder of the same name.
        fs::write(d.path().join("x"), b"").unwrap();
        fs::create_dir(d.path().join("y")).unwrap();
        fs::create_dir(d.path().join("y/x")).unwrap();
        fs::write(d.path().join("y/x/z"), b"").unwrap();
        let err = format!(
            "{:#}",
            expand(&[d.path().join("x"), d.path().join("y/x")], true, false).unwrap_err()
        );
        assert!(err.contains("needs as a folder"), "{err}");
    }

    #[test]
    fn names_receivers_refuse_are_refused_here() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".env");
        fs::write(&p, b"").unwrap();
        let err = format!("{:#}", expand(&[p], false, false).unwrap_err());
        assert!(err.contains("begins with '.'"), "{err}");
    }

    #[test]
    fn ranges_files_beside_documents_are_not_documents() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("t");
        fs::create_dir(&root).unwrap();
        fs::write(root.join("r.bin"), b"x").unwrap();
        fs::write(root.join("r.bin.ranges.json"), b"{}").unwrap();
        fs::write(root.join("lone.ranges.json"), b"{}").unwrap();
        let e = expand(std::slice::from_ref(&root), true, true).unwrap();
        assert_eq!(names(&e), ["t/lone.ranges.json", "t/r.bin"]);
        let e = expand(
            &[root.join("r.bin"), root.join("r.bin.ranges.json")],
            false,
            true,
        )
        .unwrap();
        assert_eq!(names(&e), ["r.bin"]);
        let e = expand(std::slice::from_ref(&root), true, false).unwrap();
        assert_eq!(e.inputs.len(), 3);
    }
}
