//! ACCENT's FSCN (ACCENT §3.2): choose the encoding scheme whose computation index is nearest
//! the link's rate, for the sender and the receiver at once.
//!
//! Each end keeps a **floating scale** FS⟨⟩: one computation index CI per encoding scheme δ (here:
//! no compression, and zstd at each candidate level).
//!
//! **Eq. 3.** From a scheme's compression data rate CD_δ, its compression ratio CR and the
//! encryption data rate ED:
//!
//! ```text
//! CI_δ = CD_δ·ED / (CR·CD_δ + ED)  +  CD_δ·(1 − CR)
//!        (compression-encryption rate)  (reduction speed)
//! ```
//!
//! For the receiver's scale FS^R the same formula takes the receiver's rates: its decompression
//! rate for CD_δ and its rate of checking plain bytes for ED. For "no compression" (CD → ∞,
//! CR = 1) eq. 3 gives CI = ED.
//!
//! **Phase 1** (initialization) fills both scales from a micro-benchmark: [`FloatingScale::new`]
//! takes the profiled CIs. **Phase 2**, Algorithm 1, floats each scale with what the current
//! transfer measures ([`FloatingScale::update`]). **Phase 3** exchanges the scales in one byte per
//! scheme ([`ci_to_byte`], [`ci_from_byte`]). **Phase 4**, Algorithm 2, picks the scheme nearest
//! the measured TD ([`select`]).
//!
//! ## Algorithm 1, and the one place we read the paper rather than copy it
//!
//! ```text
//! 7  derive CI_δ^−0 using Eq. (3)                    // the latest CI of the current scheme
//! 8  CI_δ^avg ← average of (CI_δ^−ω … CI_δ^−0)      // sliding window of ω + 1 quanta
//! 9  difference ← CI_δ^avg − CI_δ^−0
//! 10 foreach CI element of FS^S, FS^R: CI ← FS⟨index⟩ + difference
//! ```
//!
//! Taken literally, line 9 moves the scale *against* a measurement (a drop in the measured CI
//! raises every CI) and with ω = 0 never moves it at all, yet the paper says a small ω gives "a
//! quick adaptation to changes" and a large one disregards "short spikes". What satisfies that
//! text, and the scale's purpose (it "moves up and down in accordance with the dynamic states"),
//! is to float the whole scale so that the current scheme's entry equals the window's average:
//! difference = CI_δ^avg − FS⟨δ⟩, added to every entry. With ω = 0 the scale follows each
//! measurement; with a larger ω a one-quantum spike moves it by 1/(ω+1) of the spike. The shift is
//! the same for every scheme because the paper assumes "an approximately linear relation among
//! the different compression methods" (Krintz and Sucu). The window holds CIs of the current
//! scheme only, so it restarts when the scheme changes.

use std::collections::VecDeque;

use super::ttsc::compress_encode_rate;

/// Eq. 3: CI_δ = CD_δ·ED / (CR·CD_δ + ED) + CD_δ·(1 − CR), in bytes per second.
pub(crate) fn computation_index(cd: f64, cr: f64, ed: f64) -> f64 {
    compress_encode_rate(cd, ed, cr) + cd * (1.0 - cr)
}

/// Eq. 4: the Euclidean distance of the point (CI^S, CI^R) from (TD, TD).
pub fn distance(ci_s: f64, ci_r: f64, td: f64) -> f64 {
    ((td - ci_s).powi(2) + (td - ci_r).powi(2)).sqrt()
}

/// Algorithm 2: the index of the scheme whose (FS^S⟨i⟩, FS^R⟨i⟩) is nearest (TD, TD); the first
/// of equals. `None` when the scales are empty.
///
/// # Panics
///
/// If the scales differ in length (they describe the same schemes).
pub fn select(fs_s: &[f64], fs_r: &[f64], td: f64) -> Option<usize> {
    assert_eq!(
        fs_s.len(),
        fs_r.len(),
        "the two scales list the same schemes"
    );
    let mut best: Option<(usize, f64)> = None;
    for (index, (&ci_s, &ci_r)) in fs_s.iter().zip(fs_r).enumerate() {
        let d = distance(ci_s, ci_r, td);
        if best.is_none_or(|(_, best_d)| d < best_d) {
            best = Some((index, d));
        }
    }
    best.map(|(i, _)| i)
}

/// One end's floating scale FS⟨⟩ and the sliding window of Algorithm 1.
#[derive(Debug, Clone, PartialEq)]
pub struct FloatingScale {
    values: Vec<f64>,
    omega: usize,
    window: VecDeque<f64>,
    window_of: Option<usize>,
}

impl FloatingScale {
    /// Phase 1: a scale from profiled CIs, averaging over ω + 1 quanta in Algorithm 1.
    pub fn new(initial: Vec<f64>, omega: usize) -> FloatingScale {
        FloatingScale {
            values: initial,
            omega,
            window: VecDeque::with_capacity(omega + 1),
            window_of: None,
        }
    }

    /// The scale: one CI per scheme.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// ω.
    pub(crate) fn omega(&self) -> usize {
        self.omega
    }

    /// Algorithm 1 after a quantum in which scheme `current` ran and measured `ci_latest`
    /// (CI_δ^−0, from eq. 3): float the scale so that FS⟨current⟩ is the window's average.
    ///
    /// # Panics
    ///
    /// If `current` is not a scheme of the scale.
    pub fn update(&mut self, current: usize, ci_latest: f64) {
        assert!(
            current < self.values.len(),
            "scheme {current} is not on the scale"
        );
        if !ci_latest.is_finite() {
            return;
        }
        if self.window_of != Some(current) {
            self.window.clear();
            self.window_of = Some(current);
        }
        if self.window.len() == self.omega + 1 {
            self.window.pop_front();
        }
        self.window.push_back(ci_latest);
        let avg = self.window.iter().sum::<f64>() / self.window.len() as f64;
        let difference = avg - self.values[current];
        for ci in &mut self.values {
            *ci += difference;
        }
    }

    /// Phase 3: the scale in one byte per scheme.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.values.iter().map(|&ci| ci_to_byte(ci)).collect()
    }
}

/// Smallest nonzero CI the one-byte form holds: 1 kB/s.
const CI_BYTE_BASE: f64 = 1000.0;
/// Steps per doubling in the one-byte form: 2^(1/8), about 9 % apart.
const CI_BYTE_STEPS: f64 = 8.0;

/// Phase 3's "compact 1-byte format" of a CI: 0 for no rate (or a negative one, which a scale
/// floated below zero can hold), else 1 kB/s · 2^((b − 1)/8), from 1 kB/s to about 3.6 TB/s in
/// steps of 9 %.
pub fn ci_to_byte(ci: f64) -> u8 {
    if ci.is_nan() || ci <= 0.0 {
        return 0;
    }
    let steps = (CI_BYTE_STEPS * (ci / CI_BYTE_BASE).log2()).round() + 1.0;
    steps.clamp(1.0, 255.0) as u8
}

/// The CI a byte of [`ci_to_byte`] stands for.
pub fn ci_from_byte(b: u8) -> f64 {
    if b == 0 {
        0.0
    } else {
        CI_BYTE_BASE * ((f64::from(b) - 1.0) / CI_BYTE_STEPS).exp2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-3 * b.abs().max(1.0), "{a} vs {b}");
    }

    /// By hand: CD = 200, CR = 0.25, ED = 1000 (MB/s): 200·1000/1050 = 190.476, plus
    /// 200·0.75 = 150: CI = 340.476. No compression (CR = 1, CD huge) tends to ED.
    #[test]
    fn eq3_worked_example() {
        close(computation_index(200.0, 0.25, 1000.0), 340.476);
        close(computation_index(1e12, 1.0, 1000.0), 1000.0);
    }

    /// The paper's Figure 7, State 1: CI_4 sits at (FS^R⟨4⟩ = 7, FS^S⟨4⟩ = 28) and TD = 24.3:
    /// d = √((24.3 − 28)² + (24.3 − 7)²) = √(13.69 + 299.29) = 17.691.
    /// With three other schemes at (S, R) = (300, 250), (120, 90), (60, 40):
    /// d = 356.3, 116.1, 39.0; the nearest is CI_4, as the paper says.
    #[test]
    fn figure_7_state_1() {
        close(distance(28.0, 7.0, 24.3), 17.691);
        let fs_s = [300.0, 120.0, 60.0, 28.0];
        let fs_r = [250.0, 90.0, 40.0, 7.0];
        assert_eq!(select(&fs_s, &fs_r, 24.3), Some(3));
        // On a fast link the fast scheme wins: TD = 280 → (300, 250) at d = 36.1.
        assert_eq!(select(&fs_s, &fs_r, 280.0), Some(0));
        // TD = 100: d = 250.0, 22.4, 72.1, 117.6 → the second.
        assert_eq!(select(&fs_s, &fs_r, 100.0), Some(1));
        assert_eq!(select(&[], &[], 1.0), None);
    }

    /// Algorithm 1 by hand, ω = 2 (windows of three), scale [100, 50, 20], scheme 1 current:
    /// 50 → avg 50, no move; 41 → avg 45.5, shift −4.5 → [95.5, 45.5, 15.5];
    /// 44 → avg 45 → [95, 45, 15]; 29 → window (41, 44, 29), avg 38 → [88, 38, 8].
    #[test]
    fn algorithm_1_worked_example() {
        let mut fs = FloatingScale::new(vec![100.0, 50.0, 20.0], 2);
        fs.update(1, 50.0);
        assert_eq!(fs.values(), [100.0, 50.0, 20.0]);
        fs.update(1, 41.0);
        assert_eq!(fs.values(), [95.5, 45.5, 15.5]);
        fs.update(1, 44.0);
        assert_eq!(fs.values(), [95.0, 45.0, 15.0]);
        fs.update(1, 29.0);
        assert_eq!(fs.values(), [88.0, 38.0, 8.0]);
        // A switch restarts the window: scheme 2 measured at 10 → FS⟨2⟩ = 10, shift +2.
        fs.update(2, 10.0);
        assert_eq!(fs.values(), [90.0, 40.0, 10.0]);
    }

    /// What ω is for (the paper's text): ω = 0 follows each quantum; ω = 4 moves by a fifth of
    /// a one-quantum spike and comes back when it passes.
    #[test]
    fn omega_trades_responsiveness_for_spike_immunity() {
        let mut quick = FloatingScale::new(vec![100.0, 50.0], 0);
        let mut steady = FloatingScale::new(vec![100.0, 50.0], 4);
        for _ in 0..5 {
            quick.update(1, 50.0);
            steady.update(1, 50.0);
        }
        quick.update(1, 0.0);
        steady.update(1, 0.0);
        assert_eq!(quick.values(), [50.0, 0.0]);
        assert_eq!(steady.values(), [90.0, 40.0]);
        for _ in 0..5 {
            quick.update(1, 50.0);
            steady.update(1, 50.0);
        }
        assert_eq!(quick.values(), [100.0, 50.0]);
        assert_eq!(steady.values(), [100.0, 50.0]);
    }

    #[test]
    fn one_byte_form_keeps_a_ci_within_five_percent() {
        assert_eq!(ci_to_byte(0.0), 0);
        assert_eq!(ci_to_byte(-5.0), 0);
        assert_eq!(ci_to_byte(f64::NAN), 0);
        assert_eq!(ci_from_byte(0), 0.0);
        assert_eq!(ci_to_byte(1000.0), 1);
        assert_eq!(ci_to_byte(1e20), 255);
        for ci in [1e3, 3.3e4, 1.25e6, 1.25e8, 3e9, 1e12] {
            let back = ci_from_byte(ci_to_byte(ci));
            assert!((back / ci - 1.0).abs() < 0.05, "{ci} → {back}");
        }
        for b in 1..=255u8 {
            assert_eq!(ci_to_byte(ci_from_byte(b)), b);
        }
        let fs = FloatingScale::new(vec![1.25e8, 0.0], 0);
        assert_eq!(fs.to_bytes(), [ci_to_byte(1.25e8), 0]);
    }
}
