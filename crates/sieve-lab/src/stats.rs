//! Order statistics for repeated measurements: the median's distribution-free interval (the
//! lab's one estimator, [`crate::common::estimate`], rests on it), quantiles, and the mean the
//! queueing simulation reports.
//!
//! All functions take plain slices of `f64` and never panic.

/// Arithmetic mean; NaN when empty.
pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (denominator `n − 1`); NaN for fewer than two values.
#[cfg(test)]
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

/// The `q`-quantile (0 ≤ q ≤ 1) of a slice sorted ascending, interpolating linearly between
/// order statistics (Hyndman & Fan type 7, the default of R and NumPy). NaN when empty; `q` is
/// clamped to `[0, 1]`.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn quantiles_type7() {
        let xs: Vec<f64> = (1..=11).map(f64::from).collect(); // 1..11
        assert_eq!(quantile_sorted(&xs, 0.0), 1.0);
        assert_eq!(quantile_sorted(&xs, 1.0), 11.0);
        assert!(close(quantile_sorted(&xs, 0.95), 10.5, 1e-12));
        assert!(close(quantile_sorted(&xs, 0.25), 3.5, 1e-12));
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert!(quantile_sorted(&[], 0.5).is_nan());
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
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
