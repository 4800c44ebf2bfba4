//! The slow reference of the content scan: byte by byte, without block classification,
//! prefilters or caches, over the same validated detectors. It is the specification the fast
//! scan in [`super`] is tested against (the same findings on every document and every cut),
//! kept as plain as the rules it states.

use std::ops::Range;

use phonenumber::country::Id;

use crate::detect::{self, api_key, card, date, email, iban, ip, jwt, pem, person, phone, secret};
use crate::detect::{before, is_word};
use crate::granularity::expand;
use crate::policy::{Kind, Policy, PrefixWhat};
use crate::scan::{Hit, Window};

/// Separators that may join digit groups (at most two in a row).
#[inline]
fn is_sep(b: u8) -> bool {
    matches!(b, b' ' | b'-' | b'.' | b'/' | b'(' | b')')
}

/// Whether the digit at `i` starts a run: no digit before it, directly or across one or two
/// separators. Decided from the three bytes before `i` alone.
#[inline]
fn run_start(s: &[u8], i: usize) -> bool {
    let d = |k: usize| i >= k && s[i - k].is_ascii_digit();
    let p = |k: usize| i >= k && is_sep(s[i - k]);
    !(d(1) || (p(1) && d(2)) || (p(1) && p(2) && d(3)))
}

/// The detectors of a policy, sorted by what triggers them.
pub struct Scanner<'p> {
    p: &'p Policy,
    cards: Vec<usize>,
    ibans: Vec<usize>,
    ssns: Vec<usize>,
    emails: Vec<usize>,
    phones: Vec<(usize, Id)>,
    ipv4s: Vec<usize>,
    ipv6s: Vec<usize>,
    pems: Vec<usize>,
    persons: Vec<usize>,
    secrets: Vec<usize>,
    dobs: Vec<(usize, usize)>,
    kvs: Vec<usize>,
    keywords: Vec<usize>,
    digits: bool,
    colon: bool,
    eq: bool,
}

/// A digit group: its range in the window.
type Group = (usize, usize);

impl<'p> Scanner<'p> {
    pub fn new(p: &'p Policy) -> Scanner<'p> {
        let mut sc = Scanner {
            p,
            cards: vec![],
            ibans: vec![],
            ssns: vec![],
            emails: vec![],
            phones: vec![],
            ipv4s: vec![],
            ipv6s: vec![],
            pems: vec![],
            persons: vec![],
            secrets: vec![],
            dobs: vec![],
            kvs: vec![],
            keywords: vec![],
            digits: false,
            colon: false,
            eq: false,
        };
        for (i, d) in p.detectors.iter().enumerate() {
            match &d.kind {
                Kind::Card => sc.cards.push(i),
                Kind::Iban => sc.ibans.push(i),
                Kind::Ssn => sc.ssns.push(i),
                Kind::Email => sc.emails.push(i),
                Kind::Phone { region } => sc.phones.push((i, *region)),
                Kind::Ipv4 => sc.ipv4s.push(i),
                Kind::Ipv6 => sc.ipv6s.push(i),
                Kind::Pem { .. } => sc.pems.push(i),
                Kind::PersonTitle => sc.persons.push(i),
                Kind::Secret { .. } => sc.secrets.push(i),
                Kind::Dob { within } => sc.dobs.push((i, *within)),
                Kind::KvFields { .. } => sc.kvs.push(i),
                Kind::Keyword { .. } => sc.keywords.push(i),
                _ => {}
            }
        }
        sc.digits = !(sc.cards.is_empty()
            && sc.ibans.is_empty()
            && sc.ssns.is_empty()
            && sc.phones.is_empty()
            && sc.ipv4s.is_empty()
            && sc.dobs.is_empty());
        sc.eq = !(sc.secrets.is_empty() && sc.kvs.is_empty());
        sc.colon = sc.eq || !sc.ipv6s.is_empty();
        sc
    }

    /// Report a finding of detector `det` at `r` (window positions), unless allowed.
    fn emit(&self, w: &Window<'_>, det: usize, r: Range<usize>, out: &mut Vec<Hit>) {
        if r.is_empty() || self.p.allowed(det, &w.bytes[r.clone()]) {
            return;
        }
        let e = expand(w.bytes, r, self.p.detectors[det].granularity);
        out.push(Hit {
            start: w.base + e.start as u64,
            end: w.base + e.end as u64,
            det: det as u16,
        });
    }

    /// Scan the chunk `w.own`, appending findings (in no particular order) to `out`.
    pub fn scan(&self, w: &Window<'_>, out: &mut Vec<Hit>) {
        self.literals(w, out);
        let mut i = w.own.start;
        while i < w.own.end {
            i = self.trigger(w, i, out);
        }
    }

    /// Look at the byte at `i`; returns where to go on from.
    #[inline]
    fn trigger(&self, w: &Window<'_>, i: usize, out: &mut Vec<Hit>) -> usize {
        let s = w.bytes;
        match s[i] {
            b'0'..=b'9' if self.digits => {
                if run_start(s, i) {
                    return self.digit_run(w, i, out);
                }
                // Inside a run begun before the chunk: skip its digits.
                let mut e = i + 1;
                while e < w.own.end && s[e].is_ascii_digit() {
                    e += 1;
                }
                return e;
            }
            b'@' if !self.emails.is_empty() => {
                if let Some(r) = email::around(s, i) {
                    for &d in &self.emails {
                        self.emit(w, d, r.clone(), out);
                    }
                }
            }
            b':' if self.colon => {
                if !self.ipv6s.is_empty() && ip::is_first_colon(s, i) {
                    if let Some(r) = ip::ipv6_at(s, i) {
                        for &d in &self.ipv6s {
                            self.emit(w, d, r.clone(), out);
                        }
                    }
                }
                if self.eq {
                    self.key_value(w, i, out);
                }
            }
            b'=' if self.eq => self.key_value(w, i, out),
            _ => {}
        }
        i + 1
    }

    /// Prefixes, PEM blocks, regular expressions and keywords that start in the chunk.
    fn literals(&self, w: &Window<'_>, out: &mut Vec<Hit>) {
        let s = w.bytes;
        let own = w.own.clone();
        let reach = |n: usize| (own.end + n).min(s.len());
        for pre in &self.p.prefixes {
            for m in pre.ac.find_iter(&s[own.start..reach(16)]) {
                let at = own.start + m.start();
                if at >= own.end {
                    break;
                }
                let found = match pre.what[m.pattern().as_usize()] {
                    PrefixWhat::ApiKey(d, rule) => api_key::key_at(s, at, &rule).map(|r| (d, r)),
                    PrefixWhat::Jwt(d) => jwt::token_at(s, at).map(|r| (d, r)),
                };
                if let Some((d, r)) = found {
                    self.emit(w, d, r, out);
                }
            }
        }
        if !self.persons.is_empty() {
            // Every title starts with one of four capitals, rare enough in text that a byte
            // search and a comparison beat an automaton (measured: a fifth of the time spent on
            // letters went to the automaton's false starts on "Mr", "Dr", "Ms").
            let hay = &s[own.start..own.end];
            let starts =
                memchr::memchr3_iter(b'M', b'D', b'P', hay).chain(memchr::memchr_iter(b'S', hay));
            for p in starts {
                let at = own.start + p;
                for t in person::TITLES {
                    if s[at..].starts_with(t.as_bytes()) {
                        if let Some(r) = person::name_after(s, at, at + t.len()) {
                            for &d in &self.persons {
                                self.emit(w, d, r.clone(), out);
                            }
                        }
                        break;
                    }
                }
            }
        }
        if !self.pems.is_empty() {
            let hay = &s[own.start..reach(pem::BEGIN.len())];
            for p in memchr::memmem::find_iter(hay, pem::BEGIN) {
                let at = own.start + p;
                if at >= own.end {
                    continue;
                }
                for &d in &self.pems {
                    if let Kind::Pem { labels } = &self.p.detectors[d].kind {
                        if let Some(r) = pem::block_at(s, at, labels) {
                            self.emit(w, d, r, out);
                        }
                    }
                }
            }
        }
        if let Some((set, dets)) = &self.p.regex_set {
            let hay = &s[own.start..reach(crate::engine::MARGIN / 2)];
            for k in set.matches(hay).iter() {
                let d = dets[k];
                let Kind::Regex { re } = &self.p.detectors[d].kind else {
                    continue;
                };
                let mut pos = own.start;
                while pos < own.end {
                    let Some(m) = re.find_at(s, pos) else { break };
                    if m.start() >= own.end {
                        break;
                    }
                    self.emit(w, d, m.range(), out);
                    pos = if m.end() > m.start() {
                        m.end()
                    } else {
                        m.end() + 1
                    };
                }
            }
        }
        for &d in &self.keywords {
            let Kind::Keyword { ac } = &self.p.detectors[d].kind else {
                continue;
            };
            for m in ac.find_iter(&s[own.start..reach(256)]) {
                let r = own.start + m.start()..own.start + m.end();
                if r.start >= own.end {
                    break;
                }
                let whole = !before(s, r.start).is_some_and(is_word)
                    && !s.get(r.end).copied().is_some_and(is_word);
                if whole {
                    self.emit(w, d, r, out);
                }
            }
        }
    }

    /// Whether a date-of-birth keyword lies wholly in `lo..hi` and starts a word (no letter
    /// before it). Any occurrence counts, overlapping ones too.
    fn keyword_in(&self, s: &[u8], lo: usize, hi: usize) -> bool {
        let Some(ac) = &self.p.dob_keywords else {
            return false;
        };
        ac.find_overlapping_iter(&s[lo..hi]).any(|m| {
            let a = lo + m.start();
            !before(s, a).is_some_and(|b| b.is_ascii_alphabetic())
        })
    }

    /// Everything a run of digit groups starting at `i` can be; returns where the run ends.
    fn digit_run(&self, w: &Window<'_>, i: usize, out: &mut Vec<Hit>) -> usize {
        let s = w.bytes;
        if !self.ibans.is_empty() && i >= 2 {
            self.iban(w, i - 2, out);
        }
        // A run glued to a word (`abc123`, a hash, an identifier) is none of these.
        let glued = before(s, i).is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        let mut ring: [Group; 8] = [(0, 0); 8];
        let mut first: [Group; 16] = [(0, 0); 16];
        let mut n = 0usize;
        let mut g_start = i;
        let mut phone_found = false;
        loop {
            let mut e = g_start;
            while e < s.len() && s[e].is_ascii_digit() {
                e += 1;
            }
            ring[n % 8] = (g_start, e);
            if n < first.len() {
                first[n] = (g_start, e);
            }
            n += 1;
            if !glued {
                phone_found |= self.groups_end(w, &ring, n, out);
            }
            // Another group follows across one or two separators?
            let mut k = e;
            while k < s.len() && k - e < 2 && is_sep(s[k]) {
                k += 1;
            }
            if k > e && k < s.len() && s[k].is_ascii_digit() {
                g_start = k;
                continue;
            }
            if !glued && !phone_found && i > 0 && s[i - 1] == b'+' {
                self.international(w, i - 1, &first[..n.min(first.len())], out);
            }
            return e;
        }
    }

    /// Candidates ending with the `n`-th group (the last eight are in `ring`); returns whether a
    /// phone number was among them.
    fn groups_end(&self, w: &Window<'_>, ring: &[Group; 8], n: usize, out: &mut Vec<Hit>) -> bool {
        let s = w.bytes;
        let mut phone_found = false;
        let g = |back: usize| ring[(n - 1 - back) % 8];
        let sep = |back: usize| {
            // Separator before group n-1-back (which must not be the first).
            let (a, _) = g(back);
            let (_, e) = g(back + 1);
            &s[e..a]
        };
        let last = g(0);
        let right_ok = !s.get(last.1).copied().is_some_and(is_word);
        if !right_ok {
            return false;
        }
        // Whether group n-1-back may start a finding: it is the run's first group and the byte
        // before it is no word character, or a separator precedes it.
        let left_ok = |back: usize| {
            if back + 1 == n {
                !before(s, g(back).0).is_some_and(|b| is_word(b) || b == b'.')
            } else {
                true
            }
        };
        let len = |back: usize| g(back).1 - g(back).0;
        // Most runs are a short number or two (a status code, a time): nothing to look at.
        if n == 1 && len(0) < 4 {
            return false;
        }

        // Cards: one group of 13-19 digits, or up to five joined by the same single space or dash.
        if !self.cards.is_empty() && (0..5.min(n)).map(len).sum::<usize>() >= 13 {
            let mut digits = [0u8; 19];
            for k in 0..5.min(n) {
                let total: usize = (0..=k).map(len).sum();
                if total > 19 {
                    break;
                }
                if k > 0 {
                    let s0 = sep(0);
                    if !(0..k).all(|b| sep(b) == s0 && (s0 == b" " || s0 == b"-")) {
                        break;
                    }
                }
                if total >= 13 && left_ok(k) {
                    let mut p = 0;
                    for b in (0..=k).rev() {
                        let (a, e) = g(b);
                        digits[p..p + (e - a)].copy_from_slice(&s[a..e]);
                        p += e - a;
                    }
                    if card::is_card(&digits[..total]) {
                        for &d in &self.cards {
                            self.emit(w, d, g(k).0..last.1, out);
                        }
                        break;
                    }
                }
            }
        }
        if n >= 3 {
            let (s1, s2) = (sep(1), sep(0));
            let same = s1 == s2 && s1.len() == 1;
            let lens = (len(2), len(1), len(0));
            // SSNs: 3-2-4 joined by the same dash or space.
            if !self.ssns.is_empty()
                && lens == (3, 2, 4)
                && same
                && (s1 == b"-" || s1 == b" ")
                && left_ok(2)
                && ssn_groups(s, [g(2), g(1), g(0)])
            {
                for &d in &self.ssns {
                    self.emit(w, d, g(2).0..last.1, out);
                }
            }
            // Dates of birth: y-m-d or d/m/y (either order of day and month).
            if !self.dobs.is_empty()
                && matches!(lens, (4, 1..=2, 1..=2) | (1..=2, 1..=2, 4))
                && same
                && matches!(s1, b"-" | b"/" | b".")
                && left_ok(2)
                && date::numeric([&s[g(2).0..g(2).1], &s[g(1).0..g(1).1], &s[g(0).0..g(0).1]])
            {
                self.dob(w, g(2).0..last.1, out);
            }
            // Phones written the North American way: (212) 555-0134, 212-555-0134, 212.555.0134,
            // with an optional 1 or +1 in front.
            if !self.phones.is_empty() && len(2) == 3 && len(1) == 3 && len(0) == 4 {
                phone_found |= self.nanp(w, ring, n, out);
            }
        }
        // IPv4: four groups joined by single dots, not part of a longer dotted run.
        if n >= 4 && !self.ipv4s.is_empty() && (0..4).all(|b| len(b) <= 3) {
            let dots = (0..3).all(|b| sep(b) == b".");
            let not_longer_left = n == 4 || sep(3) != b".";
            let not_longer_right = !(s.get(last.1) == Some(&b'.')
                && s.get(last.1 + 1).is_some_and(u8::is_ascii_digit));
            if dots && not_longer_left && not_longer_right && left_ok(3) {
                let parts = [g(3), g(2), g(1), g(0)].map(|(a, e)| &s[a..e]);
                if ip::is_ipv4(parts) {
                    for &d in &self.ipv4s {
                        self.emit(w, d, g(3).0..last.1, out);
                    }
                }
            }
        }
        // Dates with the month's name: the year is the last group.
        if !self.dobs.is_empty() && len(0) == 4 && (n == 1 || sep(0) == b" ") {
            // The month's name and the day take at most 24 bytes before the year.
            let far = last.0.saturating_sub(24 + self.p.dob_within);
            if self.keyword_in(s, far, last.0) {
                if let Some(a) = date::named_before_year(s, last.0..last.1) {
                    self.dob(w, a..last.1, out);
                }
            }
        }
        phone_found
    }

    /// Returns whether a phone number was found.
    fn nanp(&self, w: &Window<'_>, ring: &[Group; 8], n: usize, out: &mut Vec<Hit>) -> bool {
        let s = w.bytes;
        let g = |back: usize| ring[(n - 1 - back) % 8];
        let between = |back: usize| &s[g(back + 1).1..g(back).0];
        let area = g(2);
        let paren = area.0 > 0 && s[area.0 - 1] == b'(';
        let s1_ok = match between(1) {
            b"-" | b"." | b" " => !paren,
            b") " | b")" => paren,
            _ => false,
        };
        if !s1_ok || !matches!(between(0), b"-" | b"." | b" ") {
            return false;
        }
        let mut start = if paren { area.0 - 1 } else { area.0 };
        let mut lead = false;
        if n >= 4 {
            // A country code 1 (or +1) written before the area code.
            let c = g(3);
            let joins = match between(2) {
                b" " | b"-" | b"." => !paren,
                b" (" | b"(" => paren,
                _ => false,
            };
            if &s[c.0..c.1] == b"1" && joins && (n == 4 || between(3) == b" ") {
                start = c.0;
                if before(s, start) == Some(b'+') {
                    start -= 1;
                }
                lead = true;
            }
        }
        if !lead && n == 3 && before(s, start).is_some_and(|b| is_word(b) || b == b'.') {
            return false;
        }
        let r = start..g(0).1;
        let Ok(text) = std::str::from_utf8(&s[r.clone()]) else {
            return false;
        };
        let mut found = false;
        for &(d, region) in &self.phones {
            if phone::valid(text, region) {
                self.emit(w, d, r.clone(), out);
                found = true;
            }
        }
        found
    }

    /// A number written `+<country> ...`: the longest run of its first groups that is valid.
    fn international(&self, w: &Window<'_>, plus: usize, groups: &[Group], out: &mut Vec<Hit>) {
        let s = w.bytes;
        if self.phones.is_empty() || before(s, plus).is_some_and(is_word) {
            return;
        }
        let mut total = 0;
        let mut ends = [(0usize, 0usize); 16];
        let mut m = 0;
        for &(a, e) in groups {
            total += e - a;
            if total > 15 {
                break;
            }
            ends[m] = (e, total);
            m += 1;
        }
        for &(e, total) in ends[..m].iter().rev() {
            if total < 8 {
                break;
            }
            if s.get(e).copied().is_some_and(is_word) {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&s[plus..e]) else {
                return;
            };
            let mut found = false;
            for &(d, region) in &self.phones {
                if phone::valid(text, region) {
                    self.emit(w, d, plus..e, out);
                    found = true;
                }
            }
            if found {
                return;
            }
        }
    }

    /// A date at `r` is a date of birth if a keyword ends at most `within` bytes before it.
    fn dob(&self, w: &Window<'_>, r: Range<usize>, out: &mut Vec<Hit>) {
        for &(d, within) in &self.dobs {
            if self.keyword_in(w.bytes, r.start.saturating_sub(within), r.start) {
                self.emit(w, d, r.clone(), out);
            }
        }
    }

    /// An IBAN whose two-letter country code starts at `a` (its check digits follow).
    fn iban(&self, w: &Window<'_>, a: usize, out: &mut Vec<Hit>) {
        let s = w.bytes;
        if !(s[a].is_ascii_uppercase() && s[a + 1].is_ascii_uppercase())
            || before(s, a).is_some_and(|b| b.is_ascii_alphanumeric())
        {
            return;
        }
        let Some(want) = iban::length_of(&s[a..a + 2]) else {
            return;
        };
        let mut compact = [0u8; 34];
        let mut n = 0;
        let mut e = a;
        while n < want && e < s.len() {
            let b = s[e];
            if b.is_ascii_uppercase() || b.is_ascii_digit() {
                compact[n] = b;
                n += 1;
                e += 1;
            } else if b == b' '
                && n > 0
                && s.get(e + 1)
                    .is_some_and(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            {
                e += 1;
            } else {
                break;
            }
        }
        if n != want || s.get(e).copied().is_some_and(|b| b.is_ascii_alphanumeric()) {
            return;
        }
        if iban::is_iban(&compact[..n]) {
            for &d in &self.ibans {
                self.emit(w, d, a..e, out);
            }
        }
    }

    /// `key=value`, `key: value` or `"key": "value"` around the `=` or `:` at `i`.
    fn key_value(&self, w: &Window<'_>, i: usize, out: &mut Vec<Hit>) {
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
        let key_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
        let mut k = k_end;
        while k > 0 && k_end - k <= 64 && key_char(s[k - 1]) {
            k -= 1;
        }
        // Keys are identifiers: a timestamp's "10:" or a ratio's "3=" is none.
        if k == k_end || k_end - k > 64 || !(s[k].is_ascii_alphabetic() || s[k] == b'_') {
            return;
        }
        let key = crate::names::FieldName::new(&s[k..k_end]);
        let kv_hit = |d: &usize| match &self.p.detectors[*d].kind {
            Kind::KvFields { keys } => keys.matches_name(&key),
            Kind::Secret {
                password_keys,
                keys,
                ..
            } => password_keys.matches_name(&key) || keys.matches_name(&key),
            _ => false,
        };
        if !self.kvs.iter().any(kv_hit) && !self.secrets.iter().any(kv_hit) {
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
            if let Kind::KvFields { keys } = &self.p.detectors[d].kind {
                if keys.matches_name(&key) {
                    self.emit(w, d, value.clone(), out);
                }
            }
        }
        for &d in &self.secrets {
            let Kind::Secret {
                password_keys,
                keys,
                min_len,
                min_entropy,
            } = &self.p.detectors[d].kind
            else {
                continue;
            };
            let val = &s[value.clone()];
            if password_keys.matches_name(&key) {
                if val.len() >= 4 && !secret::is_placeholder(val) {
                    self.emit(w, d, value.clone(), out);
                }
            } else if keys.matches_name(&key) {
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
                if secret::looks_random_by_definition(&s[r.clone()], *min_len, *min_entropy) {
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
    let mut e = v;
    while e < s.len()
        && e - v < MAX_VALUE
        && !s[e].is_ascii_whitespace()
        && !b",;&\"'}])<>".contains(&s[e])
    {
        e += 1;
    }
    (e > v).then_some(v..e)
}

fn ssn_groups(s: &[u8], g: [Group; 3]) -> bool {
    let [a, b, c] = g.map(|(x, y)| &s[x..y]);
    detect::ssn::is_ssn(a, b, c)
}
