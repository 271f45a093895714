//! The agent's two watches, as far as they are more than wiring: which Runs it watches (its
//! Pod's, by field selector, or the namespace's where the API server refuses that selector)
//! and what its Pod's watch says of the capacity it admits against.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;

use super::super::{Error, Result};
use super::Agent;
use crate::api::Run;
use crate::api::lenient::Lenient;
use crate::api::resources::parse_capacity_annotations;

impl Agent {
    /// Picks the Run watch: `status.assignedPod=<pod>` on the server, or — when the API server
    /// refuses that field selector — the whole namespace, filtered here by [`plan`].
    pub(super) async fn runs_watch_config(&self) -> Result<watcher::Config> {
        let selector = format!("status.assignedPod={}", self.me.pod_name);
        let probe = ListParams::default().fields(&selector).limit(1);
        // Leniently: a Run that does not decode must not fail the probe (and runtimed's start).
        let lenient: Api<Lenient<Run>> =
            Api::namespaced(self.runs_api.clone().into_client(), &self.me.namespace);
        match lenient.list(&probe).await {
            Ok(_) => {
                tracing::info!("watching Runs with the field selector {selector}");
                Ok(watcher::Config::default().fields(&selector))
            }
            Err(kube::Error::Api(s)) if s.code == 400 => {
                tracing::warn!(
                    "the API server refused the field selector {selector} ({}); watching every Run in namespace {} and filtering by status.assignedPod here",
                    s.message,
                    self.me.namespace
                );
                Ok(watcher::Config::default())
            }
            Err(source) => Err(Error::Kube {
                doing: format!("listing the Runs of namespace {}", self.me.namespace),
                source,
            }),
        }
    }

    /// Re-reads the Pod's capacity annotations into the cache.
    pub(super) fn refresh_capacity(&mut self, pods: &Store<Pod>) {
        let pod = pods
            .state()
            .into_iter()
            .find(|p| p.name_any() == self.me.pod_name);
        let capacity = match pod {
            None => {
                tracing::warn!(
                    "Pod {}/{} does not exist; admitting no Run until it does",
                    self.me.namespace,
                    self.me.pod_name
                );
                None
            }
            Some(pod) if pod.uid().as_deref() != Some(self.me.pod_uid.as_str()) => {
                tracing::warn!(
                    "Pod {}/{} has UID {}, not this agent's {}; admitting no Run",
                    self.me.namespace,
                    self.me.pod_name,
                    pod.uid().unwrap_or_default(),
                    self.me.pod_uid
                );
                None
            }
            Some(pod) => match parse_capacity_annotations(pod.annotations()) {
                Ok(capacity) => Some(capacity),
                Err(e) => {
                    tracing::warn!(
                        "Pod {}/{} has an invalid capacity ({e}); admitting no Run until it is fixed",
                        self.me.namespace,
                        self.me.pod_name
                    );
                    None
                }
            },
        };
        if self.records.set_capacity(capacity) {
            match self.records.cache().capacity() {
                Some(c) => tracing::info!("capacity of Pod {} is {c}", self.me.pod_name),
                None => tracing::info!("capacity of Pod {} is unknown", self.me.pod_name),
            }
        }
    }
}
