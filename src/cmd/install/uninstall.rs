//! `kubectl kruntimes uninstall`: removes what `install` applied, keeping by default what the
//! cluster's Runs need to stay what they are.
//!
//! Without `--delete-crds` it removes the scheduler (its namespace `kubectl-kruntimes`, RBAC,
//! Deployment and Service) and the user ClusterRoles, and keeps the CRDs (so every Run,
//! Runtime and PersistentWorkspace), runtimed's ClusterRole and every admission policy but the
//! scheduler's own (part of `deploy/scheduler.yaml`, gone with the scheduler): Runtime
//! Pods that keep running stay confined by runtimed's policy (uninstalling fails closed), and
//! Runs stay validated. With `--delete-crds` it deletes the CRDs first, while the scheduler
//! still runs to release its finalizers, waits until the API server has removed every object
//! of them, then the rest, policies last.

use std::time::Duration;

use anyhow::{anyhow, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams};

use super::system;
use crate::cmd::cli::{GlobalArgs, UninstallArgs};
use crate::kubeclient::{self, Target};

pub async fn exec(global: &GlobalArgs, args: &UninstallArgs) -> anyhow::Result<()> {
    let target = kubeclient::connect(global).await?;
    // Before anything is deleted: what is not `install`'s to remove.
    if let Some(release) = system::other_schedulers(&target).await?.helm {
        bail!(
            "the kruntimes scheduler was installed by Helm (deployment {release}); remove it with `helm uninstall`, which keeps the CRDs and every Run; nothing was changed"
        );
    }
    if args.delete_crds {
        refuse_foreign_crds(&target).await?;
    }
    // The namespace's own Runs and Runtimes would go with it.
    let keep_namespace = system::namespace_holds_runs(&target).await?;
    if !args.yes {
        confirm(&target, args.delete_crds, keep_namespace.as_deref())?;
    }
    if args.delete_crds {
        delete_crds(&target, args.timeout).await?;
    }
    for object in system::objects(crate::cmd::cli::DEFAULT_IMAGE)?
        .iter()
        .rev()
    {
        if let (Some(why), true) = (
            &keep_namespace,
            object.metadata.namespace.is_none()
                && object.types.as_ref().is_some_and(|t| t.kind == "Namespace"),
        ) {
            println!("{} kept: it holds {why}", system::describe(object));
            continue;
        }
        said(
            &system::describe(object),
            system::delete_one(&target, object).await?,
        );
    }
    for role in super::user_roles()? {
        said(
            &format!("clusterrole.rbac.authorization.k8s.io/{}", role.name_any()),
            delete_cluster::<k8s_openapi::api::rbac::v1::ClusterRole>(&target, &role.name_any())
                .await?,
        );
    }
    for name in super::RETIRED_USER_ROLES {
        if super::retire_user_role(&target, name, false).await? {
            said(
                &format!("clusterrole.rbac.authorization.k8s.io/{name}"),
                true,
            );
        }
    }
    if !args.delete_crds {
        println!(
            "kept: the CRDs with every Run, Runtime and PersistentWorkspace, runtimed's ClusterRole and the admission policies but the scheduler's (Runtime Pods that keep running stay confined); `uninstall --delete-crds` removes them"
        );
        return Ok(());
    }
    let runtimed_role = crate::runtime::identity::cluster_role().map_err(|e| anyhow!(e))?;
    said(
        &format!(
            "clusterrole.rbac.authorization.k8s.io/{}",
            runtimed_role.name_any()
        ),
        delete_cluster::<k8s_openapi::api::rbac::v1::ClusterRole>(
            &target,
            &runtimed_role.name_any(),
        )
        .await?,
    );
    use crate::runtime::identity::TOKEN_REVIEW;
    use k8s_openapi::api::rbac::v1 as rbac;
    said(
        &format!("clusterrolebinding.rbac.authorization.k8s.io/{TOKEN_REVIEW}"),
        delete_cluster::<rbac::ClusterRoleBinding>(&target, TOKEN_REVIEW).await?,
    );
    said(
        &format!("clusterrole.rbac.authorization.k8s.io/{TOKEN_REVIEW}"),
        delete_cluster::<rbac::ClusterRole>(&target, TOKEN_REVIEW).await?,
    );
    use k8s_openapi::api::admissionregistration::v1 as ar;
    let (policy, binding) = crate::policy::runtimed::objects()?;
    let (run_policy, run_binding) = crate::policy::run::objects().map_err(|e| anyhow!(e))?;
    let submitter = crate::policy::submitter::objects().map_err(|e| anyhow!(e))?;
    for name in [
        binding.name_any(),
        run_binding.name_any(),
        submitter.validating_binding.name_any(),
    ] {
        let deleted =
            delete_cluster::<ar::ValidatingAdmissionPolicyBinding>(&target, &name).await?;
        said(
            &format!("validatingadmissionpolicybinding.admissionregistration.k8s.io/{name}"),
            deleted,
        );
    }
    for name in [
        policy.name_any(),
        run_policy.name_any(),
        submitter.validating.name_any(),
    ] {
        let deleted = delete_cluster::<ar::ValidatingAdmissionPolicy>(&target, &name).await?;
        said(
            &format!("validatingadmissionpolicy.admissionregistration.k8s.io/{name}"),
            deleted,
        );
    }
    // At whichever version the server serves it; a server that serves none has none.
    if let Some(version) = super::mutating::served(&target).await? {
        for (kind, name) in [
            (
                "MutatingAdmissionPolicyBinding",
                submitter.mutating_binding.name_any(),
            ),
            ("MutatingAdmissionPolicy", submitter.mutating.name_any()),
        ] {
            let deleted = super::mutating::delete(&target, version, kind, &name).await?;
            said(
                &format!(
                    "{}.admissionregistration.k8s.io/{name}",
                    kind.to_lowercase()
                ),
                deleted,
            );
        }
    }
    Ok(())
}

fn said(what: &str, deleted: bool) {
    match deleted {
        true => println!("{what} deleted"),
        false => println!("{what} not found"),
    }
}

async fn delete_cluster<K>(target: &Target, name: &str) -> anyhow::Result<bool>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(target.client.clone());
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(target.explain_error(e, &format!("cannot delete {} {name}", K::kind(&())))),
    }
}

/// Refuses, deleting nothing, when a CRD of ours by name is not ours by label: the Go kruntimes
/// project's CRDs have the same names, and deleting them would delete its Runs.
async fn refuse_foreign_crds(target: &Target) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    let (key, value) = super::LABEL_OURS;
    for crd in super::crds() {
        let name = crd.name_any();
        let found = api
            .get_opt(&name)
            .await
            .map_err(|e| target.explain_error(e, &format!("cannot read CRD {name}")))?;
        if let Some(found) = found
            && found.labels().get(key).map(String::as_str) != Some(value)
        {
            bail!(
                "CRD {name} is not kruntimes' (it lacks the label {key}={value}; the Go kruntimes project's CRDs have the same names): --delete-crds would delete its objects; nothing was changed"
            );
        }
    }
    Ok(())
}

/// Deletes the CRDs and waits until the API server has removed them (and so every object of
/// them); on a timeout, says what still holds them.
async fn delete_crds(target: &Target, timeout: Duration) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    let names: Vec<String> = super::crds().iter().map(|c| c.name_any()).collect();
    for name in &names {
        let deleted = match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.code == 404 => false,
            Err(e) => return Err(target.explain_error(e, &format!("cannot delete CRD {name}"))),
        };
        said(
            &format!("customresourcedefinition.apiextensions.k8s.io/{name}"),
            deleted,
        );
    }
    let progress =
        crate::output::progress::Spinner::new("waiting for the CRDs and their objects to go");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut left = Vec::new();
        for name in &names {
            if let Some(crd) = api
                .get_opt(name)
                .await
                .map_err(|e| target.explain_error(e, &format!("cannot read CRD {name}")))?
            {
                let remaining = crd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Terminating"))
                    .and_then(|c| c.message.clone())
                    .unwrap_or_default();
                left.push(format!("{name} ({remaining})"));
            }
        }
        if left.is_empty() {
            progress.finish();
            return Ok(());
        }
        progress.say(&left.join(", "));
        if tokio::time::Instant::now() >= deadline {
            progress.finish();
            bail!(
                "the CRDs are not gone after {}s: {}; an object's finalizer may hold them (see `kubectl get runs,runtimes,persistentworkspaces,workflowruns -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FINALIZERS:.metadata.finalizers`); nothing else was removed yet",
                timeout.as_secs(),
                left.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn confirm(target: &Target, delete_crds: bool, keep_namespace: Option<&str>) -> anyhow::Result<()> {
    let namespace = match keep_namespace {
        Some(why) => format!(" (namespace {} is kept: it holds {why})", system::NAMESPACE),
        None => format!(", and namespace {} with all it holds", system::NAMESPACE),
    };
    let question = match delete_crds {
        true => format!(
            "Uninstall kruntimes from {}{namespace}, AND delete its CRDs: every Run, Runtime and PersistentWorkspace in every namespace, with their Runtime Pods, is deleted and cannot be recovered. Go on?",
            target.describe()
        ),
        false => format!(
            "Uninstall the kruntimes scheduler and user ClusterRoles from {}{namespace} (the CRDs, every Run and the admission policies stay)?",
            target.describe()
        ),
    };
    super::ask(
        &question,
        &format!("uninstall from {}", target.describe()),
        "uninstall",
    )
}
