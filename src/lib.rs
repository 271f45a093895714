//! kruntimes: a scheduler for logical resources on Kubernetes.
//!
//! The library holds everything; `main.rs` only parses the command line and dispatches.
//!
//! The rooms, from the top down: [`cmd`], every command and the CLI's definitions, with
//! `explain`'s and `status`'s replay of the scheduler's own plugins (nothing else imports it);
//! the processes, each owning its flags: [`manager`] (`scheduler run`: the scheduler, Runtime,
//! cleanup and workflow controllers under one Lease, and the aggregated API's gateway) and
//! [`runtimed`] (the agent in every Runtime Pod); the controllers and their pure cores: [`scheduler`], [`runtime`], [`workflow`]; the edges they
//! share: [`kubeclient`], [`telemetry`], [`policy`] (the admission policies), [`output`]; and
//! at the bottom [`api`] (the `kruntimes.io/v1alpha1` types and status rules) and [`util`].

pub mod api;
pub mod cmd;
pub mod kubeclient;
pub mod manager;
pub mod output;
pub mod policy;
pub mod runtime;
pub mod runtimed;
pub mod scheduler;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod util;
pub mod workflow;
