//! The Runtime controller's pure part: what one reconcile must do to a Runtime's Pods
//! ([`plan`]) and the Pod it creates from the template ([`new_pod`]). It reads no clock (the
//! caller passes `now`) and calls no API server; [`super::reconcile`] carries a plan out.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource as _, ResourceExt};
use tracing::warn;

use crate::api::resources::{
    CAPACITY_ANNOTATION_PREFIX, Resources, capacity_annotation, parse_capacity_spec,
};
use crate::api::status::set_condition;
use crate::api::{LABEL_RUNTIME, LABEL_RUNTIME_POD, Runtime, RuntimeStatus, pod_is_ready};
use crate::runtime::pod::{self, Injection};

use super::reasons;

/// What one reconcile must do to a Runtime's Pods.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Pods to create from the template.
    pub create: usize,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    /// Annotation merge patches (value `None` removes the key), by Pod name.
    pub annotate: Vec<(String, BTreeMap<String, Option<String>>)>,
    pub status: RuntimeStatus,
    /// Set when the capacity is malformed: nothing else in the plan is carried out.
    pub invalid_capacity: Option<String>,
    /// The out-of-date Pods to start draining for the rollout.
    pub drain: Vec<String>,
    /// A rollout drain is under way: reconcile again soon.
    pub draining: bool,
}

/// Decides what to do for `runtime` given its current Pods and how many active Runs each
/// hosts (by Pod name). Pure.
///
/// Scaling down removes the Pods that disturb the least: fewest active Runs first (idle Pods
/// before any that run something, as a ReplicaSet prefers unassigned Pods), then not ready
/// before ready, then the newest names. A Pod a PersistentWorkspace is Bound to (`bound`)
/// is never removed while it is: its data would be lost, so the scale-down waits for the
/// workspace to be released, as a PodDisruptionBudget holds back an eviction. A Pod chosen
/// for removal is marked with [`ANNOTATION_SCALE_DOWN`] before it is deleted, so the
/// scheduler stops placing on it at once; Runs still on it end through the lifecycle rules
/// (runtimed's SIGTERM, or RuntimePodLost).
///
/// With the Pods' current `revision` (see [`crate::runtime::rollout`]), out-of-date Pods are drained
/// and replaced, at most the Runtime's `maxUnavailable` at a time, while the Runtime has its
/// wanted number; `None` rolls nothing.
pub fn plan(
    runtime: &Runtime,
    pods: &[Pod],
    active_runs: &BTreeMap<String, usize>,
    bound: &BTreeSet<String>,
    revision: Option<&str>,
    now: &Time,
) -> Plan {
    let mut status = runtime.status.clone().unwrap_or_default();
    status.observed_generation = runtime.metadata.generation;
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    status.replicas = live.len() as i32;
    status.ready_replicas = live.iter().filter(|p| pod_is_ready(p)).count() as i32;
    status.selector = Some(format!("{LABEL_RUNTIME}={}", runtime.name_any()));

    let capacity = match parse_capacity_spec(runtime.spec.capacity_resources()) {
        Ok(capacity) => capacity,
        Err(e) => {
            let message = format!(
                "Runtime {}: {e}; no Runtime Pod was changed",
                runtime.name_any()
            );
            set_condition(
                &mut status.conditions,
                "Ready",
                false,
                reasons::INVALID_CAPACITY,
                &message,
                now,
            );
            return Plan {
                status,
                invalid_capacity: Some(message),
                ..Default::default()
            };
        }
    };

    let wanted = runtime.spec.replicas.max(0) as usize;
    let mut plan = Plan {
        create: wanted.saturating_sub(live.len()),
        ..Default::default()
    };
    if live.len() > wanted {
        let mut victims: Vec<&Pod> = live
            .iter()
            .copied()
            .filter(|p| !bound.contains(&p.name_any()))
            .collect();
        victims.sort_by_key(|p| {
            let name = p.name_any();
            (
                active_runs.get(&name).copied().unwrap_or(0),
                pod_is_ready(p),
                std::cmp::Reverse(name),
            )
        });
        plan.delete = victims
            .into_iter()
            .take(live.len() - wanted)
            .map(|p| p.name_any())
            .collect();
    } else if let Some(revision) = revision
        && live.len() == wanted
    {
        let (strategy, _) = crate::runtime::rollout::Strategy::of(runtime.annotations());
        let step =
            crate::runtime::rollout::step(&live, revision, active_runs, bound, now, &strategy);
        plan.delete = step.delete;
        plan.drain = step.drain;
        plan.draining = step.draining;
    }
    status.updated_replicas = revision.map(|revision| {
        live.iter()
            .filter(|p| {
                p.annotations()
                    .get(crate::runtime::rollout::ANNOTATION_REVISION)
                    .map(String::as_str)
                    == Some(revision)
            })
            .count() as i32
    });

    let desired = capacity_annotations(&capacity);
    for pod in &live {
        if plan.delete.contains(&pod.name_any()) {
            continue;
        }
        let current = pod.annotations();
        let mut patch: BTreeMap<String, Option<String>> = BTreeMap::new();
        for (key, value) in &desired {
            if current.get(key) != Some(value) {
                patch.insert(key.clone(), Some(value.clone()));
            }
        }
        for key in current.keys() {
            if key.starts_with(CAPACITY_ANNOTATION_PREFIX) && !desired.contains_key(key) {
                patch.insert(key.clone(), None);
            }
        }
        if !patch.is_empty() {
            plan.annotate.push((pod.name_any(), patch));
        }
    }

    let (ready, reason, message) =
        if status.ready_replicas >= wanted as i32 && status.replicas == wanted as i32 {
            (
                true,
                reasons::ALL_READY,
                format!(
                    "{} of {wanted} Runtime Pods are ready",
                    status.ready_replicas
                ),
            )
        } else {
            (
                false,
                reasons::NOT_READY,
                format!(
                    "{} of {wanted} Runtime Pods are ready",
                    status.ready_replicas
                ),
            )
        };
    set_condition(
        &mut status.conditions,
        "Ready",
        ready,
        reason,
        &message,
        now,
    );
    plan.status = status;
    plan
}

/// The annotations that carry a validated capacity (`parse_capacity_spec` has already
/// checked that every name has a key).
pub(super) fn capacity_annotations(capacity: &Resources) -> BTreeMap<String, String> {
    capacity
        .iter()
        .filter_map(|(name, amount)| Some((capacity_annotation(name).ok()?, amount.to_string())))
        .collect()
}

/// The revision of a Pod made by [`new_pod`] (see [`crate::runtime::rollout::revision`]).
pub(super) fn revision_of(pod: &Pod) -> String {
    pod.annotations()
        .get(crate::runtime::rollout::ANNOTATION_REVISION)
        .cloned()
        .unwrap_or_default()
}

/// A new Runtime Pod from the template: owned by the Runtime, labelled for selection and
/// affinity, capacity annotated, and completed by [`pod::complete`] (runtimed from the
/// kruntimes image unless the template opts out, identity through the downward API) and
/// [`pod::with_workspace_volume`] (where its PersistentWorkspaces live) and
/// [`pod::with_artifact_store`] (where its Runs' artifacts are stored).
pub fn new_pod(
    runtime: &Runtime,
    name: &str,
    capacity_annotations: &BTreeMap<String, String>,
    injection: &Injection,
) -> Pod {
    let PodTemplateSpec { metadata, spec } = runtime.spec.template.clone();
    let mut metadata = metadata.unwrap_or_default();
    // What the template says of the Pod's metadata, before this controller adds its own.
    let template_meta = (metadata.labels.clone(), metadata.annotations.clone());
    let inject = pod::injects(&metadata);
    metadata.name = Some(name.to_string());
    metadata.namespace = runtime.namespace();
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(LABEL_RUNTIME.into(), runtime.name_any());
    labels.insert(LABEL_RUNTIME_POD.into(), name.to_string());
    metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(capacity_annotations.clone());
    metadata.owner_references = runtime.controller_owner_ref(&()).map(|r| vec![r]);
    let server = pod::Server {
        port: runtime.spec.port,
        daemon_image: runtime.spec.daemon_image.clone(),
    };
    let spec = pod::complete_with_server(spec.unwrap_or_default(), injection, inject, &server);
    let spec = crate::runtime::identity::with_service_account(spec, runtime);
    let (size_limit, wrong) = pod::workspace_size_limit(runtime.annotations());
    let (spec, workspace) =
        pod::with_workspace_volume(spec, runtime.spec.workspace.as_ref(), &size_limit, inject);
    let spec = pod::with_state_volume(spec, inject);
    for why in workspace.err().into_iter().chain(wrong) {
        warn!(runtime = %runtime.name_any(), namespace = %runtime.namespace().unwrap_or_default(), "{why}");
    }
    let spec = match runtime
        .spec
        .artifact_store
        .as_ref()
        .map(pod::ArtifactStore::of)
    {
        None => spec,
        Some(Ok(store)) => pod::with_artifact_store(spec, &store, inject),
        Some(Err(why)) => {
            warn!(runtime = %runtime.name_any(), namespace = %runtime.namespace().unwrap_or_default(), "{why}; its Runs' artifacts are not stored");
            spec
        }
    };
    metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            crate::runtime::rollout::ANNOTATION_REVISION.into(),
            crate::runtime::rollout::revision(&template_meta, &spec),
        );
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}
