//! kruntimes: a scheduler for logical resources on Kubernetes.
//!
//! The library holds everything; `main.rs` only parses the command line and dispatches.

pub mod api;
pub mod cleanup;
pub mod cli;
pub mod cmd;
pub mod gateway;
pub mod kubeclient;
pub mod manager;
pub mod output;
pub mod policy;
pub mod replay;
pub mod runtime;
pub mod runtime_server;
pub mod runtimed;
pub mod scheduler;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod util;
pub mod workflow;
