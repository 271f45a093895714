//! PreferredRunAffinity (weight 1): prefer Pods that satisfy more preferred terms.
//!
//! Owns the soft co-location preference. Raw score of a Pod: the sum of the weights of the
//! preferred `runAffinity` terms with a matching actual or assumed target on it, minus the
//! weights of the preferred `runAntiAffinity` terms with one. Normalization across the
//! feasible Pods keeps the weights' size: the scores are shifted up so the least preferred
//! Pod is at 0 when any Pod is below 0 (anti-affinity), then capped at 100. A term of weight
//! 10 is worth 10 points against LeastLoaded's headroom, so a weak preference cannot outweigh a
//! much emptier Pod, while a weight-100 preference can outweigh any load difference. No
//! preferred terms: every Pod scores 0. It never rejects a Pod and must not mutate anything.

use crate::scheduler::framework::{
    MAX_SCORE, MIN_SCORE, PodView, RunCycleState, ScoreError, ScorePlugin, Snapshot,
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
        Ok(state
            .preferred
            .iter()
            .filter(|t| t.targets.holds(pod))
            .map(|t| t.weight)
            .sum())
    }

    fn normalize(&self, scores: &mut [i64]) {
        let lowest = scores.iter().copied().min().unwrap_or(0).min(0);
        for s in scores.iter_mut() {
            *s = s.saturating_sub(lowest).clamp(MIN_SCORE, MAX_SCORE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn preferred_run_affinity_sums_weights_and_keeps_their_size() {
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
                [(10, 10), (40, 40), (0, 0)],
            ),
            (
                "preferred anti-affinity subtracts its weight",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "noisy")]).on("p2")]),
                run("a").avoids(50, &[("app", "noisy")]),
                [(0, 50), (-50, 0), (0, 50)],
            ),
            (
                "assumed targets count like actual ones",
                World::new()
                    .pods(pods())
                    .assume(run("y").labels(&[("app", "db")]), "p3"),
                run("a").prefers(5, &[("app", "db")]),
                [(0, 0), (0, 0), (5, 5)],
            ),
            (
                "weights add up to at most 100",
                World::new()
                    .pods(pods())
                    .runs([run("x").labels(&[("app", "db"), ("tier", "gold")]).on("p1")]),
                run("a")
                    .prefers(80, &[("app", "db")])
                    .prefers(70, &[("tier", "gold")]),
                [(150, 100), (0, 0), (0, 0)],
            ),
            (
                "every Pod equally preferred: all equal",
                World::new().pods(pods()).runs([
                    run("x").labels(&[("app", "db")]).on("p1"),
                    run("y").labels(&[("app", "db")]).on("p2"),
                    run("z").labels(&[("app", "db")]).on("p3"),
                ]),
                run("a").prefers(7, &[("app", "db")]),
                [(7, 7), (7, 7), (7, 7)],
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
