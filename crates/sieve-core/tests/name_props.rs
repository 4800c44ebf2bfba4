//! Properties of the receiver's name check (`sieve_core::name`): whatever a sender sends, an
//! accepted name joined to a folder stays beneath it and names no hidden file; and every tree a
//! sender builds from plain names is accepted.

use std::path::{Component, Path};

use proptest::prelude::*;
use sieve_core::name::{self, MAX_DEPTH};

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
}
