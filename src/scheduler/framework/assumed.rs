//! The assumed cache: scheduler-local reservations made between Reserve and the moment the
//! watch shows the bound Run.
//!
//! Owns the tentative assignments that later cycles must see as capacity consumption and as
//! affinity targets. It must not check capacity (that is [`super::cache::SchedulerCache::reserve`],
//! which sees the index too), read a clock, or persist anything: a new leader starts empty.
//!
//! Entries are keyed by the immutable (namespace, Run UID) and hold the Run name, the chosen
//! Pod, the complete request, the Run's labels and required anti-affinity selectors, and its
//! runtime. Their state machine, per Run:
//!
//! ```text
//!                  Reserve (capacity verified after all assumptions)
//!     (none) ───────────────────────────────────────────────────────▶ Assumed
//!
//!     Assumed ── observed Pending ────────────────▶ Assumed   kept: the informer may lag a
//!                                                             successful Bind; dropping the
//!                                                             entry here would overcommit
//!     Assumed ── observed active on the same Pod ─▶ (none)    Confirmed: the actual usage
//!                                                             now owns the request
//!     Assumed ── observed active on another Pod,
//!                observed terminal, or deleted ───▶ (none)    Dropped: capacity released
//!     Assumed ── release (Bind failed) ───────────▶ (none)    Forgotten: capacity released
//! ```
//!
//! There is no timer: an entry never expires (expiry double-books Pods, as kube-scheduler
//! learned). A Run observed Scheduled/Running without a Pod name (`Observed::Unassigned`)
//! fits none of the rules above and keeps its entry, the conservative choice.

use std::collections::{BTreeMap, HashMap};

use super::selector::Selector;
use super::types::{Observed, RunKey};
use crate::api::Resources;

/// One reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assumption {
    pub run_name: String,
    pub runtime: String,
    pub pod: String,
    pub request: Resources,
    /// The Run's labels: later cycles match affinity terms against assumed targets.
    pub labels: BTreeMap<String, String>,
    /// The Run's required anti-affinity selectors (anti-affinity is symmetric).
    pub anti_affinity: Vec<Selector>,
}

/// What reconciliation did to an assumption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciled {
    /// Observed Pending: kept.
    Kept,
    /// Observed active on the assumed Pod: removed, the actual usage owns it now.
    Confirmed { pod: String },
    /// Observed elsewhere, terminal or deleted: removed, its capacity on `pod` is free.
    Dropped { pod: String, runtime: String },
}

/// The cache. See the module documentation for the state machine.
#[derive(Debug, Clone, Default)]
pub struct AssumedCache {
    /// namespace -> Run UID -> assumption. Per namespace because every snapshot reads one.
    by_namespace: HashMap<String, BTreeMap<String, Assumption>>,
}

impl AssumedCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &RunKey) -> Option<&Assumption> {
        self.get_by(&key.namespace, &key.uid)
    }

    /// [`Self::get`] without building a key: loops over a Runtime's Pending Runs ask this for
    /// every Run, and a [`RunKey`] costs two allocations.
    pub fn get_by(&self, namespace: &str, uid: &str) -> Option<&Assumption> {
        self.by_namespace.get(namespace)?.get(uid)
    }

    pub fn len(&self) -> usize {
        self.by_namespace.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// Inserts an assumption. Capacity must already be verified; an existing entry for the
    /// same Run is kept and `false` returned (a Run holds at most one reservation).
    pub fn assume(&mut self, key: &RunKey, assumption: Assumption) -> bool {
        let entries = self.by_namespace.entry(key.namespace.clone()).or_default();
        if entries.contains_key(&key.uid) {
            return false;
        }
        entries.insert(key.uid.clone(), assumption);
        true
    }

    /// Removes the Run's assumption (Bind failed, or reconciliation decided so).
    pub fn forget(&mut self, key: &RunKey) -> Option<Assumption> {
        let entries = self.by_namespace.get_mut(&key.namespace)?;
        let removed = entries.remove(&key.uid);
        if entries.is_empty() {
            self.by_namespace.remove(&key.namespace);
        }
        removed
    }

    /// Applies the reconciliation rules to the Run's assumption given how the Run was just
    /// observed. `None` when the Run holds no assumption.
    pub fn reconcile(&mut self, key: &RunKey, observed: Observed<'_>) -> Option<Reconciled> {
        let assumption = self.get(key)?;
        let outcome = match observed {
            // Not over and not placed elsewhere: the conservative choice is to keep it.
            Observed::Pending | Observed::Unassigned => Reconciled::Kept,
            Observed::Active(pod) if pod == assumption.pod => Reconciled::Confirmed {
                pod: assumption.pod.clone(),
            },
            Observed::Active(_) | Observed::Inactive | Observed::Absent => Reconciled::Dropped {
                pod: assumption.pod.clone(),
                runtime: assumption.runtime.clone(),
            },
        };
        if outcome != Reconciled::Kept {
            self.forget(key);
        }
        Some(outcome)
    }

    /// Assumptions in `namespace`, by Run UID.
    pub fn in_namespace(&self, namespace: &str) -> impl Iterator<Item = (&str, &Assumption)> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flat_map(|m| m.iter().map(|(uid, a)| (uid.as_str(), a)))
    }

    /// Keys of every assumption.
    pub fn keys(&self) -> Vec<RunKey> {
        self.by_namespace
            .iter()
            .flat_map(|(ns, m)| {
                m.keys()
                    .map(move |uid| RunKey::new(ns.clone(), uid.clone()))
            })
            .collect()
    }

    /// Total assumed usage on `pod`.
    pub fn usage_on(&self, namespace: &str, pod: &str) -> Resources {
        let mut usage = Resources::new();
        for (_, a) in self.in_namespace(namespace).filter(|(_, a)| a.pod == pod) {
            usage.add(&a.request);
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assumption(pod: &str) -> Assumption {
        Assumption {
            run_name: "a".into(),
            runtime: "python".into(),
            pod: pod.into(),
            request: Resources::from_iter([("runs", 1)]),
            labels: BTreeMap::new(),
            anti_affinity: Vec::new(),
        }
    }

    #[test]
    fn reconciliation_follows_the_documented_state_machine() {
        let key = RunKey::new("ns", "u1");
        let dropped = Some(Reconciled::Dropped {
            pod: "p1".into(),
            runtime: "python".into(),
        });
        let table = [
            (Observed::Pending, Some(Reconciled::Kept), true),
            (
                Observed::Active("p1"),
                Some(Reconciled::Confirmed { pod: "p1".into() }),
                false,
            ),
            (Observed::Active("p2"), dropped.clone(), false),
            (Observed::Unassigned, Some(Reconciled::Kept), true),
            (Observed::Inactive, dropped.clone(), false),
            (Observed::Absent, dropped, false),
        ];
        for (observed, want, kept) in table {
            let mut cache = AssumedCache::new();
            assert!(cache.assume(&key, assumption("p1")));
            assert_eq!(cache.reconcile(&key, observed), want, "{observed:?}");
            assert_eq!(cache.get(&key).is_some(), kept, "{observed:?}");
        }
    }

    #[test]
    fn a_run_holds_at_most_one_assumption() {
        let key = RunKey::new("ns", "u1");
        let mut cache = AssumedCache::new();
        assert!(cache.assume(&key, assumption("p1")));
        assert!(!cache.assume(&key, assumption("p2")));
        assert_eq!(cache.get(&key).unwrap().pod, "p1");
        assert_eq!(cache.usage_on("ns", "p1").get("runs"), 1);
        assert_eq!(cache.usage_on("ns", "p2").get("runs"), 0);
        assert!(cache.forget(&key).is_some());
        assert!(cache.is_empty());
        assert_eq!(cache.reconcile(&key, Observed::Absent), None);
    }
}
