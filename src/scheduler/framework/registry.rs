//! The plugin registry: which Filter and Score plugins run, in which order, with which weight.
//!
//! Owns the deterministic order of the cycle's extension points. The default registry is the
//! only one the scheduler and `explain` use; weights are internal in v0.x. It must not contain
//! plugin logic.

use thiserror::Error;

use super::types::{FilterPlugin, ScorePlugin};
use crate::scheduler::plugins::{
    LeastLoaded, PreferredRunAffinity, RunAffinity, RuntimePodAvailability,
};

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
}

impl Default for Registry {
    /// Filters: RuntimePodAvailability, RunAffinity. Scores: PreferredRunAffinity (weight 1),
    /// LeastLoaded (weight 1).
    fn default() -> Self {
        Registry::new(
            vec![Box::new(RuntimePodAvailability), Box::new(RunAffinity)],
            vec![
                (Box::new(PreferredRunAffinity), 1),
                (Box::new(LeastLoaded), 1),
            ],
        )
        .expect("the default registry is valid")
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

    #[test]
    fn the_default_registry_lists_plugins_in_the_documented_order() {
        let r = Registry::default();
        let filters: Vec<_> = r.filters().iter().map(|f| f.name()).collect();
        assert_eq!(filters, ["RuntimePodAvailability", "RunAffinity"]);
        let scores: Vec<_> = r
            .scores()
            .iter()
            .map(|s| (s.plugin.name(), s.weight))
            .collect();
        assert_eq!(scores, [("PreferredRunAffinity", 1), ("LeastLoaded", 1)]);
    }

    #[test]
    fn a_registry_refuses_non_positive_weights_and_duplicates() {
        let err = Registry::new(vec![], vec![(Box::new(LeastLoaded), 0)]).unwrap_err();
        assert_eq!(
            err,
            RegistryError::Weight {
                plugin: "LeastLoaded",
                weight: 0
            }
        );
        let err =
            Registry::new(vec![Box::new(RunAffinity), Box::new(RunAffinity)], vec![]).unwrap_err();
        assert_eq!(
            err,
            RegistryError::Duplicate {
                plugin: "RunAffinity"
            }
        );
    }
}
