//! The framework's leaf vocabulary: keys, score bounds, outcome codes, rejections, how a Run
//! and a heartbeat were observed.
//!
//! Everything here is plain data that every other framework module may use; this module
//! imports nothing from the framework, so the layering stays one-way
//! (`types` ← `index`, `assumed` ← `snapshot` ← `plugin` ← `cycle` ← `cache`).

use std::borrow::Cow;
use std::sync::Arc;

use jiff::Timestamp;
use kube::ResourceExt;

use crate::api::Run;
use crate::api::resources::Shortfall;

/// The best score a plugin can give a Pod (after normalization).
pub const MAX_SCORE: i64 = 100;
/// The worst score a plugin can give a Pod (after normalization).
pub const MIN_SCORE: i64 = 0;

/// Outcome class of a scheduling cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// A Pod was chosen.
    Success,
    /// Every Pod was rejected by a Filter; the Run stays Pending.
    Unschedulable,
    /// PreFilter refused the Run's inputs; a permanent configuration error.
    Invalid,
    /// A plugin failed; no assumption or status write happens and the controller retries.
    Error,
}

/// A resource name shared between the Run's state and the rejections that mention it.
pub type ResourceName = Arc<str>;

/// Why a Filter plugin rejected one Pod.
///
/// `plugin` and `reason` are static constants of the plugin: a bounded set, used as metric
/// labels. `shortfall` is set only for `Insufficient <resource>` rejections and carries the
/// numbers that decided it (requested, used, capacity), so `explain` shows the plugin's facts
/// instead of recomputing them; the resource appears in the Pending message (resource names
/// are what the user asked for) but never in a metric label.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rejection {
    pub plugin: &'static str,
    pub reason: &'static str,
    pub shortfall: Option<Shortfall>,
}

impl Rejection {
    pub fn new(plugin: &'static str, reason: &'static str) -> Self {
        Rejection {
            plugin,
            reason,
            shortfall: None,
        }
    }

    /// A rejection about one resource: its message is `Insufficient <resource>`.
    pub fn insufficient(plugin: &'static str, reason: &'static str, shortfall: Shortfall) -> Self {
        Rejection {
            plugin,
            reason,
            shortfall: Some(shortfall),
        }
    }

    /// The resource of an `Insufficient <resource>` rejection.
    pub fn resource(&self) -> Option<&ResourceName> {
        self.shortfall.as_ref().map(|s| &s.resource)
    }

    /// The text shown in the Pending message.
    pub fn message(&self) -> Cow<'_, str> {
        rejection_text(self.reason, self.resource().map(|r| &**r))
    }
}

/// The Pending-message text of a rejection: `Insufficient <resource>` for a resource, else the
/// bounded reason itself.
pub fn rejection_text<'a>(reason: &'a str, resource: Option<&str>) -> Cow<'a, str> {
    match resource {
        Some(resource) => Cow::Owned(format!("Insufficient {resource}")),
        None => Cow::Borrowed(reason),
    }
}

/// Dense id of a resource name that some Runtime Pod advertises. Ids are never reused: the
/// set is bounded by the capacities Runtimes declare, not by what Runs request.
pub type ResourceId = u32;

/// One (namespace, runtime): the unit a scheduling cycle reads, and the Runs that name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeRef {
    pub namespace: String,
    pub runtime: String,
}

impl ScopeRef {
    pub fn new(namespace: &str, runtime: &str) -> Self {
        ScopeRef {
            namespace: namespace.to_string(),
            runtime: runtime.to_string(),
        }
    }
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

pub use crate::api::QueueOrder;

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

impl Heartbeat {
    /// The one freshness rule: held by the Pod and `now < renewTime + leaseDurationSeconds`.
    /// The scheduler's filter and `explain` both ask this.
    pub fn is_fresh_at(self, now: Timestamp) -> bool {
        matches!(self, Heartbeat::Expires(at) if now < at)
    }
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

/// One requested resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    pub name: ResourceName,
    /// `None` when no Runtime Pod advertises the resource: it fits nowhere.
    pub id: Option<ResourceId>,
    pub amount: u64,
}

/// Amounts by resource id, in id order: what an assumption or a nomination holds on a Pod, in
/// the ids a Pod's usage is kept by, so the Filter reads the three by id alike. Resolved when
/// the hold is made: every resource of a Run that fits a Pod is one the Pod advertises, so it
/// has an id; a name without one (no Pod advertises it) holds nothing, for nothing fits there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held(Vec<(ResourceId, u64)>);

impl Held {
    /// The amounts of `request` that have an id.
    pub fn of(request: &[Requested]) -> Held {
        Held::from_ids(request.iter().filter_map(|r| Some((r.id?, r.amount))))
    }

    /// Amounts by id, in any order; one id given twice holds the sum.
    pub fn from_ids(amounts: impl IntoIterator<Item = (ResourceId, u64)>) -> Held {
        let mut held = Held::default();
        for (id, amount) in amounts {
            held.add_one(id, amount);
        }
        held
    }

    /// What it holds of `id`.
    pub fn get(&self, id: ResourceId) -> u64 {
        self.0
            .binary_search_by_key(&id, |(i, _)| *i)
            .map_or(0, |at| self.0[at].1)
    }

    /// Adds `other`'s amounts (saturating).
    pub fn add(&mut self, other: &Held) {
        for &(id, amount) in &other.0 {
            self.add_one(id, amount);
        }
    }

    fn add_one(&mut self, id: ResourceId, amount: u64) {
        match self.0.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(at) => self.0[at].1 = self.0[at].1.saturating_add(amount),
            Err(at) => self.0.insert(at, (id, amount)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_keeps_one_amount_per_id_in_id_order_and_nothing_without_an_id() {
        let requested = |name: &str, id: Option<ResourceId>, amount| Requested {
            name: ResourceName::from(name),
            id,
            amount,
        };
        let held = Held::of(&[
            requested("runs", Some(3), 1),
            requested("example.com/gpu", Some(1), 2),
            requested("nowhere", None, 5),
        ]);
        assert_eq!(held, Held(vec![(1, 2), (3, 1)]));
        assert_eq!((held.get(1), held.get(3), held.get(2)), (2, 1, 0));
        let mut sum = held.clone();
        sum.add(&Held::from_ids([(3, u64::MAX), (0, 4)]));
        assert_eq!(sum, Held(vec![(0, 4), (1, 2), (3, u64::MAX)]));
    }

    #[test]
    fn an_insufficient_rejection_names_the_resource_only_in_its_message() {
        let shortfall = Shortfall::check("example.com/gpu", 1, 1, Some(1)).unwrap();
        let r = Rejection::insufficient("P", "Insufficient resource", shortfall);
        assert_eq!(r.message(), "Insufficient example.com/gpu");
        assert_eq!(r.reason, "Insufficient resource");
        assert_eq!(
            Rejection::new("P", "runtimed heartbeat stale").message(),
            "runtimed heartbeat stale"
        );
    }
}
