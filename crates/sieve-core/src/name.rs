//! Which document names a receiver accepts: relative paths that can only ever point beneath its
//! output folder.
//!
//! A document's name comes from the sender ([`crate::message::Doc::name`]) and is untrusted
//! (docs/DESIGN.md §6: a sender must not be able to write outside the output folder). Folders
//! travel as relative names such as `a/b/c.txt` (`sieve send -r`), so the name is a path, and this
//! module decides, as a pure function of its bytes, whether it is one the receiver may create:
//!
//! - components separated by `/`, none empty (no leading or trailing `/`, no `//`): the name is
//!   relative and has one spelling;
//! - no component `.` or `..`, and none starting with `.`: nothing climbs out of the folder, and
//!   nothing lands in a hidden file (`.bashrc`, `.ssh/authorized_keys`) or collides with the
//!   receiver's temporary files (`.sieve-partial-…`);
//! - no `\`, NUL or control character: no name that means something else to another tool or
//!   terminal;
//! - each component at most [`MAX_COMPONENT_LEN`] bytes (`NAME_MAX`), at most [`MAX_DEPTH`]
//!   components.
//!
//! What this cannot decide is what is on the receiver's disk: a component that is a symbolic
//! link there. The store resolves names one component at a time from a held directory
//! descriptor, never following links, so such a name is refused there.

use thiserror::Error;

/// Longest component of a name, in bytes (Linux's `NAME_MAX`).
pub const MAX_COMPONENT_LEN: usize = 255;

/// Most components in one name (folders nested this deep and the file itself).
pub const MAX_DEPTH: usize = 64;

/// Why a name is refused. The messages are what the sender is told.
///
/// A variant's `String` is the whole name as received, for the message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// The name is the empty string.
    #[error("the file name is empty")]
    Empty,
    /// The name starts with `/`.
    #[error("{0:?} is absolute; only names relative to the receiver's folder are accepted")]
    Absolute(String),
    /// The name has `//` or a trailing `/`.
    #[error("{0:?} has an empty component (a doubled or trailing '/')")]
    EmptyComponent(String),
    /// The name has a `.` or `..` component.
    #[error("{0:?} climbs out of the folder with '..' or names '.'")]
    DotComponent(String),
    /// A component starts with `.`: a hidden file or folder, or one that could collide with the
    /// receiver's `.sieve-partial-…` temporaries.
    #[error("{name:?}: {component:?} begins with '.'; hidden files and folders are refused")]
    Hidden {
        /// The whole name as received.
        name: String,
        /// The offending component.
        component: String,
    },
    /// The name contains `\`, a separator on other systems.
    #[error("{0:?} contains a backslash")]
    Backslash(String),
    /// The name contains a NUL byte; not carried, so the message never prints one.
    #[error("the file name contains a NUL byte")]
    Nul,
    /// The name contains a control character (Unicode `Cc`, e.g. a newline or an
    /// escape that would mislead a terminal).
    #[error("{0:?} contains control characters")]
    Control(String),
    /// A component is longer than [`MAX_COMPONENT_LEN`] bytes.
    #[error("{name:?}: a component is {len} bytes, the limit is {MAX_COMPONENT_LEN}")]
    ComponentTooLong {
        /// The whole name as received.
        name: String,
        /// Length of the first overlong component, in bytes (not characters).
        len: usize,
    },
    /// The name has more than [`MAX_DEPTH`] components.
    #[error("{name:?} is {depth} levels deep, the limit is {MAX_DEPTH}")]
    TooDeep {
        /// The whole name as received.
        name: String,
        /// Components in the name, the file itself included.
        depth: usize,
    },
}

/// Check `name`; `Ok` means every component is a plain, visible name and the whole stays
/// beneath whatever folder it is joined to.
pub fn check(name: &str) -> Result<(), NameError> {
    let own = || name.to_string();
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.contains('\0') {
        return Err(NameError::Nul);
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::Control(own()));
    }
    if name.contains('\\') {
        return Err(NameError::Backslash(own()));
    }
    if name.starts_with('/') {
        return Err(NameError::Absolute(own()));
    }
    let mut depth = 0;
    for c in name.split('/') {
        depth += 1;
        if c.is_empty() {
            return Err(NameError::EmptyComponent(own()));
        }
        if c == "." || c == ".." {
            return Err(NameError::DotComponent(own()));
        }
        if c.starts_with('.') {
            return Err(NameError::Hidden {
                name: own(),
                component: c.to_string(),
            });
        }
        if c.len() > MAX_COMPONENT_LEN {
            return Err(NameError::ComponentTooLong {
                name: own(),
                len: c.len(),
            });
        }
    }
    if depth > MAX_DEPTH {
        return Err(NameError::TooDeep { name: own(), depth });
    }
    Ok(())
}

/// The folders of a checked name and its last component: `a/b/c.txt` is (`["a", "b"]`,
/// `"c.txt"`).
pub fn split(name: &str) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = name.split('/').collect();
    let last = parts.pop().unwrap_or("");
    (parts, last)
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
            "a/../../x",
            "a/./b",
            "a/..",
            "/etc/passwd",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            ".sieve-partial-x",
            ".bashrc",
            "a/.ssh/authorized_keys",
            "..hidden",
            "a\nb",
            "a\u{7f}b",
        ] {
            assert!(check(bad).is_err(), "{bad:?} accepted");
        }
        let deep = vec!["d"; MAX_DEPTH + 1].join("/");
        assert!(matches!(check(&deep), Err(NameError::TooDeep { .. })));
        let long = "x".repeat(MAX_COMPONENT_LEN + 1);
        assert!(matches!(
            check(&long),
            Err(NameError::ComponentTooLong { .. })
        ));
    }

    #[test]
    fn plain_names_and_trees_are_accepted() {
        for good in [
            "report.txt",
            "a..b",
            "日本.txt",
            "x y",
            "a/b/c.txt",
            "2024/q1/report.csv",
            "a.b/c",
        ] {
            assert_eq!(check(good), Ok(()), "{good:?} refused");
        }
        assert!(check(&vec!["d"; MAX_DEPTH].join("/")).is_ok());
        assert_eq!(split("a/b/c.txt"), (vec!["a", "b"], "c.txt"));
        assert_eq!(split("c.txt"), (vec![], "c.txt"));
    }
}
