//! The plugin contract: one trait per extension point (Filter, Score), the per-Run state
//! PreFilter prepares once, and score normalization.
//!
//! Everything a plugin may depend on is here or in [`super::types`]. Plugins must not patch
//! Kubernetes objects, mutate the index or the assumed cache, or choose a Pod: they answer for
//! one Pod at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use thiserror::Error;

use super::facts::RunFacts;
use super::selector::Selector;
use super::snapshot::{PodSet, PodView, Snapshot};
use super::types::{MAX_SCORE, MIN_SCORE, Rejection, Requested, ResourceId, RunKey};
use crate::api::Resources;

/// A Score plugin failed: the cycle is aborted without an assumption or a status write.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("score plugin {plugin} failed: {message}")]
pub struct ScoreError {
    pub plugin: &'static str,
    pub message: String,
}

/// A required affinity or anti-affinity term, compiled, with its targets in this snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredTerm {
    pub selector: Selector,
    /// Pods hosting an actual or assumed Run (not the evaluated one) that matches.
    pub targets: PodSet,
    /// Whether the evaluated Run's own labels match (the Inter-Run Affinity seed rule).
    pub matches_self: bool,
}

/// A preferred term, compiled, with its targets in this snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredTerm {
    /// The term's weight: positive for `runAffinity`, negative for `runAntiAffinity`.
    pub weight: i64,
    pub selector: Selector,
    pub targets: PodSet,
}

/// Everything about the evaluated Run that PreFilter validates and computes once, so that
/// Filter and Score do O(1)-ish work per Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCycleState {
    /// The Run's facts, as queued (its request is valid: PreFilter refuses it otherwise).
    pub facts: Arc<RunFacts>,
    /// The request as a list with resource ids, for the per-Pod loops (ids are this
    /// snapshot's: a resource no Pod advertised when the Run was queued may have one now).
    pub(in crate::scheduler::framework) request_list: Vec<Requested>,
    pub required_affinity: Vec<RequiredTerm>,
    pub required_anti_affinity: Vec<RequiredTerm>,
    /// Preferred affinity and anti-affinity terms, in that order.
    pub preferred: Vec<PreferredTerm>,
    /// Pods hosting a Run whose required anti-affinity matches this Run's labels.
    pub repelled_by: PodSet,
    /// The PersistentWorkspace the Run uses, as this snapshot binds it.
    pub workspace: Option<RunWorkspace>,
    /// Its resolved priority (0 while its PriorityClass is missing; the cycle then waits).
    pub priority: i32,
    /// Its class lets it preempt lower-priority Runs (`preemptionPolicy` is not `Never`).
    pub preempts: bool,
}

/// A Run's PersistentWorkspace as PreFilter found it (one of another Runtime, Lost or
/// Released never gets here: PreFilter refuses the Run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunWorkspace {
    pub name: String,
    pub binding: WorkspaceBinding,
}

impl RunWorkspace {
    /// Whether the Run may run on `pod` for its workspace: anywhere while unbound, only on
    /// the bound Pod, nowhere while the workspace does not exist. WorkspacePlacement's rule,
    /// also read by the nominator for Pods rejected before that filter ran.
    pub fn admits(&self, pod: &str) -> bool {
        match &self.binding {
            WorkspaceBinding::Unbound => true,
            WorkspaceBinding::Bound { pod: bound } => bound == pod,
            WorkspaceBinding::Missing => false,
        }
    }
}

/// Where a Run's workspace holds its data, in the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceBinding {
    /// No PersistentWorkspace of that name (yet): the Run waits.
    Missing,
    /// Not bound: any Pod will do, and Reserve binds it there.
    Unbound,
    /// Bound, by its status, an active Run or an assumption, to this Pod.
    Bound { pod: String },
}

impl RunCycleState {
    pub fn key(&self) -> &RunKey {
        &self.facts.key
    }

    /// The complete request (defaults applied, zero amounts dropped).
    pub fn request(&self) -> &Resources {
        &self.facts.counted.amounts
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.facts.labels
    }

    /// The request in resource-name order, with resource ids.
    pub fn request_list(&self) -> &[Requested] {
        &self.request_list
    }

    /// The requested amount of resource `id` (0 when not requested).
    pub fn requested(&self, id: ResourceId) -> u64 {
        self.request_list
            .iter()
            .find(|r| r.id == Some(id))
            .map_or(0, |r| r.amount)
    }
}

/// A kind of change that may make a Run some Filter rejected fit now (kube-scheduler's
/// `ClusterEvent`, as plugins register them through `EnqueueExtensions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterEvent {
    /// Actual or assumed usage was released on a Pod, or room held there for a nominated Run
    /// was given back.
    CapacityReleased,
    /// A Runtime Pod appeared, became ready or unavailable, or changed capacity or heartbeat.
    RuntimePodChanged,
    /// The Runtime appeared or went away.
    RuntimeChanged,
    /// A Run joined or left the active set of a Pod, or changed its labels there: the
    /// targets of Run affinity changed.
    TargetsChanged,
    /// A PersistentWorkspace appeared, went away, or changed phase or binding.
    WorkspaceChanged,
}

impl ClusterEvent {
    pub const ALL: [ClusterEvent; 5] = [
        ClusterEvent::CapacityReleased,
        ClusterEvent::RuntimePodChanged,
        ClusterEvent::RuntimeChanged,
        ClusterEvent::TargetsChanged,
        ClusterEvent::WorkspaceChanged,
    ];
}

/// Which unschedulable Runs of the Runtime an event moves back to the active queue (kube-
/// scheduler's `QueueingHint`, answered per event rather than per Run so a release costs a
/// walk of the queue, not a callback per Run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueingHint {
    /// Those whose request fits the room the event freed on its Pod, walking in queue order
    /// and counting each moved Run's request as taken.
    QueueIfRoom,
    /// Those with required Run affinity or anti-affinity terms.
    QueueRequiredTerms,
    /// Those that name the PersistentWorkspace that changed (of any Runtime).
    QueueWorkspaceUsers,
    /// All of them.
    Queue,
}

/// A hard predicate on one Pod.
pub trait FilterPlugin: Send + Sync {
    /// The registry key; also the `plugin` metric label.
    fn name(&self) -> &'static str;

    /// Which Runs this plugin's rejections let go back to the active queue on `event`;
    /// `None` when the event cannot turn a rejection of this plugin into a fit. Declared next
    /// to the Filter it answers for.
    fn queueing_hint(&self, event: ClusterEvent) -> Option<QueueingHint>;

    /// `Ok` when the Pod is feasible for the Run, else one bounded rejection.
    fn filter(
        &self,
        snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<(), Rejection>;
}

/// A preference among feasible Pods.
pub trait ScorePlugin: Send + Sync {
    /// The registry key.
    fn name(&self) -> &'static str;

    /// The raw score of one feasible Pod. Unless [`ScorePlugin::normalize`] is overridden it
    /// must already lie in `MIN_SCORE..=MAX_SCORE`; larger is better.
    fn score(
        &self,
        snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<i64, ScoreError>;

    /// Maps the raw scores of every feasible Pod (in Pod-name order) into
    /// `MIN_SCORE..=MAX_SCORE` in place, once all are known. The default keeps them.
    fn normalize(&self, _scores: &mut [i64]) {}
}

/// Linear min-max normalization onto `MIN_SCORE..=MAX_SCORE` (rounded down): the highest raw
/// score becomes `MAX_SCORE`, the lowest `MIN_SCORE`. When every score is equal they all become
/// `when_equal`, which cannot change the outcome since every Pod gets the same value.
///
/// Rounding down keeps the order: a raw score strictly below the maximum never reaches
/// `MAX_SCORE`, so the best Pod of a plugin stays strictly best.
pub fn normalize_min_max(scores: &mut [i64], when_equal: i64) {
    let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    if min == max {
        scores.fill(when_equal);
        return;
    }
    let span = i128::from(max) - i128::from(min);
    for s in scores.iter_mut() {
        let scaled = (i128::from(*s) - i128::from(min)) * i128::from(MAX_SCORE - MIN_SCORE) / span;
        *s = MIN_SCORE + i64::try_from(scaled).expect("scaled into 0..=100");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn min_max_normalization_maps_the_range_onto_0_to_100() {
        let table: &[(&[i64], i64, &[i64])] = &[
            (&[0, 5, 10], 0, &[0, 50, 100]),
            (&[-10, 0, 10], 0, &[0, 50, 100]),
            (&[7, 7, 7], 0, &[0, 0, 0]),
            (&[7, 7], 100, &[100, 100]),
            (&[0, 2, 3], 0, &[0, 66, 100]),
            (&[i64::MIN, 0, i64::MAX], 0, &[0, 50, 100]),
            (&[], 0, &[]),
        ];
        for (input, equal, want) in table {
            let mut s = input.to_vec();
            normalize_min_max(&mut s, *equal);
            assert_eq!(&s, want, "{input:?}");
        }
    }

    proptest! {
        #[test]
        fn normalized_scores_stay_within_bounds_and_keep_the_order(
            raw in proptest::collection::vec(any::<i64>(), 0..20),
            equal in MIN_SCORE..=MAX_SCORE,
        ) {
            let mut s = raw.clone();
            normalize_min_max(&mut s, equal);
            for (i, a) in s.iter().enumerate() {
                prop_assert!((MIN_SCORE..=MAX_SCORE).contains(a));
                for (j, b) in s.iter().enumerate() {
                    if raw[i] < raw[j] {
                        prop_assert!(a <= b);
                    }
                }
            }
            if let Some(max) = raw.iter().max() && raw.iter().any(|r| r != max) {
                for (i, r) in raw.iter().enumerate() {
                    prop_assert_eq!(s[i] == MAX_SCORE, r == max);
                }
            }
        }
    }
}
