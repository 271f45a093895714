//! kruntimes' integration tests: one binary, one module per suite (`tests/it/`), every test
//! against the real test control plane (etcd and kube-apiserver from Go modules) or, for the
//! `cluster` suite, the real single-node cluster.
//!
//! Each suite runs in a process of its own, one after another, with a control plane of its own
//! (`testkit::harness`): `cargo test --test it` runs them all, `cargo test --test it faults::`
//! one suite, `cargo test --test it NAME` the tests whose `suite::test` name contains NAME.

mod artifacts;
mod cluster;
mod coexistence;
mod contract;
mod dev;
mod docs;
mod e2e;
mod events;
mod execution;
mod explain;
mod fairness;
mod faults;
mod gateway;
mod helm;
mod hostile_tasks;
mod install;
mod kubectl_flags;
mod kubernetes_1_32;
mod operator_metrics;
mod packaging;
mod paging;
mod policy;
mod policy_absent;
mod priority;
mod queue;
mod rbac;
mod release;
mod retry;
mod runtime_pods;
mod runtimed;
mod runtimed_policy;
mod scheduler;
mod standby;
mod status;
mod upstream_api;
mod workflows;
mod workspace;

fn main() -> std::process::ExitCode {
    testkit::harness::main()
}
