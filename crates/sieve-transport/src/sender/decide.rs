//! `--mode auto`: the sender chooses sieve or secure-only for a session, once its documents are
//! sieved (their sizes and proportions P of classified bytes known) and before it says HELLO.
//!
//! The choice is the cost model's ([`sieve_core::cost`]), fed with this machine's measured
//! speeds ([`Calibration`]), the documents' shapes, where the receiver runs and the path's rate
//! when known. Both modes are safe, so only speed is at stake; the wire knows only the mode
//! chosen ([`Mode`]), never `auto`.
//!
//! Two parts, kept apart so the choice can move into a sans-IO sender unchanged: [`choose`] is
//! pure (speeds, shapes and host in, decision out); [`host_of`] is the one look at the world
//! (name resolution and the local interfaces).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use sieve_core::cost::{DocShape, Host};
use sieve_core::mac::MacAlg;
use sieve_core::message::Mode;
use sieve_core::report::{DecisionReport, PredictedMs};

use crate::calibrate::Calibration;
use crate::tls::Cipher;

/// The mode a user asks for: one of the wire's modes, or `auto` (the sender chooses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendMode {
    /// Chosen per session by the cost model, once the documents are sieved.
    #[default]
    Auto,
    /// This mode, whatever the model would say (the laboratory's comparisons need it).
    Fixed(Mode),
}

impl From<Mode> for SendMode {
    fn from(m: Mode) -> Self {
        SendMode::Fixed(m)
    }
}

impl fmt::Display for SendMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendMode::Auto => "auto",
            SendMode::Fixed(m) => m.name(),
        })
    }
}

impl FromStr for SendMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(SendMode::Auto),
            "sieve" => Ok(SendMode::Fixed(Mode::Sieve)),
            "secure-only" | "secureonly" => Ok(SendMode::Fixed(Mode::SecureOnly)),
            _ => Err(format!(
                "unknown mode '{s}': use auto, sieve or secure-only"
            )),
        }
    }
}

/// The model's choice for a session carrying `docs`, sealed with `cipher` and tagged with `mac`
/// on this machine (`calibration`), the receiver at `host`, over a path of `rate` GB/s (`None`:
/// not known). Pure.
pub fn choose(
    calibration: &Calibration,
    (cipher, mac): (Cipher, MacAlg),
    host: Host,
    docs: &[DocShape],
    rate: Option<f64>,
) -> DecisionReport {
    let d = calibration
        .cost_model(cipher, mac, host)
        .decide_batch(docs, rate);
    DecisionReport {
        chosen: d.mode,
        requested: SendMode::Auto.to_string(),
        predicted_ms: Some(PredictedMs {
            sieve: d.predicted_ms.sieve,
            secure_only: d.predicted_ms.secure_only,
        }),
        reason: d.reason,
    }
}

/// Where the receiver at `to` (`host:port`) runs, as the model needs it: this machine's cores,
/// shared with the receiver when `to` names this machine (a loopback address, or one of this
/// machine's own). A name that does not resolve is taken as another host; connecting reports
/// the problem.
pub async fn host_of(to: &str) -> Host {
    let addrs: Vec<SocketAddr> = match tokio::net::lookup_host(to).await {
        Ok(a) => a.collect(),
        Err(_) => Vec::new(),
    };
    Host {
        cores: crate::cpu::cores() as f64,
        shared: addrs.first().is_some_and(|a| is_local(a.ip())),
    }
}

/// Whether `to` (`host:port`, or a bare host) names this machine without asking a resolver: an
/// address literal of this machine, or `localhost`. Any other name is taken as another host.
pub fn names_this_host(to: &str) -> bool {
    if let Ok(a) = to.parse::<SocketAddr>() {
        return is_local(a.ip());
    }
    let host = to.rsplit_once(':').map_or(to, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => is_local(ip),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// Whether `ip` is this machine: loopback, unspecified (which connects to this machine), or an
/// address one of its interfaces holds (binding to it succeeds only then).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::MachineKey;
    use std::collections::BTreeMap;

    const MB: u64 = 1_000_000;
    const GIB: u64 = 1 << 30;

    /// A calibration with fixed speeds (GB/s), as `sieve calibrate` reports them.
    fn calibration(aes128: f64, gmac: f64) -> Calibration {
        Calibration {
            machine: MachineKey::from_cpuinfo("", None),
            suites: BTreeMap::from([
                (Cipher::Aes128Gcm.to_string(), aes128),
                (Cipher::Aes256Gcm.to_string(), aes128 * 0.8),
                (Cipher::Chacha20.to_string(), 2.0),
            ]),
            macs: BTreeMap::from([(MacAlg::Gmac.name().to_string(), gmac)]),
            memcpy: 8.0,
            scan: 6.0,
            took_ms: 1.0,
        }
    }

    /// A machine with AES instructions (the speeds sieve-core's cost tests take for this
    /// project's machine kind).
    fn aes() -> Calibration {
        calibration(4.5, 20.0)
    }

    /// The same machine without AES instructions: AES-GCM an order of magnitude slower, the
    /// cleartext MAC still several times faster than it.
    fn no_aes() -> Calibration {
        calibration(0.35, 4.0)
    }

    fn shared() -> Host {
        Host {
            cores: 2.0,
            shared: true,
        }
    }

    fn doc(bytes: u64, p: f64, scanned: bool) -> DocShape {
        DocShape {
            bytes,
            classified: (bytes as f64 * p) as u64,
            scanned,
            // An x-P file: five classified parts per MB between cleartext runs.
            segments: 1 + 10 * bytes.div_ceil(1_000_000),
            cleartext_wire: 1.0,
        }
    }

    const SUITE: (Cipher, MacAlg) = (Cipher::Aes128Gcm, MacAlg::Gmac);

    #[test]
    fn a_large_mostly_clear_document_without_aes_goes_through_the_sieve() {
        let d = choose(&no_aes(), SUITE, shared(), &[doc(GIB, 0.1, true)], None);
        assert_eq!(d.chosen, Mode::Sieve, "{d:?}");
        assert_eq!(d.requested, "auto");
        assert!(
            d.predicted_ms.unwrap().sieve < d.predicted_ms.unwrap().secure_only,
            "{d:?}"
        );
        assert!(
            d.summary().starts_with("auto chose sieve ("),
            "{}",
            d.summary()
        );
        // Scanned or given by a ranges file, the same choice.
        let ranged = choose(&no_aes(), SUITE, shared(), &[doc(GIB, 0.1, false)], None);
        assert_eq!(ranged.chosen, Mode::Sieve);
        assert!(ranged.predicted_ms.unwrap().sieve < d.predicted_ms.unwrap().sieve);
    }

    #[test]
    fn a_small_mostly_classified_document_with_aes_goes_secure_only() {
        let d = choose(&aes(), SUITE, shared(), &[doc(MB, 0.9, true)], None);
        assert_eq!(d.chosen, Mode::SecureOnly, "{d:?}");
        assert!(
            d.predicted_ms.unwrap().secure_only < d.predicted_ms.unwrap().sieve,
            "{d:?}"
        );
        let s = d.summary();
        assert!(s.starts_with("auto chose secure-only ("), "{s}");
        assert!(s.contains("for the sieve"), "{s}");
    }

    /// The suite counts: a machine whose AES-GCM is slow but whose ChaCha20 is fast gains less
    /// from the sieve with ChaCha20.
    #[test]
    fn the_negotiated_suite_is_the_one_priced() {
        let docs = [doc(64 * MB, 0.1, false)];
        let slow = choose(&no_aes(), SUITE, shared(), &docs, None);
        let fast = choose(
            &no_aes(),
            (Cipher::Chacha20, MacAlg::Gmac),
            shared(),
            &docs,
            None,
        );
        assert!(fast.predicted_ms.unwrap().secure_only < slow.predicted_ms.unwrap().secure_only);
        assert!(fast.predicted_ms.unwrap().sieve < slow.predicted_ms.unwrap().sieve);
    }

    #[test]
    fn modes_parse_and_print_as_the_command_line_names_them() {
        for (s, m) in [
            ("auto", SendMode::Auto),
            ("sieve", SendMode::Fixed(Mode::Sieve)),
            ("secure-only", SendMode::Fixed(Mode::SecureOnly)),
        ] {
            assert_eq!(s.parse::<SendMode>().unwrap(), m);
            assert_eq!(m.to_string(), s);
        }
        assert_eq!(SendMode::default(), SendMode::Auto);
        assert!("fast"
            .parse::<SendMode>()
            .unwrap_err()
            .contains("auto, sieve or secure-only"));
    }

    #[test]
    fn this_host_is_named_without_a_resolver() {
        for to in [
            "127.0.0.1:7443",
            "127.0.0.1",
            "[::1]:7443",
            "localhost:7443",
            "LOCALHOST",
        ] {
            assert!(names_this_host(to), "{to}");
        }
        for to in [
            "192.0.2.1:7443",
            "192.0.2.1",
            "example.org:7443",
            "receiver",
        ] {
            assert!(!names_this_host(to), "{to}");
        }
    }

    #[tokio::test]
    async fn loopback_and_own_addresses_share_the_host_and_others_do_not() {
        assert!(host_of("127.0.0.1:7443").await.shared);
        assert!(host_of("localhost:7443").await.shared);
        assert!(host_of("0.0.0.0:7443").await.shared);
        // TEST-NET-1 (RFC 5737) is never a local address.
        assert!(!host_of("192.0.2.1:7443").await.shared);
        assert!(!is_local("192.0.2.1".parse().unwrap()));
        assert!(host_of("127.0.0.1:7443").await.cores >= 1.0);
    }
}
