//! The content scan: every detector that looks at bytes rather than at a document's structure,
//! over one chunk of a document in one pass plus a few literal searches.
//!
//! The main loop takes 64 bytes at a time and classifies them at once ([`crate::classify`]:
//! digits, separators, letters, trigger bytes, as bit masks). A few shifts of those masks give
//! the only bytes worth a closer look:
//!
//! - a digit that starts a run of digit groups (joined by at most two of ` -./()`, so: no digit
//!   one byte before it, nor one separator and a digit, nor two separators and a digit) and is
//!   not glued to a word: cards, SSNs, IPv4 addresses, phone numbers, dates of birth
//!   (`digits`), unless the masks show the run can hold none of them (`shape`: a
//!   timestamp's date, a request's path and status);
//! - a digit that starts a run right after two capitals that start a word: IBANs;
//! - `@`: e-mail addresses;
//! - `:` and `=`: IPv6 addresses (at the first colon of one) and `key=value` / `key: value`
//!   pairs (secrets and log fields, `kv`);
//! - a capital `D`, `M`, `P` or `S` followed by a letter a title can go on with: names after a
//!   title.
//!
//! Literal searches run beside it: an Aho-Corasick automaton over the known key prefixes and
//! `eyJ` (JWTs), `memmem` for `-----BEGIN ` (PEM blocks), and the policy's own regular
//! expressions (skipped through a `RegexSet` when none matches in the chunk) and keywords.
//!
//! Every trigger is recognised from the bytes just around it, and each finding is reported only
//! by the chunk that holds its trigger ([`Window::own`]), which is what makes the result
//! independent of how a document is cut (see the crate documentation). A plain byte-by-byte
//! version of the same rules is kept as the tests' reference (`scan/reference.rs`), and the
//! tests hold this scan to it.

mod digits;
mod kv;
#[cfg(test)]
pub(crate) mod reference;
mod shape;

use std::ops::Range;

use phonenumber::country::Id;

use crate::allow::AllowList;
use crate::classify::{Block, Classifier};
use crate::detect::{api_key, email, ip, jwt, pem, person};
use crate::detect::{before, is_word};
use crate::granularity::expand;
use crate::policy::{Kind, Policy, PrefixWhat};
use shape::holds_nothing;

/// Blocks classified at a time: enough to keep the classifier's loop and tables hot, few
/// enough that they stay in the first-level cache (112 bytes each).
const BATCH: usize = 32;

/// `lits` put among `out[from..]` by their place in the document (start, then end; `lits`
/// before others at the same place), both being so ordered (where either is not, the result
/// holds the same findings in another order, which the engine's sort puts right).
fn merge_into(out: &mut Vec<Hit>, from: usize, lits: &[Hit]) {
    if lits.is_empty() {
        return;
    }
    let key = |h: &Hit| (h.start, h.end);
    // From the back: the later of the two last findings goes last.
    let mut i = out.len();
    out.extend_from_slice(lits);
    let mut k = out.len();
    for lit in lits.iter().rev() {
        while i > from && key(&out[i - 1]) >= key(lit) {
            out[k - 1] = out[i - 1];
            i -= 1;
            k -= 1;
        }
        out[k - 1] = *lit;
        k -= 1;
    }
}

/// One finding: a range of the document and the detector that classified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub start: u64,
    pub end: u64,
    pub det: u16,
}

/// A chunk to scan: `bytes` holds it (`own`) with context on both sides; `base` is the document
/// offset of `bytes[0]`.
pub struct Window<'a> {
    pub bytes: &'a [u8],
    pub base: u64,
    pub own: Range<usize>,
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
    /// Each detector's allow-list, in policy order.
    allow: Vec<AllowList>,
    digits: bool,
    colon: bool,
    eq: bool,
    classifier: Classifier,
}

/// What one chunk's scan remembers as it goes: answers that the next lines of a log or an
/// export are likely to ask again.
struct Memo {
    keys: kv::KeyCache,
    keywords: crate::keywords::Cache,
    headers: jwt::Headers,
}

/// The classes of the block being scanned and of its neighbours.
struct Near<'a> {
    prev: &'a Block,
    cur: &'a Block,
    next: &'a Block,
}

impl Near<'_> {
    /// Bit k: byte k - n of the block has class `f` (from the block before for k < n).
    #[inline]
    fn back(&self, f: impl Fn(&Block) -> u64, n: u32) -> u64 {
        f(self.cur) << n | f(self.prev) >> (64 - n)
    }

    /// Bit k: byte k + n of the block has class `f` (from the block after for k >= 64 - n).
    #[inline]
    fn ahead(&self, f: impl Fn(&Block) -> u64, n: u32) -> u64 {
        f(self.cur) >> n | f(self.next) << (64 - n)
    }

    /// The bytes a key may hold (letters, digits, `_`, `-`, `.`) in this block and the one
    /// before, which starts at window position `pos - 64`.
    #[inline]
    fn key_chars(&self, pos: usize) -> kv::KeyChars {
        let f = |b: &Block| b.alpha | b.digit | b.under | b.dash | b.dot;
        kv::KeyChars {
            start: pos as isize - 64,
            bits: u128::from(f(self.cur)) << 64 | u128::from(f(self.prev)),
        }
    }
}

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
            allow: p
                .detectors
                .iter()
                .map(|d| {
                    let values = p.allow_values.iter().chain(&d.allow);
                    AllowList::new(values.map(Vec::as_slice), &p.allow_patterns)
                })
                .collect(),
            digits: false,
            colon: false,
            eq: false,
            classifier: Classifier::new(b"", b""),
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
        let firsts: Vec<u8> = (0u8..128)
            .filter(|&b| {
                p.prefix_starts
                    .get(usize::from(b))
                    .is_some_and(|l| !l.list.is_empty())
            })
            .collect();
        let seconds_set = p.prefix_starts.iter().fold(0u128, |m, b| m | b.seconds);
        let seconds: Vec<u8> = (0u8..128).filter(|&b| seconds_set & 1 << b != 0).collect();
        sc.classifier = Classifier::new(&firsts, &seconds);
        sc
    }

    /// Report a finding of detector `det` at `r` (window positions), unless allowed.
    fn emit(&self, w: &Window<'_>, det: usize, r: Range<usize>, out: &mut Vec<Hit>) {
        if r.is_empty() || self.allow[det].allows(&w.bytes[r.clone()]) {
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
        // The literal searches' findings (PEM blocks, ...) are put among the main loop's at
        // the end, in order: the loop's come out sorted, and the engine's sort then finds the
        // chunk's findings in one run instead of merging two.
        let mut lits = Vec::new();
        self.literals(w, &mut lits);
        let from = out.len();
        self.main_loop(w, out);
        merge_into(out, from, &lits);
    }

    /// The block loop of [`Scanner::scan`]: every candidate the block masks pick.
    #[inline]
    fn main_loop(&self, w: &Window<'_>, out: &mut Vec<Hit>) {
        let s = w.bytes;
        let mut memo = Memo {
            keys: kv::KeyCache::new(),
            keywords: crate::keywords::Cache::new(),
            headers: jwt::Headers::default(),
        };
        // The block before (runs and words that began before the chunk), the block, and the
        // block after (how a run goes on). Blocks are classified [`BATCH`] at a time into
        // `ahead` (the classifier's loop then keeps its tables in registers).
        let mut pos = w.own.start;
        let mut prev = self.classifier.block_at(s, pos as isize - 64);
        let mut cur = self.classifier.block_at(s, pos as isize);
        let mut ahead = [Block::default(); BATCH];
        let mut k = BATCH;
        while pos < w.own.end {
            if k == BATCH {
                self.classifier.blocks(s, pos as isize + 64, &mut ahead);
                k = 0;
            }
            let next = ahead[k];
            k += 1;
            let live = match w.own.end - pos {
                n if n >= 64 => !0u64,
                n => (1u64 << n) - 1,
            };
            let near = Near {
                prev: &prev,
                cur: &cur,
                next: &next,
            };
            let (runs, ibans) = self.run_starts(&near);
            let titles = if self.persons.is_empty() {
                0
            } else {
                // A title glued to a word byte before it starts no name (`person::name_after`
                // says the same): inside a word, a key or base64, most capitals are that.
                cur.title & !near.back(|b| b.alpha | b.digit | b.under, 1)
            };
            let prefixes = if self.p.prefix_starts.is_empty() {
                0
            } else {
                // A prefix counts only where no word character or `-` is just before it; and
                // some prefix has the byte after as its second.
                cur.first
                    & near.ahead(|b| b.second, 1)
                    & !near.back(|b| b.alpha | b.digit | b.under | b.dash, 1)
            };
            // In the order of the bytes, so that findings come out nearly sorted (merging them
            // is then cheap).
            let trig = self.triggers(&near);
            let mut m = (runs | ibans | trig | titles | prefixes) & live;
            while m != 0 {
                let k = m.trailing_zeros();
                m &= m - 1;
                let (bit, j) = (1u64 << k, pos + k as usize);
                if runs & bit != 0 {
                    if !holds_nothing(s, j, k, &near) {
                        self.digit_run(w, j, &mut memo, out);
                    }
                } else if ibans & bit != 0 {
                    self.iban(w, j - 2, out);
                } else if trig & bit != 0 {
                    self.trigger(w, j, &near, pos, &mut memo, out);
                } else {
                    if titles & bit != 0 {
                        self.title(w, j, out);
                    }
                    if prefixes & bit != 0 {
                        self.prefix(w, j, &mut memo, out);
                    }
                }
            }
            prev = cur;
            cur = next;
            pos += 64;
        }
    }

    /// The digits of the block that start a run of digit groups not glued to a word (less the
    /// runs that are one group of fewer than four digits, in which nothing is found), and those
    /// that start one right after two capitals that begin a word (an IBAN's country code).
    #[inline]
    fn run_starts(&self, k: &Near<'_>) -> (u64, u64) {
        if !self.digits || k.cur.digit == 0 {
            return (0, 0);
        }
        let digit = |b: &Block| b.digit;
        let sep = |b: &Block| b.sep;
        let (d1, d2, d3) = (k.back(digit, 1), k.back(digit, 2), k.back(digit, 3));
        let (p1, p2) = (k.back(sep, 1), k.back(sep, 2));
        let starts = k.cur.digit & !(d1 | (p1 & d2) | (p1 & p2 & d3));
        let glued = starts & k.back(|b| b.alpha | b.under, 1);
        let ibans = if self.ibans.is_empty() {
            0
        } else {
            let upper = |b: &Block| b.upper;
            let (u1, u2) = (k.back(upper, 1), k.back(upper, 2));
            glued & u1 & u2 & !k.back(|b| b.alpha | b.digit, 3)
        };
        let runs = starts & !glued;
        // Runs of one or two groups of at most three digits each hold nothing (no detector
        // looks at fewer than four digits in a group, or at two such groups, and a `+` before
        // needs eight digits or more). Bit k of `alone`: a group of 1-3 digits starts at byte k
        // and no other follows it; another follows a group ending before byte e if a separator
        // is there and a digit after it, or two separators and then a digit.
        let d = |n: u32| k.ahead(digit, n);
        let q = |n: u32| k.ahead(sep, n);
        let goes_on = |e: u32| q(e) & (d(e + 1) | (q(e + 1) & d(e + 2)));
        let len = [!d(1), d(1) & !d(2), d(1) & d(2) & !d(3)];
        let alone = (len[0] & !goes_on(1)) | (len[1] & !goes_on(2)) | (len[2] & !goes_on(3));
        // A short group followed by one separator or two, then a group that is alone (looked
        // for in this block only: a second group in the next is left to the scan).
        let mut pair = 0;
        for (l, &short) in (1u32..).zip(&len) {
            let at = |m: u32| alone >> m;
            pair |= short & q(l) & ((d(l + 1) & at(l + 1)) | (q(l + 1) & d(l + 2) & at(l + 2)));
        }
        (runs & !(alone | pair), ibans)
    }

    /// The trigger bytes of the block worth a look: every `@` (when e-mails are sought), a
    /// `=` or `:` only where a key that starts with a letter or `_` may end just before it (or
    /// a space or quote comes between), and a `:` where an IPv6 address may start (no letter,
    /// digit, `.`, `_` or `:` just before its first group). A timestamp's colons, and the inner
    /// colons of an address, are none of these.
    #[inline]
    fn triggers(&self, k: &Near<'_>) -> u64 {
        let cur = k.cur;
        let mut t = if self.emails.is_empty() { 0 } else { cur.at };
        if cur.colon | cur.eq == 0 || !self.colon {
            return t;
        }
        let mut colon_ok = 0;
        if self.eq {
            // Key bytes over this block and the one before; a run of them "starts well" where
            // its first byte is a letter or `_` (or where it may have begun before the two
            // blocks). Adding the good starts to the runs clears exactly the good runs.
            let kc = |b: &Block| b.alpha | b.digit | b.under | b.dash | b.dot;
            let lead = |b: &Block| b.alpha | b.under;
            let wide = |f: &dyn Fn(&Block) -> u64| u128::from(f(cur)) << 64 | u128::from(f(k.prev));
            let keys = wide(&kc);
            let good = (keys & !(keys << 1) & wide(&lead)) | (keys & 1);
            let in_good = (keys.wrapping_add(good) ^ keys) & keys;
            // Bit t: the byte before byte t of this block is no key byte, or one of a good run.
            let key_may_end = ((!keys | in_good) >> 63) as u64;
            t |= cur.eq & key_may_end;
            colon_ok |= key_may_end;
        }
        if !self.ipv6s.is_empty() {
            // The hexadecimal digits before the colon (at most four are looked at) must not
            // follow a letter, digit, `.` or `_` (no address then), nor a colon (then this is
            // not its first colon: a timestamp's second colon, an address's inner ones).
            let w = |n: u32| k.back(|b| b.alpha | b.digit | b.dot | b.under | b.colon, n);
            let mut hex_run = !0u64;
            let mut v6 = !w(1);
            for n in 1..=4 {
                hex_run &= k.back(|b| b.hex, n);
                v6 |= hex_run & !w(n + 1);
            }
            colon_ok |= v6;
        }
        t | (cur.colon & colon_ok)
    }

    /// A word start at `at` whose first byte some key prefix has: the longest prefix there, and
    /// the key or token it starts, if any.
    #[inline]
    fn prefix(&self, w: &Window<'_>, at: usize, memo: &mut Memo, out: &mut Vec<Hit>) {
        let s = w.bytes;
        let Some(bucket) = self.p.prefix_starts.get(usize::from(s[at])) else {
            return;
        };
        // Most word starts with a listed first byte have no listed second byte after it.
        let second = s.get(at + 1).copied().unwrap_or(0);
        if second >= 128 || bucket.seconds & 1 << second == 0 {
            return;
        }
        let holds =
            |p: &[u8]| p.len() <= s.len() - at && p.iter().zip(&s[at..]).all(|(a, b)| a == b);
        let Some((_, what)) = bucket.list.iter().find(|(p, _)| holds(p)) else {
            return;
        };
        let found = match *what {
            PrefixWhat::ApiKey(d, rule) => api_key::key_at(s, at, &rule).map(|r| (d, r)),
            PrefixWhat::Jwt(d) => jwt::token_at_with(s, at, &mut memo.headers).map(|r| (d, r)),
        };
        if let Some((d, r)) = found {
            self.emit(w, d, r, out);
        }
    }

    /// A trigger byte (`@`, `:` or `=`) at `i`.
    #[inline]
    fn trigger(
        &self,
        w: &Window<'_>,
        i: usize,
        near: &Near<'_>,
        pos: usize,
        memo: &mut Memo,
        out: &mut Vec<Hit>,
    ) {
        let s = w.bytes;
        match s[i] {
            b'@' => {
                if let Some(r) = email::around(s, i) {
                    for &d in &self.emails {
                        self.emit(w, d, r.clone(), out);
                    }
                }
            }
            b':' => {
                if !self.ipv6s.is_empty() && ip::is_first_colon(s, i) {
                    if let Some(r) = ip::ipv6_at(s, i) {
                        for &d in &self.ipv6s {
                            self.emit(w, d, r.clone(), out);
                        }
                    }
                }
                if self.eq {
                    self.key_value(w, i, &near.key_chars(pos), &mut memo.keys, out);
                }
            }
            b'=' => self.key_value(w, i, &near.key_chars(pos), &mut memo.keys, out),
            _ => {}
        }
    }

    /// A capital at `at` that may start a title: the name after it, if one follows.
    #[inline]
    fn title(&self, w: &Window<'_>, at: usize, out: &mut Vec<Hit>) {
        let s = w.bytes;
        if let Some(n) = person::title_at(s, at) {
            if let Some(r) = person::name_after(s, at, at + n) {
                for &d in &self.persons {
                    self.emit(w, d, r.clone(), out);
                }
            }
        }
    }

    /// PEM blocks, regular expressions and keywords that start in the chunk.
    fn literals(&self, w: &Window<'_>, out: &mut Vec<Hit>) {
        let s = w.bytes;
        let own = w.own.clone();
        let reach = |n: usize| (own.end + n).min(s.len());
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
            let hay = &s[own.start..reach(crate::granularity::MARGIN / 2)];
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

    /// Whether a date-of-birth keyword lies wholly in `lo..hi` and starts a word.
    fn keyword_in(&self, s: &[u8], lo: usize, hi: usize, memo: &mut Memo) -> bool {
        match &self.p.dob_words {
            Some(k) => k.any_in(s, lo, hi, &mut memo.keywords),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
