//! # sieve-lab
//!
//! Re-runs the experiments of the thesis's chapter 5 on this machine, against the real `sieve
//! serve` and `sieve send`, next to today's tools, and writes `results/<experiment>/`: raw
//! measurements (`data.csv`), plots (PNG and SVG) and a report that puts our figures beside the
//! thesis's (`../shared/EXPERIMENTS.md`).

pub mod algo;
pub mod experiments;
pub mod measure;
pub mod peers;
pub mod plot;
pub mod queue;
pub mod run;
pub mod scenario;
pub mod scenarios;
pub mod stats;
pub mod summary;
pub mod workload;
