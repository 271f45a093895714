//! The PriorityClass builder: [`priority_class`] and [`PriorityClassBuilder`], a
//! `scheduling.k8s.io/v1` PriorityClass with its value, preemption policy, global default and
//! kruntimes' preemptible annotation.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::objects::setters;

#[derive(Debug, Clone)]
pub struct PriorityClassBuilder {
    name: String,
    value: i32,
    global_default: bool,
    never: bool,
    preemptible: bool,
}

/// A `scheduling.k8s.io/v1` PriorityClass `name` of `value`, `PreemptLowerPriority`, not the
/// global default, not preemptible.
pub fn priority_class(name: &str, value: i32) -> PriorityClassBuilder {
    PriorityClassBuilder {
        name: name.to_string(),
        value,
        global_default: false,
        never: false,
        preemptible: false,
    }
}

impl PriorityClassBuilder {
    setters! {
        /// `globalDefault: true`.
        global_default() => global_default = true;
        /// `preemptionPolicy: Never`.
        preemption_never() => never = true;
        /// Annotated `kruntimes.io/preemptible: "true"` (level-2 preemption).
        preemptible() => preemptible = true;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn build(&self) -> k8s_openapi::api::scheduling::v1::PriorityClass {
        k8s_openapi::api::scheduling::v1::PriorityClass {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                uid: Some(format!("pc-uid-{}", self.name)),
                annotations: self.preemptible.then(|| {
                    BTreeMap::from([(
                        crate::api::ANNOTATION_PREEMPTIBLE.to_string(),
                        "true".to_string(),
                    )])
                }),
                ..Default::default()
            },
            value: Some(self.value),
            global_default: self.global_default.then_some(true),
            preemption_policy: Some(
                if self.never {
                    "Never"
                } else {
                    "PreemptLowerPriority"
                }
                .to_string(),
            ),
            description: None,
        }
    }
}
