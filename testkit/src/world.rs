//! Real objects for integration tests: a namespace of one's own ([`TestNs`]), the shared
//! builders of `kruntimes::testing` created in it ([`Create`]), Runtime Pods marked Ready (there
//! is no kubelet) with heartbeat Leases, [`eventually`] for every wait, the scheduler and
//! runtimed as the built binary ([`process`]), and a recording watch of every Run event
//! ([`events`]).

pub mod events;
pub mod process;

use std::collections::BTreeMap;
use std::fmt::{self, Display};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use kruntimes::api::{LABEL_RUNTIME, PersistentWorkspace, Run, RunPhase, Runtime};
use kruntimes::testing::{
    PodBuilder, PriorityClassBuilder, RunBuilder, RuntimeBuilder, WorkspaceBuilder, heartbeat_lease,
};

pub use events::{OvercommitWatch, RunEvent, RunEvents, replay};
pub use process::{
    Backend, RuntimeServerProcess, RuntimedApi, RuntimedProcess, SchedulerProcess, ServerCounts,
    http, http_get, https_get, https_get_from, sample, wait_ready,
};

/// The usual patience of a wait on the control plane.
pub const WAIT: Duration = Duration::from_secs(20);
/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(50);
/// `leaseDurationSeconds` of the heartbeats tests write: nothing renews them, so a fresh one
/// must stay fresh for the whole test.
pub const LIVE_LEASE_SECONDS: i32 = 3600;
/// The finalizer that holds a Pod built with `.deleting()` in its terminating state; a test
/// that uses one lets it go by clearing the finalizers.
pub const HOLD_FINALIZER: &str = "kruntimes.io/test-hold";

/// Returns once the clock has passed the second `run` was created in: creationTimestamp has
/// whole seconds, so a Run created after this is later in the queue's order whatever its name.
pub async fn after_the_second_of(run: &Run) {
    let created = run.metadata.creation_timestamp.as_ref().unwrap().0;
    let next = jiff::Timestamp::from_second(created.as_second() + 1).unwrap();
    let wait = next.duration_since(jiff::Timestamp::now());
    if wait.is_positive() {
        tokio::time::sleep(Duration::try_from(wait).unwrap()).await;
    }
}

/// Polls `f` every 50 ms until it returns `Ok`, and returns that value. After `timeout`,
/// panics naming `what` and the last observation `f` returned as `Err`.
pub async fn eventually<T, O: Display>(
    timeout: Duration,
    what: &str,
    mut f: impl AsyncFnMut() -> Result<T, O>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match f().await {
            Ok(value) => return value,
            Err(observed) => observed,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last observed: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until none of `paths` exists (a Run's directory or artifacts removed); after
/// `timeout`, panics naming `what` and the paths still there.
pub async fn gone(timeout: Duration, what: &str, paths: &[std::path::PathBuf]) {
    eventually(timeout, what, async || {
        match paths.iter().filter(|p| p.exists()).collect::<Vec<_>>() {
            left if left.is_empty() => Ok(()),
            left => Err(format!("still there: {left:?}")),
        }
    })
    .await
}

/// One test's namespace on the test control plane, with an admin client.
#[derive(Clone)]
pub struct TestNs {
    pub client: Client,
    pub name: String,
}

/// The namespace's name.
impl Display for TestNs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl TestNs {
    /// Installs the CRDs (once per control plane) and creates a fresh namespace `<prefix>-…`.
    pub async fn new(prefix: &str) -> Self {
        let client = super::client().await;
        super::install_crds();
        let name = super::namespace(&client, prefix).await;
        Self { client, name }
    }

    /// An existing namespace `name` reached through `client`: another cluster's (the
    /// single-node cluster's), or one a test did not create.
    pub fn on(client: Client, name: &str) -> Self {
        Self {
            client,
            name: name.to_string(),
        }
    }

    /// (reason, note, series count) of the Events regarding Run `name`, oldest first.
    pub async fn events_of(&self, name: &str) -> Vec<(String, String, i32)> {
        let mut events: Vec<Event> = self
            .api::<Event>()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect();
        events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        events
            .into_iter()
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                    e.series.map_or(1, |s| s.count),
                )
            })
            .collect()
    }

    /// The API of a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Merge-patches the object `name` of kind `K` with `patch`.
    pub async fn merge<K>(&self, name: &str, patch: serde_json::Value) -> K
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
        K: Clone + fmt::Debug + DeserializeOwned,
    {
        self.api::<K>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {} {name}: {e}", K::kind(&())))
    }

    /// Sets `spec.cancelRequested` on the Run `name` (one way).
    pub async fn cancel(&self, name: &str) {
        self.merge::<Run>(name, serde_json::json!({"spec": {"cancelRequested": true}}))
            .await;
    }

    /// Waits until the Run `name` is in `phase`; returns it.
    pub async fn wait_phase(&self, name: &str, phase: RunPhase, within: Duration) -> Run {
        self.wait_runs(within, &format!("Run {name} to be {phase:?}"), |runs| {
            runs.iter()
                .find(|r| r.name_any() == name && r.phase() == phase)
                .cloned()
        })
        .await
    }

    pub fn runs(&self) -> Api<Run> {
        self.api()
    }

    pub async fn get_run(&self, name: &str) -> Run {
        self.runs()
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get run {name}: {e}"))
    }

    /// Sets a Run's status phase (and Pod), as a scheduler or runtimed would.
    pub async fn set_phase(&self, name: &str, phase: RunPhase, pod: Option<&str>) {
        let mut status = json!({"phase": phase});
        if let Some(pod) = pod {
            status["assignedPod"] = json!(pod);
        }
        self.runs()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .unwrap_or_else(|e| panic!("set phase of run {name}: {e}"));
    }

    /// Sets the Pod's Ready condition, as a kubelet would.
    pub async fn set_ready(&self, pod: &str, ready: bool) {
        let status = json!({"status": {"phase": "Running", "conditions": [{
            "type": "Ready", "status": if ready { "True" } else { "False" },
            "lastTransitionTime": jiff::Timestamp::now().to_string(),
        }]}});
        self.api::<Pod>()
            .patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap_or_else(|e| panic!("mark pod {pod} ready={ready}: {e}"));
    }

    /// Writes the Pod's heartbeat Lease as runtimed would, renewed now for an hour.
    pub async fn heartbeat(&self, pod: &Pod) {
        let lease = heartbeat_lease(
            &self.name,
            &pod.name_any(),
            &pod.uid().expect("a created Pod"),
            jiff::Timestamp::now(),
            LIVE_LEASE_SECONDS,
        );
        self.apply_lease(&lease).await;
    }

    async fn apply_lease(&self, lease: &Lease) {
        let name = lease.name_any();
        self.api::<Lease>()
            .patch(
                &name,
                &PatchParams::apply("kruntimes-test").force(),
                &Patch::Apply(lease),
            )
            .await
            .unwrap_or_else(|e| panic!("heartbeat lease {name}: {e}"));
    }

    /// Polls `check` over the namespace's Runs until it returns `Some`; panics with `what` and
    /// the Runs last seen after `timeout`.
    pub async fn wait_runs<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&[Run]) -> Option<T>,
    ) -> T {
        let api = self.runs();
        eventually(timeout, what, async || {
            let runs = api.list(&Default::default()).await.unwrap().items;
            check(&runs).ok_or(RunsSeen(runs))
        })
        .await
    }

    /// Waits up to `timeout` until every Run named in `names` has ended; returns them by name.
    /// The one "wait until these Runs end" of the suites.
    pub async fn runs_ended<N: AsRef<str>>(
        &self,
        timeout: Duration,
        names: &[N],
    ) -> BTreeMap<String, Run> {
        let what = format!("{} Run(s) to end", names.len());
        self.wait_runs(timeout, &what, |runs| {
            let ended: BTreeMap<String, Run> = runs
                .iter()
                .filter(|r| r.phase().is_terminal())
                .filter(|r| names.iter().any(|n| n.as_ref() == r.name_any()))
                .map(|r| (r.name_any(), r.clone()))
                .collect();
            (ended.len() == names.len()).then_some(ended)
        })
        .await
    }

    /// Waits until the leader-election Lease `kruntimes-scheduler` names `identity`.
    pub async fn wait_leader(&self, identity: &str, timeout: Duration) {
        let leases = self.api::<Lease>();
        eventually(timeout, &format!("{identity} to lead"), async || {
            let lease = leases.get_opt("kruntimes-scheduler").await.unwrap();
            let holder = lease.and_then(|l| l.spec?.holder_identity);
            if holder.as_deref() == Some(identity) {
                Ok(())
            } else {
                Err(format!("holder {holder:?}"))
            }
        })
        .await
    }

    /// Waits until the leader-election Lease `kruntimes-scheduler` is held by one of the Pods
    /// `candidates` (a Pod's holder identity is its name plus `-<pid>`) and returns that Pod.
    pub async fn wait_leader_among(&self, candidates: &[String], timeout: Duration) -> String {
        let leases = self.api::<Lease>();
        let what = format!("a leader among {candidates:?}");
        eventually(timeout, &what, async || {
            let lease = leases
                .get_opt("kruntimes-scheduler")
                .await
                .map_err(|e| e.to_string())?;
            let holder = lease.and_then(|l| l.spec?.holder_identity);
            candidates
                .iter()
                .find(|c| {
                    holder
                        .as_ref()
                        .is_some_and(|h| h.starts_with(&format!("{c}-")))
                })
                .cloned()
                .ok_or_else(|| format!("holder {holder:?}"))
        })
        .await
    }

    /// Creates the test's PriorityClasses, which are cluster-scoped: each is named
    /// `NAMESPACE-NAME` (see [`TestNs::class`]). Delete them with
    /// [`TestNs::delete_priority_classes`].
    pub async fn priority_classes(&self, classes: &[PriorityClassBuilder]) -> Vec<String> {
        let api: Api<PriorityClass> = Api::all(self.client.clone());
        let mut names = Vec::new();
        for class in classes {
            let mut object = class.build();
            let name = self.class(class.name());
            object.metadata.name = Some(name.clone());
            object.metadata.uid = None;
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create PriorityClass {name}: {e}"));
            names.push(name);
        }
        names
    }

    /// The cluster-wide name of the test's PriorityClass `name`.
    pub fn class(&self, name: &str) -> String {
        format!("{}-{name}", self.name)
    }

    /// Deletes PriorityClasses made by [`TestNs::priority_classes`].
    pub async fn delete_priority_classes(&self, names: &[String]) {
        let api: Api<PriorityClass> = Api::all(self.client.clone());
        for name in names {
            let _ = api.delete(name, &DeleteParams::default()).await;
        }
    }

    /// Waits until exactly `n` live Pods of `runtime` exist (made by the Runtime controller).
    pub async fn runtime_pods(&self, runtime: &str, n: usize) -> Vec<Pod> {
        let api = self.api::<Pod>();
        let params = ListParams::default().labels(&format!("{LABEL_RUNTIME}={runtime}"));
        let what = format!("{n} Pods of Runtime {runtime}");
        eventually(WAIT, &what, async || {
            let items = api.list(&params).await.unwrap().items;
            let pods: Vec<Pod> = items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            if pods.len() == n {
                Ok(pods)
            } else {
                Err(format!("{} Pods", pods.len()))
            }
        })
        .await
    }
}

/// The Runs of a namespace, one line each, for a timeout message.
struct RunsSeen(Vec<Run>);

impl Display for RunsSeen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.0 {
            let s = r.status.clone().unwrap_or_default();
            let (phase, pod, message) = (s.phase, s.assigned_pod, s.message);
            write!(
                f,
                "\n{}: {phase:?} pod={pod:?} msg={message:?}",
                r.name_any()
            )?;
        }
        Ok(())
    }
}

/// Creates what a `kruntimes::testing` builder describes in a [`TestNs`].
#[allow(async_fn_in_trait)]
pub trait Create {
    type Object;
    async fn create(&self, ns: &TestNs) -> Self::Object;
}

/// Creates `object` in `ns` with its UID and status left to the API server.
pub async fn create_in<K>(ns: &TestNs, mut object: K) -> K
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    K: Clone + fmt::Debug + Serialize + DeserializeOwned,
{
    let meta = object.meta_mut();
    meta.namespace = Some(ns.name.clone());
    meta.uid = None;
    let name = object.name_any();
    ns.api::<K>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {} {name}: {e}", K::kind(&())))
}

/// Creates the Runs `runs` builds in `ns`, `at_once` requests at a time (the many Runs of a
/// test or bench of scale; [`Create`] makes one at a time).
pub async fn create_many(ns: &TestNs, runs: impl IntoIterator<Item = RunBuilder>, at_once: usize) {
    use futures::StreamExt as _;
    futures::stream::iter(runs)
        .map(|r| create_in(ns, r.build()))
        .buffer_unordered(at_once)
        .for_each(|_| std::future::ready(()))
        .await;
}

impl<B: Create> Create for [B] {
    type Object = Vec<B::Object>;

    /// Creates each in turn.
    async fn create(&self, ns: &TestNs) -> Vec<B::Object> {
        let mut created = Vec::with_capacity(self.len());
        for b in self {
            created.push(b.create(ns).await);
        }
        created
    }
}

impl Create for RunBuilder {
    type Object = Run;

    /// Creates the Run, then writes its status, if it has one, as the scheduler or runtimed
    /// would have. Returns the Run as last written.
    async fn create(&self, ns: &TestNs) -> Run {
        let mut run = self.build();
        let status = run.status.take();
        assert!(
            run.metadata.deletion_timestamp.is_none(),
            "cannot create a deleted Run"
        );
        let created = create_in(ns, run).await;
        let Some(status) = status else {
            return created;
        };
        let patch = Patch::Merge(json!({"status": status}));
        ns.runs()
            .patch_status(self.name(), &PatchParams::default(), &patch)
            .await
            .unwrap_or_else(|e| panic!("write the status of run {}: {e}", self.name()))
    }
}

impl Create for PodBuilder {
    type Object = Pod;

    /// Creates the Runtime Pod, then plays the kubelet (its Ready condition) and runtimed (its
    /// heartbeat; a fresh one holds for [`LIVE_LEASE_SECONDS`]). A deleting Pod is held by
    /// [`HOLD_FINALIZER`] and deleted. Returns the Pod as created.
    async fn create(&self, ns: &TestNs) -> Pod {
        let b = self.clone().ns(&ns.name);
        let mut pod = b.build();
        let status = pod.status.take();
        let deleting = pod.metadata.deletion_timestamp.take().is_some();
        if deleting {
            pod.metadata.finalizers = Some(vec![HOLD_FINALIZER.to_string()]);
        }
        let created = create_in(ns, pod).await;
        let name = created.name_any();
        let pods = ns.api::<Pod>();
        let patch = Patch::Merge(json!({"status": status}));
        pods.patch_status(&name, &PatchParams::default(), &patch)
            .await
            .unwrap_or_else(|e| panic!("write the status of pod {name}: {e}"));
        let uid = created.uid().expect("a created Pod has a UID");
        if let Some(lease) = b.lease_at(&uid, jiff::Timestamp::now(), LIVE_LEASE_SECONDS) {
            ns.apply_lease(&lease).await;
        }
        if deleting {
            pods.delete(&name, &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("delete pod {name}: {e}"));
        }
        created
    }
}

impl Create for WorkspaceBuilder {
    type Object = PersistentWorkspace;

    /// Creates the PersistentWorkspace, then writes its status, if it has one.
    async fn create(&self, ns: &TestNs) -> PersistentWorkspace {
        let mut workspace = self.build();
        let status = workspace.status.take();
        let created = create_in(ns, workspace).await;
        let Some(status) = status else {
            return created;
        };
        ns.api::<PersistentWorkspace>()
            .patch_status(
                self.name(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .unwrap_or_else(|e| panic!("write the status of workspace {}: {e}", self.name()))
    }
}

impl Create for RuntimeBuilder {
    type Object = Runtime;

    async fn create(&self, ns: &TestNs) -> Runtime {
        create_in(ns, self.build()).await
    }
}

/// How many of `runs` are in `phase`.
pub fn count(runs: &[Run], phase: RunPhase) -> usize {
    runs.iter().filter(|r| r.phase() == phase).count()
}

/// Whether the scheduler has written a message on `r` (decided, whatever it decided).
pub fn has_message(r: &Run) -> bool {
    r.status.as_ref().and_then(|s| s.message.as_ref()).is_some()
}

/// How many of `runs` are Pending with a message from the scheduler (decided, not placed).
pub fn waiting(runs: &[Run]) -> usize {
    runs.iter()
        .filter(|r| r.phase() == RunPhase::Pending && has_message(r))
        .count()
}

fn find<'a>(runs: &'a [Run], name: &str) -> Option<&'a Run> {
    runs.iter().find(|r| r.name_any() == name)
}

pub fn phase_of(runs: &[Run], name: &str) -> Option<RunPhase> {
    find(runs, name).map(|r| r.phase())
}

/// The Pod the Run `name` is active on.
pub fn pod_of(runs: &[Run], name: &str) -> Option<String> {
    find(runs, name).and_then(|r| r.active_pod().map(str::to_string))
}

/// The scheduler's (or runtimed's) message on the Run `name`.
pub fn message_of(runs: &[Run], name: &str) -> Option<String> {
    find(runs, name).and_then(|r| r.status.as_ref()?.message.clone())
}
