//! `--mode auto` as the sender drives it: what the choice needs besides the documents (this
//! machine's calibration, where the receiver runs, the path's remembered rate), the choice once
//! they are sieved, and the MACs HELLO offers. The model itself is pure ([`super::decide`], [`sieve_core::cost`]); this file
//! reads files and caches for it.

use anyhow::Result;
use sieve_core::cost::DocShape;
use sieve_core::mac::{MacAlg, MacOffer};
use sieve_core::message::Mode;
use sieve_core::Kind;

use super::decide;
use super::{DecisionReport, SendConfig};
use crate::source::Source;

/// What `--mode auto` needs besides the documents: where the receiver runs, and for a receiver
/// on another host the rate of the path its last session to it measured ([`crate::paths`]).
/// Gathered while the documents are sieved.
pub(super) struct AutoPlace {
    pub(super) host: sieve_core::cost::Host,
    pub(super) path: Option<crate::paths::PathRecord>,
}

/// [`AutoPlace`] and this machine's calibration (cached; measured in a few milliseconds the
/// first time), read on the thread that sieves the documents.
pub(super) struct AutoContext {
    pub(super) place: AutoPlace,
    pub(super) calibration: crate::calibrate::Calibration,
}

/// Owns what it reads of the configuration (the receiver's address, the path memory), so that
/// it can run as a task of its own while the documents are prepared.
pub(super) async fn auto_place(to: String, path_memory: Option<std::path::PathBuf>) -> AutoPlace {
    let host = decide::host_of(&to).await;
    let path = match (path_memory, host.shared) {
        (Some(file), false) => {
            tokio::task::spawn_blocking(move || crate::paths::recall(&file, &to))
                .await
                .ok()
                .flatten()
        }
        _ => None,
    };
    AutoPlace { host, path }
}

/// `--mode auto`'s choice for `sources`, sieved as the sieve sends them, in `context`: with the
/// suite `cfg` asks for, the MAC HELLO offers, and, where a link may bind, what compressing a
/// sample of the cleartext leaves. Returns that share too, when it was measured (`None`
/// otherwise), for the compressor to choose a kept level by without compressing the sample
/// again.
///
/// The documents are sieved by now: their marks scan is spent whichever mode is chosen, so the
/// model prices what each mode has still to do (a near tie before the scan becomes the sieve's
/// after it: on loopback, 1 GiB at P = 0.5 took 306 ms in the sieve against 320 secure-only).
pub(super) fn choose_mode(
    cfg: &SendConfig,
    sources: &[Source],
    context: AutoContext,
    macs: MacOffer,
) -> Result<(DecisionReport, Option<f64>)> {
    let AutoContext {
        place: AutoPlace { host, path },
        calibration,
    } = context;
    // The share counts only where a link may bind: on a remembered path to a receiver that
    // took compressed cleartext, or to another host not measured yet (whose receiver is taken
    // to accept it, as every receiver of this version does unless told not to).
    let may_compress = cfg.compress != sieve_core::compress::Compression::Off
        && match &path {
            Some(p) => p.compresses != Some(false),
            None => !host.shared,
        };
    let sample_share = if may_compress {
        tokio::task::block_in_place(|| stream_sample(sources, Kind::Plain))
            .map(|s| crate::paths::cleartext_share(&s))
    } else {
        None
    };
    let share = sample_share.unwrap_or(1.0);
    // The marks scan of a collected document is spent already, whichever mode is chosen; a
    // document only counted has its runs still to collect if the sieve is chosen.
    let docs: Vec<sieve_core::cost::DocShape> = sources
        .iter()
        .map(|s| sieve_core::cost::DocShape {
            cleartext_wire: share,
            ..s.sieve_shape()
        })
        .collect();
    let cipher = priced_cipher(&cfg.tls, path.as_ref());
    let decision = decide::choose(
        &calibration,
        (cipher, priced_mac(&macs)),
        host,
        &docs,
        path.map(|p| p.rate_gbps),
    );
    Ok((decision, sample_share))
}

/// The suite the model prices: the one this sender offers first, unless it offers several and
/// the last session to this receiver agreed on another of them. A receiver without AES hardware
/// takes ChaCha20-Poly1305 where this sender lists AES-128-GCM first
/// ([`crate::tls::ServerTls::config`]), and there secure-only costs several times what
/// AES-128-GCM would.
fn priced_cipher(
    tls: &rustls::ClientConfig,
    path: Option<&crate::paths::PathRecord>,
) -> crate::tls::Cipher {
    let offered = crate::tls::Cipher::offered(tls);
    let agreed = path
        .and_then(|p| p.cipher.as_deref())
        .and_then(crate::tls::Cipher::of_suite_name)
        .filter(|c| offered.contains(c));
    agreed
        .or_else(|| offered.first().copied())
        .unwrap_or_default()
}

/// Whether `--mode auto` would send a document of `shape` secure-only to `cfg.to` on a machine
/// of calibration `c`, judged before anything else is known of it, as
/// [`crate::source::Source::prepare_counting`] asks of a dense document's first bytes; `None`
/// where that guess is not made: a receiver on another host, where what compressing the
/// cleartext saves (which needs the collected runs to measure) may decide.
pub(super) fn secure_only_likely(
    cfg: &SendConfig,
) -> Option<impl Fn(&crate::calibrate::Calibration, &DocShape) -> bool + Send> {
    if !decide::names_this_host(&cfg.to) {
        return None;
    }
    let cipher = crate::tls::Cipher::of_config(&cfg.tls).unwrap_or_default();
    Some(move |c: &crate::calibrate::Calibration, shape: &DocShape| {
        let mac = priced_mac(&mac_offer(Some(c)));
        let host = sieve_core::cost::Host {
            cores: crate::cpu::cores() as f64,
            shared: true,
        };
        decide::choose(c, (cipher, mac), host, std::slice::from_ref(shape), None).chosen
            == Mode::SecureOnly
    })
}

/// The MAC the model prices for an offer: the receiver chooses among it, and on a machine like
/// this one chooses the first.
fn priced_mac(macs: &MacOffer) -> MacAlg {
    macs.algs().first().copied().unwrap_or(MacAlg::Gmac)
}

/// The first [`crate::paths::SAMPLE_LEN`] bytes of the `kind` stream of the first document
/// that has any (`None` if none has, or it cannot be read): the bytes the first frame of that
/// kind is cut from.
pub(super) fn stream_sample(sources: &[Source], kind: Kind) -> Option<Vec<u8>> {
    let src = sources.iter().find(|s| s.stream_len(kind) > 0)?;
    let n = src.stream_len(kind).min(crate::paths::SAMPLE_LEN as u64) as usize;
    let mut buf = vec![0u8; n];
    src.read(kind, 0, &mut buf).ok()?;
    Some(buf)
}

/// The cleartext MACs HELLO offers: every one this sender supports, fastest first by
/// `calibration` (the receiver chooses among them by its own speeds: see
/// [`sieve_core::mac::negotiate`]); without a calibration, GMAC first, the order of a CPU with
/// AES and carry-less multiply instructions.
pub(super) fn mac_offer(calibration: Option<&crate::calibrate::Calibration>) -> MacOffer {
    calibration.map_or_else(MacOffer::default, |c| {
        MacOffer::from_preference(&c.mac_preference())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::PathRecord;
    use crate::tls::{Cipher, ClientTls};

    /// A sender's TLS configuration offering `cipher` (`None`: every suite, in this machine's
    /// order), trusting a CA made for the test.
    fn tls(dir: &std::path::Path, cipher: Option<Cipher>) -> std::sync::Arc<rustls::ClientConfig> {
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, params.self_signed(&key).unwrap().pem()).unwrap();
        ClientTls {
            ca: &ca,
            cipher,
            identity: None,
        }
        .config()
        .unwrap()
    }

    fn path_agreed(cipher: Option<&str>) -> PathRecord {
        PathRecord {
            rate_gbps: 0.1,
            compresses: None,
            seen: 1,
            auto_level: None,
            auto_anchor_ratio: None,
            auto_others: Vec::new(),
            cipher: cipher.map(String::from),
        }
    }

    /// The suite a receiver agreed on last time is priced when this sender offers it among
    /// others; a suite the user named, or nothing remembered, prices what is offered first.
    #[test]
    fn the_suite_priced_is_the_one_the_receiver_took() {
        let dir = tempfile::tempdir().unwrap();
        let all = tls(dir.path(), None);
        let first = Cipher::offered(&all)[0];
        let chacha = "TLS13_CHACHA20_POLY1305_SHA256";
        let aes256 = "TLS13_AES_256_GCM_SHA384";
        assert_eq!(Cipher::offered(&all).len(), 3);
        assert_eq!(priced_cipher(&all, None), first);
        assert_eq!(priced_cipher(&all, Some(&path_agreed(None))), first);
        assert_eq!(
            priced_cipher(&all, Some(&path_agreed(Some(chacha)))),
            Cipher::Chacha20
        );
        assert_eq!(
            priced_cipher(&all, Some(&path_agreed(Some(aes256)))),
            Cipher::Aes256Gcm
        );
        assert_eq!(
            priced_cipher(&all, Some(&path_agreed(Some("TLS_SOMETHING_ELSE")))),
            first
        );
        let named = tls(dir.path(), Some(Cipher::Aes128Gcm));
        assert_eq!(
            priced_cipher(&named, Some(&path_agreed(Some(chacha)))),
            Cipher::Aes128Gcm
        );
    }
}
