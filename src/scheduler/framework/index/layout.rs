//! The storage layout of the index: slots per Pod name, runtime scopes, resource ids.
//!
//! Owns how records are kept so that a scheduling cycle never walks all Runs: a slab of slots
//! per namespace, a scope per (namespace, runtime) with its Pods and label index, and dense resource ids. It must not parse objects (see [`super::record`]) or decide
//! what an event means for wakeups (see [`super`]).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

use super::record::{ActiveRun, LeaseRecord, PodRecord};
use super::workspaces::WorkspaceEntry;
use crate::scheduler::framework::facts::CountedRequest;
use crate::scheduler::framework::types::{Heartbeat, ResourceId};

/// Index of a slot within its namespace. Stable while the slot exists.
pub type SlotId = u32;

/// Resource names advertised by Runtime Pods, as dense ids, so a cycle compares integers
/// instead of strings (string compares dominated a 5 000-Pod cycle).
#[derive(Debug, Clone, Default)]
pub(in crate::scheduler::framework) struct Interner {
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

/// One resource of a Pod: what the Pod advertises and what its active Runs use. The hot data
/// of a cycle, kept in the Pod's slot and updated with every Pod and Run event, and the one
/// record of the Pod's actual usage: the Filter, Score, `explain` and `status` all read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub id: ResourceId,
    /// What the Pod advertises; `None` for a resource only its active Runs name (bound by
    /// another writer, or no longer advertised): nothing fits there.
    pub capacity: Option<u64>,
    /// The known amounts of the active Runs, summed.
    pub known: u64,
    /// Active Runs whose amount of it is unknown (see [`CountedRequest`]).
    pub unknown: u32,
}

impl Load {
    /// Actual usage: `u64::MAX` (nothing left) while an active Run's amount is unknown.
    pub fn used(&self) -> u64 {
        if self.unknown > 0 {
            u64::MAX
        } else {
            self.known
        }
    }

    fn is_empty(&self) -> bool {
        self.capacity.is_none() && self.known == 0 && self.unknown == 0
    }
}

/// Everything known under one Pod name in a namespace.
#[derive(Debug, Clone)]
pub(in crate::scheduler::framework) struct Slot {
    pub name: String,
    pub pod: Option<PodRecord>,
    pub lease: Option<LeaseRecord>,
    /// When the scheduler saw the Pod without a heartbeat Lease (deleted, or not there when
    /// the Pod was first seen); cleared by a Lease. How long a Pod has gone without one.
    pub lease_gone_at: Option<Timestamp>,
    /// Active Runs assigned to this Pod name, by UID.
    pub active: BTreeMap<String, ActiveRun>,
    /// What a cycle reads, precomputed and kept together.
    pub hot: Hot,
}

/// The per-Pod data Filter and Score read, in one place so a cycle touches one small block
/// per Pod (string compares and scattered reads dominated a 5 000-Pod cycle).
#[derive(Debug, Clone, Default)]
pub(in crate::scheduler::framework) struct Hot {
    pub ready: bool,
    pub deleting: bool,
    pub capacity_ok: bool,
    pub heartbeat: Heartbeat,
    /// One entry per resource the Pod advertises or its active Runs use, in id order: the
    /// slot's only record of usage.
    pub load: Vec<Load>,
}

impl Slot {
    pub(super) fn is_empty(&self) -> bool {
        self.pod.is_none() && self.lease.is_none() && self.active.is_empty()
    }

    /// Recomputes the flags and heartbeat of `hot` (Pod or Lease applied or deleted).
    pub(super) fn refresh_hot(&mut self) {
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

    /// The entry of resource `id`, whether advertised or only used.
    pub fn load(&self, id: ResourceId) -> Option<&Load> {
        let i = self.hot.load.binary_search_by_key(&id, |l| l.id).ok()?;
        Some(&self.hot.load[i])
    }

    /// Sets the capacities of `load` from the Pod's (Pod applied or deleted); the usage stays.
    pub(super) fn rebuild_load(&mut self, interner: &mut Interner) {
        for load in &mut self.hot.load {
            load.capacity = None;
        }
        if let Some(PodRecord {
            capacity: Ok(capacity),
            ..
        }) = &self.pod
        {
            for (name, amount) in capacity.iter() {
                self.hot.load_mut(interner.intern(name)).capacity = Some(amount);
            }
        }
        self.hot.load.retain(|l| !l.is_empty());
    }

    /// Adds (`joined`) or takes away what `request` uses (a Run joined or left).
    pub(super) fn count(
        &mut self,
        interner: &mut Interner,
        request: &CountedRequest,
        joined: bool,
    ) {
        for (name, amount) in request.amounts.iter() {
            let load = self.hot.load_mut(interner.intern(name));
            load.known = match joined {
                true => load.known.saturating_add(amount),
                false => load.known.saturating_sub(amount),
            };
        }
        for name in &request.unknown {
            let load = self.hot.load_mut(interner.intern(name));
            load.unknown = match joined {
                true => load.unknown + 1,
                false => load.unknown.saturating_sub(1),
            };
        }
        self.hot.load.retain(|l| !l.is_empty());
    }
}

impl Hot {
    /// The entry of resource `id`, made (empty) when there is none.
    fn load_mut(&mut self, id: ResourceId) -> &mut Load {
        let i = match self.load.binary_search_by_key(&id, |l| l.id) {
            Ok(i) => i,
            Err(i) => {
                let empty = Load {
                    id,
                    capacity: None,
                    known: 0,
                    unknown: 0,
                };
                self.load.insert(i, empty);
                i
            }
        };
        &mut self.load[i]
    }
}

/// Label key -> value -> slot -> number of active Runs carrying that label there.
pub(in crate::scheduler::framework) type LabelIndex =
    HashMap<String, HashMap<String, HashMap<SlotId, u32>>>;

/// One (namespace, runtime): the unit every scheduling cycle reads.
#[derive(Debug, Clone, Default)]
pub(in crate::scheduler::framework) struct Scope {
    /// Runtime Pods labelled with this runtime, in name order (the Filter order).
    pub pods: BTreeMap<String, SlotId>,
    /// Labels of the active Runs on those Pods.
    pub labels: LabelIndex,
    /// Slot -> number of active Runs there with required anti-affinity terms.
    pub anti_affinity: BTreeMap<SlotId, u32>,
}

impl Scope {
    pub(super) fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    pub(super) fn index_run(&mut self, slot: SlotId, run: &ActiveRun) {
        for (k, v) in &run.facts.labels {
            *self
                .labels
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .entry(slot)
                .or_insert(0) += 1;
        }
        if !run.facts.anti_affinity.is_empty() {
            *self.anti_affinity.entry(slot).or_insert(0) += 1;
        }
    }

    pub(super) fn unindex_run(&mut self, slot: SlotId, run: &ActiveRun) {
        for (k, v) in &run.facts.labels {
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
        if !run.facts.anti_affinity.is_empty()
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
pub(in crate::scheduler::framework) struct NamespaceIndex {
    pub(super) slots: Vec<Option<Slot>>,
    free: Vec<SlotId>,
    pub(super) by_name: HashMap<String, SlotId>,
    pub scopes: HashMap<String, Scope>,
    /// PersistentWorkspaces by name, with their users.
    pub workspaces: HashMap<String, WorkspaceEntry>,
}

impl NamespaceIndex {
    pub fn slot(&self, id: SlotId) -> &Slot {
        self.slots[id as usize]
            .as_ref()
            .expect("a slot id in the index always names a live slot")
    }

    pub(super) fn slot_mut(&mut self, id: SlotId) -> &mut Slot {
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

    pub(super) fn slot_id_or_insert(&mut self, name: &str) -> SlotId {
        if let Some(id) = self.by_name.get(name) {
            return *id;
        }
        let slot = Slot {
            name: name.to_string(),
            pod: None,
            lease: None,
            lease_gone_at: None,
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
    pub(super) fn gc(&mut self, id: SlotId) {
        if self.slot(id).is_empty() {
            let slot = self.slots[id as usize].take().expect("live slot");
            self.by_name.remove(&slot.name);
            self.free.push(id);
        }
    }

    pub(super) fn gc_scope(&mut self, runtime: &str) {
        if self.scopes.get(runtime).is_some_and(Scope::is_empty) {
            self.scopes.remove(runtime);
        }
    }

    /// The runtime scope the slot's Pod belongs to, if it is a Runtime Pod.
    pub(super) fn runtime_of(&self, id: SlotId) -> Option<&str> {
        self.slot(id).pod.as_ref().map(|p| p.runtime.as_str())
    }

    /// Adds the slot's Pod and its active Runs' labels to `runtime`'s scope.
    pub(super) fn attach(&mut self, id: SlotId, runtime: &str) {
        let slot = self.slots[id as usize].as_ref().expect("live slot");
        let scope = self.scopes.entry(runtime.to_string()).or_default();
        scope.pods.insert(slot.name.clone(), id);
        for run in slot.active.values() {
            scope.index_run(id, run);
        }
    }

    /// Removes the slot's Pod and its active Runs' labels from `runtime`'s scope.
    pub(super) fn detach(&mut self, id: SlotId, runtime: &str) {
        let slot = self.slots[id as usize].as_ref().expect("live slot");
        if let Some(scope) = self.scopes.get_mut(runtime) {
            scope.pods.remove(&slot.name);
            for run in slot.active.values() {
                scope.unindex_run(id, run);
            }
        }
        self.gc_scope(runtime);
    }

    pub(super) fn add_active(
        &mut self,
        id: SlotId,
        uid: &str,
        run: ActiveRun,
        interner: &mut Interner,
    ) {
        if let Some(runtime) = self.runtime_of(id).map(str::to_string)
            && let Some(scope) = self.scopes.get_mut(&runtime)
        {
            scope.index_run(id, &run);
        }
        if let Some(workspace) = &run.facts.workspace {
            let pod = self.slot(id).name.clone();
            self.workspace_mut(workspace).add_active(&pod);
        }
        let slot = self.slot_mut(id);
        slot.count(interner, run.request(), true);
        slot.active.insert(uid.to_string(), run);
    }

    pub(super) fn workspace_mut(&mut self, name: &str) -> &mut WorkspaceEntry {
        self.workspaces.entry(name.to_string()).or_default()
    }

    /// Forgets the workspace entry once it has neither a record nor users.
    pub(super) fn gc_workspace(&mut self, name: &str) {
        if self
            .workspaces
            .get(name)
            .is_some_and(WorkspaceEntry::is_empty)
        {
            self.workspaces.remove(name);
        }
    }

    pub(super) fn remove_active(
        &mut self,
        id: SlotId,
        uid: &str,
        interner: &mut Interner,
    ) -> Option<ActiveRun> {
        let slot = self.slot_mut(id);
        let run = slot.active.remove(uid)?;
        slot.count(interner, run.request(), false);
        if let Some(workspace) = &run.facts.workspace {
            let pod = self.slot(id).name.clone();
            self.workspace_mut(workspace).remove_active(&pod);
            self.gc_workspace(workspace);
        }
        if let Some(runtime) = self.runtime_of(id).map(str::to_string)
            && let Some(scope) = self.scopes.get_mut(&runtime)
        {
            scope.unindex_run(id, &run);
        }
        Some(run)
    }
}
