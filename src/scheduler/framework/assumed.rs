//! The assumed cache: scheduler-local reservations made between Reserve and the moment the
//! watch shows the bound Run.
//!
//! Owns the tentative assignments that later cycles must see as capacity consumption and as
//! affinity targets. It must not check capacity (that is [`super::cache::SchedulerCache::reserve`],
//! which sees the index too), read a clock, or persist anything: a new leader starts empty.
//!
//! Entries are keyed by the immutable (namespace, Run UID) and hold the chosen Pod and the
//! Run's facts (the record the queue held: name, Runtime, complete request, labels, required
//! anti-affinity selectors, workspace). Their state machine, per Run:
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
//!
//! Beside the entries, the cache keeps each Pod's [`AssumedOnPod`] (summed request and Run
//! UIDs) up to date with every change: a snapshot is built for every cycle, and during a drain
//! hundreds of Binds are in flight, so walking every assumption per cycle cost a fifth of the
//! scheduler's CPU.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::facts::RunFacts;
use super::types::{Held, Observed, RunKey};
use crate::api::Resources;

/// One reservation: the Run's facts on a Pod. Later cycles count its request there, match
/// affinity terms against its labels, are barred by its required anti-affinity (which is
/// symmetric), and find its PersistentWorkspace bound to the Pod until the watch shows the Run
/// there (a burst on an unbound workspace lands on one Pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assumption {
    /// The Run's facts (its request is valid: only such a Run is reserved).
    pub facts: Arc<RunFacts>,
    pub pod: String,
    /// What it holds on the Pod, by resource id: set by Reserve from the request as the
    /// Filter read it (empty until then).
    pub held: Held,
}

impl Assumption {
    /// What it holds on the Pod, by name: the Run's complete request.
    pub fn request(&self) -> &Resources {
        &self.facts.counted.amounts
    }
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

/// The assumptions on one Pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssumedOnPod {
    /// What they hold, summed by resource id.
    pub usage: Held,
    /// Their Run UIDs.
    pub runs: BTreeSet<String>,
}

/// The assumptions of one namespace. Per namespace because every snapshot reads one.
#[derive(Debug, Clone, Default)]
pub struct NamespaceAssumptions {
    /// Run UID -> assumption.
    runs: BTreeMap<String, Assumption>,
    /// Pod name -> the assumptions on it, never empty.
    pods: HashMap<String, AssumedOnPod>,
    /// UIDs of the assumptions with required anti-affinity terms: every cycle asks which
    /// Pods they bar (anti-affinity is symmetric), and few Runs have any.
    anti_affinity: BTreeSet<String>,
    /// Workspace name -> Pod name -> assumptions there that use it.
    workspaces: HashMap<String, BTreeMap<String, u32>>,
}

impl NamespaceAssumptions {
    /// The assumption of the Run `uid`, with the UID as stored.
    pub fn get(&self, uid: &str) -> Option<(&str, &Assumption)> {
        self.runs.get_key_value(uid).map(|(u, a)| (u.as_str(), a))
    }

    /// The assumptions on `pod`.
    pub fn on_pod(&self, pod: &str) -> Option<&AssumedOnPod> {
        self.pods.get(pod)
    }

    /// Pods holding assumptions, by name.
    pub fn pods(&self) -> impl Iterator<Item = (&str, &AssumedOnPod)> {
        self.pods.iter().map(|(pod, on)| (pod.as_str(), on))
    }

    /// The Pods (by name, in order) the assumptions using workspace `name` are on.
    pub fn workspace_pods(&self, name: &str) -> impl Iterator<Item = &str> {
        self.workspaces
            .get(name)
            .into_iter()
            .flat_map(|pods| pods.keys().map(String::as_str))
    }

    /// The assumptions with required anti-affinity terms, by Run UID.
    pub fn with_anti_affinity(&self) -> impl Iterator<Item = (&str, &Assumption)> {
        self.anti_affinity.iter().filter_map(|uid| self.get(uid))
    }

    /// The assumptions on one Pod, by Run UID.
    pub fn runs_on<'a>(
        &'a self,
        on_pod: &'a AssumedOnPod,
    ) -> impl Iterator<Item = (&'a str, &'a Assumption)> + 'a {
        on_pod.runs.iter().filter_map(|uid| self.get(uid))
    }
}

/// The cache. See the module documentation for the state machine.
#[derive(Debug, Clone, Default)]
pub struct AssumedCache {
    by_namespace: HashMap<String, NamespaceAssumptions>,
}

impl AssumedCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &RunKey) -> Option<&Assumption> {
        self.by_namespace.get(&key.namespace)?.runs.get(&key.uid)
    }

    /// The assumptions of `namespace`; `None` when it has none.
    pub fn namespace(&self, namespace: &str) -> Option<&NamespaceAssumptions> {
        self.by_namespace.get(namespace)
    }

    pub fn len(&self) -> usize {
        self.by_namespace.values().map(|ns| ns.runs.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// Inserts an assumption. Capacity must already be verified; an existing entry for the
    /// same Run is kept and `false` returned (a Run holds at most one reservation).
    pub fn assume(&mut self, key: &RunKey, assumption: Assumption) -> bool {
        let entries = self.by_namespace.entry(key.namespace.clone()).or_default();
        if entries.runs.contains_key(&key.uid) {
            return false;
        }
        let on_pod = entries.pods.entry(assumption.pod.clone()).or_default();
        on_pod.usage.add(&assumption.held);
        on_pod.runs.insert(key.uid.clone());
        if !assumption.facts.anti_affinity.is_empty() {
            entries.anti_affinity.insert(key.uid.clone());
        }
        if let Some(workspace) = &assumption.facts.workspace {
            *entries
                .workspaces
                .entry(workspace.clone())
                .or_default()
                .entry(assumption.pod.clone())
                .or_insert(0) += 1;
        }
        entries.runs.insert(key.uid.clone(), assumption);
        true
    }

    /// Removes the Run's assumption (Bind failed, or reconciliation decided so).
    pub fn forget(&mut self, key: &RunKey) -> Option<Assumption> {
        let entries = self.by_namespace.get_mut(&key.namespace)?;
        let removed = entries.runs.remove(&key.uid)?;
        entries.anti_affinity.remove(&key.uid);
        if let Some(workspace) = &removed.facts.workspace
            && let Some(pods) = entries.workspaces.get_mut(workspace)
        {
            if let Some(n) = pods.get_mut(&removed.pod) {
                *n -= 1;
                if *n == 0 {
                    pods.remove(&removed.pod);
                }
            }
            if pods.is_empty() {
                entries.workspaces.remove(workspace);
            }
        }
        if let Some(on_pod) = entries.pods.get_mut(&removed.pod) {
            on_pod.runs.remove(&key.uid);
            if on_pod.runs.is_empty() {
                entries.pods.remove(&removed.pod);
            } else {
                // Summed again rather than subtracted: sums saturate, differences would not
                // undo that.
                let mut usage = Held::default();
                for uid in &on_pod.runs {
                    if let Some(a) = entries.runs.get(uid) {
                        usage.add(&a.held);
                    }
                }
                on_pod.usage = usage;
            }
        }
        if entries.runs.is_empty() {
            self.by_namespace.remove(&key.namespace);
        }
        Some(removed)
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
                runtime: assumption.facts.scope.runtime.clone(),
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
            .flat_map(|m| m.runs.iter().map(|(uid, a)| (uid.as_str(), a)))
    }

    /// Keys of every assumption.
    pub fn keys(&self) -> Vec<RunKey> {
        self.by_namespace
            .iter()
            .flat_map(|(ns, m)| {
                m.runs
                    .keys()
                    .map(move |uid| RunKey::new(ns.clone(), uid.clone()))
            })
            .collect()
    }

    /// Total assumed usage on `pod`, by resource id.
    pub fn usage_on(&self, namespace: &str, pod: &str) -> Held {
        self.namespace(namespace)
            .and_then(|ns| ns.on_pod(pod))
            .map(|on| on.usage.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An assumption of one `runs` (id 0) on `pod`, as Reserve records it.
    fn assumption(pod: &str) -> Assumption {
        let mut a = crate::testing::run("a").runtime("python").assumption(pod);
        a.held = Held::from_ids([(0, 1)]);
        a
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
        assert_eq!(cache.usage_on("ns", "p1").get(0), 1);
        assert_eq!(cache.usage_on("ns", "p2").get(0), 0);
        assert!(cache.forget(&key).is_some());
        assert!(cache.is_empty());
        assert_eq!(cache.reconcile(&key, Observed::Absent), None);
    }

    type Sums = (HashMap<String, AssumedOnPod>, BTreeSet<String>);

    /// What the running sums must equal: per Pod the assumptions naming it, summed, and the
    /// assumptions with anti-affinity terms.
    fn recomputed(cache: &AssumedCache, namespace: &str) -> Sums {
        let mut pods: HashMap<String, AssumedOnPod> = HashMap::new();
        let mut anti = BTreeSet::new();
        for (uid, a) in cache.in_namespace(namespace) {
            let on = pods.entry(a.pod.clone()).or_default();
            on.usage.add(&a.held);
            on.runs.insert(uid.to_string());
            if !a.facts.anti_affinity.is_empty() {
                anti.insert(uid.to_string());
            }
        }
        (pods, anti)
    }

    fn sums(cache: &AssumedCache, namespace: &str) -> Sums {
        let Some(ns) = cache.namespace(namespace) else {
            return Sums::default();
        };
        let pods = ns.pods().map(|(p, on)| (p.to_string(), on.clone()));
        let anti = ns.with_anti_affinity().map(|(uid, _)| uid.to_string());
        (pods.collect(), anti.collect())
    }

    proptest! {
        #[test]
        fn the_running_sums_equal_the_assumptions(
            ops in prop::collection::vec((0..3u8, 0..8usize, 0..3usize, 1..4u64), 1..60),
        ) {
            let mut cache = AssumedCache::new();
            for (op, run, pod, amount) in ops {
                let key = RunKey::new("ns", format!("u{run}"));
                let pod = format!("p{pod}");
                match op {
                    0 => {
                        let gpus = (amount * 2).to_string();
                        let a = crate::testing::run("a")
                            .request_strs(&[("runs", &amount.to_string()), ("gpu", &gpus)]);
                        let a = if amount == 1 { a.anti(&[("app", "x")]) } else { a };
                        let mut a = a.assumption(&pod);
                        a.held = Held::from_ids([(0, amount), (1, amount * 2)]);
                        cache.assume(&key, a);
                    }
                    1 => {
                        cache.forget(&key);
                    }
                    _ => {
                        cache.reconcile(&key, Observed::Active(&pod));
                    }
                }
                prop_assert_eq!(sums(&cache, "ns"), recomputed(&cache, "ns"));
            }
        }
    }
}
