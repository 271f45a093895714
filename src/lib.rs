//! kruntimes: a scheduler for logical resources on Kubernetes.
//!
//! The library holds everything; `main.rs` only parses the command line and dispatches.

pub mod api;
pub mod cli;
pub mod cmd;
pub mod dev;
pub mod digest;
pub mod duration;
pub mod events;
pub mod explain;
pub mod http;
pub mod install;
pub mod kubeclient;
pub mod logging;
pub mod manager;
pub mod metrics;
pub mod output;
pub mod policy;
pub mod process;
pub mod replay;
pub mod runtime;
pub mod runtime_server;
pub mod runtimed;
pub mod scheduler;
pub mod signals;
pub mod status;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod yaml;
