//! The experiments of thesis chapter 5 (and the ICPE paper's queueing figure), plus our own:
//! one file per experiment or figure group, each with its prose template beside it
//! (`<name>.md`). This file only lists them; what they share is in [`crate::common`].

mod auto;
mod batches;
mod capacity;
mod channels;
mod compress;
mod cpu_p;
mod delay;
mod f5_1;
mod f5_12;
mod f5_13;
mod f5_2;
mod f5_3;
mod f5_4;
mod f5_5;
mod f5_6;
mod f5_7;
mod icpe_f7;
mod noaes;
mod parallel;
mod peers;
mod t5_3;
mod tb;
mod wan;

use std::path::Path;

use anyhow::Result;

use crate::common::report::Report;
use crate::common::Ctx;
pub(crate) use auto::ID as AUTO_ID;

/// One experiment: given the results folder, it measures, writes `data.csv` and its figures into
/// its own folder(s) there, and returns their reports: one [`Output`] per folder (two where one
/// sweep feeds two of the thesis's figure groups).
pub(crate) struct Experiment {
    pub(crate) id: &'static str,
    pub(crate) title: &'static str,
    pub(crate) run: fn(&mut Ctx, &Path) -> Result<Vec<Output>>,
}

/// A folder an experiment wrote: its name under `results/`, its title, its report.
pub(crate) struct Output {
    pub(crate) folder: String,
    pub(crate) title: String,
    pub(crate) report: Report,
}

/// An experiment with one folder, named after its id.
macro_rules! single {
    ($id:expr, $title:expr, $run:path) => {
        Experiment {
            id: $id,
            title: $title,
            run: |ctx, out| {
                let dir = out.join(folder_of($id));
                std::fs::create_dir_all(&dir)?;
                Ok(vec![Output {
                    folder: folder_of($id),
                    title: $title.into(),
                    report: $run(ctx, &dir)?,
                }])
            },
        }
    };
}

/// The folder of an experiment id: `/` is not allowed in a folder name.
pub(crate) fn folder_of(id: &str) -> String {
    id.replace('/', "_")
}

/// Every experiment, in the order of the thesis.
pub(crate) fn all() -> Vec<Experiment> {
    vec![
        single!(
            "F5.1",
            "Improvement vs proportion of classified information P (x = 1, 10 MB)",
            f5_1::run
        ),
        single!(
            "F5.2",
            "Improvement vs file size x (P = 0.1, 0.5, 0.9)",
            f5_2::run
        ),
        single!(
            "F5.3",
            "Improvement of response time vs P per cipher suite (x = 1 MB)",
            f5_3::run
        ),
        single!(
            "F5.4",
            "Improvement of total time vs file size per cipher suite",
            f5_4::run
        ),
        single!(
            "F5.5",
            "Improvement of response time vs P: wired, Wi-Fi, power saving",
            f5_5::run
        ),
        single!(
            "F5.6",
            "Improvement of total time vs file size: wired, Wi-Fi, power saving",
            f5_6::run
        ),
        single!(
            "F5.7",
            "Wi-Fi with additional processing AP = 500 ms per secure MB",
            f5_7::run
        ),
        single!(
            "F5.8-5.9",
            "Secure-only system with N = 1, 2, 3, 5 channels",
            channels::f5_8
        ),
        single!(
            "F5.10-5.11",
            "Security sieve with N = M = 1, 2, 3, 5 channels",
            channels::f5_10
        ),
        single!(
            "F5.12/T5.2",
            "Even split (ES) vs segment split (SS) with N = M = 2",
            f5_12::run
        ),
        single!(
            "F5.13",
            "Improvement of total time vs number of channels",
            f5_13::run
        ),
        Experiment {
            id: "F5.14-5.16",
            title: "Batches UFS and EFS with BFS, BES, BSS: total times and the improvement",
            run: batches::run,
        },
        single!(
            "TB.1-3",
            "Batch split/combine times (UFS, x = 10 MB, 2, 3, 5 channels)",
            tb::run
        ),
        single!(
            "T5.3/F5.17-5.18",
            "Arrival stream: batching vs none (simulation from measured service times)",
            t5_3::run
        ),
        single!(
            "ICPE-F7",
            "Open queueing model R = D/(1 − λD), sieve vs secure-only",
            icpe_f7::run
        ),
        single!(
            "CPU-P",
            "CPU seconds per GB vs P, sender and receiver",
            cpu_p::run
        ),
        single!(
            "PEERS",
            "Today's tools side by side: socat, socat+OpenSSL, scp, iperf3",
            peers::run
        ),
        single!(
            "NOAES",
            "Devices without AES instructions (OPENSSL_ia32cap masks): F5.1 and F5.2 per suite",
            noaes::run
        ),
        single!(
            "CAPACITY",
            "Receiver capacity on a fraction of one core, 8-32 senders, sieve vs secure-only",
            capacity::run
        ),
        single!(
            "PARALLEL",
            "Parallel protection: speed-up with N = 1, 2, 4 channels on 2 cores, with and without AES instructions",
            parallel::run
        ),
        single!(
            "DELAY",
            "The userspace delay line: round trip against its setting and goodput (iperf3)",
            delay::run
        ),
        single!(
            "WAN",
            "Several channels over 20-100 ms round trips at 100 and 1000 Mbit/s (N = M = 1..8)",
            wan::run
        ),
        single!(
            "COMPRESS",
            "Compression of the cleartext: auto, ACCENT, fixed levels, off against the link rate",
            compress::run
        ),
        single!(
            AUTO_ID,
            "--mode auto, the default, against the faster fixed mode: 1 MB to 1 GiB, loopback, no AES instructions, 100 Mbit/s",
            auto::run
        ),
    ]
}
