//! Rollout of a Runtime's Pods: when what a new Runtime Pod would be changes (the template,
//! `daemonImage`, `port`, the kruntimes image the Runtime controller injects), the Pods made
//! before are replaced at most `maxUnavailable` at a time (default 1, the Runtime's annotation
//! [`ANNOTATION_MAX_UNAVAILABLE`]), as a Deployment with no surge does, but draining first: the
//! Pod is marked [`ANNOTATION_SCALE_DOWN`] (the scheduler stops placing Runs there and moves
//! its unclaimed ones back to Pending), and it is deleted once no active Run is left on it or
//! the drain grace has passed ([`DRAIN_GRACE`], or the annotation [`ANNOTATION_DRAIN_GRACE`];
//! the Runs still there are then healed as on any deleted Pod); the replacement comes from
//! the template. A Pod bound to a
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

/// How long a drained Pod's Runs may go on before it is deleted under them, by default.
pub const DRAIN_GRACE: Duration = Duration::from_secs(600);
/// Runtime annotation: how many of its Pods a rollout may take down at once (a whole number,
/// at least 1; default 1).
pub const ANNOTATION_MAX_UNAVAILABLE: &str = "kruntimes.io/max-unavailable";
/// Runtime annotation: the drain grace of its rollouts (`90s`, `30m`; default 10m).
pub const ANNOTATION_DRAIN_GRACE: &str = "kruntimes.io/drain-grace";

/// How a Runtime's Pods are rolled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    pub max_unavailable: usize,
    pub drain_grace: Duration,
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy {
            max_unavailable: 1,
            drain_grace: DRAIN_GRACE,
        }
    }
}

impl Strategy {
    /// The strategy `annotations` ask for, and what is wrong with them (the default stands
    /// for a value that cannot be read).
    pub fn of(annotations: &BTreeMap<String, String>) -> (Strategy, Vec<String>) {
        let mut strategy = Strategy::default();
        let mut wrong = Vec::new();
        if let Some(v) = annotations.get(ANNOTATION_MAX_UNAVAILABLE) {
            match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => strategy.max_unavailable = n,
                _ => wrong.push(format!(
                    "annotation {ANNOTATION_MAX_UNAVAILABLE}={v:?} is not a whole number of at least 1; rolling 1 Pod at a time"
                )),
            }
        }
        if let Some(v) = annotations.get(ANNOTATION_DRAIN_GRACE) {
            match crate::util::duration::parse_duration(v.trim()) {
                Ok(d) => strategy.drain_grace = d,
                Err(e) => wrong.push(format!(
                    "annotation {ANNOTATION_DRAIN_GRACE}={v:?}: {e}; draining for 10m"
                )),
            }
        }
        (strategy, wrong)
    }
}

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
    crate::util::digest::sha256(&bytes)["sha256:".len()..][..16].to_string()
}

/// What one reconcile does for the rollout.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The out-of-date Pods to start draining (marked with the instant).
    pub drain: Vec<String>,
    /// Drained Pods to delete now.
    pub delete: Vec<String>,
    /// Live Pods made from the current revision.
    pub updated: usize,
    /// A drain is under way: look again soon, Runs ending do not wake the controller.
    pub draining: bool,
}

/// The rollout step for the `live` Pods (not being deleted) of a Runtime whose Pods should be
/// of `revision`, given the active Runs per Pod and the Pods a workspace is bound to. Only
/// while the Runtime has its wanted number of Pods (a scale is done first); draining Pods and
/// Pods not Ready count as unavailable, and more are drained only while fewer than
/// `strategy.max_unavailable` are.
pub fn step(
    live: &[&Pod],
    revision: &str,
    active_runs: &BTreeMap<String, usize>,
    bound: &BTreeSet<String>,
    now: &Time,
    strategy: &Strategy,
) -> Step {
    let current =
        |p: &Pod| p.annotations().get(ANNOTATION_REVISION).map(String::as_str) == Some(revision);
    let mut step = Step {
        updated: live.iter().filter(|p| current(p)).count(),
        ..Step::default()
    };
    let is_draining = |p: &Pod| p.annotations().contains_key(ANNOTATION_SCALE_DOWN);
    let draining: Vec<&Pod> = live.iter().copied().filter(|p| is_draining(p)).collect();
    for pod in &draining {
        let name = pod.name_any();
        let idle = active_runs.get(&name).copied().unwrap_or(0) == 0;
        let since = pod
            .annotations()
            .get(ANNOTATION_SCALE_DOWN)
            .and_then(|v| v.parse::<jiff::Timestamp>().ok());
        let grace = jiff::SignedDuration::try_from(strategy.drain_grace)
            .unwrap_or(jiff::SignedDuration::MAX);
        let overdue = since.is_none_or(|since| now.0.duration_since(since) >= grace);
        if (idle || overdue) && !bound.contains(&name) {
            step.delete.push(name);
        } else {
            step.draining = true;
        }
    }
    let not_ready = live
        .iter()
        .filter(|p| !is_draining(p) && !pod_is_ready(p))
        .count();
    let room = strategy
        .max_unavailable
        .saturating_sub(draining.len() + not_ready);
    let mut outdated: Vec<&Pod> = live
        .iter()
        .copied()
        .filter(|p| !current(p) && !is_draining(p) && !bound.contains(&p.name_any()))
        .collect();
    outdated.sort_by_key(|p| {
        let name = p.name_any();
        (active_runs.get(&name).copied().unwrap_or(0), name)
    });
    step.drain = outdated.iter().take(room).map(|p| p.name_any()).collect();
    step.draining |= !step.drain.is_empty();
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

    /// [`step`] towards revision `new` with the default strategy.
    fn default_step(
        live: &[&Pod],
        active: &BTreeMap<String, usize>,
        bound: &BTreeSet<String>,
        now: &Time,
    ) -> Step {
        step(live, "new", active, bound, now, &Strategy::default())
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
        let step = default_step(&live, &active, &BTreeSet::new(), &now());
        assert_eq!(
            step,
            Step {
                drain: vec!["b".into()],
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
        let waiting = default_step(&live, &busy, &BTreeSet::new(), &now());
        assert_eq!(
            (waiting.drain, waiting.delete, waiting.draining),
            (vec![], vec![], true)
        );
        let idle = default_step(&live, &BTreeMap::new(), &BTreeSet::new(), &now());
        assert_eq!(idle.delete, ["a"]);
        let late = Time("2026-12-05T10:09:00Z".parse().unwrap());
        let overdue = default_step(&live, &busy, &BTreeSet::new(), &late);
        assert_eq!(overdue.delete, ["a"]);
    }

    #[test]
    fn nothing_is_drained_while_a_pod_is_not_ready_or_bound_to_a_workspace() {
        let pods = [pod("a", "old", true, None), pod("b", "new", false, None)];
        let live: Vec<&Pod> = pods.iter().collect();
        assert_eq!(
            default_step(&live, &BTreeMap::new(), &BTreeSet::new(), &now()).drain,
            Vec::<String>::new()
        );
        let pods = [pod("a", "old", true, None), pod("b", "new", true, None)];
        let live: Vec<&Pod> = pods.iter().collect();
        let bound = BTreeSet::from(["a".to_string()]);
        assert_eq!(
            default_step(&live, &BTreeMap::new(), &bound, &now()).drain,
            Vec::<String>::new()
        );
        assert_eq!(
            default_step(&live, &BTreeMap::new(), &BTreeSet::new(), &now()).drain,
            ["a"]
        );
    }

    #[test]
    fn max_unavailable_drains_that_many_counting_pods_not_ready_and_the_grace_is_the_runtimes() {
        let pods = [
            pod("a", "old", true, None),
            pod("b", "old", true, None),
            pod("c", "old", true, None),
            pod("d", "new", false, None),
        ];
        let live: Vec<&Pod> = pods.iter().collect();
        let (two, wrong) = Strategy::of(&BTreeMap::from([
            (ANNOTATION_MAX_UNAVAILABLE.to_string(), "3".to_string()),
            (ANNOTATION_DRAIN_GRACE.to_string(), "30s".to_string()),
        ]));
        assert!(wrong.is_empty(), "{wrong:?}");
        assert_eq!(two.drain_grace, Duration::from_secs(30));
        // 3 may be unavailable; d is not Ready: two more are drained.
        let step = step(
            &live,
            "new",
            &BTreeMap::new(),
            &BTreeSet::new(),
            &now(),
            &two,
        );
        assert_eq!(step.drain, ["a", "b"]);
        // A drain past the Runtime's grace is deleted under its Run.
        let pods = [pod("a", "old", true, Some("2026-12-05T09:59:00Z"))];
        let live: Vec<&Pod> = pods.iter().collect();
        let busy = BTreeMap::from([("a".to_string(), 1)]);
        let late = super::step(&live, "new", &busy, &BTreeSet::new(), &now(), &two);
        assert_eq!(late.delete, ["a"]);
        let (default, wrong) = Strategy::of(&BTreeMap::from([
            (ANNOTATION_MAX_UNAVAILABLE.to_string(), "0".to_string()),
            (ANNOTATION_DRAIN_GRACE.to_string(), "soon".to_string()),
        ]));
        assert_eq!(default, Strategy::default());
        assert_eq!(wrong.len(), 2, "{wrong:?}");
        assert!(
            wrong[0].contains("kruntimes.io/max-unavailable=\"0\""),
            "{wrong:?}"
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
