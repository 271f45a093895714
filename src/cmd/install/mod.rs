//! `kubectl kruntimes install`: applies the Runtime and Run CRDs, the aggregated user
//! ClusterRoles, runtimed's ClusterRole, the admission policy that restricts Runtime Pods and
//! the submitter's, waits for the CRDs, then deploys the scheduler ([`system`]) and waits for
//! its rollout; `--crds-only` stops before the scheduler. [`uninstall`] removes it again.
//!
//! Owns the CRD rendering (from the Rust types), the list of cluster-scoped objects kruntimes
//! ships (`deploy/user-roles.yaml`, `deploy/crds/runtimed-role.yaml`,
//! `deploy/crds/runtimed-policy.yaml`, `deploy/run-policy.yaml`, `deploy/submitter-policy.yaml` and
//! `deploy/submitter-mutation/submitter-mutation.yaml`, the last applied at the version the
//! server serves it or left out ([`mutating`]), embedded as files so that
//! `--print` shows exactly what is shipped) and their server-side apply; the scheduler's
//! namespaced objects are [`system`]'s.

use std::fmt::Debug;
use std::io::IsTerminal;

use anyhow::{Context, anyhow};
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResourceExt, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{Action, FIELD_MANAGER, PersistentWorkspace, Run, Runtime, Workflow, WorkflowRun};
use crate::cmd::cli::{DryRun, GlobalArgs, InstallArgs};
use crate::kubeclient::{self, Target};
use crate::policy::runtimed as runtimed_policy;

mod coexistence;
mod mutating;
pub mod system;
pub mod uninstall;

/// `deploy/user-roles.yaml`, as shipped: ClusterRoles aggregated into view, edit and admin.
pub const USER_ROLES: &str = include_str!("../../../deploy/user-roles.yaml");

/// User ClusterRoles of earlier releases, deleted by `install` and `uninstall` when they carry
/// kruntimes' label: `kubectl-kruntimes-edit` granted Runs and Runtimes together and is now
/// `kubectl-kruntimes-submit` and `kubectl-kruntimes-runtime-admin`.
pub const RETIRED_USER_ROLES: &[&str] = &["kubectl-kruntimes-edit"];

/// The CRDs, generated from the Rust types, Runtime first.
pub fn crds() -> [CustomResourceDefinition; 6] {
    [
        Runtime::crd(),
        Run::crd(),
        PersistentWorkspace::crd(),
        Workflow::crd(),
        WorkflowRun::crd(),
        Action::crd(),
    ]
    .map(|mut crd| {
        let (key, value) = LABEL_OURS;
        crd.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value.to_string());
        crd
    })
}

/// The label on kruntimes' CRDs (in `deploy/crds/crds.yaml` and whatever applies them), by which
/// `install` knows a CRD as its own whichever tool applied it: the Go project's CRDs of the
/// same names never carry this project's name.
pub const LABEL_OURS: (&str, &str) = ("app.kubernetes.io/name", "kubectl-kruntimes");

/// The user ClusterRoles of [`USER_ROLES`], in file order.
pub fn user_roles() -> anyhow::Result<Vec<ClusterRole>> {
    crate::util::yaml::documents(USER_ROLES)
        .map_err(|e| anyhow!("the embedded deploy/user-roles.yaml is not YAML: {e}; fix the file and rebuild"))?
        .into_iter()
        .enumerate()
        .map(|(i, doc)| {
            serde_json::from_value(doc).map_err(|e| {
                anyhow!(
                    "document {} of the embedded deploy/user-roles.yaml is not a ClusterRole: {e}; fix the file and rebuild",
                    i + 1
                )
            })
        })
        .collect()
}

/// The CRDs as one multi-document YAML stream (committed as `deploy/crds/crds.yaml`).
pub fn crds_yaml() -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(
            &crate::util::yaml::to_string(&crd)
                .map_err(|e| anyhow!("cannot render a CRD as YAML: {e}"))?,
        );
    }
    Ok(out)
}

/// Everything install applies, as one multi-document YAML stream: the CRDs, then the shipped
/// files verbatim (comments included): `deploy/crds/crds.yaml`, `deploy/user-roles.yaml`,
/// `deploy/crds/runtimed-role.yaml`, `deploy/crds/runtimed-policy.yaml`, `deploy/run-policy.yaml`,
/// `deploy/submitter-policy.yaml` and `deploy/submitter-mutation/submitter-mutation.yaml` (which
/// `install` applies only where the server serves it), in that order.
pub fn manifests_yaml() -> anyhow::Result<String> {
    let mut out = crds_yaml()?;
    for file in [
        USER_ROLES,
        crate::runtime::identity::CLUSTER_ROLE_MANIFEST,
        runtimed_policy::MANIFEST,
        crate::policy::run::MANIFEST,
        crate::policy::submitter::MANIFEST,
        crate::policy::submitter::MUTATION_MANIFEST,
    ] {
        out.push_str("---\n");
        out.push_str(file);
        if !file.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// What the apply did to one object, in kubectl's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Created,
    Configured,
    Unchanged,
    /// A retired object of an earlier release, removed ([`RETIRED_USER_ROLES`]).
    Deleted,
}

impl Applied {
    fn as_str(self) -> &'static str {
        match self {
            Applied::Created => "created",
            Applied::Configured => "configured",
            Applied::Unchanged => "unchanged",
            Applied::Deleted => "deleted",
        }
    }
}

pub async fn exec(global: &GlobalArgs, args: &InstallArgs) -> anyhow::Result<()> {
    if args.print || args.dry_run == DryRun::Client {
        let mut text = manifests_yaml()?;
        if !args.crds_only {
            text.push_str("---\n");
            text.push_str(&system::manifest(&args.image)?);
        }
        return crate::output::write_stdout(&text).context("writing to stdout");
    }
    let dry_run = args.dry_run == DryRun::Server;
    let target = kubeclient::connect(global).await?;
    // Before anything is written: a server older than kruntimes' floor would take half of it
    // and refuse the rest; one without MutatingAdmissionPolicy gets everything else.
    let mutating = served_apis(&target).await?;
    // Before anything is written: what is already there, and what install would change.
    let notices = coexistence::survey(&target).await?;
    for notice in &notices {
        eprintln!("note: {notice}");
    }
    if !args.crds_only {
        let others = system::other_schedulers(&target).await?;
        if let Some(release) = others.helm {
            return Err(anyhow!(
                "the kruntimes scheduler was installed by Helm (deployment {release}); upgrade it with `helm upgrade` and update the cluster-wide part with `install --crds-only`; nothing was changed"
            ));
        }
        let elsewhere = others.elsewhere;
        if !elsewhere.is_empty() {
            return Err(anyhow!(
                "a kruntimes scheduler already runs as deployment {} (the Helm chart's?); a second would place Runs beside it: update the cluster-wide part with `install --crds-only`, or remove that one first; nothing was changed",
                elsewhere.join(", ")
            ));
        }
    }
    if !dry_run && !args.yes {
        confirm(&target, args)?;
    }
    let suffix = if dry_run { " (server dry run)" } else { "" };
    // Each object is said as soon as it is applied, so that an install that stops half-way
    // has listed what it changed.
    let mut done = 0;
    let mut said = |object: &str, applied: Applied| {
        done += 1;
        println!("{object} {}{suffix}", applied.as_str());
    };
    let stopped = |e: anyhow::Error, done: usize| {
        e.context(format!(
            "install stopped after applying {done} objects (listed above); run it again to finish"
        ))
    };
    if let Err(e) = apply_each(&target, mutating, dry_run, &mut said).await {
        return Err(stopped(e, done));
    }
    if !dry_run {
        wait_established(&target, args.timeout).await?;
        println!("kruntimes CRDs are established in {}", target.describe());
    }
    if args.crds_only {
        return Ok(());
    }
    let unchecked = dry_run && !system::namespace_exists(&target).await?;
    for object in system::objects(&args.image)? {
        let namespaced = object.metadata.namespace.is_some();
        if unchecked && namespaced {
            println!(
                "{} not checked (server dry run: namespace {} does not exist yet)",
                system::describe(&object),
                system::NAMESPACE
            );
            continue;
        }
        match system::apply_one(&target, &object, dry_run).await {
            Ok(applied) => said(&system::describe(&object), applied),
            Err(e) => return Err(stopped(e, done)),
        }
    }
    if dry_run || !args.wait {
        return Ok(());
    }
    let available = system::wait_rolled_out(&target, &args.image, args.timeout).await?;
    println!(
        "the kruntimes scheduler is running: deployment {}/{} has {available} available replicas (image {})",
        system::NAMESPACE,
        system::DEPLOYMENT,
        args.image
    );
    system::wait_gateway_available(&target, args.timeout).await?;
    println!(
        "the API server reaches its gateway: kubectl kruntimes logs, invoke and artifacts work"
    );
    Ok(())
}

/// The oldest Kubernetes minor kruntimes installs on: every API it applies is GA there but
/// MutatingAdmissionPolicy, which [`mutating`] applies where it is served and otherwise leaves
/// out with a note.
pub const MIN_KUBERNETES: (u32, u32) = (1, 32);

/// Refuses, changing nothing, a server older than [`MIN_KUBERNETES`], naming its version, and
/// returns the version MutatingAdmissionPolicy is served at, saying what is left out where it
/// is not.
async fn served_apis(target: &Target) -> anyhow::Result<Option<&'static str>> {
    let info = target
        .client
        .apiserver_version()
        .await
        .map_err(|e| target.explain_error(e, "cannot read the server's Kubernetes version"))?;
    if below_floor(&info.major, &info.minor) {
        let (min_major, min_minor) = MIN_KUBERNETES;
        return Err(anyhow!(
            "{} runs Kubernetes {}; kruntimes installs on Kubernetes {min_major}.{min_minor} or newer (its admission policies and the Run's selectable fields need it); nothing was changed",
            target.describe(),
            info.git_version
        ));
    }
    let served = mutating::served(target).await?;
    if served.is_none() {
        eprintln!(
            "note: {}",
            mutating::left_out(&target.describe(), &info.git_version)
        );
    }
    Ok(served)
}

/// Whether the server's `/version` major and minor are below [`MIN_KUBERNETES`]; a version
/// that does not read as numbers (a fork's) is let through, and the apply says what fails.
fn below_floor(major: &str, minor: &str) -> bool {
    // Managed clusters append to the minor ("32+" on EKS).
    let number = |s: &str| -> Option<u32> {
        s.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok()
    };
    matches!((number(major), number(minor)), (Some(major), Some(minor)) if (major, minor) < MIN_KUBERNETES)
}

fn confirm(target: &Target, args: &InstallArgs) -> anyhow::Result<()> {
    let scheduler = match args.crds_only {
        true => String::new(),
        false => format!(
            ", and the scheduler (namespace {}, image {})",
            system::NAMESPACE,
            args.image
        ),
    };
    let question = format!(
        "Install the kruntimes CRDs (runtimes, runs, persistentworkspaces, workflows, workflowruns and actions.kruntimes.io), the ClusterRoles kubectl-kruntimes-view, kubectl-kruntimes-submit and kubectl-kruntimes-runtime-admin and the admission policies {} and {}{scheduler} into {}?",
        runtimed_policy::NAME,
        crate::policy::submitter::NAME,
        target.describe()
    );
    ask(
        &question,
        &format!("install into {}", target.describe()),
        "install",
    )
}

/// Asks `question` on the terminal, defaulting to no; refuses without one (`--yes` confirms).
/// `doing` completes "refusing to …", `command` names what a no cancels.
fn ask(question: &str, doing: &str, command: &str) -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(anyhow!(
            "refusing to {doing} without confirmation: not running on a terminal; pass --yes to confirm"
        ));
    }
    let yes = dialoguer::Confirm::new()
        .with_prompt(question)
        .default(false)
        .interact()
        .context("cannot read the confirmation")?;
    match yes {
        true => Ok(()),
        false => Err(anyhow!("{command} cancelled; nothing was changed")),
    }
}

/// Server-side applies (or dry-runs) the CRDs, the user ClusterRoles, runtimed's ClusterRole,
/// the admission policies and their bindings (the mutating one where the server serves it), in
/// that order, and reports what changed as `kind.group/name`.
pub async fn apply(target: &Target, dry_run: bool) -> anyhow::Result<Vec<(String, Applied)>> {
    let mutating = served_apis(target).await?;
    let mut results = Vec::new();
    apply_each(target, mutating, dry_run, &mut |what: &str, applied| {
        results.push((what.to_string(), applied))
    })
    .await?;
    Ok(results)
}

/// [`apply`], telling `said` about each object as soon as it is applied.
async fn apply_each(
    target: &Target,
    mutating: Option<&str>,
    dry_run: bool,
    said: &mut dyn FnMut(&str, Applied),
) -> anyhow::Result<()> {
    let roles = user_roles()?;
    let (policy, binding) = runtimed_policy::objects()?;
    let submitter = crate::policy::submitter::objects().map_err(|e| anyhow!(e))?;
    let (run_policy, run_binding) = crate::policy::run::objects().map_err(|e| anyhow!(e))?;
    let runtimed_role = crate::runtime::identity::cluster_role()
        .map_err(|e| anyhow!("{e}; fix the file and rebuild"))?;
    let (review_role, review_binding) = crate::runtime::identity::token_review()
        .map_err(|e| anyhow!("{e}; fix the file and rebuild"))?;
    let mut say = |(what, applied): (String, Applied)| said(&what, applied);
    for crd in crds() {
        say(apply_one(target, &crd, dry_run).await?);
    }
    for role in &roles {
        say(apply_one(target, role, dry_run).await?);
    }
    for name in RETIRED_USER_ROLES {
        if retire_user_role(target, name, dry_run).await? {
            say((
                format!("clusterrole.rbac.authorization.k8s.io/{name}"),
                Applied::Deleted,
            ));
        }
    }
    say(apply_one(target, &runtimed_role, dry_run).await?);
    say(apply_one(target, &review_role, dry_run).await?);
    say(apply_one(target, &review_binding, dry_run).await?);
    say(apply_one(target, &policy, dry_run).await?);
    say(apply_one(target, &binding, dry_run).await?);
    say(apply_one(target, &run_policy, dry_run).await?);
    say(apply_one(target, &run_binding, dry_run).await?);
    say(apply_one(target, &submitter.validating, dry_run).await?);
    say(apply_one(target, &submitter.validating_binding, dry_run).await?);
    if let Some(version) = mutating {
        say(mutating::apply(target, version, &submitter.mutating, dry_run).await?);
        say(mutating::apply(target, version, &submitter.mutating_binding, dry_run).await?);
    }
    Ok(())
}

/// Deletes the retired user ClusterRole `name` if it exists and is kruntimes' (labelled
/// `app.kubernetes.io/part-of: kruntimes`); whether it did.
pub async fn retire_user_role(target: &Target, name: &str, dry_run: bool) -> anyhow::Result<bool> {
    let api: Api<ClusterRole> = Api::all(target.client.clone());
    let found = api
        .get_opt(name)
        .await
        .map_err(|e| target.explain_error(e, &format!("cannot read ClusterRole {name}")))?;
    let ours = found.is_some_and(|role| {
        role.labels()
            .get("app.kubernetes.io/part-of")
            .map(String::as_str)
            == Some("kruntimes")
    });
    if !ours {
        return Ok(false);
    }
    let params = kube::api::DeleteParams {
        dry_run,
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(target.explain_error(e, &format!("cannot delete ClusterRole {name}"))),
    }
}

/// Server-side applies one cluster-scoped object with the kruntimes field manager.
async fn apply_one<K>(
    target: &Target,
    object: &K,
    dry_run: bool,
) -> anyhow::Result<(String, Applied)>
where
    K: Resource<DynamicType = (), Scope = ClusterResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::all(target.client.clone());
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    let name = object.name_any();
    let what = format!("{}.{}/{name}", K::kind(&()).to_lowercase(), K::group(&()));
    let before = api
        .get_opt(&name)
        .await
        .map_err(|e| target.explain_error(e, &format!("cannot read {what}")))?;
    let after = api
        .patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(|e| target.explain_error(e, &format!("cannot apply {what}")))?;
    let applied = match before {
        None => Applied::Created,
        Some(before) if before.resource_version() == after.resource_version() => Applied::Unchanged,
        Some(_) => Applied::Configured,
    };
    Ok((what, applied))
}

/// Tries a server-side dry run of creating `probe` until the API server no longer refuses it
/// with 503 (the submitter's mutating policy before the API server has loaded the schema), or
/// until `deadline`, when that is the error. Any other answer ends the wait: the dry run only
/// has to reach admission.
async fn admitted<K>(
    api: &Api<K>,
    probe: &K,
    kinds: &str,
    deadline: tokio::time::Instant,
    timeout: std::time::Duration,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    loop {
        match api.create(&params, probe).await {
            Err(kube::Error::Api(s)) if s.code == 503 && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            Err(kube::Error::Api(s)) if s.code == 503 => {
                return Err(anyhow!(
                    "the API server still refuses {kinds} after {}s ({}); check `kubectl get mutatingadmissionpolicy {}` or raise --timeout",
                    timeout.as_secs(),
                    s.message,
                    crate::policy::submitter::NAME
                ));
            }
            _ => return Ok(()),
        }
    }
}

/// Waits until every CRD reports `Established`, the API server admits Runs and WorkflowRuns and
/// the Run policy is enforced: a mutating admission policy (the submitter's) refuses every Run
/// and WorkflowRun with 503 until the API server has loaded its schema for it, a few seconds
/// after the CRDs appear; a server-side dry run of a creation of each is tried until it is not
/// refused so (any other answer ends that wait: the dry run only has to reach admission); then
/// a dry run of an invalid Run until [`crate::policy::run`]'s policy refuses it.
pub async fn wait_established(target: &Target, timeout: std::time::Duration) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    wait_crds_established(target, timeout).await?;
    let namespace = "default";
    let runs: Api<crate::api::Run> = Api::namespaced(target.client.clone(), namespace);
    let mut probe = crate::api::Run::new(
        "kubectl-kruntimes-install-probe",
        crate::api::RunSpec {
            runtime: "install-probe".into(),
            mode: crate::api::RunMode {
                task: Some(crate::api::TaskMode {
                    args: vec!["true".into()],
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    probe.metadata.namespace = Some(namespace.into());
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    admitted(&runs, &probe, "Runs", deadline, timeout).await?;
    // The same for WorkflowRuns, which the submitter's mutating policy also stamps.
    let workflow_runs: Api<crate::api::WorkflowRun> =
        Api::namespaced(target.client.clone(), namespace);
    let mut workflow_probe = crate::api::WorkflowRun::new(
        "kubectl-kruntimes-install-probe",
        crate::api::WorkflowRunSpec::default(),
    );
    workflow_probe.metadata.namespace = Some(namespace.into());
    admitted(
        &workflow_runs,
        &workflow_probe,
        "WorkflowRuns",
        deadline,
        timeout,
    )
    .await?;
    // The Run policy is enforced a moment after it is applied: until then an invalid Run
    // would be admitted. A dry run of one (both modes) is tried until the policy refuses it.
    probe.spec.mode.function = Some(Default::default());
    loop {
        let said = match runs.create(&params, &probe).await {
            Err(kube::Error::Api(s)) if s.message.contains(crate::policy::run::NAME) => {
                return Ok(());
            }
            Err(e) => e.to_string(),
            Ok(_) => "an invalid Run is still admitted".to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(anyhow!(
                "the ValidatingAdmissionPolicy {} is not enforced after {}s ({said}); check `kubectl get validatingadmissionpolicy {}` or raise --timeout",
                crate::policy::run::NAME,
                timeout.as_secs(),
                crate::policy::run::NAME
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Waits until every CRD reports `Established`.
async fn wait_crds_established(
    target: &Target,
    timeout: std::time::Duration,
) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    for crd in crds() {
        let name = crd.name_any();
        let wait = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(anyhow!(
                    "waiting for CRD {name} to become Established failed: {e}"
                ));
            }
            Err(_) => {
                return Err(anyhow!(
                    "CRD {name} was applied but is not Established after {}s; check `kubectl describe crd {name}` or raise --timeout",
                    timeout.as_secs()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
