//! `key=value`, `key: value` and `"key": "value"` pairs: log fields a policy names, and secrets
//! after keys such as `password` or `token`.
//!
//! Logs and NDJSON repeat a few dozen keys on every line. Which detectors a key concerns is
//! worked out once (splitting the key into words and comparing them with every list) and
//! remembered in [`KeyCache`], for the keys a policy lists and the ones it does not alike.

use std::ops::Range;

use super::{Scanner, Window};
use crate::detect::{before, secret};
use crate::names::FieldName;
use crate::policy::Kind;
use crate::scan::Hit;

/// Longest key remembered; longer ones are looked at every time.
const CACHED_KEY: usize = 24;

/// Which detectors a key concerns, a bit per detector (policy order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct KeyUse {
    /// `kv-fields` detectors that list it.
    fields: u64,
    /// `secret` detectors with it among their password keys.
    password: u64,
    /// `secret` detectors with it among their other keys (and not their password keys).
    secret: u64,
}

impl KeyUse {
    fn any(&self) -> bool {
        self.fields | self.password | self.secret != 0
    }
}

/// Slots of [`KeyCache`]: a few times the keys a log or an export repeats.
const SLOTS: usize = 256;
/// Ways of a set of [`KeyCache`].
const WAYS: usize = 4;

/// Keys met in a chunk and what they concern: a four-way set-associative table of keys of at
/// most [`CACHED_KEY`] bytes, held as three zero-padded words so that a lookup is a hash and a
/// few comparisons. A miss only costs working a key out again.
///
/// A set keeps its least recently used key out when a new one enters: with two ways, three
/// keys of one log line sharing a set (`api_key`, `Authorization`, `dob`) missed on every line,
/// and the one-off keys before the colons of IPv6 addresses (`f3a5` in `fe80::f3a5:...`)
/// pushed out the keys every line repeats. (Pushing out the newest instead shields a set from
/// one-off keys, but two keys of a record that share a set then push each other out for ever,
/// which an NDJSON record of twenty keys does.) Each slot remembers when it was last used, so
/// that a hit only writes that stamp: the ways are compared all at once, and nothing moves.
pub(super) struct KeyCache {
    slots: Box<[Slot; SLOTS]>,
    /// Lookups so far: the stamp of the next one.
    clock: u64,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    len: u8,
    words: [u64; 3],
    key_use: KeyUse,
    /// When the slot was last looked up or filled (0: never; such a slot holds no key).
    used: u64,
}

impl KeyCache {
    pub(super) fn new() -> KeyCache {
        KeyCache {
            slots: Box::new([Slot::default(); SLOTS]),
            clock: 0,
        }
    }
}

/// The key `s[k..e]` (at most [`CACHED_KEY`] bytes) as zero-padded words, and its slot. The
/// words are loaded straight from `s` where eight bytes can be (a copy to a buffer first would
/// make the loads wait for the copy's stores).
#[inline]
fn words_of(s: &[u8], k: usize, e: usize) -> ([u64; 3], usize) {
    let word = |a: usize| -> u64 {
        if a >= e {
            return 0;
        }
        let n = (e - a).min(8);
        let w = match s.get(a..a + 8) {
            Some(b) => {
                let mut x = [0u8; 8];
                x.copy_from_slice(b);
                u64::from_le_bytes(x)
            }
            None => s[a..a + n]
                .iter()
                .rev()
                .fold(0u64, |w, &b| w << 8 | u64::from(b)),
        };
        if n == 8 {
            w
        } else {
            w & ((1u64 << (8 * n)) - 1)
        }
    };
    let words = [word(k), word(k + 8), word(k + 16)];
    let h = (words[0] ^ words[1].rotate_left(21) ^ words[2].rotate_left(42) ^ (e - k) as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (words, (h >> 56) as usize % SLOTS)
}

/// Which bytes around a trigger may be part of a key (letters, digits, `_`, `-`, `.`): bit `t`
/// of `bits` is about window position `start + t`, over the two blocks that end with the
/// trigger's, so that the key before a trigger is found with one bit search.
pub(super) struct KeyChars {
    pub start: isize,
    pub bits: u128,
}

impl KeyChars {
    /// The start of the run of key bytes that ends at `end`, if it starts inside the two blocks.
    #[inline]
    fn run_start(&self, end: usize) -> Option<usize> {
        let t = end as isize - self.start;
        if !(0..128).contains(&t) {
            return None;
        }
        let others = !self.bits & ((1u128 << t) - 1);
        if others == 0 {
            return None;
        }
        let last_other = 127 - others.leading_zeros() as isize;
        Some((self.start + last_other + 1) as usize)
    }
}

/// Bytes that end a value that is not quoted.
static VALUE_END: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_whitespace()
            || matches!(
                b,
                b',' | b';' | b'&' | b'"' | b'\'' | b'}' | b']' | b')' | b'<' | b'>'
            );
        i += 1;
    }
    t
};

impl Scanner<'_> {
    /// The detectors key `key` concerns, remembered or worked out.
    #[inline]
    fn key_use(&self, s: &[u8], k: usize, e: usize, cache: &mut KeyCache) -> KeyUse {
        let key = &s[k..e];
        if key.len() > CACHED_KEY {
            return self.work_out(key);
        }
        let (words, slot) = words_of(s, k, e);
        let len = key.len() as u8;
        // Word by word, in registers: the words were just computed, and a wide compare would
        // read them back from memory before their stores are done.
        let holds = |e: &Slot| {
            let differ =
                (e.words[0] ^ words[0]) | (e.words[1] ^ words[1]) | (e.words[2] ^ words[2]);
            e.len == len && differ == 0
        };
        cache.clock += 1;
        let now = cache.clock;
        let set = &mut cache.slots[slot & !(WAYS - 1)..][..WAYS];
        // A key is in at most one way (it enters only when missed).
        let hits = (0..WAYS).fold(0u32, |m, w| m | u32::from(holds(&set[w])) << w);
        if hits != 0 {
            let hit = &mut set[hits.trailing_zeros() as usize];
            hit.used = now;
            return hit.key_use;
        }
        let u = self.work_out(key);
        // The least recently used way (one never used first).
        let mut out = 0;
        for w in 1..WAYS {
            if set[w].used < set[out].used {
                out = w;
            }
        }
        set[out] = Slot {
            len,
            words,
            key_use: u,
            used: now,
        };
        u
    }

    /// Which detectors a key concerns, by splitting it into words and comparing them with every
    /// list.
    fn work_out(&self, key: &[u8]) -> KeyUse {
        let name = FieldName::new(key);
        let mut u = KeyUse::default();
        for &d in &self.kvs {
            if let Kind::KvFields { keys } = &self.p.detectors[d].kind {
                if keys.matches_name(&name) {
                    u.fields |= 1 << d;
                }
            }
        }
        for &d in &self.secrets {
            if let Kind::Secret {
                password_keys,
                keys,
                ..
            } = &self.p.detectors[d].kind
            {
                if password_keys.matches_name(&name) {
                    u.password |= 1 << d;
                } else if keys.matches_name(&name) {
                    u.secret |= 1 << d;
                }
            }
        }
        u
    }

    /// `key=value`, `key: value` or `"key": "value"` around the `=` or `:` at `i`.
    pub(super) fn key_value(
        &self,
        w: &Window<'_>,
        i: usize,
        chars: &KeyChars,
        cache: &mut KeyCache,
        out: &mut Vec<Hit>,
    ) {
        let s = w.bytes;
        let b = s[i];
        let next = s.get(i + 1).copied();
        let prev = before(s, i);
        if next == Some(b'=')
            || (b == b':' && matches!(next, Some(b':') | Some(b'/')))
            || (b == b'=' && matches!(prev, Some(b'=' | b'!' | b'<' | b'>')))
            || (b == b':' && prev == Some(b':'))
        {
            return;
        }
        // The key: an identifier just before, perhaps quoted, perhaps with a space.
        let mut k_end = i;
        while k_end > 0 && i - k_end < 2 && s[k_end - 1] == b' ' {
            k_end -= 1;
        }
        if k_end > 0 && matches!(s[k_end - 1], b'"' | b'\'') {
            k_end -= 1;
        }
        let k = match chars.run_start(k_end) {
            Some(k) => k,
            None => {
                let key_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
                let mut k = k_end;
                while k > 0 && k_end - k <= 64 && key_char(s[k - 1]) {
                    k -= 1;
                }
                k
            }
        };
        // Keys are identifiers: a timestamp's "10:" or a ratio's "3=" is none.
        if k == k_end || k_end - k > 64 || !(s[k].is_ascii_alphabetic() || s[k] == b'_') {
            return;
        }
        let u = self.key_use(s, k, k_end, cache);
        if !u.any() {
            return;
        }
        // The value: quoted up to its closing quote, else up to a delimiter.
        let mut v = i + 1;
        while v < s.len() && v - i <= 4 && s[v] == b' ' {
            v += 1;
        }
        let Some(value) = value_at(s, v) else {
            return;
        };
        for &d in &self.kvs {
            if u.fields & 1 << d != 0 {
                self.emit(w, d, value.clone(), out);
            }
        }
        for &d in &self.secrets {
            let Kind::Secret {
                min_len,
                min_entropy,
                ..
            } = &self.p.detectors[d].kind
            else {
                continue;
            };
            let val = &s[value.clone()];
            if u.password & 1 << d != 0 {
                if val.len() >= 4 && !secret::is_placeholder(val) {
                    self.emit(w, d, value.clone(), out);
                }
            } else if u.secret & 1 << d != 0 {
                // `Authorization: Bearer <token>`: the token is the secret.
                let mut r = value.clone();
                let scheme = [&b"bearer"[..], b"basic", b"token", b"digest"]
                    .iter()
                    .any(|x| val.eq_ignore_ascii_case(x));
                if scheme && s.get(value.end) == Some(&b' ') {
                    match value_at(s, value.end + 1) {
                        Some(t) => r = t,
                        None => continue,
                    }
                }
                if secret::looks_random(&s[r.clone()], *min_len, *min_entropy) {
                    self.emit(w, d, r, out);
                }
            }
        }
    }
}

/// Most bytes of a value after a key.
const MAX_VALUE: usize = 1024;

/// The value starting at `v`: inside quotes if quoted, else up to a delimiter.
fn value_at(s: &[u8], v: usize) -> Option<Range<usize>> {
    let q = *s.get(v)?;
    if q == b'{' || q == b'[' {
        // A nested object or list is a structure, not a value (the JSON pass reads those).
        return None;
    }
    if q == b'"' || q == b'\'' {
        let mut e = v + 1;
        while e < s.len() && e - v <= MAX_VALUE {
            match s[e] {
                b'\\' => e += 2,
                c if c == q => return (e > v + 1).then_some(v + 1..e),
                b'\n' => return None,
                _ => e += 1,
            }
        }
        return None;
    }
    let lim = s.len().min(v + MAX_VALUE);
    let e = s[v..lim]
        .iter()
        .position(|&b| VALUE_END[usize::from(b)])
        .map_or(lim, |p| v + p);
    (e > v).then_some(v..e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    /// Keys that share a set of the cache, looked up in turn, get the answers of a fresh
    /// reckoning every time (six of them: more than a set holds).
    #[test]
    fn keys_sharing_a_set_keep_their_answers() {
        let p = Policy::default_policy();
        let sc = Scanner::new(&p);
        let names = ["dob", "api_key", "password", "user", "code", "ssn", "token"];
        let mut doc = Vec::new();
        let mut keys = Vec::new();
        for i in 0..4000 {
            let name = format!("{}{}", names[i % names.len()], i / names.len());
            keys.push((doc.len(), doc.len() + name.len()));
            doc.extend_from_slice(name.as_bytes());
            doc.push(b' ');
        }
        let set = |&(k, e): &(usize, usize)| words_of(&doc, k, e).1 & !(WAYS - 1);
        let same: Vec<_> = keys
            .iter()
            .filter(|key| set(key) == set(&keys[0]))
            .take(6)
            .copied()
            .collect();
        assert_eq!(same.len(), 6, "six keys in one set");
        let mut cache = KeyCache::new();
        for round in 0..8 {
            for (n, &(k, e)) in same.iter().enumerate().cycle().skip(round).take(13) {
                let got = sc.key_use(&doc, k, e, &mut cache);
                assert_eq!(got, sc.work_out(&doc[k..e]), "key {n} in round {round}");
            }
        }
        // And keys whose answer is not empty: a listed key and a password key in one set.
        let mut cache = KeyCache::new();
        let doc = b"dob api_key dob api_key";
        for (k, e) in [(0, 3), (4, 11), (12, 15), (16, 23)] {
            assert_eq!(sc.key_use(doc, k, e, &mut cache), sc.work_out(&doc[k..e]));
            assert!(sc.key_use(doc, k, e, &mut cache).any());
        }
    }
}
