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
//! - no Unicode format character (general category `Cf`: bidirectional controls such as U+202E,
//!   zero-width characters such as U+200B) nor line or paragraph separator (`Zl`, `Zp`): no name
//!   that displays as another (`\u{202E}txt.exe` shows as `exe.txt`, `re\u{200B}port` as
//!   `report`);
//! - each component at most [`MAX_COMPONENT_LEN`] bytes (`NAME_MAX`), at most [`MAX_DEPTH`]
//!   components.
//!
//! [`check_portable`] adds what Windows cannot hold, for folders shared with it
//! (`sieve serve --portable-names`): device names (`CON`, `aux.txt`, `LPT1`), the characters
//! `<>:"|?*`, and components ending in a dot or a space (which Windows drops, so that `a.` and `a`
//! would be one file).
//!
//! What this cannot decide is what is on the receiver's disk: a component that is a symbolic
//! link there. The store resolves names one component at a time from a held directory
//! descriptor, never following links, so such a name is refused there.

use thiserror::Error;
use unicode_general_category::{get_general_category, GeneralCategory};

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
    /// The name contains a character that changes how the rest is shown without showing
    /// itself: a Unicode format character (`Cf`: bidirectional controls, zero-width
    /// characters, the byte-order mark), or a line or paragraph separator.
    #[error(
        "{name:?} contains U+{code:04X}, a Unicode format character (a bidirectional control, a \
         zero-width character or a line separator) that makes a name display as something else"
    )]
    Invisible {
        /// The whole name as received (shown escaped).
        name: String,
        /// The first such character's code point.
        code: u32,
    },
    /// With [`check_portable`]: a component is a Windows device name, with or without an
    /// extension.
    #[error(
        "{name:?}: {component:?} is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, \
         LPT0-9, with any extension); this receiver keeps names usable on Windows \
         (--portable-names)"
    )]
    Reserved {
        /// The whole name as received.
        name: String,
        /// The offending component.
        component: String,
    },
    /// With [`check_portable`]: a character Windows does not allow in a name.
    #[error(
        "{name:?} contains {ch:?}, which Windows does not allow in names (< > : \" | ? *); this \
         receiver keeps names usable on Windows (--portable-names)"
    )]
    NotPortable {
        /// The whole name as received.
        name: String,
        /// The first such character.
        ch: char,
    },
    /// With [`check_portable`]: a component ends in a dot or a space, which Windows drops.
    #[error(
        "{name:?}: {component:?} ends in a dot or a space, which Windows drops from names; this \
         receiver keeps names usable on Windows (--portable-names)"
    )]
    TrailingDotOrSpace {
        /// The whole name as received.
        name: String,
        /// The offending component.
        component: String,
    },
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
    if let Some(c) = name.chars().find(|&c| invisible(c)) {
        return Err(NameError::Invisible {
            name: own(),
            code: u32::from(c),
        });
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

/// Whether `c` changes how a name is shown without being seen: a format character (`Cf`) or a
/// line or paragraph separator (`Zl`, `Zp`, which break a listing like a newline).
fn invisible(c: char) -> bool {
    // Every such character is outside ASCII: plain names pay one comparison a character.
    !c.is_ascii()
        && matches!(
            get_general_category(c),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

/// Characters Windows refuses in a name, besides `\\`, `/`, NUL and controls (which [`check`]
/// refuses already).
pub const NOT_PORTABLE: &[char] = &['<', '>', ':', '"', '|', '?', '*'];

/// Windows device names: a component whose stem (what comes before its first `.`, trailing
/// spaces dropped) is one of these, in any case, names the device whatever its extension.
const DEVICES: &[&str] = &["CON", "PRN", "AUX", "NUL"];

/// [`check`], and what Windows cannot hold: device names (`CON`, `aux.txt`, `LPT1.log`, `com9`,
/// in any case and with any extension), the characters [`NOT_PORTABLE`], and components that end
/// in a dot or a space. For a receiver whose folder is shared with Windows (`sieve serve
/// --portable-names`): a name Windows would open as a device, refuse, or merge with another is
/// refused before any byte of its document travels.
pub fn check_portable(name: &str) -> Result<(), NameError> {
    check(name)?;
    if let Some(ch) = name.chars().find(|c| NOT_PORTABLE.contains(c)) {
        return Err(NameError::NotPortable {
            name: name.to_string(),
            ch,
        });
    }
    for c in name.split('/') {
        if c.ends_with(['.', ' ']) {
            return Err(NameError::TrailingDotOrSpace {
                name: name.to_string(),
                component: c.to_string(),
            });
        }
        if is_device(c) {
            return Err(NameError::Reserved {
                name: name.to_string(),
                component: c.to_string(),
            });
        }
    }
    Ok(())
}

/// Whether Windows takes the component `c` for a device: its stem, before the first `.` and
/// without trailing spaces, is `CON`, `PRN`, `AUX`, `NUL`, or `COM` or `LPT` followed by a digit
/// or a superscript one, two or three, in any case.
fn is_device(c: &str) -> bool {
    let stem = c.split('.').next().unwrap_or("").trim_end_matches(' ');
    if DEVICES.iter().any(|d| stem.eq_ignore_ascii_case(d)) {
        return true;
    }
    let mut chars = stem.chars();
    let prefix: String = chars.by_ref().take(3).collect();
    if !(prefix.eq_ignore_ascii_case("COM") || prefix.eq_ignore_ascii_case("LPT")) {
        return false;
    }
    matches!(
        (chars.next(), chars.next()),
        (Some('0'..='9' | '\u{B9}' | '\u{B2}' | '\u{B3}'), None)
    )
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

    /// Names that display as something else: a right-to-left override turns `\u{202E}txt.exe`
    /// into what a file manager shows as `exe.txt`; zero-width characters make two different
    /// names look alike. Every Unicode format character (category Cf) is refused, wherever it
    /// sits.
    #[test]
    fn format_characters_are_refused() {
        for bad in [
            "\u{202E}txt.exe",
            "invoice\u{202E}fdp.exe",
            "a\u{200B}b.txt",
            "dir\u{200D}/x.txt",
            "x/\u{2066}y\u{2069}",
            "\u{FEFF}report.txt",
            "soft\u{AD}hyphen",
            "tag\u{E0041}",
            "word\u{2060}joiner",
            "\u{061C}arabic-mark",
        ] {
            let e = check(bad).expect_err(bad);
            let shown = e.to_string();
            assert!(
                !shown.chars().any(|c| c == '\u{202E}' || c == '\u{200B}'),
                "the message shows the character itself: {shown}"
            );
        }
    }

    #[test]
    fn what_windows_cannot_hold_is_refused_when_portable() {
        for bad in [
            "CON",
            "con",
            "aux.txt",
            "Aux.tar.gz",
            "NUL",
            "nul.",
            "PRN.log",
            "COM1",
            "com9.txt",
            "COM0",
            "LPT1",
            "lpt3.dat",
            "COM\u{B9}",
            "LPT\u{B2}.txt",
            "nul .txt",
            "dir/CON/x.txt",
            "dir/aux",
            "a<b",
            "a>b",
            "a:b",
            "a\"b",
            "a|b",
            "what?",
            "*.txt",
            "trailing.",
            "trailing ",
            "dir./x",
            "dir /x",
        ] {
            assert_eq!(check(bad), Ok(()), "{bad:?} refused by check");
            assert!(check_portable(bad).is_err(), "{bad:?} accepted as portable");
        }
        for good in [
            "CONSOLE.txt",
            "con1",
            "COM10",
            "lpt",
            "comx.txt",
            "auxiliary",
            "nul_",
            "x.con",
            "my con.txt",
            "a.b/c",
            "日本.txt",
            "report.txt",
        ] {
            assert_eq!(check_portable(good), Ok(()), "{good:?} refused as portable");
        }
        // Everything `check` refuses, the portable check refuses too.
        assert!(check_portable("../x").is_err());
        assert!(check_portable("\u{202E}txt.exe").is_err());
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
            "café/naïve résumé.txt",
            "ملف.txt",
            "קובץ.txt",
            "emoji 😀.txt",
            "CON",
            "aux.txt",
        ] {
            assert_eq!(check(good), Ok(()), "{good:?} refused");
        }
        assert!(check(&vec!["d"; MAX_DEPTH].join("/")).is_ok());
        assert_eq!(split("a/b/c.txt"), (vec!["a", "b"], "c.txt"));
        assert_eq!(split("c.txt"), (vec![], "c.txt"));
    }
}
