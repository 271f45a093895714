//! LeastLoaded (weight 1): prefer the Pod that is least utilized after placement.
//!
//! Owns the capacity-spreading preference. For every resource the Pod advertises (requested
//! or not) the projected utilization is `(used + assumed + request) / capacity`, in parts per
//! million, capped at 10 (1000 %) so an overcommitted Pod cannot overflow; an advertised
//! capacity of 0 counts as 0 % when nothing is used and as the cap otherwise.
//!
//! The score is the projected headroom of the dominant (most utilized) resource,
//! `100 × (1 − dominant)` rounded down and never below 0, as kube-scheduler's LeastAllocated
//! scores free capacity: it is already in 0..=100, so there is no normalization, and a small
//! load difference moves the score by a little. That is what lets a preferred-affinity match
//! outweigh a slightly emptier Pod while a much emptier Pod still wins over a weak preference
//! (a min-max normalization would swing any difference to 100 points). Pods whose dominant
//! utilizations round to the same score tie, and the framework breaks the tie by Pod name. It
//! never rejects a Pod and must not mutate anything.

use crate::scheduler::framework::{
    MAX_SCORE, PodView, RunCycleState, ScoreError, ScorePlugin, Snapshot,
};

/// Registry key.
pub const NAME: &str = "LeastLoaded";

/// Utilization unit: parts per million.
const PPM: u128 = 1_000_000;
/// Per-resource utilization cap (1000 %).
const MAX_UTILIZATION: u128 = 10 * PPM;

/// See the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastLoaded;

const _: &dyn ScorePlugin = &LeastLoaded;

/// (dominant, sum) projected utilization of `pod` in parts per million.
pub fn projected_utilization(state: &RunCycleState, pod: &PodView<'_>) -> (u64, u64) {
    if !pod.capacity_ok() {
        return (MAX_UTILIZATION as u64, MAX_UTILIZATION as u64);
    }
    let mut dominant = 0u128;
    let mut sum = 0u128;
    for load in pod.loads() {
        let projected = u128::from(load.effective()) + u128::from(state.requested(load.id));
        let utilization = match load.capacity {
            0 if projected == 0 => 0,
            0 => MAX_UTILIZATION,
            cap => {
                // Stay in 64-bit division when the product fits: this runs for every
                // resource of every feasible Pod.
                let scaled = match u64::try_from(projected * PPM) {
                    Ok(p) => u128::from(p / cap),
                    Err(_) => projected * PPM / u128::from(cap),
                };
                scaled.min(MAX_UTILIZATION)
            }
        };
        dominant = dominant.max(utilization);
        sum += utilization;
    }
    let clamp = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    (clamp(dominant), clamp(sum))
}

impl ScorePlugin for LeastLoaded {
    fn name(&self) -> &'static str {
        NAME
    }

    fn score(
        &self,
        _snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<i64, ScoreError> {
        let (dominant, _) = projected_utilization(state, pod);
        Ok(headroom_score(dominant))
    }
}

/// `100 × (1 − dominant)` for a utilization in parts per million, rounded down, in 0..=100.
fn headroom_score(dominant_ppm: u64) -> i64 {
    let used = u128::from(dominant_ppm).min(PPM);
    let score = (PPM - used) * MAX_SCORE as u128 / PPM;
    i64::try_from(score).expect("at most 100")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::Decision;
    use crate::testing::*;

    fn scores(world: World, r: RunBuilder) -> Vec<(String, i64)> {
        score_table(&LeastLoaded, &world, &r)
            .into_iter()
            .map(|(name, _, norm)| (name, norm))
            .collect()
    }

    fn placed(world: World, r: RunBuilder) -> String {
        let decision = world
            .cache()
            .plan(&crate::scheduler::plugins::registry(), &r.build(), NOW)
            .unwrap();
        match decision {
            Decision::Schedule { pod, .. } => pod,
            other => panic!("expected a placement, got {other:?}"),
        }
    }

    #[test]
    fn least_loaded_scores_the_headroom_of_the_dominant_resource() {
        // After placement: p1 runs 3/4 (75 %), p2 runs 2/4 but gpu 2/2 (100 %), p3 runs 2/4 (50 %).
        let world = World::new()
            .pods([
                pod("p1").capacity(&[("runs", 4)]),
                pod("p2").capacity(&[("runs", 4), ("example.com/gpu", 2)]),
                pod("p3").capacity(&[("runs", 4)]),
            ])
            .runs([
                run("x").on("p1"),
                run("y").on("p1"),
                run("z").requests(&[("example.com/gpu", 2)]).on("p2"),
                run("w").on("p3"),
            ]);
        assert_eq!(
            scores(world.clone(), run("a")),
            [("p1".into(), 25), ("p2".into(), 0), ("p3".into(), 50)]
        );
        assert_eq!(placed(world, run("a")), "p3");
    }

    #[test]
    fn headroom_is_rounded_down_and_bounded() {
        let table = [
            (0, 100),
            (1, 99),
            (10_000, 99),
            (10_001, 98),
            (500_000, 50),
            (PPM as u64, 0),
            (MAX_UTILIZATION as u64, 0),
        ];
        for (dominant, want) in table {
            assert_eq!(headroom_score(dominant), want, "{dominant} ppm");
        }
    }

    #[test]
    fn least_loaded_counts_advertised_resources_the_run_does_not_request() {
        // The Run asks only for runs; p1's gpu is full, so p1 is the more loaded Pod.
        let world = World::new()
            .pods([
                pod("p1").capacity(&[("runs", 8), ("example.com/gpu", 1)]),
                pod("p2").capacity(&[("runs", 8), ("example.com/gpu", 1)]),
            ])
            .runs([run("x")
                .requests(&[("example.com/gpu", 1), ("runs", 0)])
                .on("p1")]);
        assert_eq!(placed(world, run("a")), "p2");
    }

    #[test]
    fn least_loaded_counts_assumed_usage_and_the_request_itself() {
        let world = World::new()
            .pods([
                pod("p1").capacity(&[("runs", 4)]),
                pod("p2").capacity(&[("runs", 8)]),
            ])
            .assume(run("y").requests(&[("runs", 2)]), "p1");
        // p1: (2 + 2) / 4 = 100 %; p2: 2 / 8 = 25 %.
        assert_eq!(
            scores(world, run("a").requests(&[("runs", 2)])),
            [("p1".into(), 0), ("p2".into(), 75)]
        );
    }

    #[test]
    fn a_small_load_difference_gives_a_small_score_difference_and_preference_counts() {
        let pods = || {
            [
                pod("p1").capacity(&[("runs", 100)]),
                pod("p2").capacity(&[("runs", 100)]),
            ]
        };
        // p1 hosts the preferred cohort and 10 Runs; p2 hosts 8 Runs: p2 is slightly emptier.
        let mut busy: Vec<RunBuilder> = (0..10)
            .map(|i| run(&format!("a{i}")).labels(&[("cohort", "a")]).on("p1"))
            .collect();
        busy.extend((0..8).map(|i| run(&format!("b{i}")).on("p2")));
        let world = World::new().pods(pods()).runs(busy.clone());
        assert_eq!(
            scores(world.clone(), run("new")),
            [("p1".into(), 89), ("p2".into(), 91)],
            "two Runs of difference are two points, not 100"
        );
        assert_eq!(
            placed(world.clone(), run("new")),
            "p2",
            "no preference: emptier wins"
        );
        assert_eq!(
            placed(world, run("new").prefers(10, &[("cohort", "a")])),
            "p1",
            "a preferred match outweighs a slightly emptier Pod"
        );

        // p2 much emptier (0 Runs against 60): a weak preference does not drag the Run to p1.
        let busy: Vec<RunBuilder> = (0..60)
            .map(|i| run(&format!("a{i}")).labels(&[("cohort", "a")]).on("p1"))
            .collect();
        let world = World::new().pods(pods()).runs(busy);
        assert_eq!(
            placed(world, run("new").prefers(10, &[("cohort", "a")])),
            "p2",
            "a much emptier Pod wins over a weak preference"
        );
    }

    #[test]
    fn equally_loaded_pods_score_the_same_and_the_name_breaks_the_tie() {
        let world = World::new().pods([
            pod("p2").capacity(&[("runs", 4)]),
            pod("p1").capacity(&[("runs", 4)]),
        ]);
        assert_eq!(
            scores(world.clone(), run("a")),
            [("p1".into(), 75), ("p2".into(), 75)]
        );
        assert_eq!(placed(world, run("a")), "p1");
    }
}
