//! Rollout of a Runtime's Pods: when what a new Runtime Pod would be changes (the template,
//! `daemonImage`, `port`, the kruntimes image the Runtime controller injects), the Pods made
//! before are replaced one at a time, as a Deployment with `maxUnavailable: 1` and no surge
//! does, but draining first: the Pod is marked [`ANNOTATION_SCALE_DOWN`] (the scheduler stops
//! placing Runs there and moves its unclaimed ones back to Pending), and it is deleted once
//! no active Run is left on it or [`DRAIN_GRACE`] has passed (the Runs still there are then
//! healed as on any deleted Pod); the replacement comes from the template. A Pod bound to a
//! PersistentWorkspace is replaced only once its workspace is released (its data lives
//! there), so it goes last.
//!
//! Pure: which Pod to drain, which drained Pod to delete, how many are up to date.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;

use crate::api::{ANNOTATION_SCALE_DOWN, pod_is_ready};

/// The annotation on a Runtime Pod naming the revision it was made from.
pub const ANNOTATION_REVISION: &str = "kruntimes.io/revision";

/// How long a drained Pod's Runs may go on before it is deleted under them.
pub const DRAIN_GRACE: Duration = Duration::from_secs(600);

/// The template's own labels and annotations (before the controller adds its own).
pub type TemplateMeta = (
    Option<BTreeMap<String, String>>,
    Option<BTreeMap<String, String>>,
);

/// The revision of the Pods a Runtime makes now: a digest of the template's labels and
/// annotations and of the Pod spec a new Pod gets (the name-independent part of it).
pub fn revision(template: &TemplateMeta, spec: &PodSpec) -> String {
    let bytes = serde_json::to_vec(&serde_json::json!({
        "labels": template.0,
        "annotations": template.1,
        "spec": spec,
    }))
    .expect("a Pod spec serializes");
    crate::digest::sha256(&bytes)["sha256:".len()..][..16].to_string()
}

/// What one reconcile does for the rollout.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The out-of-date Pod to start draining (marked with the instant, `since`).
    pub drain: Option<String>,
    /// Drained Pods to delete now.
    pub delete: Vec<String>,
    /// Live Pods made from the current revision.
    pub updated: usize,
    /// A drain is under way: look again soon, Runs ending do not wake the controller.
    pub draining: bool,
}

/// The rollout step for the `live` Pods (not being deleted) of a Runtime whose Pods should be
/// of `revision`, given the active Runs per Pod and the Pods a workspace is bound to. Only
/// while the Runtime has its wanted number of Pods (a scale is done first), at most one Pod
/// is drained at a time, and a new drain waits until every other Pod is Ready.
pub fn step(
    live: &[&Pod],
    revision: &str,
    active_runs: &BTreeMap<String, usize>,
    bound: &BTreeSet<String>,
    now: &Time,
) -> Step {
    let current =
        |p: &Pod| p.annotations().get(ANNOTATION_REVISION).map(String::as_str) == Some(revision);
    let mut step = Step {
        updated: live.iter().filter(|p| current(p)).count(),
        ..Step::default()
    };
    let draining: Vec<&Pod> = live
        .iter()
        .copied()
        .filter(|p| p.annotations().contains_key(ANNOTATION_SCALE_DOWN))
        .collect();
    for pod in &draining {
        let name = pod.name_any();
        let idle = active_runs.get(&name).copied().unwrap_or(0) == 0;
        let since = pod
            .annotations()
            .get(ANNOTATION_SCALE_DOWN)
            .and_then(|v| v.parse::<jiff::Timestamp>().ok());
        let overdue = since.is_none_or(|since| {
            now.0.duration_since(since) >= jiff::SignedDuration::try_from(DRAIN_GRACE).unwrap()
        });
        if (idle || overdue) && !bound.contains(&name) {
            step.delete.push(name);
        } else {
            step.draining = true;
        }
    }
    if !draining.is_empty() {
        return step;
    }
    // maxUnavailable 1: a Pod not Ready counts as the one unavailable.
    if live.iter().any(|p| !pod_is_ready(p)) {
        return step;
    }
    let mut outdated: Vec<&Pod> = live
        .iter()
        .copied()
        .filter(|p| !current(p) && !bound.contains(&p.name_any()))
        .collect();
    outdated.sort_by_key(|p| {
        let name = p.name_any();
        (active_runs.get(&name).copied().unwrap_or(0), name)
    });
    if let Some(pod) = outdated.first() {
        step.drain = Some(pod.name_any());
        step.draining = true;
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, revision: &str, ready: bool, draining_since: Option<&str>) -> Pod {
        let mut annotations =
            BTreeMap::from([(ANNOTATION_REVISION.to_string(), revision.to_string())]);
        if let Some(since) = draining_since {
            annotations.insert(ANNOTATION_SCALE_DOWN.to_string(), since.to_string());
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "annotations": annotations},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn now() -> Time {
        Time("2026-12-05T10:00:00Z".parse().unwrap())
    }

    #[test]
    fn the_idlest_outdated_pod_is_drained_first_and_one_at_a_time() {
        let pods = [
            pod("a", "old", true, None),
            pod("b", "old", true, None),
            pod("c", "new", true, None),
        ];
        let live: Vec<&Pod> = pods.iter().collect();
        let active = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)]);
        let step = step(&live, "new", &active, &BTreeSet::new(), &now());
        assert_eq!(
            step,
            Step {
                drain: Some("b".into()),
                delete: vec![],
                updated: 1,
                draining: true
            }
        );
    }

    #[test]
    fn a_drained_pod_goes_when_its_runs_have_ended_or_the_grace_has_passed() {
        let since = "2026-12-05T09:59:00Z";
        let pods = [
            pod("a", "old", true, Some(since)),
            pod("b", "old", true, None),
        ];
        let live: Vec<&Pod> = pods.iter().collect();
        let busy = BTreeMap::from([("a".to_string(), 1)]);
        let waiting = step(&live, "new", &busy, &BTreeSet::new(), &now());
        assert_eq!(
            (waiting.drain, waiting.delete, waiting.draining),
            (None, vec![], true)
        );
        let idle = step(&live, "new", &BTreeMap::new(), &BTreeSet::new(), &now());
        assert_eq!(idle.delete, ["a"]);
        let late = Time("2026-12-05T10:09:00Z".parse().unwrap());
        let overdue = step(&live, "new", &busy, &BTreeSet::new(), &late);
        assert_eq!(overdue.delete, ["a"]);
    }

    #[test]
    fn nothing_is_drained_while_a_pod_is_not_ready_or_bound_to_a_workspace() {
        let pods = [pod("a", "old", true, None), pod("b", "new", false, None)];
        let live: Vec<&Pod> = pods.iter().collect();
        assert_eq!(
            step(&live, "new", &BTreeMap::new(), &BTreeSet::new(), &now()).drain,
            None
        );
        let pods = [pod("a", "old", true, None), pod("b", "new", true, None)];
        let live: Vec<&Pod> = pods.iter().collect();
        let bound = BTreeSet::from(["a".to_string()]);
        assert_eq!(
            step(&live, "new", &BTreeMap::new(), &bound, &now()).drain,
            None
        );
        assert_eq!(
            step(&live, "new", &BTreeMap::new(), &BTreeSet::new(), &now()).drain,
            Some("a".into())
        );
    }

    #[test]
    fn the_revision_follows_the_spec() {
        let a = PodSpec::default();
        let b = PodSpec {
            hostname: Some("x".into()),
            ..Default::default()
        };
        let none: TemplateMeta = (None, None);
        let labelled: TemplateMeta = (
            Some([("tier".to_string(), "gold".to_string())].into()),
            None,
        );
        assert_eq!(revision(&none, &a).len(), 16);
        assert_eq!(revision(&none, &a), revision(&none, &PodSpec::default()));
        assert_ne!(revision(&none, &a), revision(&none, &b));
        assert_ne!(revision(&none, &a), revision(&labelled, &a));
    }
}
