//! The scheduler plugins, one file each; the file name is the plugin's registry key in
//! snake_case. Each exposes `NAME`, its bounded reason constants and its table-driven tests.
//!
//! Plugins read the snapshot and the Run's prepared state; they must not patch Kubernetes
//! objects, mutate the index or the assumed cache, or choose a Pod. [`registry`] is the one
//! list of the plugins the scheduler and `explain` run, as kube-scheduler's
//! `plugins/registry.go`.

pub mod least_loaded;
pub mod preferred_run_affinity;
pub mod run_affinity;
pub mod runtime_pod_availability;
pub mod workspace_placement;

pub use least_loaded::LeastLoaded;
pub use preferred_run_affinity::PreferredRunAffinity;
pub use run_affinity::RunAffinity;
pub use runtime_pod_availability::RuntimePodAvailability;
pub use workspace_placement::WorkspacePlacement;

use crate::scheduler::framework::Registry;

/// The registry the scheduler and `explain` use. Filters: RuntimePodAvailability,
/// WorkspacePlacement, RunAffinity. Scores: PreferredRunAffinity (weight 1), LeastLoaded (weight 1).
pub fn registry() -> Registry {
    Registry::new(
        vec![
            Box::new(RuntimePodAvailability),
            Box::new(WorkspacePlacement),
            Box::new(RunAffinity),
        ],
        vec![
            (Box::new(PreferredRunAffinity), 1),
            (Box::new(LeastLoaded), 1),
        ],
    )
    .expect("the default registry is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_registry_lists_plugins_in_the_documented_order() {
        let r = registry();
        let filters: Vec<_> = r.filters().iter().map(|f| f.name()).collect();
        assert_eq!(
            filters,
            [
                "RuntimePodAvailability",
                "WorkspacePlacement",
                "RunAffinity"
            ]
        );
        let scores: Vec<_> = r
            .scores()
            .iter()
            .map(|s| (s.plugin.name(), s.weight))
            .collect();
        assert_eq!(scores, [("PreferredRunAffinity", 1), ("LeastLoaded", 1)]);
    }

    #[test]
    fn the_default_registry_moves_unschedulable_runs_on_the_events_its_filters_declare() {
        use crate::scheduler::framework::{ClusterEvent as E, QueueingHint as H};
        let hints = registry().queueing_hints();
        let table = [
            (E::CapacityReleased, &[H::QueueIfRoom][..]),
            (E::RuntimePodChanged, &[H::Queue]),
            (E::RuntimeChanged, &[H::Queue]),
            (E::TargetsChanged, &[H::QueueRequiredTerms]),
            (E::WorkspaceChanged, &[H::QueueWorkspaceUsers]),
        ];
        for (event, want) in table {
            assert_eq!(hints.of(event), want, "{event:?}");
        }
    }
}
