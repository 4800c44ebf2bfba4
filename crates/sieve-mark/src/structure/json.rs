//! JSON and NDJSON fields by key or path.
//!
//! A streaming tokenizer keeps the keys of the objects it is inside (arrays are transparent:
//! `orders.card` reaches the card of every element of `orders`), and classifies a value whose
//! key a policy lists (`keys`, at any depth, by the rule of [`crate::names`]) or whose path
//! matches one of its `paths`. A string is classified inside its quotes, any other value whole
//! (an object or array with its brackets); values inside a classified one are not looked at
//! again. Several documents in a row (NDJSON, JSON Lines) are read one after the other; a
//! malformed one is skipped to the end of its line, and reading starts again there.

use crate::names::Names;
use crate::path::PathPattern;
use crate::policy::{Granularity, Kind, Policy};
use crate::scan::Hit;

/// Deepest nesting followed; deeper documents are skipped to the end of the line.
pub const MAX_DEPTH: usize = 512;

/// Longest key compared; longer keys match nothing.
const MAX_KEY: usize = 256;

struct Rule {
    det: u16,
    keys: Names,
    paths: Vec<PathPattern>,
    record: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected (after `:`, `[`, `,` in an array, or at the top).
    Value,
    /// After `{` or `,` in an object: a key or `}`.
    Key,
    /// Reading a key's characters.
    InKey {
        esc: bool,
    },
    Colon,
    /// Reading a string value's characters.
    InString {
        esc: bool,
    },
    /// Reading a number or literal.
    InScalar,
    /// After a value: `,` or a closing bracket.
    After,
    /// Skipping a malformed document to the end of its line.
    Recover,
}

struct Frame {
    object: bool,
    key: Vec<u8>,
    /// Where this container started, and the rules it matched, if it is classified.
    matched: Option<(u64, u64)>,
}

pub struct JsonPass {
    rules: Vec<Rule>,
    stack: Vec<Frame>,
    state: State,
    /// Depth of the classified container values are inside, if any.
    inside: Option<usize>,
    /// The string or scalar value being read: its start and the rules it matched.
    value: Option<(u64, u64)>,
    top_start: u64,
    top_picks: u64,
    pos: u64,
}

impl JsonPass {
    pub fn new(policy: &Policy) -> JsonPass {
        let rules = policy
            .detectors
            .iter()
            .enumerate()
            .filter_map(|(i, d)| match &d.kind {
                Kind::JsonFields { keys, paths } => Some(Rule {
                    det: i as u16,
                    keys: keys.clone(),
                    paths: paths.clone(),
                    record: matches!(d.granularity, Granularity::Record | Granularity::Line),
                }),
                _ => None,
            })
            .collect();
        JsonPass {
            rules,
            stack: Vec::new(),
            state: State::Value,
            inside: None,
            value: None,
            top_start: 0,
            top_picks: 0,
            pos: 0,
        }
    }

    /// The rules a value starting now matches.
    fn rules_for_value(&self) -> u64 {
        if self.inside.is_some() {
            return 0;
        }
        let Some(top) = self.stack.last() else {
            return 0;
        };
        if !top.object || top.key.len() > MAX_KEY {
            return 0;
        }
        // The keys down to here, without allocating (paths deeper than this match by key only).
        let mut buf: [&[u8]; 32] = [&[]; 32];
        let mut depth = 0;
        for f in self.stack.iter().filter(|f| f.object) {
            if depth == buf.len() {
                depth = usize::MAX;
                break;
            }
            buf[depth] = f.key.as_slice();
            depth += 1;
        }
        let path = (depth != usize::MAX).then(|| &buf[..depth]);
        let name = crate::names::FieldName::new(&top.key);
        let mut bits = 0;
        for (k, r) in self.rules.iter().enumerate() {
            if r.keys.matches_name(&name)
                || path.is_some_and(|p| r.paths.iter().any(|x| x.matches(p)))
            {
                bits |= 1 << k;
            }
        }
        bits
    }

    fn emit(&mut self, bits: u64, start: u64, end: u64, out: &mut Vec<Hit>) {
        for (k, r) in self.rules.iter().enumerate() {
            if bits & (1 << k) != 0 {
                if r.record {
                    self.top_picks |= 1 << k;
                } else if end > start {
                    out.push(Hit {
                        start,
                        end,
                        det: r.det,
                    });
                }
            }
        }
    }

    /// A value ended at `end` (exclusive): close the top-level document if it was one.
    fn value_done(&mut self, end: u64, out: &mut Vec<Hit>) {
        if self.stack.is_empty() {
            for (k, r) in self.rules.iter().enumerate() {
                if self.top_picks & (1 << k) != 0 {
                    out.push(Hit {
                        start: self.top_start,
                        end,
                        det: r.det,
                    });
                }
            }
            self.top_picks = 0;
            self.state = State::Value;
        } else {
            self.state = State::After;
        }
    }

    fn fail(&mut self) {
        self.stack.clear();
        self.inside = None;
        self.value = None;
        self.top_picks = 0;
        self.state = State::Recover;
    }

    pub fn feed(&mut self, bytes: &[u8], base: u64, out: &mut Vec<Hit>) {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            let off = base + i as u64;
            match self.state {
                State::Recover => match memchr::memchr(b'\n', &bytes[i..]) {
                    Some(p) => {
                        i += p + 1;
                        self.state = State::Value;
                        continue;
                    }
                    None => break,
                },
                State::InString { esc } | State::InKey { esc } => {
                    let key = matches!(self.state, State::InKey { .. });
                    if esc {
                        if key {
                            self.push_key(&bytes[i..i + 1]);
                        }
                        self.state = if key {
                            State::InKey { esc: false }
                        } else {
                            State::InString { esc: false }
                        };
                        i += 1;
                        continue;
                    }
                    let Some(p) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
                        if key {
                            self.push_key(&bytes[i..]);
                        }
                        break;
                    };
                    if key {
                        self.push_key(&bytes[i..i + p]);
                    }
                    let at = i + p;
                    if bytes[at] == b'\\' {
                        self.state = if key {
                            State::InKey { esc: true }
                        } else {
                            State::InString { esc: true }
                        };
                        if key {
                            self.push_key(b"\\");
                        }
                        i = at + 1;
                        continue;
                    }
                    let end = base + at as u64;
                    i = at + 1;
                    if key {
                        self.state = State::Colon;
                    } else {
                        if let Some((start, bits)) = self.value.take() {
                            self.emit(bits, start + 1, end, out);
                        }
                        self.value_done(end + 1, out);
                    }
                    continue;
                }
                State::InScalar => {
                    if b.is_ascii_whitespace() || b == b',' || b == b']' || b == b'}' {
                        if let Some((start, bits)) = self.value.take() {
                            self.emit(bits, start, off, out);
                        }
                        self.value_done(off, out);
                        continue; // the delimiter is read in the new state
                    }
                    i += 1;
                    continue;
                }
                _ => {}
            }
            if b.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            match self.state {
                State::Value => {
                    if self.stack.is_empty() {
                        self.top_start = off;
                        self.top_picks = 0;
                    }
                    let bits = self.rules_for_value();
                    match b {
                        b'{' | b'[' => {
                            if self.stack.len() >= MAX_DEPTH {
                                self.fail();
                                continue;
                            }
                            let matched = (bits != 0).then_some((off, bits));
                            if matched.is_some() {
                                self.inside = Some(self.stack.len());
                            }
                            self.stack.push(Frame {
                                object: b == b'{',
                                key: Vec::new(),
                                matched,
                            });
                            self.state = if b == b'{' { State::Key } else { State::Value };
                        }
                        b'"' => {
                            self.value = (bits != 0).then_some((off, bits));
                            self.state = State::InString { esc: false };
                        }
                        b']' if self.stack.last().is_some_and(|f| !f.object) => {
                            // An empty array.
                            self.close(off, out);
                        }
                        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                            self.value = (bits != 0).then_some((off, bits));
                            self.state = State::InScalar;
                        }
                        _ => {
                            self.fail();
                            continue;
                        }
                    }
                }
                State::Key => match b {
                    b'"' => {
                        if let Some(f) = self.stack.last_mut() {
                            f.key.clear();
                        }
                        self.state = State::InKey { esc: false };
                    }
                    b'}' => self.close(off, out),
                    _ => {
                        self.fail();
                        continue;
                    }
                },
                State::Colon => {
                    if b == b':' {
                        self.state = State::Value;
                    } else {
                        self.fail();
                        continue;
                    }
                }
                State::After => match b {
                    b',' => {
                        let object = self.stack.last().is_some_and(|f| f.object);
                        self.state = if object { State::Key } else { State::Value };
                    }
                    b'}' | b']' => {
                        let object = self.stack.last().is_some_and(|f| f.object);
                        if object != (b == b'}') {
                            self.fail();
                            continue;
                        }
                        self.close(off, out);
                    }
                    _ => {
                        self.fail();
                        continue;
                    }
                },
                _ => unreachable!("handled above"),
            }
            i += 1;
        }
        self.pos = base + bytes.len() as u64;
    }

    /// Close the innermost container at the bracket at `off`.
    fn close(&mut self, off: u64, out: &mut Vec<Hit>) {
        let Some(f) = self.stack.pop() else {
            self.fail();
            return;
        };
        if let Some((start, bits)) = f.matched {
            self.inside = None;
            self.emit(bits, start, off + 1, out);
        }
        self.value_done(off + 1, out);
    }

    fn push_key(&mut self, b: &[u8]) {
        if let Some(f) = self.stack.last_mut() {
            if f.key.len() <= MAX_KEY {
                f.key
                    .extend_from_slice(&b[..b.len().min(MAX_KEY + 1 - f.key.len())]);
            }
        }
    }

    pub fn finish(&mut self, out: &mut Vec<Hit>) {
        // A scalar at the very end of the input ends there.
        if self.state == State::InScalar {
            if let Some((start, bits)) = self.value.take() {
                self.emit(bits, start, self.pos, out);
            }
            self.value_done(self.pos, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: &str, doc: &str, cut: usize) -> Vec<String> {
        let p = Policy::parse(policy).unwrap();
        let mut pass = JsonPass::new(&p);
        let mut out = Vec::new();
        pass.feed(&doc.as_bytes()[..cut], 0, &mut out);
        pass.feed(&doc.as_bytes()[cut..], cut as u64, &mut out);
        pass.finish(&mut out);
        out.sort_by_key(|h| h.start);
        out.iter()
            .map(|h| doc[h.start as usize..h.end as usize].to_string())
            .collect()
    }

    #[test]
    fn paths_and_keys_in_ndjson_at_any_cut() {
        let policy = r#"
            [[detect]]
            kind = "json-fields"
            keys = ["email"]
            paths = ["user.*", "payment.card", "orders.sku"]
        "#;
        let doc = r#"{"user":{"name":"A \"B\"","age":41},"payment":{"card":"4111","cvv":1},"x":{"contactEmail":"a@b.io"}}
{"orders":[{"sku":12},{"sku":"Z"}],"payment":{"card":null},"n":[]}
not json at all, "user": 1
{"user": "flat", "deep": {"email": {"v": 1}}}"#;
        let want = vec![
            "A \\\"B\\\"",
            "41",
            "4111",
            "a@b.io",
            "12",
            "Z",
            "null",
            "{\"v\": 1}",
        ];
        for cut in 0..=doc.len() {
            assert_eq!(run(policy, doc, cut), want, "cut at {cut}");
        }
        let p = PathPattern::parse("**.*_name").unwrap();
        assert!(p.matches(&[b"a", b"b", b"First_Name"]) && !p.matches(&[b"name"]));
        assert!(PathPattern::parse("a..b").is_err());
    }

    #[test]
    fn records_and_pretty_printed_documents() {
        let policy =
            "[[detect]]\nkind = \"json-fields\"\nkeys = [\"ssn\"]\ngranularity = \"record\"\n";
        let doc = "[\n  {\"ssn\": \"1\"}\n]\n{\"a\": 1}\n";
        assert_eq!(run(policy, doc, 5), vec!["[\n  {\"ssn\": \"1\"}\n]"]);
    }
}
