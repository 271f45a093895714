//! Builders of Runs, Runtime Pods (with their heartbeat Leases) and Runtimes.
//!
//! Every builder yields the object as production would see it at [`NOW`]; integration tests
//! create the same objects on the real API server (`tests/support`), which assigns UIDs and
//! takes the status through the status subresource.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, MicroTime, ObjectMeta, Time,
};

use crate::api::resources::{capacity_annotation, parse_requests, resource_of_annotation};
use crate::api::{
    AffinityTerms, FunctionMode, LABEL_RUNTIME, LABEL_RUNTIME_POD, PersistentWorkspace,
    PersistentWorkspaceSpec, PersistentWorkspaceStatus, Run, RunAffinity, RunAffinityTerm, RunMode,
    RunPhase, RunResources, RunSpec, RunStatus, RunWorkspaceReference, Runtime, RuntimeCapacity,
    RuntimeSpec, TaskMode, WeightedRunAffinityTerm, WorkspacePhase,
};
use crate::runtimed::Identity;
use crate::runtimed::heartbeat::{self, desired_lease};
use crate::scheduler::framework::index::required_anti_affinity;
use crate::scheduler::framework::{Assumption, RunKey, Selector};

/// Builder methods that set one field: `name(args) => field = value;` becomes
/// `pub fn name(mut self, args) -> Self { self.field = value; self }`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $($arg: $ty),*) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}

pub const NS: &str = "default";
pub const RUNTIME: &str = "python";
/// The fixed "now" of every unit test and bench.
pub const NOW: Timestamp = Timestamp::constant(1_700_000_000, 0);
/// A fresh heartbeat was renewed this many seconds before "now".
pub const FRESH_AGO: i64 = 5;
/// `leaseDurationSeconds` of a heartbeat, unless the caller says how long a fresh one holds.
pub const LEASE_SECONDS: i32 = 40;
/// The image of a Runtime Pod's `runtimed` container (nothing pulls it: there is no kubelet).
pub const RUNTIMED_IMAGE: &str = "kruntimes.invalid/runtimed";

fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn quantities<V: ToString>(pairs: &[(&str, V)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A `LabelSelector` of `(key, operator, values)` expressions.
pub fn label_selector(exprs: &[(&str, &str, &[&str])]) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(
            exprs
                .iter()
                .map(|(key, op, values)| LabelSelectorRequirement {
                    key: key.to_string(),
                    operator: op.to_string(),
                    values: (!values.is_empty())
                        .then(|| values.iter().map(|v| v.to_string()).collect()),
                })
                .collect(),
        ),
    }
}

/// A one-expression `LabelSelector`.
pub fn expr_selector(key: &str, op: &str, values: &[&str]) -> LabelSelector {
    label_selector(&[(key, op, values)])
}

/// A compiled selector of `(key, operator, values)` expressions.
pub fn selector_expr(exprs: &[(&str, &str, &[&str])]) -> Selector {
    Selector::compile(&label_selector(exprs), "test").expect("valid test selector")
}

fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(string_map(pairs)),
        match_expressions: None,
    }
}

/// The UID set on a builder, else `<prefix>-<name>`.
fn uid_or_default(uid: &Option<String>, prefix: &str, name: &str) -> String {
    uid.clone().unwrap_or_else(|| format!("{prefix}-{name}"))
}

/// `NOW + seconds`.
pub fn at(seconds: i64) -> Timestamp {
    time_after_now(seconds)
}

fn time_after_now(seconds: i64) -> Timestamp {
    NOW.checked_add(SignedDuration::from_secs(seconds))
        .expect("test time in range")
}

// ----- Runs ---------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct RunBuilder {
    name: String,
    namespace: String,
    runtime: String,
    uid: Option<String>,
    resource_version: Option<String>,
    created: Option<Timestamp>,
    deleting: bool,
    requests: Option<BTreeMap<String, Quantity>>,
    labels: BTreeMap<String, String>,
    affinity: RunAffinity,
    mode: RunMode,
    env: Vec<EnvVar>,
    phase: RunPhase,
    pod: Option<String>,
    pod_uid: Option<String>,
    nominated: Option<String>,
    workspace: Option<String>,
    priority_class: Option<String>,
    timeout: Option<String>,
    cancel_requested: bool,
    ttl: Option<i32>,
    priority: Option<i32>,
    started: Option<Timestamp>,
    disruption: bool,
}

/// A Pending Run in [`NS`] for [`RUNTIME`] with UID `uid-<name>`, no requests (so `runs: 1`)
/// and the Task `true`.
pub fn run(name: &str) -> RunBuilder {
    RunBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        uid: None,
        resource_version: None,
        created: None,
        deleting: false,
        requests: None,
        labels: BTreeMap::new(),
        affinity: RunAffinity::default(),
        mode: RunMode::default(),
        env: Vec::new(),
        phase: RunPhase::Pending,
        pod: None,
        pod_uid: None,
        nominated: None,
        workspace: None,
        priority_class: None,
        timeout: None,
        cancel_requested: false,
        ttl: None,
        priority: None,
        started: None,
        disruption: false,
    }
    .task(&["true"])
}

impl RunBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        runtime(runtime: &str) => runtime = runtime.to_string();
        uid(uid: &str) => uid = Some(uid.to_string());
        resource_version(rv: &str) => resource_version = Some(rv.to_string());
        /// Deleted, with its finalizers still holding it.
        deleting() => deleting = true;
        /// The UID of the Pod it is bound to (`status.assignedPodUID`).
        pod_uid(uid: &str) => pod_uid = Some(uid.to_string());
        /// Pending with the scheduler's nomination recorded (`status.nominatedPodName`).
        nominated(pod: &str) => nominated = Some(pod.to_string());
        /// Uses the PersistentWorkspace `name` (`spec.workspace.name`).
        workspace(name: &str) => workspace = Some(name.to_string());
        /// `spec.priorityClassName`.
        priority_class(name: &str) => priority_class = Some(name.to_string());
        /// `spec.timeout`, a Go duration such as `3s`.
        timeout(duration: &str) => timeout = Some(duration.to_string());
        /// `spec.cancelRequested: true`.
        cancel_requested() => cancel_requested = true;
        /// `spec.ttlSecondsAfterFinished`.
        ttl_after_finished(seconds: i32) => ttl = Some(seconds);
        /// `status.priority`, as the scheduler records it.
        priority(value: i32) => priority = Some(value);
        /// `status.startTime`.
        started_at(at: Timestamp) => started = Some(at);
        /// `DisruptionTarget=True/PreemptionByScheduler`: the scheduler asked runtimed to stop it.
        disruption_requested() => disruption = true;
        running() => phase = RunPhase::Running;
        succeeded() => phase = RunPhase::Succeeded;
        failed() => phase = RunPhase::Failed;
        pending() => phase = RunPhase::Pending;
    }

    /// Created `seconds` after the Unix epoch.
    pub fn created(mut self, seconds: i64) -> Self {
        self.created = Some(Timestamp::from_second(seconds).expect("test time in range"));
        self
    }

    /// Adds whole-number requests.
    pub fn requests(mut self, requests: &[(&str, u64)]) -> Self {
        self.requests
            .get_or_insert_with(BTreeMap::new)
            .extend(quantities(requests));
        self
    }

    /// Adds requests as raw quantity strings (possibly invalid, which only the scheduler
    /// refuses).
    pub fn request_strs(mut self, requests: &[(&str, &str)]) -> Self {
        self.requests
            .get_or_insert_with(BTreeMap::new)
            .extend(quantities(requests));
        self
    }

    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        self.labels.extend(string_map(labels));
        self
    }

    /// A Task running `args` (replacing the default `true`; keeps the environment).
    pub fn task(mut self, args: &[&str]) -> Self {
        self.task_mut().args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Adds an environment variable (`spec.env`).
    pub fn env(mut self, var: EnvVar) -> Self {
        self.env.push(var);
        self
    }

    fn task_mut(&mut self) -> &mut TaskMode {
        self.mode.task.get_or_insert_with(TaskMode::default)
    }

    /// `spec.mode.function.idleTimeoutSeconds` of a function Run.
    pub fn idle_timeout(mut self, seconds: i32) -> Self {
        if let Some(f) = self.mode.function.as_mut() {
            f.idle_timeout_seconds = Some(seconds);
        }
        self
    }

    /// A function Run (`spec.mode.function` with `handler`, no task), which runtimed without a
    /// runtime server cannot execute.
    pub fn function(mut self, handler: &str) -> Self {
        self.mode = RunMode {
            task: None,
            function: Some(FunctionMode {
                handler: Some(handler.to_string()),
                idle_timeout_seconds: None,
            }),
        };
        self
    }

    fn terms(&mut self, anti: bool) -> &mut AffinityTerms {
        let slot = if anti {
            &mut self.affinity.run_anti_affinity
        } else {
            &mut self.affinity.run_affinity
        };
        slot.get_or_insert_with(AffinityTerms::default)
    }

    /// A required (anti-)affinity term with an arbitrary topology key and selector.
    pub fn affinity_term(
        mut self,
        anti: bool,
        topology_key: &str,
        selector: LabelSelector,
    ) -> Self {
        self.terms(anti).required.push(RunAffinityTerm {
            label_selector: selector,
            topology_key: topology_key.to_string(),
        });
        self
    }

    /// Required affinity: placed only on a Runtime Pod with a Run labelled `labels`.
    pub fn requires(self, labels: &[(&str, &str)]) -> Self {
        self.affinity_term(false, LABEL_RUNTIME_POD, match_labels(labels))
    }

    /// Required anti-affinity: never placed on a Runtime Pod with a Run labelled `labels`.
    pub fn anti(self, labels: &[(&str, &str)]) -> Self {
        self.affinity_term(true, LABEL_RUNTIME_POD, match_labels(labels))
    }

    fn preferred(mut self, anti: bool, weight: i32, labels: &[(&str, &str)]) -> Self {
        self.terms(anti).preferred.push(WeightedRunAffinityTerm {
            weight,
            term: RunAffinityTerm {
                label_selector: match_labels(labels),
                topology_key: LABEL_RUNTIME_POD.to_string(),
            },
        });
        self
    }

    /// Preferred affinity to Runs with these labels.
    pub fn prefers(self, weight: i32, labels: &[(&str, &str)]) -> Self {
        self.preferred(false, weight, labels)
    }

    /// Preferred anti-affinity to Runs with these labels.
    pub fn avoids(self, weight: i32, labels: &[(&str, &str)]) -> Self {
        self.preferred(true, weight, labels)
    }

    /// Scheduled on `pod` (active); `status.assignedPodUID` stays unset unless `pod_uid` sets it.
    pub fn on(mut self, pod: &str) -> Self {
        self.phase = RunPhase::Scheduled;
        self.pod = Some(pod.to_string());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn key(&self) -> RunKey {
        RunKey::of(&self.build())
    }

    /// The Run; it has no status while it is Pending and unbound, as when just created.
    pub fn build(&self) -> Run {
        let mut run = Run::new(
            &self.name,
            RunSpec {
                runtime: self.runtime.clone(),
                resources: self
                    .requests
                    .clone()
                    .map(|requests| RunResources { requests }),
                affinity: (self.affinity != RunAffinity::default()).then(|| self.affinity.clone()),
                mode: self.mode.clone(),
                env: self.env.clone(),
                workspace: self.workspace.clone().map(|name| RunWorkspaceReference {
                    name,
                    ..Default::default()
                }),
                priority_class_name: self.priority_class.clone(),
                timeout: self.timeout.clone(),
                cancel_requested: self.cancel_requested,
                ttl_seconds_after_finished: self.ttl,
                ..Default::default()
            },
        );
        let meta = &mut run.metadata;
        meta.namespace = Some(self.namespace.clone());
        meta.uid = Some(uid_or_default(&self.uid, "uid", &self.name));
        meta.resource_version = self.resource_version.clone();
        meta.creation_timestamp = self.created.map(Time);
        meta.deletion_timestamp = self.deleting.then_some(Time(NOW));
        meta.labels = (!self.labels.is_empty()).then(|| self.labels.clone());
        let unbound = self.phase == RunPhase::Pending
            && self.pod.is_none()
            && self.pod_uid.is_none()
            && self.nominated.is_none()
            && self.priority.is_none();
        run.status = (!unbound).then(|| RunStatus {
            phase: Some(self.phase),
            assigned_pod: self.pod.clone(),
            assigned_pod_uid: self.pod_uid.clone(),
            nominated_pod_name: self.nominated.clone(),
            priority: self.priority,
            start_time: self.started.map(Time),
            conditions: if self.disruption {
                let mut conditions = Vec::new();
                crate::api::status::set_condition(
                    &mut conditions,
                    crate::api::status::CONDITION_DISRUPTION_TARGET,
                    true,
                    crate::api::status::reasons::PREEMPTION_BY_SCHEDULER,
                    "preempted",
                    &Time(NOW),
                );
                conditions
            } else {
                Vec::new()
            },
            ..Default::default()
        });
        run
    }

    /// The assumption Reserve would record for this Run on `pod`.
    pub fn assumption(&self, pod: &str) -> Assumption {
        let run = self.build();
        Assumption {
            run_name: self.name.clone(),
            runtime: self.runtime.clone(),
            pod: pod.to_string(),
            request: parse_requests(self.requests.as_ref()).expect("valid test request"),
            labels: self.labels.clone(),
            anti_affinity: required_anti_affinity(&run),
            workspace: self.workspace.clone(),
        }
    }
}

// ----- Runtime Pods and their heartbeat Leases ----------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum LeaseState {
    Fresh,
    RenewedAgo(i64),
    Missing,
    Foreign,
}

#[derive(Debug, Clone)]
pub struct PodBuilder {
    name: String,
    namespace: String,
    runtime: String,
    uid: Option<String>,
    ready: bool,
    deleting: bool,
    annotations: BTreeMap<String, String>,
    lease: LeaseState,
}

/// A Ready Runtime Pod of [`RUNTIME`] in [`NS`] with UID `pod-uid-<name>`, a fresh heartbeat
/// and no capacity annotations (so the default runs capacity of 2).
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        uid: None,
        ready: true,
        deleting: false,
        annotations: BTreeMap::new(),
        lease: LeaseState::Fresh,
    }
}

/// One [`pod`] of `capacity` per name.
pub fn pods(names: &[&str], capacity: &[(&str, u64)]) -> Vec<PodBuilder> {
    names.iter().map(|n| pod(n).capacity(capacity)).collect()
}

impl PodBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        runtime(runtime: &str) => runtime = runtime.to_string();
        uid(uid: &str) => uid = Some(uid.to_string());
        ready() => ready = true;
        not_ready() => ready = false;
        /// Deleted, with a finalizer still holding it.
        deleting() => deleting = true;
        /// Heartbeat renewed `seconds` ago with a [`LEASE_SECONDS`] duration.
        lease_renewed_ago(seconds: i64) => lease = LeaseState::RenewedAgo(seconds);
        no_lease() => lease = LeaseState::Missing;
        /// A fresh Lease held by some other identity.
        foreign_lease() => lease = LeaseState::Foreign;
    }

    /// Replaces the capacity annotations, each written under
    /// [`capacity_annotation`]`(resource)` as the Runtime controller writes it.
    pub fn capacity(self, capacity: &[(&str, u64)]) -> Self {
        self.capacity_annotations(capacity)
    }

    /// Replaces the capacity annotations with raw (possibly malformed) values.
    pub fn capacity_strs(self, capacity: &[(&str, &str)]) -> Self {
        self.capacity_annotations(capacity)
    }

    fn capacity_annotations<V: ToString>(mut self, capacity: &[(&str, V)]) -> Self {
        self.annotations
            .retain(|key, _| resource_of_annotation(key).is_none());
        for (resource, value) in capacity {
            let key = capacity_annotation(resource).expect("an advertisable test resource");
            self.annotations.insert(key, value.to_string());
        }
        self
    }

    /// Any annotation but a capacity one (those go through [`Self::capacity`]).
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        assert!(
            resource_of_annotation(key).is_none(),
            "write capacity annotations with .capacity(), not .annotation({key:?})"
        );
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Heartbeat renewed 60 s ago with a 40 s duration.
    pub fn stale(self) -> Self {
        self.lease_renewed_ago(60)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn uid_value(&self) -> String {
        uid_or_default(&self.uid, "pod-uid", &self.name)
    }

    pub fn build(&self) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: Some(self.uid_value()),
                labels: Some(string_map(&[
                    (LABEL_RUNTIME, &self.runtime),
                    (LABEL_RUNTIME_POD, &self.name),
                ])),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                deletion_timestamp: self.deleting.then_some(Time(NOW)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "runtimed".to_string(),
                    image: Some(RUNTIMED_IMAGE.to_string()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".to_string()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".to_string(),
                    status: if self.ready { "True" } else { "False" }.to_string(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// The heartbeat Lease at [`NOW`], held by this Pod's UID (`None` with [`Self::no_lease`]).
    pub fn build_lease(&self) -> Option<Lease> {
        self.lease_at(&self.uid_value(), NOW, LEASE_SECONDS)
    }

    /// The heartbeat Lease of this Pod as runtimed would have written it, for a Pod whose UID
    /// is `pod_uid`, seen at `now`. A fresh heartbeat holds for `fresh_seconds`; the stale
    /// ones for [`LEASE_SECONDS`].
    pub fn lease_at(&self, pod_uid: &str, now: Timestamp, fresh_seconds: i32) -> Option<Lease> {
        let (holder, ago, seconds) = match self.lease {
            LeaseState::Fresh => (pod_uid, FRESH_AGO, fresh_seconds),
            LeaseState::RenewedAgo(ago) => (pod_uid, ago, LEASE_SECONDS),
            LeaseState::Foreign => ("someone-else", FRESH_AGO, fresh_seconds),
            LeaseState::Missing => return None,
        };
        let renewed = now - SignedDuration::from_secs(ago);
        Some(heartbeat_lease(
            &self.namespace,
            &self.name,
            holder,
            renewed,
            seconds,
        ))
    }
}

/// The heartbeat Lease of Pod `pod` in `namespace` held by `holder`, renewed at `renewed` for
/// `seconds`: runtimed's own [`desired_lease`], labelled and owned as the scheduler expects.
pub fn heartbeat_lease(
    namespace: &str,
    pod: &str,
    holder: &str,
    renewed: Timestamp,
    seconds: i32,
) -> Lease {
    let me = Identity {
        pod_name: pod.to_string(),
        namespace: namespace.to_string(),
        pod_uid: holder.to_string(),
    };
    let duration = Duration::from_secs(u64::try_from(seconds).expect("a positive duration"));
    let config = heartbeat::Config {
        interval: duration / 2,
        duration,
    };
    let at = MicroTime(renewed);
    desired_lease(&me, &config, &at, &at)
}

/// A heartbeat Lease for `pod` in [`NS`], renewed `renewed_at` seconds after [`NOW`].
pub fn lease(pod: &str, holder: &str, renewed_at: i64, duration: i32) -> Lease {
    heartbeat_lease(NS, pod, holder, time_after_now(renewed_at), duration)
}

// ----- Runtimes -----------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    name: String,
    namespace: String,
    uid: Option<String>,
    generation: Option<i64>,
    replicas: i32,
    capacity: BTreeMap<String, Quantity>,
    template_labels: BTreeMap<String, String>,
}

/// A Runtime in [`NS`] with UID `runtime-uid-<name>`, one replica, no declared capacity and a
/// template whose one container runs `runtimed`.
pub fn runtime(name: &str) -> RuntimeBuilder {
    RuntimeBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        uid: None,
        generation: None,
        replicas: 1,
        capacity: BTreeMap::new(),
        template_labels: BTreeMap::new(),
    }
}

impl RuntimeBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        uid(uid: &str) => uid = Some(uid.to_string());
        generation(generation: i64) => generation = Some(generation);
        replicas(replicas: i32) => replicas = replicas;
    }

    /// Declares whole-number capacities in `spec.capacity.resources`.
    pub fn capacity(mut self, capacity: &[(&str, u64)]) -> Self {
        self.capacity.extend(quantities(capacity));
        self
    }

    /// Declares capacities as raw (possibly malformed) quantity strings.
    pub fn capacity_strs(mut self, capacity: &[(&str, &str)]) -> Self {
        self.capacity.extend(quantities(capacity));
        self
    }

    /// Labels of the Pod template.
    pub fn template_labels(mut self, labels: &[(&str, &str)]) -> Self {
        self.template_labels.extend(string_map(labels));
        self
    }

    pub fn build(&self) -> Runtime {
        let template = PodTemplateSpec {
            metadata: (!self.template_labels.is_empty()).then(|| ObjectMeta {
                labels: Some(self.template_labels.clone()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "runtimed".to_string(),
                    image: Some(RUNTIMED_IMAGE.to_string()),
                    args: Some(vec!["runtimed".to_string()]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let mut runtime = Runtime::new(
            &self.name,
            RuntimeSpec {
                replicas: self.replicas,
                template,
                ..Default::default()
            },
        );
        runtime.spec.capacity = (!self.capacity.is_empty()).then(|| RuntimeCapacity {
            resources: self.capacity.clone(),
        });
        let meta = &mut runtime.metadata;
        meta.namespace = Some(self.namespace.clone());
        meta.uid = Some(uid_or_default(&self.uid, "runtime-uid", &self.name));
        meta.generation = self.generation;
        runtime
    }
}

// ----- PersistentWorkspaces -----------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct WorkspaceBuilder {
    name: String,
    namespace: String,
    runtime: String,
    phase: Option<WorkspacePhase>,
    bound_pod: Option<String>,
    ttl: Option<i32>,
    cleanup_policy: Option<String>,
    last_used: Option<Timestamp>,
}

/// A PersistentWorkspace in [`NS`] of [`RUNTIME`], `RuntimePodLocal`, without status (Pending)
/// and UID `workspace-uid-<name>`.
pub fn workspace(name: &str) -> WorkspaceBuilder {
    WorkspaceBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        phase: None,
        bound_pod: None,
        ttl: None,
        cleanup_policy: None,
        last_used: None,
    }
}

impl WorkspaceBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        runtime(runtime: &str) => runtime = runtime.to_string();
        /// `spec.ttlSecondsAfterUnused`.
        ttl(seconds: i32) => ttl = Some(seconds);
        /// `spec.cleanupPolicy`.
        cleanup_policy(policy: &str) => cleanup_policy = Some(policy.to_string());
        /// `status.lastUsedTime`.
        last_used(at: Timestamp) => last_used = Some(at);
        /// `status.phase: Lost`, its Pod still named.
        lost() => phase = Some(WorkspacePhase::Lost);
        /// `status.phase: Released`.
        released() => phase = Some(WorkspacePhase::Released);
    }

    /// `status.phase: Bound` to `pod`.
    pub fn bound(mut self, pod: &str) -> Self {
        self.phase = Some(WorkspacePhase::Bound);
        self.bound_pod = Some(pod.to_string());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn build(&self) -> PersistentWorkspace {
        let mut workspace = PersistentWorkspace::new(
            &self.name,
            PersistentWorkspaceSpec {
                runtime: self.runtime.clone(),
                mode: Some("RuntimePodLocal".to_string()),
                ttl_seconds_after_unused: self.ttl,
                cleanup_policy: self.cleanup_policy.clone(),
            },
        );
        let meta = &mut workspace.metadata;
        meta.namespace = Some(self.namespace.clone());
        meta.uid = Some(format!("workspace-uid-{}", self.name));
        workspace.status =
            (self.phase.is_some() || self.last_used.is_some()).then(|| PersistentWorkspaceStatus {
                phase: self.phase.map(|p| p.as_str().to_string()),
                runtime: Some(self.runtime.clone()),
                bound_pod: self.bound_pod.clone(),
                path: self
                    .bound_pod
                    .as_ref()
                    .map(|_| PersistentWorkspace::path_for(&self.name)),
                last_used_time: self.last_used.map(Time),
                conditions: Vec::new(),
            });
        workspace
    }
}

// ----- PriorityClasses ----------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct PriorityClassBuilder {
    name: String,
    value: i32,
    global_default: bool,
    never: bool,
    preemptible: bool,
}

/// A `scheduling.k8s.io/v1` PriorityClass `name` of `value`, `PreemptLowerPriority`, not the
/// global default, not preemptible.
pub fn priority_class(name: &str, value: i32) -> PriorityClassBuilder {
    PriorityClassBuilder {
        name: name.to_string(),
        value,
        global_default: false,
        never: false,
        preemptible: false,
    }
}

impl PriorityClassBuilder {
    setters! {
        /// `globalDefault: true`.
        global_default() => global_default = true;
        /// `preemptionPolicy: Never`.
        preemption_never() => never = true;
        /// Annotated `kruntimes.io/preemptible: "true"` (level-2 preemption).
        preemptible() => preemptible = true;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn build(&self) -> k8s_openapi::api::scheduling::v1::PriorityClass {
        k8s_openapi::api::scheduling::v1::PriorityClass {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                uid: Some(format!("pc-uid-{}", self.name)),
                annotations: self.preemptible.then(|| {
                    BTreeMap::from([(
                        crate::api::ANNOTATION_PREEMPTIBLE.to_string(),
                        "true".to_string(),
                    )])
                }),
                ..Default::default()
            },
            value: Some(self.value),
            global_default: self.global_default.then_some(true),
            preemption_policy: Some(
                if self.never {
                    "Never"
                } else {
                    "PreemptLowerPriority"
                }
                .to_string(),
            ),
            description: None,
        }
    }
}
