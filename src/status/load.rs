//! The thin I/O edge of `status`: lists the Runtimes, Runtime Pods, heartbeat Leases, Runs and
//! PersistentWorkspaces of one namespace (or all), with `explain`'s list helpers ([`crate::explain::load`]) so both
//! read exactly what the scheduler's watches select.
//!
//! It only reads (LIST, and a GET of the namespace to tell a missing one apart); it must not
//! interpret what it read.

use futures::try_join;

use super::model::Pool;
use crate::explain::load::{
    Error, Result, list_leases, list_priority_classes, list_runs, list_runtime_pods, list_runtimes,
    list_workspaces, namespace_missing,
};
use crate::kubeclient::Target;

/// Reads the pool of `namespace` (`None`: every namespace), of one Runtime when named.
pub async fn load(target: &Target, namespace: Option<&str>, runtime: Option<&str>) -> Result<Pool> {
    let (runtimes, pods, leases, runs, workspaces, classes) = try_join!(
        list_runtimes(target, namespace),
        list_runtime_pods(target, namespace, runtime),
        list_leases(target, namespace),
        list_runs(target, namespace),
        list_workspaces(target, namespace),
        list_priority_classes(target),
    )?;
    let now = jiff::Timestamp::now();
    if let Some(ns) = namespace
        && runtimes.is_empty()
        && pods.is_empty()
        && runs.is_empty()
        && namespace_missing(target, ns).await
    {
        return Err(Error::NamespaceNotFound {
            namespace: ns.to_string(),
        });
    }
    Ok(Pool {
        namespace: namespace.map(str::to_string),
        runtime: runtime.map(str::to_string),
        runtimes,
        pods,
        leases,
        runs,
        workspaces,
        classes,
        now,
    })
}
