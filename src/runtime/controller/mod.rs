//! The Runtime controller: keeps `spec.replicas` Runtime Pods per Runtime, projects
//! `spec.capacity.resources` onto them as `kruntimes.io/capacity.<resource>` annotations (in
//! place, never by recreating Pods), and maintains the Runtime's status.
//!
//! [`plan`] is pure and decides everything; [`reconcile`] only carries the plan out. It never
//! looks at Runs: placement is the scheduler's business.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use thiserror::Error;
use tracing::{info, warn};

use crate::api::lenient::{self, Lenient};
use crate::api::resources::parse_capacity_spec;
use crate::api::status::set_condition;
use crate::api::{
    ANNOTATION_SCALE_DOWN, LABEL_RUNTIME, PersistentWorkspace, Run, Runtime, patch_params,
    post_params,
};
use crate::runtime::pod::{self, Injection};
use kube::runtime::reflector::ObjectRef;

mod plan;
pub use plan::{Plan, new_pod, plan};
use plan::{capacity_annotations, revision_of};

/// Reasons on the Runtime's Ready condition and Events.
pub mod reasons {
    pub const ALL_READY: &str = "AllReplicasReady";
    pub const NOT_READY: &str = "ReplicasNotReady";
    pub const INVALID_CAPACITY: &str = "InvalidCapacity";
    /// The condition a Deployment's ReplicaSet sets when it cannot create a Pod, and its
    /// reason (also the Warning Event's).
    pub const REPLICA_FAILURE: &str = crate::api::CONDITION_REPLICA_FAILURE;
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// No Runtime Pod is created while runtimed's admission policy is missing or does not
    /// deny ([`crate::policy::runtimed::refusal`]).
    pub const ADMISSION_POLICY_MISSING: &str = "AdmissionPolicyMissing";
}

/// How often a Runtime whose Pods wait for runtimed's admission policy looks for it again.
const POLICY_RECHECK: Duration = Duration::from_secs(30);

/// The longest pause between two tries of a Runtime whose Pods cannot be created.
const MAX_CREATE_BACKOFF: Duration = Duration::from_secs(300);
/// The first one.
const MIN_CREATE_BACKOFF: Duration = Duration::from_secs(5);

/// How long to wait before trying again to create the Pods of a Runtime that has failed to
/// since `since`: as long as it has been failing, between 5 s and 5 minutes (a backoff that
/// doubles without a counter to keep: each wait is the time failed so far).
fn create_backoff(since: &Time, now: &Time) -> Duration {
    let failing = now
        .0
        .duration_since(since.0)
        .try_into()
        .unwrap_or(Duration::ZERO);
    failing.clamp(MIN_CREATE_BACKOFF, MAX_CREATE_BACKOFF)
}

#[derive(Debug, Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("Runtime has no namespace")]
    NoNamespace,
}

/// Publishes a Warning Event on the Runtime (a failed publish is only logged).
async fn warn_runtime(ctx: &Context, runtime: &Runtime, reason: &str, action: &str, note: String) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &runtime.object_ref(&())).await {
        warn!("cannot publish the {reason} event: {e}");
    }
}

/// Applies what the Runtime's Pods need before they are created: its NetworkPolicy
/// ([`crate::runtime::network`]) and runtimed's ServiceAccount and RoleBinding
/// ([`crate::runtime::identity`]; a Pod of a missing account is refused), for Pods of `spec`
/// (a new Pod's). Refused: the API server's message, said on the Runtime as for a Pod that
/// cannot be created.
async fn ensure_companions(
    client: &Client,
    runtime: &Runtime,
    spec: &PodSpec,
) -> Result<(), String> {
    let ns = runtime.namespace().unwrap_or_default();
    let params = kube::api::PatchParams::apply(crate::api::FIELD_MANAGER).force();
    let said = |what: &str, name: &str, e: kube::Error| -> String {
        let message = match e {
            kube::Error::Api(s) => s.message,
            e => e.to_string(),
        };
        format!("cannot apply {what} {name}: {message}")
            .chars()
            .take(1000)
            .collect()
    };
    let template = runtime.spec.template.spec.clone().unwrap_or_default();
    let inject = pod::injects(&runtime.spec.template.metadata.clone().unwrap_or_default());
    let server_port = (inject && pod::follows_contract(&template)).then_some(runtime.spec.port);
    let policy = crate::runtime::network::policy(runtime, spec, server_port);
    Api::<k8s_openapi::api::networking::v1::NetworkPolicy>::namespaced(client.clone(), &ns)
        .patch(&policy.name_any(), &params, &Patch::Apply(&policy))
        .await
        .map_err(|e| said("the Runtime's NetworkPolicy", &policy.name_any(), e))?;
    let Some((account, binding)) = crate::runtime::identity::objects(runtime) else {
        return Ok(());
    };
    let name = account.name_any();
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &ns)
        .patch(&name, &params, &Patch::Apply(&account))
        .await
        .map_err(|e| said("runtimed's ServiceAccount", &name, e))?;
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), &ns)
        .patch(&name, &params, &Patch::Apply(&binding))
        .await
        .map_err(|e| said("runtimed's RoleBinding", &name, e))?;
    Ok(())
}

/// `<runtime>-<5 chars>` from the alphabet Kubernetes uses for generated names.
fn pod_name(runtime: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let mut n = hasher.finish();
    let suffix: String = (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect();
    let prefix: String = runtime.chars().take(57).collect();
    format!("{prefix}-{suffix}")
}

/// Shared state of the Runtime controller.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub injection: Injection,
}

impl Context {
    pub fn new(client: Client, injection: Injection) -> Arc<Self> {
        let reporter = Reporter {
            controller: "kruntimes-runtime-controller".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            injection,
        })
    }
}

/// Carries out [`plan`] for one Runtime.
pub async fn reconcile(runtime: Arc<Runtime>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = runtime.namespace().ok_or(Error::NoNamespace)?;
    if let (_, Some(why)) = crate::scheduler::framework::fairness::FairShare::of(&runtime) {
        warn!(runtime = %runtime.name_any(), namespace = %ns, "{why}");
    }
    for why in crate::runtime::rollout::Strategy::of(runtime.annotations()).1 {
        warn!(runtime = %runtime.name_any(), namespace = %ns, "{why}");
    }
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = runtime.uid().unwrap_or_default();
    let selector = format!("{LABEL_RUNTIME}={}", runtime.name_any());
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.owner_references().iter().any(|o| o.uid == uid))
        .collect();
    let wanted = usize::try_from(runtime.spec.replicas.max(0)).unwrap_or(0);
    let live = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    // What a new Pod would be now: its revision, and the ports its NetworkPolicy opens.
    let model = new_pod(&runtime, "model", &BTreeMap::new(), &ctx.injection);
    let revision = revision_of(&model);
    let rolling = pods.iter().any(|p| {
        let annotations = p.annotations();
        annotations.get(crate::runtime::rollout::ANNOTATION_REVISION) != Some(&revision)
            || annotations.contains_key(ANNOTATION_SCALE_DOWN)
    });
    // Only a scale-down or a rollout needs to know where Runs are; both are rare, so a list
    // is fine.
    let (active_runs, bound) = if live > wanted || rolling {
        (
            active_runs(&ctx.client, &ns, &runtime.name_any()).await?,
            bound_pods(&ctx.client, &ns, &runtime.name_any()).await?,
        )
    } else {
        Default::default()
    };
    let now = Time(jiff::Timestamp::now());
    let mut plan = plan(&runtime, &pods, &active_runs, &bound, Some(&revision), &now);
    // Why the last Pod could not be created (the reason, and the API server's words or ours).
    let mut create_failed: Option<(&'static str, String)> = None;

    if let Some(message) = &plan.invalid_capacity {
        warn!(runtime = %runtime.name_any(), namespace = %ns, "{message}");
        warn_runtime(
            &ctx,
            &runtime,
            reasons::INVALID_CAPACITY,
            "ProjectCapacity",
            message.clone(),
        )
        .await;
    } else {
        let desired = parse_capacity_spec(runtime.spec.capacity_resources())
            .map(|c| capacity_annotations(&c))
            .unwrap_or_default();
        for (pod, patch) in &plan.annotate {
            let body = json!({"metadata": {"annotations": patch}});
            pods_api
                .patch(pod, &patch_params(), &Patch::Merge(&body))
                .await?;
            info!(%pod, namespace = %ns, "projected capacity annotations");
        }
        // Fail closed: a Pod's token is handed out only while runtimed's policy denies what
        // it must not do. Read again at every reconcile that would create a Pod.
        if plan.create > 0
            && let Some(why) = crate::policy::runtimed::refusal(
                &crate::policy::runtimed::presence(&ctx.client).await,
            )
        {
            create_failed = Some((reasons::ADMISSION_POLICY_MISSING, why));
            plan.create = 0;
        }
        if plan.create > 0
            && let Err(message) = ensure_companions(
                &ctx.client,
                &runtime,
                model.spec.as_ref().expect("new_pod sets a spec"),
            )
            .await
        {
            create_failed = Some((reasons::FAILED_CREATE, message));
            plan.create = 0;
        }
        for _ in 0..plan.create {
            let pod = new_pod(
                &runtime,
                &pod_name(&runtime.name_any()),
                &desired,
                &ctx.injection,
            );
            match pods_api.create(&post_params(), &pod).await {
                Ok(p) => info!(pod = %p.name_any(), namespace = %ns, "created Runtime Pod"),
                Err(kube::Error::Api(s)) if s.code == 409 => {} // name collision: next reconcile retries
                // Refused (quota, Pod Security, a missing service account, a bad template):
                // said on the Runtime, tried again after a backoff.
                Err(kube::Error::Api(s)) => {
                    let message = s.message.chars().take(1000).collect();
                    create_failed = Some((reasons::FAILED_CREATE, message));
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        for pod in &plan.drain {
            // Drained: the scheduler stops placing on it; it goes once its Runs have ended.
            let mark =
                json!({"metadata": {"annotations": {ANNOTATION_SCALE_DOWN: now.0.to_string()}}});
            match pods_api
                .patch(pod, &patch_params(), &Patch::Merge(&mark))
                .await
            {
                Ok(_) => {
                    info!(%pod, namespace = %ns, "draining out-of-date Runtime Pod for the rollout")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        for pod in &plan.delete {
            // Marked first: the scheduler stops placing on it before it goes.
            let mark = json!({"metadata": {"annotations": {ANNOTATION_SCALE_DOWN: "true"}}});
            match pods_api
                .patch(pod, &patch_params(), &Patch::Merge(&mark))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e.into()),
            }
            match pods_api.delete(pod, &DeleteParams::default()).await {
                Ok(_) => info!(%pod, namespace = %ns, "deleted surplus Runtime Pod"),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    // Pods that were created but cannot run say so too, with the kubelet's or the
    // scheduler's words, when no creation failed.
    let stuck: Vec<(String, String)> = pods
        .iter()
        .filter_map(crate::runtime::stuck::stuck)
        .collect();
    let requeue = match &create_failed {
        Some((reason, message)) => {
            warn!(runtime = %runtime.name_any(), namespace = %ns, "cannot create a Runtime Pod: {message}");
            // Said once per reason and message: a Runtime that keeps waiting for its policy
            // does not write an Event at every look.
            let said = runtime.status.iter().flat_map(|s| &s.conditions).any(|c| {
                c.type_ == reasons::REPLICA_FAILURE && c.reason == *reason && c.message == *message
            });
            if !said || *reason == reasons::FAILED_CREATE {
                warn_runtime(
                    &ctx,
                    &runtime,
                    reason,
                    "CreatePod",
                    format!("Error creating Runtime Pod: {message}"),
                )
                .await;
            }
            set_condition(
                &mut plan.status.conditions,
                reasons::REPLICA_FAILURE,
                true,
                reason,
                message,
                &now,
            );
            let since = plan
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == reasons::REPLICA_FAILURE)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            match *reason {
                // The policy is looked for again soon, whatever the backoff.
                reasons::ADMISSION_POLICY_MISSING => POLICY_RECHECK,
                _ => create_backoff(&since, &now),
            }
        }
        None if !stuck.is_empty() => {
            let (reason, _) = &stuck[0];
            let message: String = stuck
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; ")
                .chars()
                .take(1000)
                .collect();
            let said = plan.status.conditions.iter().any(|c| {
                c.type_ == reasons::REPLICA_FAILURE && c.reason == *reason && c.message == message
            });
            if !said {
                warn!(runtime = %runtime.name_any(), namespace = %ns, "Runtime Pods cannot run: {message}");
                warn_runtime(&ctx, &runtime, reason, "RunPod", message.clone()).await;
            }
            set_condition(
                &mut plan.status.conditions,
                reasons::REPLICA_FAILURE,
                true,
                reason,
                &message,
                &now,
            );
            // The Pods' own changes wake the controller; this is the safety net.
            Duration::from_secs(60)
        }
        // As a ReplicaSet does: the condition goes once no creation fails.
        None => {
            plan.status
                .conditions
                .retain(|c| c.type_ != reasons::REPLICA_FAILURE);
            Duration::from_secs(300)
        }
    };
    // Runs ending on a drained Pod do not wake this controller: look again soon.
    let requeue = match plan.draining {
        true => requeue.min(Duration::from_secs(5)),
        false => requeue,
    };
    if runtime.status.as_ref() != Some(&plan.status) {
        let api: Api<Runtime> = Api::namespaced(ctx.client.clone(), &ns);
        let body = json!({"status": plan.status});
        api.patch_status(&runtime.name_any(), &patch_params(), &Patch::Merge(&body))
            .await?;
    }
    Ok(Action::requeue(requeue))
}

/// Active Runs of `runtime` per Runtime Pod name.
async fn active_runs(
    client: &Client,
    ns: &str,
    runtime: &str,
) -> Result<BTreeMap<String, usize>, Error> {
    let runs: Api<Lenient<Run>> = Api::namespaced(client.clone(), ns);
    let listed = runs
        .list(&ListParams::default().fields(&format!("spec.runtime={runtime}")))
        .await?;
    let mut active = BTreeMap::new();
    for run in &lenient::decoded_items(listed.items) {
        if let Some(pod) = run.active_pod() {
            *active.entry(pod.to_string()).or_insert(0) += 1;
        }
    }
    Ok(active)
}

/// The Pods of `runtime` that a PersistentWorkspace is Bound to.
async fn bound_pods(client: &Client, ns: &str, runtime: &str) -> Result<BTreeSet<String>, Error> {
    let api: Api<Lenient<PersistentWorkspace>> = Api::namespaced(client.clone(), ns);
    let listed = api.list(&ListParams::default()).await?;
    Ok(lenient::decoded_items(listed.items)
        .iter()
        .filter(|w| w.spec.runtime == runtime)
        .filter_map(|w| w.bound_pod().map(str::to_string))
        .collect())
}

fn error_policy(runtime: Arc<Runtime>, err: &Error, _: Arc<Context>) -> Action {
    warn!(
        "reconciling Runtime {}/{} failed: {err}; retrying in 5s",
        runtime.namespace().unwrap_or_default(),
        runtime.name_any()
    );
    Action::requeue(Duration::from_secs(5))
}

/// Runs the Runtime controller over one namespace or all: its watches from the start, its
/// reconciles once `leading` resolves, until `shutdown`.
///
/// The watches (Runtimes, Runtime Pods, PersistentWorkspaces) start with the process, as
/// kube-controller-manager starts its informers before it wins its Lease: a standby comes to
/// lead with a warm store and reconciles every Runtime from it, without listing any of them
/// again. Until it leads, what they see is only stored; from then on it also triggers
/// reconciles. Returns when `shutdown` has stopped the reconciles, or when a watch ends.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    injection: Injection,
    leading: impl std::future::Future<Output = ()> + Send,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    // Leniently: a Runtime that does not decode is reported and skipped, it never stops the
    // reconciliation of the others.
    let runtimes: Api<Lenient<Runtime>> =
        crate::kubeclient::scoped_api(&client, namespace.as_deref());
    let pods: Api<Pod> = crate::kubeclient::scoped_api(&client, namespace.as_deref());
    let workspaces: Api<PersistentWorkspace> =
        crate::kubeclient::scoped_api(&client, namespace.as_deref());
    let forwarding = Arc::new(AtomicBool::new(false));
    let (reader, writer) = kube::runtime::reflector::store();
    let (runtime_changes, runtime_stream) = forwarded(&forwarding);
    let (pod_changes, pod_stream) = forwarded(&forwarding);
    let (workspace_changes, workspace_stream) = forwarded(&forwarding);
    let watch = async {
        tokio::join!(
            runtime_changes.from(
                crate::kubeclient::lenient_watch(runtimes, Default::default())
                    .reflect(writer)
                    .applied_objects()
            ),
            // A deleted Pod or workspace is a change too (a Pod to replace, a scale-down to
            // go on), as `Controller::owns` and `watches` take them.
            pod_changes.from(
                watcher(pods, watcher::Config::default().labels(LABEL_RUNTIME))
                    .backoff(crate::kubeclient::watch_backoff())
                    .touched_objects()
            ),
            workspace_changes.from(
                watcher(workspaces, watcher::Config::default())
                    .backoff(crate::kubeclient::watch_backoff())
                    .touched_objects()
            ),
        );
    };
    let reconcile_all = async {
        leading.await;
        // Forward first, then reconcile everything stored: a change either reached the store
        // before the pass reads it, or is forwarded.
        forwarding.store(true, Ordering::SeqCst);
        info!("leading: reconciling every Runtime from the watches' store");
        let ctx = Context::new(client, injection);
        Controller::for_stream(runtime_stream, reader)
            .owns_stream(pod_stream)
            // A released workspace may let a held-back scale-down go on.
            .watches_stream(workspace_stream, |w| {
                let ns = w.namespace()?;
                Some(ObjectRef::new(&w.spec.runtime).within(&ns))
            })
            .reconcile_all_on(futures::stream::once(std::future::ready(())))
            .graceful_shutdown_on(shutdown)
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {})
            .await;
    };
    tokio::select! {
        () = watch => warn!("the Runtime controller's watches ended"),
        () = reconcile_all => {}
    }
}

/// What one watch passes on to the reconciles: nothing until this replica leads (the store
/// has it), each applied object from then on.
struct Forward<K> {
    forwarding: Arc<AtomicBool>,
    changes: futures::channel::mpsc::UnboundedSender<Result<K, watcher::Error>>,
}

/// A watch's [`Forward`] and the stream of what it forwards.
fn forwarded<K>(
    forwarding: &Arc<AtomicBool>,
) -> (
    Forward<K>,
    futures::channel::mpsc::UnboundedReceiver<Result<K, watcher::Error>>,
) {
    let (changes, stream) = futures::channel::mpsc::unbounded();
    let forwarding = forwarding.clone();
    (
        Forward {
            forwarding,
            changes,
        },
        stream,
    )
}

impl<K> Forward<K> {
    /// Drives `watch` until it ends.
    async fn from(self, watch: impl futures::Stream<Item = Result<K, watcher::Error>>) {
        watch
            .for_each(|change| {
                match change {
                    Err(e) => warn!("Runtime controller watch: {e}"),
                    // Until it leads nobody reads the stream: nothing is queued for it.
                    Ok(object) if self.forwarding.load(Ordering::SeqCst) => {
                        let _ = self.changes.unbounded_send(Ok(object));
                    }
                    Ok(_) => {}
                }
                std::future::ready(())
            })
            .await;
    }
}

#[cfg(test)]
mod tests;
