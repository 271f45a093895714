//! RunAffinity: required Run affinity and anti-affinity, over actual and assumed targets.
//!
//! Owns the hard co-location rules, with the topology fixed to the Runtime Pod
//! (`kruntimes.io/runtime-pod`) and targets limited to the Run's namespace and Runtime:
//! - a required `runAffinity` term holds on a Pod hosting a matching target. When the term has
//!   no matching target anywhere in the scope, the Run may seed it (Inter-Run Affinity) only if
//!   its own labels match the term; otherwise every Pod waits. So A-needs-B with B-needs-A
//!   stays Pending until some matching target appears.
//! - a required `runAntiAffinity` term rejects a Pod hosting a matching target.
//! - symmetrically, as in Kubernetes, a Pod is rejected when one of its actual or assumed Runs
//!   has a required anti-affinity term that matches this Run's labels.
//!
//! The evaluated Run is never its own target. Targets were computed once in PreFilter; this
//! plugin only looks Pods up in them. It must not score or mutate anything.

use crate::scheduler::framework::{
    ClusterEvent, FilterPlugin, PodView, QueueingHint, Rejection, RunCycleState, Snapshot,
};

/// Registry key and `plugin` metric label.
pub const NAME: &str = "RunAffinity";

/// A required affinity term has targets, but not on this Pod.
pub const AFFINITY_MISMATCH: &str = "didn't match Run affinity rules";
/// A required affinity term has no target anywhere and the Run cannot seed it.
pub const AFFINITY_WAITING: &str = "waiting for required Run affinity";
/// The Pod hosts a target of a required anti-affinity term.
pub const ANTI_AFFINITY: &str = "didn't match Run anti-affinity rules";
/// A Run on the Pod has required anti-affinity against this Run.
pub const EXISTING_ANTI_AFFINITY: &str = "didn't satisfy existing Runs' anti-affinity rules";

/// Every reason this plugin can give.
pub const REASONS: &[&str] = &[
    AFFINITY_MISMATCH,
    AFFINITY_WAITING,
    ANTI_AFFINITY,
    EXISTING_ANTI_AFFINITY,
];

/// See the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunAffinity;

const _: &dyn FilterPlugin = &RunAffinity;

impl FilterPlugin for RunAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    /// New or departed targets can satisfy required affinity or lift required anti-affinity,
    /// and only for Runs that have such terms. A departure also releases capacity, whose walk
    /// moves these Runs when they fit the room without counting them (they may still be
    /// refused for their terms).
    fn queueing_hint(&self, event: ClusterEvent) -> Option<QueueingHint> {
        match event {
            ClusterEvent::TargetsChanged => Some(QueueingHint::QueueRequiredTerms),
            _ => None,
        }
    }

    fn filter(
        &self,
        _snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<(), Rejection> {
        for term in &state.required_affinity {
            if term.targets.is_empty() {
                if !term.matches_self {
                    return Err(Rejection::new(NAME, AFFINITY_WAITING));
                }
            } else if !term.targets.holds(pod) {
                return Err(Rejection::new(NAME, AFFINITY_MISMATCH));
            }
        }
        if state
            .required_anti_affinity
            .iter()
            .any(|t| t.targets.holds(pod))
        {
            return Err(Rejection::new(NAME, ANTI_AFFINITY));
        }
        if state.repelled_by.holds(pod) {
            return Err(Rejection::new(NAME, EXISTING_ANTI_AFFINITY));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::Decision;
    use crate::testing::*;

    fn pods() -> [PodBuilder; 3] {
        [
            pod("p1").capacity(&[("runs", 8)]),
            pod("p2").capacity(&[("runs", 8)]),
            pod("p3").capacity(&[("runs", 8)]),
        ]
    }

    #[test]
    fn run_affinity_follows_the_spec_rules() {
        let ok = || Ok(());
        let no = |m: &str| Err(m.to_string());
        type Case = (&'static str, World, RunBuilder, [Result<(), String>; 3]);
        let table: Vec<Case> = vec![
            (
                "a Run without affinity fits everywhere",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "db")]).on("p1")]),
                run("a"),
                [ok(), ok(), ok()],
            ),
            (
                "required affinity holds only on Pods hosting an actual target",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "db")]).on("p2")]),
                run("a").requires(&[("app", "db")]),
                [no(AFFINITY_MISMATCH), ok(), no(AFFINITY_MISMATCH)],
            ),
            (
                "required affinity also holds on Pods hosting an assumed target",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "db")]).on("p1")])
                    .assume(run("y").labels(&[("app", "db")]), "p3"),
                run("a").requires(&[("app", "db")]),
                [ok(), no(AFFINITY_MISMATCH), ok()],
            ),
            (
                "a Run whose labels match its own term seeds the cohort anywhere",
                World::new().pods(pods()),
                run("a")
                    .labels(&[("cohort", "c")])
                    .requires(&[("cohort", "c")]),
                [ok(), ok(), ok()],
            ),
            (
                "a Run that does not match its own term waits while no target exists",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("cohort", "other")]).on("p1")]),
                run("a")
                    .labels(&[("cohort", "d")])
                    .requires(&[("cohort", "c")]),
                [
                    no(AFFINITY_WAITING),
                    no(AFFINITY_WAITING),
                    no(AFFINITY_WAITING),
                ],
            ),
            (
                "a Run is never its own target",
                World::new().pods(pods()).runs([run("a")
                    .labels(&[("cohort", "c")])
                    .requires(&[("cohort", "c")])
                    .on("p2")]),
                run("a")
                    .labels(&[("cohort", "c")])
                    .requires(&[("cohort", "c")]),
                [ok(), ok(), ok()],
            ),
            (
                "required anti-affinity rejects Pods hosting an actual or assumed target",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "db")]).on("p1")])
                    .assume(run("y").labels(&[("app", "db")]), "p2"),
                run("a").anti(&[("app", "db")]),
                [no(ANTI_AFFINITY), no(ANTI_AFFINITY), ok()],
            ),
            (
                "an existing Run's anti-affinity keeps matching Runs away",
                World::new()
                    .pods(pods())
                    .runs([run("x").anti(&[("app", "web")]).on("p1")])
                    .assume(run("y").anti(&[("app", "web")]), "p3"),
                run("a").labels(&[("app", "web")]),
                [no(EXISTING_ANTI_AFFINITY), ok(), no(EXISTING_ANTI_AFFINITY)],
            ),
            (
                "targets are scoped to the Run's namespace and Runtime",
                World::new()
                    .pods(pods())
                    .pods([pod("q1").runtime("other")])
                    .runs([run("x").labels(&[("app", "db")]).on("q1")]),
                run("a").requires(&[("app", "db")]),
                [
                    no(AFFINITY_WAITING),
                    no(AFFINITY_WAITING),
                    no(AFFINITY_WAITING),
                ],
            ),
        ];
        for (case, world, r, want) in table {
            let got: Vec<_> = filter_verdicts(&RunAffinity, &world, &r)
                .into_iter()
                .map(|(_, v)| v)
                .collect();
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn a_needs_b_and_b_needs_a_both_stay_pending() {
        let world = World::new().pods(pods());
        let a = run("a").labels(&[("role", "a")]).requires(&[("role", "b")]);
        let b = run("b").labels(&[("role", "b")]).requires(&[("role", "a")]);
        let mut state = world.cache();
        for r in [&a, &b] {
            let outcome = schedule_one(&mut state, r);
            let crate::scheduler::framework::ScheduleOutcome::Unschedulable(u) = outcome else {
                panic!("{outcome:?}")
            };
            assert_eq!(
                u.message(),
                "0/3 Runtime Pods are available: 3 waiting for required Run affinity."
            );
        }
    }

    #[test]
    fn a_cohort_bootstraps_from_its_first_member_and_follows_its_assumption() {
        let world = World::new().pods(pods()).runs([run("busy").on("p1")]);
        let mut state = world.cache();
        let member = |n: &str| {
            run(n)
                .labels(&[("cohort", "c")])
                .requires(&[("cohort", "c")])
        };
        let mut placed = Vec::new();
        for n in ["m1", "m2", "m3"] {
            match schedule_one(&mut state, &member(n)) {
                crate::scheduler::framework::ScheduleOutcome::Reserved { pod, .. } => {
                    placed.push(pod)
                }
                other => panic!("{other:?}"),
            }
        }
        // m1 seeds on the least loaded Pod; the others follow its assumed placement.
        assert_eq!(placed, ["p2", "p2", "p2"]);
        let plan = state
            .plan(
                &crate::scheduler::plugins::registry(),
                &run("outsider").requires(&[("cohort", "c")]).build(),
                NOW,
            )
            .unwrap();
        assert!(
            matches!(plan, Decision::Schedule { ref pod, .. } if pod == "p2"),
            "{plan:?}"
        );
    }
}
