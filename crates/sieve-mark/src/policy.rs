//! Policies: what a document's classified parts are, in a TOML file.
//!
//! A policy is a list of detectors (`[[detect]]`), each with a kind, a name for reports and a
//! granularity, plus an allow-list of values that are never classified. The built-in `default`
//! policy is `policies/default.toml`, compiled into the binary; its comments document every
//! option. A policy can start from another with `extends = "default"` and add detectors, drop
//! inherited ones (`disable = ["name"]`) or allow more values.
//!
//! A policy is checked completely when it is loaded (unknown kinds and options, options that do
//! not apply to a kind, bad regular expressions, too many detectors), so that a policy that cannot
//! run stops `sieve send` before anything is sent.

use std::fmt;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::bytes::{Regex, RegexSet};
use serde::Deserialize;
use thiserror::Error;

use crate::detect::api_key;
use crate::names::Names;
use crate::path::PathPattern;

/// The built-in policy's source.
pub const DEFAULT_POLICY: &str = include_str!("../policies/default.toml");

/// Most detectors one policy may hold (each is a bit of a span's detector set).
pub const MAX_DETECTORS: usize = 64;

#[derive(Debug, Error)]
pub enum PolicyError {
    #[error("cannot read the policy file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the policy is not valid TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("detector {index} ({name}): {message}")]
    Detector {
        index: usize,
        name: String,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// How much around a finding is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// The finding itself.
    Match,
    /// The CSV cell, JSON value or key=value value; in free text, the token around the finding.
    Field,
    /// The whole line.
    Line,
    /// The CSV row or top-level JSON value; in text, the line and its indented continuation lines.
    Record,
}

/// What kind of document the structural detectors should expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// From the file name, else from the first bytes.
    Auto,
    Text,
    Csv,
    Tsv,
    /// One JSON document, or several in a row (NDJSON, JSON Lines).
    Json,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Auto => "auto",
            Format::Text => "text",
            Format::Csv => "csv",
            Format::Tsv => "tsv",
            Format::Json => "json",
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    name: Option<String>,
    extends: Option<String>,
    format: Option<Format>,
    #[serde(default)]
    disable: Vec<String>,
    #[serde(default)]
    detect: Vec<DetectFile>,
    #[serde(default)]
    allow: AllowFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowFile {
    #[serde(default)]
    values: Vec<String>,
    #[serde(default)]
    patterns: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct DetectFile {
    name: Option<String>,
    kind: String,
    granularity: Option<Granularity>,
    /// Values this detector never classifies.
    allow: Option<Vec<String>>,
    region: Option<String>,
    labels: Option<Vec<String>>,
    password_keys: Option<Vec<String>>,
    keys: Option<Vec<String>>,
    min_len: Option<usize>,
    min_entropy: Option<f64>,
    keywords: Option<Vec<String>>,
    within: Option<usize>,
    columns: Option<Vec<String>>,
    patterns: Option<Vec<String>>,
    paths: Option<Vec<String>>,
    pattern: Option<String>,
    words: Option<Vec<String>>,
    case_insensitive: Option<bool>,
}

impl DetectFile {
    /// Names of the options that are set, for checking them against the kind.
    fn options_set(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        macro_rules! opt {
            ($($f:ident),*) => { $( if self.$f.is_some() { v.push(stringify!($f)); } )* };
        }
        opt!(
            region,
            labels,
            password_keys,
            keys,
            min_len,
            min_entropy,
            keywords,
            within,
            columns,
            patterns,
            paths,
            pattern,
            words,
            case_insensitive
        );
        v
    }
}

/// One compiled detector.
#[derive(Debug, Clone)]
pub struct Detector {
    pub name: String,
    pub granularity: Granularity,
    pub(crate) kind: Kind,
    pub(crate) allow: Vec<Vec<u8>>,
}

impl Detector {
    /// The `kind` written in the policy.
    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }
}

/// What a detector finds, with its compiled settings.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Card,
    Iban,
    Ssn,
    Email,
    Phone {
        region: phonenumber::country::Id,
    },
    Ipv4,
    Ipv6,
    Pem {
        labels: Vec<Vec<u8>>,
    },
    ApiKey,
    Jwt,
    Secret {
        password_keys: Names,
        keys: Names,
        min_len: usize,
        min_entropy: f64,
    },
    Dob {
        within: usize,
    },
    PersonTitle,
    Regex {
        re: Regex,
    },
    Keyword {
        ac: AhoCorasick,
    },
    CsvColumns {
        columns: Names,
        patterns: Vec<Regex>,
    },
    JsonFields {
        keys: Names,
        paths: Vec<PathPattern>,
    },
    KvFields {
        keys: Names,
    },
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::Card => "card",
            Kind::Iban => "iban",
            Kind::Ssn => "ssn",
            Kind::Email => "email",
            Kind::Phone { .. } => "phone",
            Kind::Ipv4 => "ipv4",
            Kind::Ipv6 => "ipv6",
            Kind::Pem { .. } => "pem",
            Kind::ApiKey => "api-key",
            Kind::Jwt => "jwt",
            Kind::Secret { .. } => "secret",
            Kind::Dob { .. } => "dob",
            Kind::PersonTitle => "person-title",
            Kind::Regex { .. } => "regex",
            Kind::Keyword { .. } => "keyword",
            Kind::CsvColumns { .. } => "csv-columns",
            Kind::JsonFields { .. } => "json-fields",
            Kind::KvFields { .. } => "kv-fields",
        }
    }
}

/// The options each kind accepts, and its default granularity.
fn kind_options(kind: &str) -> Option<(&'static [&'static str], Granularity)> {
    use Granularity::*;
    Some(match kind {
        "card" | "iban" | "ssn" | "email" | "ipv4" | "ipv6" | "api-key" | "jwt"
        | "person-title" => (&[], Match),
        "phone" => (&["region"], Match),
        "pem" => (&["labels"], Match),
        "secret" => (&["password_keys", "keys", "min_len", "min_entropy"], Match),
        "dob" => (&["keywords", "within"], Match),
        "regex" => (&["pattern"], Match),
        "keyword" => (&["words", "case_insensitive"], Match),
        "csv-columns" => (&["columns", "patterns"], Field),
        "json-fields" => (&["keys", "paths"], Field),
        "kv-fields" => (&["keys"], Field),
        _ => return None,
    })
}

const KINDS: &str = "card, iban, ssn, email, phone, ipv4, ipv6, pem, api-key, jwt, secret, dob, \
                     person-title, regex, keyword, csv-columns, json-fields, kv-fields";

/// A compiled policy, ready to scan documents (see [`crate::engine`]).
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub format: Format,
    pub detectors: Vec<Detector>,
    pub(crate) allow_values: Vec<Vec<u8>>,
    pub(crate) allow_patterns: Vec<crate::allow::AllowPattern>,
    /// Case-sensitive literal prefixes (cloud keys and JWTs): the automaton (the reference
    /// scan's) and the same prefixes by first byte, longest first, which the scan checks at the
    /// word starts its block filter gives.
    pub(crate) prefixes: Vec<Prefixes>,
    pub(crate) prefix_starts: Vec<PrefixBucket>,
    /// Keywords that make a date a date of birth, case-insensitive: the automaton (the
    /// reference scan's) and the block filter the scan asks.
    pub(crate) dob_keywords: Option<AhoCorasick>,
    pub(crate) dob_words: Option<crate::keywords::Keywords>,
    /// User regular expressions, to skip those with no match in a chunk.
    pub(crate) regex_set: Option<(RegexSet, Vec<usize>)>,
    /// Longest keyword of any dob detector, for the look-behind.
    pub(crate) dob_within: usize,
    source: String,
}

/// The prefixes that start with one byte, longest first, and the set of their second bytes.
#[derive(Debug, Clone, Default)]
pub(crate) struct PrefixBucket {
    pub seconds: u128,
    pub list: Vec<(Vec<u8>, PrefixWhat)>,
}

/// The prefix automaton and, per pattern, what it starts: the reference scan's way of finding
/// prefixes, which the tests hold the block filter to.
#[derive(Debug, Clone)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Prefixes {
    pub ac: AhoCorasick,
    pub what: Vec<PrefixWhat>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum PrefixWhat {
    ApiKey(usize, api_key::Rule),
    Jwt(usize),
}

impl Policy {
    /// The built-in `default` policy.
    pub fn default_policy() -> Policy {
        // The embedded policy is checked by this crate's tests; failing here is a build defect.
        Policy::parse(DEFAULT_POLICY).unwrap_or_else(|e| panic!("the built-in policy: {e}"))
    }

    /// `default`, or the source of a policy file.
    pub fn builtin(name: &str) -> Option<&'static str> {
        (name == "default").then_some(DEFAULT_POLICY)
    }

    /// `default` (the built-in policy) or the path of a policy file.
    pub fn load(spec: &str) -> Result<Policy, PolicyError> {
        if let Some(src) = Policy::builtin(spec) {
            return Policy::parse(src);
        }
        let src = std::fs::read_to_string(spec).map_err(|source| PolicyError::Io {
            path: spec.to_string(),
            source,
        })?;
        // A file that names no policy is called by its path: `extends = "default"` alone must
        // not report itself as the built-in policy.
        Policy::parse_named(&src, Some(spec))
    }

    /// The TOML this policy was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Compile a policy from its TOML source.
    pub fn parse(toml_src: &str) -> Result<Policy, PolicyError> {
        Policy::parse_named(toml_src, None)
    }

    /// [`Policy::parse`], the policy called `fallback` unless its source names it.
    fn parse_named(toml_src: &str, fallback: Option<&str>) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(toml_src)?;
        let mut detects = Vec::new();
        let mut allow = AllowFile::default();
        let mut format = Format::Auto;
        if let Some(base) = &file.extends {
            let src = Policy::builtin(base).ok_or_else(|| {
                PolicyError::Invalid(format!(
                    "extends = \"{base}\": the only built-in policy is \"default\""
                ))
            })?;
            let base: PolicyFile = toml::from_str(src)?;
            detects = base.detect;
            allow = base.allow;
            format = base.format.unwrap_or(Format::Auto);
            for d in &file.disable {
                let before = detects.len();
                detects.retain(|x| x.name.as_deref().unwrap_or(&x.kind) != d);
                if detects.len() == before {
                    return Err(PolicyError::Invalid(format!(
                        "disable = [\"{d}\"]: the base policy has no detector named {d}"
                    )));
                }
            }
        } else if !file.disable.is_empty() {
            return Err(PolicyError::Invalid(
                "`disable` only applies with `extends`".into(),
            ));
        }
        detects.extend(file.detect);
        allow.values.extend(file.allow.values);
        allow.patterns.extend(file.allow.patterns);
        if let Some(f) = file.format {
            format = f;
        }
        if detects.is_empty() {
            return Err(PolicyError::Invalid(
                "the policy has no detectors: add [[detect]] entries or extends = \"default\""
                    .into(),
            ));
        }
        if detects.len() > MAX_DETECTORS {
            return Err(PolicyError::Invalid(format!(
                "the policy has {} detectors; at most {MAX_DETECTORS} are allowed",
                detects.len()
            )));
        }
        let mut detectors = Vec::with_capacity(detects.len());
        for (index, d) in detects.iter().enumerate() {
            let name = d.name.clone().unwrap_or_else(|| d.kind.clone());
            let det = compile_detector(d, &name).map_err(|message| PolicyError::Detector {
                index,
                name: name.clone(),
                message,
            })?;
            if detectors.iter().any(|x: &Detector| x.name == det.name) {
                return Err(PolicyError::Detector {
                    index,
                    name,
                    message: "another detector has this name; give each a distinct `name`".into(),
                });
            }
            detectors.push(det);
        }
        let allow_patterns = allow
            .patterns
            .iter()
            .map(|p| {
                crate::allow::AllowPattern::new(p)
                    .map_err(|e| PolicyError::Invalid(format!("allow pattern {p:?}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut policy = Policy {
            name: file
                .name
                .or_else(|| fallback.map(String::from))
                .or_else(|| file.extends.clone())
                .unwrap_or_else(|| "custom".into()),
            format,
            detectors,
            allow_values: allow.values.into_iter().map(String::into_bytes).collect(),
            allow_patterns,
            prefixes: Vec::new(),
            prefix_starts: Vec::new(),
            dob_keywords: None,
            dob_words: None,
            regex_set: None,
            dob_within: 0,
            source: toml_src.to_string(),
        };
        policy.build_automata(&detects)?;
        Ok(policy)
    }

    fn build_automata(&mut self, files: &[DetectFile]) -> Result<(), PolicyError> {
        let mut pats: Vec<Vec<u8>> = Vec::new();
        let mut what = Vec::new();
        let mut dob_words: Vec<String> = Vec::new();
        let mut regexes = Vec::new();
        for (i, d) in self.detectors.iter().enumerate() {
            match &d.kind {
                Kind::ApiKey => {
                    for rule in api_key::RULES {
                        pats.push(rule.prefix.as_bytes().to_vec());
                        what.push(PrefixWhat::ApiKey(i, *rule));
                    }
                }
                Kind::Jwt => {
                    pats.push(b"eyJ".to_vec());
                    what.push(PrefixWhat::Jwt(i));
                }
                Kind::Dob { within } => {
                    let words = files[i].keywords.clone().unwrap_or_else(|| {
                        ["date of birth", "birth date", "birthday", "born", "dob"]
                            .map(String::from)
                            .to_vec()
                    });
                    if words.iter().any(|w| w.is_empty()) {
                        return Err(PolicyError::Invalid(format!(
                            "detector {}: a keyword is empty",
                            d.name
                        )));
                    }
                    dob_words.extend(words);
                    self.dob_within = self.dob_within.max(*within);
                }
                Kind::Regex { re } => regexes.push((i, re.as_str().to_string())),
                _ => {}
            }
        }
        // Leftmost-longest without overlaps: no prefix occurs inside another (a search that
        // starts anywhere finds the same ones), and a prefix that is the start of a longer one
        // (`sk-`, `sk-proj-`) fails its own rule where the longer one applies.
        if !pats.is_empty() {
            // Longest first for each first byte; among equal ones the first listed, as the
            // automaton's leftmost-longest search reports.
            let mut starts: Vec<PrefixBucket> = vec![PrefixBucket::default(); 128];
            for (p, w) in pats.iter().zip(&what) {
                let bucket = match p.as_slice() {
                    [a, b, ..] if *b < 128 => starts.get_mut(usize::from(*a)),
                    _ => None,
                };
                let Some(bucket) = bucket else {
                    return Err(PolicyError::Invalid(format!(
                        "prefix {:?} is not two ASCII bytes or more",
                        String::from_utf8_lossy(p)
                    )));
                };
                bucket.seconds |= 1 << p[1];
                bucket.list.push((p.clone(), *w));
            }
            for b in &mut starts {
                b.list.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
            }
            self.prefix_starts = starts;
            let ac = AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&pats)
                .map_err(|e| PolicyError::Invalid(format!("prefix automaton: {e}")))?;
            self.prefixes.push(Prefixes { ac, what });
        }
        if !dob_words.is_empty() {
            let ac = AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .build(&dob_words)
                .map_err(|e| PolicyError::Invalid(format!("date-of-birth keywords: {e}")))?;
            self.dob_keywords = Some(ac);
            let words = crate::keywords::Keywords::new(&dob_words)
                .map_err(|e| PolicyError::Invalid(format!("date-of-birth keywords: {e}")))?;
            self.dob_words = Some(words);
        }
        if !regexes.is_empty() {
            let set = RegexSet::new(regexes.iter().map(|(_, p)| p))
                .map_err(|e| PolicyError::Invalid(format!("regular expressions: {e}")))?;
            self.regex_set = Some((set, regexes.into_iter().map(|(i, _)| i).collect()));
        }
        Ok(())
    }

    /// Whether `bytes`, found by detector `det`, is allowed to stay in the clear: the
    /// definition, which the reference scan asks (the scan asks [`crate::allow::AllowList`]).
    #[cfg(test)]
    pub(crate) fn allowed(&self, det: usize, bytes: &[u8]) -> bool {
        self.allow_values.iter().any(|v| v == bytes)
            || self.detectors[det].allow.iter().any(|v| v == bytes)
            || self.allow_patterns.iter().any(|r| r.is_match(bytes))
    }

    /// The names of the detectors, in policy order.
    pub fn detector_names(&self) -> Vec<&str> {
        self.detectors.iter().map(|d| d.name.as_str()).collect()
    }

    pub(crate) fn has_structural(&self, f: Format) -> bool {
        self.detectors.iter().any(|d| {
            matches!(
                (&d.kind, f),
                (Kind::CsvColumns { .. }, Format::Csv | Format::Tsv)
                    | (Kind::JsonFields { .. }, Format::Json)
            )
        })
    }
}

fn compile_detector(d: &DetectFile, name: &str) -> Result<Detector, String> {
    let (allowed, default_gran) = kind_options(&d.kind)
        .ok_or_else(|| format!("unknown kind \"{}\"; the kinds are {KINDS}", d.kind))?;
    for o in d.options_set() {
        if !allowed.contains(&o) {
            return Err(format!(
                "option `{o}` does not apply to kind \"{}\" (it takes {})",
                d.kind,
                if allowed.is_empty() {
                    "no options".to_string()
                } else {
                    allowed.join(", ")
                }
            ));
        }
    }
    let strings = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    let kind = match d.kind.as_str() {
        "card" => Kind::Card,
        "iban" => Kind::Iban,
        "ssn" => Kind::Ssn,
        "email" => Kind::Email,
        "phone" => {
            let r = d.region.clone().unwrap_or_else(|| "US".into());
            let region = r
                .parse::<phonenumber::country::Id>()
                .map_err(|_| format!("region \"{r}\" is not a two-letter country code"))?;
            Kind::Phone { region }
        }
        "ipv4" => Kind::Ipv4,
        "ipv6" => Kind::Ipv6,
        "pem" => {
            let labels = d
                .labels
                .clone()
                .unwrap_or_else(|| vec!["PRIVATE KEY".into(), "CERTIFICATE".into()]);
            Kind::Pem {
                labels: labels.into_iter().map(String::into_bytes).collect(),
            }
        }
        "api-key" => Kind::ApiKey,
        "jwt" => Kind::Jwt,
        "secret" => {
            let min_entropy = d.min_entropy.unwrap_or(3.0);
            if !(0.0..=8.0).contains(&min_entropy) {
                return Err("min_entropy is in bits per byte, between 0 and 8".into());
            }
            let keys = strings(&d.keys);
            let password_keys = strings(&d.password_keys);
            if keys.is_empty() && password_keys.is_empty() {
                return Err("give `keys` or `password_keys`".into());
            }
            Kind::Secret {
                password_keys: Names::words(&password_keys),
                keys: Names::words(&keys),
                min_len: d.min_len.unwrap_or(8).max(1),
                min_entropy,
            }
        }
        "dob" => {
            let within = d.within.unwrap_or(40);
            if within == 0 || within > 1024 {
                return Err("`within` is a number of bytes between 1 and 1024".into());
            }
            Kind::Dob { within }
        }
        "person-title" => Kind::PersonTitle,
        "regex" => {
            let p = d
                .pattern
                .as_deref()
                .ok_or("a regex detector needs `pattern`")?;
            let re = regex::bytes::RegexBuilder::new(p)
                .size_limit(16 << 20)
                .build()
                .map_err(|e| format!("pattern {p:?}: {e}"))?;
            if re.is_match(b"") {
                return Err(format!("pattern {p:?} matches the empty string"));
            }
            Kind::Regex { re }
        }
        "keyword" => {
            let words = strings(&d.words);
            if words.is_empty() || words.iter().any(String::is_empty) {
                return Err("a keyword detector needs non-empty `words`".into());
            }
            let ac = AhoCorasickBuilder::new()
                .ascii_case_insensitive(d.case_insensitive.unwrap_or(true))
                .match_kind(MatchKind::LeftmostLongest)
                .build(&words)
                .map_err(|e| format!("words: {e}"))?;
            Kind::Keyword { ac }
        }
        "csv-columns" => {
            let columns = strings(&d.columns);
            let patterns = strings(&d.patterns)
                .iter()
                .map(|p| {
                    regex::bytes::RegexBuilder::new(p)
                        .case_insensitive(true)
                        .build()
                        .map_err(|e| format!("column pattern {p:?}: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if columns.is_empty() && patterns.is_empty() {
                return Err("give `columns` or `patterns`".into());
            }
            Kind::CsvColumns {
                columns: Names::words(&columns),
                patterns,
            }
        }
        "json-fields" => {
            let keys = strings(&d.keys);
            let paths = strings(&d.paths)
                .iter()
                .map(|p| PathPattern::parse(p))
                .collect::<Result<Vec<_>, _>>()?;
            if keys.is_empty() && paths.is_empty() {
                return Err("give `keys` or `paths`".into());
            }
            Kind::JsonFields {
                keys: Names::words(&keys),
                paths,
            }
        }
        "kv-fields" => {
            let keys = strings(&d.keys);
            if keys.is_empty() {
                return Err("a kv-fields detector needs `keys`".into());
            }
            Kind::KvFields {
                keys: Names::exact(&keys),
            }
        }
        _ => unreachable!("kind_options accepted it"),
    };
    Ok(Detector {
        name: name.to_string(),
        granularity: d.granularity.unwrap_or(default_gran),
        kind,
        allow: strings(&d.allow)
            .into_iter()
            .map(String::into_bytes)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_compiles_and_names_its_detectors() {
        let p = Policy::default_policy();
        assert_eq!(p.name, "default");
        let names = p.detector_names();
        for n in [
            "card", "iban", "ssn", "email", "phone", "ipv4", "ipv6", "pem", "jwt",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(p.prefixes.len() == 1 && p.dob_keywords.is_some());
    }

    #[test]
    fn extends_adds_disables_and_allows() {
        let p = Policy::parse(
            r#"
            extends = "default"
            disable = ["ipv4", "name"]
            [[detect]]
            name = "employee"
            kind = "regex"
            pattern = 'EMP-[0-9]{6}'
            granularity = "line"
            [allow]
            values = ["10.0.0.1"]
            "#,
        )
        .unwrap();
        let names = p.detector_names();
        assert!(names.contains(&"employee") && !names.contains(&"ipv4"));
        assert!(!names.contains(&"name"));
        assert!(p.allowed(0, b"10.0.0.1") && p.allowed(0, b"127.0.0.1"));
        assert!(p.regex_set.is_some());
    }

    #[test]
    fn bad_policies_say_what_is_wrong() {
        let cases = [
            ("[[detect]]\nkind = \"cards\"", "unknown kind"),
            (
                "[[detect]]\nkind = \"card\"\nregion = \"US\"",
                "does not apply",
            ),
            ("[[detect]]\nkind = \"regex\"", "needs `pattern`"),
            ("[[detect]]\nkind = \"regex\"\npattern = \"(\"", "pattern"),
            (
                "[[detect]]\nkind = \"regex\"\npattern = \"a*\"",
                "empty string",
            ),
            (
                "[[detect]]\nkind = \"phone\"\nregion = \"Mars\"",
                "country code",
            ),
            ("[[detect]]\nkind = \"card\"\ncolour = 1", "unknown field"),
            ("name = \"x\"", "no detectors"),
            ("extends = \"strict\"", "only built-in"),
            (
                "extends = \"default\"\ndisable = [\"nothing\"]",
                "no detector named",
            ),
            (
                "[[detect]]\nkind = \"card\"\n[[detect]]\nkind = \"card\"",
                "distinct `name`",
            ),
            (
                "[[detect]]\nkind = \"json-fields\"\npaths = [\"a..b\"]",
                "empty key",
            ),
            (
                "[[detect]]\nkind = \"card\"\ngranularity = \"page\"",
                "unknown variant",
            ),
            (
                "format = \"xml\"\n[[detect]]\nkind = \"card\"",
                "unknown variant",
            ),
            (
                "[[detect]]\nkind = \"dob\"\nwithin = 0",
                "between 1 and 1024",
            ),
        ];
        for (src, want) in cases {
            let e = Policy::parse(src).unwrap_err().to_string();
            assert!(e.contains(want), "{src:?}: {e}");
        }
        let many: String = (0..65)
            .map(|i| format!("[[detect]]\nname = \"c{i}\"\nkind = \"card\"\n"))
            .collect();
        assert!(Policy::parse(&many)
            .unwrap_err()
            .to_string()
            .contains("at most 64"));
    }
}
