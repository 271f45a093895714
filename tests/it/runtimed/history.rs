//! The recorded history of every Run event of the namespace, in the API server's order, and
//! what the tests read off it: each Run's latest version and phase, who was Running after each
//! event, and that nothing wrote to a Run between its Scheduled version and its claim.

use std::collections::BTreeMap;
use std::sync::Arc;

use kruntimes::api::status::CONDITION_ADMITTED;
use kruntimes::api::{Run, RunPhase};
use kube::ResourceExt as _;

use super::support::world::{RunEvent, replay};

pub(crate) struct State(pub(crate) Vec<RunEvent>);

impl State {
    /// Latest version of every Run (deleted ones dropped).
    pub(crate) fn latest(&self) -> BTreeMap<String, Arc<Run>> {
        replay(&self.0, |_| {})
    }

    pub(crate) fn phase(&self, name: &str) -> Option<RunPhase> {
        self.latest().get(name).map(|r| r.phase())
    }

    pub(crate) fn phases(&self) -> BTreeMap<String, RunPhase> {
        self.latest()
            .into_iter()
            .map(|(k, v)| (k, v.phase()))
            .collect()
    }

    pub(crate) fn count(&self, phase: RunPhase) -> usize {
        self.latest()
            .values()
            .filter(|r| r.phase() == phase)
            .count()
    }

    pub(crate) fn all_terminal(&self, names: &[&str]) -> bool {
        names
            .iter()
            .all(|n| self.phase(n).is_some_and(RunPhase::is_terminal))
    }

    /// The Running Runs after every recorded event, in order.
    pub(crate) fn running_after_each_event(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        replay(&self.0, |present| out.push(running(present)));
        out
    }

    /// The versions of one Run, in order.
    pub(crate) fn history(&self, name: &str) -> Vec<Arc<Run>> {
        self.0
            .iter()
            .filter(|e| !e.deleted && e.run.name_any() == name)
            .map(|e| e.run.clone())
            .collect()
    }
}

/// The names of the Running Runs among `present`.
pub(crate) fn running(present: &BTreeMap<String, Arc<Run>>) -> Vec<String> {
    let running = present
        .iter()
        .filter(|(_, r)| r.phase() == RunPhase::Running);
    running.map(|(name, _)| name.clone()).collect()
}

pub(crate) fn reason(run: &Run) -> Option<&str> {
    run.status.as_ref()?.reason.as_deref()
}

pub(crate) fn message(run: &Run) -> &str {
    run.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .unwrap_or("")
}

pub(crate) fn admitted(run: &Run) -> bool {
    run.status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == CONDITION_ADMITTED))
}

/// Asserts that after each Scheduled version of `name` the next version is the claim
/// (Running, Admitted), i.e. nothing wrote to the Run while it waited.
pub(crate) fn assert_untouched_until_claimed(state: &State, name: &str, scheduled_rv: &str) {
    let history = state.history(name);
    let at = history
        .iter()
        .position(|r| r.resource_version().as_deref() == Some(scheduled_rv))
        .unwrap_or_else(|| {
            panic!("Run {name}: the Scheduled write {scheduled_rv} was not observed")
        });
    let next = history
        .get(at + 1)
        .unwrap_or_else(|| panic!("Run {name} never changed after being Scheduled"));
    assert_eq!(
        next.phase(),
        RunPhase::Running,
        "Run {name}: the first change after Scheduled must be the claim, got {:?}",
        next.status
    );
    assert!(
        admitted(next),
        "Run {name}: the claim carries the Admitted condition"
    );
}
