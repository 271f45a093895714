//! One Runtime Pod as a cycle sees it ([`PodView`]) and the one fit rule over it.
//!
//! Owns how a Pod's usage is resolved (actual, assumed and nominated, the evaluated Run's own
//! left out) and every question of the form "does this request fit here": the Filter, Reserve,
//! the Filter's "but for the nomination", preemption's victim check, the nominator's "once
//! drained" and the wake walk's room all ask [`PodView::shortfalls_with`] or
//! [`PodView::fits_with`] with the [`Adjust`] they need. It must not mutate anything.

use super::super::assumed::{AssumedOnPod, Assumption, NamespaceAssumptions};
use super::super::index::{
    ActiveRun, CountedRequest, Interner, LeaseRecord, Load, PodRecord, Slot, SlotId,
};
use super::super::nominations::Nomination;
use super::super::types::{Heartbeat, Held, Requested, ResourceId};
use crate::api::Resources;
use crate::api::resources::Shortfall;

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

/// What a fit question leaves in or out of a Pod's usage, on top of the evaluated Run's own
/// usage (always left out). `Adjust::default()` is the Filter's question.
#[derive(Debug, Clone, Copy, Default)]
pub struct Adjust<'r> {
    /// Leave out the room held for an earlier nominated Run: would it fit but for that?
    pub without_nomination: bool,
    /// Usage counted on top, by name: what Runs earlier in a wake walk were counted to take.
    pub taken: Option<&'r Resources>,
    /// Actual usage left out, by name: preemption victims and Runs already asked to stop.
    pub freed: Option<&'r Resources>,
    /// Leave out all usage: could the Pod take the request once drained?
    pub drained: bool,
}

impl Adjust<'_> {
    /// The usage of `name` that the fit compares against capacity, from `load`.
    fn effective(&self, name: &str, load: &ResourceLoad) -> u64 {
        if self.drained {
            return 0;
        }
        let mut used = load.used;
        if let Some(freed) = self.freed
            && used != u64::MAX
        {
            used = used.saturating_sub(freed.get(name));
        }
        let nominated = if self.without_nomination {
            0
        } else {
            load.nominated
        };
        used.saturating_add(load.assumed)
            .saturating_add(nominated)
            .saturating_add(self.taken.map_or(0, |t| t.get(name)))
    }
}

/// One Runtime Pod as the plugins see it. Usage numbers leave out the evaluated Run itself.
///
/// The per-resource accessors by id ([`PodView::load`], [`PodView::loads`]) and the fit
/// ([`PodView::shortfalls_with`]) are the hot path of Filter and Score; the ones by name are
/// `explain`'s and `status`'s read-only view over the same numbers.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    pub(super) id: SlotId,
    pub(super) slot: &'a Slot,
    pub(super) record: &'a PodRecord,
    pub(super) interner: &'a Interner,
    pub(super) assumed: Option<&'a AssumedOnPod>,
    /// The namespace's assumptions, to resolve the UIDs of `assumed`.
    pub(super) assumptions: Option<&'a NamespaceAssumptions>,
    /// A nomination of a Run earlier in the queue than the viewing Run.
    pub(super) nominated: Option<&'a Nomination>,
    pub(super) own_uid: Option<&'a str>,
    pub(super) own_active: Option<&'a CountedRequest>,
    pub(super) own_assumed: Option<&'a Held>,
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

    /// The Pod's usage of resource `id` (named `name`) as the viewing Run sees it, from the
    /// actual usage `used` (`u64::MAX` when unknown): (actual, assumed, nominated), the Run's
    /// own usage and assumption left out. The one place these numbers are resolved. Assumed
    /// and nominated amounts are held by id; a resource without one is held by none. The
    /// viewing Run's own active request is by name, as every Run's request is.
    fn usage_of(&self, id: Option<ResourceId>, name: &str, mut used: u64) -> (u64, u64, u64) {
        if let Some(own) = self.own_active
            && used != u64::MAX
        {
            used = used.saturating_sub(own.amounts.get(name));
        }
        let Some(id) = id else {
            return (used, 0, 0);
        };
        let mut assumed = 0;
        if let Some(on_pod) = self.assumed {
            assumed = on_pod.usage.get(id);
            if let Some(own) = self.own_assumed {
                assumed = assumed.saturating_sub(own.get(id));
            }
        }
        let nominated = self.nominated.map_or(0, |n| n.held.get(id));
        (used, assumed, nominated)
    }

    /// [`Self::usage_of`] by name: explain's and status's read-only view.
    fn usage_of_name(&self, name: &str, used: u64) -> (u64, u64, u64) {
        self.usage_of(self.interner.get(name), name, used)
    }

    /// The advertised resource `load` as the viewing Run sees it; `None` when the Pod does
    /// not advertise it.
    fn resolve(&self, load: &Load) -> Option<ResourceLoad> {
        let capacity = load.capacity?;
        let name = self.interner.name(load.id);
        let (used, assumed, nominated) = self.usage_of(Some(load.id), name, load.used());
        Some(ResourceLoad {
            id: load.id,
            capacity,
            used,
            assumed,
            nominated,
        })
    }

    /// Capacity and usage of one advertised resource; `None` when the Pod does not advertise
    /// it (or its capacity is unreadable).
    pub fn load(&self, id: ResourceId) -> Option<ResourceLoad> {
        self.resolve(self.slot.load(id)?)
    }

    /// Capacity and usage of every advertised resource.
    pub fn loads(&self) -> impl Iterator<Item = ResourceLoad> + '_ {
        self.slot.hot.load.iter().filter_map(|l| self.resolve(l))
    }

    /// The active Runs' usage of `resource`, read from the loads by name.
    fn used_of(&self, resource: &str) -> u64 {
        let load = self
            .interner
            .get(resource)
            .and_then(|id| self.slot.load(id));
        load.map_or(0, Load::used)
    }

    /// The requested resources that do not fit on this Pod with `adjust` applied
    /// (`used + assumed + nominated + amount > capacity`, or not advertised at all), in the
    /// request's order, each with the numbers that decided it. The one fit rule: the Filter,
    /// Reserve, `explain`, preemption's victim check, the nominator and the wake walk all ask
    /// it. A Shortfall is only built for a resource that does not fit.
    pub fn shortfalls_with<'r>(
        &'r self,
        request: &'r [Requested],
        adjust: Adjust<'r>,
    ) -> impl Iterator<Item = Shortfall> + 'r {
        request.iter().filter_map(move |requested| {
            let (fits, used, capacity) = self.fit(requested, &adjust);
            if fits {
                return None;
            }
            Shortfall::check(requested.name.clone(), requested.amount, used, capacity)
        })
    }

    /// [`PodView::shortfalls_with`] with nothing adjusted: what the Filter and Reserve ask.
    pub fn shortfalls<'r>(
        &'r self,
        request: &'r [Requested],
    ) -> impl Iterator<Item = Shortfall> + 'r {
        self.shortfalls_with(request, Adjust::default())
    }

    /// Whether the complete request fits with `adjust` applied (no shortfall at all).
    pub fn fits_with(&self, request: &[Requested], adjust: Adjust<'_>) -> bool {
        request.iter().all(|r| self.fit(r, &adjust).0)
    }

    /// Whether every advertised resource is used up with `adjust` applied: nothing more fits.
    pub fn is_full(&self, adjust: Adjust<'_>) -> bool {
        self.loads().all(|load| {
            let name = self.interner.name(load.id);
            adjust.effective(name, &load) >= load.capacity
        })
    }

    /// One requested resource against this Pod: (fits, usage counted, capacity).
    fn fit(&self, requested: &Requested, adjust: &Adjust<'_>) -> (bool, u64, Option<u64>) {
        // A resource no Pod advertises has no id, and one this Pod lacks has no load.
        let Some(load) = requested.id.and_then(|id| self.load(id)) else {
            return (false, 0, None);
        };
        let used = adjust.effective(&requested.name, &load);
        let capacity = Some(load.capacity);
        (
            Shortfall::fits(requested.amount, used, capacity),
            used,
            capacity,
        )
    }

    /// explain's and status's read-only view by name: actual usage of `resource` by the
    /// active Runs (`u64::MAX` when an active Run's amount of it is unknown, see
    /// [`CountedRequest`]), resolved as [`PodView::load`] resolves it.
    pub fn used(&self, resource: &str) -> u64 {
        self.usage_of_name(resource, self.used_of(resource)).0
    }

    /// Usage of the scheduler's assumptions on the Pod (read-only view, see [`PodView::used`]).
    pub fn assumed(&self, resource: &str) -> u64 {
        self.usage_of_name(resource, 0).1
    }

    /// Held on the Pod for a Run earlier in the queue that the Pod is nominated for.
    pub fn nominated(&self, resource: &str) -> u64 {
        self.usage_of_name(resource, 0).2
    }

    /// The nomination that holds room on this Pod for a Run earlier in the queue.
    pub fn nomination(&self) -> Option<&'a Nomination> {
        self.nominated
    }

    /// `used + assumed + nominated` (read-only view, see [`PodView::used`]).
    pub fn effective(&self, resource: &str) -> u64 {
        let (used, assumed, nominated) = self.usage_of_name(resource, self.used_of(resource));
        used.saturating_add(assumed).saturating_add(nominated)
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
