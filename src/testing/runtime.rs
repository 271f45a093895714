//! The Runtime builder: [`runtime`] and [`RuntimeBuilder`], a Runtime with its replicas,
//! declared capacity and a Pod template whose container runs `runtimed`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::objects::{NS, RUNTIMED_IMAGE, quantities, setters, string_map, uid_or_default};
use crate::api::{Runtime, RuntimeCapacity, RuntimeSpec};

#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    name: String,
    namespace: String,
    uid: Option<String>,
    generation: Option<i64>,
    replicas: i32,
    capacity: BTreeMap<String, Quantity>,
    template_labels: BTreeMap<String, String>,
}

/// A Runtime in [`NS`] with UID `runtime-uid-<name>`, one replica, no declared capacity and a
/// template whose one container runs `runtimed`.
pub fn runtime(name: &str) -> RuntimeBuilder {
    RuntimeBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        uid: None,
        generation: None,
        replicas: 1,
        capacity: BTreeMap::new(),
        template_labels: BTreeMap::new(),
    }
}

impl RuntimeBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        uid(uid: &str) => uid = Some(uid.to_string());
        generation(generation: i64) => generation = Some(generation);
        replicas(replicas: i32) => replicas = replicas;
    }

    /// Declares whole-number capacities in `spec.capacity.resources`.
    pub fn capacity(mut self, capacity: &[(&str, u64)]) -> Self {
        self.capacity.extend(quantities(capacity));
        self
    }

    /// Declares capacities as raw (possibly malformed) quantity strings.
    pub fn capacity_strs(mut self, capacity: &[(&str, &str)]) -> Self {
        self.capacity.extend(quantities(capacity));
        self
    }

    /// Labels of the Pod template.
    pub fn template_labels(mut self, labels: &[(&str, &str)]) -> Self {
        self.template_labels.extend(string_map(labels));
        self
    }

    pub fn build(&self) -> Runtime {
        let template = PodTemplateSpec {
            metadata: (!self.template_labels.is_empty()).then(|| ObjectMeta {
                labels: Some(self.template_labels.clone()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "runtimed".to_string(),
                    image: Some(RUNTIMED_IMAGE.to_string()),
                    args: Some(vec!["runtimed".to_string()]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let mut runtime = Runtime::new(
            &self.name,
            RuntimeSpec {
                replicas: self.replicas,
                template,
                ..Default::default()
            },
        );
        runtime.spec.capacity = (!self.capacity.is_empty()).then(|| RuntimeCapacity {
            resources: self.capacity.clone(),
        });
        let meta = &mut runtime.metadata;
        meta.namespace = Some(self.namespace.clone());
        meta.uid = Some(uid_or_default(&self.uid, "runtime-uid", &self.name));
        meta.generation = self.generation;
        runtime
    }
}
