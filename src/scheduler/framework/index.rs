//! In-memory index of Runtime Pods, runtimed heartbeat Leases and Runs, fed by watch events.
//!
//! Owns the scheduler's view of the cluster: synchronous `apply_*` / `delete_*` / `reset_*`
//! per watched kind (linkerd policy-controller style), returning what changed so the
//! controller can wake Pending Runs. It must not talk to the API server, read a clock,
//! make placement decisions or know about assumed reservations (see [`super::assumed`]).
//!
//! Layout, chosen so a scheduling cycle never walks all Runs:
//! - per namespace, a slab of *slots*, one per Pod name that has a Runtime Pod, a Lease or
//!   active Runs. A slot holds the Pod's record, its Lease, and the usage and labels of the
//!   active Runs assigned to that Pod name. Usage is adjusted incrementally by every Run
//!   event, so reading it is O(1).
//! - per (namespace, runtime) a [`Scope`]: its Runtime Pods in name order, a label index
//!   (label key -> value -> Pod -> number of active Runs) over the active Runs on those Pods
//!   for required-affinity lookups, and the Pending Runs whose `spec.runtime` names it.
//!
//! Usage is keyed by Pod name, not by which Runtime the Run names, because capacity belongs
//! to the Pod: every active Run assigned to a Pod name counts against that Pod, even one whose
//! Pod is not (yet, or any more) observed, so a Pod that reappears under the same name never
//! looks emptier than runtimed will find it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::selector::Selector;
use crate::api::resources::{
    RUNS, parse_capacity_annotations, parse_requests, parse_whole_quantity,
};
use crate::api::{LABEL_RUNTIME, LABEL_RUNTIME_POD, Resources, Run, RunPhase};

/// Index of a slot within its namespace. Stable while the slot exists.
pub type SlotId = u32;

/// Dense id of a resource name that some Runtime Pod advertises. Ids are never reused: the
/// set is bounded by the capacities Runtimes declare, not by what Runs request.
pub type ResourceId = u32;

/// Resource names advertised by Runtime Pods, as dense ids, so a cycle compares integers
/// instead of strings (string compares dominated a 5 000-Pod cycle).
#[derive(Debug, Clone, Default)]
pub(crate) struct Interner {
    ids: HashMap<String, ResourceId>,
    names: Vec<String>,
}

impl Interner {
    fn intern(&mut self, name: &str) -> ResourceId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = ResourceId::try_from(self.names.len()).expect("fewer than 2^32 resource names");
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// The id of `name`; `None` when no Runtime Pod ever advertised it.
    pub fn get(&self, name: &str) -> Option<ResourceId> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: ResourceId) -> &str {
        &self.names[id as usize]
    }
}

/// Capacity and actual usage of one resource a Pod advertises: the hot data of a cycle, kept
/// in the Pod's slot and updated with every Pod and Run event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub id: ResourceId,
    pub capacity: u64,
    /// Actual usage, `u64::MAX` when unknown (see [`CountedRequest`]).
    pub used: u64,
}

/// Runs are identified by (namespace, UID): a Run deleted and recreated under the same name
/// is a different Run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    pub namespace: String,
    pub uid: String,
}

impl RunKey {
    pub fn new(namespace: impl Into<String>, uid: impl Into<String>) -> Self {
        RunKey {
            namespace: namespace.into(),
            uid: uid.into(),
        }
    }

    /// The key of `run`. Objects from the API server always carry a namespace and a UID;
    /// missing ones map to "" rather than failing so a malformed object cannot break a watch.
    pub fn of(run: &Run) -> Self {
        RunKey {
            namespace: run.namespace().unwrap_or_default(),
            uid: run.uid().unwrap_or_default(),
        }
    }
}

/// Why the Pending Runs of a Runtime are being woken; values are the bounded `source` label
/// of `kruntimes_scheduler_pending_run_wakeups_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WakeSource {
    /// A Runtime Pod became ready or unavailable, or changed capacity or heartbeat.
    RuntimePod,
    /// Active or assumed usage was released on a Pod.
    CapacityReleased,
}

impl WakeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeSource::RuntimePod => "runtime_pod",
            WakeSource::CapacityReleased => "capacity_released",
        }
    }
}

/// "Wake the Pending Runs of this (namespace, runtime)": call `pending_runs` and enqueue them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wakeup {
    pub namespace: String,
    pub runtime: String,
    pub source: WakeSource,
}

/// A Pod named by a Run change, with the Runtime whose Pending Runs it concerns (the Pod's
/// Runtime when the Pod is known, else the Run's `spec.runtime`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub runtime: String,
    pub pod: String,
}

/// What a Run event changed, for wakeups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunChange {
    /// Pods on which this Run's capacity was released: it left the active set there, or (from
    /// [`super::state::State`]) its assumption on that Pod was dropped.
    pub released: Vec<PodRef>,
    /// The Pod whose affinity targets this Run changed: it joined or left the active set
    /// there, or changed its labels or anti-affinity while active. Pending Runs waiting for
    /// required Run affinity may now fit; this is not a capacity wakeup.
    pub targets_changed: Option<PodRef>,
    /// What happened to the Run's assumption (set by [`super::state::State`] only).
    pub assumption: Option<super::assumed::Reconciled>,
}

impl RunChange {
    /// One `capacity_released` wakeup per distinct (namespace, runtime) that got capacity back.
    pub fn wakeups(&self) -> Vec<Wakeup> {
        let set: BTreeSet<Wakeup> = self
            .released
            .iter()
            .map(|p| Wakeup {
                namespace: p.namespace.clone(),
                runtime: p.runtime.clone(),
                source: WakeSource::CapacityReleased,
            })
            .collect();
        set.into_iter().collect()
    }
}

/// What the scheduler knows about a Runtime Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRecord {
    pub uid: String,
    /// Value of the `kruntimes.io/runtime` label.
    pub runtime: String,
    /// Whether the `Ready` condition is True.
    pub ready: bool,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The complete capacity from the annotations, or why they could not be read. A malformed
    /// annotation never breaks the watch: the Pod is kept and RuntimePodAvailability rejects
    /// it with a bounded reason.
    pub capacity: Result<Resources, String>,
}

impl PodRecord {
    /// The record of a Runtime Pod; `None` for a Pod without the `kruntimes.io/runtime` label.
    pub fn of(pod: &Pod) -> Option<Self> {
        let runtime = pod.labels().get(LABEL_RUNTIME)?.clone();
        let ready = crate::api::pod_is_ready(pod);
        Some(PodRecord {
            uid: pod.uid().unwrap_or_default(),
            runtime,
            ready,
            deleting: pod.metadata.deletion_timestamp.is_some(),
            capacity: parse_capacity_annotations(pod.annotations()).map_err(|e| e.to_string()),
        })
    }
}

/// A runtimed heartbeat Lease (named after its Pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub duration_seconds: Option<i32>,
    /// `renew_time + duration_seconds` (a missing or negative duration counts as 0); computed
    /// once here so a cycle only compares timestamps.
    pub expires_at: Option<Timestamp>,
}

impl LeaseRecord {
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.clone());
        let renew_time = spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
        let duration_seconds = spec.and_then(|s| s.lease_duration_seconds);
        let expires_at = renew_time.map(|t| {
            let secs = i64::from(duration_seconds.unwrap_or(0).max(0));
            // An overflow means "beyond the representable future": never expires.
            t.checked_add(SignedDuration::from_secs(secs))
                .unwrap_or(Timestamp::MAX)
        });
        LeaseRecord {
            holder,
            renew_time,
            duration_seconds,
            expires_at,
        }
    }
}

/// A Run's request as usage counts it.
///
/// A Run that reached the active set with an unparseable request (created before
/// validation existed, or assigned by something else) is counted conservatively: every
/// resource whose quantity cannot be read is *unknown*, and a Pod hosting such a Run has none
/// of that resource left (see [`Usage::get`]) until the Run leaves. Readable entries count at
/// their value, and `runs` still defaults to 1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountedRequest {
    pub amounts: Resources,
    pub unknown: Vec<String>,
}

impl CountedRequest {
    pub fn of(run: &Run) -> Self {
        let requests = run.spec.resources.as_ref().map(|r| &r.requests);
        if let Ok(amounts) = parse_requests(requests) {
            return CountedRequest {
                amounts,
                unknown: Vec::new(),
            };
        }
        let mut out = CountedRequest::default();
        let mut saw_runs = false;
        for (name, quantity) in requests.into_iter().flatten() {
            saw_runs |= name == RUNS;
            match parse_whole_quantity(&quantity.0) {
                Ok(0) => {}
                Ok(amount) => out.amounts.insert(name.clone(), amount),
                Err(_) => out.unknown.push(name.clone()),
            }
        }
        if !saw_runs {
            out.amounts.insert(RUNS, 1);
        }
        out
    }
}

/// Usage of the active Runs on one Pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    sum: Resources,
    /// Resource -> number of active Runs whose amount of it is unknown.
    unknown: BTreeMap<String, u32>,
}

impl Usage {
    /// Amount of `resource` in use; `u64::MAX` (nothing left) while an active Run's amount of
    /// it is unknown.
    pub fn get(&self, resource: &str) -> u64 {
        if !self.unknown.is_empty() && self.unknown.contains_key(resource) {
            return u64::MAX;
        }
        self.sum.get(resource)
    }

    /// The known part of the usage.
    pub fn known(&self) -> &Resources {
        &self.sum
    }

    /// Resources with an unknown amount in use.
    pub fn unknown(&self) -> impl Iterator<Item = &str> {
        self.unknown.keys().map(String::as_str)
    }

    fn add(&mut self, request: &CountedRequest) {
        self.sum.add(&request.amounts);
        for name in &request.unknown {
            *self.unknown.entry(name.clone()).or_insert(0) += 1;
        }
    }

    fn sub(&mut self, request: &CountedRequest) {
        self.sum.sub(&request.amounts);
        for name in &request.unknown {
            if let Some(n) = self.unknown.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    self.unknown.remove(name);
                }
            }
        }
    }
}

/// An active Run as seen from its Pod: what it consumes and what it offers to affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub name: String,
    pub request: CountedRequest,
    pub labels: BTreeMap<String, String>,
    /// Its valid required anti-affinity selectors: a Run matching one of them must not join
    /// this Pod (anti-affinity is symmetric, as in Kubernetes).
    pub anti_affinity: Vec<Selector>,
}

impl ActiveRun {
    fn of(run: &Run) -> Self {
        ActiveRun {
            name: run.name_any(),
            request: CountedRequest::of(run),
            labels: run.labels().clone(),
            anti_affinity: required_anti_affinity(run),
        }
    }

    fn same_targets(&self, other: &ActiveRun) -> bool {
        self.labels == other.labels && self.anti_affinity == other.anti_affinity
    }
}

/// The valid required anti-affinity selectors of `run`; invalid terms are skipped (PreFilter
/// reports them for the Run itself; here they must not break accounting).
pub(crate) fn required_anti_affinity(run: &Run) -> Vec<Selector> {
    let terms = run
        .spec
        .affinity
        .as_ref()
        .and_then(|a| a.run_anti_affinity.as_ref())
        .map(|t| t.required.as_slice())
        .unwrap_or_default();
    terms
        .iter()
        .filter(|t| t.topology_key == LABEL_RUNTIME_POD)
        .filter_map(|t| Selector::compile(&t.label_selector, "").ok())
        .collect()
}

/// Everything known under one Pod name in a namespace.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub name: String,
    pub pod: Option<PodRecord>,
    pub lease: Option<LeaseRecord>,
    pub usage: Usage,
    /// Active Runs assigned to this Pod name, by UID.
    pub active: BTreeMap<String, ActiveRun>,
    /// What a cycle reads, precomputed and kept together.
    pub hot: Hot,
}

/// The heartbeat as a cycle needs it, precomputed from the Pod and its Lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Heartbeat {
    /// No Lease, or one without holder or renew time.
    #[default]
    Missing,
    /// The Lease is held by an identity other than the Pod's UID.
    NotHeld,
    /// Held by the Pod; fresh while `now < expires_at`.
    Expires(Timestamp),
}

/// The per-Pod data Filter and Score read, in one place so a cycle touches one small block
/// per Pod (string compares and scattered reads dominated a 5 000-Pod cycle).
#[derive(Debug, Clone, Default)]
pub(crate) struct Hot {
    pub ready: bool,
    pub deleting: bool,
    pub capacity_ok: bool,
    pub heartbeat: Heartbeat,
    /// One entry per advertised resource, in id order; empty without a Pod or with
    /// unreadable capacity.
    pub load: Vec<Load>,
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.pod.is_none() && self.lease.is_none() && self.active.is_empty()
    }

    /// Recomputes the flags and heartbeat of `hot` (Pod or Lease applied or deleted).
    fn refresh_hot(&mut self) {
        let pod = self.pod.as_ref();
        self.hot.ready = pod.is_some_and(|p| p.ready);
        self.hot.deleting = pod.is_some_and(|p| p.deleting);
        self.hot.capacity_ok = pod.is_some_and(|p| p.capacity.is_ok());
        self.hot.heartbeat = match (pod, &self.lease) {
            (Some(pod), Some(lease)) => match (&lease.holder, lease.expires_at) {
                (Some(holder), Some(expires_at)) if *holder == pod.uid => {
                    Heartbeat::Expires(expires_at)
                }
                (Some(_), Some(_)) => Heartbeat::NotHeld,
                _ => Heartbeat::Missing,
            },
            _ => Heartbeat::Missing,
        };
    }

    /// Rebuilds `load` from the Pod's capacity and the usage (Pod applied or deleted).
    fn rebuild_load(&mut self, interner: &mut Interner) {
        self.hot.load.clear();
        if let Some(PodRecord {
            capacity: Ok(capacity),
            ..
        }) = &self.pod
        {
            for (name, amount) in capacity.iter() {
                self.hot.load.push(Load {
                    id: interner.intern(name),
                    capacity: amount,
                    used: self.usage.get(name),
                });
            }
            self.hot.load.sort_by_key(|l| l.id);
        }
    }

    /// Copies the usage of `request`'s resources into `load` (a Run joined or left).
    fn refresh_used(&mut self, interner: &Interner, request: &CountedRequest) {
        let names = request
            .amounts
            .names()
            .chain(request.unknown.iter().map(String::as_str));
        for name in names {
            if let Some(id) = interner.get(name)
                && let Some(load) = self.hot.load.iter_mut().find(|l| l.id == id)
            {
                load.used = self.usage.get(name);
            }
        }
    }
}

/// Label key -> value -> slot -> number of active Runs carrying that label there.
pub(crate) type LabelIndex = HashMap<String, HashMap<String, HashMap<SlotId, u32>>>;

/// One (namespace, runtime): the unit every scheduling cycle reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    /// Runtime Pods labelled with this runtime, in name order (the Filter order).
    pub pods: BTreeMap<String, SlotId>,
    /// Labels of the active Runs on those Pods.
    pub labels: LabelIndex,
    /// Slot -> number of active Runs there with required anti-affinity terms.
    pub anti_affinity: BTreeMap<SlotId, u32>,
    /// Pending Runs whose `spec.runtime` is this runtime: name -> UID.
    pub pending: BTreeMap<String, String>,
}

impl Scope {
    fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.pending.is_empty()
    }

    fn index_run(&mut self, slot: SlotId, run: &ActiveRun) {
        for (k, v) in &run.labels {
            *self
                .labels
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .entry(slot)
                .or_insert(0) += 1;
        }
        if !run.anti_affinity.is_empty() {
            *self.anti_affinity.entry(slot).or_insert(0) += 1;
        }
    }

    fn unindex_run(&mut self, slot: SlotId, run: &ActiveRun) {
        for (k, v) in &run.labels {
            let Some(values) = self.labels.get_mut(k) else {
                continue;
            };
            if let Some(slots) = values.get_mut(v) {
                if let Entry::Occupied(mut e) = slots.entry(slot) {
                    *e.get_mut() -= 1;
                    if *e.get() == 0 {
                        e.remove();
                    }
                }
                if slots.is_empty() {
                    values.remove(v);
                }
            }
            if values.is_empty() {
                self.labels.remove(k);
            }
        }
        if !run.anti_affinity.is_empty()
            && let Some(n) = self.anti_affinity.get_mut(&slot)
        {
            *n -= 1;
            if *n == 0 {
                self.anti_affinity.remove(&slot);
            }
        }
    }
}

/// Everything known in one namespace.
#[derive(Debug, Clone, Default)]
pub(crate) struct NamespaceIndex {
    slots: Vec<Option<Slot>>,
    free: Vec<SlotId>,
    by_name: HashMap<String, SlotId>,
    pub scopes: HashMap<String, Scope>,
}

impl NamespaceIndex {
    pub fn slot(&self, id: SlotId) -> &Slot {
        self.slots[id as usize]
            .as_ref()
            .expect("a slot id in the index always names a live slot")
    }

    fn slot_mut(&mut self, id: SlotId) -> &mut Slot {
        self.slots[id as usize]
            .as_mut()
            .expect("a slot id in the index always names a live slot")
    }

    pub fn slot_id(&self, name: &str) -> Option<SlotId> {
        self.by_name.get(name).copied()
    }

    /// Upper bound of slot ids, for sizing bit sets.
    pub fn slot_capacity(&self) -> usize {
        self.slots.len()
    }

    fn slot_id_or_insert(&mut self, name: &str) -> SlotId {
        if let Some(id) = self.by_name.get(name) {
            return *id;
        }
        let slot = Slot {
            name: name.to_string(),
            pod: None,
            lease: None,
            usage: Usage::default(),
            active: BTreeMap::new(),
            hot: Hot::default(),
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(slot);
                id
            }
            None => {
                self.slots.push(Some(slot));
                SlotId::try_from(self.slots.len() - 1).expect("fewer than 2^32 Pods per namespace")
            }
        };
        self.by_name.insert(name.to_string(), id);
        id
    }

    /// Frees the slot once nothing refers to it any more.
    fn gc(&mut self, id: SlotId) {
        if self.slot(id).is_empty() {
            let slot = self.slots[id as usize].take().expect("live slot");
            self.by_name.remove(&slot.name);
            self.free.push(id);
        }
    }

    fn gc_scope(&mut self, runtime: &str) {
        if self.scopes.get(runtime).is_some_and(Scope::is_empty) {
            self.scopes.remove(runtime);
        }
    }

    /// The runtime scope the slot's Pod belongs to, if it is a Runtime Pod.
    fn runtime_of(&self, id: SlotId) -> Option<&str> {
        self.slot(id).pod.as_ref().map(|p| p.runtime.as_str())
    }

    /// Adds the slot's Pod and its active Runs' labels to `runtime`'s scope.
    fn attach(&mut self, id: SlotId, runtime: &str) {
        let slot = self.slots[id as usize].as_ref().expect("live slot");
        let scope = self.scopes.entry(runtime.to_string()).or_default();
        scope.pods.insert(slot.name.clone(), id);
        for run in slot.active.values() {
            scope.index_run(id, run);
        }
    }

    /// Removes the slot's Pod and its active Runs' labels from `runtime`'s scope.
    fn detach(&mut self, id: SlotId, runtime: &str) {
        let slot = self.slots[id as usize].as_ref().expect("live slot");
        if let Some(scope) = self.scopes.get_mut(runtime) {
            scope.pods.remove(&slot.name);
            for run in slot.active.values() {
                scope.unindex_run(id, run);
            }
        }
        self.gc_scope(runtime);
    }

    fn add_active(&mut self, id: SlotId, uid: &str, run: ActiveRun, interner: &Interner) {
        if let Some(runtime) = self.runtime_of(id).map(str::to_string)
            && let Some(scope) = self.scopes.get_mut(&runtime)
        {
            scope.index_run(id, &run);
        }
        let slot = self.slot_mut(id);
        slot.usage.add(&run.request);
        slot.refresh_used(interner, &run.request);
        slot.active.insert(uid.to_string(), run);
    }

    fn remove_active(&mut self, id: SlotId, uid: &str, interner: &Interner) -> Option<ActiveRun> {
        let slot = self.slot_mut(id);
        let run = slot.active.remove(uid)?;
        slot.usage.sub(&run.request);
        slot.refresh_used(interner, &run.request);
        if let Some(runtime) = self.runtime_of(id).map(str::to_string)
            && let Some(scope) = self.scopes.get_mut(&runtime)
        {
            scope.unindex_run(id, &run);
        }
        Some(run)
    }
}

/// Where a Run stands as far as scheduling is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Phase Pending: indexed for wakeups.
    Pending,
    /// Scheduled or Running with `status.podName`: consumes capacity on that slot.
    Active(SlotId),
    /// Scheduled or Running without `status.podName` (a foreign or broken writer): neither
    /// Pending nor consuming capacity, but not over either; recorded so that an assumption
    /// for it is kept.
    Unassigned,
    /// Terminal: nothing is kept.
    Inactive,
}

#[derive(Debug, Clone)]
struct RunRecord {
    name: String,
    runtime: String,
    placement: Placement,
}

/// How the index last observed a Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed<'a> {
    Pending,
    /// Active on this Pod.
    Active(&'a str),
    /// Scheduled/Running without a Pod name.
    Unassigned,
    /// Terminal.
    Inactive,
    /// Never observed, or deleted.
    Absent,
}

/// The index. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Index {
    namespaces: HashMap<String, NamespaceIndex>,
    runs: HashMap<RunKey, RunRecord>,
    interner: Interner,
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn namespace(&self, namespace: &str) -> Option<&NamespaceIndex> {
        self.namespaces.get(namespace)
    }

    pub(crate) fn interner(&self) -> &Interner {
        &self.interner
    }

    // ----- Pods -------------------------------------------------------------------------

    /// Records a Pod. A Pod without the `kruntimes.io/runtime` label is not a Runtime Pod and
    /// is treated as deleted (it may have lost the label).
    pub fn apply_pod(&mut self, pod: &Pod) -> Vec<Wakeup> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let Some(record) = PodRecord::of(pod) else {
            return self.delete_pod(&namespace, &name);
        };
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        let id = ns.slot_id_or_insert(&name);
        let old = ns.slot(id).pod.clone();
        if old.as_ref() == Some(&record) {
            return Vec::new();
        }
        let runtime = record.runtime.clone();
        let moved = old.as_ref().is_none_or(|o| o.runtime != runtime);
        if moved && let Some(old) = &old {
            ns.detach(id, &old.runtime);
        }
        let slot = ns.slot_mut(id);
        slot.pod = Some(record);
        slot.rebuild_load(&mut self.interner);
        slot.refresh_hot();
        if moved {
            ns.attach(id, &runtime);
        }
        let mut runtimes = vec![runtime];
        if let Some(old) = old
            && old.runtime != runtimes[0]
        {
            runtimes.push(old.runtime);
        }
        runtimes
            .into_iter()
            .map(|runtime| Wakeup {
                namespace: namespace.clone(),
                runtime,
                source: WakeSource::RuntimePod,
            })
            .collect()
    }

    /// Forgets a Pod. Usage of Runs still assigned to its name is kept (they still hold it).
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Vec<Wakeup> {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return Vec::new();
        };
        let Some(id) = ns.slot_id(name) else {
            return Vec::new();
        };
        let Some(runtime) = ns.runtime_of(id).map(str::to_string) else {
            return Vec::new();
        };
        ns.detach(id, &runtime);
        let slot = ns.slot_mut(id);
        slot.pod = None;
        slot.hot.load.clear();
        slot.refresh_hot();
        ns.gc(id);
        self.gc_namespace(namespace);
        vec![Wakeup {
            namespace: namespace.to_string(),
            runtime,
            source: WakeSource::RuntimePod,
        }]
    }

    /// Replaces every Pod with `pods` (after a watch relist): Pods not in the list are deleted.
    pub fn reset_pods(&mut self, pods: &[Pod]) -> Vec<Wakeup> {
        self.reset_with(pods, |s| s.pod.is_some(), Self::delete_pod, Self::apply_pod)
    }

    /// A relist of one kind of object: deletes what `held` says is recorded but is no longer
    /// listed, then applies every listed object, and merges the wakeups.
    fn reset_with<K: ResourceExt>(
        &mut self,
        objects: &[K],
        held: fn(&Slot) -> bool,
        delete: fn(&mut Self, &str, &str) -> Vec<Wakeup>,
        apply: fn(&mut Self, &K) -> Vec<Wakeup>,
    ) -> Vec<Wakeup> {
        let keep: HashSet<(String, String)> = objects
            .iter()
            .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
            .collect();
        let gone: Vec<(String, String)> = self
            .namespaces
            .iter()
            .flat_map(|(ns, idx)| {
                idx.slots
                    .iter()
                    .flatten()
                    .filter(|s| held(s))
                    .map(move |s| (ns.clone(), s.name.clone()))
            })
            .filter(|k| !keep.contains(k))
            .collect();
        let mut wakeups = BTreeSet::new();
        for (ns, name) in gone {
            wakeups.extend(delete(self, &ns, &name));
        }
        for object in objects {
            wakeups.extend(apply(self, object));
        }
        wakeups.into_iter().collect()
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodRecord> {
        let ns = self.namespaces.get(namespace)?;
        ns.slot(ns.slot_id(name)?).pod.as_ref()
    }

    /// Names of the Runtime Pods of (namespace, runtime), in name order.
    pub fn runtime_pods(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .map(|s| s.pods.keys().cloned().collect())
            .unwrap_or_default()
    }

    // ----- Leases -----------------------------------------------------------------------

    /// Records a heartbeat Lease. Wakes the Pod's Runtime when availability may have turned
    /// on: a first Lease, a new holder or duration, or a renewal after the previous term had
    /// lapsed. Ordinary renewals wake nobody.
    pub fn apply_lease(&mut self, lease: &Lease) -> Vec<Wakeup> {
        let namespace = lease.namespace().unwrap_or_default();
        let name = lease.name_any();
        let record = LeaseRecord::of(lease);
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        let id = ns.slot_id_or_insert(&name);
        let slot = ns.slot_mut(id);
        let old = slot.lease.replace(record.clone());
        slot.refresh_hot();
        let relevant = match &old {
            None => true,
            Some(old) => {
                old.holder != record.holder
                    || old.duration_seconds != record.duration_seconds
                    || match (old.expires_at, record.renew_time) {
                        (Some(expired), Some(renewed)) => expired <= renewed,
                        (None, Some(_)) => true,
                        _ => false,
                    }
            }
        };
        match ns.runtime_of(id) {
            Some(runtime) if relevant => vec![Wakeup {
                namespace,
                runtime: runtime.to_string(),
                source: WakeSource::RuntimePod,
            }],
            _ => Vec::new(),
        }
    }

    pub fn delete_lease(&mut self, namespace: &str, name: &str) -> Vec<Wakeup> {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return Vec::new();
        };
        let Some(id) = ns.slot_id(name) else {
            return Vec::new();
        };
        let slot = ns.slot_mut(id);
        if slot.lease.take().is_none() {
            return Vec::new();
        }
        slot.refresh_hot();
        let wake = ns.runtime_of(id).map(|runtime| Wakeup {
            namespace: namespace.to_string(),
            runtime: runtime.to_string(),
            source: WakeSource::RuntimePod,
        });
        ns.gc(id);
        self.gc_namespace(namespace);
        wake.into_iter().collect()
    }

    /// Replaces every Lease with `leases` (after a watch relist).
    pub fn reset_leases(&mut self, leases: &[Lease]) -> Vec<Wakeup> {
        self.reset_with(
            leases,
            |s| s.lease.is_some(),
            Self::delete_lease,
            Self::apply_lease,
        )
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<&LeaseRecord> {
        let ns = self.namespaces.get(namespace)?;
        ns.slot(ns.slot_id(name)?).lease.as_ref()
    }

    // ----- Runs -------------------------------------------------------------------------

    /// Records a Run: adjusts the usage and labels of its Pod when it joins, changes or leaves
    /// the active set, and the Pending index when it becomes or stops being Pending.
    pub fn apply_run(&mut self, run: &Run) -> RunChange {
        let key = RunKey::of(run);
        let name = run.name_any();
        let runtime = run.spec.runtime.clone();
        let active = run.active_pod().map(|pod| (pod, ActiveRun::of(run)));
        let pending = active.is_none() && run.phase() == RunPhase::Pending;
        let unassigned = active.is_none() && !pending && !run.phase().is_terminal();

        // Unchanged active or Pending Runs (status churn) cost one lookup and change nothing.
        if let Some(old) = self.runs.get(&key)
            && old.name == name
            && old.runtime == runtime
        {
            match (old.placement, &active) {
                (Placement::Active(id), Some((pod, new))) => {
                    let ns = &self.namespaces[&key.namespace];
                    let slot = ns.slot(id);
                    if slot.name == *pod && slot.active.get(&key.uid) == Some(new) {
                        return RunChange::default();
                    }
                }
                (Placement::Pending, None) if pending => return RunChange::default(),
                (Placement::Unassigned, None) if unassigned => return RunChange::default(),
                (Placement::Inactive, None) if !pending && !unassigned => {
                    return RunChange::default();
                }
                _ => {}
            }
        }

        let old = self.detach_run(&key);
        let mut change = RunChange::default();
        let placement = match active {
            Some((pod, new)) => {
                let ns = self.namespaces.entry(key.namespace.clone()).or_default();
                let id = ns.slot_id_or_insert(pod);
                let pod_ref = PodRef {
                    namespace: key.namespace.clone(),
                    runtime: ns.runtime_of(id).unwrap_or(&runtime).to_string(),
                    pod: pod.to_string(),
                };
                match &old {
                    Some((old_ref, old_run)) if old_ref.pod == pod => {
                        if old_run.request != new.request {
                            change.released.push(old_ref.clone());
                        }
                        if !old_run.same_targets(&new) {
                            change.targets_changed = Some(pod_ref);
                        }
                    }
                    other => {
                        if let Some((old_ref, _)) = other {
                            change.released.push(old_ref.clone());
                        }
                        change.targets_changed = Some(pod_ref);
                    }
                }
                ns.add_active(id, &key.uid, new, &self.interner);
                Placement::Active(id)
            }
            None => {
                if let Some((old_ref, _)) = old {
                    change.released.push(old_ref.clone());
                    change.targets_changed = Some(old_ref);
                }
                if pending {
                    let ns = self.namespaces.entry(key.namespace.clone()).or_default();
                    ns.scopes
                        .entry(runtime.clone())
                        .or_default()
                        .pending
                        .insert(name.clone(), key.uid.clone());
                    Placement::Pending
                } else if unassigned {
                    Placement::Unassigned
                } else {
                    Placement::Inactive
                }
            }
        };
        if placement == Placement::Inactive {
            // Terminal Runs are the bulk of history: keep nothing for them.
            self.gc_namespace(&key.namespace);
        } else {
            self.runs.insert(
                key,
                RunRecord {
                    name,
                    runtime,
                    placement,
                },
            );
        }
        change
    }

    /// Forgets a deleted Run.
    pub fn delete_run(&mut self, namespace: &str, uid: &str) -> RunChange {
        let key = RunKey::new(namespace, uid);
        let mut change = RunChange::default();
        if let Some((pod_ref, _)) = self.detach_run(&key) {
            change.released.push(pod_ref.clone());
            change.targets_changed = Some(pod_ref);
        }
        self.gc_namespace(namespace);
        change
    }

    /// Replaces every Run with `runs` (after a watch relist).
    pub fn reset_runs(&mut self, runs: &[Run]) -> Vec<RunChange> {
        let keep: HashSet<RunKey> = runs.iter().map(RunKey::of).collect();
        let gone: Vec<RunKey> = self
            .runs
            .keys()
            .filter(|k| !keep.contains(*k))
            .cloned()
            .collect();
        let mut changes: Vec<RunChange> = gone
            .iter()
            .map(|k| self.delete_run(&k.namespace, &k.uid))
            .collect();
        changes.extend(runs.iter().map(|r| self.apply_run(r)));
        changes.retain(|c| *c != RunChange::default());
        changes
    }

    /// Removes the Run's record and its contributions; returns its old active placement.
    fn detach_run(&mut self, key: &RunKey) -> Option<(PodRef, ActiveRun)> {
        let old = self.runs.remove(key)?;
        let ns = self.namespaces.get_mut(&key.namespace)?;
        match old.placement {
            Placement::Pending => {
                if let Some(scope) = ns.scopes.get_mut(&old.runtime)
                    && scope.pending.get(&old.name) == Some(&key.uid)
                {
                    scope.pending.remove(&old.name);
                }
                ns.gc_scope(&old.runtime);
                None
            }
            Placement::Active(id) => {
                let run = ns.remove_active(id, &key.uid, &self.interner)?;
                let pod_ref = PodRef {
                    namespace: key.namespace.clone(),
                    runtime: ns.runtime_of(id).unwrap_or(&old.runtime).to_string(),
                    pod: ns.slot(id).name.clone(),
                };
                ns.gc(id);
                Some((pod_ref, run))
            }
            Placement::Unassigned | Placement::Inactive => None,
        }
    }

    fn gc_namespace(&mut self, namespace: &str) {
        if self
            .namespaces
            .get(namespace)
            .is_some_and(|ns| ns.by_name.is_empty() && ns.scopes.is_empty())
        {
            self.namespaces.remove(namespace);
        }
    }

    /// How the index last observed the Run.
    pub fn observed(&self, key: &RunKey) -> Observed<'_> {
        let Some(record) = self.runs.get(key) else {
            return Observed::Absent;
        };
        match record.placement {
            Placement::Pending => Observed::Pending,
            Placement::Active(id) => {
                Observed::Active(&self.namespaces[&key.namespace].slot(id).name)
            }
            Placement::Unassigned => Observed::Unassigned,
            Placement::Inactive => Observed::Inactive,
        }
    }

    /// Names of the Pending Runs of (namespace, runtime), in name order.
    pub fn pending_runs(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.pending_keys(namespace, runtime)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// (name, UID) of the Pending Runs of (namespace, runtime), in name order.
    pub(crate) fn pending_keys<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .into_iter()
            .flat_map(|s| s.pending.iter().map(|(n, u)| (n.as_str(), u.as_str())))
    }

    /// Usage of the active Runs assigned to `pod`.
    pub fn usage(&self, namespace: &str, pod: &str) -> Option<&Usage> {
        let ns = self.namespaces.get(namespace)?;
        Some(&ns.slot(ns.slot_id(pod)?).usage)
    }

    /// Active Runs assigned to `pod`, by UID.
    pub fn active_runs(&self, namespace: &str, pod: &str) -> Option<&BTreeMap<String, ActiveRun>> {
        let ns = self.namespaces.get(namespace)?;
        Some(&ns.slot(ns.slot_id(pod)?).active)
    }

    /// Every Pod name in `namespace` with active usage (for invariant checks).
    pub fn pods_with_usage(&self, namespace: &str) -> Vec<String> {
        self.namespaces
            .get(namespace)
            .map(|ns| {
                ns.slots
                    .iter()
                    .flatten()
                    .filter(|s| !s.active.is_empty())
                    .map(|s| s.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::testing::*;

    fn idx(pods: &[PodBuilder], runs: &[RunBuilder]) -> Index {
        let mut index = Index::new();
        for p in pods {
            index.apply_pod(&p.build());
            if let Some(l) = p.build_lease() {
                index.apply_lease(&l);
            }
        }
        for r in runs {
            index.apply_run(&r.build());
        }
        index
    }

    #[test]
    fn only_pods_with_the_runtime_label_are_runtime_pods() {
        let mut index = Index::new();
        let mut plain = pod("web").build();
        plain.metadata.labels = None;
        assert!(index.apply_pod(&plain).is_empty());
        assert!(index.pod(NS, "web").is_none());
        index.apply_pod(&pod("p1").build());
        assert_eq!(index.runtime_pods(NS, RUNTIME), ["p1"]);
        // Losing the label makes it a non-Runtime Pod again.
        let mut unlabelled = pod("p1").build();
        unlabelled.metadata.labels = None;
        let wake = index.apply_pod(&unlabelled);
        assert_eq!(wake.len(), 1);
        assert!(index.runtime_pods(NS, RUNTIME).is_empty());
    }

    #[test]
    fn a_malformed_capacity_annotation_is_recorded_not_fatal() {
        let index = idx(
            &[pod("p1").annotation("kruntimes.io/capacity.runs", "two")],
            &[],
        );
        let record = index.pod(NS, "p1").unwrap();
        let err = record.capacity.as_ref().unwrap_err();
        assert!(
            err.contains("annotation kruntimes.io/capacity.runs"),
            "{err}"
        );
    }

    #[test]
    fn active_runs_adjust_usage_incrementally_and_release_it_when_they_leave() {
        let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[]);
        let a = run("a").requests(&[("example.com/gpu", 1)]).on("p1");
        let b = run("b").on("p1");
        index.apply_run(&a.build());
        index.apply_run(&b.build());
        let usage = index.usage(NS, "p1").unwrap();
        assert_eq!(usage.get("runs"), 2);
        assert_eq!(usage.get("example.com/gpu"), 1);

        let change = index.apply_run(&a.clone().succeeded().build());
        assert_eq!(
            change.released,
            [PodRef {
                namespace: NS.into(),
                runtime: RUNTIME.into(),
                pod: "p1".into()
            }]
        );
        assert_eq!(change.wakeups().len(), 1);
        assert_eq!(change.wakeups()[0].source.as_str(), "capacity_released");
        let usage = index.usage(NS, "p1").unwrap();
        assert_eq!(usage.get("runs"), 1);
        assert_eq!(usage.get("example.com/gpu"), 0);

        let change = index.delete_run(NS, &b.build().uid().unwrap());
        assert_eq!(change.released.len(), 1);
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 0);
    }

    #[test]
    fn repeated_status_updates_of_an_active_run_change_nothing() {
        let mut index = idx(&[pod("p1")], &[]);
        let a = run("a").labels(&[("cohort", "x")]).on("p1");
        let first = index.apply_run(&a.build());
        assert!(first.targets_changed.is_some());
        assert_eq!(index.apply_run(&a.build()), RunChange::default());
        assert_eq!(
            index.apply_run(&a.clone().running().build()),
            RunChange::default()
        );
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 1);
    }

    #[test]
    fn an_active_run_with_an_unparseable_request_exhausts_that_resource() {
        let mut index = idx(
            &[pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 8)])],
            &[],
        );
        let bad = run("bad")
            .request_strs(&[("example.com/gpu", "1.5")])
            .on("p1");
        index.apply_run(&bad.build());
        let usage = index.usage(NS, "p1").unwrap();
        assert_eq!(usage.get("example.com/gpu"), u64::MAX);
        assert_eq!(usage.get("runs"), 1, "runs still defaults to 1");
        index.apply_run(&bad.succeeded().build());
        assert_eq!(index.usage(NS, "p1").unwrap().get("example.com/gpu"), 0);
    }

    #[test]
    fn a_run_recreated_under_the_same_name_is_a_different_run() {
        let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[run("a").on("p1")]);
        index.apply_run(&run("a").uid("uid-a-2").build());
        assert_eq!(
            index.usage(NS, "p1").unwrap().get("runs"),
            1,
            "the old Run still holds p1"
        );
        assert_eq!(index.pending_runs(NS, RUNTIME), ["a"]);
        index.delete_run(NS, "uid-a");
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 0);
        assert_eq!(
            index.pending_runs(NS, RUNTIME),
            ["a"],
            "the new Run is still Pending"
        );
    }

    #[test]
    fn pending_runs_are_indexed_by_namespace_and_runtime() {
        let mut index = idx(
            &[],
            &[
                run("b"),
                run("a"),
                run("c").runtime("other"),
                run("d").on("p1"),
                run("e").ns("elsewhere"),
            ],
        );
        assert_eq!(index.pending_runs(NS, RUNTIME), ["a", "b"]);
        assert_eq!(index.pending_runs(NS, "other"), ["c"]);
        assert_eq!(index.pending_runs("elsewhere", RUNTIME), ["e"]);
        index.apply_run(&run("a").on("p1").build());
        assert_eq!(index.pending_runs(NS, RUNTIME), ["b"]);
        index.delete_run(NS, &run("b").build().uid().unwrap());
        assert!(index.pending_runs(NS, RUNTIME).is_empty());
    }

    #[test]
    fn pod_events_wake_only_on_scheduling_relevant_changes() {
        let mut index = Index::new();
        let p = pod("p1").capacity(&[("runs", 2)]);
        assert_eq!(index.apply_pod(&p.build()).len(), 1, "a new Pod wakes");
        assert!(
            index.apply_pod(&p.build()).is_empty(),
            "an identical Pod does not"
        );
        let wake = index.apply_pod(&p.clone().not_ready().build());
        assert_eq!(wake[0].source, WakeSource::RuntimePod);
        assert_eq!(
            index
                .apply_pod(&p.clone().capacity(&[("runs", 3)]).build())
                .len(),
            1
        );
        assert_eq!(index.delete_pod(NS, "p1").len(), 1);
        assert!(index.delete_pod(NS, "p1").is_empty());
    }

    #[test]
    fn lease_renewals_wake_only_when_the_heartbeat_may_have_come_back() {
        let mut index = Index::new();
        let p = pod("p1");
        index.apply_pod(&p.build());
        let uid = p.build().uid().unwrap();
        assert_eq!(
            index.apply_lease(&lease("p1", &uid, 0, 40)).len(),
            1,
            "first lease"
        );
        assert!(
            index.apply_lease(&lease("p1", &uid, 10, 40)).is_empty(),
            "renewal in term"
        );
        assert_eq!(
            index.apply_lease(&lease("p1", &uid, 60, 40)).len(),
            1,
            "renewal after lapse"
        );
        assert_eq!(
            index.apply_lease(&lease("p1", "other", 61, 40)).len(),
            1,
            "new holder"
        );
        assert_eq!(index.delete_lease(NS, "p1").len(), 1);
    }

    #[test]
    fn usage_survives_its_pod_being_deleted_and_recreated() {
        let mut index = idx(&[pod("p1")], &[run("a").on("p1")]);
        index.delete_pod(NS, "p1");
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 1);
        index.apply_pod(&pod("p1").uid("new").build());
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 1);
        let labels = &index.namespace(NS).unwrap().scopes[RUNTIME].labels;
        assert!(labels.is_empty(), "run a has no labels");
    }

    #[test]
    fn the_label_index_follows_runs_and_pods_between_runtimes() {
        let mut index = idx(
            &[pod("p1"), pod("p2")],
            &[run("a").labels(&[("cohort", "x")]).on("p1")],
        );
        let count = |index: &Index, runtime: &str| {
            index
                .namespace(NS)
                .and_then(|ns| ns.scopes.get(runtime))
                .and_then(|s| s.labels.get("cohort"))
                .and_then(|v| v.get("x"))
                .map(|slots| slots.values().sum::<u32>())
                .unwrap_or(0)
        };
        assert_eq!(count(&index, RUNTIME), 1);
        // The Pod moves to another runtime: its Runs' labels move with it.
        index.apply_pod(&pod("p1").runtime("other").build());
        assert_eq!(count(&index, RUNTIME), 0);
        assert_eq!(count(&index, "other"), 1);
        // Labels change while active.
        let change = index.apply_run(&run("a").labels(&[("cohort", "y")]).on("p1").build());
        assert!(change.targets_changed.is_some());
        assert!(change.released.is_empty());
        assert_eq!(count(&index, "other"), 0);
        index.apply_run(&run("a").succeeded().build());
        let scope = &index.namespace(NS).unwrap().scopes["other"];
        assert!(scope.labels.is_empty());
    }

    #[test]
    fn reset_runs_deletes_runs_missing_from_the_relist() {
        let mut index = idx(&[pod("p1")], &[run("a").on("p1"), run("b")]);
        let changes = index.reset_runs(&[run("c").build()]);
        assert_eq!(changes.iter().map(|c| c.released.len()).sum::<usize>(), 1);
        assert_eq!(index.pending_runs(NS, RUNTIME), ["c"]);
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 0);
    }
}
