//! `kubectl kruntimes cancel run/NAME…`: sets `spec.cancelRequested` on each Run (one way: the
//! API server refuses setting it back), and with `--wait` waits until each has ended. The
//! scheduler ends a Pending Run, runtimed a Scheduled or Running one (see
//! docs/concepts/retries.md, "Cancel and timeout"). An I/O edge: it decides nothing about how a
//! Run ends.

use std::time::Duration;

use anyhow::{anyhow, bail};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch};

use crate::api::wait::For;
use crate::api::{Run, patch_params};
use crate::cmd::cli::{CancelArgs, GlobalArgs};
use crate::kubeclient::Target;

/// What asking one Run or WorkflowRun to cancel found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Asked {
    /// The cancel request is written (or was already).
    Requested { already: bool },
    /// It had already ended (in this phase): nothing to cancel.
    Ended(String),
}

/// A kind that is cancelled by setting its `spec.cancelRequested` (one way: the API server
/// refuses setting it back): Runs and WorkflowRuns.
pub(crate) trait Cancellable:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug
{
    /// Its name in messages: `run`, `workflowrun`.
    const KIND: &'static str;
    /// The phase it ended in, if it has.
    fn ended(&self) -> Option<String>;
    fn cancel_requested(&self) -> bool;
}

impl Cancellable for Run {
    const KIND: &'static str = "run";
    fn ended(&self) -> Option<String> {
        let phase = self.phase();
        phase.is_terminal().then(|| phase.as_str().to_string())
    }
    fn cancel_requested(&self) -> bool {
        self.spec.cancel_requested
    }
}

impl Cancellable for crate::api::WorkflowRun {
    const KIND: &'static str = "workflowrun";
    fn ended(&self) -> Option<String> {
        let phase = self.status.as_ref().map(|s| s.phase).unwrap_or_default();
        phase.is_terminal().then(|| format!("{phase:?}"))
    }
    fn cancel_requested(&self) -> bool {
        self.spec.cancel_requested
    }
}

/// Sets `spec.cancelRequested` on `name` (of namespace `ns`, which `api` is scoped to) unless
/// it has ended or asks already.
pub(crate) async fn ask<K: Cancellable>(
    target: &Target,
    api: &Api<K>,
    ns: &str,
    name: &str,
) -> anyhow::Result<Asked> {
    let kind = K::KIND;
    let object = match api.get_opt(name).await {
        Ok(Some(object)) => object,
        Ok(None) => bail!("{kind}/{name} not found in namespace {ns}"),
        Err(e) => return Err(target.explain_error(e, &format!("reading {kind}/{name}"))),
    };
    if let Some(phase) = object.ended() {
        return Ok(Asked::Ended(phase));
    }
    if object.cancel_requested() {
        return Ok(Asked::Requested { already: true });
    }
    let patch = serde_json::json!({"spec": {"cancelRequested": true}});
    api.patch(name, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            target.explain_error(e, &format!("setting spec.cancelRequested on {kind}/{name}"))
        })?;
    Ok(Asked::Requested { already: false })
}

/// Runs the command: request each cancel, then wait for each end with `--wait`. Every Run is
/// tried; the command fails (after all of them) when any could not be cancelled or did not
/// end in time.
pub async fn exec(global: &GlobalArgs, args: &CancelArgs) -> anyhow::Result<()> {
    let target = crate::kubeclient::connect(global).await?;
    // (namespace, name) of each Run named or selected.
    let names: Vec<(String, String)> = match &args.selector {
        None => crate::cmd::explain::parse_targets("cancel", &args.targets)
            .map_err(|e| anyhow!(e))?
            .into_iter()
            .map(|name| (target.namespace.clone(), name))
            .collect(),
        Some(selector) => selected(&target, selector, args.all_namespaces).await?,
    };
    // With -A the namespace is part of what is said about each Run.
    let said = |ns: &str, name: &str| match args.all_namespaces {
        true => format!("{ns}/run.kruntimes.io/{name}"),
        false => format!("run.kruntimes.io/{name}"),
    };
    let mut failures = Vec::new();
    let mut requested = Vec::new();
    for (ns, name) in &names {
        let runs: Api<Run> = Api::namespaced(target.client.clone(), ns);
        match ask(&target, &runs, ns, name).await {
            Ok(Asked::Requested { already }) => {
                let note = if already { " (already)" } else { "" };
                println!("{} cancel requested{note}", said(ns, name));
                requested.push((ns.clone(), name.clone()));
            }
            Ok(Asked::Ended(phase)) => {
                println!(
                    "{} already ended {phase}; nothing to cancel",
                    said(ns, name)
                )
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                failures.push(name.clone());
            }
        }
    }
    if args.wait {
        for (ns, name) in &requested {
            let runs: Api<Run> = Api::namespaced(target.client.clone(), ns);
            match wait_ended(&runs, name, args.timeout).await {
                Ok(phase) => println!("{} {phase}", said(ns, name)),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    failures.push(name.clone());
                }
            }
        }
    }
    match failures.as_slice() {
        [] => Ok(()),
        _ => bail!(
            "{} of {} Run(s) not cancelled: {}",
            failures.len(),
            names.len(),
            failures.join(", ")
        ),
    }
}

/// The Runs `selector` selects, in the namespace or (`all`) every namespace, as (namespace,
/// name); none is an error that says where it looked, as kubectl's "No resources found".
async fn selected(
    target: &Target,
    selector: &str,
    all: bool,
) -> anyhow::Result<Vec<(String, String)>> {
    let runs: Api<Run> = match all {
        true => Api::all(target.client.clone()),
        false => Api::namespaced(target.client.clone(), &target.namespace),
    };
    let list = runs
        .list_metadata(&ListParams::default().labels(selector))
        .await
        .map_err(|e| target.explain_error(e, &format!("listing the Runs of -l {selector}")))?;
    let found: Vec<(String, String)> = list
        .items
        .iter()
        .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
        .collect();
    if found.is_empty() {
        let place = match all {
            true => "any namespace".to_string(),
            false => format!("namespace {}", target.namespace),
        };
        bail!("no Run in {place} matches -l {selector}; nothing to cancel");
    }
    Ok(found)
}

/// Waits (on a watch) until `name` has ended ([`crate::cmd::wait::until_decided`]); its end phase,
/// or `deleted`.
async fn wait_ended(runs: &Api<Run>, name: &str, timeout: Duration) -> anyhow::Result<String> {
    let (_, run) = crate::cmd::wait::until_decided(runs, name, &For::Ended, timeout).await?;
    Ok(run.map_or_else(|| "deleted".to_string(), |r| r.phase().as_str().to_string()))
}
