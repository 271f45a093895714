//! The WorkflowRun controller's effects: it reads a WorkflowRun, its snapshot and its
//! children, asks [`super::plan`] what its status is and what to do, does that (freeze the
//! snapshot, create Runs and child WorkflowRuns, ask children to cancel) and writes the status
//! back. Decides nothing itself. Freezing and reading back the snapshot is [`acceptance`]'s.
//!
//! Everything that matters is in the objects: a restarted controller finds each step's Run by
//! its labels and each call by its name, and starts nothing twice (the names are derived, a
//! create that finds its object there already takes it). The status is written with the
//! resourceVersion it was derived from, so a stale read costs a retry, never a lost update.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PostParams};
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use thiserror::Error;
use tracing::warn;

use crate::api::{
    ANNOTATION_SUBMITTED_BY, LABEL_WORKFLOW_RUN_UID, Run, RunSpec, RunStatus, Workflow,
    WorkflowPhase, WorkflowRun, WorkflowRunStatus, patch_params, post_params,
};
use crate::kubeclient::{lenient_watch, scoped_api};

use super::metrics::WorkflowMetrics;
use super::plan::{self, Children, Plan, StepRun, Target};
use super::snapshot::Snapshot;
use super::template;

mod acceptance;

use acceptance::{accept, load_snapshot};

/// The reason of `Accepted=False` when a WorkflowRun is refused.
pub const REASON_REFUSED: &str = "WorkflowValidationFailed";

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Snapshot(String),
}

struct Context {
    client: Client,
    /// The Runs that WorkflowRuns own, each kept only as far as the planner reads it.
    runs: Store<Run>,
    metrics: WorkflowMetrics,
    recorder: Recorder,
}

/// Runs the WorkflowRun controller until `shutdown` resolves, over one namespace or all.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    metrics: WorkflowMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let scope = namespace.as_deref();
    let owned = watcher::Config::default().labels(LABEL_WORKFLOW_RUN_UID);
    let (runs, runs_writer) = reflector::store();
    let child_runs = lenient_watch(scoped_api(&client, scope), owned.clone())
        .modify(keep_what_the_planner_reads)
        .reflect(runs_writer)
        .touched_objects();
    let (workflow_runs, writer) = reflector::store();
    let workflow_run_stream = lenient_watch(scoped_api(&client, scope), Default::default())
        .reflect(writer)
        .applied_objects();
    let child_calls =
        lenient_watch::<WorkflowRun>(scoped_api(&client, scope), owned).touched_objects();
    let reporter = Reporter {
        controller: "kruntimes-workflow-controller".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        runs,
        metrics,
    });
    Controller::for_stream(workflow_run_stream, workflow_runs)
        .owns_stream(child_runs)
        .owns_stream(child_calls)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// A child Run as the planner reads it: its identity, labels, cancel request, phase and outputs.
/// The scheduler keeps the whole Run; this copy is small.
fn keep_what_the_planner_reads(run: &mut Run) {
    run.spec = RunSpec {
        cancel_requested: run.spec.cancel_requested,
        ..RunSpec::default()
    };
    run.status = run.status.take().map(|s| RunStatus {
        phase: s.phase,
        outputs: s.outputs,
        ..RunStatus::default()
    });
    run.metadata.annotations = None;
}

fn error_policy(workflow_run: Arc<WorkflowRun>, err: &Error, _: Arc<Context>) -> Requeue {
    let conflict = matches!(err, Error::Api(kube::Error::Api(s)) if s.code == 409);
    if !conflict {
        warn!(
            "reconciling WorkflowRun {}/{} failed: {err}; retrying",
            workflow_run.namespace().unwrap_or_default(),
            workflow_run.name_any()
        );
    }
    Requeue::requeue(Duration::from_secs(if conflict { 1 } else { 5 }))
}

async fn reconcile(workflow_run: Arc<WorkflowRun>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    if workflow_run.meta().deletion_timestamp.is_some() {
        return Ok(Requeue::await_change());
    }
    let ns = workflow_run.namespace().unwrap_or_default();
    let uid = workflow_run.uid().unwrap_or_default();
    let before = workflow_run.status.clone().unwrap_or_default();
    // An ended WorkflowRun has nothing left to do, unless a cancel must still reach a child.
    if before.phase.is_terminal() && !workflow_run.spec.cancel_requested {
        return Ok(Requeue::await_change());
    }
    let snapshot = if before.phase.is_terminal() {
        None
    } else {
        load_snapshot(&ctx.client, &workflow_run, &before).await?
    };
    if snapshot.is_none() && before.jobs.is_some() && !before.phase.is_terminal() {
        return Err(Error::Snapshot(format!(
            "WorkflowRun {ns}/{} has jobs but its snapshot {} is gone",
            workflow_run.name_any(),
            before.snapshot_name
        )));
    }
    let runs: Vec<Arc<Run>> = ctx
        .runs
        .state()
        .into_iter()
        .filter(|r| r.namespace().as_deref() == Some(&ns))
        .filter(|r| r.labels().get(LABEL_WORKFLOW_RUN_UID) == Some(&uid))
        .collect();
    let calls = child_calls(&ctx.client, &workflow_run, snapshot.as_ref()).await?;
    let mut children = Children::new(runs.iter().map(|r| r.as_ref()), calls.iter().collect());
    // A Run the status names but the store lacks is new (the store lags its create) or gone:
    // only a read of the API tells which.
    let run_api: Api<Run> = Api::namespaced(ctx.client.clone(), &ns);
    for name in children.unseen(&before) {
        if run_api.get_metadata_opt(&name).await?.is_none() {
            children.gone.insert(name);
        }
    }

    let mut status = before.clone();
    plan::derive(
        &workflow_run.spec,
        &mut status,
        snapshot.as_ref(),
        &children,
    );
    match plan::plan(&workflow_run.spec, &status, snapshot.as_ref(), &children) {
        Plan::Wait => {}
        Plan::Accept => accept(&ctx.client, &workflow_run, &mut status).await?,
        Plan::Start(targets) => {
            // `Start` comes only with a snapshot.
            if let Some(snapshot) = &snapshot {
                let created = start(
                    &ctx.client,
                    &workflow_run,
                    &mut status,
                    snapshot,
                    &children,
                    targets,
                )
                .await?;
                ctx.metrics.step_runs.inc_by(created);
            }
        }
        Plan::CancelChildren => cancel_children(&ctx.client, &ns, &children).await?,
    }
    if status != before {
        let ended =
            (!before.phase.is_terminal() && status.phase.is_terminal()).then_some(status.phase);
        let warning = ended
            .filter(|p| *p == WorkflowPhase::Failed)
            .map(|_| failure_event(&status));
        write_status(&ctx.client, &workflow_run, status).await?;
        if let Some(phase) = ended {
            let phase = format!("{phase:?}");
            ctx.metrics
                .finished
                .with_label_values(&[phase.as_str()])
                .inc();
        }
        if let Some(event) = warning {
            // Written once: only after the write that ended it succeeded.
            if let Err(e) = ctx
                .recorder
                .publish(&event, &workflow_run.object_ref(&()))
                .await
            {
                warn!("cannot publish the {} event: {e}", event.reason);
            }
        }
    }
    Ok(Requeue::await_change())
}

/// The Warning a failed WorkflowRun gets: refused (its Accepted condition says why), or which
/// jobs failed and the controller's message.
fn failure_event(status: &WorkflowRunStatus) -> Event {
    let refused = status
        .conditions
        .iter()
        .any(|c| c.type_ == crate::api::CONDITION_ACCEPTED && c.status == "False");
    let failed: Vec<&str> = status
        .jobs
        .iter()
        .flatten()
        .filter(|(_, j)| j.phase == crate::api::JobPhase::Failed)
        .map(|(name, _)| name.as_str())
        .collect();
    let note = match (refused, status.message.is_empty()) {
        (true, _) => status.message.clone(),
        (false, true) => format!("job(s) failed: {}", failed.join(", ")),
        (false, false) => format!("job(s) failed: {}; {}", failed.join(", "), status.message),
    };
    Event {
        type_: EventType::Warning,
        reason: if refused {
            REASON_REFUSED
        } else {
            "WorkflowRunFailed"
        }
        .into(),
        // Events are bounded: a note of at most 1 KiB.
        note: Some(note.chars().take(1024).collect()),
        action: if refused { "Accept" } else { "Execute" }.into(),
        secondary: None,
    }
}

/// The child WorkflowRuns of the reusable calls, read from the API (the watch only wakes us),
/// so a call's end is never missed for a cache that lags. None when no job calls one.
async fn child_calls(
    client: &Client,
    workflow_run: &WorkflowRun,
    snapshot: Option<&Snapshot>,
) -> Result<Vec<WorkflowRun>, Error> {
    let calls_any = match snapshot {
        Some(s) => s.spec.jobs.values().any(|j| j.calls_workflow()),
        None => workflow_run.spec.jobs.values().any(|j| j.calls_workflow()),
    };
    if !calls_any {
        return Ok(Vec::new());
    }
    let ns = workflow_run.namespace().unwrap_or_default();
    let uid = workflow_run.uid().unwrap_or_default();
    let api: Api<WorkflowRun> = Api::namespaced(client.clone(), &ns);
    let listed = api
        .list(&ListParams::default().labels(&format!("{LABEL_WORKFLOW_RUN_UID}={uid}")))
        .await?;
    // Only those it controls: the label alone can be copied.
    Ok(listed
        .items
        .into_iter()
        .filter(|c| {
            c.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect())
}

/// Starts each target: a step's Run, or a call's child WorkflowRun, recorded in `status`.
/// Returns how many Runs it created.
async fn start(
    client: &Client,
    workflow_run: &WorkflowRun,
    status: &mut WorkflowRunStatus,
    snapshot: &Snapshot,
    children: &Children<'_>,
    targets: Vec<Target>,
) -> Result<u64, Error> {
    let ns = workflow_run.namespace().unwrap_or_default();
    let mut created = 0;
    for target in targets {
        match target {
            Target::Step {
                job,
                step,
                action_step,
            } => {
                let made = plan::step_run(
                    workflow_run,
                    status,
                    snapshot,
                    children,
                    &job,
                    step,
                    action_step,
                );
                let name = match made {
                    Err(why) => {
                        plan::failed_step(status, &job, step, &why);
                        continue;
                    }
                    Ok(StepRun::Exists(name)) => name,
                    Ok(StepRun::Create(run)) => {
                        let api: Api<Run> = Api::namespaced(client.clone(), &ns);
                        let (name, made) = create(&api, &run).await?;
                        created += u64::from(made);
                        name
                    }
                };
                plan::started_step(status, &job, step, action_step, &name);
            }
            Target::Call { job } => {
                let spec = &snapshot.spec.jobs[&job];
                let workflows: Api<Workflow> = Api::namespaced(client.clone(), &ns);
                let Some(workflow) = workflows.get_opt(&spec.uses).await? else {
                    let why = format!(
                        "reusable Workflow {:?} for job {job:?} does not exist",
                        spec.uses
                    );
                    plan::failed_call(status, &job, &why);
                    continue;
                };
                if let Err(why) = check_calls(&workflows, &spec.uses).await {
                    let why = format!(
                        "validate reusable Workflow {:?} for job {job:?}: {why}",
                        spec.uses
                    );
                    plan::failed_call(status, &job, &why);
                    continue;
                }
                match plan::call_run(workflow_run, status, &job, spec, &workflow.spec) {
                    Err(why) => plan::failed_call(status, &job, &why),
                    Ok(child) => {
                        let api: Api<WorkflowRun> = Api::namespaced(client.clone(), &ns);
                        let (name, _) = create(&api, &child).await?;
                        plan::started_call(status, &job, &name);
                    }
                }
            }
        }
    }
    Ok(created)
}

/// [`template::check_calls`] over the Workflows as they are in the API now.
async fn check_calls(workflows: &Api<Workflow>, root: &str) -> Result<(), String> {
    // The lookup is synchronous: read the reachable Workflows first, breadth-first, bounded by
    // the depth the check allows.
    let mut known: BTreeMap<String, Option<crate::api::WorkflowSpec>> = BTreeMap::new();
    let mut frontier = vec![root.to_string()];
    for _ in 0..=template::MAX_CALL_DEPTH {
        let mut next = Vec::new();
        for name in frontier {
            if known.contains_key(&name) {
                continue;
            }
            let spec = workflows
                .get_opt(&name)
                .await
                .map_err(|e| format!("cannot read Workflow {name:?}: {e}"))?
                .map(|w| w.spec);
            if let Some(spec) = &spec {
                next.extend(
                    spec.jobs
                        .values()
                        .filter(|j| j.calls_workflow())
                        .map(|j| j.uses.clone()),
                );
            }
            known.insert(name, spec);
        }
        frontier = next;
    }
    template::check_calls(root, |name| {
        known
            .get(name)
            .cloned()
            .ok_or_else(|| format!("Workflow {name:?} is deeper than any call may reach"))
    })
}

/// Creates `object`, or takes the one of its name already there (a restart, a retried write):
/// its name, and whether this created it.
///
/// Where the submitter policy refuses the WorkflowRun's submitter on it (the cluster's policy
/// does not trust this process's identity to delegate: an older policy, or a scheduler running
/// as another account), it is created without one, said in a warning: its fair-share group is
/// then that of Runs without a submitter, but the WorkflowRun goes on rather than retrying for
/// ever.
async fn create<K>(api: &Api<K>, object: &K) -> Result<(String, bool), Error>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let mut object = std::borrow::Cow::Borrowed(object);
    loop {
        match api.create(&post_params(), &object).await {
            Ok(created) => return Ok((created.meta().name.clone().unwrap_or(name), true)),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok((name, false)),
            Err(kube::Error::Api(s))
                if s.message.contains(crate::policy::submitter::NAME)
                    && object
                        .meta()
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(ANNOTATION_SUBMITTED_BY)) =>
            {
                warn!(
                    "{} {name}: the submitter policy refused the WorkflowRun's submitter ({}); created without it, so fair sharing groups it with Runs that name none. Apply the policies of this release (deploy/submitter-policy.yaml) for the scheduler's account",
                    K::kind(&()),
                    s.message
                );
                if let Some(annotations) = object.to_mut().meta_mut().annotations.as_mut() {
                    annotations.remove(ANNOTATION_SUBMITTED_BY);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Asks every active child Run and child WorkflowRun to cancel.
async fn cancel_children(client: &Client, ns: &str, children: &Children<'_>) -> Result<(), Error> {
    let cancel = Patch::Merge(json!({"spec": {"cancelRequested": true}}));
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    for run in children.runs.values() {
        let ended = run
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(|p| p.is_terminal());
        if !ended && !run.spec.cancel_requested {
            runs.patch(&run.name_any(), &patch_params(), &cancel)
                .await?;
        }
    }
    let calls: Api<WorkflowRun> = Api::namespaced(client.clone(), ns);
    for call in children.calls.values() {
        let ended = call.status.as_ref().is_some_and(|s| s.phase.is_terminal());
        if !ended && !call.spec.cancel_requested {
            calls
                .patch(&call.name_any(), &patch_params(), &cancel)
                .await?;
        }
    }
    Ok(())
}

/// Writes `status` over the version it was derived from: a conflict is retried from a new read.
async fn write_status(
    client: &Client,
    workflow_run: &WorkflowRun,
    status: WorkflowRunStatus,
) -> Result<(), Error> {
    let ns = workflow_run.namespace().unwrap_or_default();
    let api: Api<WorkflowRun> = Api::namespaced(client.clone(), &ns);
    let mut updated = workflow_run.clone();
    updated.status = Some(status);
    api.replace_status(&workflow_run.name_any(), &PostParams::default(), &updated)
        .await?;
    Ok(())
}
