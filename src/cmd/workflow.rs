//! `kubectl kruntimes workflow trigger WORKFLOW [--set K=V…] [--name N] [--wait]`: binds the
//! Workflow's inputs into a new WorkflowRun (as the Go kruntimes `krt workflow trigger` does:
//! the run holds the bound jobs, so later edits of the Workflow do not reach it) and, with
//! `--wait`, follows its jobs on a watch until it ends; and `kubectl kruntimes workflow cancel
//! NAME… [--wait]`, which sets each WorkflowRun's `spec.cancelRequested` (as `krt workflowrun
//! cancel` does). An I/O edge: binding is [`crate::workflow::template`]'s, executing and
//! cancelling the workflow controller's.

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow, bail};
use futures::TryStreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::api::{JobPhase, Workflow, WorkflowPhase, WorkflowRun, WorkflowRunSpec, post_params};
use crate::cmd::cancel::{Asked, ask};
use crate::cmd::cli::{GlobalArgs, WorkflowCommand, WorkflowTriggerArgs};
use crate::workflow::template;

pub async fn exec(global: &GlobalArgs, command: &WorkflowCommand) -> anyhow::Result<()> {
    match command {
        WorkflowCommand::Trigger(args) => trigger(global, args).await,
        WorkflowCommand::Cancel(args) => cancel(global, args).await,
    }
}

/// The WorkflowRun a `workflow cancel` argument names: `NAME` or `workflowrun/NAME`.
fn cancel_target(arg: &str) -> anyhow::Result<&str> {
    let name = match arg.split_once('/') {
        Some((kind, name)) if crate::cmd::explain::workflow_run::is_workflow_run_kind(kind) => name,
        Some(_) => {
            bail!("{arg:?} is not a WorkflowRun: workflow cancel takes NAME or workflowrun/NAME")
        }
        None => arg,
    };
    if !crate::api::is_object_name(name) {
        bail!("{name:?} is not a WorkflowRun name");
    }
    Ok(name)
}

/// Asks each WorkflowRun to cancel (unless it ended or asks already) and, with `--wait`, waits
/// for each end. Every one is tried; the command fails (after all of them) when any could not
/// be cancelled or did not end in time.
async fn cancel(
    global: &GlobalArgs,
    args: &crate::cmd::cli::WorkflowCancelArgs,
) -> anyhow::Result<()> {
    let names = args
        .names
        .iter()
        .map(|a| cancel_target(a))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let target = crate::kubeclient::connect(global).await?;
    let runs: Api<WorkflowRun> = Api::namespaced(target.client.clone(), &target.namespace);
    let mut failures = Vec::new();
    let mut requested = Vec::new();
    for name in &names {
        match ask(&target, &runs, &target.namespace, name).await {
            Ok(Asked::Ended(phase)) => {
                println!("workflowrun.kruntimes.io/{name} already ended {phase}; nothing to cancel")
            }
            Ok(Asked::Requested { already }) => {
                let note = if already { " (already)" } else { "" };
                println!("workflowrun.kruntimes.io/{name} cancel requested{note}");
                requested.push(*name);
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                failures.push(*name);
            }
        }
    }
    if args.wait {
        for name in requested {
            match tokio::time::timeout(args.timeout, follow(&runs, name)).await {
                Ok(Ok(ended)) => {
                    let phase = ended.status.map(|s| s.phase).unwrap_or_default();
                    println!("workflowrun.kruntimes.io/{name} {phase:?}");
                }
                Ok(Err(e)) => {
                    eprintln!("error: {e:#}");
                    failures.push(name);
                }
                Err(_) => {
                    eprintln!(
                        "error: workflowrun/{name} has not ended within {:?}; wait longer with --timeout",
                        args.timeout
                    );
                    failures.push(name);
                }
            }
        }
    }
    match failures.as_slice() {
        [] => Ok(()),
        _ => bail!(
            "{} of {} WorkflowRun(s) not cancelled: {}",
            failures.len(),
            names.len(),
            failures.join(", ")
        ),
    }
}

/// `--set` values as inputs: each `KEY=VALUE`, the key not empty nor given twice.
pub fn parse_inputs(sets: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut inputs = BTreeMap::new();
    for set in sets {
        let Some((key, value)) = set.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            bail!("--set {set:?}: expected KEY=VALUE, e.g. --set message=hello");
        };
        if inputs.insert(key.to_string(), value.to_string()).is_some() {
            bail!("--set {key}: given twice; give each input once");
        }
    }
    Ok(inputs)
}

async fn trigger(global: &GlobalArgs, args: &WorkflowTriggerArgs) -> anyhow::Result<()> {
    let inputs = parse_inputs(&args.set)?;
    let target = crate::kubeclient::connect(global).await?;
    let ns = target.namespace.clone();
    let workflows: Api<Workflow> = Api::namespaced(target.client.clone(), &ns);
    let workflow = match workflows.get_opt(&args.workflow).await {
        Ok(Some(workflow)) => workflow,
        Ok(None) => bail!(
            "workflow/{} not found in namespace {ns}; see kubectl get workflows -n {ns}",
            args.workflow
        ),
        Err(e) => {
            return Err(target.explain_error(e, &format!("reading workflow/{}", args.workflow)));
        }
    };
    let jobs = template::materialize(&workflow.spec, &inputs).map_err(|e| {
        anyhow!(
            "workflow/{}: {e}; pass its inputs with --set KEY=VALUE",
            args.workflow
        )
    })?;
    let run = WorkflowRun {
        metadata: ObjectMeta {
            name: args.name.clone(),
            generate_name: args.name.is_none().then(|| format!("{}-", args.workflow)),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        },
        spec: WorkflowRunSpec {
            jobs,
            cancel_requested: false,
        },
        status: None,
    };
    let runs: Api<WorkflowRun> = Api::namespaced(target.client.clone(), &ns);
    let created = runs
        .create(&post_params(), &run)
        .await
        .map_err(|e| target.explain_error(e, "creating the WorkflowRun"))?;
    let name = created.name_any();
    crate::output::write_stdout(&format!(
        "workflowrun.kruntimes.io/{name} created from workflow/{}\n",
        args.workflow
    ))?;
    if !args.wait {
        return Ok(());
    }
    let ended = tokio::time::timeout(args.timeout, follow(&runs, &name))
        .await
        .map_err(|_| {
            anyhow!(
                "workflowrun/{name} has not ended within {:?}; see kubectl get workflowrun {name} -o yaml, or wait longer with --timeout",
                args.timeout
            )
        })??;
    let status = ended.status.unwrap_or_default();
    match status.phase {
        WorkflowPhase::Succeeded => Ok(()),
        phase => bail!(
            "workflowrun/{name} ended {phase:?}{}",
            if status.message.is_empty() {
                String::new()
            } else {
                format!(": {}", status.message)
            }
        ),
    }
}

/// Follows `name` on a watch, printing each job's phase as it changes, until it ends.
async fn follow(runs: &Api<WorkflowRun>, name: &str) -> anyhow::Result<WorkflowRun> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut seen: BTreeMap<String, JobPhase> = BTreeMap::new();
    let mut stream = std::pin::pin!(watcher(runs.clone(), config).applied_objects());
    while let Some(run) = stream
        .try_next()
        .await
        .context("watching the WorkflowRun")?
    {
        let status = run.status.clone().unwrap_or_default();
        for (job, state) in status.jobs.iter().flatten() {
            if seen.insert(job.clone(), state.phase) != Some(state.phase) {
                eprintln!("job {job}: {:?}", state.phase);
            }
        }
        if status.phase.is_terminal() {
            return Ok(run);
        }
    }
    bail!("the watch of workflowrun/{name} ended")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_key_value_pairs_given_once() {
        let sets = ["a=1".to_string(), "b=x=y".to_string(), "c=".to_string()];
        let inputs = parse_inputs(&sets).unwrap();
        assert_eq!(inputs["b"], "x=y");
        assert_eq!(inputs["c"], "");
        assert!(
            parse_inputs(&["novalue".into()])
                .unwrap_err()
                .to_string()
                .contains("KEY=VALUE")
        );
        assert!(parse_inputs(&["=v".into()]).is_err());
        let twice = ["a=1".to_string(), "a=2".to_string()];
        assert!(
            parse_inputs(&twice)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }
}
