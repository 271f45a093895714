//! The `Run`, `Runtime`, `PersistentWorkspace`, `Workflow`, `WorkflowRun` and `Action` custom
//! resources (`kruntimes.io/v1alpha1`) and their CRDs.
//!
//! The shapes are the kruntimes project's public `v1alpha1` API (`kruntimes/kruntimes`,
//! `api/v1alpha1/`), field for field: the same names, types, defaults, enums and CEL rules, so
//! a manifest written for that project is accepted unchanged and an object it stored decodes
//! here. What only kruntimes adds is optional and marked "kruntimes:" in its doc. Every field
//! decodes leniently (absent means default), so one odd object never fails a list.
//!
//! These are plain data: parsing and validation of their quantities lives in
//! [`super::resources`], status transitions in [`super::status`].
//!
//! One file per kind: `runtime.rs` (`Runtime`), `run.rs` (`Run`), `workspace.rs`
//! (`PersistentWorkspace`), `workflow.rs` (`Workflow`, and the job and step shapes),
//! `workflow_run.rs` (`WorkflowRun`), `action.rs` (`Action`); `schema.rs` holds the CRD schema pieces they share. Everything is
//! re-exported here, so `crate::api::types::X` (and `crate::api::X`) names any of them.

mod action;
mod run;
mod runtime;
mod schema;
mod workflow;
mod workflow_run;
mod workspace;

pub use action::*;
pub use run::*;
pub use runtime::*;
pub use workflow::*;
pub use workflow_run::*;
pub use workspace::*;
