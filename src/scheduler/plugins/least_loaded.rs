//! LeastLoaded (weight 1): prefer the Pod that is least utilized after placement.
//!
//! Owns the capacity-spreading preference. For every resource the Pod advertises (requested
//! or not) the projected utilization is `(used + assumed + request) / capacity`, in parts per
//! million, capped at 10 (1000 %) so an overcommitted Pod cannot overflow; an advertised
//! capacity of 0 counts as 0 % when nothing is used and as the cap otherwise. Pods compare by
//! the dominant (highest) utilization, then by the sum of utilizations.
//!
//! The raw score encodes that comparison in one integer, `-(dominant * 2^38 + sum)`, so a
//! larger raw score is a less loaded Pod. Normalization is min-max over the feasible Pods onto
//! 0..=100, rounded down: the least loaded Pod gets 100 and every other Pod strictly less, so
//! with neutral preferred affinity the pick is exactly "lowest dominant, then lowest sum, then
//! Pod name". When dominants differ the sum barely moves the score; when they are equal the sum
//! spans the whole range. All equal ⇒ every Pod gets 100. It never rejects a Pod and must not
//! mutate anything.

use crate::scheduler::framework::{
    MAX_SCORE, PodView, RunCycleState, ScoreError, ScorePlugin, Snapshot, normalize_min_max,
};

/// Registry key.
pub const NAME: &str = "LeastLoaded";

/// Utilization unit: parts per million.
const PPM: u128 = 1_000_000;
/// Per-resource utilization cap (1000 %).
const MAX_UTILIZATION: u128 = 10 * PPM;
/// Weight of the dominant utilization in the raw score: larger than any possible sum
/// (2^38 / 10^7 ≈ 27 000 advertised resources).
const DOMINANT_WEIGHT: i64 = 1 << 38;

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
        let (dominant, sum) = projected_utilization(state, pod);
        let dominant = i64::try_from(dominant).expect("capped at 10^7");
        let sum = i64::try_from(sum)
            .unwrap_or(i64::MAX)
            .min(DOMINANT_WEIGHT - 1);
        Ok(-(dominant * DOMINANT_WEIGHT + sum))
    }

    fn normalize(&self, scores: &mut [i64]) {
        normalize_min_max(scores, MAX_SCORE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn normalized(world: World, r: RunBuilder) -> Vec<(String, i64)> {
        score_table(&LeastLoaded, &world, &r)
            .into_iter()
            .map(|(name, _, norm)| (name, norm))
            .collect()
    }

    fn best(world: World, r: RunBuilder) -> String {
        let scores = normalized(world, r);
        let max = scores.iter().map(|(_, s)| *s).max().unwrap();
        scores.into_iter().find(|(_, s)| *s == max).unwrap().0
    }

    #[test]
    fn least_loaded_prefers_lower_dominant_utilization() {
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
            normalized(world.clone(), run("a")),
            [("p1".into(), 50), ("p2".into(), 0), ("p3".into(), 100)]
        );
        assert_eq!(best(world, run("a")), "p3");
    }

    #[test]
    fn least_loaded_breaks_equal_dominant_utilization_by_the_sum() {
        // Both Pods reach 50 % runs; p1 also has gpu at 50 %, p2 at 0 %.
        let world = World::new()
            .pods([
                pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 2)]),
                pod("p2").capacity(&[("runs", 4), ("example.com/gpu", 2)]),
            ])
            .runs([
                run("x").requests(&[("example.com/gpu", 1)]).on("p1"),
                run("y").on("p2"),
            ]);
        assert_eq!(
            normalized(world, run("a")),
            [("p1".into(), 0), ("p2".into(), 100)]
        );
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
        assert_eq!(best(world, run("a")), "p2");
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
        let scores = score_table(&LeastLoaded, &world, &run("a").requests(&[("runs", 2)]));
        assert_eq!(scores[0].1, -(PPM as i64 * DOMINANT_WEIGHT + PPM as i64));
        assert_eq!(scores[1].1, -(250_000 * DOMINANT_WEIGHT + 250_000));
        assert_eq!((scores[0].2, scores[1].2), (0, 100));
    }

    #[test]
    fn equally_loaded_pods_all_score_100_and_the_name_breaks_the_tie() {
        let world = World::new().pods([
            pod("p2").capacity(&[("runs", 4)]),
            pod("p1").capacity(&[("runs", 4)]),
        ]);
        assert_eq!(
            normalized(world.clone(), run("a")),
            [("p1".into(), 100), ("p2".into(), 100)]
        );
        let decision = world
            .cache()
            .plan(
                &crate::scheduler::plugins::registry(),
                &run("a").build(),
                NOW,
            )
            .unwrap();
        assert!(
            matches!(decision, crate::scheduler::framework::Decision::Schedule { ref pod, .. } if pod == "p1"),
            "{decision:?}"
        );
    }
}
