//! The thin I/O edge of the replays: lists Runtimes, Runtime Pods, heartbeat Leases, Runs,
//! PersistentWorkspaces and PriorityClasses the way the scheduler's watches select them, for
//! one namespace or all ([`load`], `status`), and the helpers `explain`'s loader reads one
//! Run's objects with; and finds the scheduler's leader-election Lease ([`leader_lease`]).
//!
//! It only reads (GET, and LIST in pages of [`PAGE`] as kubectl does); it must never write, and
//! it must not interpret what it read beyond turning "not found" or "forbidden" into the right
//! one-line error.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{join, try_join};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams};
use thiserror::Error;

use super::Objects;
use super::leader::{INSTALL_NAMESPACE, LeaseRead};
use crate::api::lenient::{self, Lenient};
use crate::api::{
    LABEL_RUNTIME, LABEL_RUNTIME_POD, PersistentWorkspace, Run, Runtime, WorkflowRun,
};
use crate::kubeclient::Target;
use crate::manager::LEADER_LEASE;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Objects per list request. Paged as `kubectl get --chunk-size` pages: the API server never
/// builds one response of every Run (100,000 of them are hundreds of megabytes of JSON, and
/// one request must end within its `--request-timeout`), and a command can show how far a
/// large read has come ([`read_so_far`]). Ten times kubectl's 500: at 50,000 Runs, pages of
/// 500 made `status -A` 1.17× and `explain` 1.27× as long as one request (each page is a round
/// trip), pages of 5,000 1.03× and 1.07× (docs/benchmarks/2026-12-08-paged-lists.md).
pub const PAGE: u32 = 5_000;

/// Objects the lists of this process have read so far. Process-wide: a command is a process,
/// and what it shows while it reads is how many objects have arrived, whichever list brought
/// them.
static READ: AtomicUsize = AtomicUsize::new(0);

/// How many objects the lists of this process have read so far.
pub fn read_so_far() -> usize {
    READ.load(Ordering::Relaxed)
}

/// Every object `params` selects, in pages of [`PAGE`] (a continue token from one page to the
/// next, as kubectl and client-go's pager read).
async fn list_all<K>(api: &Api<K>, params: &ListParams) -> kube::Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.clone().limit(PAGE);
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        READ.fetch_add(page.items.len(), Ordering::Relaxed);
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

/// Why the objects could not be read. Each message is one line saying what to do.
#[derive(Debug, Error)]
pub enum Error {
    #[error(
        "run {name:?} not found in namespace {namespace:?}; list the Runs there with `kubectl get runs -n {namespace}`"
    )]
    RunNotFound { name: String, namespace: String },
    #[error("namespace {namespace:?} not found; pass an existing namespace with -n")]
    NamespaceNotFound { namespace: String },
    #[error(
        "the Run resource (runs.kruntimes.io) is not installed in {target}; install it with `kubectl kruntimes install`"
    )]
    NotInstalled { target: String },
    /// An API failure, already phrased by [`Target::explain_error`].
    #[error("{0}")]
    Api(String),
}

/// Reads every object of `namespace` (`None`: every namespace), the Runtime Pods of one
/// Runtime when named; a namespace that holds nothing and does not exist is
/// [`Error::NamespaceNotFound`].
pub async fn load(
    target: &Target,
    namespace: Option<&str>,
    runtime: Option<&str>,
) -> Result<Objects> {
    let (runtimes, pods, leases, runs, workspaces, workflow_runs, classes, scheduler_lease) = try_join!(
        list_runtimes(target, namespace),
        list_runtime_pods(target, namespace, runtime),
        list_leases(target, namespace),
        list_runs(target, namespace, runtime),
        list_workspaces(target, namespace),
        async {
            // A named Runtime's view shows no WorkflowRun: none to read.
            match runtime {
                Some(_) => Ok(Vec::new()),
                None => list_workflow_runs(target, namespace).await,
            }
        },
        list_priority_classes(target),
        async { Ok::<_, Error>(leader_lease(target, namespace).await) },
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
    Ok(Objects {
        runtimes,
        pods,
        leases,
        runs,
        workspaces,
        workflow_runs,
        classes,
        scheduler_lease,
        now,
    })
}

/// The scheduler's leader-election Lease where it usually is: in the shipped install's
/// namespace and in `namespace` (the one shown; `None`: all), both at once, and only when
/// neither has it, in every namespace by name. Never an error: a look that fails (a user
/// without `get` on Leases there) is recorded for [`super::leader::judge`], which says so.
pub async fn leader_lease(target: &Target, namespace: Option<&str>) -> LeaseRead {
    let shown = namespace.filter(|ns| *ns != INSTALL_NAMESPACE);
    let (install, shown) = join!(get_leader_lease(target, INSTALL_NAMESPACE), async {
        match shown {
            Some(ns) => get_leader_lease(target, ns).await,
            None => Ok(None),
        }
    });
    let mut read = LeaseRead::default();
    for look in [install, shown] {
        match look {
            Ok(lease) => read.leases.extend(lease),
            Err(why) => read.unreadable.push(why),
        }
    }
    // A held Lease here speaks; otherwise (none, or a lapsed one left behind) a scheduler may
    // lead from another namespace, such as a chart's.
    let now = jiff::Timestamp::now();
    if !read.leases.iter().any(|l| super::leader::held(l, now)) {
        let by_name = ListParams::default().fields(&format!("metadata.name={LEADER_LEASE}"));
        match list_all(&Api::<Lease>::all(target.client.clone()), &by_name).await {
            Ok(leases) => read.leases = leases,
            Err(e) => read.unreadable.push(unreadable(
                target,
                e,
                &format!("listing the Leases {LEADER_LEASE} in all namespaces"),
            )),
        }
    }
    read
}

async fn get_leader_lease(target: &Target, namespace: &str) -> Result<Option<Lease>, String> {
    Api::<Lease>::namespaced(target.client.clone(), namespace)
        .get_opt(LEADER_LEASE)
        .await
        .map_err(|e| {
            unreadable(
                target,
                e,
                &format!("reading Lease {namespace}/{LEADER_LEASE}"),
            )
        })
}

/// Why a look at the leader-election Lease failed, in one phrase: the API server's own words
/// for a refusal (they name the user, the verb and the namespace).
fn unreadable(target: &Target, e: kube::Error, doing: &str) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => s.message,
        e => format!("{:#}", target.explain_error(e, doing)),
    }
}

/// Every PriorityClass (cluster-scoped). A user who may not list them (the `view` role does
/// not grant it) still gets an explanation: priorities then come from the Runs' recorded
/// `status.priority`, which the scheduler writes with its first status write.
pub async fn list_priority_classes(target: &Target) -> Result<Vec<PriorityClass>> {
    match list_all(
        &Api::<PriorityClass>::all(target.client.clone()),
        &ListParams::default(),
    )
    .await
    {
        Ok(classes) => Ok(classes),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(
                "cannot list priorityclasses ({}); priorities are read from the Runs' status.priority",
                s.message
            );
            Ok(Vec::new())
        }
        Err(e) => Err(api_error(target, e, "listing priorityclasses")),
    }
}

/// `Api::namespaced` for `Some(namespace)`, `Api::all` for `None` (all namespaces).
fn api<K>(target: &Target, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    crate::kubeclient::scoped_api(&target.client, namespace)
}

/// `in namespace X` or `in all namespaces`, for error messages.
fn where_(namespace: Option<&str>) -> String {
    namespace.map_or_else(
        || "in all namespaces".to_string(),
        |ns| format!("in namespace {ns}"),
    )
}

pub(crate) fn api_error(target: &Target, e: kube::Error, doing: &str) -> Error {
    Error::Api(format!("{:#}", target.explain_error(e, doing)))
}

/// The Runtime Pods (label `kruntimes.io/runtime`, of `runtime` when given), as the
/// scheduler's Pod watch selects them.
pub async fn list_runtime_pods(
    target: &Target,
    namespace: Option<&str>,
    runtime: Option<&str>,
) -> Result<Vec<Pod>> {
    let selector = match runtime {
        // A Runtime name that is not a valid label value cannot label any Pod (and would make
        // the selector itself invalid).
        Some(rt) if !is_label_value(rt) => return Ok(Vec::new()),
        Some(rt) => format!("{LABEL_RUNTIME}={rt}"),
        None => LABEL_RUNTIME.to_string(),
    };
    let of = runtime.map(|rt| format!(" of {rt}")).unwrap_or_default();
    list_all(
        &api::<Pod>(target, namespace),
        &ListParams::default().labels(&selector),
    )
    .await
    .map_err(|e| {
        api_error(
            target,
            e,
            &format!("listing the Runtime Pods{of} {}", where_(namespace)),
        )
    })
}

/// The heartbeat Leases (label `kruntimes.io/runtime-pod`).
pub async fn list_leases(target: &Target, namespace: Option<&str>) -> Result<Vec<Lease>> {
    list_all(
        &api::<Lease>(target, namespace),
        &ListParams::default().labels(LABEL_RUNTIME_POD),
    )
    .await
    .map_err(|e| {
        api_error(
            target,
            e,
            &format!("listing heartbeat leases {}", where_(namespace)),
        )
    })
}

/// Every Run, or those of one Runtime (`spec.runtime`, a selectable field of the CRD, so the
/// API server filters: at 100,000 Runs one Runtime's are a fraction of the list); a missing
/// CRD is [`Error::NotInstalled`]. The scheduler's scope is one Runtime: its Pods hold only
/// its Runs, its queue only its Pending ones.
pub async fn list_runs(
    target: &Target,
    namespace: Option<&str>,
    runtime: Option<&str>,
) -> Result<Vec<Run>> {
    let every = ListParams::default();
    let Some(rt) = runtime else {
        return list_kruntimes(target, namespace, "runs", &every).await;
    };
    let of_runtime = |runs: Vec<Run>| runs.into_iter().filter(|r| r.spec.runtime == rt).collect();
    // A name a field selector cannot carry as it is: every Run, filtered here.
    if !is_label_value(rt) {
        return list_kruntimes(target, namespace, "runs", &every)
            .await
            .map(of_runtime);
    }
    let by_runtime = ListParams::default().fields(&format!("spec.runtime={rt}"));
    match list_all(&api::<Lenient<Run>>(target, namespace), &by_runtime).await {
        Ok(runs) => Ok(lenient::decoded_items(runs)),
        // A CRD without the selectable field (the Go project's, say) refuses the selector
        // as a bad request ("field label not supported").
        Err(kube::Error::Api(s)) if s.code == 400 => {
            list_kruntimes(target, namespace, "runs", &every)
                .await
                .map(of_runtime)
        }
        Err(e) => Err(list_error(target, e, "runs", namespace)),
    }
}

/// Every WorkflowRun; none when its CRD is not installed (an install older than Workflows) or
/// the user may not list them (roles older than Workflows): the pool view goes on without.
pub async fn list_workflow_runs(
    target: &Target,
    namespace: Option<&str>,
) -> Result<Vec<WorkflowRun>> {
    match list_all(
        &api::<Lenient<WorkflowRun>>(target, namespace),
        &ListParams::default(),
    )
    .await
    {
        Ok(runs) => Ok(lenient::decoded_items(runs)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Ok(Vec::new()),
        Err(e) => Err(api_error(
            target,
            e,
            &format!("listing workflowruns {}", where_(namespace)),
        )),
    }
}

/// Every PersistentWorkspace; none when its CRD is not installed (a Run naming one waits).
pub async fn list_workspaces(
    target: &Target,
    namespace: Option<&str>,
) -> Result<Vec<PersistentWorkspace>> {
    match list_kruntimes(
        target,
        namespace,
        "persistentworkspaces",
        &ListParams::default(),
    )
    .await
    {
        Err(Error::NotInstalled { .. }) => Ok(Vec::new()),
        other => other,
    }
}

/// Every Runtime; a missing CRD is [`Error::NotInstalled`].
pub async fn list_runtimes(target: &Target, namespace: Option<&str>) -> Result<Vec<Runtime>> {
    list_kruntimes(target, namespace, "runtimes", &ListParams::default()).await
}

/// Every object of one of kruntimes' own kinds (`what`, for the error message) that decodes
/// (one that does not is reported and left out); a 404 means the CRDs are not installed.
async fn list_kruntimes<K>(
    target: &Target,
    namespace: Option<&str>,
    what: &str,
    params: &ListParams,
) -> Result<Vec<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    match list_all(&api::<Lenient<K>>(target, namespace), params).await {
        Ok(objects) => Ok(lenient::decoded_items(objects)),
        Err(e) => Err(list_error(target, e, what, namespace)),
    }
}

/// What a failed list of kruntimes objects (`what`) says: the API not installed, or the
/// API server's answer explained.
fn list_error(target: &Target, e: kube::Error, what: &str, namespace: Option<&str>) -> Error {
    match e {
        kube::Error::Api(s) if s.code == 404 => Error::NotInstalled {
            target: target.describe(),
        },
        e => api_error(target, e, &format!("listing {what} {}", where_(namespace))),
    }
}

/// Whether `namespace` is missing (`false` when the user may not read namespaces).
pub async fn namespace_missing(target: &Target, namespace: &str) -> bool {
    matches!(
        Api::<Namespace>::all(target.client.clone())
            .get_opt(namespace)
            .await,
        Ok(None)
    )
}

/// Kubernetes label value syntax: at most 63 characters, alphanumerics, `-`, `_`, `.`,
/// beginning and ending with an alphanumeric.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_follow_kubernetes_syntax() {
        for ok in ["python", "py-3.11", "a_b", "x"] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "a/b", &"x".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }

    #[test]
    fn not_found_errors_are_one_line_and_say_what_to_do() {
        let e = Error::RunNotFound {
            name: "x".into(),
            namespace: "team-a".into(),
        };
        assert_eq!(
            e.to_string(),
            "run \"x\" not found in namespace \"team-a\"; list the Runs there with `kubectl get runs -n team-a`"
        );
        let e = Error::NamespaceNotFound {
            namespace: "nope".into(),
        };
        assert_eq!(
            e.to_string(),
            "namespace \"nope\" not found; pass an existing namespace with -n"
        );
    }
}
