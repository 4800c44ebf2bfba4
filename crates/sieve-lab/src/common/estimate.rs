//! The one estimator behind every improvement the lab reports, its point and its interval.
//!
//! The thesis's equation 1 compares the means of the two systems. On a shared machine transfer
//! times drift and have long right tails, so we compare the systems *within* each round (the two
//! modes of a point run back to back, alternating) and summarise the per-round values:
//!
//! - **point**: the median of the per-round paired improvements
//!   `(secure-only − sieve) / secure-only × 100`;
//! - **interval**: the distribution-free interval of that median from two order statistics
//!   (binomial(n, ½) ranks, [`crate::stats::median_ci_ranks`]), whose exact coverage is stated:
//!   at least 95 % from 6 rounds on; below that the full range, with 1 − 2^(1−n) (93.75 % for 5).
//!
//! Both come from the same numbers, so a point always lies inside its own interval, and a
//! figure's marker and its error bar say the same thing.

use serde::{Deserialize, Serialize};

use crate::stats::{median_ci_ranks, quantile_sorted};

/// A median with its distribution-free interval and the interval's exact coverage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Estimate {
    pub(crate) point: f64,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    /// Probability that the interval covers the true median (0.9375 for 5 rounds).
    pub(crate) coverage: f64,
    /// Number of values (rounds).
    pub(crate) n: usize,
}

impl Estimate {
    /// No data: NaN everywhere, which every rule reads as "cannot say".
    pub(crate) const NONE: Estimate = Estimate {
        point: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
        coverage: 0.0,
        n: 0,
    };

    /// The median of `xs` and its order-statistic interval.
    pub(crate) fn median_of(xs: &[f64]) -> Estimate {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let Some((j, k, coverage)) = median_ci_ranks(v.len()) else {
            return Estimate::NONE;
        };
        Estimate {
            point: quantile_sorted(&v, 0.5),
            lo: v[j - 1],
            hi: v[k - 1],
            coverage,
            n: v.len(),
        }
    }

    /// The paired improvement (thesis eq. 1, per round) of `sieve` over `secure_only`, from
    /// `(secure_only, sieve)` pairs of one round each.
    pub(crate) fn improvement(pairs: impl IntoIterator<Item = (f64, f64)>) -> Estimate {
        let per_round: Vec<f64> = pairs
            .into_iter()
            .map(|(so, sv)| (so - sv) / so * 100.0)
            .collect();
        Estimate::median_of(&per_round)
    }

    /// Whether there is anything to say.
    pub(crate) fn known(&self) -> bool {
        self.n > 0 && self.point.is_finite()
    }

    /// `"-7.7 % [-9.1, -5.0]"`, with one decimal.
    pub(crate) fn pct(&self) -> String {
        self.with_unit(" %", 1)
    }

    /// `"1.5 [1.4, 1.8]"` with `decimals`.
    pub(crate) fn num(&self, decimals: usize) -> String {
        self.with_unit("", decimals)
    }

    fn with_unit(&self, unit: &str, d: usize) -> String {
        if !self.known() {
            return "–".into();
        }
        format!(
            "{:.d$}{unit} [{:.d$}, {:.d$}]",
            self.point, self.lo, self.hi
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_and_interval_come_from_the_same_rounds() {
        // Ten rounds: the 95 % order-statistic interval is (x(2), x(9)), coverage 97.85 %.
        let pairs: Vec<(f64, f64)> = (1..=10).map(|i| (100.0, 100.0 - f64::from(i))).collect();
        let e = Estimate::improvement(pairs);
        assert_eq!(e.n, 10);
        assert!((e.point - 5.5).abs() < 1e-9);
        assert_eq!((e.lo, e.hi), (2.0, 9.0));
        assert!((e.coverage - 0.978_515_625).abs() < 1e-9);
        assert!(e.lo <= e.point && e.point <= e.hi);
        // Five rounds: the full range, with its true coverage.
        let e = Estimate::median_of(&[3.0, 1.0, 2.0, 5.0, 4.0]);
        assert_eq!((e.point, e.lo, e.hi), (3.0, 1.0, 5.0));
        assert_eq!(e.coverage, 0.9375);
        assert!(!Estimate::median_of(&[]).known());
        assert_eq!(Estimate::NONE.pct(), "–");
        assert_eq!(
            Estimate::median_of(&[-7.71, -9.1, -5.0]).pct(),
            "-7.7 % [-9.1, -5.0]"
        );
    }
}
