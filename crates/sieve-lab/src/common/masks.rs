//! Emulated devices without AES instructions: both ends started with `OPENSSL_ia32cap`, which
//! aws-lc (rustls's provider here, and the cleartext MAC's) reads when a process starts and
//! which masks the CPU features it would otherwise use. NOAES, PARALLEL and CAPACITY share them.
//!
//! This is an emulation of a device, not the device: the masked code paths are aws-lc's own
//! portable and vector fallbacks on this processor, so the ratio of a suite's speed to the speed
//! of moving bytes is what changes, not the core's clock or its memory.

use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::run::Tools;

/// The variable aws-lc and OpenSSL read.
const VAR: &str = "OPENSSL_ia32cap";

/// A set of CPU features the sieve's processes may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mask {
    /// Name in the data and in file names: "unmasked", "no-aes", "portable".
    pub(crate) name: &'static str,
    /// The value of `OPENSSL_ia32cap`; `None` leaves it unset.
    pub(crate) value: Option<&'static str>,
    /// What it emulates, for reports.
    pub(crate) what: &'static str,
}

/// Every feature the CPU has.
pub(crate) const UNMASKED: Mask = Mask {
    name: "unmasked",
    value: None,
    what: "no mask: every instruction this CPU has (AES-NI, carry-less multiply, VAES, AVX-512)",
};

/// AES-NI and carry-less multiply masked (bits 57 and 33 of the capability vector, cleared by
/// `~0x200000200000000`): AES-GCM falls back to constant-time software, while aws-lc's vector
/// ChaCha20-Poly1305 stays fast. A device with a modern vector unit but no AES instructions.
/// (Whether the cleartext MAC slows too is measured, not assumed: see [`mac_note`].)
pub(crate) const NO_AES: Mask = Mask {
    name: "no-aes",
    value: Some("~0x200000200000000"),
    what: "`OPENSSL_ia32cap='~0x200000200000000'`: AES-NI and carry-less multiply masked, so \
           AES-GCM runs in constant-time software while ChaCha20-Poly1305 keeps its vector code",
};

/// Every feature off (an empty capability vector): portable code for every suite, closer to a
/// small ARM core without crypto extensions (the Raspberry Pi 4's Cortex-A72).
pub(crate) const PORTABLE: Mask = Mask {
    name: "portable",
    value: Some(""),
    what: "`OPENSSL_ia32cap=` (empty): every CPU feature off, portable code for every suite, \
           closer to a small ARM core without crypto extensions",
};

impl Mask {
    /// `cmd` with the mask in its environment (or the variable removed, unmasked). Apply it
    /// before wrapping for a namespace or cgroup: the wrappers carry the environment over.
    pub(crate) fn apply(&self, mut cmd: Command) -> Command {
        match self.value {
            Some(v) => cmd.env(VAR, v),
            None => cmd.env_remove(VAR),
        };
        cmd
    }
}

/// One speed measured under a mask: a row of `speeds.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Speed {
    pub(crate) mask: String,
    pub(crate) what: String,
    pub(crate) gb_per_s: f64,
}

/// The speeds of the suites and the cleartext MAC under `mask`, measured by `sieve-lab speeds`
/// in a process started with it.
pub(crate) fn speeds(tools: &Tools, mask: &Mask, quick: bool) -> Result<Vec<Speed>> {
    let mut cmd = Command::new(&tools.lab);
    cmd.arg("speeds");
    if quick {
        cmd.arg("--quick");
    }
    let out = mask
        .apply(cmd)
        .output()
        .context("cannot run `sieve-lab speeds`")?;
    if !out.status.success() {
        bail!(
            "`sieve-lab speeds` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let list: Vec<(String, f64)> = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "unexpected output of `sieve-lab speeds`: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    Ok(list
        .into_iter()
        .map(|(what, gb_per_s)| Speed {
            mask: mask.name.into(),
            what,
            gb_per_s,
        })
        .collect())
}

/// A markdown table of the speeds, one column per mask present.
pub(crate) fn speeds_table(speeds: &[Speed]) -> String {
    if speeds.is_empty() {
        return "(no speeds were measured)\n".into();
    }
    let mut masks: Vec<&str> = Vec::new();
    let mut whats: Vec<&str> = Vec::new();
    for s in speeds {
        if !masks.contains(&s.mask.as_str()) {
            masks.push(&s.mask);
        }
        if !whats.contains(&s.what.as_str()) {
            whats.push(&s.what);
        }
    }
    let mut t = format!(
        "| GB/s on one core | {} |\n|---|{}\n",
        masks.join(" | "),
        "---|".repeat(masks.len())
    );
    for w in whats {
        let cells: Vec<String> = masks
            .iter()
            .map(|m| {
                speeds
                    .iter()
                    .find(|s| s.mask == *m && s.what == w)
                    .map_or("–".into(), |s| format!("{:.2}", s.gb_per_s))
            })
            .collect();
        t.push_str(&format!("| {w} | {} |\n", cells.join(" | ")));
    }
    t
}

/// The speed of `what` (a prefix) under `mask`, if measured.
pub(crate) fn speed_of(speeds: &[Speed], mask: &str, what: &str) -> Option<f64> {
    speeds
        .iter()
        .find(|s| s.mask == mask && s.what.starts_with(what))
        .map(|s| s.gb_per_s)
}

/// Whether `mask` slowed the cleartext MAC, in a sentence, from the speeds measured. The masks
/// clear feature flags of CPUID leaf 1 (AES-NI, carry-less multiply); code that keeps its speed
/// under them runs on instructions they do not reach (the vector extensions of leaf 7), and then
/// the emulated device is kinder to the sieve's MAC than a real one without those instructions.
pub(crate) fn mac_note(speeds: &[Speed], mask: &str) -> String {
    let mac = |m: &str| speed_of(speeds, m, "cleartext MAC");
    let (Some(masked), Some(full)) = (mac(mask), mac(UNMASKED.name)) else {
        return String::new();
    };
    if mask == UNMASKED.name {
        String::new()
    } else if masked >= 0.5 * full {
        format!(
            "Under this mask the cleartext MAC kept {:.0} % of its unmasked speed ({masked:.2} \
             against {full:.2} GB/s): the mask does not reach the instructions it runs on, so \
             this emulation spares the sieve's MAC what a device without carry-less multiply \
             would cost it, and favours the sieve.",
            masked / full * 100.0
        )
    } else {
        format!(
            "Under this mask the cleartext MAC ran at {masked:.2} GB/s against {full:.2} \
             unmasked, as on a device without carry-less multiply."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_set_or_remove_the_variable() {
        let envs = |m: Mask| -> Vec<(String, Option<String>)> {
            m.apply(Command::new("true"))
                .get_envs()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.map(|v| v.to_string_lossy().into_owned()),
                    )
                })
                .collect()
        };
        assert_eq!(envs(UNMASKED), [(VAR.to_string(), None)]);
        assert_eq!(
            envs(NO_AES),
            [(VAR.to_string(), Some("~0x200000200000000".to_string()))]
        );
        assert_eq!(envs(PORTABLE), [(VAR.to_string(), Some(String::new()))]);
        let t = speeds_table(&[
            Speed {
                mask: "no-aes".into(),
                what: "AES".into(),
                gb_per_s: 0.28,
            },
            Speed {
                mask: "portable".into(),
                what: "AES".into(),
                gb_per_s: 0.1,
            },
        ]);
        assert!(t.contains("| AES | 0.28 | 0.10 |"), "{t}");
        let mac = |mask: &str, v: f64| Speed {
            mask: mask.into(),
            what: "cleartext MAC (AES-GMAC)".into(),
            gb_per_s: v,
        };
        let kept = [mac("unmasked", 20.0), mac("no-aes", 19.0)];
        assert!(mac_note(&kept, "no-aes").contains("favours the sieve"));
        let slowed = [mac("unmasked", 20.0), mac("no-aes", 1.0)];
        assert!(mac_note(&slowed, "no-aes").contains("as on a device without"));
        assert_eq!(mac_note(&slowed, "unmasked"), "");
    }
}
