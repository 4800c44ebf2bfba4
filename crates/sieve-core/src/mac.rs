//! Which MAC protects the cleartext: the algorithms, what a sender offers, and how a receiver
//! chooses among them.
//!
//! The plain channels' bytes are tagged unit by unit at both ends (the transport's `mac.rs`
//! computes the tags; [`crate::ledger`] folds them). Which algorithm is cheapest depends on the
//! CPU: AES-GMAC costs next to nothing where the CPU multiplies without carries (PCLMULQDQ,
//! ARMv8 PMULL), and is several times slower than a software MAC where it cannot. So each end
//! measures its own speeds (the transport's `calibrate.rs`), the sender lists what it supports in
//! HELLO, fastest first, and the receiver picks one in SESSION. Both ends then derive that
//! algorithm's key from channel 0's TLS exporter under a label of its own.
//!
//! Everything here is pure: speeds come in as numbers, already measured.

use std::fmt;

/// A MAC of the cleartext. The wire codes are fixed: a code means the same construction in
/// every release that speaks this protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MacAlg {
    /// AES-128-GCM over no plaintext with the unit as associated data (GMAC), the nonce being
    /// the unit's `(document, offset)`. Fast only with carry-less multiply instructions.
    Gmac = 0,
    /// Keyed BLAKE3 of the unit followed by its `(document, offset)`. Fast with any SIMD unit
    /// (SSE4.1, AVX2, AVX-512, NEON), and in portable code still well ahead of software GHASH.
    Blake3 = 1,
    /// ChaCha20-Poly1305 over no plaintext with the unit as associated data: Poly1305 under a
    /// one-time key from the ChaCha20 keystream of the nonce `(document, offset)`, as the AEAD
    /// derives it. Needs no special instructions.
    Poly1305 = 2,
    /// Adiantum's NH-Poly1305 hash of the unit plus a pad: the first 16 bytes of keyed BLAKE3
    /// of `(document, offset, length)`. NH needs only 32-bit additions and multiplications,
    /// which every SIMD unit has: the fastest of these without carry-less multiply.
    NhPoly1305 = 3,
}

impl MacAlg {
    /// Every algorithm, in code order.
    pub const ALL: [MacAlg; 4] = [
        MacAlg::Gmac,
        MacAlg::Blake3,
        MacAlg::Poly1305,
        MacAlg::NhPoly1305,
    ];
    /// How many algorithms there are: the longest possible offer.
    pub const COUNT: usize = Self::ALL.len();

    /// The wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The algorithm with wire value `code`, if any.
    pub(crate) fn from_code(code: u8) -> Option<MacAlg> {
        Self::ALL.into_iter().find(|a| a.code() == code)
    }

    /// The name reports, logs and command-line options use.
    pub fn name(self) -> &'static str {
        match self {
            MacAlg::Gmac => "aes-gmac",
            MacAlg::Blake3 => "blake3",
            MacAlg::Poly1305 => "chacha20-poly1305",
            MacAlg::NhPoly1305 => "nh-poly1305",
        }
    }

    /// The algorithm called `name` (see [`MacAlg::name`]; `gmac` and `poly1305` also do).
    pub(crate) fn from_name(name: &str) -> Option<MacAlg> {
        match name.to_ascii_lowercase().as_str() {
            "aes-gmac" | "gmac" => Some(MacAlg::Gmac),
            "blake3" => Some(MacAlg::Blake3),
            "chacha20-poly1305" | "poly1305" => Some(MacAlg::Poly1305),
            "nh-poly1305" | "nhpoly1305" => Some(MacAlg::NhPoly1305),
            _ => None,
        }
    }

    /// The context string under which both ends derive this algorithm's key from the session's
    /// exported keying material: one per algorithm, so that no two algorithms ever share a key.
    pub fn key_context(self) -> &'static str {
        match self {
            MacAlg::Gmac => "security sieve v1 plain-channel GMAC key",
            MacAlg::Blake3 => "security sieve v1 plain-channel keyed BLAKE3 key",
            MacAlg::Poly1305 => "security sieve v1 plain-channel ChaCha20-Poly1305 key",
            MacAlg::NhPoly1305 => "security sieve v1 plain-channel NH-Poly1305 key",
        }
    }
}

impl fmt::Display for MacAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for MacAlg {
    type Err = String;
    fn from_str(s: &str) -> Result<MacAlg, String> {
        MacAlg::from_name(s).ok_or_else(|| {
            format!("unknown MAC '{s}': use aes-gmac, blake3, chacha20-poly1305 or nh-poly1305")
        })
    }
}

/// Why a list of algorithms is not a valid offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    /// Nothing listed: a sender must support at least one MAC.
    #[error("the list of MACs is empty")]
    Empty,
    /// An algorithm listed twice: an order of preference names each once.
    #[error("{0} is listed twice")]
    Duplicate(MacAlg),
}

/// The MACs a sender supports, most preferred first: distinct, at least one. `Copy`, so that
/// HELLO stays a plain value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacOffer {
    algs: [MacAlg; MacAlg::COUNT],
    len: u8,
}

impl MacOffer {
    /// An offer of `algs`, in that order.
    pub fn new(algs: &[MacAlg]) -> Result<MacOffer, OfferError> {
        let Some(&first) = algs.first() else {
            return Err(OfferError::Empty);
        };
        let mut out = MacOffer {
            algs: [first; MacAlg::COUNT],
            len: 0,
        };
        for &a in algs {
            if out.contains(a) {
                return Err(OfferError::Duplicate(a));
            }
            // Distinct algorithms number at most COUNT, so the index is in bounds.
            out.algs[usize::from(out.len)] = a;
            out.len += 1;
        }
        Ok(out)
    }

    /// An offer of one algorithm.
    pub fn only(alg: MacAlg) -> MacOffer {
        MacOffer {
            algs: [alg; MacAlg::COUNT],
            len: 1,
        }
    }

    /// Every algorithm, in `pref`'s order (the sender's own measurement).
    pub fn from_preference(pref: &MacPreference) -> MacOffer {
        let algs: Vec<MacAlg> = pref.ranked.iter().map(|&(a, _)| a).collect();
        MacOffer::new(&algs).unwrap_or(MacOffer::only(MacAlg::Gmac))
    }

    /// The algorithms, most preferred first.
    pub fn algs(&self) -> &[MacAlg] {
        &self.algs[..usize::from(self.len)]
    }

    /// Whether `alg` is offered.
    pub fn contains(&self, alg: MacAlg) -> bool {
        self.algs().contains(&alg)
    }

    /// Where `alg` stands in the offer (0: first choice).
    pub fn rank(&self, alg: MacAlg) -> Option<usize> {
        self.algs().iter().position(|&a| a == alg)
    }
}

impl Default for MacOffer {
    /// Every algorithm, GMAC first: the order of a machine with AES and carry-less multiply
    /// instructions, for callers that have measured nothing.
    fn default() -> MacOffer {
        MacOffer {
            algs: MacAlg::ALL,
            len: MacAlg::COUNT as u8,
        }
    }
}

impl fmt::Debug for MacOffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.algs()).finish()
    }
}

impl fmt::Display for MacOffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.algs().iter().map(|a| a.name()).collect();
        f.write_str(&names.join(", "))
    }
}

/// The algorithms one end supports, with the speed it measured for each (bytes per second;
/// what matters is their ratio), fastest first.
#[derive(Debug, Clone, PartialEq)]
pub struct MacPreference {
    ranked: Vec<(MacAlg, f64)>,
}

impl MacPreference {
    /// From measured speeds: fastest first. Algorithms without a usable measurement (zero,
    /// negative, not a number) are left out; if none is usable, GMAC alone.
    pub fn from_speeds(speeds: &[(MacAlg, f64)]) -> MacPreference {
        let mut ranked: Vec<(MacAlg, f64)> = Vec::new();
        for &(a, s) in speeds {
            if s.is_finite() && s > 0.0 && !ranked.iter().any(|&(b, _)| b == a) {
                ranked.push((a, s));
            }
        }
        // Stable: equal speeds keep the caller's order.
        ranked.sort_by(|x, y| y.1.total_cmp(&x.1));
        if ranked.is_empty() {
            ranked.push((MacAlg::Gmac, 1.0));
        }
        MacPreference { ranked }
    }

    /// One algorithm only (a receiver told to use it whatever it measures).
    pub fn only(alg: MacAlg) -> MacPreference {
        MacPreference {
            ranked: vec![(alg, 1.0)],
        }
    }

    /// The algorithms, fastest first, with their speeds.
    pub fn ranked(&self) -> &[(MacAlg, f64)] {
        &self.ranked
    }

    /// The measured speed of `alg`, if this end supports it.
    pub fn speed(&self, alg: MacAlg) -> Option<f64> {
        self.ranked
            .iter()
            .find(|&&(a, _)| a == alg)
            .map(|&(_, s)| s)
    }
}

impl Default for MacPreference {
    /// The order of [`MacOffer::default`], for callers that have measured nothing.
    fn default() -> MacPreference {
        MacPreference {
            ranked: MacAlg::ALL.iter().map(|&a| (a, 1.0)).collect(),
        }
    }
}

/// No algorithm is both offered and supported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no cleartext MAC in common: the sender offers {offered}, this receiver supports {supported}; \
     use a sender and a receiver of the same release, or start the receiver with a --mac the \
     sender offers"
)]
pub struct NoCommonMac {
    /// What the sender offered.
    pub offered: MacOffer,
    /// What the receiver supports, comma-separated.
    pub supported: String,
}

/// How much slower (as a fraction) the receiver's pick may be on the receiver than its fastest
/// common algorithm for the sender's order to decide instead: within this, the two are the same
/// to the receiver, and the sender, which tags the same bytes, knows its own speeds better.
pub(crate) const SENDER_TIE: f64 = 0.10;

/// The receiver's choice among `offer`, by its own measurement `own`: the common algorithm the
/// receiver runs fastest, unless one the sender prefers runs within `SENDER_TIE` of it on the
/// receiver too (both ends compute every tag, so a near-tie for the receiver is the sender's
/// call). No common algorithm is an error that says what each side has.
pub fn negotiate(offer: &MacOffer, own: &MacPreference) -> Result<MacAlg, NoCommonMac> {
    let Some(&(best, best_speed)) = own.ranked.iter().find(|&&(a, _)| offer.contains(a)) else {
        let supported: Vec<&str> = own.ranked.iter().map(|(a, _)| a.name()).collect();
        return Err(NoCommonMac {
            offered: *offer,
            supported: supported.join(", "),
        });
    };
    // The sender's favourites ahead of `best`, the first that is close enough wins.
    let ahead = offer.algs().iter().take_while(|&&a| a != best);
    for &a in ahead {
        if let Some(s) = own.speed(a) {
            if s >= best_speed * (1.0 - SENDER_TIE) {
                return Ok(a);
            }
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use MacAlg::*;

    #[test]
    fn codes_and_names_round_trip() {
        for a in MacAlg::ALL {
            assert_eq!(MacAlg::from_code(a.code()), Some(a));
            assert_eq!(MacAlg::from_name(a.name()), Some(a));
            assert_eq!(a.name().parse::<MacAlg>(), Ok(a));
        }
        assert_eq!(MacAlg::from_code(4), None);
        assert_eq!(MacAlg::from_code(255), None);
        assert!("sha1".parse::<MacAlg>().unwrap_err().contains("blake3"));
        let contexts: std::collections::HashSet<_> =
            MacAlg::ALL.iter().map(|a| a.key_context()).collect();
        assert_eq!(
            contexts.len(),
            MacAlg::COUNT,
            "every key has a label of its own"
        );
    }

    #[test]
    fn offers_are_distinct_and_not_empty() {
        assert_eq!(MacOffer::new(&[]), Err(OfferError::Empty));
        assert_eq!(
            MacOffer::new(&[Blake3, Gmac, Blake3]),
            Err(OfferError::Duplicate(Blake3))
        );
        let o = MacOffer::new(&[Poly1305, Gmac]).unwrap();
        assert_eq!(o.algs(), &[Poly1305, Gmac]);
        assert_eq!((o.rank(Gmac), o.rank(Blake3)), (Some(1), None));
        assert_eq!(MacOffer::default().algs(), &MacAlg::ALL);
        assert_eq!(MacOffer::only(Blake3).algs(), &[Blake3]);
        assert_eq!(o.to_string(), "chacha20-poly1305, aes-gmac");
    }

    #[test]
    fn preference_ranks_by_speed_and_drops_bad_measurements() {
        let p = MacPreference::from_speeds(&[(Gmac, 2.0e9), (Blake3, 5.0e9), (Poly1305, f64::NAN)]);
        assert_eq!(p.ranked(), &[(Blake3, 5.0e9), (Gmac, 2.0e9)]);
        assert_eq!(p.speed(Poly1305), None);
        assert_eq!(MacOffer::from_preference(&p).algs(), &[Blake3, Gmac]);
        let none = MacPreference::from_speeds(&[(Gmac, 0.0), (Blake3, -1.0)]);
        assert_eq!(none.ranked(), &[(Gmac, 1.0)]);
    }

    /// An AES machine (GMAC five times BLAKE3) and one without carry-less multiply (BLAKE3
    /// five times GMAC): the receiver's measurement decides, whatever the sender prefers.
    #[test]
    fn the_receiver_picks_its_fastest_common_mac() {
        let aes = MacPreference::from_speeds(&[(Gmac, 25e9), (Blake3, 5e9), (Poly1305, 2e9)]);
        let noaes = MacPreference::from_speeds(&[(Gmac, 1e9), (Blake3, 5e9), (Poly1305, 2e9)]);
        let all = MacOffer::new(&[Blake3, Poly1305, Gmac]).unwrap();
        assert_eq!(negotiate(&all, &aes), Ok(Gmac));
        assert_eq!(negotiate(&all, &noaes), Ok(Blake3));
        // Only what is offered: the receiver's favourite is not, so its next best.
        let no_gmac = MacOffer::new(&[Poly1305, Blake3]).unwrap();
        assert_eq!(negotiate(&no_gmac, &aes), Ok(Blake3));
        assert_eq!(negotiate(&MacOffer::only(Gmac), &noaes), Ok(Gmac));
    }

    #[test]
    fn a_near_tie_on_the_receiver_goes_to_the_senders_order() {
        let own = MacPreference::from_speeds(&[(Gmac, 10e9), (Blake3, 9.5e9), (Poly1305, 3e9)]);
        let sender = MacOffer::new(&[Blake3, Gmac]).unwrap();
        assert_eq!(negotiate(&sender, &own), Ok(Blake3));
        // Beyond the tie, the receiver's speed decides.
        let own = MacPreference::from_speeds(&[(Gmac, 10e9), (Blake3, 8e9)]);
        assert_eq!(negotiate(&sender, &own), Ok(Gmac));
        // A sender favourite the receiver does not support is skipped.
        let own = MacPreference::from_speeds(&[(Gmac, 10e9), (Poly1305, 9.9e9)]);
        let sender = MacOffer::new(&[Blake3, Poly1305, Gmac]).unwrap();
        assert_eq!(negotiate(&sender, &own), Ok(Poly1305));
    }

    #[test]
    fn no_common_mac_is_refused_with_both_lists() {
        let e = negotiate(&MacOffer::only(Blake3), &MacPreference::only(Gmac)).unwrap_err();
        assert_eq!(e.offered, MacOffer::only(Blake3));
        let text = e.to_string();
        assert!(
            text.contains("offers blake3") && text.contains("supports aes-gmac"),
            "{text}"
        );
    }
}
