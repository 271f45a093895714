//! The Ready condition of Workflow and Action definitions: `True` (`Accepted`) once the
//! definition's generation is seen, as the Go kruntimes controller reports it. What a
//! definition means is checked where it runs (a WorkflowRun), so this decides nothing else.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::{WatchStreamExt as _, reflector};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::lenient::Lenient;
use crate::api::{Action, Workflow, WorkflowStatus, patch_params};
use crate::kubeclient::{lenient_watch, scoped_api};

/// The condition a definition reports.
pub const CONDITION_READY: &str = "Ready";

/// A definition kind: its status and what its Ready message says.
pub trait Definition:
    Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + Default
    + serde::Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    const MESSAGE: &'static str;
    fn status(&self) -> Option<&WorkflowStatus>;
}

impl Definition for Workflow {
    const MESSAGE: &'static str = "Workflow definition accepted; a WorkflowRun executes it";
    fn status(&self) -> Option<&WorkflowStatus> {
        self.status.as_ref()
    }
}

impl Definition for Action {
    const MESSAGE: &'static str = "Action definition accepted; a WorkflowRun executes it";
    fn status(&self) -> Option<&WorkflowStatus> {
        self.status.as_ref()
    }
}

/// Whether `definition`'s Ready condition is current: True for its generation.
pub fn is_ready<K: Definition>(definition: &K) -> bool {
    let generation = definition.meta().generation;
    definition
        .status()
        .into_iter()
        .flat_map(|s| &s.conditions)
        .any(|c| {
            c.type_ == CONDITION_READY && c.status == "True" && c.observed_generation == generation
        })
}

/// Keeps every definition of kind `K` Ready until `shutdown` resolves.
pub async fn run<K: Definition>(
    client: Client,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<Lenient<K>> = scoped_api(&client, namespace.as_deref());
    let (store, writer) = reflector::store();
    let stream = lenient_watch(api, Default::default())
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(stream, store)
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile::<K>,
            |_, _, _| Requeue::requeue(Duration::from_secs(5)),
            Arc::new(client),
        )
        .for_each(|_| async {})
        .await;
}

async fn reconcile<K: Definition>(
    definition: Arc<K>,
    client: Arc<Client>,
) -> Result<Requeue, kube::Error> {
    if definition.meta().deletion_timestamp.is_some() || is_ready(definition.as_ref()) {
        return Ok(Requeue::await_change());
    }
    let ns = definition.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.as_ref().clone(), &ns);
    let mut conditions: Vec<Condition> = definition
        .status()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != CONDITION_READY);
    conditions.push(Condition {
        type_: CONDITION_READY.into(),
        status: "True".into(),
        reason: "Accepted".into(),
        message: K::MESSAGE.into(),
        last_transition_time: Time(jiff::Timestamp::now()),
        observed_generation: definition.meta().generation,
    });
    let patch = Patch::Merge(json!({"status": {"conditions": conditions}}));
    api.patch_status(&definition.name_any(), &patch_params(), &patch)
        .await?;
    Ok(Requeue::await_change())
}
