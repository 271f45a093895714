//! PreferredRunAffinity (weight 1): prefer Pods that satisfy more preferred terms.
//!
//! Owns the soft co-location preference. Raw score of a Pod: the sum of the weights of the
//! preferred `runAffinity` terms with a matching actual or assumed target on it, minus the
//! weights of the preferred `runAntiAffinity` terms with one. Normalization is min-max over the
//! feasible Pods (the best becomes 100, the worst 0, rounded down); when all raw scores are
//! equal (typically: no preferred terms) every Pod gets 0, which cannot change the outcome and
//! shows "no preference" in explain. It never rejects a Pod and must not mutate anything.

use crate::scheduler::framework::{
    MIN_SCORE, PodView, RunCycleState, ScoreError, ScorePlugin, Snapshot, normalize_min_max,
};

/// Registry key.
pub const NAME: &str = "PreferredRunAffinity";

/// See the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct PreferredRunAffinity;

const _: &dyn ScorePlugin = &PreferredRunAffinity;

impl ScorePlugin for PreferredRunAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn score(
        &self,
        _snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<i64, ScoreError> {
        let slot = pod.slot();
        Ok(state
            .preferred
            .iter()
            .filter(|t| t.targets.contains(slot))
            .map(|t| t.weight)
            .sum())
    }

    fn normalize(&self, scores: &mut [i64]) {
        normalize_min_max(scores, MIN_SCORE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn preferred_run_affinity_sums_weights_and_normalizes_min_to_max() {
        let pods = || {
            [
                pod("p1").capacity(&[("runs", 8)]),
                pod("p2").capacity(&[("runs", 8)]),
                pod("p3").capacity(&[("runs", 8)]),
            ]
        };
        type Case = (&'static str, World, RunBuilder, [(i64, i64); 3]);
        let table: Vec<Case> = vec![
            (
                "no preferred terms: every Pod scores 0",
                World::new().pods(pods()),
                run("a"),
                [(0, 0), (0, 0), (0, 0)],
            ),
            (
                "a Pod with more matching preferred weight scores higher",
                World::new().pods(pods()).runs([
                    run("x").labels(&[("app", "db")]).on("p1"),
                    run("y").labels(&[("app", "db"), ("tier", "gold")]).on("p2"),
                ]),
                run("a")
                    .prefers(10, &[("app", "db")])
                    .prefers(30, &[("tier", "gold")]),
                [(10, 25), (40, 100), (0, 0)],
            ),
            (
                "preferred anti-affinity subtracts its weight",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "noisy")]).on("p2")]),
                run("a").avoids(50, &[("app", "noisy")]),
                [(0, 100), (-50, 0), (0, 100)],
            ),
            (
                "assumed targets count like actual ones",
                World::new()
                    .pods(pods())
                    .assume(run("y").labels(&[("app", "db")]), "p3"),
                run("a").prefers(5, &[("app", "db")]),
                [(0, 0), (0, 0), (5, 100)],
            ),
            (
                "every Pod equally preferred: all 0",
                World::new().pods(pods()).runs([
                    run("x").labels(&[("app", "db")]).on("p1"),
                    run("y").labels(&[("app", "db")]).on("p2"),
                    run("z").labels(&[("app", "db")]).on("p3"),
                ]),
                run("a").prefers(7, &[("app", "db")]),
                [(7, 0), (7, 0), (7, 0)],
            ),
        ];
        for (case, world, r, want) in table {
            let got: Vec<_> = score_table(&PreferredRunAffinity, &world, &r)
                .into_iter()
                .map(|(_, raw, norm)| (raw, norm))
                .collect();
            assert_eq!(got, want, "{case}");
        }
    }
}
