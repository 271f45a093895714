//! Priority: the cluster's `scheduling.k8s.io/v1` PriorityClasses as the scheduler reads them,
//! and the one rule that gives a Run its priority.
//!
//! Owns class records (value, `globalDefault`, `preemptionPolicy`, the
//! `kruntimes.io/preemptible` annotation) and resolution: a Run's priority is its recorded
//! `status.priority` once the scheduler has written it (a class edited or deleted later does
//! not reorder it, as with a Pod's `spec.priority`), else the value of `spec.priorityClassName`,
//! else of the global default class (the lowest-valued one when several claim it, as the
//! Kubernetes admission plugin picks), else 0. It must not order queues or choose victims.

use std::collections::BTreeMap;

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::ResourceExt;

use crate::api::{ANNOTATION_PREEMPTIBLE, Run};

/// `preemptionPolicy: Never`: a Run of such a class never preempts (it still orders first).
pub const PREEMPT_NEVER: &str = "Never";

/// What the scheduler keeps of one PriorityClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRecord {
    pub value: i32,
    pub global_default: bool,
    /// `preemptionPolicy` is not `Never`: its Runs may preempt lower-priority ones.
    pub preempts: bool,
    /// Annotated `kruntimes.io/preemptible: "true"`: its Running Runs may be stopped and sent
    /// back to Pending for a higher-priority Run (level 2). Off unless an admin opts in.
    pub preemptible: bool,
}

impl ClassRecord {
    pub fn of(class: &PriorityClass) -> Self {
        ClassRecord {
            value: class.value.unwrap_or(0),
            global_default: class.global_default.unwrap_or(false),
            preempts: class.preemption_policy.as_deref() != Some(PREEMPT_NEVER),
            preemptible: class
                .annotations()
                .get(ANNOTATION_PREEMPTIBLE)
                .is_some_and(|v| v == "true"),
        }
    }
}

/// `spec.priorityClassName` names a class that does not exist: the Run waits for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "spec.priorityClassName: PriorityClass {0:?} not found: create it (kubectl get priorityclasses lists them), or recreate the Run with an existing class"
)]
pub struct MissingClass(pub String);

/// Every PriorityClass by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityClasses {
    by_name: BTreeMap<String, ClassRecord>,
}

impl PriorityClasses {
    /// Records a class; returns whether anything a Run's priority reads changed.
    pub fn apply(&mut self, class: &PriorityClass) -> bool {
        let record = ClassRecord::of(class);
        self.by_name.insert(class.name_any(), record.clone()) != Some(record)
    }

    pub fn delete(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }

    /// Replaces every class (a relist); returns whether anything changed.
    pub fn reset(&mut self, classes: &[PriorityClass]) -> bool {
        let listed: BTreeMap<String, ClassRecord> = classes
            .iter()
            .map(|c| (c.name_any(), ClassRecord::of(c)))
            .collect();
        let changed = listed != self.by_name;
        self.by_name = listed;
        changed
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&ClassRecord> {
        self.by_name.get(name)
    }

    /// The global default class: among those with `globalDefault`, the lowest value, then
    /// the first name.
    pub fn global_default(&self) -> Option<(&str, &ClassRecord)> {
        self.by_name
            .iter()
            .filter(|(_, c)| c.global_default)
            .min_by_key(|(name, c)| (c.value, name.as_str()))
            .map(|(name, c)| (name.as_str(), c))
    }

    /// The class that governs `run`: its own, or the global default when it names none
    /// (`None` when there is neither).
    pub fn class_of<'a>(
        &'a self,
        run: &'a Run,
    ) -> Result<Option<(&'a str, &'a ClassRecord)>, MissingClass> {
        match run.spec.priority_class_name.as_deref() {
            Some(name) => self
                .by_name
                .get(name)
                .map(|c| Some((name, c)))
                .ok_or_else(|| MissingClass(name.to_string())),
            None => Ok(self.global_default()),
        }
    }

    /// The Run's priority (see the module documentation). A recorded `status.priority` wins
    /// even when the class is gone.
    pub fn priority_of(&self, run: &Run) -> Result<i32, MissingClass> {
        if let Some(recorded) = run.status.as_ref().and_then(|s| s.priority) {
            return Ok(recorded);
        }
        Ok(self.class_of(run)?.map_or(0, |(_, c)| c.value))
    }

    /// Whether the Run may preempt lower-priority Runs (its class's `preemptionPolicy`; a Run
    /// without a class may).
    pub fn preempts(&self, run: &Run) -> bool {
        self.class_of(run)
            .ok()
            .flatten()
            .is_none_or(|(_, c)| c.preempts)
    }

    /// Whether the class named `name` (a Run's `spec.priorityClassName`, `None` for the
    /// global default) lets its Running Runs be preempted.
    pub fn preemptible(&self, name: Option<&str>) -> bool {
        let class = match name {
            Some(name) => self.by_name.get(name),
            None => self.global_default().map(|(_, c)| c),
        };
        class.is_some_and(|c| c.preemptible)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{priority_class, run};

    #[test]
    fn a_recorded_priority_wins_then_the_class_then_the_lowest_global_default_then_zero() {
        let mut classes = PriorityClasses::default();
        assert_eq!(classes.priority_of(&run("a").build()), Ok(0));
        classes.apply(&priority_class("high", 1000).build());
        classes.apply(&priority_class("low-default", 10).global_default().build());
        classes.apply(&priority_class("mid-default", 20).global_default().build());
        assert_eq!(classes.priority_of(&run("a").build()), Ok(10));
        assert_eq!(
            classes.priority_of(&run("a").priority_class("high").build()),
            Ok(1000)
        );
        assert_eq!(
            classes.priority_of(&run("a").priority_class("high").priority(5).build()),
            Ok(5),
            "recorded once, kept"
        );
        assert_eq!(
            classes.priority_of(&run("a").priority_class("nope").build()),
            Err(MissingClass("nope".into()))
        );
        let message = MissingClass("nope".into()).to_string();
        assert!(message.starts_with("spec.priorityClassName: PriorityClass \"nope\" not found"));
    }

    #[test]
    fn preemption_policy_and_the_preemptible_annotation_are_read_per_class() {
        let mut classes = PriorityClasses::default();
        classes.apply(&priority_class("never", 100).preemption_never().build());
        classes.apply(&priority_class("batch", 0).preemptible().build());
        classes.apply(&priority_class("plain", 0).build());
        assert!(!classes.preempts(&run("a").priority_class("never").build()));
        assert!(classes.preempts(&run("a").priority_class("plain").build()));
        assert!(classes.preempts(&run("a").build()));
        assert!(classes.preemptible(Some("batch")));
        assert!(!classes.preemptible(Some("plain")));
        assert!(!classes.preemptible(None));
        assert!(!classes.preemptible(Some("gone")));
    }
}
