//! The plugin registry: which Filter and Score plugins run, in which order, with which weight.
//!
//! Owns the deterministic order of the cycle's extension points and its validation. The
//! default plugin list lives with the plugins (`scheduler::plugins::registry`, as
//! kube-scheduler's `plugins/registry.go`), so the framework never imports a plugin. It must
//! not contain plugin logic.

use thiserror::Error;

use super::plugin::{ClusterEvent, FilterPlugin, QueueingHint, ScorePlugin};

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// Why a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegistryError {
    #[error("score plugin {plugin} has weight {weight}; weights must be positive")]
    Weight { plugin: &'static str, weight: i64 },
    #[error("plugin {plugin} is registered twice")]
    Duplicate { plugin: &'static str },
}

/// A Score plugin with its weight.
pub struct WeightedScore {
    pub plugin: Box<dyn ScorePlugin>,
    pub weight: i64,
}

/// Filters and scores in registration order.
pub struct Registry {
    filters: Vec<Box<dyn FilterPlugin>>,
    scores: Vec<WeightedScore>,
}

impl Registry {
    pub fn new(
        filters: Vec<Box<dyn FilterPlugin>>,
        scores: Vec<(Box<dyn ScorePlugin>, i64)>,
    ) -> Result<Self> {
        let mut names = std::collections::HashSet::new();
        for name in filters
            .iter()
            .map(|f| f.name())
            .chain(scores.iter().map(|(s, _)| s.name()))
        {
            if !names.insert(name) {
                return Err(RegistryError::Duplicate { plugin: name });
            }
        }
        let scores = scores
            .into_iter()
            .map(|(plugin, weight)| {
                if weight < 1 {
                    return Err(RegistryError::Weight {
                        plugin: plugin.name(),
                        weight,
                    });
                }
                Ok(WeightedScore { plugin, weight })
            })
            .collect::<Result<_>>()?;
        Ok(Registry { filters, scores })
    }

    pub fn filters(&self) -> &[Box<dyn FilterPlugin>] {
        &self.filters
    }

    pub fn scores(&self) -> &[WeightedScore] {
        &self.scores
    }

    /// The queueing hints of every Filter, per event: the union is what the queue applies.
    pub fn queueing_hints(&self) -> QueueingHints {
        let mut hints = QueueingHints::none();
        for event in ClusterEvent::ALL {
            let set = hints.of_mut(event);
            for filter in &self.filters {
                if let Some(hint) = filter.queueing_hint(event)
                    && !set.contains(&hint)
                {
                    set.push(hint);
                }
            }
            // PreFilter's own rejection, a Runtime that does not exist, ends with the Runtime.
            if event == ClusterEvent::RuntimeChanged && !set.contains(&QueueingHint::Queue) {
                set.push(QueueingHint::Queue);
            }
            set.sort();
        }
        hints
    }
}

/// Per [`ClusterEvent`], the distinct [`QueueingHint`]s the registered Filters declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueingHints {
    by_event: [Vec<QueueingHint>; ClusterEvent::ALL.len()],
}

impl QueueingHints {
    fn none() -> Self {
        QueueingHints {
            by_event: Default::default(),
        }
    }

    fn of_mut(&mut self, event: ClusterEvent) -> &mut Vec<QueueingHint> {
        &mut self.by_event[event as usize]
    }

    pub fn of(&self, event: ClusterEvent) -> &[QueueingHint] {
        &self.by_event[event as usize]
    }
}

impl Default for QueueingHints {
    /// Without a registry: every event moves every unschedulable Run (nothing is stranded).
    fn default() -> Self {
        QueueingHints {
            by_event: std::array::from_fn(|_| vec![QueueingHint::Queue]),
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "filters",
                &self.filters.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .field(
                "scores",
                &self
                    .scores
                    .iter()
                    .map(|s| (s.plugin.name(), s.weight))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::plugin::{RunCycleState, ScoreError};
    use crate::scheduler::framework::snapshot::{PodView, Snapshot};
    use crate::scheduler::framework::types::Rejection;

    /// A plugin that only has a name: the registry never looks further.
    struct Named(&'static str);

    impl FilterPlugin for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn queueing_hint(&self, _: ClusterEvent) -> Option<QueueingHint> {
            None
        }
        fn filter(
            &self,
            _: &Snapshot<'_>,
            _: &RunCycleState,
            _: &PodView<'_>,
        ) -> Result<(), Rejection> {
            Ok(())
        }
    }

    impl ScorePlugin for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn score(
            &self,
            _: &Snapshot<'_>,
            _: &RunCycleState,
            _: &PodView<'_>,
        ) -> Result<i64, ScoreError> {
            Ok(0)
        }
    }

    #[test]
    fn a_registry_refuses_non_positive_weights_and_duplicates() {
        let err = Registry::new(vec![], vec![(Box::new(Named("LeastLoaded")), 0)]).unwrap_err();
        assert_eq!(
            err,
            RegistryError::Weight {
                plugin: "LeastLoaded",
                weight: 0
            }
        );
        let err = Registry::new(
            vec![
                Box::new(Named("RunAffinity")),
                Box::new(Named("RunAffinity")),
            ],
            vec![],
        )
        .unwrap_err();
        assert_eq!(
            err,
            RegistryError::Duplicate {
                plugin: "RunAffinity"
            }
        );
    }
}
