//! The machine a run measured: what every report states before its first number, because the
//! thesis's result turns on how fast protection is relative to moving bytes, and that is a
//! property of the processor.
//!
//! The speeds are measured in this run, in process, on one core, with the libraries the sieve
//! uses (aws-lc through rustls for the TLS 1.3 suites; the plain channels' AES-GMAC of
//! `sieve_transport::mac`), so a report never quotes a speed from somewhere else.

use std::time::Instant;

use aws_lc_rs::aead::{
    Aad, Algorithm, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};
use serde::{Deserialize, Serialize};
use sieve_transport::mac::{PlainMac, MAC_BLOCK};

/// The CPU features that decide how fast TLS and the MAC are.
const FLAGS: [(&str, &str); 4] = [
    ("aes", "AES instructions"),
    ("pclmulqdq", "carry-less multiply"),
    ("vaes", "vector AES"),
    ("vpclmulqdq", "vector carry-less multiply"),
];

/// The CPU as a report names it: the model name, then family and model numbers.
///
/// Why the numbers: virtual machines often show a generic model name ("Intel(R) Xeon(R)
/// Processor") for quite different processors, and two runs compared as if from one machine
/// must not be.
fn cpu_name(name: Option<&str>, family: Option<&str>, model: Option<&str>) -> String {
    let name = name.unwrap_or("unknown CPU");
    match (family, model) {
        (Some(f), Some(m)) => format!("{name} (family {f}, model {m})"),
        _ => name.to_string(),
    }
}

/// Facts about this machine and speeds measured on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Machine {
    pub(crate) cpu: String,
    pub(crate) cores: usize,
    pub(crate) ram_gib: f64,
    pub(crate) kernel: String,
    /// Each flag of [`FLAGS`] and whether the CPU has it.
    pub(crate) flags: Vec<(String, bool)>,
    /// (what, GB/s on one core).
    pub(crate) speeds: Vec<(String, f64)>,
    /// The TCP congestion control new connections use (`net.ipv4.tcp_congestion_control`;
    /// the laboratory's namespaces inherit it). Empty if unknown, as in runs recorded before
    /// it was.
    ///
    /// Why a report names it: how two flows of one sender share a slow link depends on it.
    /// Under BBR, the sieve's plain connection over 10 Mbit/s kept pacing at the half of the
    /// link it had measured beside the classified flow for two seconds after that flow ended
    /// (4 MiB in 4.2-4.7 s in 18 of 33 rounds, against 3.5 s under CUBIC in 6 of 6).
    #[serde(default)]
    pub(crate) tcp_congestion: String,
}

impl Machine {
    /// A fixed machine for tests that render reports from fixtures.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Machine {
        Machine {
            cpu: "test CPU".into(),
            cores: 2,
            ram_gib: 1.0,
            kernel: "6".into(),
            flags: vec![("aes".into(), true)],
            speeds: vec![("TLS 1.3 AES-128-GCM".into(), 4.0)],
            tcp_congestion: "cubic".into(),
        }
    }

    /// Read the facts and measure the speeds (about a second).
    pub(crate) fn measure(quick: bool) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == name)
                .map(|(_, v)| v.trim().to_string())
        };
        let have: Vec<String> = field("flags")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let mem_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .next()
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<f64>().ok())
            })
            .unwrap_or(0.0);
        let speeds = measure_speeds(quick);
        Machine {
            cpu: cpu_name(
                field("model name").as_deref(),
                field("cpu family").as_deref(),
                field("model").as_deref(),
            ),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_gib: mem_kib / 1_048_576.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            flags: FLAGS
                .iter()
                .map(|(f, _)| (f.to_string(), have.iter().any(|h| h == f)))
                .collect(),
            speeds,
            tcp_congestion: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }
    }

    /// One line: CPU, cores, memory, kernel, and the TCP congestion control if known.
    pub(crate) fn line(&self) -> String {
        let cc = if self.tcp_congestion.is_empty() {
            String::new()
        } else {
            format!(", TCP congestion control {}", self.tcp_congestion)
        };
        format!(
            "{}, {} cores, {:.0} GiB RAM, Linux {}{cc}",
            self.cpu, self.cores, self.ram_gib, self.kernel
        )
    }

    /// The machine block of a report: facts, flags and this run's speeds.
    pub(crate) fn markdown(&self) -> String {
        let flags: Vec<String> = self
            .flags
            .iter()
            .map(|(f, on)| {
                let what = FLAGS.iter().find(|x| x.0 == f).map_or("", |x| x.1);
                format!("{f} ({what}) {}", if *on { "yes" } else { "no" })
            })
            .collect();
        let speeds: Vec<String> = self
            .speeds
            .iter()
            .map(|(w, s)| format!("{w} {s:.2} GB/s"))
            .collect();
        format!(
            "**Machine**: {}. CPU flags: {}. Measured in this run on one core (16 KiB records for \
             the TLS suites): {}.",
            self.line(),
            flags.join(", "),
            speeds.join(", ")
        )
    }

    /// Speed of `what` (a prefix of its name), if measured.
    pub(crate) fn speed(&self, what: &str) -> Option<f64> {
        self.speeds
            .iter()
            .find(|(w, _)| w.starts_with(what))
            .map(|s| s.1)
    }
}

/// The speed of each TLS 1.3 suite and of the cleartext MAC on one core of this process, in
/// GB/s. Under `OPENSSL_ia32cap` (read by aws-lc when the process starts) these are the speeds
/// of the masked CPU, which is how the lab measures the devices it emulates.
pub(crate) fn measure_speeds(quick: bool) -> Vec<(String, f64)> {
    let bytes = if quick { 32 << 20 } else { 256 << 20 };
    let mut speeds: Vec<(String, f64)> = [
        ("TLS 1.3 AES-128-GCM", &AES_128_GCM),
        ("TLS 1.3 AES-256-GCM", &AES_256_GCM),
        ("TLS 1.3 ChaCha20-Poly1305", &CHACHA20_POLY1305),
    ]
    .into_iter()
    .map(|(name, alg)| (name.to_string(), aead_speed(alg, bytes)))
    .collect();
    speeds.push((
        "cleartext MAC (AES-GMAC, 256 KiB units)".into(),
        gmac_speed(bytes),
    ));
    speeds
}

/// Best of three passes of sealing `bytes` in 16 KiB records (the TLS record size), in GB/s.
fn aead_speed(alg: &'static Algorithm, bytes: usize) -> f64 {
    let Ok(key) = UnboundKey::new(alg, &vec![7u8; alg.key_len()]) else {
        return f64::NAN;
    };
    let key = LessSafeKey::new(key);
    let mut record = vec![0x5au8; 16 << 10];
    best_of_three(bytes, || {
        for i in 0..bytes / record.len() {
            let mut n = [0u8; 12];
            n[4..].copy_from_slice(&(i as u64).to_be_bytes());
            let tag = key.seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(n),
                Aad::empty(),
                &mut record,
            );
            std::hint::black_box(&tag);
        }
    })
}

/// Best of three passes of tagging `bytes` in [`MAC_BLOCK`] units, in GB/s.
fn gmac_speed(bytes: usize) -> f64 {
    let mac = PlainMac::derive(&[3; 32], &[4; 16]);
    let unit = vec![0x5au8; MAC_BLOCK as usize];
    best_of_three(bytes, || {
        for i in 0..bytes / unit.len() {
            // Sealing an empty plaintext does not fail; a failure would only show as speed.
            let _ = std::hint::black_box(mac.tag(0, (i as u64) * MAC_BLOCK, &unit));
        }
    })
}

fn best_of_three(bytes: usize, mut pass: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            pass();
            bytes as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .fold(f64::NAN, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processors behind one generic model name are told apart by their numbers.
    #[test]
    fn the_cpu_is_named_with_family_and_model() {
        let a = cpu_name(Some("Intel(R) Xeon(R) Processor"), Some("6"), Some("167"));
        let b = cpu_name(Some("Intel(R) Xeon(R) Processor"), Some("6"), Some("207"));
        assert_eq!(a, "Intel(R) Xeon(R) Processor (family 6, model 167)");
        assert_ne!(a, b);
        assert_eq!(cpu_name(Some("ARMv8"), None, None), "ARMv8");
        assert_eq!(cpu_name(None, None, None), "unknown CPU");
    }

    #[test]
    fn facts_and_speeds_are_read() {
        let m = Machine::measure(true);
        assert!(!m.cpu.is_empty() && m.cores >= 1 && !m.kernel.is_empty());
        assert_eq!(m.flags.len(), 4);
        assert_eq!(m.speeds.len(), 4);
        for (what, s) in &m.speeds {
            assert!(s.is_finite() && *s > 0.01, "{what}: {s}");
        }
        let md = m.markdown();
        assert!(md.contains("pclmulqdq") && md.contains("AES-GMAC"), "{md}");
        assert!(m.speed("TLS 1.3 AES-128-GCM").is_some());
        let cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        assert_eq!(m.tcp_congestion, cc);
        if !cc.is_empty() {
            assert!(m
                .line()
                .ends_with(&format!(", TCP congestion control {cc}")));
        }
    }

    /// Runs recorded before the congestion control was read still load, and their line says
    /// nothing of it.
    #[test]
    fn a_machine_recorded_without_the_congestion_control_still_reads() {
        let mut json = serde_json::to_value(Machine::for_tests()).unwrap();
        json.as_object_mut().unwrap().remove("tcp_congestion");
        let m: Machine = serde_json::from_value(json).unwrap();
        assert_eq!(m.tcp_congestion, "");
        assert!(m.line().ends_with("Linux 6"), "{}", m.line());
        assert!(Machine::for_tests()
            .line()
            .ends_with("Linux 6, TCP congestion control cubic"));
    }
}
