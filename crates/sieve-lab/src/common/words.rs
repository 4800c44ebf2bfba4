//! The rules that turn estimates into words. Every comparative word in a report comes from one
//! of these functions, never from a sentence written in advance, so a re-run whose data say
//! something else says something else. [`RULES`] states them for the reader.

use serde::Serialize;

use super::estimate::Estimate;

/// The rules, as every report links to them and `results/README.md` prints them.
pub(crate) const RULES: &str = "\
- **Improvement** is the thesis's equation 1 per round, `(secure-only − sieve) / secure-only × 100`, \
  its point the median over the rounds and its interval the distribution-free interval of that \
  median (two order statistics); the coverage of that interval is given wherever it is below 95 %.
- The sieve **wins** (is *faster*) where the whole interval is above 0, **loses** (is *slower*) \
  where it is below 0, and **ties** where it contains 0 (*within the noise*).
- A curve **rises** or **falls** when the intervals of its first and last points do not overlap; \
  when they overlap but the intervals of two of its points do not, it **varies** (its ends level \
  within the noise); otherwise it is **flat within the noise**. Two variants **differ** only when \
  their intervals do not overlap.
- Our result **agrees with the thesis** only when, at every point where the thesis gives a \
  value, our outcome has the thesis's sign, and the thesis's order between its points is ours \
  too (intervals apart, same order); it **reverses** the thesis when at some such point our \
  interval lies wholly on the other side of 0 or the order is the opposite with intervals \
  apart; otherwise it **does not reproduce** it.
";

/// The sieve against secure-only at one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Outcome {
    Wins,
    Ties,
    Loses,
}

impl Outcome {
    /// By the sign of the interval of the improvement; no data ties (nothing shown).
    pub(crate) fn of(e: &Estimate) -> Outcome {
        if e.known() && e.lo > 0.0 {
            Outcome::Wins
        } else if e.known() && e.hi < 0.0 {
            Outcome::Loses
        } else {
            Outcome::Ties
        }
    }

    /// "faster than" / "slower than" / "ties with", for "the sieve ___ secure-only".
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Outcome::Wins => "is faster than",
            Outcome::Ties => "ties with",
            Outcome::Loses => "is slower than",
        }
    }

    /// "faster" / "slower" / "within the noise".
    pub(crate) fn adjective(self) -> &'static str {
        match self {
            Outcome::Wins => "faster",
            Outcome::Ties => "within the noise",
            Outcome::Loses => "slower",
        }
    }
}

/// An estimate as the templates use it: the number, and the outcome in words.
pub(crate) fn point_words(e: &Estimate) -> serde_json::Value {
    let o = Outcome::of(e);
    serde_json::json!({
        "pct": e.pct(),
        "verb": o.verb(),
        "adjective": o.adjective(),
        "outcome": o,
    })
}

/// Whether two intervals are apart, and in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    Higher,
    Lower,
    Overlap,
}

/// `a` against `b`.
pub(crate) fn order(a: &Estimate, b: &Estimate) -> Order {
    if !(a.known() && b.known()) {
        Order::Overlap
    } else if a.lo > b.hi {
        Order::Higher
    } else if a.hi < b.lo {
        Order::Lower
    } else {
        Order::Overlap
    }
}

/// "higher than" / "lower than" / "the same within the noise as", for "A is ___ B".
pub(crate) fn compare(a: &Estimate, b: &Estimate) -> &'static str {
    match order(a, b) {
        Order::Higher => "higher than",
        Order::Lower => "lower than",
        Order::Overlap => "the same within the noise as",
    }
}

/// How a curve moves from its first to its last point, and whether it is flat in between: a
/// curve whose ends are level but which, say, peaks in the middle with its interval apart from
/// another point's is not called flat.
pub(crate) fn trend(points: &[Estimate]) -> &'static str {
    const FLAT: &str = "stays flat within the noise";
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return FLAT;
    };
    match order(last, first) {
        Order::Higher => "rises",
        Order::Lower => "falls",
        Order::Overlap => {
            let apart = points.iter().enumerate().any(|(i, a)| {
                points[i + 1..]
                    .iter()
                    .any(|b| order(a, b) != Order::Overlap)
            });
            if apart {
                "varies (its ends level within the noise)"
            } else {
                FLAT
            }
        }
    }
}

/// Ours against the thesis's values at the thesis's points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agreement {
    Agrees,
    Reverses,
    DoesNotReproduce,
}

impl Agreement {
    pub(crate) fn words(self) -> &'static str {
        match self {
            Agreement::Agrees => "agrees with the thesis",
            Agreement::Reverses => "reverses the thesis",
            Agreement::DoesNotReproduce => "does not reproduce the thesis",
        }
    }
}

/// `ours[i]` is our estimate at the point where the thesis gives `thesis[i]` (an improvement in
/// percent); see [`RULES`].
pub(crate) fn agreement(ours: &[Estimate], thesis: &[f64]) -> Agreement {
    let pairs: Vec<(&Estimate, f64)> = ours.iter().zip(thesis.iter().copied()).collect();
    if pairs.is_empty() {
        return Agreement::DoesNotReproduce;
    }
    let want = |t: f64| {
        if t > 0.0 {
            Outcome::Wins
        } else if t < 0.0 {
            Outcome::Loses
        } else {
            Outcome::Ties
        }
    };
    let mut reversed = false;
    let mut all_match = true;
    for &(e, t) in &pairs {
        let got = Outcome::of(e);
        all_match &= got == want(t);
        reversed |= matches!(
            (got, want(t)),
            (Outcome::Wins, Outcome::Loses) | (Outcome::Loses, Outcome::Wins)
        );
    }
    for (i, &(a, ta)) in pairs.iter().enumerate() {
        for &(b, tb) in &pairs[i + 1..] {
            let o = order(a, b);
            let (thesis_higher, thesis_lower) = (ta > tb, ta < tb);
            all_match &= (thesis_higher && o == Order::Higher)
                || (thesis_lower && o == Order::Lower)
                || (!thesis_higher && !thesis_lower);
            reversed |=
                (thesis_higher && o == Order::Lower) || (thesis_lower && o == Order::Higher);
        }
    }
    if reversed {
        Agreement::Reverses
    } else if all_match {
        Agreement::Agrees
    } else {
        Agreement::DoesNotReproduce
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(point: f64, lo: f64, hi: f64) -> Estimate {
        Estimate {
            point,
            lo,
            hi,
            coverage: 0.95,
            n: 30,
        }
    }

    #[test]
    fn outcome_follows_the_interval_not_the_point() {
        assert_eq!(Outcome::of(&e(5.0, 1.0, 9.0)), Outcome::Wins);
        assert_eq!(Outcome::of(&e(5.0, -1.0, 9.0)), Outcome::Ties);
        assert_eq!(Outcome::of(&e(-5.0, -9.0, -1.0)), Outcome::Loses);
        assert_eq!(Outcome::of(&Estimate::NONE), Outcome::Ties);
        assert_eq!(Outcome::Loses.verb(), "is slower than");
    }

    #[test]
    fn trends_and_comparisons_need_separate_intervals() {
        assert_eq!(trend(&[e(1.0, 0.0, 2.0), e(5.0, 3.0, 7.0)]), "rises");
        assert_eq!(
            trend(&[e(1.0, 0.0, 2.0), e(2.5, 1.5, 3.0)]),
            "stays flat within the noise"
        );
        assert_eq!(trend(&[e(5.0, 3.0, 7.0), e(1.0, 0.0, 2.0)]), "falls");
        // Ends level, a peak apart from the first point (F5.2's shape at P = 0.1): not flat.
        let peak = [
            e(-16.7, -29.8, 7.2),
            e(33.1, 10.3, 39.6),
            e(7.2, -3.7, 24.8),
        ];
        assert_eq!(trend(&peak), "varies (its ends level within the noise)");
        assert_eq!(
            trend(&[e(1.0, 0.0, 2.0), e(1.5, 0.5, 3.0), e(2.5, 1.5, 3.0)]),
            "stays flat within the noise"
        );
        assert_eq!(trend(&[e(1.0, 0.0, 2.0)]), "stays flat within the noise");
        assert_eq!(trend(&[]), "stays flat within the noise");
        assert_eq!(compare(&e(5.0, 4.0, 6.0), &e(1.0, 0.0, 2.0)), "higher than");
    }

    #[test]
    fn agreement_needs_sign_and_order() {
        let thesis = [67.0, 7.0];
        let good = [e(60.0, 55.0, 65.0), e(5.0, 2.0, 8.0)];
        assert_eq!(agreement(&good, &thesis), Agreement::Agrees);
        // Right signs, but the two points cannot be told apart: not reproduced.
        let flat = [e(6.0, 2.0, 9.0), e(5.0, 2.0, 8.0)];
        assert_eq!(agreement(&flat, &thesis), Agreement::DoesNotReproduce);
        // The sieve loses where the thesis had it win.
        let lost = [e(-8.0, -9.0, -6.0), e(-58.0, -60.0, -50.0)];
        assert_eq!(agreement(&lost, &thesis), Agreement::Reverses);
        // Right signs, opposite order.
        let upside = [e(5.0, 2.0, 8.0), e(60.0, 55.0, 65.0)];
        assert_eq!(agreement(&upside, &thesis), Agreement::Reverses);
        assert_eq!(agreement(&[], &[]), Agreement::DoesNotReproduce);
    }
}
