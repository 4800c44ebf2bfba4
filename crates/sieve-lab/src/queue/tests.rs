//! The arrival-stream simulator against queueing theory and against the thesis (§5.4.4).
//!
//! Tolerances are set from the seed-to-seed spread of the simulated mean, measured over 100
//! seeds in release (see `seed_spread`, ignored): each tolerance is at least 3.3 standard
//! deviations of that spread, so a test fails because the simulator is wrong, not because a seed
//! is unlucky. The tests are seeded, hence deterministic.

use super::{
    open_model_response, simulate, thesis_table_5_3, try_simulate, BatchService, Dist, Policy,
    Service, SimResult, THESIS_REQUESTS,
};
use crate::stats;

fn rel_err(got: f64, want: f64) -> f64 {
    (got - want).abs() / want
}

/// Mean over the thesis's protocol: five runs of 2500 requests (seeds 1..=5).
fn thesis_protocol(lambda: f64, policy: Policy) -> (f64, bool) {
    let runs: Vec<SimResult> = (1..=5)
        .map(|seed| {
            simulate(
                lambda,
                policy,
                BatchService::thesis(),
                THESIS_REQUESTS,
                seed,
            )
        })
        .collect();
    let means: Vec<f64> = runs.iter().map(|r| r.mean_turnaround).collect();
    (stats::mean(&means), runs.iter().any(|r| r.saturated))
}

/// M/M/1: exponential service, one request at a time; R = D / (1 − ρ) (which is also the ICPE
/// open model). Tolerances ±2 %, ±3 %, ±5 % at ρ = 0.3, 0.6, 0.8 with 400 000 requests: the
/// 100-seed spread of the error is 0.3 %, 0.7 % and 1.5 % (sd) there.
#[test]
fn mm1_matches_formula_at_three_loads() {
    let d = 0.5;
    for (rho, tol) in [(0.3, 0.02), (0.6, 0.03), (0.8, 0.05)] {
        let lambda = rho / d;
        let r = simulate(lambda, Policy::None, Service::Exponential(d), 400_000, 42);
        let want = d / (1.0 - rho);
        assert_eq!(open_model_response(lambda, d), Some(want));
        let err = rel_err(r.mean_turnaround, want);
        assert!(
            err < tol,
            "ρ = {rho}: simulated {:.4} s, M/M/1 {want:.4} s, error {:.2} % > {} %",
            r.mean_turnaround,
            err * 100.0,
            tol * 100.0
        );
        assert!(
            rel_err(r.utilisation, rho) < 0.02,
            "utilisation {}",
            r.utilisation
        );
        // The sojourn time of M/M/1 is exponential with mean R: median R·ln 2, p95 R·ln 20.
        assert!(rel_err(r.p50, want * std::f64::consts::LN_2) < tol);
        assert!(rel_err(r.p95, want * 20f64.ln()) < tol);
        assert!(!r.saturated);
        assert_eq!(r.completed, 400_000);
        assert_eq!(r.measured, 360_000);
    }
}

/// M/D/1 (the thesis's executor slept for the mean: deterministic service): the
/// Pollaczek-Khinchine mean, R = D + ρD / (2(1 − ρ)). At ρ = 0.7 with D = 0.933 s, R = 2.0215 s;
/// seed spread 0.7 % (sd), tolerance 3 %.
#[test]
fn md1_matches_pollaczek_khinchine() {
    let d = 0.933;
    let rho = 0.7;
    let r = simulate(rho / d, Policy::None, Service::Deterministic(d), 200_000, 7);
    let want = d + rho * d / (2.0 * (1.0 - rho));
    assert!(
        rel_err(r.mean_turnaround, want) < 0.03,
        "simulated {} s, P-K {want} s",
        r.mean_turnaround
    );
    // Nobody is faster than the service time itself.
    assert!(r.p50 >= d - 1e-9);
    // And the same queue with exponential service waits twice as long (P-K: (1 + C²)/2).
    let m = simulate(rho / d, Policy::None, Service::Exponential(d), 200_000, 7);
    let wq_det = r.mean_turnaround - d;
    let wq_exp = m.mean_turnaround - d;
    assert!(
        rel_err(wq_exp / wq_det, 2.0) < 0.1,
        "ratio {}",
        wq_exp / wq_det
    );
}

/// The thesis's fixed batch of 5 at λ = 0.1/s: each request waits for the rest of its batch to
/// arrive, on average (0+1+2+3+4)/5 = 2 inter-arrival times = 2/λ = 20 s, then 1.552 s for the
/// batch; queueing of batches is negligible at this load. No batching is M/D/1 at ρ = 0.093:
/// 0.981 s. The thesis measured 21.56 s vs 0.982 s.
#[test]
fn fixed_batch_of_5_at_low_load_waits_for_arrivals() {
    let s = BatchService::thesis();
    let lambda = 0.1;
    let fixed = simulate(lambda, Policy::Fixed(5), s, 20_000, 11);
    let none = simulate(lambda, Policy::None, s, 20_000, 11);
    let formation = 2.0 / lambda + s.mean(5);
    assert!(
        rel_err(fixed.mean_turnaround, formation) < 0.04,
        "fixed(5): {} s, expected ≈ {formation} s",
        fixed.mean_turnaround
    );
    let md1 = 0.933 + 0.0933 * 0.933 / (2.0 * (1.0 - 0.0933));
    assert!(rel_err(none.mean_turnaround, md1) < 0.01);
    assert!(fixed.mean_turnaround > 15.0 * none.mean_turnaround);
    assert_eq!(fixed.mean_batch, 5.0);
    // Against the thesis's own numbers.
    assert!(rel_err(fixed.mean_turnaround, 21.56) < 0.04);
    assert!(rel_err(none.mean_turnaround, 0.982) < 0.01);
}

/// Adaptive batching (send whatever waits when the server is free) at the loads where the thesis
/// found no-batching better: never worse than no-batching by more than 1 %, on the same arrival
/// sequence; clearly better once queues form.
#[test]
fn adaptive_never_worse_than_none_at_low_load() {
    let s = BatchService::thesis();
    for lambda in [0.1, 0.3, 0.5, 0.7, 0.9] {
        for seed in 1..=3 {
            let none = simulate(lambda, Policy::None, s, 20_000, seed);
            let adaptive = simulate(lambda, Policy::Adaptive { max_batch: 5 }, s, 20_000, seed);
            let fixed = simulate(lambda, Policy::Fixed(5), s, 20_000, seed);
            assert!(
                adaptive.mean_turnaround <= none.mean_turnaround * 1.01,
                "λ = {lambda}: adaptive {} s vs none {} s",
                adaptive.mean_turnaround,
                none.mean_turnaround
            );
            assert!(adaptive.mean_turnaround < fixed.mean_turnaround);
        }
    }
    // At λ = 0.9 (ρ = 0.84 without batching) batching what waits already pays a lot.
    let none = simulate(0.9, Policy::None, s, 100_000, 5);
    let adaptive = simulate(0.9, Policy::Adaptive { max_batch: 5 }, s, 100_000, 5);
    assert!(adaptive.mean_turnaround < 0.6 * none.mean_turnaround);
    assert!(adaptive.mean_batch > 1.0);
}

/// λ = 1.5/s with the thesis's service times: no batching saturates (ρ = 1.40; the thesis's
/// 350.56 s is a transient of a 2500-request run), the fixed batch and adaptive batching are
/// stable, adaptive with the lower turnaround.
#[test]
fn adaptive_stable_where_none_saturates() {
    let s = BatchService::thesis();
    let lambda = 1.5;
    let none = simulate(lambda, Policy::None, s, THESIS_REQUESTS, 3);
    let adaptive = simulate(lambda, Policy::Adaptive { max_batch: 5 }, s, 100_000, 3);
    let fixed = simulate(lambda, Policy::Fixed(5), s, 100_000, 3);
    assert!(none.saturated);
    // The backlog grows at λ − 1/0.933 = 0.43 requests/s over 2500/1.5 = 1667 s: ≈ 700.
    assert!(
        (500..900).contains(&none.backlog_at_end),
        "backlog {}",
        none.backlog_at_end
    );
    assert!(none.mean_turnaround > 100.0);
    assert!(!adaptive.saturated && !fixed.saturated);
    assert!(
        adaptive.mean_turnaround < 5.0,
        "{}",
        adaptive.mean_turnaround
    );
    assert!(adaptive.mean_turnaround < fixed.mean_turnaround);
    assert!(adaptive.backlog_at_end < 50);
    // A longer no-batching run is worse still: saturation, not a property of the system.
    let longer = simulate(lambda, Policy::None, s, 4 * THESIS_REQUESTS, 3);
    assert!(longer.mean_turnaround > 3.0 * none.mean_turnaround);
}

/// The saturation flag follows the capacities: 1/0.933 = 1.07/s without batching, 5/1.552 =
/// 3.22/s for batches of 5.
#[test]
fn saturation_flags() {
    let s = BatchService::thesis();
    let flag = |lambda, policy| simulate(lambda, policy, s, THESIS_REQUESTS, 1).saturated;
    assert!(!flag(1.0, Policy::None));
    assert!(flag(1.1, Policy::None));
    assert!(!flag(3.0, Policy::Fixed(5)));
    assert!(flag(3.5, Policy::Fixed(5)));
    assert!(flag(3.5, Policy::Adaptive { max_batch: 5 }));
    assert!(!flag(3.5, Policy::Adaptive { max_batch: 10 }));
}

#[test]
fn deterministic_for_a_seed() {
    let s = BatchService::thesis();
    for policy in [
        Policy::None,
        Policy::Fixed(5),
        Policy::Adaptive { max_batch: 5 },
    ] {
        let a = simulate(0.8, policy, s, 10_000, 123);
        let b = simulate(0.8, policy, s, 10_000, 123);
        let c = simulate(0.8, policy, s, 10_000, 124);
        assert_eq!(a, b);
        assert_ne!(a.mean_turnaround, c.mean_turnaround);
    }
    let e = Service::Exponential(1.0);
    assert_eq!(
        simulate(0.5, Policy::None, e, 10_000, 5),
        simulate(0.5, Policy::None, e, 10_000, 5)
    );
    // Adaptive with a batch bound of 1 is no-batching, request for request (same arrivals and
    // service draws for the same seed).
    assert_eq!(
        simulate(0.8, Policy::None, e, 10_000, 77),
        simulate(0.8, Policy::Adaptive { max_batch: 1 }, e, 10_000, 77)
    );
}

#[test]
fn warmup_is_discarded() {
    let s = Service::Exponential(1.0);
    let all = try_simulate(0.5, Policy::None, s, 1000, 1, 0.0);
    let most = try_simulate(0.5, Policy::None, s, 1000, 1, 0.25);
    let (all, most) = match (all, most) {
        (Ok(a), Ok(m)) => (a, m),
        other => panic!("{other:?}"),
    };
    assert_eq!(all.measured, 1000);
    assert_eq!(most.measured, 750);
    assert_eq!(all.completed, most.completed);
    assert_ne!(all.mean_turnaround, most.mean_turnaround);
}

/// The thesis's Table 5.3, reproduced with its protocol (five runs of 2500 requests, service
/// 0.933 s / 1.552 s, deterministic): within 5 % wherever the thesis's system was stable and in
/// steady state. Left out: no-batching at λ = 1.0 and 1.5 and batching at 3.5, whose values are
/// transients of saturated or nearly saturated 2500-request runs (they must merely be large),
/// and batching at 0.3, where the thesis is 2 % below the 2/λ + 1.552 = 8.22 s that the
/// formation delay alone implies (tolerance 5 % covers it).
#[test]
fn reproduces_thesis_table_5_3() {
    for (lambda, batching, none) in thesis_table_5_3() {
        let (fixed, fixed_sat) = thesis_protocol(lambda, Policy::Fixed(5));
        if let Some(t) = batching {
            if lambda < 3.5 {
                assert!(!fixed_sat, "λ = {lambda}");
                assert!(
                    rel_err(fixed, t) < 0.05,
                    "batching λ = {lambda}: simulated {fixed:.3} s, thesis {t} s"
                );
            } else {
                assert!(fixed_sat && fixed > 10.0);
            }
        }
        let (no, no_sat) = thesis_protocol(lambda, Policy::None);
        match none {
            Some(t) if lambda < 1.0 => {
                assert!(!no_sat);
                assert!(
                    rel_err(no, t) < 0.10,
                    "no batching λ = {lambda}: simulated {no:.3} s, thesis {t} s"
                );
            }
            Some(t) => assert!(no > t.min(5.0), "λ = {lambda}: {no} s"),
            None => assert!(no_sat),
        }
    }
}

#[test]
fn thesis_table_shape() {
    let t = thesis_table_5_3();
    assert_eq!(t.len(), 11);
    assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(t[0], (0.1, Some(21.56), Some(0.982)));
    assert_eq!(t[6], (1.5, Some(2.90), Some(350.56)));
    assert!(t.iter().all(|r| r.1.is_some()));
    assert!(t.iter().all(|r| r.2.is_none() == (r.0 >= 2.0)));
}

/// The ICPE Figure 7 shape: with the sieve's smaller demand the gap to secure-only widens with
/// λ, without bound as secure-only nears saturation.
#[test]
fn open_model_gap_widens() {
    let (d_sieve, d_so) = (0.1, 0.3);
    let ratio = |l: f64| match (
        open_model_response(l, d_so),
        open_model_response(l, d_sieve),
    ) {
        (Some(so), Some(ss)) => so / ss,
        _ => f64::INFINITY,
    };
    assert!((ratio(0.0) - 3.0).abs() < 1e-12);
    assert!(ratio(1.0) < ratio(2.0) && ratio(2.0) < ratio(3.0));
    assert!(ratio(3.3) > 10.0);
    assert_eq!(open_model_response(1.0 / d_so, d_so), None);
}

/// An affine service fitted through two points reproduces them, with either shape.
#[test]
fn batch_service_fit() {
    let s = BatchService::through(2.0, 4, 3.5, Dist::Exponential);
    assert!((s.mean(1) - 2.0).abs() < 1e-12 && (s.mean(4) - 3.5).abs() < 1e-12);
    assert_eq!(s.for_batch(4), Service::Exponential(3.5));
}

/// Seed-to-seed spread of the simulated means that the tolerances above are based on.
/// `cargo test --release -p sieve-lab --test queue -- --ignored --nocapture`
#[test]
#[ignore]
fn seed_spread() {
    for rho in [0.3, 0.6, 0.8] {
        let errs: Vec<f64> = (0..100)
            .map(|seed| {
                let r = simulate(rho, Policy::None, Service::Exponential(1.0), 400_000, seed);
                (r.mean_turnaround * (1.0 - rho) - 1.0) * 100.0
            })
            .collect();
        let worst = errs.iter().fold(0.0_f64, |a, e| a.max(e.abs()));
        println!(
            "M/M/1 ρ = {rho}: error mean {:+.2} %, sd {:.2} %, worst {:.2} %",
            stats::mean(&errs),
            stats::stddev(&errs),
            worst
        );
    }
}

/// Prints the simulated Table 5.3 beside the thesis's (for the lab's report).
/// `cargo test --release -p sieve-lab --test queue -- --ignored --nocapture`
#[test]
#[ignore]
fn print_table_5_3() {
    let lambdas = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5];
    let thesis = thesis_table_5_3();
    let fmt = |(m, sat): (f64, bool)| format!("{m:>8.3}{}", if sat { "*" } else { " " });
    let opt = |o: Option<f64>| o.map_or("       -".to_string(), |v| format!("{v:>8.3}"));
    println!(
        "|   λ | thesis batch5 | thesis none | sim Fixed(5) | sim None | sim Adaptive{{5}} | sim Adaptive{{20}} | open model (D=0.933) |"
    );
    for l in lambdas {
        let row = thesis.iter().find(|r| (r.0 - l).abs() < 1e-9);
        let (tb, tn) = row.map_or((None, None), |r| (r.1, r.2));
        println!(
            "| {l:>3} | {} | {} | {} | {} | {} | {} | {} |",
            opt(tb),
            opt(tn),
            fmt(thesis_protocol(l, Policy::Fixed(5))),
            fmt(thesis_protocol(l, Policy::None)),
            fmt(thesis_protocol(l, Policy::Adaptive { max_batch: 5 })),
            fmt(thesis_protocol(l, Policy::Adaptive { max_batch: 20 })),
            opt(open_model_response(l, 0.933)),
        );
    }
}
