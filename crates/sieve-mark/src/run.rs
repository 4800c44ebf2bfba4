//! A policy shared by a sender's documents, with its findings counted across all of them (the
//! per-detector counts `sieve send --policy --json` reports).

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;
use std::sync::Mutex;

use crate::engine::{Marking, ScanOptions};
use crate::policy::Policy;

#[derive(Debug)]
pub struct PolicyRun {
    pub policy: Policy,
    counts: Mutex<Vec<u64>>,
    threads: usize,
}

impl PolicyRun {
    pub fn new(policy: Policy) -> PolicyRun {
        let n = policy.detectors.len();
        PolicyRun {
            policy,
            counts: Mutex::new(vec![0; n]),
            threads: ScanOptions::default().threads,
        }
    }

    fn opts(&self, name: &str) -> ScanOptions {
        ScanOptions {
            threads: self.threads,
            name: Some(name.to_string()),
            ..ScanOptions::default()
        }
    }

    fn tally(&self, m: &Marking) -> Vec<Range<u64>> {
        if let Ok(mut c) = self.counts.lock() {
            for (t, n) in c.iter_mut().zip(&m.counts) {
                *t += n;
            }
        }
        m.ranges()
    }

    /// Classify a mapped document named `name`; `done` is told the parts scanned (see
    /// [`Policy::scan_slice_releasing`]).
    pub fn classify_slice(
        &self,
        doc: &[u8],
        name: &str,
        done: &(dyn Fn(Range<usize>) + Sync),
    ) -> Vec<Range<u64>> {
        let m = self
            .policy
            .scan_slice_releasing(doc, &self.opts(name), done);
        self.tally(&m)
    }

    /// Classify a document read from `r`.
    pub fn classify_reader<R: Read>(&self, r: R, name: &str) -> std::io::Result<Vec<Range<u64>>> {
        let m = self.policy.scan_reader(r, &self.opts(name))?;
        Ok(self.tally(&m))
    }

    /// Findings so far per detector name (detectors that found nothing included).
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let c = self.counts.lock().map(|c| c.clone()).unwrap_or_default();
        self.policy
            .detectors
            .iter()
            .map(|d| d.name.clone())
            .zip(c)
            .collect()
    }
}
