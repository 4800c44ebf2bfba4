//! A seeded generator of labelled documents: realistic CSV exports, NDJSON event streams, logs
//! and letters with personal data planted at known offsets, for measuring a policy (recall per
//! kind, over-marking; `examples/eval.rs`) and for the benchmark (`benches/mark.rs`).
//!
//! Every planted item is valid for its kind (Luhn, mod 97, SSA rules, numbering plans), is
//! ASCII, and is recorded with its byte range; everything else in the documents is filler that
//! should stay in the clear: identifiers, amounts, timestamps, version strings, hashes, order
//! numbers and ordinary prose, including look-alikes of the planted kinds.

use std::fmt::Write as _;
use std::ops::Range;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// What a planted item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Card,
    Iban,
    Ssn,
    Email,
    Phone,
    Ipv4,
    Ipv6,
    PrivateKey,
    Certificate,
    CloudKey,
    Jwt,
    Secret,
    Password,
    Dob,
    Name,
    Address,
}

impl Kind {
    pub const ALL: [Kind; 16] = [
        Kind::Card,
        Kind::Iban,
        Kind::Ssn,
        Kind::Email,
        Kind::Phone,
        Kind::Ipv4,
        Kind::Ipv6,
        Kind::PrivateKey,
        Kind::Certificate,
        Kind::CloudKey,
        Kind::Jwt,
        Kind::Secret,
        Kind::Password,
        Kind::Dob,
        Kind::Name,
        Kind::Address,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Card => "card",
            Kind::Iban => "iban",
            Kind::Ssn => "ssn",
            Kind::Email => "email",
            Kind::Phone => "phone",
            Kind::Ipv4 => "ipv4",
            Kind::Ipv6 => "ipv6",
            Kind::PrivateKey => "private-key",
            Kind::Certificate => "certificate",
            Kind::CloudKey => "cloud-key",
            Kind::Jwt => "jwt",
            Kind::Secret => "secret",
            Kind::Password => "password",
            Kind::Dob => "dob",
            Kind::Name => "name",
            Kind::Address => "address",
        }
    }

    /// Kinds a validating detector must find (the 99.5 % goal); names and addresses in free
    /// text are reported, not required.
    pub fn validated(self) -> bool {
        !matches!(self, Kind::Name | Kind::Address | Kind::Dob)
    }
}

/// The formats generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Ndjson,
    Log,
    Prose,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Csv, Format::Ndjson, Format::Log, Format::Prose];

    /// A file name with the extension a user's file of this kind would have.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Csv => "customers.csv",
            Format::Ndjson => "events.ndjson",
            Format::Log => "app.log",
            Format::Prose => "letters.txt",
        }
    }
}

/// One planted item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub kind: Kind,
    pub range: Range<u64>,
}

/// A generated document and what was planted in it.
#[derive(Debug, Clone)]
pub struct Labelled {
    pub format: Format,
    pub bytes: Vec<u8>,
    pub items: Vec<Item>,
}

/// Builds a document, recording where planted items land.
struct Doc {
    s: String,
    items: Vec<Item>,
}

impl Doc {
    fn text(&mut self, t: &str) {
        self.s.push_str(t);
    }

    fn plant(&mut self, kind: Kind, v: &str) {
        let a = self.s.len() as u64;
        self.s.push_str(v);
        self.items.push(Item {
            kind,
            range: a..self.s.len() as u64,
        });
    }
}

const FIRST: &[&str] = &[
    "James",
    "Mary",
    "Robert",
    "Patricia",
    "John",
    "Jennifer",
    "Michael",
    "Linda",
    "David",
    "Elizabeth",
    "William",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
    "Amara",
    "Kenji",
    "Olga",
    "Mateo",
    "Priya",
    "Lars",
    "Fatima",
    "Chen",
    "Ngozi",
    "Pierre",
    "Ingrid",
    "Diego",
    "Aisha",
    "Tomasz",
    "Yuki",
    "Siobhan",
];
const LAST: &[&str] = &[
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Wilson",
    "Anderson",
    "Taylor",
    "Moore",
    "Okafor",
    "Tanaka",
    "Kowalski",
    "Nguyen",
    "Schmidt",
    "Rossi",
    "Dubois",
    "Larsen",
    "Haddad",
    "Murphy",
    "Petrov",
];
const STREETS: &[&str] = &[
    "Main Street",
    "Oak Avenue",
    "Maple Drive",
    "Cedar Lane",
    "Elm Street",
    "Park Road",
    "Lakeview Terrace",
    "Hillcrest Way",
    "Sunset Boulevard",
    "River Road",
];
const CITIES: &[&str] = &[
    "Springfield",
    "Riverton",
    "Fairview",
    "Franklin",
    "Greenville",
    "Madison",
    "Georgetown",
    "Salem",
    "Clinton",
    "Arlington",
];
const DOMAINS: &[&str] = &[
    "mail.example.io",
    "corp.example.net",
    "post.example.co.uk",
    "inbox.example.de",
    "example-bank.com",
    "uni.example.edu",
];
const WORDS: &[&str] = &[
    "the",
    "account",
    "order",
    "shipment",
    "we",
    "have",
    "received",
    "your",
    "request",
    "and",
    "will",
    "review",
    "it",
    "within",
    "three",
    "business",
    "days",
    "please",
    "note",
    "that",
    "invoice",
    "attached",
    "contains",
    "details",
    "of",
    "payment",
    "schedule",
    "for",
    "next",
    "quarter",
    "our",
    "team",
    "is",
    "happy",
    "to",
    "help",
    "with",
    "any",
    "questions",
    "about",
    "delivery",
    "status",
    "meeting",
    "agenda",
    "project",
    "update",
    "version",
    "release",
    "support",
    "ticket",
    "customer",
    "service",
    "refund",
    "policy",
    "terms",
    "conditions",
];
const AREAS: &[u32] = &[
    212, 213, 312, 415, 617, 206, 303, 512, 646, 718, 202, 305, 404, 480, 503, 602, 713, 773,
];

/// Luhn check digit for the digits so far.
fn luhn_digit(d: &[u8]) -> u8 {
    let mut sum = 0u32;
    for (i, x) in d.iter().rev().enumerate() {
        let mut v = u32::from(*x);
        if i % 2 == 0 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    ((10 - sum % 10) % 10) as u8
}

pub struct Gen {
    rng: StdRng,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v.choose(&mut self.rng).copied().unwrap_or("x")
    }

    fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b'0' + self.rng.gen_range(0..10u8)))
            .collect()
    }

    fn alnum(&mut self, n: usize, set: &[u8]) -> String {
        (0..n)
            .map(|_| char::from(set[self.rng.gen_range(0..set.len())]))
            .collect()
    }

    pub fn card(&mut self) -> String {
        let (prefix, len): (&[u8], usize) = match self.rng.gen_range(0..5) {
            0 | 1 => (&[4], 16),
            2 => (&[5, self.rng.gen_range(1..=5)], 16),
            3 => (
                if self.rng.gen_bool(0.5) {
                    &[3, 4]
                } else {
                    &[3, 7]
                },
                15,
            ),
            _ => (&[6, 0, 1, 1], 16),
        };
        let mut d: Vec<u8> = prefix.to_vec();
        while d.len() < len - 1 {
            d.push(self.rng.gen_range(0..10));
        }
        let c = luhn_digit(&d);
        d.push(c);
        let s: String = d.iter().map(|x| char::from(b'0' + x)).collect();
        match (self.rng.gen_range(0..3), len) {
            (0, _) => s,
            (k, 15) => {
                let sep = if k == 1 { " " } else { "-" };
                format!("{}{sep}{}{sep}{}", &s[..4], &s[4..10], &s[10..])
            }
            (k, _) => {
                let sep = if k == 1 { " " } else { "-" };
                s.as_bytes()
                    .chunks(4)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect::<Vec<_>>()
                    .join(sep)
            }
        }
    }

    pub fn iban(&mut self) -> String {
        let (cc, bban) = match self.rng.gen_range(0..6) {
            0 => ("DE", self.digits(18)),
            1 => {
                let bank = self.alnum(4, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ");
                ("GB", format!("{bank}{}", self.digits(14)))
            }
            2 => ("FR", self.digits(23)),
            3 => {
                let bank = self.alnum(4, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ");
                ("NL", format!("{bank}{}", self.digits(10)))
            }
            4 => ("ES", self.digits(20)),
            _ => ("CH", self.digits(17)),
        };
        // Check digits: 98 - (BBAN + country + "00" as a number mod 97).
        let mut rem = 0u32;
        for c in bban.bytes().chain(cc.bytes()).chain(*b"00") {
            rem = match c {
                b'0'..=b'9' => (rem * 10 + u32::from(c - b'0')) % 97,
                _ => (rem * 100 + u32::from(c - b'A' + 10)) % 97,
            };
        }
        let compact = format!("{cc}{:02}{bban}", 98 - rem);
        if self.rng.gen_bool(0.5) {
            compact
        } else {
            compact
                .as_bytes()
                .chunks(4)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    pub fn ssn(&mut self) -> String {
        let mut area = self.rng.gen_range(1..900);
        if area == 666 {
            area = 665;
        }
        format!(
            "{area:03}-{:02}-{:04}",
            self.rng.gen_range(1..100),
            self.rng.gen_range(1..10000)
        )
    }

    pub fn name(&mut self) -> (String, String) {
        (self.pick(FIRST).to_string(), self.pick(LAST).to_string())
    }

    pub fn email(&mut self) -> String {
        let (f, l) = self.name();
        let n = self.rng.gen_range(1..999);
        let user = match self.rng.gen_range(0..3) {
            0 => format!("{}.{}", f.to_lowercase(), l.to_lowercase()),
            1 => format!("{}{}{n}", &f[..1].to_lowercase(), l.to_lowercase()),
            _ => format!("{}_{n}", f.to_lowercase()),
        };
        format!("{user}@{}", self.pick(DOMAINS))
    }

    /// A valid phone number (checked against the numbering plans) in a common written form.
    pub fn phone(&mut self) -> String {
        loop {
            let s = match self.rng.gen_range(0..6) {
                0..=3 => {
                    let a = AREAS[self.rng.gen_range(0..AREAS.len())];
                    let x = self.rng.gen_range(200..1000);
                    let n = self.rng.gen_range(0..10000);
                    match self.rng.gen_range(0..4) {
                        0 => format!("({a}) {x}-{n:04}"),
                        1 => format!("{a}-{x}-{n:04}"),
                        2 => format!("{a}.{x}.{n:04}"),
                        _ => format!("+1 {a} {x} {n:04}"),
                    }
                }
                4 => format!("+44 20 7{} {}", self.digits(3), self.digits(4)),
                _ => format!("+49 30 {}", self.digits(8)),
            };
            if crate::detect::phone::valid(&s, phonenumber::country::Id::US) {
                return s;
            }
        }
    }

    pub fn ipv4(&mut self) -> String {
        let mut a = self.rng.gen_range(11..224);
        if a == 127 {
            a = 128;
        }
        format!(
            "{a}.{}.{}.{}",
            self.rng.gen_range(0..256),
            self.rng.gen_range(0..256),
            self.rng.gen_range(1..255)
        )
    }

    pub fn ipv6(&mut self) -> String {
        let g: Vec<String> = (0..8)
            .map(|_| format!("{:x}", self.rng.gen_range(0..0x10000u32)))
            .collect();
        match self.rng.gen_range(0..3) {
            0 => format!("2001:db8:{}", g[2..].join(":")),
            1 => format!("2001:db8:{}::{}", g[2], g[7]),
            _ => format!("fe80::{}:{}:{}:{}", g[4], g[5], g[6], g[7]),
        }
    }

    fn base64(&mut self, n: usize) -> String {
        self.alnum(
            n,
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        )
    }

    pub fn pem(&mut self, label: &str) -> String {
        let mut s = format!("-----BEGIN {label}-----\n");
        for _ in 0..self.rng.gen_range(6..20) {
            s.push_str(&self.base64(64));
            s.push('\n');
        }
        let tail = self.base64(24);
        s.push_str(&tail);
        let _ = write!(s, "==\n-----END {label}-----");
        s
    }

    pub fn cloud_key(&mut self) -> String {
        const UP: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        const AL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        match self.rng.gen_range(0..5) {
            0 => format!("AKIA{}", self.alnum(16, UP)),
            1 => format!("ghp_{}", self.alnum(36, AL)),
            2 => format!(
                "xoxb-{}-{}-{}",
                self.digits(12),
                self.digits(12),
                self.alnum(24, AL)
            ),
            3 => format!("sk_live_{}", self.alnum(24, AL)),
            _ => format!("AIza{}", self.alnum(35, AL)),
        }
    }

    pub fn jwt(&mut self) -> String {
        use base64::Engine;
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let h = e.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let p = e.encode(format!(
            r#"{{"sub":"{}","iat":{}}}"#,
            self.rng.gen_range(1000..99999),
            self.rng.gen_range(1_600_000_000u64..1_800_000_000)
        ));
        let sig = self.alnum(
            43,
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
        );
        format!("{h}.{p}.{sig}")
    }

    pub fn secret(&mut self) -> String {
        let n = self.rng.gen_range(20..41);
        loop {
            let s = self.alnum(
                n,
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            );
            if s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic()) {
                return s;
            }
        }
    }

    pub fn password(&mut self) -> String {
        let w = self.pick(WORDS);
        format!("{w}{}{}", self.digits(3), self.pick(&["!", "#", "$", ""]))
    }

    pub fn dob(&mut self) -> String {
        let y = self.rng.gen_range(1940..2006);
        let m = self.rng.gen_range(1..13);
        let d = self.rng.gen_range(1..29);
        const MONTHS: [&str; 12] = [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ];
        match self.rng.gen_range(0..4) {
            0 => format!("{y}-{m:02}-{d:02}"),
            1 => format!("{m:02}/{d:02}/{y}"),
            2 => format!("{} {d}, {y}", MONTHS[m - 1]),
            _ => format!("{d} {} {y}", MONTHS[m - 1]),
        }
    }

    pub fn address(&mut self) -> String {
        format!(
            "{} {}, {}",
            self.rng.gen_range(1..2000),
            self.pick(STREETS),
            self.pick(CITIES)
        )
    }

    fn sentence(&mut self, words: usize) -> String {
        let mut s = String::new();
        for i in 0..words {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.pick(WORDS));
        }
        s
    }

    fn hex(&mut self, n: usize) -> String {
        self.alnum(n, b"0123456789abcdef")
    }

    fn timestamp(&mut self) -> String {
        format!(
            "2024-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            self.rng.gen_range(1..13),
            self.rng.gen_range(1..29),
            self.rng.gen_range(0..24),
            self.rng.gen_range(0..60),
            self.rng.gen_range(0..60),
            self.rng.gen_range(0..1000)
        )
    }

    /// A document of about `size` bytes in `format`.
    pub fn document(&mut self, format: Format, size: usize) -> Labelled {
        let mut d = Doc {
            s: String::with_capacity(size + 4096),
            items: Vec::new(),
        };
        match format {
            Format::Csv => self.csv(&mut d, size),
            Format::Ndjson => self.ndjson(&mut d, size),
            Format::Log => self.log(&mut d, size),
            Format::Prose => self.prose(&mut d, size),
        }
        Labelled {
            format,
            bytes: d.s.into_bytes(),
            items: d.items,
        }
    }

    fn csv(&mut self, d: &mut Doc, size: usize) {
        d.text("id,first_name,last_name,email,phone,ssn,card_number,iban,date_of_birth,address,city,plan,amount,created_at,notes\n");
        let mut id = 1000;
        while d.s.len() < size {
            id += 1;
            let (f, l) = self.name();
            let _ = write!(d.s, "{id},");
            d.plant(Kind::Name, &f);
            d.text(",");
            d.plant(Kind::Name, &l);
            d.text(",");
            let e = self.email();
            d.plant(Kind::Email, &e);
            d.text(",");
            let p = self.phone();
            d.plant(Kind::Phone, &p);
            d.text(",");
            let s = self.ssn();
            d.plant(Kind::Ssn, &s);
            d.text(",");
            let c = self.card();
            d.plant(Kind::Card, &c);
            d.text(",");
            let i = self.iban();
            d.plant(Kind::Iban, &i);
            d.text(",");
            let b = self.dob();
            if b.contains(',') {
                d.text("\"");
                d.plant(Kind::Dob, &b);
                d.text("\"");
            } else {
                d.plant(Kind::Dob, &b);
            }
            d.text(",\"");
            let a = self.address();
            d.plant(Kind::Address, &a);
            d.text("\",");
            let city = self.pick(CITIES);
            let plan = self.pick(&["free", "pro", "team", "enterprise"]);
            let amount = format!(
                "{}.{:02}",
                self.rng.gen_range(1..5000),
                self.rng.gen_range(0..100)
            );
            let ts = self.timestamp();
            let _ = write!(d.s, "{city},{plan},{amount},{ts},\"");
            // Notes: free text, sometimes with something personal in it.
            let words = self.rng.gen_range(3..10);
            let n = self.sentence(words);
            d.text(&n);
            match self.rng.gen_range(0..6) {
                0 => {
                    d.text(" alt contact ");
                    let e = self.email();
                    d.plant(Kind::Email, &e);
                }
                1 => {
                    d.text(" ref order ");
                    let o = format!("{}-{}", self.digits(4), self.digits(6));
                    d.text(&o);
                }
                _ => {}
            }
            d.text("\"\n");
        }
    }

    fn ndjson(&mut self, d: &mut Doc, size: usize) {
        let events = [
            "login",
            "checkout",
            "refund",
            "profile_update",
            "logout",
            "search",
        ];
        while d.s.len() < size {
            let ts = self.timestamp();
            let ev = self.pick(&events);
            let _ = write!(
                d.s,
                "{{\"ts\":\"{ts}\",\"event\":\"{ev}\",\"request_id\":\"{}\",",
                self.hex(16)
            );
            let uid = self.rng.gen_range(1..1_000_000);
            let _ = write!(d.s, "\"user\":{{\"id\":{uid},\"name\":\"");
            let (f, l) = self.name();
            d.plant(Kind::Name, &format!("{f} {l}"));
            d.text("\",\"email\":\"");
            let e = self.email();
            d.plant(Kind::Email, &e);
            d.text("\"},\"ip\":\"");
            if self.rng.gen_bool(0.7) {
                let ip = self.ipv4();
                d.plant(Kind::Ipv4, &ip);
            } else {
                let ip = self.ipv6();
                d.plant(Kind::Ipv6, &ip);
            }
            d.text("\",");
            match ev {
                "checkout" | "refund" => {
                    d.text("\"payment\":{\"card\":\"");
                    let c = self.card();
                    d.plant(Kind::Card, &c);
                    let amount = self.rng.gen_range(1..50000) as f64 / 100.0;
                    let _ = write!(d.s, "\",\"amount\":{amount},\"currency\":\"EUR\"}},");
                }
                "profile_update" => {
                    d.text("\"changes\":{\"phone\":\"");
                    let p = self.phone();
                    d.plant(Kind::Phone, &p);
                    d.text("\",\"billing\":\"");
                    let i = self.iban();
                    d.plant(Kind::Iban, &i);
                    d.text("\"},");
                }
                "login" => {
                    d.text("\"session\":{\"token\":\"");
                    let j = self.jwt();
                    d.plant(Kind::Jwt, &j);
                    d.text("\"},");
                }
                _ => {
                    let words = self.rng.gen_range(1..4);
                    let q = self.sentence(words);
                    let _ = write!(
                        d.s,
                        "\"query\":\"{q}\",\"results\":{},",
                        self.rng.gen_range(0..500)
                    );
                }
            }
            let _ = writeln!(
                d.s,
                "\"client\":{{\"app\":\"web\",\"version\":\"{}.{}.{}\",\"build\":\"{}\"}}}}",
                self.rng.gen_range(1..20),
                self.rng.gen_range(0..30),
                self.rng.gen_range(0..100),
                self.hex(12)
            );
        }
    }

    fn log(&mut self, d: &mut Doc, size: usize) {
        let paths = [
            "/api/v1/orders",
            "/api/v1/users",
            "/health",
            "/api/v2/payments",
            "/static/app.js",
        ];
        while d.s.len() < size {
            let ts = self.timestamp();
            let _ = write!(d.s, "{ts} ");
            match self.rng.gen_range(0..14) {
                0..=4 => {
                    let p = self.pick(&paths);
                    let _ = write!(
                        d.s,
                        "INFO  [req-{}] GET {p}/{} {} {}ms client=",
                        self.hex(8),
                        self.rng.gen_range(1..99999),
                        self.pick(&["200", "201", "204", "304", "404"]),
                        self.rng.gen_range(1..900)
                    );
                    if self.rng.gen_bool(0.8) {
                        let ip = self.ipv4();
                        d.plant(Kind::Ipv4, &ip);
                    } else {
                        let ip = self.ipv6();
                        d.plant(Kind::Ipv6, &ip);
                    }
                    let _ = writeln!(
                        d.s,
                        " ua=\"Mozilla/5.0 (X11; Linux x86_64) Chrome/{}.0.{}.{}\"",
                        self.rng.gen_range(100..130),
                        self.rng.gen_range(1000..7000),
                        self.rng.gen_range(10..200)
                    );
                }
                5 => {
                    d.text("INFO  auth: login ok user=");
                    let e = self.email();
                    d.plant(Kind::Email, &e);
                    d.text(" Authorization: Bearer ");
                    let j = self.jwt();
                    d.plant(Kind::Jwt, &j);
                    d.text("\n");
                }
                6 => {
                    d.text("WARN  payment declined for card ");
                    let c = self.card();
                    d.plant(Kind::Card, &c);
                    let _ = writeln!(
                        d.s,
                        " amount={}.{:02} code=51",
                        self.rng.gen_range(1..900),
                        self.rng.gen_range(0..100)
                    );
                }
                7 => {
                    d.text("DEBUG config loaded api_key=");
                    let s = self.secret();
                    d.plant(Kind::Secret, &s);
                    d.text(" db_password=");
                    let p = self.password();
                    d.plant(Kind::Password, &p);
                    let _ = writeln!(
                        d.s,
                        " pool_size={} timeout_ms={}",
                        self.rng.gen_range(1..64),
                        self.rng.gen_range(100..30000)
                    );
                }
                8 => {
                    d.text("INFO  kyc check ssn=");
                    let s = self.ssn();
                    d.plant(Kind::Ssn, &s);
                    d.text(" phone=");
                    let p = self.phone();
                    d.plant(Kind::Phone, &p);
                    d.text(" dob=");
                    let b = self.dob();
                    d.plant(Kind::Dob, &b);
                    d.text(" result=pass\n");
                }
                9 => {
                    d.text("ERROR deploy: leaked credential in env AWS_ACCESS_KEY_ID=");
                    let k = self.cloud_key();
                    d.plant(Kind::CloudKey, &k);
                    d.text("\n");
                }
                10 => {
                    let _ = writeln!(
                        d.s,
                        "ERROR worker crashed: index out of range (len {}) at build {}\n    at worker::run (src/worker.rs:{}:{})\n    at main (src/main.rs:{}:5)",
                        self.rng.gen_range(0..100),
                        self.hex(12),
                        self.rng.gen_range(1..500),
                        self.rng.gen_range(1..80),
                        self.rng.gen_range(1..200)
                    );
                }
                11 => {
                    d.text("INFO  sepa transfer to ");
                    let i = self.iban();
                    d.plant(Kind::Iban, &i);
                    let _ = writeln!(
                        d.s,
                        " ref INV-{}-{}",
                        self.rng.gen_range(2019..2025),
                        self.digits(6)
                    );
                }
                12 => {
                    d.text("INFO  tls: loaded certificate\n");
                    let c = self.pem("CERTIFICATE");
                    d.plant(Kind::Certificate, &c);
                    d.text("\n");
                }
                _ => {
                    let _ = writeln!(
                        d.s,
                        "INFO  metrics cpu={}.{}% mem={}MiB gc_pause={}ms version=v{}.{}.{} sha={}",
                        self.rng.gen_range(0..100),
                        self.rng.gen_range(0..10),
                        self.rng.gen_range(100..9000),
                        self.rng.gen_range(0..50),
                        self.rng.gen_range(1..5),
                        self.rng.gen_range(0..20),
                        self.rng.gen_range(0..50),
                        self.hex(40)
                    );
                }
            }
        }
    }

    fn prose(&mut self, d: &mut Doc, size: usize) {
        while d.s.len() < size {
            let (f, l) = self.name();
            d.text("Subject: ");
            let words = self.rng.gen_range(3..7);
            let subj = self.sentence(words);
            d.text(&subj);
            d.text("\n\nDear ");
            let t = self.pick(&["Mr. ", "Ms. ", "Dr. ", "Mrs. "]);
            d.text(t);
            d.plant(Kind::Name, &format!("{f} {l}"));
            d.text(",\n\n");
            let n = self.rng.gen_range(2..5);
            for _ in 0..n {
                let words = self.rng.gen_range(8..25);
                let s = self.sentence(words);
                d.text(&s);
                d.text(". ");
                match self.rng.gen_range(0..12) {
                    0 => {
                        d.text("Please charge my card ");
                        let c = self.card();
                        d.plant(Kind::Card, &c);
                        d.text(" for the balance. ");
                    }
                    1 => {
                        d.text("My IBAN is ");
                        let i = self.iban();
                        d.plant(Kind::Iban, &i);
                        d.text(". ");
                    }
                    2 => {
                        d.text("You can reach me at ");
                        let p = self.phone();
                        d.plant(Kind::Phone, &p);
                        d.text(" or ");
                        let e = self.email();
                        d.plant(Kind::Email, &e);
                        d.text(". ");
                    }
                    3 => {
                        d.text("For the background check my SSN is ");
                        let s = self.ssn();
                        d.plant(Kind::Ssn, &s);
                        d.text(" and I was born on ");
                        let b = self.dob();
                        d.plant(Kind::Dob, &b);
                        d.text(". ");
                    }
                    4 => {
                        d.text("I moved to ");
                        let a = self.address();
                        d.plant(Kind::Address, &a);
                        d.text(" last year. ");
                    }
                    5 => {
                        d.text("The server at ");
                        let ip = self.ipv4();
                        d.plant(Kind::Ipv4, &ip);
                        d.text(" still uses the old key; the token is ");
                        let k = self.cloud_key();
                        d.plant(Kind::CloudKey, &k);
                        d.text(". ");
                    }
                    6 => {
                        d.text("My colleague ");
                        let (f2, l2) = self.name();
                        d.plant(Kind::Name, &format!("{f2} {l2}"));
                        d.text(" will follow up. ");
                    }
                    7 => {
                        let _ = write!(
                            d.s,
                            "Order {} shipped on 2024-0{}-1{} in {} parcels costing {}.{:02} EUR. ",
                            self.digits(8),
                            self.rng.gen_range(1..10),
                            self.rng.gen_range(0..10),
                            self.rng.gen_range(1..9),
                            self.rng.gen_range(1..999),
                            self.rng.gen_range(0..100)
                        );
                    }
                    _ => {}
                }
            }
            if self.rng.gen_range(0..10) == 0 {
                d.text("\n\nThe key you asked for:\n");
                let label = if self.rng.gen_bool(0.5) {
                    "PRIVATE KEY"
                } else {
                    "RSA PRIVATE KEY"
                };
                let k = self.pem(label);
                d.plant(Kind::PrivateKey, &k);
                d.text("\n");
            }
            let _ = write!(d.s, "\n\nBest regards,\n{f} {l}\n\n");
            // The sign-off repeats the name without a title: planted too, and hard to find.
            let at = d.s.len() - (f.len() + l.len() + 3);
            d.items.push(Item {
                kind: Kind::Name,
                range: at as u64..(at + f.len() + l.len() + 1) as u64,
            });
        }
    }
}

/// Recall and over-marking of `ranges` (sorted, disjoint) against what was planted.
#[derive(Debug, Default, Clone)]
pub struct Score {
    /// Per kind: planted, found (wholly inside one range).
    pub per_kind: std::collections::BTreeMap<Kind, (u64, u64)>,
    /// Bytes not in any planted item, and how many of them are classified.
    pub unplanted: u64,
    pub unplanted_marked: u64,
}

impl Score {
    pub fn add(&mut self, doc: &Labelled, ranges: &[Range<u64>]) {
        for it in &doc.items {
            let e = self.per_kind.entry(it.kind).or_default();
            e.0 += 1;
            let i = ranges.partition_point(|r| r.end <= it.range.start);
            if ranges
                .get(i)
                .is_some_and(|r| r.start <= it.range.start && it.range.end <= r.end)
            {
                e.1 += 1;
            }
        }
        // Planted bytes as a sorted union, to subtract from classified bytes.
        let mut planted: Vec<Range<u64>> = doc.items.iter().map(|i| i.range.clone()).collect();
        planted.sort_by_key(|r| r.start);
        let mut union: Vec<Range<u64>> = Vec::new();
        for r in planted {
            match union.last_mut() {
                Some(l) if l.end >= r.start => l.end = l.end.max(r.end),
                _ => union.push(r),
            }
        }
        let planted_bytes: u64 = union.iter().map(|r| r.end - r.start).sum();
        let overlap = |a: &Range<u64>| -> u64 {
            let i = union.partition_point(|u| u.end <= a.start);
            union[i..]
                .iter()
                .take_while(|u| u.start < a.end)
                .map(|u| u.end.min(a.end) - u.start.max(a.start))
                .sum()
        };
        let marked: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let marked_planted: u64 = ranges.iter().map(overlap).sum();
        self.unplanted += doc.bytes.len() as u64 - planted_bytes;
        self.unplanted_marked += marked - marked_planted;
    }

    pub fn over_marking(&self) -> f64 {
        if self.unplanted == 0 {
            0.0
        } else {
            self.unplanted_marked as f64 / self.unplanted as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planted_items_are_where_the_labels_say_and_valid() {
        let mut g = Gen::new(7);
        for f in Format::ALL {
            let doc = g.document(f, 20_000);
            assert!(doc.bytes.len() >= 20_000 && doc.bytes.is_ascii());
            assert!(!doc.items.is_empty());
            for it in &doc.items {
                let t = &doc.bytes[it.range.start as usize..it.range.end as usize];
                assert!(
                    !t.is_empty() && t[0] != b' ' && t[t.len() - 1] != b' ',
                    "{f:?} {:?}",
                    it
                );
                if it.kind == Kind::Card {
                    let d: Vec<u8> = t.iter().filter(|b| b.is_ascii_digit()).copied().collect();
                    assert!(
                        crate::detect::card::is_card(&d),
                        "{}",
                        String::from_utf8_lossy(t)
                    );
                }
                if it.kind == Kind::Iban {
                    let c: Vec<u8> = t.iter().filter(|b| **b != b' ').copied().collect();
                    assert!(
                        crate::detect::iban::is_iban(&c),
                        "{}",
                        String::from_utf8_lossy(t)
                    );
                }
            }
        }
        // The same seed gives the same documents.
        let a = Gen::new(3).document(Format::Log, 5000);
        let b = Gen::new(3).document(Format::Log, 5000);
        assert_eq!(a.bytes, b.bytes);
    }

    #[test]
    fn scores_count_whole_items_and_unplanted_bytes() {
        let doc = Labelled {
            format: Format::Prose,
            bytes: b"aa BBBB cc DD ee".to_vec(),
            items: vec![
                Item {
                    kind: Kind::Card,
                    range: 3..7,
                },
                Item {
                    kind: Kind::Ssn,
                    range: 11..13,
                },
            ],
        };
        let mut s = Score::default();
        s.add(&doc, &[2..8, 11..12]);
        assert_eq!(s.per_kind[&Kind::Card], (1, 1));
        assert_eq!(s.per_kind[&Kind::Ssn], (1, 0));
        assert_eq!((s.unplanted, s.unplanted_marked), (10, 2));
    }
}
