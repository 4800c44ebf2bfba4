//! Summary statistics for repeated measurements, as the thesis reports them (§5.1).
//!
//! The thesis gives, for every point, the mean of 500 runs with a 95 % confidence interval and an
//! improvement computed by its equation 1. We report both the mean (with a Student-t interval, to
//! stand beside the thesis's numbers) and the median (with a distribution-free interval), because
//! transfer times on a shared machine have long right tails: one slow run moves the mean and its
//! interval, the median hardly. Which of the two a report leads with is the report's choice; both
//! are computed here, from the same sample, by the same code.
//!
//! All functions take plain slices of `f64` and never panic. Inputs are expected to be finite;
//! a NaN is ordered after every number (by [`f64::total_cmp`]) and so ends up as the maximum.

use serde::Serialize;

/// Summary of one sample of measurements.
///
/// Fields that cannot be estimated from the sample are NaN: everything when `n == 0`, and
/// `stddev` and `ci95_mean` when `n == 1` (one value says nothing about spread). See
/// [`summarize`] for what the two intervals are.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Summary {
    /// Number of values.
    pub(crate) n: usize,
    /// Arithmetic mean.
    pub(crate) mean: f64,
    /// Median (mean of the two middle values when `n` is even).
    pub(crate) median: f64,
    /// Smallest value.
    pub(crate) min: f64,
    /// Largest value.
    pub(crate) max: f64,
    /// Sample standard deviation (denominator `n − 1`).
    pub(crate) stddev: f64,
    /// 95 % Student-t confidence interval of the mean.
    pub(crate) ci95_mean: (f64, f64),
    /// Distribution-free confidence interval of the median from order statistics; 95 % or more
    /// when `n >= 6`, the full range `(min, max)` with lower coverage below that
    /// (see [`median_ci_ranks`]).
    pub(crate) ci95_median: (f64, f64),
}

/// Summarises a sample: mean, median, extremes, standard deviation and two 95 % intervals.
///
/// * `ci95_mean` is `mean ± t(0.975, n − 1) · stddev / √n`, the interval the thesis reports.
///   It assumes the sample mean is close to normal, which holds for our sample sizes even when
///   single measurements are skewed. `t` comes from [`t_975`].
/// * `ci95_median` is `(x(j), x(k))`, two order statistics chosen from the binomial(n, ½)
///   distribution of the number of values below the true median, so it needs no assumption
///   about the distribution at all (see [`median_ci_ranks`]). For `n < 6` no pair of order
///   statistics reaches 95 %; we then return the widest pair, `(min, max)`, whose exact coverage
///   is `1 − 2^(1−n)`: 93.75 % for n = 5, 87.5 % for 4, 75 % for 3, 50 % for 2 and 0 for a
///   single value (the interval is that value). Reports with so few runs must say so.
pub(crate) fn summarize(xs: &[f64]) -> Summary {
    let n = xs.len();
    if n == 0 {
        return Summary {
            n: 0,
            mean: f64::NAN,
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            stddev: f64::NAN,
            ci95_mean: (f64::NAN, f64::NAN),
            ci95_median: (f64::NAN, f64::NAN),
        };
    }
    let sorted = sorted_copy(xs);
    let mean = mean(xs);
    let stddev = stddev(xs);
    let ci95_mean = if n >= 2 {
        let half = t_975(n - 1) * stddev / (n as f64).sqrt();
        (mean - half, mean + half)
    } else {
        (f64::NAN, f64::NAN)
    };
    let ci95_median = match median_ci_ranks(n) {
        // Ranks are 1-based and within 1..=n by construction.
        Some((lo, hi, _)) => (sorted[lo - 1], sorted[hi - 1]),
        None => (f64::NAN, f64::NAN),
    };
    Summary {
        n,
        mean,
        median: quantile_sorted(&sorted, 0.5),
        min: sorted[0],
        max: sorted[n - 1],
        stddev,
        ci95_mean,
        ci95_median,
    }
}

/// Improvement of the sieve over secure-only in percent: thesis equation 1,
/// `(secure_only − sieve) / secure_only × 100`.
///
/// Positive when the sieve is faster. Infinite or NaN when `secure_only` is 0.
pub(crate) fn improvement(secure_only: f64, sieve: f64) -> f64 {
    (secure_only - sieve) / secure_only * 100.0
}

/// Median of a sample (mean of the two middle values when the length is even); NaN when empty.
pub(crate) fn median(xs: &[f64]) -> f64 {
    quantile(xs, 0.5)
}

/// Arithmetic mean; NaN when empty.
pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (denominator `n − 1`); NaN for fewer than two values.
pub(crate) fn stddev(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    // Two-pass formula: subtracting the mean first avoids the cancellation of Σx² − n·m².
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    (ss / (n - 1) as f64).sqrt()
}

/// The `q`-quantile (0 ≤ q ≤ 1) of a sample, interpolating linearly between order statistics
/// (Hyndman & Fan type 7, the default of R and NumPy), so `quantile(xs, 0.5) == median(xs)`.
/// NaN when empty; `q` is clamped to `[0, 1]`.
pub(crate) fn quantile(xs: &[f64], q: f64) -> f64 {
    quantile_sorted(&sorted_copy(xs), q)
}

/// [`quantile`] on a slice that is already sorted ascending (no copy, no sort): for computing
/// several quantiles of one large sample.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
    let h = (n - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = h - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Two-sided 95 % quantile of Student's t distribution, `t(0.975, df)`.
///
/// Exact to the three decimals of the usual tables for `df` 1 to 30 (embedded). Beyond 30 the
/// value is the Cornish-Fisher expansion around 1.96 to second order in `1/df`, which matches
/// tables to 3 decimals from df = 31 (2.040) and tends to 1.96; simply jumping to 1.96 at 31
/// would make intervals of 31 to 100 runs 2-4 % too narrow. `df = 0` gives infinity (no
/// interval can be formed from one value).
pub(crate) fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, // 1-10
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, // 11-20
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042, // 21-30
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => {
            let z = 1.959_963_984_540_054_f64;
            let v = df as f64;
            let z3 = z * z * z;
            let z5 = z3 * z * z;
            z + (z3 + z) / (4.0 * v) + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
        }
    }
}

/// Order-statistic ranks `(j, k, coverage)` (1-based, `j ≤ k`) of the distribution-free
/// confidence interval `(x(j), x(k))` of the median of `n` values, and its exact coverage.
///
/// The number of values below the true median is binomial(n, ½) for any continuous
/// distribution, so `P(x(j) ≤ median < x(n+1−j)) = P(j ≤ B ≤ n − j) = 1 − 2·P(B ≤ j − 1)`. We take
/// the largest `j` (the narrowest symmetric interval) whose coverage is still at least 95 %.
/// For `n < 6` even `j = 1`, the full range, covers less than 95 %; we return it anyway, with
/// its true coverage `1 − 2^(1−n)`, because it is the widest interval the data allow. `None`
/// when `n == 0`.
pub(crate) fn median_ci_ranks(n: usize) -> Option<(usize, usize, f64)> {
    if n == 0 {
        return None;
    }
    // Walk the binomial(n, ½) CDF upwards in log space (0.5^n underflows beyond n ≈ 1074):
    // ln C(n, i+1) = ln C(n, i) + ln((n − i) / (i + 1)).
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0_f64;
    let mut cdf = 0.0_f64; // P(B <= i - 1) before adding pmf(i)
    let mut j = 1;
    let mut coverage = 1.0 - 2.0 * (ln_half_n).exp(); // j = 1: 1 − 2·P(B = 0)
    let mut i = 0;
    // Try j = i + 2 while it keeps coverage >= 95 % and stays on the lower half.
    while i + 2 <= n.div_ceil(2) {
        cdf += (ln_choose + ln_half_n).exp(); // P(B <= i)
        ln_choose += ((n - i) as f64 / (i + 1) as f64).ln();
        let next_pmf = (ln_choose + ln_half_n).exp(); // pmf(i + 1)
        let cov_next = 1.0 - 2.0 * (cdf + next_pmf); // coverage for j = i + 2
        if cov_next < 0.95 {
            break;
        }
        j = i + 2;
        coverage = cov_next;
        i += 1;
    }
    Some((j, n + 1 - j, coverage.max(0.0)))
}

fn sorted_copy(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn median_odd_even_unsorted_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn quantiles_type7() {
        let xs: Vec<f64> = (1..=11).map(f64::from).collect(); // 1..11
        assert_eq!(quantile(&xs, 0.0), 1.0);
        assert_eq!(quantile(&xs, 1.0), 11.0);
        assert!(close(quantile(&xs, 0.95), 10.5, 1e-12));
        assert!(close(quantile(&xs, 0.25), 3.5, 1e-12));
    }

    #[test]
    fn improvement_is_thesis_eq1() {
        // F5.1: 1MB-10 response 95 ms (sieve) vs 293 ms (secure-only) → 67.6 %.
        assert!(close(improvement(293.0, 95.0), 67.576, 1e-3));
        assert_eq!(improvement(100.0, 100.0), 0.0);
        assert!(improvement(100.0, 110.0) < 0.0);
    }

    #[test]
    fn summarize_known_sample() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7.
        let xs = [9.0, 2.0, 5.0, 4.0, 4.0, 7.0, 4.0, 5.0];
        let s = summarize(&xs);
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, 5.0);
        assert_eq!(s.median, 4.5);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        let sd = (32.0_f64 / 7.0).sqrt();
        assert!(close(s.stddev, sd, 1e-12));
        let half = 2.365 * sd / 8.0_f64.sqrt(); // t(0.975, 7) = 2.365
        assert!(close(s.ci95_mean.0, 5.0 - half, 1e-12));
        assert!(close(s.ci95_mean.1, 5.0 + half, 1e-12));
        // n = 8: j = 1 (coverage 1 − 2·9/256 = 0.9297 < 0.95 for j = 2) → (min, max).
        assert_eq!(s.ci95_median, (2.0, 9.0));
    }

    #[test]
    fn summarize_small_and_empty() {
        let e = summarize(&[]);
        assert_eq!(e.n, 0);
        assert!(e.mean.is_nan() && e.ci95_median.0.is_nan());
        let one = summarize(&[3.0]);
        assert_eq!(
            (one.mean, one.median, one.min, one.max),
            (3.0, 3.0, 3.0, 3.0)
        );
        assert!(one.stddev.is_nan() && one.ci95_mean.0.is_nan());
        assert_eq!(one.ci95_median, (3.0, 3.0));
        let five = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(five.ci95_median, (1.0, 5.0));
    }

    #[test]
    fn t_table_and_expansion() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(10), 2.228);
        assert_eq!(t_975(30), 2.042);
        // Published values: df 40 → 2.021, 60 → 2.000, 120 → 1.980; ∞ → 1.960.
        assert!(close(t_975(31), 2.040, 1e-3));
        assert!(close(t_975(40), 2.021, 1e-3));
        assert!(close(t_975(60), 2.000, 1e-3));
        assert!(close(t_975(120), 1.980, 1e-3));
        assert!(close(t_975(1_000_000), 1.960, 1e-3));
        assert!(t_975(0).is_infinite());
    }

    #[test]
    fn median_ci_ranks_known_values() {
        // Small n: the full range with coverage 1 − 2^(1−n).
        assert_eq!(median_ci_ranks(0), None);
        let (j, k, c) = median_ci_ranks(1).unwrap_or_default();
        assert_eq!((j, k), (1, 1));
        assert!(close(c, 0.0, 1e-12));
        let (j, k, c) = median_ci_ranks(5).unwrap_or_default();
        assert_eq!((j, k), (1, 5));
        assert!(close(c, 0.9375, 1e-12));
        // n = 6 is the first with 95 %: (x(1), x(6)), coverage 1 − 2/64.
        let (j, k, c) = median_ci_ranks(6).unwrap_or_default();
        assert_eq!((j, k), (1, 6));
        assert!(close(c, 0.96875, 1e-12));
        // Published table (e.g. Conover): n = 10 → (2, 9), 97.85 %; n = 20 → (6, 15), 95.86 %.
        let (j, k, c) = median_ci_ranks(10).unwrap_or_default();
        assert_eq!((j, k), (2, 9));
        assert!(close(c, 1.0 - 2.0 * 11.0 / 1024.0, 1e-12));
        let (j, k, c) = median_ci_ranks(20).unwrap_or_default();
        assert_eq!((j, k), (6, 15));
        assert!(close(c, 0.958_610_5, 1e-6));
        // Large n (0.5^n underflows): close to the normal approximation n/2 ∓ 0.98·√n.
        let (j, k, c) = median_ci_ranks(500).unwrap_or_default();
        assert!((228..=230).contains(&j), "j = {j}");
        assert_eq!(k, 501 - j);
        assert!((0.95..0.96).contains(&c));
        let (j, _, c) = median_ci_ranks(1_000_000).unwrap_or_default();
        assert!((499_000..=499_030).contains(&j), "j = {j}");
        assert!(c >= 0.95);
    }
}
