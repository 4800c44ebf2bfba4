//! CSV and TSV columns (RFC 4180 quoting): the first record names the columns, and the cells of
//! the columns a policy lists are classified (or their whole rows, with `record` granularity).

use crate::policy::{Granularity, Kind, Policy};
use crate::scan::Hit;

/// Longest header read; a longer first line is not taken as a header.
const MAX_HEADER: usize = 64 << 10;

/// One detector that picks columns.
struct Picker {
    det: u16,
    record: bool,
}

pub struct CsvPass {
    delim: Option<u8>,
    pickers: Vec<Picker>,
    /// Column choices of the policy's detectors, as (detector, record?) per picker.
    columns: ColumnRules,
    /// Per column, a bit per picker.
    chosen: Vec<u64>,
    header: Option<Vec<u8>>,
    header_done: bool,
    // Parse state.
    in_quotes: bool,
    /// The last byte was a quote inside a quoted cell (an escaped quote or the closing one).
    quote_pending: bool,
    col: usize,
    cell_start: u64,
    cell_end: Option<u64>,
    quoted: bool,
    row_start: u64,
    row_picks: u64,
    pos: u64,
    prev_cr: bool,
}

struct ColumnRules {
    rules: Vec<(crate::names::Names, Vec<regex::bytes::Regex>)>,
}

impl CsvPass {
    pub fn new(policy: &Policy, delim: Option<u8>) -> CsvPass {
        let mut pickers = Vec::new();
        let mut rules = Vec::new();
        for (i, d) in policy.detectors.iter().enumerate() {
            if let Kind::CsvColumns { columns, patterns } = &d.kind {
                pickers.push(Picker {
                    det: i as u16,
                    record: matches!(d.granularity, Granularity::Record | Granularity::Line),
                });
                rules.push((columns.clone(), patterns.clone()));
            }
        }
        CsvPass {
            delim,
            pickers,
            columns: ColumnRules { rules },
            chosen: Vec::new(),
            header: Some(Vec::new()),
            header_done: false,
            in_quotes: false,
            quote_pending: false,
            col: 0,
            cell_start: 0,
            cell_end: None,
            quoted: false,
            row_start: 0,
            row_picks: 0,
            pos: 0,
            prev_cr: false,
        }
    }

    fn choose_columns(&mut self, header: &[u8]) {
        let line = header.strip_suffix(b"\r").unwrap_or(header);
        let delim = self.delim.unwrap_or_else(|| sniff(line));
        self.delim = Some(delim);
        for name in split_header(line, delim) {
            let name = trim_quotes(&name);
            let mut bits = 0u64;
            for (k, (names, pats)) in self.columns.rules.iter().enumerate() {
                if names.matches(name) || pats.iter().any(|r| r.is_match(name)) {
                    bits |= 1 << k;
                }
            }
            self.chosen.push(bits);
        }
    }

    pub fn feed(&mut self, bytes: &[u8], base: u64, out: &mut Vec<Hit>) {
        let mut i = 0;
        if !self.header_done {
            let h = self.header.get_or_insert_with(Vec::new);
            match memchr::memchr(b'\n', bytes) {
                Some(p) => {
                    h.extend_from_slice(&bytes[..p]);
                    let h = self.header.take().unwrap_or_default();
                    if h.len() <= MAX_HEADER {
                        self.choose_columns(&h);
                    }
                    self.header_done = true;
                    i = p + 1;
                    self.row_start = base + i as u64;
                    self.cell_start = self.row_start;
                }
                None => {
                    if h.len() + bytes.len() <= MAX_HEADER {
                        h.extend_from_slice(bytes);
                    } else {
                        // No header within reach: nothing to choose columns by.
                        self.header_done = true;
                        self.header = None;
                    }
                    self.pos = base + bytes.len() as u64;
                    return;
                }
            }
        }
        if self.chosen.iter().all(|&b| b == 0) {
            self.pos = base + bytes.len() as u64;
            return;
        }
        let delim = self.delim.unwrap_or(b',');
        while i < bytes.len() {
            if self.in_quotes {
                match memchr::memchr(b'"', &bytes[i..]) {
                    Some(p) => {
                        i += p + 1;
                        self.in_quotes = false;
                        self.quote_pending = true;
                        self.cell_end = Some(base + i as u64 - 1);
                    }
                    None => break,
                }
                continue;
            }
            let b = bytes[i];
            if self.quote_pending {
                self.quote_pending = false;
                if b == b'"' {
                    // An escaped quote: the cell goes on.
                    self.in_quotes = true;
                    self.cell_end = None;
                    i += 1;
                    continue;
                }
            }
            match memchr::memchr3(delim, b'"', b'\n', &bytes[i..]) {
                None => break,
                Some(p) => {
                    let at = i + p;
                    let c = bytes[at];
                    let off = base + at as u64;
                    if c == b'"' {
                        if off == self.cell_start {
                            self.quoted = true;
                        }
                        self.in_quotes = true;
                        i = at + 1;
                        continue;
                    }
                    let cr = if at > 0 {
                        bytes[at - 1] == b'\r'
                    } else {
                        self.prev_cr
                    };
                    let end = if c == b'\n' && cr { off - 1 } else { off };
                    self.end_cell(end, out);
                    if c == b'\n' {
                        self.end_row(end, out);
                        self.row_start = off + 1;
                    }
                    self.cell_start = off + 1;
                    i = at + 1;
                }
            }
        }
        if let Some(&last) = bytes.last() {
            self.prev_cr = last == b'\r';
        }
        self.pos = base + bytes.len() as u64;
    }

    fn end_cell(&mut self, end: u64, out: &mut Vec<Hit>) {
        let bits = self.chosen.get(self.col).copied().unwrap_or(0);
        if bits != 0 {
            let (a, e) = match (self.quoted, self.cell_end) {
                (true, Some(q)) => (self.cell_start + 1, q),
                _ => (self.cell_start, end),
            };
            if e > a {
                for (k, p) in self.pickers.iter().enumerate() {
                    if bits & (1 << k) != 0 {
                        if p.record {
                            self.row_picks |= 1 << k;
                        } else {
                            out.push(Hit {
                                start: a,
                                end: e,
                                det: p.det,
                            });
                        }
                    }
                }
            }
        }
        self.col += 1;
        self.quoted = false;
        self.cell_end = None;
    }

    fn end_row(&mut self, end: u64, out: &mut Vec<Hit>) {
        for (k, p) in self.pickers.iter().enumerate() {
            if self.row_picks & (1 << k) != 0 && end > self.row_start {
                out.push(Hit {
                    start: self.row_start,
                    end,
                    det: p.det,
                });
            }
        }
        self.row_picks = 0;
        self.col = 0;
    }

    pub fn finish(&mut self, out: &mut Vec<Hit>) {
        if !self.header_done {
            return;
        }
        if self.pos > self.cell_start || self.col > 0 {
            let end = self.pos;
            self.end_cell(end, out);
            self.end_row(end, out);
        }
    }
}

/// The delimiter of a header line: the most frequent of `,` `;` tab and `|`.
pub fn sniff(line: &[u8]) -> u8 {
    [b',', b'\t', b';', b'|']
        .into_iter()
        .max_by_key(|&d| line.iter().filter(|&&b| b == d).count())
        .unwrap_or(b',')
}

fn split_header(line: &[u8], delim: u8) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut q = false;
    for &b in line {
        match b {
            b'"' => q = !q,
            _ if b == delim && !q => out.push(Vec::new()),
            _ => out.last_mut().expect("never empty").push(b),
        }
    }
    out
}

fn trim_quotes(s: &[u8]) -> &[u8] {
    let s = s.trim_ascii();
    s.strip_prefix(b"\"")
        .and_then(|x| x.strip_suffix(b"\""))
        .unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: &str, doc: &[u8], cuts: &[usize]) -> Vec<(String, u16)> {
        let p = Policy::parse(policy).unwrap();
        let mut pass = CsvPass::new(&p, None);
        let mut out = Vec::new();
        let mut prev = 0;
        for &c in cuts.iter().chain(std::iter::once(&doc.len())) {
            pass.feed(&doc[prev..c], prev as u64, &mut out);
            prev = c;
        }
        pass.finish(&mut out);
        out.sort_by_key(|h| h.start);
        out.iter()
            .map(|h| {
                (
                    String::from_utf8_lossy(&doc[h.start as usize..h.end as usize]).into_owned(),
                    h.det,
                )
            })
            .collect()
    }

    const P: &str = "[[detect]]\nkind = \"csv-columns\"\ncolumns = [\"email\", \"name\"]\n";

    #[test]
    fn cells_of_chosen_columns_with_quotes_and_crlf() {
        let doc = b"id,Full Name,e-mail address,email\r\n1,\"Doe, \"\"JD\"\" Jane\",x,jd@x.io\r\n2,Bob,,b@y.io";
        let want = vec![
            ("Doe, \"\"JD\"\" Jane".to_string(), 0),
            ("jd@x.io".to_string(), 0),
            ("Bob".to_string(), 0),
            ("b@y.io".to_string(), 0),
        ];
        // Every way of cutting the document into two feeds gives the same cells.
        for cut in 0..=doc.len() {
            assert_eq!(run(P, doc, &[cut]), want, "cut at {cut}");
        }
    }

    #[test]
    fn rows_with_record_granularity_and_tabs() {
        let p =
            "[[detect]]\nkind = \"csv-columns\"\ncolumns = [\"ssn\"]\ngranularity = \"record\"\n";
        let doc = b"name\tssn\nann\t123-45-6789\nbob\t\n";
        assert_eq!(run(p, doc, &[]), vec![("ann\t123-45-6789".to_string(), 0)]);
        assert_eq!(sniff(b"a;b;c"), b';');
    }
}
