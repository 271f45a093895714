//! The scheduler's Prometheus metrics: names, every bounded label set, and registration.
//!
//! Every label value comes from a fixed internal set (plugin names, reason constants, stages,
//! sources, results): never a Runtime, Run, Pod, namespace, selector or resource name. It
//! reads label values from the framework (wake sources, preemption levels, attempt results)
//! and is read by the controller; nothing in the framework reads it. Rendering is
//! [`crate::telemetry::metrics`]'s, shared with runtimed.

use std::time::Instant;

use crate::scheduler::framework::cache::{LEVEL_RUNNING, LEVEL_SCHEDULED};
use crate::scheduler::framework::{WakeCounts, WakeSource};

use prometheus::{GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts};

/// Stages of `kruntimes_scheduler_reservation_conflicts_total`.
pub const STAGE_RESERVE: &str = "reserve";
pub const STAGE_BIND: &str = "bind";

/// States of `kruntimes_scheduler_pending_runs`: the scheduler wrote its Unschedulable
/// message, a cycle failed and is retried with backoff, or the Run waits for its first cycle.
pub const PENDING_UNSCHEDULABLE: &str = "unschedulable";
pub const PENDING_BACKOFF: &str = "backoff";
pub const PENDING_QUEUED: &str = "queued";
pub const PENDING_STATES: [&str; 3] = [PENDING_UNSCHEDULABLE, PENDING_BACKOFF, PENDING_QUEUED];

/// Levels of `kruntimes_scheduler_preemptions_total`: a Scheduled Run runtimed had not
/// claimed, or a Running Run of a preemptible class.
pub const PREEMPTION_LEVELS: [&str; 2] = [LEVEL_SCHEDULED, LEVEL_RUNNING];
/// Results of `kruntimes_scheduler_preemptions_total`: the victim's write landed, met a newer
/// version of it (runtimed's claim won; the preemptor plans again) or failed.
pub const PREEMPTION_SUCCEEDED: &str = "succeeded";
pub const PREEMPTION_CONFLICT: &str = "conflict";
pub const PREEMPTION_ERROR: &str = "error";
/// Causes of `kruntimes_scheduler_nominations_total`.
pub const NOMINATION_CAUSES: [&str; 2] = ["starvation", "priority"];

/// States of `kruntimes_scheduler_runtime_pods`: RuntimePodAvailability's Pod checks pass or
/// not.
pub const POD_AVAILABLE: &str = "available";
pub const POD_UNAVAILABLE: &str = "unavailable";

#[derive(Clone)]
pub struct SchedulerMetrics {
    pub filter_rejections: IntCounterVec,
    pub reservation_conflicts: IntCounterVec,
    pub pending_run_wakeups: IntCounterVec,
    pub cycle_duration: Histogram,
    pub queue_duration: Histogram,
    /// Creation → Bind landed (the Go project's series, same name, no `runtime` label).
    pub run_queue_duration: Histogram,
    pub schedule_attempts: IntCounterVec,
    pub pending_runs: IntGaugeVec,
    pub runtime_pods: IntGaugeVec,
    pub preemptions: IntCounterVec,
    pub nominations: IntCounterVec,
    /// 1 while this replica leads (holds the Lease, and no Go kruntimes scheduler does).
    pub leader: IntGauge,
    /// The dominant share of the top fairness groups (`--fair-share-metrics-groups`).
    pub fair_share: GaugeVec,
    pub fair_share_pending_runs: IntGaugeVec,
}

impl SchedulerMetrics {
    /// Creates the metrics and registers them with `registry`.
    pub fn register(registry: &impl crate::telemetry::metrics::Sink) -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels)
        };
        let buckets = vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0, 30.0,
        ];
        let metrics = Self {
            filter_rejections: counter(
                "kruntimes_scheduler_filter_rejections_total",
                "Runtime Pod evaluations rejected by a Filter plugin, by plugin and bounded reason.",
                &["plugin", "reason"],
            )?,
            reservation_conflicts: counter(
                "kruntimes_scheduler_reservation_conflicts_total",
                "Reserve found the chosen Pod full (stage=reserve) or Bind hit a resourceVersion conflict (stage=bind).",
                &["stage"],
            )?,
            pending_run_wakeups: counter(
                "kruntimes_scheduler_pending_run_wakeups_total",
                "Pending Run keys requested for the queue by a Runtime Pod or released-capacity event.",
                &["source"],
            )?,
            cycle_duration: Histogram::with_opts(
                HistogramOpts::new(
                    "kruntimes_scheduler_scheduling_cycle_duration_seconds",
                    "Duration of one scheduling cycle (snapshot, filter, score, reserve).",
                )
                .buckets(buckets.clone()),
            )?,
            queue_duration: Histogram::with_opts(
                HistogramOpts::new(
                    "kruntimes_scheduler_queue_duration_seconds",
                    "Time from a Run key's first activation until a worker starts its cycle.",
                )
                .buckets(buckets.clone()),
            )?,
            run_queue_duration: Histogram::with_opts(
                HistogramOpts::new(
                    "kruntimes_scheduler_run_queue_duration_seconds",
                    "Time from a Run's creation until its assignment to a Runtime Pod was written.",
                )
                .buckets(buckets),
            )?,
            schedule_attempts: counter(
                "kruntimes_scheduler_schedule_attempts_total",
                "Scheduling attempts by result.",
                &["result"],
            )?,
            pending_runs: IntGaugeVec::new(
                Opts::new(
                    "kruntimes_scheduler_pending_runs",
                    "Runs waiting for a Runtime Pod (Pending, unassigned), by state: unschedulable, backoff or queued.",
                ),
                &["state"],
            )?,
            preemptions: counter(
                "kruntimes_scheduler_preemptions_total",
                "Runs preempted for a higher-priority Run, by level (scheduled: unassigned before runtimed claimed it; running: stopped by runtimed) and result of the write.",
                &["level", "result"],
            )?,
            nominations: counter(
                "kruntimes_scheduler_nominations_total",
                "Runtime Pods nominated for a Pending Run, by cause (starvation: waited past the threshold; priority: outranks Runs holding or waiting for room).",
                &["cause"],
            )?,
            leader: IntGauge::with_opts(Opts::new(
                "kruntimes_scheduler_leader",
                "1 while this replica leads: it holds the leader Lease (or runs without leader election) and no Go kruntimes scheduler holds its own; 0 on a standby.",
            ))?,
            runtime_pods: IntGaugeVec::new(
                Opts::new(
                    "kruntimes_scheduler_runtime_pods",
                    "Runtime Pods by state: available (not terminating, Ready, runtimed heartbeat fresh, capacity readable) or unavailable.",
                ),
                &["state"],
            )?,
            fair_share: GaugeVec::new(
                Opts::new(
                    "kruntimes_scheduler_fair_share",
                    "A fairness group's dominant share of a Runtime (its active, assumed and nominated requests over the capacity, the largest fraction of any resource), for the --fair-share-metrics-groups groups with the most Pending Runs.",
                ),
                &["namespace", "runtime", "group"],
            )?,
            fair_share_pending_runs: IntGaugeVec::new(
                Opts::new(
                    "kruntimes_scheduler_fair_share_pending_runs",
                    "Pending Runs of a fairness group on a Runtime, for the --fair-share-metrics-groups groups with the most.",
                ),
                &["namespace", "runtime", "group"],
            )?,
        };
        registry.register(Box::new(metrics.fair_share.clone()))?;
        registry.register(Box::new(metrics.fair_share_pending_runs.clone()))?;
        registry.register(Box::new(metrics.pending_runs.clone()))?;
        registry.register(Box::new(metrics.runtime_pods.clone()))?;
        registry.register(Box::new(metrics.filter_rejections.clone()))?;
        registry.register(Box::new(metrics.reservation_conflicts.clone()))?;
        registry.register(Box::new(metrics.pending_run_wakeups.clone()))?;
        registry.register(Box::new(metrics.cycle_duration.clone()))?;
        registry.register(Box::new(metrics.queue_duration.clone()))?;
        registry.register(Box::new(metrics.run_queue_duration.clone()))?;
        registry.register(Box::new(metrics.schedule_attempts.clone()))?;
        registry.register(Box::new(metrics.preemptions.clone()))?;
        registry.register(Box::new(metrics.nominations.clone()))?;
        registry.register(Box::new(metrics.leader.clone()))?;
        for level in PREEMPTION_LEVELS {
            for result in [PREEMPTION_SUCCEEDED, PREEMPTION_CONFLICT, PREEMPTION_ERROR] {
                metrics.preemptions.with_label_values(&[level, result]);
            }
        }
        for cause in NOMINATION_CAUSES {
            metrics.nominations.with_label_values(&[cause]);
        }
        // Bounded label sets start at zero so dashboards see every series from the start.
        for stage in [STAGE_RESERVE, STAGE_BIND] {
            metrics.reservation_conflicts.with_label_values(&[stage]);
        }
        for state in PENDING_STATES {
            metrics.pending_runs.with_label_values(&[state]);
        }
        for state in [POD_AVAILABLE, POD_UNAVAILABLE] {
            metrics.runtime_pods.with_label_values(&[state]);
        }
        // Also when no wakeup has happened yet (a replica that is not leading counts none).
        for source in [WakeSource::RuntimePod, WakeSource::CapacityReleased] {
            metrics
                .pending_run_wakeups
                .with_label_values(&[source.as_str()]);
        }
        Ok(metrics)
    }

    /// Counts the nominations the cache made, (for starvation, for priority), and the Runs it
    /// moved back to the active queue, by source.
    pub fn count_wakeups(&self, nominated: (u64, u64), woken: WakeCounts) {
        let (starvation, priority) = nominated;
        for (cause, n) in NOMINATION_CAUSES.into_iter().zip([starvation, priority]) {
            if n > 0 {
                self.nominations.with_label_values(&[cause]).inc_by(n);
            }
        }
        for (source, n) in woken.by_source() {
            if n > 0 {
                let source = source.as_str();
                self.pending_run_wakeups
                    .with_label_values(&[source])
                    .inc_by(n);
            }
        }
    }

    /// A guard that observes the cycle duration when dropped.
    pub fn cycle_timer(&self) -> CycleTimer<'_> {
        CycleTimer {
            histogram: &self.cycle_duration,
            start: Instant::now(),
        }
    }
}

/// Observes elapsed time into a histogram on drop.
pub struct CycleTimer<'a> {
    histogram: &'a Histogram,
    start: Instant,
}

impl CycleTimer<'_> {
    /// Drops the timer without observing (nothing was cycled).
    pub fn discard(self) {
        std::mem::forget(self);
    }
}

impl Drop for CycleTimer<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::render;
    use prometheus::Registry;

    #[test]
    fn every_named_metric_is_exposed() {
        let registry = Registry::new();
        let m = SchedulerMetrics::register(&registry).unwrap();
        m.filter_rejections
            .with_label_values(&["RuntimePodAvailability", "x"])
            .inc();
        m.schedule_attempts.with_label_values(&["scheduled"]).inc();
        drop(m.cycle_timer());
        m.queue_duration.observe(0.1);
        m.run_queue_duration.observe(0.2);
        let text = render(&registry);
        for name in [
            "kruntimes_scheduler_filter_rejections_total",
            "kruntimes_scheduler_reservation_conflicts_total{stage=\"bind\"} 0",
            "kruntimes_scheduler_reservation_conflicts_total{stage=\"reserve\"} 0",
            "kruntimes_scheduler_pending_run_wakeups_total{source=\"runtime_pod\"} 0",
            "kruntimes_scheduler_pending_run_wakeups_total{source=\"capacity_released\"} 0",
            "kruntimes_scheduler_scheduling_cycle_duration_seconds_count 1",
            "kruntimes_scheduler_queue_duration_seconds_count 1",
            "kruntimes_scheduler_run_queue_duration_seconds_count 1",
            "kruntimes_scheduler_schedule_attempts_total",
            "kruntimes_scheduler_pending_runs{state=\"unschedulable\"} 0",
            "kruntimes_scheduler_pending_runs{state=\"backoff\"} 0",
            "kruntimes_scheduler_pending_runs{state=\"queued\"} 0",
            "kruntimes_scheduler_runtime_pods{state=\"available\"} 0",
            "kruntimes_scheduler_runtime_pods{state=\"unavailable\"} 0",
            "kruntimes_scheduler_preemptions_total{level=\"scheduled\",result=\"succeeded\"} 0",
            "kruntimes_scheduler_preemptions_total{level=\"running\",result=\"conflict\"} 0",
            "kruntimes_scheduler_nominations_total{cause=\"priority\"} 0",
            "kruntimes_scheduler_nominations_total{cause=\"starvation\"} 0",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }
}
