//! Fair sharing of a Runtime among the groups that submit to it: the spec's extension point
//! for fairness, after priority.
//!
//! A Run's group is, by default, the identity that created it (the annotation
//! `kruntimes.io/submitted-by`, which the mutating admission policy of `deploy/submitter-mutation/`
//! writes and keeps where the cluster serves it, and `deploy/submitter-policy.yaml` guards, so a
//! user can neither forge nor leave it); a Runtime may name a Run label
//! instead (`kruntimes.io/fair-share-label`), and give groups weights
//! (`kruntimes.io/fair-share-weights: alice=2,*=1`). A group's share of a Runtime is its
//! dominant share: over every resource of the Runtime's capacity, the largest fraction that
//! its active, assumed and nominated Runs request (dominant resource fairness, as Kueue's fair
//! sharing and YARN's DRF). Within a priority, the queue gives the next cycle to the waiting
//! group of the lowest share divided by weight, and within a group to its oldest Run.
//!
//! Fairness only orders who goes next: a Run that does not fit goes unschedulable and the
//! next one is cycled, so capacity is never left idle while a fitting Run waits.
//!
//! This module owns the groups, weights and the share arithmetic. Pure: it reads no Pods and
//! no clock; the cache sums the usage and the queue applies the order.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube::ResourceExt as _;

use crate::api::{
    ANNOTATION_FAIR_SHARE_LABEL, ANNOTATION_FAIR_SHARE_WEIGHTS, ANNOTATION_SUBMITTED_BY, Resources,
    Run, Runtime,
};

/// A fairness group's name; empty for Runs that name none (created before the submitter
/// policy, or without the Runtime's label).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Group(Arc<str>);

impl Group {
    pub fn new(name: &str) -> Self {
        Group(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// How people read it: the name, or `(none)`.
    pub fn display(&self) -> &str {
        match self.0.is_empty() {
            true => "(none)",
            false => &self.0,
        }
    }
}

/// How a Runtime groups its Runs and weighs the groups.
#[derive(Debug, Clone, PartialEq)]
pub struct FairShare {
    /// The Run label whose value is the group; `None`: the submitter.
    pub label: Option<String>,
    /// Weights other than the default, by group name.
    pub weights: BTreeMap<String, f64>,
    pub default_weight: f64,
}

impl Default for FairShare {
    fn default() -> Self {
        FairShare {
            label: None,
            weights: BTreeMap::new(),
            default_weight: 1.0,
        }
    }
}

impl FairShare {
    /// The Runtime's fairness, from its annotations; an annotation that cannot be read is
    /// said in the error (the caller logs it) and the defaults hold for it.
    pub fn of(runtime: &Runtime) -> (Self, Option<String>) {
        let annotations = runtime.annotations();
        let mut fair = FairShare {
            label: annotations
                .get(ANNOTATION_FAIR_SHARE_LABEL)
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty()),
            ..FairShare::default()
        };
        let mut error = None;
        if let Some(weights) = annotations.get(ANNOTATION_FAIR_SHARE_WEIGHTS) {
            match parse_weights(weights) {
                Ok((weights, default)) => {
                    fair.weights = weights;
                    fair.default_weight = default.unwrap_or(1.0);
                }
                Err(why) => {
                    error = Some(format!(
                        "Runtime {}/{}: annotation {ANNOTATION_FAIR_SHARE_WEIGHTS}={weights:?}: {why}; every group weighs 1",
                        runtime.namespace().unwrap_or_default(),
                        runtime.name_any()
                    ));
                }
            }
        }
        (fair, error)
    }

    /// The group of a Run with these labels and submitter annotation.
    pub fn group(&self, labels: &BTreeMap<String, String>, submitter: Option<&str>) -> Group {
        let name = match &self.label {
            Some(key) => labels.get(key).map(String::as_str),
            None => submitter,
        };
        Group::new(name.unwrap_or_default())
    }

    /// The group of `run`.
    pub fn group_of(&self, run: &Run) -> Group {
        self.group(run.labels(), submitter(run))
    }

    pub fn weight(&self, group: &Group) -> f64 {
        self.weights
            .get(group.as_str())
            .copied()
            .unwrap_or(self.default_weight)
    }
}

/// The submitter the admission policy recorded on `run`.
pub fn submitter(run: &Run) -> Option<&str> {
    run.annotations()
        .get(ANNOTATION_SUBMITTED_BY)
        .map(String::as_str)
}

/// `alice=2, team-b=0.5, *=1`: weights by group, and the default (`*`).
fn parse_weights(text: &str) -> Result<(BTreeMap<String, f64>, Option<f64>), String> {
    let mut weights = BTreeMap::new();
    let mut default = None;
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (group, weight) = entry
            .split_once('=')
            .ok_or_else(|| format!("{entry:?} is not GROUP=WEIGHT"))?;
        let weight: f64 = weight
            .trim()
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w > 0.0)
            .ok_or_else(|| format!("the weight of {:?} must be a number above 0", group.trim()))?;
        match group.trim() {
            "*" => default = Some(weight),
            group => {
                weights.insert(group.to_string(), weight);
            }
        }
    }
    Ok((weights, default))
}

/// The requests held on a Runtime, by group, and its capacity: what shares are made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub by_group: HashMap<Group, Resources>,
    /// The sum of the capacity of the Runtime's Pods.
    pub capacity: Resources,
}

impl Usage {
    pub fn add(&mut self, group: Group, request: &Resources) {
        self.by_group.entry(group).or_default().add(request);
    }

    /// The group's dominant share: the largest fraction of any resource of the capacity that
    /// it holds (0 when it holds nothing or the Runtime has no capacity).
    pub fn dominant_share(&self, group: &Group) -> f64 {
        let Some(held) = self.by_group.get(group) else {
            return 0.0;
        };
        held.iter()
            .filter_map(|(resource, amount)| {
                let total = self.capacity.get(resource);
                (total > 0).then(|| amount as f64 / total as f64)
            })
            .fold(0.0, f64::max)
    }
}

/// Where a group stands: what `explain` and `status` show.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    pub group: Group,
    /// Its dominant share of the Runtime.
    pub share: f64,
    pub weight: f64,
    /// Its Pending Runs on the Runtime.
    pub pending: usize,
    /// 1-based: the group the next cycle goes to is 1st (lowest weighted share among groups
    /// with Pending Runs; ties to the group with the older Run).
    pub rank: usize,
}

/// The order of groups: lowest `share / weight` first, ties by `K` (the caller's: when each
/// was last served, then its first Run in queue order).
pub fn rank<K: Ord>(groups: &mut [(f64, K)]) {
    groups.sort_by(|(a, ka), (b, kb)| a.total_cmp(b).then_with(|| ka.cmp(kb)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(annotations: &[(&str, &str)]) -> Runtime {
        let mut rt = crate::testing::runtime("rt").build();
        rt.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        rt
    }

    #[test]
    fn groups_are_submitters_by_default_or_the_runtimes_label() {
        let labels = BTreeMap::from([("team".to_string(), "ml".to_string())]);
        let (fair, err) = FairShare::of(&runtime(&[]));
        assert_eq!(err, None);
        assert_eq!(fair.group(&labels, Some("alice")), Group::new("alice"));
        assert_eq!(fair.group(&labels, None).display(), "(none)");
        let (fair, _) = FairShare::of(&runtime(&[(ANNOTATION_FAIR_SHARE_LABEL, "team")]));
        assert_eq!(fair.group(&labels, Some("alice")), Group::new("ml"));
    }

    #[test]
    fn weights_parse_with_a_default_and_bad_ones_are_said_and_ignored() {
        let (fair, err) = FairShare::of(&runtime(&[(
            ANNOTATION_FAIR_SHARE_WEIGHTS,
            "alice=2, team-b=0.5 ,*=3",
        )]));
        assert_eq!(err, None);
        assert_eq!(fair.weight(&Group::new("alice")), 2.0);
        assert_eq!(fair.weight(&Group::new("team-b")), 0.5);
        assert_eq!(fair.weight(&Group::new("carol")), 3.0);
        for bad in ["alice", "alice=0", "alice=-1", "alice=x", "alice=inf"] {
            let (fair, err) = FairShare::of(&runtime(&[(ANNOTATION_FAIR_SHARE_WEIGHTS, bad)]));
            let err = err.unwrap();
            assert!(err.contains(ANNOTATION_FAIR_SHARE_WEIGHTS), "{err}");
            assert_eq!(fair.weight(&Group::new("alice")), 1.0, "{bad}");
        }
    }

    #[test]
    fn the_dominant_share_is_the_largest_fraction_of_any_resource() {
        let mut usage = Usage {
            capacity: Resources::from_iter([("runs", 16), ("gpu", 4)]),
            ..Usage::default()
        };
        usage.add(
            Group::new("a"),
            &Resources::from_iter([("runs", 2), ("gpu", 2)]),
        );
        usage.add(Group::new("b"), &Resources::from_iter([("runs", 8)]));
        usage.add(Group::new("b"), &Resources::from_iter([("other", 8)]));
        assert_eq!(usage.dominant_share(&Group::new("a")), 0.5);
        assert_eq!(usage.dominant_share(&Group::new("b")), 0.5);
        assert_eq!(usage.dominant_share(&Group::new("c")), 0.0);
    }

    #[test]
    fn ranks_go_to_the_lowest_weighted_share_then_the_older_run() {
        let mut groups = vec![(0.5, 3), (0.25, 9), (0.5, 1)];
        rank(&mut groups);
        assert_eq!(groups, [(0.25, 9), (0.5, 1), (0.5, 3)]);
    }
}
