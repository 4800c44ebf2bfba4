//! `sieve calibrate`: how fast this machine protects bytes, as the sender and the receiver
//! measure it to choose the cleartext MAC (and, for `--mode auto`, the mode).

use anyhow::Result;
use sieve_transport::calibrate::{cache_path, Calibration};
use sieve_transport::tls::{hardware_aes, preferred_ciphers};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Measure again instead of reading the cached figures (the new ones replace them).
    #[arg(long)]
    pub fresh: bool,
    /// Print the calibration as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let path = cache_path();
    let c = match (&path, args.fresh) {
        (Some(p), true) => {
            // Drop this machine's entry so the next read measures it.
            forget(p);
            Calibration::cached_at(p)
        }
        (Some(p), false) => Calibration::cached_at(p),
        (None, _) => Calibration::measure(),
    };
    if args.json {
        let mut v = serde_json::to_value(&c)?;
        let pref: Vec<&str> = c
            .mac_preference()
            .ranked()
            .iter()
            .map(|(a, _)| a.name())
            .collect();
        v["mac_preference"] = serde_json::json!(pref);
        v["hardware_aes"] = serde_json::json!(hardware_aes());
        v["cipher_preference"] = serde_json::json!(suites());
        v["cache"] = serde_json::json!(path.map(|p| p.display().to_string()));
        println!("{v}");
        return Ok(());
    }
    let m = &c.machine;
    println!("CPU: {} (flags: {})", m.cpu, m.flags.join(" "));
    match &m.ia32cap {
        Some(v) => println!("OPENSSL_ia32cap: '{v}' (aws-lc masks CPU features accordingly)"),
        None => println!("OPENSSL_ia32cap: not set"),
    }
    println!("measured in {:.1} ms; GB/s:", c.took_ms);
    for (name, s) in &c.suites {
        println!("  TLS 1.3 {name:<18} {s:7.2}  (seal, 16 KiB records)");
    }
    for (name, s) in &c.macs {
        println!("  MAC {name:<22} {s:7.2}  (256 KiB units)");
    }
    println!("  memory copy              {:7.2}", c.memcpy);
    println!("  marks scan (one thread)  {:7.2}", c.scan);
    let pref: Vec<&str> = c
        .mac_preference()
        .ranked()
        .iter()
        .map(|(a, _)| a.name())
        .collect();
    println!("cleartext MAC preference: {}", pref.join(", "));
    println!(
        "TLS suites offered: {} ({})",
        suites().join(", "),
        if hardware_aes() {
            "aws-lc runs AES-GCM in hardware here"
        } else {
            "no AES hardware as aws-lc sees it: ChaCha20-Poly1305 first, and as a receiver \
             taken whenever the sender offers it"
        }
    );
    if let Some(p) = path {
        println!("cached in {}", p.display());
    }
    Ok(())
}

/// The suites a sender offers when `--cipher` is not given, in its order.
fn suites() -> Vec<String> {
    preferred_ciphers(hardware_aes())
        .iter()
        .map(|c| c.to_string())
        .collect()
}

/// Remove this machine's entry from the cache at `path`, keeping the others.
fn forget(path: &std::path::Path) {
    let key = sieve_transport::calibrate::MachineKey::current();
    let Ok(bytes) = sieve_transport::cache::read_private(path) else {
        return;
    };
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        let _ = std::fs::remove_file(path);
        return;
    };
    let Ok(key) = serde_json::to_value(&key) else {
        return;
    };
    if let Some(entries) = v.get_mut("entries").and_then(|e| e.as_array_mut()) {
        entries.retain(|e| e.get("machine") != Some(&key));
    }
    if let Ok(out) = serde_json::to_vec_pretty(&v) {
        // Like every write of the cache: a new private file renamed over the name, never
        // written through a link planted there.
        let _ = sieve_transport::cache::write_private(path, &out);
    }
}
