//! `sieve calibrate` honours `OPENSSL_ia32cap`, the mask aws-lc reads once per process: with AES-NI
//! and carry-less multiply masked, GMAC and AES-GCM run in software, measurably slower, the MAC
//! preference no longer puts GMAC first, and the masked figures are cached apart from the
//! unmasked ones; the TLS suite offered first follows (ChaCha20-Poly1305 when masked).

use std::path::Path;
use std::process::Command;

const SIEVE: &str = env!("CARGO_BIN_EXE_sieve");
/// AES-NI (bit 57 of the first word) and PCLMULQDQ (bit 33) off, and after the colon VAES and
/// VPCLMULQDQ (bits 41 and 42 of the leaf-7 word): without the latter aws-lc keeps hashing GCM's
/// associated data, so GMAC, with VPCLMULQDQ where the CPU has it.
const NO_AES: &str = "~0x200000200000000:~0x60000000000";
/// How much slower masked GMAC and AES-128-GCM must measure than unmasked. Measured on an AMD
/// EPYC (AES-NI, VAES, VPCLMULQDQ, release build): GMAC 23.7 against 0.50 GB/s (47×),
/// AES-128-GCM 11.4 against 0.25 (45×); 3 leaves room for a busy machine and a debug build,
/// while no unmasked run comes near it.
const MIN_FACTOR: f64 = 3.0;

fn calibrate(cache: &Path, mask: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::new(SIEVE);
    cmd.args(["calibrate", "--fresh", "--json"])
        .env("XDG_CACHE_HOME", cache);
    match mask {
        Some(m) => cmd.env("OPENSSL_ia32cap", m),
        None => cmd.env_remove("OPENSSL_ia32cap"),
    };
    let out = cmd.output().expect("sieve runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn speed(v: &serde_json::Value, group: &str, name: &str) -> f64 {
    v[group][name].as_f64().unwrap_or(f64::NAN)
}

#[test]
fn masks_are_honoured_and_cached_apart() {
    let cache = tempfile::tempdir().unwrap();
    let plain = calibrate(cache.path(), None);
    let flags: Vec<&str> = plain["machine"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    if !(flags.contains(&"aes") && flags.contains(&"pclmulqdq")) {
        eprintln!("skipped: this CPU has no AES-NI and PCLMULQDQ to mask (flags: {flags:?})");
        return;
    }
    let masked = calibrate(cache.path(), Some(NO_AES));
    assert_eq!(masked["machine"]["ia32cap"], NO_AES);
    for (group, name) in [("macs", "aes-gmac"), ("suites", "aes128gcm")] {
        let (fast, slow) = (speed(&plain, group, name), speed(&masked, group, name));
        assert!(
            fast > slow * MIN_FACTOR,
            "{name}: {fast:.2} GB/s unmasked against {slow:.2} masked"
        );
    }
    // The suite offered first is the one measured fastest: AES-128-GCM with the instructions,
    // ChaCha20-Poly1305 without them (4 to 8 times AES-GCM's speed in software).
    assert_eq!(plain["hardware_aes"], true, "{plain}");
    assert_eq!(plain["cipher_preference"][0], "aes128gcm", "{plain}");
    assert_eq!(masked["hardware_aes"], false, "{masked}");
    assert_eq!(masked["cipher_preference"][0], "chacha20", "{masked}");
    assert!(
        speed(&masked, "suites", "chacha20") > speed(&masked, "suites", "aes128gcm") * MIN_FACTOR,
        "masked: {}",
        masked["suites"]
    );
    assert_ne!(
        masked["mac_preference"][0], "aes-gmac",
        "without carry-less multiply GMAC is not the fastest: {}",
        masked["macs"]
    );
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sieve_transport_cache_file(cache.path())).unwrap())
            .unwrap();
    let caps: Vec<&serde_json::Value> = file["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["machine"]["ia32cap"])
        .collect();
    assert_eq!(caps.len(), 2, "{file}");
    assert!(caps.contains(&&serde_json::Value::Null) && caps.contains(&&serde_json::json!(NO_AES)));
}

/// The cache file the binary under test writes beneath `XDG_CACHE_HOME` (a debug build keeps
/// its own, see `sieve_transport::calibrate::cache_path`).
fn sieve_transport_cache_file(base: &std::path::Path) -> std::path::PathBuf {
    let name = if cfg!(debug_assertions) {
        "calibration-debug.json"
    } else {
        "calibration.json"
    };
    base.join("sieve").join(name)
}

/// `sieve calibrate --fresh` with a link planted under the cache's name (a shared
/// `XDG_CACHE_HOME`): the file the link points to keeps its content, the cache folder ends 0700
/// and the cache file 0600.
#[test]
fn a_link_in_the_cache_is_never_written_through() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let cache = tempfile::tempdir().unwrap();
    let victim = cache.path().join("victim.json");
    let before = r#"{"entries":[]}"#;
    std::fs::write(&victim, before).unwrap();
    let file = sieve_transport_cache_file(cache.path());
    let dir = file.parent().unwrap();
    std::fs::create_dir(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&victim, &file).unwrap();
    calibrate(cache.path(), None);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), before);
    assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
    assert_eq!((mode(dir), mode(&file)), (0o700, 0o600));
}
