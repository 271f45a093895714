//! Workflows: the controller that executes `WorkflowRun`s on the scheduler, each step a Run
//! placed like any other (its priority, its fair share), and that reports `Workflow` and
//! `Action` definitions Ready. The behaviour is the Go kruntimes project's, whose Workflows,
//! WorkflowRuns, Actions and their snapshots run here unchanged.
//!
//! The pure core decides: [`expr`] (the `${{ }}` expressions), [`template`] (binding inputs,
//! the reusable call graph), [`snapshot`] (what a WorkflowRun freezes and its children's
//! names), [`plan`] (a WorkflowRun's status and next step). The effects are [`controller`]'s
//! (with its [`metrics`] and Warning Events) and [`definitions`]'. Nothing here places a Run:
//! that is the scheduler's.

pub mod controller;
pub mod definitions;
pub mod expr;
pub mod metrics;
pub mod plan;
pub mod snapshot;
pub mod template;

#[cfg(test)]
mod tests;
