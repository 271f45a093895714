//! WorkspacePlacement: the spec's "bound workspace placement".
//!
//! Owns the rule that a Run naming a PersistentWorkspace goes only where the workspace holds
//! its data: a Bound workspace (by `status.boundPod`, an active Run that uses it, or an
//! assumption of an earlier cycle) admits only that Pod; an unbound one admits any Pod, and
//! Reserve of the first Run binds it there in the assumed cache, so a burst on one unbound
//! workspace lands on one Pod (as Inter-Run Affinity bootstraps a cohort). A workspace that
//! does not exist (yet) admits no Pod. PreFilter found the binding once; this plugin compares
//! a Pod name. It must not bind, score or mutate anything.

use crate::scheduler::framework::{
    ClusterEvent, FilterPlugin, PodView, QueueingHint, Rejection, RunCycleState, Snapshot,
    WorkspaceBinding,
};

/// Registry key and `plugin` metric label.
pub const NAME: &str = "WorkspacePlacement";

/// The workspace is bound to another Runtime Pod.
pub const BOUND_ELSEWHERE: &str = "bound to another Runtime Pod";
/// No PersistentWorkspace of that name exists in the namespace.
pub const WORKSPACE_NOT_FOUND: &str = "PersistentWorkspace not found";

/// Every reason this plugin can give.
pub const REASONS: &[&str] = &[BOUND_ELSEWHERE, WORKSPACE_NOT_FOUND];

/// See the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkspacePlacement;

const _: &dyn FilterPlugin = &WorkspacePlacement;

impl FilterPlugin for WorkspacePlacement {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A workspace that appears, is bound, lost or released changes what the Runs naming it
    /// may do, and nothing for the others. Room freed on the bound Pod, or that Pod becoming
    /// available, is RuntimePodAvailability's hint already.
    fn queueing_hint(&self, event: ClusterEvent) -> Option<QueueingHint> {
        match event {
            ClusterEvent::WorkspaceChanged => Some(QueueingHint::QueueWorkspaceUsers),
            _ => None,
        }
    }

    fn filter(
        &self,
        _snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<(), Rejection> {
        match &state.workspace {
            Some(w) if !w.admits(pod.name()) => Err(Rejection::new(
                NAME,
                match w.binding {
                    WorkspaceBinding::Missing => WORKSPACE_NOT_FOUND,
                    _ => BOUND_ELSEWHERE,
                },
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::ScheduleOutcome;
    use crate::testing::*;

    fn pods() -> [PodBuilder; 3] {
        [
            pod("p1").capacity(&[("runs", 8)]),
            pod("p2").capacity(&[("runs", 8)]),
            pod("p3").capacity(&[("runs", 8)]),
        ]
    }

    #[test]
    fn workspace_placement_follows_the_binding() {
        let ok = || Ok(());
        let no = |m: &str| Err(m.to_string());
        type Case = (&'static str, World, RunBuilder, [Result<(), String>; 3]);
        let table: Vec<Case> = vec![
            (
                "a Run without a workspace fits everywhere",
                World::new().pods(pods()),
                run("a"),
                [ok(), ok(), ok()],
            ),
            (
                "an unbound workspace admits every Pod",
                World::new().pods(pods()).workspaces([workspace("ws")]),
                run("a").workspace("ws"),
                [ok(), ok(), ok()],
            ),
            (
                "a Bound workspace admits only its boundPod",
                World::new()
                    .pods(pods())
                    .workspaces([workspace("ws").bound("p2")]),
                run("a").workspace("ws"),
                [no(BOUND_ELSEWHERE), ok(), no(BOUND_ELSEWHERE)],
            ),
            (
                "an active Run using it binds it before its status says so",
                World::new()
                    .pods(pods())
                    .workspaces([workspace("ws")])
                    .runs([run("first").workspace("ws").on("p3")]),
                run("a").workspace("ws"),
                [no(BOUND_ELSEWHERE), no(BOUND_ELSEWHERE), ok()],
            ),
            (
                "an assumption using it binds it too",
                World::new()
                    .pods(pods())
                    .workspaces([workspace("ws")])
                    .assume(run("first").workspace("ws"), "p1"),
                run("a").workspace("ws"),
                [ok(), no(BOUND_ELSEWHERE), no(BOUND_ELSEWHERE)],
            ),
            (
                "the status wins over a Run elsewhere",
                World::new()
                    .pods(pods())
                    .workspaces([workspace("ws").bound("p1")])
                    .runs([run("stray").workspace("ws").on("p3")]),
                run("a").workspace("ws"),
                [ok(), no(BOUND_ELSEWHERE), no(BOUND_ELSEWHERE)],
            ),
            (
                "a missing workspace admits no Pod",
                World::new().pods(pods()),
                run("a").workspace("ws"),
                [
                    no(WORKSPACE_NOT_FOUND),
                    no(WORKSPACE_NOT_FOUND),
                    no(WORKSPACE_NOT_FOUND),
                ],
            ),
            (
                "workspaces are per namespace",
                World::new()
                    .pods(pods())
                    .workspaces([workspace("ws").ns("other").runtime(RUNTIME)]),
                run("a").workspace("ws"),
                [
                    no(WORKSPACE_NOT_FOUND),
                    no(WORKSPACE_NOT_FOUND),
                    no(WORKSPACE_NOT_FOUND),
                ],
            ),
        ];
        for (case, world, r, want) in table {
            let got: Vec<_> = filter_verdicts(&WorkspacePlacement, &world, &r)
                .into_iter()
                .map(|(_, v)| v)
                .collect();
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn prefilter_fails_runs_that_cannot_use_the_workspace_naming_the_field() {
        let table = [
            (
                workspace("ws").runtime("bash"),
                "InvalidWorkspace",
                "spec.workspace.name: PersistentWorkspace \"ws\" belongs to Runtime \"bash\", not \"python\"",
            ),
            (
                workspace("ws").bound("p1").lost(),
                "WorkspaceLost",
                "spec.workspace.name: PersistentWorkspace \"ws\" is Lost: its Runtime Pod p1 is gone",
            ),
            (
                workspace("ws").released(),
                "InvalidWorkspace",
                "spec.workspace.name: PersistentWorkspace \"ws\" was Released",
            ),
        ];
        for (ws, want_reason, want_message) in table {
            let mut cache = World::new().pods(pods()).workspaces([ws]).cache();
            match schedule_one(&mut cache, &run("a").workspace("ws")) {
                ScheduleOutcome::Invalid { reason, message } => {
                    assert_eq!(reason, want_reason);
                    assert!(message.starts_with(want_message), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_burst_on_an_unbound_workspace_lands_on_one_pod_and_later_runs_follow() {
        let world = World::new()
            .pods(pods())
            .runs([run("busy").on("p1")])
            .workspaces([workspace("ws")]);
        let mut cache = world.cache();
        let mut placed = Vec::new();
        for n in 0..6 {
            match schedule_one(&mut cache, &run(&format!("r{n}")).workspace("ws")) {
                ScheduleOutcome::Reserved { pod, .. } => placed.push(pod),
                other => panic!("{other:?}"),
            }
        }
        // The first goes to the least loaded Pod; the rest follow its assumption although
        // p3 is emptier by then.
        assert_eq!(placed, ["p2"; 6]);
    }

    #[test]
    fn a_full_bound_pod_keeps_the_run_pending_with_both_reasons() {
        let world = World::new()
            .pods([
                pod("p1").capacity(&[("runs", 1)]),
                pod("p2").capacity(&[("runs", 8)]),
            ])
            .runs([run("busy").on("p1")])
            .workspaces([workspace("ws").bound("p1")]);
        let mut cache = world.cache();
        let ScheduleOutcome::Unschedulable(u) = schedule_one(&mut cache, &run("a").workspace("ws"))
        else {
            panic!()
        };
        assert_eq!(
            u.message(),
            "0/2 Runtime Pods are available: 1 Insufficient runs, 1 bound to another Runtime Pod."
        );
    }
}
