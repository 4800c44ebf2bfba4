//! One raw measurement of a transfer: a row of `data.csv`, written and read back through serde,
//! so a report can be rendered again from the data alone.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use sieve_core::report::SessionReport;

use crate::run::SendOptions;

/// The two systems the thesis compares, and the sender's default, which chooses one of them per
/// session (`--mode auto`; the AUTO experiment measures it against both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Mode {
    #[serde(rename = "secure-only")]
    SecureOnly,
    #[serde(rename = "sieve")]
    Sieve,
    #[serde(rename = "auto")]
    Auto,
}

impl Mode {
    pub(crate) fn of(options: &SendOptions) -> Mode {
        match options.mode {
            "secure-only" => Mode::SecureOnly,
            "auto" => Mode::Auto,
            _ => Mode::Sieve,
        }
    }
}

/// One transfer: the configuration and what `sieve send --json` reported. The column names and
/// order are those of every `data.csv` the lab has written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) scenario: String,
    pub(crate) files: String,
    pub(crate) mode: Mode,
    pub(crate) x_mb: f64,
    pub(crate) p: f64,
    pub(crate) n: u8,
    pub(crate) m: u8,
    pub(crate) split: String,
    pub(crate) batch_split: String,
    pub(crate) cipher: String,
    pub(crate) ap_ms_per_mb: f64,
    /// Round: every variant of every point is measured once per round, so records of one round
    /// were taken close together in time and can be paired.
    pub(crate) rep: usize,
    pub(crate) connect_ms: f64,
    pub(crate) connect_first_tls_ms: f64,
    pub(crate) connect_extra_tls_ms: f64,
    pub(crate) connect_plain_ms: f64,
    pub(crate) response_ms: f64,
    pub(crate) total_ms: f64,
    pub(crate) sieve_ms: f64,
    pub(crate) processing_ms: f64,
    pub(crate) split_ms: f64,
    pub(crate) transfer_ms: f64,
    pub(crate) combine_ms: f64,
    pub(crate) integrate_ms: f64,
    pub(crate) cpu_ms: f64,
    pub(crate) bytes: u64,
    pub(crate) secure_bytes: u64,
    pub(crate) plain_bytes: u64,
    pub(crate) negotiated_cipher: String,
    /// Bytes the cleartext took on the plain channels, after the sender's compression (the
    /// default, `--compress auto`); empty in data written before the column existed.
    #[serde(default)]
    pub(crate) plain_wire_bytes: Option<u64>,
    /// With `--mode auto`: the mode it chose for the session ("sieve" or "secure-only"), and
    /// what its cost model predicted for each; empty for the fixed modes and in older data.
    #[serde(default)]
    pub(crate) auto_chose: Option<String>,
    #[serde(default)]
    pub(crate) predicted_sieve_ms: Option<f64>,
    #[serde(default)]
    pub(crate) predicted_secure_only_ms: Option<f64>,
}

/// Where a record was measured: the point's labels.
pub(crate) struct At<'a> {
    pub(crate) scenario: &'a str,
    pub(crate) files: &'a str,
    pub(crate) x_mb: f64,
    pub(crate) p: f64,
}

impl Record {
    pub(crate) fn new(at: &At<'_>, o: &SendOptions, rep: usize, s: &SessionReport) -> Record {
        Record {
            scenario: at.scenario.into(),
            files: at.files.into(),
            mode: Mode::of(o),
            x_mb: at.x_mb,
            p: at.p,
            n: o.n,
            m: o.m,
            split: o.split.into(),
            batch_split: o.batch_split.into(),
            cipher: o.cipher.into(),
            ap_ms_per_mb: o.processing_ms_per_mb,
            rep,
            connect_ms: s.connect_ms,
            connect_first_tls_ms: s.connect_first_tls_ms,
            connect_extra_tls_ms: s.connect_extra_tls_ms,
            connect_plain_ms: s.connect_plain_ms,
            response_ms: s.response_ms,
            total_ms: s.total_ms,
            sieve_ms: s.sieve_ms,
            processing_ms: s.processing_ms,
            split_ms: s.split_ms,
            transfer_ms: s.transfer_ms,
            combine_ms: s.combine_ms,
            integrate_ms: s.integrate_ms,
            cpu_ms: s.cpu_ms,
            bytes: s.bytes,
            secure_bytes: s.secure_bytes,
            plain_bytes: s.plain_bytes,
            negotiated_cipher: s.cipher.clone(),
            plain_wire_bytes: Some(
                s.compression
                    .as_ref()
                    .map_or(s.plain_bytes, |c| c.plain_after),
            ),
            auto_chose: s.decision.as_ref().map(|d| d.chosen.name().to_string()),
            predicted_sieve_ms: s
                .decision
                .as_ref()
                .and_then(|d| d.predicted_ms)
                .map(|p| p.sieve),
            predicted_secure_only_ms: s
                .decision
                .as_ref()
                .and_then(|d| d.predicted_ms)
                .map(|p| p.secure_only),
        }
    }

    pub(crate) fn is(&self, mode: Mode) -> bool {
        self.mode == mode
    }
}

/// True when two labels of a point are the same number (x or P as written to the CSV).
pub(crate) fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The header of `data.csv` as written before `plain_wire_bytes` existed, with its newline: the
/// tests' fixtures start from it (and so also check that such data still parse).
#[cfg(test)]
pub(crate) const CSV_HEADER: &str = "scenario,files,mode,x_mb,p,n,m,split,batch_split,cipher,\
    ap_ms_per_mb,rep,connect_ms,connect_first_tls_ms,connect_extra_tls_ms,connect_plain_ms,\
    response_ms,total_ms,sieve_ms,processing_ms,split_ms,transfer_ms,combine_ms,integrate_ms,\
    cpu_ms,bytes,secure_bytes,plain_bytes,negotiated_cipher\n";

/// Write rows as CSV with a header.
pub(crate) fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("cannot write {}", path.display()))?;
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Read rows written by [`write_csv`].
pub(crate) fn read_csv<T: for<'de> Deserialize<'de>>(from: impl Read) -> Result<Vec<T>> {
    csv::Reader::from_reader(from)
        .deserialize()
        .enumerate()
        .map(|(i, r)| r.with_context(|| format!("row {} of the CSV", i + 2)))
        .collect()
}
