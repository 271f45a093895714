//! The workflow controller's metrics, served with the scheduler's on its `/metrics`. Labels
//! are bounded: a phase, never a name.

use prometheus::{IntCounter, IntCounterVec, Opts};

#[derive(Clone)]
pub struct WorkflowMetrics {
    /// WorkflowRuns this controller ended, by the phase they ended in.
    pub finished: IntCounterVec,
    /// Runs created for WorkflowRun steps.
    pub step_runs: IntCounter,
}

impl WorkflowMetrics {
    /// Creates the metrics and registers them with `registry`.
    pub fn register(registry: &impl crate::telemetry::metrics::Sink) -> prometheus::Result<Self> {
        let metrics = Self {
            finished: IntCounterVec::new(
                Opts::new(
                    "kruntimes_workflow_runs_finished_total",
                    "WorkflowRuns the workflow controller ended, by phase (Succeeded, Failed, Cancelled).",
                ),
                &["phase"],
            )?,
            step_runs: IntCounter::with_opts(Opts::new(
                "kruntimes_workflow_step_runs_created_total",
                "Runs the workflow controller created for WorkflowRun steps (an Action's steps included).",
            ))?,
        };
        registry.register(Box::new(metrics.finished.clone()))?;
        registry.register(Box::new(metrics.step_runs.clone()))?;
        Ok(metrics)
    }
}
