//! runtimed's Prometheus metrics (`--metrics-bind-address`): admissions, how long a Scheduled
//! Run waits to be claimed, how long a claimed Run takes to start, what the Pod holds, and
//! status-write retries.
//!
//! Label values come from fixed sets (results, writes) or from the Pod's own capacity
//! annotation (resource names, a handful set by the Runtime's author); never a Run, Pod or
//! namespace name. This module only records; the agent decides when.

use std::collections::BTreeSet;

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts};

use crate::api::Resources;

/// Results of `kruntimes_runtimed_admissions_total`.
pub const ADMITTED: &str = "admitted";
/// The Run did not fit (counted once per Run and distinct reason, as its Waiting Event).
pub const WAITING: &str = "waiting";
/// The Run was failed without running: an invalid request or task.
pub const REJECTED: &str = "rejected";
/// The claim write lost to a newer version of the Run (409) or to its deletion (404).
pub const CONFLICT: &str = "conflict";
/// The claim write failed otherwise (an API error or an unknown outcome).
pub const ERROR: &str = "error";
pub const RESULTS: [&str; 5] = [ADMITTED, WAITING, REJECTED, CONFLICT, ERROR];

/// Writes of `kruntimes_runtimed_status_write_retries_total`.
pub const WRITE_CLAIM: &str = "claim";
pub const WRITE_TERMINAL: &str = "terminal";
/// A function Run's Running → Ready.
pub const WRITE_READY: &str = "ready";

#[derive(Clone)]
pub struct RuntimedMetrics {
    pub admissions: IntCounterVec,
    pub admission_wait: Histogram,
    pub dispatch: Histogram,
    pub active_runs: IntGauge,
    pub reserved: IntGaugeVec,
    pub capacity: IntGaugeVec,
    pub status_write_retries: IntCounterVec,
    /// The Go project's runtimed series, same names and meaning (no `runtime` label: one
    /// runtimed serves one Runtime, and the scrape's target labels name its Pod).
    pub runs: IntCounterVec,
    pub run_duration: Histogram,
    pub run_retries: IntCounterVec,
    pub run_failures: IntCounterVec,
    /// The resources `reserved` and `capacity` have series for.
    published: BTreeSet<String>,
}

/// The `result` of `kruntimes_runtimed_runs_total`: a Run's terminal phase, lower case.
pub fn result_of(outcome: crate::api::status::Outcome) -> &'static str {
    use crate::api::status::Outcome;
    match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
        Outcome::Timeout => "timeout",
        Outcome::Cancelled => "cancelled",
    }
}

impl RuntimedMetrics {
    /// Creates the metrics and registers them with `registry`.
    pub fn register(registry: &impl crate::telemetry::metrics::Sink) -> prometheus::Result<Self> {
        let buckets = vec![
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            60.0, 300.0,
        ];
        let histogram = |name: &str, help: &str| {
            Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.clone()))
        };
        let metrics = Self {
            admissions: IntCounterVec::new(
                Opts::new(
                    "kruntimes_runtimed_admissions_total",
                    "Admission outcomes of Scheduled Runs: admitted (claimed), waiting (did not fit, once per Run and reason), rejected (failed without running), conflict (the Run changed or went away before the claim landed), error.",
                ),
                &["result"],
            )?,
            admission_wait: histogram(
                "kruntimes_runtimed_admission_wait_seconds",
                "From when runtimed first sees a Run Scheduled on its Pod until it is admitted: its claim (Running) written, or its task started with the claim held back (`--claim-delay`).",
            )?,
            dispatch: histogram(
                "kruntimes_runtimed_dispatch_seconds",
                "From the admission until the Run's execution has started (zero with the claim held back: the task starts at once).",
            )?,
            active_runs: IntGauge::new(
                "kruntimes_runtimed_active_runs",
                "Runs holding a reservation on this Pod (claiming, running, or writing their terminal status).",
            )?,
            reserved: IntGaugeVec::new(
                Opts::new(
                    "kruntimes_runtimed_reserved_resources",
                    "Logical resources reserved by admitted Runs, by resource of the Pod's capacity.",
                ),
                &["resource"],
            )?,
            capacity: IntGaugeVec::new(
                Opts::new(
                    "kruntimes_runtimed_capacity_resources",
                    "The Pod's annotated capacity, by resource.",
                ),
                &["resource"],
            )?,
            status_write_retries: IntCounterVec::new(
                Opts::new(
                    "kruntimes_runtimed_status_write_retries_total",
                    "Status writes attempted again after a failure or conflict, by write (claim or terminal).",
                ),
                &["write"],
            )?,
            runs: IntCounterVec::new(
                Opts::new(
                    "kruntimes_runtimed_runs_total",
                    "Runs this runtimed ended, by result (succeeded, failed, timeout, cancelled); a failed attempt that is retried is not an end.",
                ),
                &["result"],
            )?,
            run_duration: histogram(
                "kruntimes_runtimed_run_duration_seconds",
                "From a Run's start (its first attempt's claim) until runtimed ended it.",
            )?,
            run_retries: IntCounterVec::new(
                Opts::new(
                    "kruntimes_runtimed_run_retries_total",
                    "Failed attempts runtimed retried (spec.retryPolicy), by the attempt's reason.",
                ),
                &["reason"],
            )?,
            run_failures: IntCounterVec::new(
                Opts::new(
                    "kruntimes_runtimed_run_failures_total",
                    "Runs this runtimed ended other than Succeeded, by phase and reason.",
                ),
                &["phase", "reason"],
            )?,
            published: BTreeSet::new(),
        };
        registry.register(Box::new(metrics.admissions.clone()))?;
        registry.register(Box::new(metrics.admission_wait.clone()))?;
        registry.register(Box::new(metrics.dispatch.clone()))?;
        registry.register(Box::new(metrics.active_runs.clone()))?;
        registry.register(Box::new(metrics.reserved.clone()))?;
        registry.register(Box::new(metrics.capacity.clone()))?;
        registry.register(Box::new(metrics.status_write_retries.clone()))?;
        registry.register(Box::new(metrics.runs.clone()))?;
        registry.register(Box::new(metrics.run_duration.clone()))?;
        registry.register(Box::new(metrics.run_retries.clone()))?;
        registry.register(Box::new(metrics.run_failures.clone()))?;
        // Bounded label sets start at zero so dashboards see every series from the start.
        for result in RESULTS {
            metrics.admissions.with_label_values(&[result]);
        }
        for write in [WRITE_CLAIM, WRITE_TERMINAL, WRITE_READY] {
            metrics.status_write_retries.with_label_values(&[write]);
        }
        Ok(metrics)
    }

    /// Publishes what the Pod holds: the number of reservations, and per resource of the
    /// capacity the reserved amount and the capacity. The series of a resource the capacity no
    /// longer names are removed (the label set follows the annotation); the others are set in
    /// place, so a scrape never sees them missing.
    pub fn set_holdings(
        &mut self,
        reservations: usize,
        used: &Resources,
        capacity: Option<&Resources>,
    ) {
        self.active_runs.set(saturating_i64(reservations as u64));
        let names: BTreeSet<String> = capacity
            .into_iter()
            .flat_map(Resources::iter)
            .map(|(name, _)| name.to_string())
            .collect();
        for gone in self.published.difference(&names) {
            let _ = self.capacity.remove_label_values(&[gone]);
            let _ = self.reserved.remove_label_values(&[gone]);
        }
        for (name, amount) in capacity.into_iter().flat_map(Resources::iter) {
            self.capacity
                .with_label_values(&[name])
                .set(saturating_i64(amount));
            self.reserved
                .with_label_values(&[name])
                .set(saturating_i64(used.get(name)));
        }
        self.published = names;
    }
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Registry;

    #[test]
    fn every_series_is_exposed_with_bounded_labels() {
        let registry = Registry::new();
        let mut m = RuntimedMetrics::register(&registry).unwrap();
        m.admissions.with_label_values(&[ADMITTED]).inc();
        m.admission_wait.observe(0.01);
        m.dispatch.observe(0.002);
        let capacity: Resources = [("runs", 4), ("example.com/gpu", 1)].into_iter().collect();
        let used: Resources = [("runs", 3)].into_iter().collect();
        m.set_holdings(3, &used, Some(&capacity));
        let text = crate::telemetry::metrics::render(&registry);
        for line in [
            "kruntimes_runtimed_admissions_total{result=\"admitted\"} 1",
            "kruntimes_runtimed_admissions_total{result=\"waiting\"} 0",
            "kruntimes_runtimed_admissions_total{result=\"rejected\"} 0",
            "kruntimes_runtimed_admissions_total{result=\"conflict\"} 0",
            "kruntimes_runtimed_admissions_total{result=\"error\"} 0",
            "kruntimes_runtimed_admission_wait_seconds_count 1",
            "kruntimes_runtimed_dispatch_seconds_count 1",
            "kruntimes_runtimed_active_runs 3",
            "kruntimes_runtimed_reserved_resources{resource=\"runs\"} 3",
            "kruntimes_runtimed_reserved_resources{resource=\"example.com/gpu\"} 0",
            "kruntimes_runtimed_capacity_resources{resource=\"runs\"} 4",
            "kruntimes_runtimed_status_write_retries_total{write=\"claim\"} 0",
            "kruntimes_runtimed_status_write_retries_total{write=\"terminal\"} 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        // The capacity shrinks: the resource it no longer names leaves the label set.
        m.set_holdings(0, &Resources::new(), Some(&used));
        let text = crate::telemetry::metrics::render(&registry);
        assert!(!text.contains("example.com/gpu"), "{text}");
    }
}
