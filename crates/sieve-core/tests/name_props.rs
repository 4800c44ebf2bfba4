//! Properties of the receiver's name check (`sieve_core::name`): whatever a sender sends, an
//! accepted name joined to a folder stays beneath it, names no hidden file and holds no character
//! that changes how it displays; a portable name holds nothing Windows cannot; and every tree a
//! sender builds from plain names is accepted.

use std::path::{Component, Path};
use std::sync::LazyLock;

use proptest::prelude::*;
use sieve_core::name::{self, NameError, MAX_DEPTH};
use unicode_general_category::{get_general_category, GeneralCategory};

/// Every Unicode format character (`Cf`), found by scanning all of Unicode once.
fn format_characters() -> &'static [char] {
    static ALL: LazyLock<Vec<char>> = LazyLock::new(scan_format_characters);
    &ALL
}

fn scan_format_characters() -> Vec<char> {
    let all: Vec<char> = (0..=char::MAX as u32)
        .filter_map(char::from_u32)
        .filter(|&c| get_general_category(c) == GeneralCategory::Format)
        .collect();
    // The ones that disguise names are among them: bidirectional controls, zero-width
    // characters, the byte-order mark, and the invisible tags.
    for c in [
        '\u{202A}',
        '\u{202B}',
        '\u{202C}',
        '\u{202D}',
        '\u{202E}',
        '\u{2066}',
        '\u{2067}',
        '\u{2068}',
        '\u{2069}',
        '\u{200E}',
        '\u{200F}',
        '\u{061C}',
        '\u{200B}',
        '\u{200C}',
        '\u{200D}',
        '\u{2060}',
        '\u{FEFF}',
        '\u{E0001}',
        '\u{E0041}',
    ] {
        assert!(all.contains(&c), "U+{:04X} is not Cf", c as u32);
    }
    all
}

/// Windows device names, written out: a component whose stem is one of these (in any case) is
/// the device.
fn windows_devices() -> Vec<String> {
    let mut v: Vec<String> = ["CON", "PRN", "AUX", "NUL"].map(String::from).to_vec();
    for p in ["COM", "LPT"] {
        for d in [
            '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '\u{B9}', '\u{B2}', '\u{B3}',
        ] {
            v.push(format!("{p}{d}"));
        }
    }
    v
}

/// Whether a component is a Windows device name, by the list above: its stem (before the first
/// `.`, trailing spaces dropped), upper-cased.
fn names_a_device(component: &str) -> bool {
    let stem = component.split('.').next().unwrap().trim_end_matches(' ');
    windows_devices().contains(&stem.to_uppercase())
}

/// Strings biased towards what makes paths dangerous: separators, dots, backslashes, NUL,
/// control characters, plus ordinary letters and multi-byte characters.
fn hostile() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z]{1,4}",
        3 => Just("/".to_string()),
        3 => Just(".".to_string()),
        2 => Just("..".to_string()),
        1 => Just("\\".to_string()),
        1 => Just("\0".to_string()),
        1 => Just("\n".to_string()),
        1 => Just("é".to_string()),
        1 => Just(" ".to_string()),
        1 => Just("\u{202E}".to_string()),
        1 => Just("\u{200B}".to_string()),
        1 => Just("CON".to_string()),
        1 => Just("aux".to_string()),
        1 => Just(":".to_string()),
        1 => Just("?".to_string()),
        1 => any::<String>(),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

/// A plain component: visible, no separator, no control character.
fn component() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_][a-zA-Z0-9_. -]{0,12}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// An accepted name, joined to any folder, is lexically beneath it: only normal components,
    /// none hidden, none `..`, none absolute; and `split` gives back exactly its components.
    #[test]
    fn accepted_names_stay_beneath_the_folder(n in hostile()) {
        if name::check(&n).is_ok() {
            let base = Path::new("/srv/inbox");
            let joined = base.join(&n);
            prop_assert!(joined.starts_with(base));
            let comps: Vec<_> = Path::new(&n).components().collect();
            prop_assert!(!comps.is_empty());
            for c in &comps {
                match c {
                    Component::Normal(s) => {
                        let s = s.to_str().unwrap();
                        prop_assert!(!s.starts_with('.'), "hidden component in {n:?}");
                        prop_assert!(!s.contains('\\') && !s.contains('\0'));
                        prop_assert!(
                            !s.chars().any(|c| matches!(
                                get_general_category(c),
                                GeneralCategory::Format | GeneralCategory::Control
                            )),
                            "a format or control character in accepted {n:?}"
                        );
                    }
                    other => prop_assert!(false, "{other:?} in accepted {n:?}"),
                }
            }
            // One spelling: the path's components joined by '/' are the name itself.
            let (dirs, last) = name::split(&n);
            let mut again = dirs.join("/");
            if !again.is_empty() {
                again.push('/');
            }
            again.push_str(last);
            prop_assert_eq!(&again, &n);
            prop_assert_eq!(dirs.len() + 1, comps.len());
        }
    }

    /// Any name with a `..` or `.` component, a leading `/`, or a hidden component is refused,
    /// wherever it sits.
    #[test]
    fn traversal_and_hidden_components_are_refused(
        before in prop::collection::vec(component(), 0..4),
        after in prop::collection::vec(component(), 0..4),
        bad in prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just(String::new()),
            "\\.[a-z]{0,6}",
        ],
    ) {
        let mut parts = before.clone();
        parts.push(bad);
        parts.extend(after);
        let n = parts.join("/");
        prop_assert!(name::check(&n).is_err(), "{n:?} accepted");
        let absolute = format!("/{}", before.join("/"));
        prop_assert!(name::check(&absolute).is_err(), "{:?} accepted", absolute);
    }

    /// Every relative path built from plain components (what `sieve send -r` produces) is
    /// accepted.
    #[test]
    fn plain_trees_are_accepted(parts in prop::collection::vec(component(), 1..MAX_DEPTH)) {
        let n = parts.join("/");
        prop_assert_eq!(name::check(&n), Ok(()));
    }

    /// A format character anywhere in a name, in any component, refuses it, and the message
    /// names its code point rather than showing it.
    #[test]
    fn format_characters_are_refused_wherever_they_sit(
        parts in prop::collection::vec(component(), 1..6),
        which in any::<prop::sample::Index>(),
        part in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
    ) {
        let cf = format_characters();
        let c = cf[which.index(cf.len())];
        let mut parts = parts;
        let i = part.index(parts.len());
        let chars: Vec<char> = parts[i].chars().collect();
        let pos = at.index(chars.len() + 1);
        parts[i] = chars[..pos].iter().chain([c].iter()).chain(chars[pos..].iter()).collect();
        let n = parts.join("/");
        let e = name::check(&n);
        let refused_for_it =
            matches!(&e, Err(NameError::Invisible { code, .. }) if *code == c as u32);
        prop_assert!(refused_for_it, "{:?}: {:?}", n, e);
        if let Err(e) = e {
            prop_assert!(!e.to_string().contains(c), "the message shows U+{:04X}", c as u32);
        }
        prop_assert!(name::check_portable(&n).is_err());
    }

    /// What the portable check accepts, the plain check accepts too, and it holds no Windows
    /// device name, no character Windows refuses, no component ending in a dot or a space.
    #[test]
    fn portable_names_hold_nothing_windows_cannot(n in hostile()) {
        if name::check_portable(&n).is_ok() {
            prop_assert_eq!(name::check(&n), Ok(()));
            prop_assert!(!n.contains(['<', '>', ':', '"', '|', '?', '*']), "{:?}", n);
            for c in n.split('/') {
                prop_assert!(!names_a_device(c), "device {:?} in {:?}", c, n);
                prop_assert!(!c.ends_with('.') && !c.ends_with(' '), "{:?}", n);
            }
        }
    }

    /// A device name in any case, with any extension, in any component, is refused by the
    /// portable check (and accepted by the plain one); a plain tree without them is accepted by
    /// both.
    #[test]
    fn device_names_are_refused_in_any_case_with_any_extension(
        before in prop::collection::vec(component(), 0..3),
        after in prop::collection::vec(component(), 0..3),
        device in any::<prop::sample::Index>(),
        case in any::<u16>(),
        ext in "(\\.[a-z0-9]{1,4}){0,2}",
    ) {
        let devices = windows_devices();
        let d: String = devices[device.index(devices.len())]
            .chars()
            .enumerate()
            .map(|(i, c)| if case >> i & 1 == 1 { c.to_ascii_lowercase() } else { c })
            .collect();
        let mut parts = before.clone();
        parts.push(format!("{d}{ext}"));
        parts.extend(after.clone());
        let n = parts.join("/");
        prop_assert_eq!(name::check(&n), Ok(()));
        prop_assert!(
            matches!(name::check_portable(&n), Err(NameError::Reserved { .. })
                | Err(NameError::TrailingDotOrSpace { .. })),
            "{:?} accepted", n
        );
        let plain: Vec<String> = before.into_iter().chain(after).collect();
        if !plain.is_empty()
            && plain.iter().all(|c| !names_a_device(c) && !c.ends_with(['.', ' ']))
        {
            prop_assert_eq!(name::check_portable(&plain.join("/")), Ok(()));
        }
    }
}
