//! Path patterns for JSON fields (`user.*`, `**.card`, `*_name`): what a policy's `paths` say,
//! apart from the JSON pass that follows them, so that a policy can hold them without depending
//! on the pass.

/// A path pattern: keys separated by dots, `*` for any one key, `**` for any number of keys,
/// and `*` inside a key for any characters (`*_name`). Case is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    segs: Vec<Seg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Any,
    Deep,
    Glob(Vec<u8>),
}

impl PathPattern {
    pub fn parse(p: &str) -> Result<PathPattern, String> {
        if p.is_empty() {
            return Err("a path is empty".into());
        }
        let segs = p
            .split('.')
            .map(|s| match s {
                "" => Err(format!(
                    "path {p:?} has an empty key (two dots, or a dot at an end)"
                )),
                "*" => Ok(Seg::Any),
                "**" => Ok(Seg::Deep),
                _ => Ok(Seg::Glob(s.to_ascii_lowercase().into_bytes())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PathPattern { segs })
    }

    /// Whether the keys from the top down to a value match.
    pub fn matches(&self, path: &[&[u8]]) -> bool {
        fn go(segs: &[Seg], path: &[&[u8]]) -> bool {
            match segs.split_first() {
                None => path.is_empty(),
                Some((Seg::Deep, rest)) => (0..=path.len()).any(|k| go(rest, &path[k..])),
                Some((seg, rest)) => match path.split_first() {
                    None => false,
                    Some((key, more)) => {
                        let ok = match seg {
                            Seg::Any => true,
                            Seg::Glob(g) => glob(g, key),
                            Seg::Deep => unreachable!(),
                        };
                        ok && go(rest, more)
                    }
                },
            }
        }
        go(&self.segs, path)
    }
}

/// `*` matches any run of bytes; everything else matches itself, ignoring ASCII case.
fn glob(pat: &[u8], s: &[u8]) -> bool {
    match pat.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|k| glob(rest, &s[k..])),
        Some((&c, rest)) => s
            .split_first()
            .is_some_and(|(&d, more)| d.to_ascii_lowercase() == c && glob(rest, more)),
    }
}
