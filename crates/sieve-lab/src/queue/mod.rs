//! Arrival streams: a seeded discrete-event simulation of file-transfer requests arriving as a
//! Poisson stream at one sender, with and without batching (thesis §5.4.4, Table 5.3,
//! Figures 5.17-5.18), and the open queueing model of the ICPE paper (eq. 1a/1b, Figure 7).
//!
//! # Why simulate
//! The thesis did not measure a loaded sender; it took the mean *total* time of one 1MB-50
//! transfer (933 ms) and of a batch of five (1552 ms) from its earlier experiments and let a
//! Java executor `Thread.sleep()` for that long per request or per batch while a generator thread
//! slept for exponential inter-arrival times. We do the same with an event-exact simulation
//! instead of wall-clock sleeps: it is deterministic for a seed, runs 10⁵ requests in
//! milliseconds, and has no timer jitter. Plugging in today's measured service times is the lab's
//! job; [`BatchService::thesis`] reproduces the thesis's.
//!
//! # Model
//! One server (the sender with its channels) serves batches first come, first served. A batch of
//! `k` requests takes `per_batch + per_file · k` seconds on average ([`BatchService`]):
//! connection set-up and the other fixed costs are paid once per batch, which is why batching
//! raises capacity. All requests of a batch complete when the batch does. The turnaround of a
//! request is its completion time minus its arrival time: batch formation delay, queueing delay
//! and the transfer itself, as the thesis defines it.
//!
//! The three [`Policy`] values are the thesis's two systems and the design's replacement for
//! the fixed batch (docs/DESIGN.md §4): send whatever is waiting whenever the server is free. That
//! policy needs no tuning: at low load it sends single files (it *is* no-batching), at high load
//! batches grow by themselves up to `max_batch`, and so it keeps batching's capacity.
//!
//! # How the simulation runs
//! With one FCFS server the event order is fixed by the arrival order, so the event loop reduces
//! to Lindley's recursion over batches: a batch starts at `max(server free, batch ready)`. That is
//! exact (no time step) and O(n). Arrivals and service times come from two independent seeded
//! streams, so two policies simulated with the same seed see the *same* arrival sequence
//! (common random numbers): differences between them are the policies', not the dice's.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use serde::Serialize;

use crate::stats;

/// Mean total time of one 1MB-50 transfer in the thesis's Table 5.3 simulation (933 ms).
pub(crate) const THESIS_SINGLE_S: f64 = 0.933;
/// Mean total time of a batch of five 1MB-50 files in the thesis's simulation (1552 ms).
pub(crate) const THESIS_BATCH5_S: f64 = 1.552;
/// Number of requests per experiment in the thesis's simulation (2500, five runs each).
#[cfg(test)]
pub(crate) const THESIS_REQUESTS: usize = 2500;
/// Share of requests (by arrival order) left out of the statistics by [`simulate`], so that a
/// run starting from an empty system measures something closer to steady state.
pub(crate) const WARMUP_FRACTION: f64 = 0.1;

/// Service-time distribution of one unit of work, with its mean in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) enum Service {
    /// Always exactly this long: the thesis's executor slept for the mean total time.
    Deterministic(f64),
    /// Exponentially distributed with this mean: the M/M/1 textbook case.
    Exponential(f64),
}

impl Service {
    /// Mean service time in seconds.
    pub(crate) fn mean(&self) -> f64 {
        match *self {
            Service::Deterministic(m) | Service::Exponential(m) => m,
        }
    }

    /// Draws one service time.
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match *self {
            Service::Deterministic(m) => m,
            Service::Exponential(m) => {
                let e: f64 = rng.sample(Exp1);
                m * e
            }
        }
    }
}

/// Shape of the batch service-time distribution (its mean comes from [`BatchService`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Dist {
    /// Every batch of `k` takes exactly its mean.
    Deterministic,
    /// Exponential with the batch's mean.
    Exponential,
}

/// Service time of a batch: mean `per_batch + per_file · k` seconds for `k` requests, with
/// distribution shape `dist`.
///
/// The affine form is the simplest that separates what a batch pays once (connection, handshake,
/// manifest) from what each file pays (sieving, encrypting, sending); two measurements fix it
/// ([`BatchService::through`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct BatchService {
    /// Seconds paid once per batch.
    pub(crate) per_batch: f64,
    /// Seconds paid per request in the batch.
    pub(crate) per_file: f64,
    /// Distribution shape.
    pub(crate) dist: Dist,
}

impl BatchService {
    /// A batch service with explicit coefficients.
    pub(crate) fn new(per_batch: f64, per_file: f64, dist: Dist) -> Self {
        Self {
            per_batch,
            per_file,
            dist,
        }
    }

    /// The line through two measurements: one file takes `single` seconds and a batch of `k`
    /// files takes `batch` seconds. `k` must be at least 2 (checked when simulating: a `k` below
    /// 2 yields NaN coefficients, which [`try_simulate`] rejects).
    pub(crate) fn through(single: f64, k: usize, batch: f64, dist: Dist) -> Self {
        let per_file = (batch - single) / (k as f64 - 1.0);
        let per_file = if k >= 2 { per_file } else { f64::NAN };
        Self::new(single - per_file, per_file, dist)
    }

    /// The thesis's Table 5.3 service: deterministic, 0.933 s for one file and 1.552 s for five,
    /// hence 0.778 s per batch plus 0.155 s per file.
    pub(crate) fn thesis() -> Self {
        Self::through(THESIS_SINGLE_S, 5, THESIS_BATCH5_S, Dist::Deterministic)
    }

    /// Mean service time of a batch of `k` requests, in seconds.
    pub(crate) fn mean(&self, k: usize) -> f64 {
        self.per_batch + self.per_file * k as f64
    }

    /// The service-time distribution of a batch of `k` requests.
    pub(crate) fn for_batch(&self, k: usize) -> Service {
        let m = self.mean(k);
        match self.dist {
            Dist::Deterministic => Service::Deterministic(m),
            Dist::Exponential => Service::Exponential(m),
        }
    }

    /// The coefficients are usable for batches of 1 to `bound` requests: finite, and a positive
    /// mean time for every such batch. Either coefficient may be negative (a measured fit can
    /// say a batch costs more, or less, than its files sent alone); because the mean is affine
    /// in `k`, checking both ends covers every size in between.
    fn validate(&self, bound: usize) -> Result<(), SimError> {
        let ok = self.per_batch.is_finite()
            && self.per_file.is_finite()
            && self.mean(1) > 0.0
            && self.mean(bound) > 0.0;
        if ok {
            Ok(())
        } else {
            Err(SimError::InvalidService {
                per_batch: self.per_batch,
                per_file: self.per_file,
            })
        }
    }
}

/// A single-request service time as a batch service that gains nothing from batching
/// (`per_batch = 0`, `per_file = mean`): a batch of `k` costs `k` single transfers. Used for the
/// textbook queues, where only single requests are served.
impl From<Service> for BatchService {
    fn from(s: Service) -> Self {
        let dist = match s {
            Service::Deterministic(_) => Dist::Deterministic,
            Service::Exponential(_) => Dist::Exponential,
        };
        Self::new(0.0, s.mean(), dist)
    }
}

/// When the sender sends, and how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Policy {
    /// One request at a time, FCFS: the thesis's "no batching".
    None,
    /// The thesis's batching: wait until `n` requests are queued, send them as one batch. A
    /// final partial batch is never sent (the policy has no timeout), so its requests do not
    /// complete.
    Fixed(usize),
    /// Whenever the server is free, send everything waiting (up to `max_batch`) as one batch;
    /// an idle server sends an arriving request at once (docs/DESIGN.md §4).
    Adaptive {
        /// Largest batch sent at once.
        max_batch: usize,
    },
}

impl Policy {
    /// Largest throughput (requests per second) the policy can sustain with `service`: the
    /// queue is stable only for `λ` below this. For [`Policy::Adaptive`] it is the best over
    /// the batch sizes the policy may use (the affine mean makes that an end point).
    pub(crate) fn capacity(&self, service: &BatchService) -> f64 {
        let per_request = |k: usize| service.mean(k) / k as f64;
        match *self {
            Policy::None => 1.0 / per_request(1),
            Policy::Fixed(n) => 1.0 / per_request(n),
            Policy::Adaptive { max_batch } => 1.0 / per_request(1).min(per_request(max_batch)),
        }
    }

    fn batch_bound(&self) -> usize {
        match *self {
            Policy::None => 1,
            Policy::Fixed(n) => n,
            Policy::Adaptive { max_batch } => max_batch,
        }
    }
}

/// Result of one simulated run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct SimResult {
    /// Mean turnaround (completion − arrival) in seconds over the measured requests.
    pub(crate) mean_turnaround: f64,
    /// Median turnaround (s).
    pub(crate) p50: f64,
    /// 95th percentile of turnaround (s).
    pub(crate) p95: f64,
    /// 99th percentile of turnaround (s).
    pub(crate) p99: f64,
    /// Share of time the server was busy, from time 0 to the last completion.
    pub(crate) utilisation: f64,
    /// Requests that completed (a [`Policy::Fixed`] run leaves a final partial batch unsent).
    pub(crate) completed: usize,
    /// Requests in the statistics: completed ones after the warm-up.
    pub(crate) measured: usize,
    /// Mean number of requests per batch sent.
    pub(crate) mean_batch: f64,
    /// Requests arrived but not yet started at the moment of the last arrival.
    pub(crate) backlog_at_end: usize,
    /// The queue grows without bound: `λ` is at or above [`Policy::capacity`], or
    /// `backlog_at_end` exceeds `max(100, n/20)` (plus one batch bound). A saturated run's
    /// turnaround is a transient that grows with the run's length, not a property of the system.
    pub(crate) saturated: bool,
}

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SimError {
    /// The arrival rate is not a positive finite number.
    InvalidLambda(f64),
    /// Service coefficients must be finite and give every batch the policy may send a
    /// positive mean time.
    InvalidService {
        /// Offending per-batch time.
        per_batch: f64,
        /// Offending per-file time.
        per_file: f64,
    },
    /// A batch size of 0.
    InvalidPolicy(Policy),
    /// Warm-up fraction outside `[0, 1)`.
    InvalidWarmup(f64),
    /// No request would complete after the warm-up (too few requests).
    NothingMeasured,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::InvalidLambda(l) => write!(f, "arrival rate must be positive, got {l}"),
            SimError::InvalidService {
                per_batch,
                per_file,
            } => write!(
                f,
                "invalid batch service: per_batch {per_batch} s, per_file {per_file} s"
            ),
            SimError::InvalidPolicy(p) => write!(f, "invalid policy {p:?}: batch size 0"),
            SimError::InvalidWarmup(w) => write!(f, "warm-up fraction must be in [0, 1), got {w}"),
            SimError::NothingMeasured => write!(f, "no request completes after the warm-up"),
        }
    }
}

impl std::error::Error for SimError {}

/// Simulates `n_requests` Poisson arrivals at rate `lambda` (requests/s) under `policy`, with
/// batch service times from `service`, discarding the first [`WARMUP_FRACTION`] of requests.
///
/// Deterministic for a given `seed`; two policies with the same seed see the same arrivals.
///
/// # Panics
/// On invalid parameters (non-positive `lambda`, a batch size of 0, service coefficients that
/// give some batch a non-positive or non-finite time, or too few requests to measure any): these are programming errors in the
/// caller's constants. Use [`try_simulate`] to get them as an error instead.
pub(crate) fn simulate(
    lambda: f64,
    policy: Policy,
    service: impl Into<BatchService>,
    n_requests: usize,
    seed: u64,
) -> SimResult {
    match try_simulate(lambda, policy, service, n_requests, seed, WARMUP_FRACTION) {
        Ok(r) => r,
        Err(e) => panic!("simulate: {e}"),
    }
}

/// [`simulate`] with an explicit warm-up fraction, returning invalid parameters as an error.
pub(crate) fn try_simulate(
    lambda: f64,
    policy: Policy,
    service: impl Into<BatchService>,
    n_requests: usize,
    seed: u64,
    warmup_fraction: f64,
) -> Result<SimResult, SimError> {
    let service: BatchService = service.into();
    if !(lambda.is_finite() && lambda > 0.0) {
        return Err(SimError::InvalidLambda(lambda));
    }
    let bound = policy.batch_bound();
    if bound == 0 {
        return Err(SimError::InvalidPolicy(policy));
    }
    service.validate(bound)?;
    if !(0.0..1.0).contains(&warmup_fraction) {
        return Err(SimError::InvalidWarmup(warmup_fraction));
    }
    let n = n_requests;

    // Arrival times: cumulative exponential gaps, from their own stream.
    let mut arrivals_rng = StdRng::seed_from_u64(seed);
    let mut service_rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut t = 0.0;
    let arrival: Vec<f64> = (0..n)
        .map(|_| {
            let gap: f64 = arrivals_rng.sample(Exp1);
            t += gap / lambda;
            t
        })
        .collect();

    // Per request: when its batch started and finished (NaN/infinite = never).
    let mut start = vec![f64::INFINITY; n];
    let mut finish = vec![f64::INFINITY; n];
    let mut server_free = 0.0_f64;
    let mut busy = 0.0_f64;
    let mut batches = 0_usize;
    let mut next = 0_usize; // first request not yet in a batch

    while next < n {
        let (begin, end) = match policy {
            Policy::Fixed(k) => {
                if next + k > n {
                    break; // the final partial batch never forms
                }
                let end = next + k;
                (server_free.max(arrival[end - 1]), end)
            }
            Policy::None | Policy::Adaptive { .. } => {
                let begin = server_free.max(arrival[next]);
                let mut end = next + 1;
                while end < n && end - next < bound && arrival[end] <= begin {
                    end += 1;
                }
                (begin, end)
            }
        };
        let k = end - next;
        let s = service.for_batch(k).sample(&mut service_rng);
        let done = begin + s;
        start[next..end].fill(begin);
        finish[next..end].fill(done);
        busy += s;
        server_free = done;
        batches += 1;
        next = end;
    }
    let completed = next;

    let first_measured = ((warmup_fraction * n as f64).ceil() as usize).min(n);
    let mut turnaround: Vec<f64> = (first_measured..completed)
        .map(|i| finish[i] - arrival[i])
        .collect();
    if turnaround.is_empty() {
        return Err(SimError::NothingMeasured);
    }
    turnaround.sort_by(f64::total_cmp);

    // Backlog at the last arrival: requests whose batch had not started (starts are
    // non-decreasing in arrival order, FCFS).
    let backlog_at_end = match arrival.last() {
        Some(&t_last) => n - start.partition_point(|&s| s <= t_last),
        None => 0,
    };
    let threshold = (n / 20).max(100) + if let Policy::Fixed(k) = policy { k } else { 0 };
    let saturated = lambda >= policy.capacity(&service) || backlog_at_end > threshold;

    Ok(SimResult {
        mean_turnaround: stats::mean(&turnaround),
        p50: stats::quantile_sorted(&turnaround, 0.5),
        p95: stats::quantile_sorted(&turnaround, 0.95),
        p99: stats::quantile_sorted(&turnaround, 0.99),
        utilisation: if server_free > 0.0 {
            busy / server_free
        } else {
            0.0
        },
        completed,
        measured: turnaround.len(),
        mean_batch: completed as f64 / batches.max(1) as f64,
        backlog_at_end,
        saturated,
    })
}

/// Mean response time of the ICPE paper's open queueing model (eq. 1a/1b), `R = D / (1 − λD)`:
/// one queueing centre with service demand `demand` (s) under Poisson arrivals at `lambda`
/// (requests/s), the M/M/1 mean response time. `None` when the centre saturates (`λD ≥ 1`) or an
/// input is negative or not finite.
pub(crate) fn open_model_response(lambda: f64, demand: f64) -> Option<f64> {
    if !(lambda.is_finite() && demand.is_finite() && lambda >= 0.0 && demand >= 0.0) {
        return None;
    }
    let rho = lambda * demand;
    (rho < 1.0).then(|| demand / (1.0 - rho))
}

/// The thesis's Table 5.3 (§5.4.4): rows of `(λ in requests/s, mean turnaround with a fixed batch
/// of 5, without batching)` in seconds.
///
/// `None` where the thesis has no entry: no-batching for λ ≥ 2, which it calls saturated. Note
/// that some printed values are themselves transients of saturated runs of 2500 requests and
/// would grow with a longer run: no-batching at λ = 1.5 (ρ = 1.40, 350.56 s) and batching at
/// λ = 3.5 (ρ = 1.09, 30.39 s). No-batching at λ = 1.0 (ρ = 0.93, 8.36 s) is stable but far from
/// steady state in so short a run.
pub(crate) fn thesis_table_5_3() -> Vec<(f64, Option<f64>, Option<f64>)> {
    vec![
        (0.1, Some(21.56), Some(0.982)),
        (0.3, Some(8.06), Some(1.12)),
        (0.5, Some(5.52), Some(1.35)),
        (0.7, Some(4.42), Some(1.76)),
        (0.9, Some(3.77), Some(3.13)),
        (1.0, Some(3.53), Some(8.36)),
        (1.5, Some(2.90), Some(350.56)),
        (2.0, Some(2.67), None),
        (2.5, Some(2.71), None),
        (3.0, Some(3.64), None),
        (3.5, Some(30.39), None),
    ]
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn thesis_service_fit() {
        let s = BatchService::thesis();
        assert!((s.mean(1) - 0.933).abs() < 1e-12);
        assert!((s.mean(5) - 1.552).abs() < 1e-12);
        assert!((s.per_file - 0.15475).abs() < 1e-12);
        assert!((s.per_batch - 0.77825).abs() < 1e-12);
        assert_eq!(s.for_batch(5), Service::Deterministic(s.mean(5)));
    }

    #[test]
    fn capacities_match_the_thesis_saturation_points() {
        let s = BatchService::thesis();
        // No batching saturates at 1/0.933 = 1.07 req/s, a batch of 5 at 5/1.552 = 3.22 req/s
        // (the thesis: "saturated above 1.0" and "when λ is greater than approximately 3").
        assert!((Policy::None.capacity(&s) - 1.0 / 0.933).abs() < 1e-9);
        assert!((Policy::Fixed(5).capacity(&s) - 5.0 / 1.552).abs() < 1e-9);
        assert_eq!(
            Policy::Adaptive { max_batch: 5 }.capacity(&s),
            Policy::Fixed(5).capacity(&s)
        );
        assert_eq!(
            Policy::Adaptive { max_batch: 1 }.capacity(&s),
            Policy::None.capacity(&s)
        );
    }

    #[test]
    fn open_model() {
        assert_eq!(open_model_response(0.0, 0.5), Some(0.5));
        let r = open_model_response(1.0, 0.5).unwrap_or(f64::NAN);
        assert!((r - 1.0).abs() < 1e-12);
        assert_eq!(open_model_response(2.0, 0.5), None);
        assert_eq!(open_model_response(3.0, 0.5), None);
        assert_eq!(open_model_response(-1.0, 0.5), None);
        assert_eq!(open_model_response(f64::NAN, 0.5), None);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        let s = Service::Exponential(1.0);
        let run = |l, p, n, w| try_simulate(l, p, s, n, 1, w);
        assert_eq!(
            run(0.0, Policy::None, 10, 0.1),
            Err(SimError::InvalidLambda(0.0))
        );
        assert!(run(f64::NAN, Policy::None, 10, 0.1).is_err());
        assert_eq!(
            run(1.0, Policy::Fixed(0), 10, 0.1),
            Err(SimError::InvalidPolicy(Policy::Fixed(0)))
        );
        assert!(run(1.0, Policy::None, 10, 1.0).is_err());
        assert_eq!(
            run(1.0, Policy::None, 0, 0.1),
            Err(SimError::NothingMeasured)
        );
        // A batch of 5 never forms from 3 requests.
        assert_eq!(
            run(1.0, Policy::Fixed(5), 3, 0.0),
            Err(SimError::NothingMeasured)
        );
        let bad = BatchService::new(-1.0, 0.5, Dist::Deterministic);
        assert!(try_simulate(1.0, Policy::None, bad, 10, 1, 0.1).is_err());
        let bad = BatchService::through(1.0, 1, 2.0, Dist::Deterministic);
        assert!(try_simulate(1.0, Policy::None, bad, 10, 1, 0.1).is_err());
        // A measured fit may have a negative coefficient; it is fine while every batch the
        // policy can send still takes a positive time.
        let dearer = BatchService::through(1.0, 5, 5.5, Dist::Deterministic); // per_batch < 0
        assert!(try_simulate(0.5, Policy::Adaptive { max_batch: 50 }, dearer, 100, 1, 0.1).is_ok());
        let shrinking = BatchService::through(1.0, 5, 0.5, Dist::Deterministic); // per_file < 0
        assert!(try_simulate(0.5, Policy::Fixed(5), shrinking, 100, 1, 0.1).is_ok());
        assert!(try_simulate(
            0.5,
            Policy::Adaptive { max_batch: 100 },
            shrinking,
            100,
            1,
            0.1
        )
        .is_err());
    }

    #[test]
    fn small_hand_checked_run() {
        // Deterministic 1 s service, one request at a time: each request's turnaround is at
        // least 1 s, and exactly 1 s when it finds the server idle.
        let r = try_simulate(0.01, Policy::None, Service::Deterministic(1.0), 50, 3, 0.0);
        let r = r.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.completed, 50);
        assert_eq!(r.measured, 50);
        assert!(r.p50 >= 1.0 - 1e-12 && r.mean_turnaround < 1.1);
        assert_eq!(r.mean_batch, 1.0);
        // A fixed batch of 4 from 10 requests sends two batches; 2 requests never complete.
        let r = try_simulate(
            1.0,
            Policy::Fixed(4),
            Service::Deterministic(1.0),
            10,
            3,
            0.0,
        );
        let r = r.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.completed, 8);
        assert_eq!(r.mean_batch, 4.0);
    }
}

#[cfg(test)]
mod tests;
