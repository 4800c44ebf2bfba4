//! How fast this machine protects bytes: measured in-process in a few milliseconds, cached per
//! machine.
//!
//! Whether the sieve pays, and which cleartext MAC is cheapest, depend on the CPU's instructions
//! (docs/DESIGN.md §3.5, §4): with AES and carry-less multiply, AES-GCM runs at ~10 GB/s
//! and GMAC at ~25; without them, GHASH runs in software and a MAC built on the vector unit's
//! integer multiplies (NH-Poly1305) or its additions and rotations (keyed BLAKE3) is several
//! times faster. So each end measures, rather than assumes:
//!
//! - the TLS 1.3 suites' seal speed on 16 KiB records (the record size rustls writes), with the
//!   same library rustls uses (aws-lc);
//! - each cleartext MAC ([`MacAlg`]) on [`MAC_BLOCK`] units, as the transfer tags them;
//! - a memory copy of a buffer larger than the caches, what every byte costs at least once more
//!   per copy on its way through sockets and files;
//! - the marks scan (`sieve_core::marks`) over x-P text, one thread.
//!
//! A measurement takes a few milliseconds (tens where AES is emulated in software) and is cached
//! in `$XDG_CACHE_HOME/sieve/calibration.json` (`~/.cache/sieve/...`), keyed by the CPU model, its
//! flags that matter here, and the value of `OPENSSL_ia32cap`, which aws-lc reads to mask CPU
//! features: a masked run (the laboratory's emulation of a device without AES instructions) gets
//! an entry of its own. The cache is an optimisation: when it cannot be read or written, the
//! speeds are measured again and the problem is logged, nothing fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use aws_lc_rs::aead::{
    Aad, Algorithm, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305,
};
use serde::{Deserialize, Serialize};
use sieve_core::cost::{CostModel, Host, Overheads, Speeds};
use sieve_core::mac::{MacAlg, MacPreference};
use sieve_core::marks::{parse_all, MarkConfig};

use crate::mac::{PlainMac, MAC_BLOCK};
use crate::tls::Cipher;

/// Bumped whenever what is measured, or how, changes: older cache entries are then ignored.
pub const CALIBRATION_VERSION: u32 = 3;

/// The CPU flags that change the speeds measured here (x86 names as `/proc/cpuinfo` gives them;
/// ARM's `aes` and `pmull` likewise).
const FLAGS: &[&str] = &[
    "aes",
    "pclmulqdq",
    "vaes",
    "vpclmulqdq",
    "avx",
    "avx2",
    "avx512f",
    "avx512vl",
    "sse4_1",
    "ssse3",
    "pmull",
    "asimd",
];

/// What a cached calibration is valid for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineKey {
    /// The CPU model, from `/proc/cpuinfo`.
    pub cpu: String,
    /// Which of the flags that matter (see the module documentation) the CPU has.
    pub flags: Vec<String>,
    /// `OPENSSL_ia32cap` as set for this process (`None`: not set; an empty value masks every
    /// feature, which is not the same as unset).
    pub ia32cap: Option<String>,
    /// [`CALIBRATION_VERSION`] of the measurement.
    pub version: u32,
}

impl MachineKey {
    /// This process's machine.
    pub fn current() -> MachineKey {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        MachineKey::from_cpuinfo(&info, std::env::var("OPENSSL_ia32cap").ok())
    }

    /// The key for a `/proc/cpuinfo` text and an `OPENSSL_ia32cap` value.
    pub(crate) fn from_cpuinfo(cpuinfo: &str, ia32cap: Option<String>) -> MachineKey {
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.split(':').next().map(str::trim) == Some(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let cpu = field("model name")
            .or_else(|| field("CPU part").map(|p| format!("CPU part {p}")))
            .unwrap_or_else(|| "unknown CPU".into());
        let have: Vec<&str> = field("flags")
            .or_else(|| field("Features"))
            .unwrap_or_default()
            .split_whitespace()
            .map(|f| FLAGS.iter().find(|&&k| k == f).copied().unwrap_or(""))
            .filter(|f| !f.is_empty())
            .collect();
        let mut flags: Vec<String> = have.into_iter().map(String::from).collect();
        flags.sort();
        flags.dedup();
        MachineKey {
            cpu,
            flags,
            ia32cap,
            version: CALIBRATION_VERSION,
        }
    }

    /// Whether the CPU says it has AES and carry-less multiply instructions (x86 or ARM names).
    pub fn has_aes_clmul(&self) -> bool {
        let has = |f: &str| self.flags.iter().any(|g| g == f);
        has("aes") && (has("pclmulqdq") || has("pmull"))
    }
}

/// The speeds of one machine, in GB/s (10⁹ bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Which machine the speeds are of (a cached calibration is used only on the same one).
    pub machine: MachineKey,
    /// TLS 1.3 suites by their command-line name ([`Cipher`]): seal speed of 16 KiB records.
    pub suites: BTreeMap<String, f64>,
    /// Cleartext MACs by name ([`MacAlg::name`]): tags of 256 KiB units.
    pub macs: BTreeMap<String, f64>,
    /// A copy of a buffer larger than the caches.
    pub memcpy: f64,
    /// The marks scan over x-P text (P = 0.1), one thread.
    pub scan: f64,
    /// How long the measurement took, in milliseconds.
    pub took_ms: f64,
}

impl Calibration {
    /// Measure this machine now (no cache).
    pub fn measure() -> Calibration {
        let t = Instant::now();
        let suites = Cipher::ALL
            .iter()
            .map(|&c| (c.to_string(), aead_speed(aead_of(c), 1 << 20)))
            .collect();
        let macs = MacAlg::ALL
            .iter()
            .map(|&a| (a.name().to_string(), mac_speed(a, 1 << 20)))
            .collect();
        let memcpy = memcpy_speed(16 << 20);
        let scan = scan_speed(16 << 20);
        Calibration {
            machine: MachineKey::current(),
            suites,
            macs,
            memcpy,
            scan,
            took_ms: t.elapsed().as_secs_f64() * 1e3,
        }
    }

    /// This machine's calibration from the cache at `path`, or measured now and added to it.
    pub fn cached_at(path: &Path) -> Calibration {
        let key = MachineKey::current();
        let mut cache = match Cache::read(path) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("calibration cache {} not used: {e:#}", path.display());
                Cache::default()
            }
        };
        if let Some(c) = cache.entries.iter().find(|c| c.machine == key) {
            return c.clone();
        }
        let c = Calibration::measure();
        cache
            .entries
            .retain(|e| e.machine.version == CALIBRATION_VERSION);
        cache.entries.push(c.clone());
        if let Err(e) = cache.write(path) {
            tracing::info!(
                "cannot keep the calibration in {} (it will be measured again next time): {e:#}",
                path.display()
            );
        }
        c
    }

    /// This machine's calibration if the default cache holds one; never measures (for callers
    /// that can do without, such as a sender ordering the MACs it offers).
    pub fn cached_if_any() -> Option<Calibration> {
        let key = MachineKey::current();
        Cache::read(&cache_path()?)
            .ok()?
            .entries
            .into_iter()
            .find(|c| c.machine == key)
    }

    /// This machine's calibration from the default cache ([`cache_path`]), or measured now.
    pub fn cached() -> Calibration {
        match cache_path() {
            Some(p) => Calibration::cached_at(&p),
            None => Calibration::measure(),
        }
    }

    /// Seal speed of a suite, GB/s.
    pub fn suite(&self, c: Cipher) -> Option<f64> {
        self.suites.get(&c.to_string()).copied()
    }

    /// The suite this machine seals fastest, by measurement. The order a sender offers the
    /// suites in follows aws-lc's own hardware check instead ([`crate::tls::preferred_ciphers`]),
    /// which is free where this needs the calibration read before channel 0's handshake
    /// (`tests/calibrate.rs` of the command line checks that the two agree, masked and not).
    pub fn fastest_suite(&self) -> Cipher {
        Cipher::ALL
            .into_iter()
            .filter(|&c| self.suite(c).is_some_and(f64::is_finite))
            .max_by(|&a, &b| {
                let (x, y) = (self.suite(a).unwrap_or(0.0), self.suite(b).unwrap_or(0.0));
                x.total_cmp(&y)
            })
            .unwrap_or_default()
    }

    /// Speed of a MAC, GB/s.
    pub fn mac(&self, a: MacAlg) -> Option<f64> {
        self.macs.get(a.name()).copied()
    }

    /// The cost model's speeds ([`sieve_core::cost`]) for a session that seals with `cipher`
    /// and tags with `mac`, scanning marks on `scan_threads` threads. A sender decides before
    /// the receiver has chosen the MAC, so it passes its own first choice; the receiver's CPU
    /// is taken to be like its own.
    pub fn speeds(&self, cipher: Cipher, mac: MacAlg, scan_threads: usize) -> Speeds {
        let or_nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        Speeds {
            seal: or_nan(self.suite(cipher)),
            mac: or_nan(self.mac(mac)),
            scan: self.scan * scan_threads.max(1) as f64,
            copy: self.memcpy,
        }
    }

    /// The cost model of this machine for `cipher` and `mac` (see [`Calibration::speeds`]),
    /// with the overheads measured for it ([`Overheads::MEASURED`]) and `host`.
    pub(crate) fn cost_model(&self, cipher: Cipher, mac: MacAlg, host: Host) -> CostModel {
        CostModel {
            speeds: self.speeds(cipher, mac, host.cores.max(1.0) as usize),
            host,
            overheads: Overheads::MEASURED,
        }
    }

    /// The MACs fastest first: what a sender offers ([`sieve_core::mac::MacOffer::from_preference`])
    /// and what a receiver chooses by ([`sieve_core::mac::negotiate`]).
    pub fn mac_preference(&self) -> MacPreference {
        let speeds: Vec<(MacAlg, f64)> = MacAlg::ALL
            .iter()
            .filter_map(|&a| self.mac(a).map(|s| (a, s)))
            .collect();
        MacPreference::from_speeds(&speeds)
    }
}

/// Where a transfer to `peer` runs, for the cost model: this machine's cores, shared with the
/// receiver when `peer` is a loopback address (both ends on this machine).
pub fn host_for(peer: &std::net::SocketAddr) -> Host {
    Host {
        cores: crate::cpu::cores() as f64,
        shared: peer.ip().is_loopback(),
    }
}

/// Where the calibration cache lives: `$XDG_CACHE_HOME/sieve/calibration.json`, else
/// `$HOME/.cache/sieve/calibration.json`; `None` without either. A build without optimisations
/// (a debug build, as tests run) measures its own slower code, so it keeps its figures in
/// `calibration-debug.json`, apart from those a release build decides by.
pub fn cache_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let file = if cfg!(debug_assertions) {
        "calibration-debug.json"
    } else {
        "calibration.json"
    };
    Some(base.join("sieve").join(file))
}

/// The cache file: one entry per machine key.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cache {
    entries: Vec<Calibration>,
}

impl Cache {
    fn read(path: &Path) -> anyhow::Result<Cache> {
        match crate::cache::read_private(path) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Cache::default()),
            Err(e) => Err(e.into()),
        }
    }

    /// Written whole and renamed ([`crate::cache::write_private`]), so that two processes
    /// calibrating at once never leave a torn file (the last one's entries win).
    fn write(&self, path: &Path) -> anyhow::Result<()> {
        crate::cache::write_private(path, &serde_json::to_vec_pretty(self)?)
    }
}

fn aead_of(c: Cipher) -> &'static Algorithm {
    match c {
        Cipher::Aes128Gcm => &AES_128_GCM,
        Cipher::Aes256Gcm => &AES_256_GCM,
        Cipher::Chacha20 => &CHACHA20_POLY1305,
    }
}

/// Passes per measurement; the fastest counts (the others met interference).
const PASSES: usize = 3;

/// Sealing `bytes` in 16 KiB records, GB/s.
fn aead_speed(alg: &'static Algorithm, bytes: usize) -> f64 {
    let Ok(key) = UnboundKey::new(alg, &vec![7u8; alg.key_len()]) else {
        return f64::NAN;
    };
    let key = LessSafeKey::new(key);
    let mut record = vec![0x5au8; 16 << 10];
    let mut seq = 0u64;
    best_of(bytes, || {
        for _ in 0..bytes / record.len() {
            let mut n = [0u8; 12];
            n[4..].copy_from_slice(&seq.to_be_bytes());
            seq += 1;
            let tag = key.seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(n),
                Aad::empty(),
                &mut record,
            );
            std::hint::black_box(&tag);
        }
    })
}

/// Tagging `bytes` in [`MAC_BLOCK`] units, GB/s.
fn mac_speed(alg: MacAlg, bytes: usize) -> f64 {
    let mac = PlainMac::derive_for(alg, &[3; 32], &[4; 16]);
    let unit = vec![0x5au8; MAC_BLOCK as usize];
    let mut at = 0u64;
    best_of(bytes, || {
        for _ in 0..bytes / unit.len() {
            // A failure would only show as speed; tagging does not fail in practice.
            let _ = std::hint::black_box(mac.tag(0, at, &unit));
            at += MAC_BLOCK;
        }
    })
}

/// Copying `bytes` between two buffers that do not fit the caches, GB/s.
fn memcpy_speed(bytes: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut copy = || {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
    };
    // The first passes over freshly allocated buffers run at a fraction of the steady speed
    // (on the Intel Xeon model 207: 1.5, 5.9 and 6.8 GB/s, then 11.4-11.6 from the fourth pass
    // on), which the three timed passes alone took for the machine's copy speed.
    for _ in 0..WARM_UP_PASSES {
        copy();
    }
    best_of(bytes, copy)
}

/// Untimed passes before a copy is measured.
const WARM_UP_PASSES: usize = 3;

/// The marks scan of about `bytes` of x-P text at P = 0.1, one thread, GB/s. The text is larger
/// than the caches, as a document is: the scan of a document in the page cache runs at the speed
/// memory delivers it, several times slower than over a buffer in cache.
fn scan_speed(bytes: usize) -> f64 {
    let (block, _) = sieve_core::gen::block(1 << 20, 0.1, 1);
    // Whole blocks only, so that the marks balance.
    let mut text = Vec::with_capacity(bytes + block.len());
    while text.len() < bytes {
        text.extend_from_slice(&block);
    }
    let cfg = MarkConfig::default();
    best_of(text.len(), || {
        let _ = std::hint::black_box(parse_all(&cfg, std::hint::black_box(&text)));
    })
}

fn best_of(bytes: usize, mut pass: impl FnMut()) -> f64 {
    (0..PASSES)
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

    #[test]
    fn keys_read_cpuinfo_and_the_mask() {
        let info = "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse4_1 aes avx2 pclmulqdq xsave\n";
        let k = MachineKey::from_cpuinfo(info, None);
        assert_eq!(k.cpu, "Some CPU");
        assert_eq!(k.flags, ["aes", "avx2", "pclmulqdq", "sse4_1"]);
        assert!(k.has_aes_clmul());
        let masked = MachineKey::from_cpuinfo(info, Some("~0x200000200000000".into()));
        let none = MachineKey::from_cpuinfo(info, Some(String::new()));
        assert!(
            k != masked && masked != none && k != none,
            "each mask has its own entry"
        );
        let arm = "CPU part\t: 0xd08\nFeatures\t: fp asimd evtstrm crc32\n";
        let a = MachineKey::from_cpuinfo(arm, None);
        assert_eq!(
            (a.cpu.as_str(), a.flags.as_slice()),
            ("CPU part 0xd08", &["asimd".to_string()][..])
        );
        assert!(!a.has_aes_clmul());
    }

    #[test]
    fn loopback_peers_share_the_host() {
        assert!(host_for(&"127.0.0.1:7443".parse().unwrap()).shared);
        assert!(host_for(&"[::1]:7443".parse().unwrap()).shared);
        let far = host_for(&"192.0.2.1:7443".parse().unwrap());
        assert!(!far.shared && far.cores >= 1.0);
    }

    #[test]
    fn a_measurement_gives_every_speed() {
        let c = Calibration::measure();
        assert_eq!(c.suites.len(), Cipher::ALL.len());
        assert_eq!(c.macs.len(), MacAlg::COUNT);
        for (what, s) in c.suites.iter().chain(&c.macs) {
            assert!(s.is_finite() && *s > 0.0, "{what}: {s}");
        }
        assert!(c.memcpy > 0.0 && c.scan > 0.0, "{c:?}");
        assert_eq!(c.mac_preference().ranked().len(), MacAlg::COUNT);
        let best = c.fastest_suite();
        assert!(Cipher::ALL.iter().all(|&o| c.suite(o) <= c.suite(best)));
        assert_eq!(c.machine, MachineKey::current());
    }

    /// The second call reads the cache; another machine's entry (another mask) is kept beside
    /// it; a torn cache is measured over, not fatal.
    #[test]
    fn the_cache_is_per_machine_and_survives_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sieve").join("calibration.json");
        let first = Calibration::cached_at(&path);
        let mut other = first.clone();
        other.machine.ia32cap = Some("~0x200000200000000".into());
        other.macs.insert("aes-gmac".into(), 0.5);
        let mut cache = Cache::read(&path).unwrap();
        cache.entries.push(other.clone());
        cache.write(&path).unwrap();
        // Read back, not measured again (a new measurement would differ in every figure).
        let back = Calibration::cached_at(&path);
        assert_eq!(back.machine, first.machine);
        assert!(
            (back.took_ms - first.took_ms).abs() <= 1e-9 * first.took_ms,
            "{back:?}"
        );
        assert!(
            (back.memcpy - first.memcpy).abs() <= 1e-9 * first.memcpy,
            "{back:?}"
        );
        let back = Cache::read(&path).unwrap();
        assert_eq!(back.entries.len(), 2);
        assert!(back
            .entries
            .iter()
            .any(|e| e.machine == other.machine && e.mac(MacAlg::Gmac) == Some(0.5)));
        std::fs::write(&path, b"{ not json").unwrap();
        let again = Calibration::cached_at(&path);
        assert_eq!(again.machine, first.machine);
        assert_ne!(again.took_ms, first.took_ms, "measured anew");
        assert_eq!(Cache::read(&path).unwrap().entries.len(), 1);
    }

    /// Links planted in the cache folder, at the temporary name an earlier version used and at
    /// the cache's own name, are never written through: the file they point to keeps its
    /// content; the folder ends 0700 and the file 0600.
    #[test]
    fn the_cache_is_private_and_written_through_no_link() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        // A folder as an earlier version left it (0755), links planted in it.
        let dir = base.path().join("old").join("sieve");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join("calibration.json");
        let tmp = dir.join(format!(".calibration.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let written = Cache::default().write(&path);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        written.unwrap();
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!((mode(&dir), mode(&path)), (0o700, 0o600));
        assert!(Cache::read(&path).unwrap().entries.is_empty());
        // A folder created by the write itself.
        let fresh = base
            .path()
            .join("new")
            .join("sieve")
            .join("calibration.json");
        Cache::default().write(&fresh).unwrap();
        assert_eq!(
            (mode(fresh.parent().unwrap()), mode(&fresh)),
            (0o700, 0o600)
        );
    }
}
