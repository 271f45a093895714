//! A borrowed, read-only view of one (namespace, runtime) for one scheduling cycle.
//!
//! Owns the join of the index (Pods, Leases, actual usage and targets) with the assumed cache
//! (assumed usage and targets) at a given `now`, and the affinity target queries over both.
//! Building one costs O(nominations in the scope), never O(Pods), O(Runs) or O(assumptions):
//! Pods are borrowed from the index and visited lazily in name order, each with the assumed
//! cache's running sum for it. It must not mutate anything.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

use super::assumed::{AssumedCache, AssumedOnPod, Assumption, NamespaceAssumptions};
use super::index::{
    ActiveRun, CountedRequest, Index, Interner, LeaseRecord, Load, NamespaceIndex, PodRecord,
    Scope, Slot, SlotId, WorkspaceRecord,
};
use super::nominations::{Nomination, Nominations};
use super::priority::{MissingClass, PriorityClasses};
use super::queue::SchedulingQueue;
use super::selector::Selector;
use super::types::{Heartbeat, Observed, QueueOrder, Requested, ResourceId, ResourceName, RunKey};
use crate::api::resources::Shortfall;
use crate::api::{Resources, Run};

/// A set of Pods (by slot), as a bit set: membership is one shift and mask per Pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSet {
    words: Vec<u64>,
    len: usize,
}

impl PodSet {
    fn with_capacity(slots: usize) -> Self {
        PodSet {
            words: vec![0; slots.div_ceil(64)],
            len: 0,
        }
    }

    pub(in crate::scheduler::framework) fn insert(&mut self, slot: SlotId) {
        let (word, bit) = (slot as usize / 64, slot % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        if self.words[word] & (1 << bit) == 0 {
            self.words[word] |= 1 << bit;
            self.len += 1;
        }
    }

    /// Whether `pod` is in the set.
    pub fn holds(&self, pod: &PodView<'_>) -> bool {
        self.contains(pod.slot())
    }

    pub(in crate::scheduler::framework) fn contains(&self, slot: SlotId) -> bool {
        let (word, bit) = (slot as usize / 64, slot % 64);
        self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    /// Number of Pods in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where the evaluated Run itself already sits. Its own usage and assumption are left out of
/// the numbers a cycle sees, so `explain` of a placed Run answers "where would it go".
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::scheduler::framework) struct Own<'a> {
    /// Borrowed from the index or the assumed cache: a Run that is neither active nor assumed
    /// appears in no Pod, so there is nothing to leave out.
    uid: Option<&'a str>,
    active: Option<(SlotId, &'a CountedRequest)>,
    assumed: Option<(SlotId, &'a Resources)>,
    /// The Run's place in the queue: nominations of Runs before it count against it, its own
    /// and later ones do not. `None` (not queued, or no Run at all): every nomination counts.
    order: Option<&'a QueueOrder>,
}

/// One (namespace, runtime) at `now`.
#[derive(Debug)]
pub struct Snapshot<'a> {
    namespace: &'a str,
    runtime: &'a str,
    now: Timestamp,
    index: &'a Index,
    queue: &'a SchedulingQueue,
    ns: Option<&'a NamespaceIndex>,
    scope: Option<&'a Scope>,
    assumed: Option<&'a NamespaceAssumptions>,
    /// The nomination on each Pod of the scope that has one.
    nominated: HashMap<SlotId, &'a Nomination>,
}

impl<'a> Snapshot<'a> {
    pub fn new(
        index: &'a Index,
        assumed: &'a AssumedCache,
        nominations: &'a Nominations,
        queue: &'a SchedulingQueue,
        namespace: &'a str,
        runtime: &'a str,
        now: Timestamp,
    ) -> Self {
        let ns = index.namespace(namespace);
        let scope = ns.and_then(|ns| ns.scopes.get(runtime));
        let mut nominated = HashMap::new();
        if let Some(scope) = scope {
            for (_, n) in nominations.in_scope(namespace, runtime) {
                if let Some(&id) = scope.pods.get(&n.pod) {
                    nominated.insert(id, n);
                }
            }
        }
        Snapshot {
            namespace,
            runtime,
            now,
            index,
            queue,
            ns,
            scope,
            assumed: assumed.namespace(namespace),
            nominated,
        }
    }

    pub fn namespace(&self) -> &'a str {
        self.namespace
    }

    pub fn runtime(&self) -> &'a str {
        self.runtime
    }

    /// `request` with the resource ids of this snapshot, in resource-name order: what
    /// [`PodView::shortfalls`] compares.
    pub fn requested(&self, request: &Resources) -> Vec<Requested> {
        request
            .iter()
            .map(|(name, amount)| Requested {
                name: ResourceName::from(name),
                id: self.resource_id(name),
                amount,
            })
            .collect()
    }

    /// The id of a resource name, `None` when no Runtime Pod advertises it.
    pub fn resource_id(&self, name: &str) -> Option<ResourceId> {
        self.index.interner().get(name)
    }

    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Whether the Runtime itself exists in the namespace.
    /// The Run's priority, or the PriorityClass it names that does not exist.
    pub fn priority_of(&self, run: &Run) -> Result<i32, MissingClass> {
        self.index.priority_of(run)
    }

    pub fn priority_classes(&self) -> &'a PriorityClasses {
        self.index.priority_classes()
    }

    pub fn runtime_exists(&self) -> bool {
        self.index.runtime_exists(self.namespace, self.runtime)
    }

    /// Number of Runtime Pods in the scope.
    pub fn len(&self) -> usize {
        self.scope.map_or(0, |s| s.pods.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every Runtime Pod of the scope, in name order.
    pub fn pods(&self) -> impl Iterator<Item = PodView<'_>> {
        self.pods_for(Own::default())
    }

    /// One Runtime Pod of the scope.
    pub fn pod(&self, name: &str) -> Option<PodView<'_>> {
        let id = *self.scope?.pods.get(name)?;
        Some(self.view(id, Own::default()))
    }

    pub(in crate::scheduler::framework) fn pods_for<'s>(
        &'s self,
        own: Own<'s>,
    ) -> impl Iterator<Item = PodView<'s>> {
        self.scope
            .into_iter()
            .flat_map(|s| s.pods.values())
            .map(move |&id| self.view(id, own))
    }

    fn view<'s>(&'s self, id: SlotId, own: Own<'s>) -> PodView<'s> {
        let ns = self.ns.expect("a scope implies its namespace");
        let slot = ns.slot(id);
        let assumed = self.assumed.and_then(|a| a.on_pod(&slot.name));
        let nominated = self
            .nominated
            .get(&id)
            .copied()
            .filter(|n| match own.order {
                Some(order) => n.order < *order,
                None => true,
            });
        PodView {
            id,
            slot,
            nominated,
            record: slot
                .pod
                .as_ref()
                .expect("every Pod of a scope has a record"),
            interner: self.index.interner(),
            assumed,
            assumptions: self.assumed,
            own_uid: own.uid,
            own_active: own.active.filter(|(s, _)| *s == id).map(|(_, r)| r),
            own_assumed: own.assumed.filter(|(s, _)| *s == id).map(|(_, r)| r),
        }
    }

    /// One Runtime Pod as the cycle of the Run `key` sees it (see [`Snapshot::pods_seen_by`]).
    pub fn pod_seen_by(&self, name: &str, key: &RunKey) -> Option<PodView<'_>> {
        let id = *self.scope?.pods.get(name)?;
        Some(self.view(id, self.own(key)))
    }

    /// The scope's Runtime Pods as the cycle of the Run `key` sees them: its own usage and
    /// assumption left out (what Filter and Score plugins are given).
    pub fn pods_seen_by<'s>(&'s self, key: &RunKey) -> impl Iterator<Item = PodView<'s>> + 's {
        self.pods_for(self.own(key))
    }

    /// Where the Run `key` already sits (active or assumed) in this namespace.
    pub(in crate::scheduler::framework) fn own(&self, key: &RunKey) -> Own<'_> {
        let mut own = Own {
            order: self.queue.get(key).map(|q| &q.order),
            ..Own::default()
        };
        let Some(ns) = self.ns else {
            return own;
        };
        if let Observed::Active(pod) = self.index.observed(key)
            && let Some(id) = ns.slot_id(pod)
            && let Some((uid, run)) = ns.slot(id).active.get_key_value(&key.uid)
        {
            own.uid = Some(uid);
            own.active = Some((id, &run.request));
        }
        if let Some((uid, a)) = self.assumed.and_then(|a| a.get(&key.uid))
            && let Some(&id) = self.scope.and_then(|s| s.pods.get(&a.pod))
        {
            own.uid = Some(uid);
            own.assumed = Some((id, &a.request));
        }
        own
    }

    /// The scope's Pods holding assumptions, with the assumptions on each.
    fn assumed_in_scope(&self) -> impl Iterator<Item = (SlotId, (&'a str, &'a Assumption))> {
        let scope = self.scope;
        self.assumed.into_iter().flat_map(move |all| {
            all.pods().flat_map(move |(pod, on_pod)| {
                scope
                    .and_then(|s| s.pods.get(pod))
                    .into_iter()
                    .flat_map(move |&id| all.runs_on(on_pod).map(move |run| (id, run)))
            })
        })
    }

    fn empty_set(&self) -> PodSet {
        PodSet::with_capacity(self.ns.map_or(0, |ns| ns.slot_capacity()))
    }

    /// Pods of the scope hosting an actual or assumed Run (other than `exclude_uid`) whose
    /// labels match `selector`.
    ///
    /// Actual targets come from the label index: the requirement (`In` or `Exists`) with the
    /// fewest candidate Pods drives the lookup and the full selector is checked against the
    /// Runs of those Pods only, so the cost is O(matching targets). Selectors without such a
    /// requirement (only `NotIn` / `DoesNotExist`, or empty) scan the active Runs of the scope.
    pub fn targets(&self, selector: &Selector, exclude_uid: &str) -> PodSet {
        let mut set = self.empty_set();
        let (Some(ns), Some(scope)) = (self.ns, self.scope) else {
            return set;
        };
        let hosts_match = |id: SlotId| {
            ns.slot(id)
                .active
                .iter()
                .any(|(uid, run)| uid != exclude_uid && selector.matches(&run.labels))
        };
        match best_driver(scope, selector) {
            Driver::Nothing => {}
            Driver::Slots(candidates) => {
                for slots in candidates {
                    for &id in slots.keys() {
                        if !set.contains(id) && hosts_match(id) {
                            set.insert(id);
                        }
                    }
                }
            }
            Driver::Scan => {
                for &id in scope.pods.values() {
                    if hosts_match(id) {
                        set.insert(id);
                    }
                }
            }
        }
        for (id, (uid, a)) in self.assumed_in_scope() {
            if uid != exclude_uid && selector.matches(&a.labels) {
                set.insert(id);
            }
        }
        set
    }

    /// Pods of the scope hosting an actual or assumed Run (other than `exclude_uid`) with a
    /// required anti-affinity term that `labels` match: a Run with those labels must not join
    /// them. Costs O(Runs with anti-affinity terms in the scope).
    pub fn anti_affinity_against(
        &self,
        labels: &BTreeMap<String, String>,
        exclude_uid: &str,
    ) -> PodSet {
        let mut set = self.empty_set();
        let (Some(ns), Some(scope)) = (self.ns, self.scope) else {
            return set;
        };
        for &id in scope.anti_affinity.keys() {
            let rejects = ns.slot(id).active.iter().any(|(uid, run)| {
                uid != exclude_uid && run.anti_affinity.iter().any(|s| s.matches(labels))
            });
            if rejects {
                set.insert(id);
            }
        }
        for (uid, a) in self
            .assumed
            .into_iter()
            .flat_map(|a| a.with_anti_affinity())
        {
            if uid != exclude_uid
                && let Some(&id) = scope.pods.get(&a.pod)
                && a.anti_affinity.iter().any(|s| s.matches(labels))
            {
                set.insert(id);
            }
        }
        set
    }
}

/// A PersistentWorkspace as a cycle sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkspaceView<'a> {
    /// The object; `None` when no PersistentWorkspace of that name exists.
    pub record: Option<&'a WorkspaceRecord>,
    /// The Pod that holds its data: `status.boundPod` while Bound, else the Pod of an active
    /// Run that uses it (bound, its status not written yet), else the Pod of an assumption
    /// that uses it (bound by an earlier cycle's Reserve). `None`: unbound.
    pub bound_pod: Option<&'a str>,
    /// Whether an active Run or an assumption uses it, or a Pending Run waits for it.
    pub in_use: bool,
}

impl<'a> Snapshot<'a> {
    /// The workspace `name` of this snapshot's namespace, bound as described on
    /// [`WorkspaceView::bound_pod`]. O(1) but for the first user's name.
    pub fn workspace(&self, name: &str) -> WorkspaceView<'a> {
        let entry = self.ns.and_then(|ns| ns.workspaces.get(name));
        let record = entry.and_then(|e| e.record.as_ref());
        let mut assumed = self
            .assumed
            .into_iter()
            .flat_map(|a| a.workspace_pods(name));
        let assumed_pod = assumed.next();
        let bound_pod = record
            .filter(|r| r.phase == crate::api::WorkspacePhase::Bound)
            .and_then(|r| r.bound_pod.as_deref())
            .or_else(|| {
                entry
                    .and_then(|e| e.active.keys().next())
                    .map(String::as_str)
            })
            .or(assumed_pod);
        WorkspaceView {
            record,
            bound_pod,
            in_use: entry.is_some_and(|e| e.in_use()) || assumed_pod.is_some(),
        }
    }
}

enum Driver<'a> {
    /// An indexable requirement matches no Run at all: no actual target exists.
    Nothing,
    /// The Pods carrying the driving requirement's label values.
    Slots(Vec<&'a HashMap<SlotId, u32>>),
    /// Nothing indexable: scan.
    Scan,
}

/// The indexable requirement with the fewest candidate Pods.
fn best_driver<'a>(scope: &'a Scope, selector: &Selector) -> Driver<'a> {
    let mut best: Option<(usize, Vec<&'a HashMap<SlotId, u32>>)> = None;
    for req in selector.indexable() {
        let Some(values) = scope.labels.get(&req.key) else {
            return Driver::Nothing;
        };
        let lists: Vec<&HashMap<SlotId, u32>> = if req.values.is_empty() {
            values.values().collect()
        } else {
            req.values.iter().filter_map(|v| values.get(v)).collect()
        };
        let cost = lists.iter().map(|l| l.len()).sum();
        if cost == 0 {
            return Driver::Nothing;
        }
        if best.as_ref().is_none_or(|(c, _)| cost < *c) {
            best = Some((cost, lists));
        }
    }
    match best {
        Some((_, lists)) => Driver::Slots(lists),
        None => Driver::Scan,
    }
}

/// Capacity and usage of one advertised resource of a Pod, as a cycle sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLoad {
    pub id: ResourceId,
    pub capacity: u64,
    /// Actual usage (`u64::MAX` when unknown).
    pub used: u64,
    /// Usage of the scheduler's assumptions.
    pub assumed: u64,
    /// Held for a Run earlier in the queue that this Pod is nominated for.
    pub nominated: u64,
}

impl ResourceLoad {
    /// `used + assumed + nominated`: what Filter and Score compare against capacity.
    pub fn effective(&self) -> u64 {
        self.used
            .saturating_add(self.assumed)
            .saturating_add(self.nominated)
    }
}

/// One Runtime Pod as the plugins see it. Usage numbers leave out the evaluated Run itself.
///
/// The per-resource accessors by id ([`PodView::load`], [`PodView::loads`]) are the hot path
/// of Filter and Score; the ones by name serve `explain` and tests.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    id: SlotId,
    slot: &'a Slot,
    record: &'a PodRecord,
    interner: &'a Interner,
    assumed: Option<&'a AssumedOnPod>,
    /// The namespace's assumptions, to resolve the UIDs of `assumed`.
    assumptions: Option<&'a NamespaceAssumptions>,
    /// A nomination of a Run earlier in the queue than the viewing Run.
    nominated: Option<&'a Nomination>,
    own_uid: Option<&'a str>,
    own_active: Option<&'a CountedRequest>,
    own_assumed: Option<&'a Resources>,
}

impl<'a> PodView<'a> {
    pub fn name(&self) -> &'a str {
        &self.slot.name
    }

    pub fn uid(&self) -> &'a str {
        &self.record.uid
    }

    pub fn ready(&self) -> bool {
        self.slot.hot.ready
    }

    pub fn deleting(&self) -> bool {
        self.slot.hot.deleting
    }

    /// Whether the capacity annotations could be read.
    pub fn capacity_ok(&self) -> bool {
        self.slot.hot.capacity_ok
    }

    /// The heartbeat Lease named after the Pod, if observed.
    pub fn lease(&self) -> Option<&'a LeaseRecord> {
        self.slot.lease.as_ref()
    }

    /// The heartbeat state: missing, held by someone else, or held until a time.
    pub fn heartbeat(&self) -> Heartbeat {
        self.slot.hot.heartbeat
    }

    /// The advertised capacity, or why the annotations could not be read.
    pub fn capacity(&self) -> Result<&'a Resources, &'a str> {
        self.record.capacity.as_ref().map_err(String::as_str)
    }

    fn resolve(&self, load: &Load) -> ResourceLoad {
        let mut used = load.used;
        if let Some(own) = self.own_active
            && used != u64::MAX
        {
            used = used.saturating_sub(own.amounts.get(self.interner.name(load.id)));
        }
        let mut assumed = 0;
        if let Some(on_pod) = self.assumed {
            assumed = on_pod.usage.get(self.interner.name(load.id));
            if let Some(own) = self.own_assumed {
                assumed = assumed.saturating_sub(own.get(self.interner.name(load.id)));
            }
        }
        let nominated = self
            .nominated
            .map_or(0, |n| n.request.get(self.interner.name(load.id)));
        ResourceLoad {
            id: load.id,
            capacity: load.capacity,
            used,
            assumed,
            nominated,
        }
    }

    /// Capacity and usage of one advertised resource; `None` when the Pod does not advertise
    /// it (or its capacity is unreadable).
    pub fn load(&self, id: ResourceId) -> Option<ResourceLoad> {
        self.slot
            .hot
            .load
            .iter()
            .find(|l| l.id == id)
            .map(|l| self.resolve(l))
    }

    /// Capacity and usage of every advertised resource.
    pub fn loads(&self) -> impl Iterator<Item = ResourceLoad> + '_ {
        self.slot.hot.load.iter().map(|l| self.resolve(l))
    }

    /// Usage of the active Runs on the Pod (`u64::MAX` when an active Run's amount of it is
    /// unknown, see [`CountedRequest`]).
    pub fn used(&self, resource: &str) -> u64 {
        let used = self.slot.usage.get(resource);
        match self.own_active {
            Some(own) if used != u64::MAX => used.saturating_sub(own.amounts.get(resource)),
            _ => used,
        }
    }

    /// Usage of the scheduler's assumptions on the Pod.
    pub fn assumed(&self, resource: &str) -> u64 {
        let Some(on_pod) = self.assumed else {
            return 0;
        };
        let own = self.own_assumed.map_or(0, |r| r.get(resource));
        on_pod.usage.get(resource).saturating_sub(own)
    }

    /// Held on the Pod for a Run earlier in the queue that the Pod is nominated for.
    pub fn nominated(&self, resource: &str) -> u64 {
        self.nominated.map_or(0, |n| n.request.get(resource))
    }

    /// The nomination that holds room on this Pod for a Run earlier in the queue.
    pub fn nomination(&self) -> Option<&'a Nomination> {
        self.nominated
    }

    /// `used + assumed + nominated`.
    pub fn effective(&self, resource: &str) -> u64 {
        self.used(resource)
            .saturating_add(self.assumed(resource))
            .saturating_add(self.nominated(resource))
    }

    /// The requested resources that do not fit on this Pod (`used + assumed + nominated +
    /// amount > capacity`, or not advertised at all), in the request's order, each with the
    /// numbers that decided it. The one fit rule: RuntimePodAvailability's Filter, Reserve and
    /// `explain` all ask this. A Shortfall is only built for a resource that does not fit.
    pub fn shortfalls<'r>(
        &'r self,
        request: &'r [Requested],
    ) -> impl Iterator<Item = Shortfall> + 'r {
        request.iter().filter_map(move |requested| {
            // A resource no Pod advertises has no id, and one this Pod lacks has no load.
            let load = requested.id.and_then(|id| self.load(id));
            let (used, capacity) = load.map_or((0, None), |l| (l.effective(), Some(l.capacity)));
            if Shortfall::fits(requested.amount, used, capacity) {
                return None;
            }
            Shortfall::check(requested.name.clone(), requested.amount, used, capacity)
        })
    }

    /// Active Runs on the Pod, by UID.
    pub fn active_runs(&self) -> impl Iterator<Item = (&'a str, &'a ActiveRun)> + 'a {
        let own = self.own_uid;
        self.slot
            .active
            .iter()
            .filter(move |(uid, _)| Some(uid.as_str()) != own)
            .map(|(uid, run)| (uid.as_str(), run))
    }

    /// The scheduler's assumptions on the Pod, by Run UID.
    pub fn assumed_runs(&self) -> impl Iterator<Item = (&'a str, &'a Assumption)> + 'a {
        let own = self.own_uid;
        self.assumed
            .zip(self.assumptions)
            .into_iter()
            .flat_map(|(on_pod, all)| all.runs_on(on_pod))
            .filter(move |(uid, _)| Some(*uid) != own)
    }

    pub(in crate::scheduler::framework) fn slot(&self) -> SlotId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;

    fn target_names(snap: &Snapshot<'_>, set: &PodSet) -> Vec<String> {
        snap.pods()
            .filter(|p| set.contains(p.slot()))
            .map(|p| p.name().to_string())
            .collect()
    }

    #[test]
    fn targets_include_actual_and_assumed_runs_but_never_the_run_itself() {
        let world = World::new()
            .pods([pod("p1"), pod("p2"), pod("p3"), pod("p4")])
            .runs([
                run("a").labels(&[("cohort", "x")]).on("p1"),
                run("b").labels(&[("cohort", "y")]).on("p2"),
                run("self").labels(&[("cohort", "x")]).on("p4"),
            ])
            .assume(run("c").labels(&[("cohort", "x")]), "p3");
        let state = world.cache();
        let snap = state.snapshot(NS, RUNTIME, NOW);
        let uid = run("self").build().metadata.uid.unwrap();
        let set = snap.targets(&Selector::from_labels([("cohort", "x")]), &uid);
        assert_eq!(target_names(&snap, &set), ["p1", "p3"]);
    }

    #[test]
    fn indexed_and_scanned_selectors_find_the_same_targets() {
        let world = World::new().pods([pod("p1"), pod("p2"), pod("p3")]).runs([
            run("a")
                .labels(&[("cohort", "x"), ("tier", "gold")])
                .on("p1"),
            run("b").labels(&[("cohort", "x")]).on("p2"),
            run("c").labels(&[("cohort", "y")]).on("p3"),
        ]);
        let state = world.cache();
        let snap = state.snapshot(NS, RUNTIME, NOW);
        let indexed = Selector::from_labels([("cohort", "x"), ("tier", "gold")]);
        assert_eq!(target_names(&snap, &snap.targets(&indexed, "")), ["p1"]);
        let scanned = selector_expr(&[("cohort", "NotIn", &["y"])]);
        assert_eq!(
            target_names(&snap, &snap.targets(&scanned, "")),
            ["p1", "p2"]
        );
        let missing = Selector::from_labels([("nope", "x")]);
        assert!(snap.targets(&missing, "").is_empty());
    }

    #[test]
    fn a_snapshot_sees_pods_in_name_order_with_effective_usage() {
        let world = World::new()
            .pods([
                pod("p2").capacity(&[("runs", 4)]),
                pod("p1").capacity(&[("runs", 4)]),
            ])
            .runs([run("a").on("p1")])
            .assume(run("b").requests(&[("runs", 2)]), "p1");
        let state = world.cache();
        let snap = state.snapshot(NS, RUNTIME, NOW);
        let names: Vec<_> = snap.pods().map(|p| p.name()).collect();
        assert_eq!(names, ["p1", "p2"]);
        let p1 = snap.pod("p1").unwrap();
        assert_eq!(
            (p1.used("runs"), p1.assumed("runs"), p1.effective("runs")),
            (1, 2, 3)
        );
        assert_eq!(snap.pod("p2").unwrap().effective("runs"), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        RunOn {
            run: usize,
            pod: usize,
            cohort: usize,
            tier: bool,
        },
        RunEnds(usize),
        RunDeleted(usize),
        PodMoves {
            pod: usize,
            elsewhere: bool,
        },
        PodDeleted(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..8usize, 0..4usize, 0..3usize, any::<bool>())
                .prop_map(|(run, pod, cohort, tier)| Op::RunOn { run, pod, cohort, tier }),
            1 => (0..8usize).prop_map(Op::RunEnds),
            1 => (0..8usize).prop_map(Op::RunDeleted),
            1 => (0..4usize, any::<bool>()).prop_map(|(pod, elsewhere)| Op::PodMoves { pod, elsewhere }),
            1 => (0..4usize).prop_map(Op::PodDeleted),
        ]
    }

    const COHORTS: [&str; 3] = ["a", "b", "c"];

    proptest! {
        /// The label index stays consistent with the active Runs through any sequence of Run
        /// and Pod events: indexed lookups find exactly what a scan finds.
        #[test]
        fn the_label_index_finds_exactly_the_targets_a_scan_finds(ops in proptest::collection::vec(op(), 0..60)) {
            let mut state = crate::scheduler::framework::SchedulerCache::new();
            for i in 0..4 {
                state.apply(&pod(&format!("p{i}")).build(), NOW);
            }
            for op in ops {
                match op {
                    Op::RunOn { run: r, pod: p, cohort, tier } => {
                        let mut b = run(&format!("r{r}")).labels(&[("cohort", COHORTS[cohort])]);
                        if tier {
                            b = b.labels(&[("tier", "gold")]);
                        }
                        state.apply_run(&b.on(&format!("p{p}")).build(), NOW);
                    }
                    Op::RunEnds(r) => {
                        state.apply_run(&run(&format!("r{r}")).succeeded().build(), NOW);
                    }
                    Op::RunDeleted(r) => {
                        state.delete_run(NS, &format!("uid-r{r}"), NOW);
                    }
                    Op::PodMoves { pod: p, elsewhere } => {
                        let runtime = if elsewhere { "other" } else { RUNTIME };
                        state.apply(&pod(&format!("p{p}")).runtime(runtime).build(), NOW);
                    }
                    Op::PodDeleted(p) => {
                        state.delete(&pod(&format!("p{p}")).build(), NOW);
                    }
                }
            }
            let snap = state.snapshot(NS, RUNTIME, NOW);
            let selectors = [
                Selector::from_labels([("cohort", "a")]),
                Selector::from_labels([("cohort", "b"), ("tier", "gold")]),
                selector_expr(&[("cohort", "In", &["a", "c"])]),
                selector_expr(&[("tier", "Exists", &[])]),
                selector_expr(&[("cohort", "NotIn", &["a"])]),
            ];
            for selector in &selectors {
                let scanned: Vec<String> = snap
                    .pods()
                    .filter(|p| p.active_runs().any(|(_, r)| selector.matches(&r.labels)))
                    .map(|p| p.name().to_string())
                    .collect();
                prop_assert_eq!(target_names(&snap, &snap.targets(selector, "")), scanned, "{:?}", selector);
            }
        }
    }
}
