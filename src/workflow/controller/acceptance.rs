//! Acceptance: a WorkflowRun's jobs checked, the Actions its steps call read and checked, and
//! both frozen as the snapshot, a ControllerRevision the WorkflowRun owns; and that snapshot
//! read back on every later reconcile. What is checked is [`crate::workflow::plan`]'s; this
//! module only reads and writes the objects.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use tracing::info;

use super::{Error, REASON_REFUSED};
use crate::api::{Action, LABEL_WORKFLOW_RUN_UID, WorkflowRun, WorkflowRunStatus, post_params};
use crate::workflow::plan;
use crate::workflow::snapshot::{self, FrozenAction, Snapshot};

/// The WorkflowRun's frozen snapshot, once it was accepted (or its snapshot written before a
/// crash let the acceptance be written).
pub(super) async fn load_snapshot(
    client: &Client,
    workflow_run: &WorkflowRun,
    status: &WorkflowRunStatus,
) -> Result<Option<Snapshot>, Error> {
    let ns = workflow_run.namespace().unwrap_or_default();
    let name = if status.snapshot_name.is_empty() {
        snapshot::snapshot_name(
            &workflow_run.name_any(),
            &workflow_run.uid().unwrap_or_default(),
        )
    } else {
        status.snapshot_name.clone()
    };
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let Some(revision) = api.get_opt(&name).await? else {
        return Ok(None);
    };
    decode_revision(workflow_run, &revision).map(Some)
}

fn decode_revision(
    workflow_run: &WorkflowRun,
    revision: &ControllerRevision,
) -> Result<Snapshot, Error> {
    let ns = workflow_run.namespace().unwrap_or_default();
    let name = revision.name_any();
    if revision.labels().get(LABEL_WORKFLOW_RUN_UID) != workflow_run.uid().as_ref() {
        return Err(Error::Snapshot(format!(
            "the snapshot {ns}/{name} belongs to another WorkflowRun"
        )));
    }
    let raw = revision
        .data
        .as_ref()
        .map(|d| &d.0)
        .cloned()
        .unwrap_or_default();
    Snapshot::decode(&raw).map_err(|e| Error::Snapshot(format!("snapshot {ns}/{name}: {e}")))
}

/// Accepts the WorkflowRun, or refuses it with why: its jobs checked, the Actions its steps
/// call read and checked, the snapshot of both frozen as a ControllerRevision it owns.
pub(super) async fn accept(
    client: &Client,
    workflow_run: &WorkflowRun,
    status: &mut WorkflowRunStatus,
) -> Result<(), Error> {
    let now = Time(jiff::Timestamp::now());
    let generation = workflow_run.meta().generation;
    let refuse = |status: &mut WorkflowRunStatus, why: &str| {
        plan::refuse(status, REASON_REFUSED, why, generation, &now);
    };
    let ns = workflow_run.namespace().unwrap_or_default();
    let name = snapshot::snapshot_name(
        &workflow_run.name_any(),
        &workflow_run.uid().unwrap_or_default(),
    );
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let snapshot = match api.get_opt(&name).await? {
        Some(revision) => decode_revision(workflow_run, &revision)?,
        None => {
            let mut snapshot = Snapshot {
                spec: workflow_run.spec.clone(),
                ..Snapshot::default()
            };
            if let Err(why) = plan::check_jobs(&snapshot.spec.jobs) {
                refuse(status, &why);
                return Ok(());
            }
            match read_actions(client, &ns, &snapshot).await? {
                Ok(actions) => snapshot.actions = actions,
                Err(why) => {
                    refuse(status, &why);
                    return Ok(());
                }
            }
            let raw = match snapshot.encode() {
                Ok(raw) => raw,
                Err(why) => {
                    refuse(status, &why);
                    return Ok(());
                }
            };
            let revision = ControllerRevision {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    labels: Some(BTreeMap::from([(
                        LABEL_WORKFLOW_RUN_UID.to_string(),
                        workflow_run.uid().unwrap_or_default(),
                    )])),
                    owner_references: workflow_run.controller_owner_ref(&()).map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                revision: 1,
                data: Some(RawExtension(
                    serde_json::from_slice(&raw).map_err(|e| Error::Snapshot(e.to_string()))?,
                )),
            };
            match api.create(&post_params(), &revision).await {
                Ok(_) => snapshot,
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    decode_revision(workflow_run, &api.get(&name).await?)?
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    plan::accept(status, &snapshot, &name, generation, &now);
    info!("WorkflowRun {ns}/{} accepted", workflow_run.name_any());
    Ok(())
}

/// The Actions the steps of `snapshot` call, read now to be frozen, or why one cannot be.
async fn read_actions(
    client: &Client,
    ns: &str,
    snapshot: &Snapshot,
) -> Result<Result<BTreeMap<String, FrozenAction>, String>, Error> {
    let api: Api<Action> = Api::namespaced(client.clone(), ns);
    let mut actions = BTreeMap::new();
    for (job, spec) in &snapshot.spec.jobs {
        for step in spec.steps.iter().filter(|s| s.calls_action()) {
            let Some(action) = api.get_opt(&step.uses).await? else {
                return Ok(Err(format!(
                    "Action {:?} for step {:?} in job {job:?} does not exist",
                    step.uses, step.name
                )));
            };
            if let Err(why) = plan::check_action(&action.spec) {
                return Ok(Err(format!(
                    "Action {:?} for step {:?} in job {job:?}: {why}",
                    step.uses, step.name
                )));
            }
            let frozen = FrozenAction {
                name: action.name_any(),
                spec: action.spec,
            };
            actions.insert(snapshot::action_key(job, &step.name), frozen);
        }
    }
    Ok(Ok(actions))
}
