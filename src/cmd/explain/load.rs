//! The thin I/O edge of `explain`: reads the Run, its Runtime, the Runtime Pods, the
//! heartbeat Leases, the namespace's Runs and the Run's PersistentWorkspace with the replay's
//! list helpers ([`crate::cmd::replay::load`]), so it reads exactly what the scheduler's watches
//! select; and the scheduler's leader-election Lease ([`leader_lease`]).
//!
//! It only reads (GET and LIST); it must never write, and it must not interpret what it read
//! beyond turning "not found" into the right one-line error.

use futures::try_join;
use kube::ResourceExt;
use kube::api::Api;

use super::model::Subject;
use crate::api::{PersistentWorkspace, Run, Runtime};
use crate::cmd::replay::Objects;
pub use crate::cmd::replay::load::{Error, Result};
use crate::cmd::replay::load::{
    leader_lease, list_leases, list_priority_classes, list_runs, list_runtime_pods,
    namespace_missing,
};
use crate::kubeclient::Target;

/// Reads everything `explain run/NAME` needs from `target.namespace`.
pub async fn load(target: &Target, name: &str) -> Result<Subject> {
    let namespace = target.namespace.clone();
    let client = target.client.clone();
    let api_error = |e: kube::Error, doing: String| {
        Error::Api(format!("{:#}", target.explain_error(e, &doing)))
    };
    let runs_api: Api<Run> = Api::namespaced(client.clone(), &namespace);
    let run = match runs_api.get(name).await {
        Ok(run) => run,
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return Err(not_found(target, name, &status).await);
        }
        Err(e) => {
            return Err(api_error(
                e,
                format!("reading run {name} in namespace {namespace}"),
            ));
        }
    };

    let runtime_name = run.spec.runtime.clone();
    let scope = Some(namespace.as_str());
    let runtime = async {
        Api::<Runtime>::namespaced(client.clone(), &namespace)
            .get_opt(&runtime_name)
            .await
            .map_err(|e| {
                api_error(
                    e,
                    format!("reading runtime {runtime_name} in namespace {namespace}"),
                )
            })
    };
    let pods = list_runtime_pods(target, scope, Some(&runtime_name));
    let leases = list_leases(target, scope);
    // The Runs of its Runtime: all its queue and its Pods can hold.
    let runs = list_runs(target, scope, Some(&runtime_name));
    let workspace = async {
        let Some(name) = run.workspace_name() else {
            return Ok(None);
        };
        match Api::<PersistentWorkspace>::namespaced(client.clone(), &namespace)
            .get_opt(name)
            .await
        {
            Ok(w) => Ok(w),
            // Without the CRD there is no workspace: the Run waits for one, as it says.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(api_error(
                e,
                format!("reading persistentworkspace {name} in namespace {namespace}"),
            )),
        }
    };
    let classes = list_priority_classes(target);
    let scheduler_lease = async { Ok(leader_lease(target, scope).await) };
    let (runtime, pods, leases, runs, workspace, classes, scheduler_lease) = try_join!(
        runtime,
        pods,
        leases,
        runs,
        workspace,
        classes,
        scheduler_lease
    )?;
    let now = jiff::Timestamp::now();
    // Explain the Run as the list has it, so it is consistent with the usage it is judged by.
    let run = runs
        .iter()
        .find(|r| r.uid() == run.uid())
        .cloned()
        .unwrap_or(run);
    Ok(Subject {
        namespace,
        run,
        objects: Objects {
            runtimes: runtime.into_iter().collect(),
            pods,
            leases,
            runs,
            workspaces: workspace.into_iter().collect(),
            // A Run's explanation reads no WorkflowRun.
            workflow_runs: Vec::new(),
            classes,
            scheduler_lease,
            now,
        },
    })
}

/// Tells a missing namespace, a missing Run and a missing CRD apart.
async fn not_found(target: &Target, name: &str, status: &kube::core::Status) -> Error {
    let namespace = target.namespace.clone();
    // A namespaced GET does not check the namespace; ask for it (a user who may not read
    // namespaces just gets the Run's own error).
    if namespace_missing(target, &namespace).await {
        return Error::NamespaceNotFound { namespace };
    }
    let names_the_run = status.details.as_ref().is_some_and(|d| d.name == name);
    if names_the_run {
        Error::RunNotFound {
            name: name.to_string(),
            namespace,
        }
    } else {
        Error::NotInstalled {
            target: target.describe(),
        }
    }
}
