//! A borrowed, read-only view of one (namespace, runtime) for one scheduling cycle.
//!
//! Owns the join of the index (Pods, Leases, actual usage and targets) with the assumed cache
//! (assumed usage and targets) at a given `now`, and the affinity target queries over both.
//! Building one costs O(nominations in the scope), never O(Pods), O(Runs) or O(assumptions):
//! Pods are borrowed from the index and visited lazily in name order, each with the assumed
//! cache's running sum for it. It must not mutate anything.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

use super::assumed::{AssumedCache, Assumption, NamespaceAssumptions};
use super::index::{CountedRequest, Index, NamespaceIndex, Scope, SlotId, WorkspaceRecord};
use super::nominations::{Nomination, Nominations};
use super::priority::{MissingClass, PriorityClasses};
use super::queue::SchedulingQueue;
use super::selector::Selector;
use super::types::{Held, Observed, QueueOrder, Requested, ResourceId, ResourceName, RunKey};
use crate::api::{Resources, Run};

mod pod;
pub use pod::{Adjust, PodView, ResourceLoad};

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
    assumed: Option<(SlotId, &'a Held)>,
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
            own.active = Some((id, run.request()));
        }
        if let Some((uid, a)) = self.assumed.and_then(|a| a.get(&key.uid))
            && let Some(&id) = self.scope.and_then(|s| s.pods.get(&a.pod))
        {
            own.uid = Some(uid);
            own.assumed = Some((id, &a.held));
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
                .any(|(uid, run)| uid != exclude_uid && selector.matches(&run.facts.labels))
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
            if uid != exclude_uid && selector.matches(&a.facts.labels) {
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
                uid != exclude_uid && run.facts.anti_affinity.iter().any(|s| s.matches(labels))
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
                && a.facts.anti_affinity.iter().any(|s| s.matches(labels))
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
        let bound_pod = entry.and_then(|e| e.holder()).or(assumed_pod);
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

#[cfg(test)]
mod tests;
