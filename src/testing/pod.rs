//! The Runtime Pod builder: [`pod`] / [`pods`] and [`PodBuilder`], a Runtime Pod with its
//! runtimed heartbeat Lease (fresh, renewed a while ago, missing or held by another), and the
//! Lease builders [`heartbeat_lease`] and [`lease`].

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

use super::objects::{
    FRESH_AGO, LEASE_SECONDS, NOW, NS, RUNTIME, RUNTIMED_IMAGE, setters, string_map,
    time_after_now, uid_or_default,
};
use crate::api::resources::{capacity_annotation, resource_of_annotation};
use crate::api::{LABEL_RUNTIME, LABEL_RUNTIME_POD};
use crate::runtimed::Identity;
use crate::runtimed::heartbeat::{self, desired_lease};

#[derive(Debug, Clone, PartialEq)]
enum LeaseState {
    Fresh,
    RenewedAgo(i64),
    Missing,
    Foreign,
}

#[derive(Debug, Clone)]
pub struct PodBuilder {
    name: String,
    namespace: String,
    runtime: String,
    uid: Option<String>,
    ready: bool,
    deleting: bool,
    annotations: BTreeMap<String, String>,
    lease: LeaseState,
}

/// A Ready Runtime Pod of [`RUNTIME`] in [`NS`] with UID `pod-uid-<name>`, a fresh heartbeat
/// and no capacity annotations (so the default runs capacity of 2).
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        uid: None,
        ready: true,
        deleting: false,
        annotations: BTreeMap::new(),
        lease: LeaseState::Fresh,
    }
}

/// One [`pod`] of `capacity` per name.
pub fn pods(names: &[&str], capacity: &[(&str, u64)]) -> Vec<PodBuilder> {
    names.iter().map(|n| pod(n).capacity(capacity)).collect()
}

impl PodBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        runtime(runtime: &str) => runtime = runtime.to_string();
        uid(uid: &str) => uid = Some(uid.to_string());
        ready() => ready = true;
        not_ready() => ready = false;
        /// Deleted, with a finalizer still holding it.
        deleting() => deleting = true;
        /// Heartbeat renewed `seconds` ago with a [`LEASE_SECONDS`] duration.
        lease_renewed_ago(seconds: i64) => lease = LeaseState::RenewedAgo(seconds);
        no_lease() => lease = LeaseState::Missing;
        /// A fresh Lease held by some other identity.
        foreign_lease() => lease = LeaseState::Foreign;
    }

    /// Replaces the capacity annotations, each written under
    /// [`capacity_annotation`]`(resource)` as the Runtime controller writes it.
    pub fn capacity(self, capacity: &[(&str, u64)]) -> Self {
        self.capacity_annotations(capacity)
    }

    /// Replaces the capacity annotations with raw (possibly malformed) values.
    pub fn capacity_strs(self, capacity: &[(&str, &str)]) -> Self {
        self.capacity_annotations(capacity)
    }

    fn capacity_annotations<V: ToString>(mut self, capacity: &[(&str, V)]) -> Self {
        self.annotations
            .retain(|key, _| resource_of_annotation(key).is_none());
        for (resource, value) in capacity {
            let key = capacity_annotation(resource).expect("an advertisable test resource");
            self.annotations.insert(key, value.to_string());
        }
        self
    }

    /// Any annotation but a capacity one (those go through [`Self::capacity`]).
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        assert!(
            resource_of_annotation(key).is_none(),
            "write capacity annotations with .capacity(), not .annotation({key:?})"
        );
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Heartbeat renewed 60 s ago with a 40 s duration.
    pub fn stale(self) -> Self {
        self.lease_renewed_ago(60)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn uid_value(&self) -> String {
        uid_or_default(&self.uid, "pod-uid", &self.name)
    }

    pub fn build(&self) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                uid: Some(self.uid_value()),
                labels: Some(string_map(&[
                    (LABEL_RUNTIME, &self.runtime),
                    (LABEL_RUNTIME_POD, &self.name),
                ])),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                deletion_timestamp: self.deleting.then_some(Time(NOW)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "runtimed".to_string(),
                    image: Some(RUNTIMED_IMAGE.to_string()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".to_string()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".to_string(),
                    status: if self.ready { "True" } else { "False" }.to_string(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// The heartbeat Lease at [`NOW`], held by this Pod's UID (`None` with [`Self::no_lease`]).
    pub fn build_lease(&self) -> Option<Lease> {
        self.lease_at(&self.uid_value(), NOW, LEASE_SECONDS)
    }

    /// The heartbeat Lease of this Pod as runtimed would have written it, for a Pod whose UID
    /// is `pod_uid`, seen at `now`. A fresh heartbeat holds for `fresh_seconds`; the stale
    /// ones for [`LEASE_SECONDS`].
    pub fn lease_at(&self, pod_uid: &str, now: Timestamp, fresh_seconds: i32) -> Option<Lease> {
        let (holder, ago, seconds) = match self.lease {
            LeaseState::Fresh => (pod_uid, FRESH_AGO, fresh_seconds),
            LeaseState::RenewedAgo(ago) => (pod_uid, ago, LEASE_SECONDS),
            LeaseState::Foreign => ("someone-else", FRESH_AGO, fresh_seconds),
            LeaseState::Missing => return None,
        };
        let renewed = now - SignedDuration::from_secs(ago);
        Some(heartbeat_lease(
            &self.namespace,
            &self.name,
            holder,
            renewed,
            seconds,
        ))
    }
}

/// The heartbeat Lease of Pod `pod` in `namespace` held by `holder`, renewed at `renewed` for
/// `seconds`: runtimed's own [`desired_lease`], labelled and owned as the scheduler expects.
pub fn heartbeat_lease(
    namespace: &str,
    pod: &str,
    holder: &str,
    renewed: Timestamp,
    seconds: i32,
) -> Lease {
    let me = Identity {
        pod_name: pod.to_string(),
        namespace: namespace.to_string(),
        pod_uid: holder.to_string(),
    };
    let duration = Duration::from_secs(u64::try_from(seconds).expect("a positive duration"));
    let config = heartbeat::Config {
        interval: duration / 2,
        duration,
    };
    let at = MicroTime(renewed);
    desired_lease(&me, &config, &at, &at)
}

/// A heartbeat Lease for `pod` in [`NS`], renewed `renewed_at` seconds after [`NOW`].
pub fn lease(pod: &str, holder: &str, renewed_at: i64, duration: i32) -> Lease {
    heartbeat_lease(NS, pod, holder, time_after_now(renewed_at), duration)
}
