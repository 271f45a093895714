//! The running part of an installation: `deploy/scheduler.yaml` (the namespace
//! `kubectl-kruntimes`, the scheduler's service account and RBAC, its Deployment and metrics
//! Service) with the release's image, applied by `install` and removed by `uninstall`.
//!
//! It owns that file's objects as `install` applies them: the image put in (both the
//! container's and `KRUNTIMES_IMAGE`, the image Runtime Pods copy runtimed from), server-side
//! apply of any kind through discovery, the wait for the Deployment, and their deletion. The
//! CRDs, roles and admission policies are `install`'s own ([`super::apply`]).

use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};

use crate::api::FIELD_MANAGER;
use crate::kubeclient::Target;

/// `deploy/scheduler.yaml`, as shipped (with [`crate::cmd::cli::DEFAULT_IMAGE`]).
pub const MANIFEST: &str = include_str!("../../../deploy/scheduler.yaml");

/// The namespace the shipped scheduler runs in.
pub const NAMESPACE: &str = crate::api::INSTALL_NAMESPACE;

/// The scheduler's Deployment.
pub const DEPLOYMENT: &str = "kubectl-kruntimes-scheduler";

/// [`MANIFEST`] with `image` for the scheduler and for the runtimed that Runtime Pods copy.
pub fn manifest(image: &str) -> anyhow::Result<String> {
    let default = crate::cmd::cli::DEFAULT_IMAGE;
    let uses = MANIFEST.matches(default).count();
    if uses != 2 {
        bail!(
            "the embedded deploy/scheduler.yaml names {default} {uses} times, not twice (the container and KRUNTIMES_IMAGE); fix the file and rebuild"
        );
    }
    Ok(MANIFEST.replace(default, image))
}

/// The objects of [`manifest`], in file order.
pub fn objects(image: &str) -> anyhow::Result<Vec<DynamicObject>> {
    crate::util::yaml::documents(&manifest(image)?)
        .map_err(|e| anyhow!("the embedded deploy/scheduler.yaml is not YAML: {e}"))?
        .into_iter()
        .filter(|d| !d.is_null())
        .map(|d| serde_json::from_value(d).context("an object of deploy/scheduler.yaml"))
        .collect()
}

/// `kind.group/name` (kubectl's way of naming what it applied).
pub fn describe(object: &DynamicObject) -> String {
    let types = object.types.clone().unwrap_or_default();
    let group = types
        .api_version
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    let kind = types.kind.to_lowercase();
    let name = object.metadata.name.clone().unwrap_or_default();
    match group {
        "" => format!("{kind}/{name}"),
        g => format!("{kind}.{g}/{name}"),
    }
}

/// The API of one object, from discovery (its resource name and whether it is namespaced).
async fn api_for(target: &Target, object: &DynamicObject) -> anyhow::Result<Api<DynamicObject>> {
    let types = object
        .types
        .clone()
        .ok_or_else(|| anyhow!("an object of deploy/scheduler.yaml has no apiVersion or kind"))?;
    let gvk = GroupVersionKind::try_from(&types).map_err(|e| anyhow!("{e}"))?;
    let (resource, caps): (ApiResource, _) = kube::discovery::pinned_kind(&target.client, &gvk)
        .await
        .map_err(|e| {
            target.explain_error(e, &format!("cannot find {} in the API server", types.kind))
        })?;
    Ok(match caps.scope {
        Scope::Namespaced => {
            let ns = object.metadata.namespace.as_deref().unwrap_or(NAMESPACE);
            Api::namespaced_with(target.client.clone(), ns, &resource)
        }
        Scope::Cluster => Api::all_with(target.client.clone(), &resource),
    })
}

/// Server-side applies one object; says whether it was created, configured or unchanged.
pub async fn apply_one(
    target: &Target,
    object: &DynamicObject,
    dry_run: bool,
) -> anyhow::Result<super::Applied> {
    let api = api_for(target, object).await?;
    let name = object.metadata.name.clone().unwrap_or_default();
    let what = describe(object);
    let before = api
        .get_opt(&name)
        .await
        .map_err(|e| target.explain_error(e, &format!("cannot read {what}")))?;
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    let after = api
        .patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(|e| target.explain_error(e, &format!("cannot apply {what}")))?;
    Ok(match before {
        None => super::Applied::Created,
        Some(b) if b.metadata.resource_version == after.metadata.resource_version => {
            super::Applied::Unchanged
        }
        Some(_) => super::Applied::Configured,
    })
}

/// The kruntimes scheduler Deployments that are not `install`'s own (by name, in any
/// namespace: the chart renders deploy/scheduler.yaml's names in its release's namespace).
#[derive(Debug, Default)]
pub struct OtherSchedulers {
    /// One that Helm manages, as `namespace/name`: neither `install` nor `uninstall` may take
    /// it over or remove it.
    pub helm: Option<String>,
    /// Others outside [`NAMESPACE`]: a second scheduler would lead beside them, each with its
    /// own Lease.
    pub elsewhere: Vec<String>,
}

pub async fn other_schedulers(target: &Target) -> anyhow::Result<OtherSchedulers> {
    let api: Api<Deployment> = Api::all(target.client.clone());
    let list = api
        .list(&kube::api::ListParams::default().fields(&format!("metadata.name={DEPLOYMENT}")))
        .await
        .map_err(|e| {
            target.explain_error(e, "cannot list the Deployments of kruntimes schedulers")
        })?;
    let mut others = OtherSchedulers::default();
    for d in &list.items {
        let at = format!(
            "{}/{}",
            d.metadata.namespace.as_deref().unwrap_or_default(),
            d.metadata.name.as_deref().unwrap_or_default()
        );
        let by_helm = d
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by"))
            .is_some_and(|m| m == "Helm");
        if by_helm {
            others.helm.get_or_insert(at.clone());
        }
        if d.metadata.namespace.as_deref() != Some(NAMESPACE) {
            others.elsewhere.push(at);
        }
    }
    Ok(others)
}

/// What of the cluster's own work [`NAMESPACE`] holds (Runs, Runtimes), said so, or `None`:
/// deleting the namespace would delete them.
pub async fn namespace_holds_runs(target: &Target) -> anyhow::Result<Option<String>> {
    let runs: Api<crate::api::Run> = Api::namespaced(target.client.clone(), NAMESPACE);
    let runtimes: Api<crate::api::Runtime> = Api::namespaced(target.client.clone(), NAMESPACE);
    let one = kube::api::ListParams::default().limit(1);
    let count = |r: Result<usize, kube::Error>| match r {
        Ok(n) => Ok(n),
        // No CRD (already deleted) or no namespace: nothing of it there.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
        Err(e) => {
            Err(target.explain_error(e, &format!("cannot list what namespace {NAMESPACE} holds")))
        }
    };
    let runs = count(runs.list_metadata(&one).await.map(|l| l.items.len()))?;
    let runtimes = count(runtimes.list_metadata(&one).await.map(|l| l.items.len()))?;
    Ok(match (runs, runtimes) {
        (0, 0) => None,
        _ => Some("Runs or Runtimes of its own".to_string()),
    })
}

/// Whether [`NAMESPACE`] exists (a server dry run cannot check objects in a namespace it only
/// pretends to create).
pub async fn namespace_exists(target: &Target) -> anyhow::Result<bool> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(target.client.clone());
    api.get_opt(NAMESPACE)
        .await
        .map(|n| n.is_some())
        .map_err(|e| target.explain_error(e, &format!("cannot read namespace {NAMESPACE}")))
}

/// Deletes one object (absent already: `false`); the namespace's content goes with it. The
/// Namespace and the Deployment go in the foreground (their content first); the rest, which
/// nothing depends on, at once: a foreground deletion waits for the garbage collector, which
/// pauses while it rediscovers the API (as it does when the gateway's APIService goes).
pub async fn delete_one(target: &Target, object: &DynamicObject) -> anyhow::Result<bool> {
    let api = api_for(target, object).await?;
    let name = object.metadata.name.clone().unwrap_or_default();
    let kind = object.types.as_ref().map(|t| t.kind.as_str());
    let params = match kind {
        Some("Namespace" | "Deployment") => DeleteParams::foreground(),
        _ => DeleteParams::background(),
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(target.explain_error(e, &format!("cannot delete {}", describe(object)))),
    }
}

/// How far the scheduler's rollout is, in `kubectl rollout status`'s terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// Every replica is updated and available.
    Done {
        available: i32,
    },
    Progressing(String),
    /// The Deployment says it cannot progress (`ProgressDeadlineExceeded`, a quota, …).
    Failed(String),
}

/// Judges a Deployment as `kubectl rollout status` does. Pure.
pub fn rollout(deployment: &Deployment) -> Rollout {
    let want = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let Some(status) = &deployment.status else {
        return Rollout::Progressing("waiting for the Deployment controller".into());
    };
    let generation = deployment.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Rollout::Progressing("waiting for the Deployment controller".into());
    }
    for c in status.conditions.iter().flatten() {
        // As `kubectl rollout status`: only a passed progress deadline is a failure (a
        // ReplicaFailure, such as a quota, may clear).
        let failed = c.type_ == "Progressing"
            && c.status == "False"
            && c.reason.as_deref() == Some("ProgressDeadlineExceeded");
        if failed {
            return Rollout::Failed(format!(
                "{}: {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            ));
        }
    }
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let total = status.replicas.unwrap_or(0);
    if updated < want {
        Rollout::Progressing(format!("{updated} of {want} replicas updated"))
    } else if total > updated {
        Rollout::Progressing(format!(
            "{} old replicas pending termination",
            total - updated
        ))
    } else if available < updated {
        Rollout::Progressing(format!(
            "{available} of {updated} updated replicas available"
        ))
    } else {
        Rollout::Done { available }
    }
}

/// Waits until the scheduler's Deployment has rolled out, showing its progress on stderr.
pub async fn wait_rolled_out(
    target: &Target,
    image: &str,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let api: Api<Deployment> = Api::namespaced(target.client.clone(), NAMESPACE);
    let waited = wait_until("waiting for the scheduler", timeout, async || {
        match api.get_opt(DEPLOYMENT).await {
            Ok(Some(d)) => match rollout(&d) {
                Rollout::Done { available } => Look::Ready(available),
                Rollout::Failed(why) => Look::Broken(why),
                Rollout::Progressing(how) => Look::Waiting(how),
            },
            Ok(None) => Look::Waiting("the Deployment is not there yet".into()),
            Err(e) => Look::Waiting(e.to_string()),
        }
    })
    .await;
    match waited {
        Ok(available) => Ok(available),
        Err(Stuck::Broken(why)) => bail!(
            "deployment {NAMESPACE}/{DEPLOYMENT} cannot roll out: {why}; see `kubectl describe deployment -n {NAMESPACE} {DEPLOYMENT}`"
        ),
        Err(Stuck::TimedOut(said)) => bail!(
            "the scheduler has not rolled out after {}s ({said}); see `kubectl get pods -n {NAMESPACE}` (can the node pull {image}? set it with --image), or raise --timeout",
            timeout.as_secs(),
        ),
    }
}

/// What one look at the cluster found while [`wait_until`] waits.
enum Look<T> {
    Ready(T),
    /// It will not get there by waiting.
    Broken(String),
    /// Not yet, and why.
    Waiting(String),
}

/// Why [`wait_until`] stopped waiting.
enum Stuck {
    Broken(String),
    /// The timeout passed; the last thing the look said.
    TimedOut(String),
}

/// Looks every second until `look` is ready or broken or `timeout` passes, showing what it
/// says on a spinner labelled `label`.
async fn wait_until<T>(
    label: &str,
    timeout: Duration,
    mut look: impl AsyncFnMut() -> Look<T>,
) -> Result<T, Stuck> {
    let deadline = tokio::time::Instant::now() + timeout;
    let progress = crate::output::progress::Spinner::new(label);
    loop {
        let said = match look().await {
            Look::Ready(t) => {
                progress.finish();
                return Ok(t);
            }
            Look::Broken(why) => {
                progress.finish();
                return Err(Stuck::Broken(why));
            }
            Look::Waiting(said) => said,
        };
        progress.say(&said);
        if tokio::time::Instant::now() >= deadline {
            progress.finish();
            return Err(Stuck::TimedOut(said));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Whether the API server reaches the gateway: its APIService's `Available` condition, or what
/// it says instead. Pure.
pub fn gateway_available(
    service: &k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
) -> Result<(), String> {
    let conditions = service.status.as_ref().and_then(|s| s.conditions.as_ref());
    match conditions.and_then(|cs| cs.iter().find(|c| c.type_ == "Available")) {
        Some(c) if c.status == "True" => Ok(()),
        Some(c) => Err(c
            .message
            .clone()
            .unwrap_or_else(|| c.reason.clone().unwrap_or_default())),
        None => Err("the API server has not checked it yet".into()),
    }
}

/// Waits until the API server reaches the gateway (`logs`, `invoke` and `artifacts` work from
/// then on), showing its progress on stderr.
pub async fn wait_gateway_available(target: &Target, timeout: Duration) -> anyhow::Result<()> {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let name = crate::manager::gateway::serving::APISERVICE;
    let api: Api<APIService> = Api::all(target.client.clone());
    let waited = wait_until("waiting for the gateway", timeout, async || {
        match api.get_opt(name).await {
            Ok(Some(service)) => match gateway_available(&service) {
                Ok(()) => Look::Ready(()),
                Err(why) => Look::Waiting(why),
            },
            Ok(None) => Look::Waiting(format!("APIService {name} is not there")),
            Err(e) => Look::Waiting(e.to_string()),
        }
    })
    .await;
    match waited {
        Ok(()) => Ok(()),
        Err(Stuck::Broken(said) | Stuck::TimedOut(said)) => bail!(
            "the API server does not reach the gateway after {}s ({said}); see `kubectl get apiservice {name}` and the scheduler's logs, or raise --timeout",
            timeout.as_secs(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_image_goes_into_the_container_and_runtimeds_copy() {
        let objects = objects("registry.example/kubectl-kruntimes:9.9.9").unwrap();
        let deployment = objects
            .iter()
            .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
            .unwrap();
        let container = &deployment.data["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["image"],
            "registry.example/kubectl-kruntimes:9.9.9"
        );
        let env = container["env"].as_array().unwrap();
        assert!(env.iter().any(|e| e["name"] == "KRUNTIMES_IMAGE"
            && e["value"] == "registry.example/kubectl-kruntimes:9.9.9"));
        assert_eq!(manifest(crate::cmd::cli::DEFAULT_IMAGE).unwrap(), MANIFEST);
        let names: Vec<String> = objects.iter().map(describe).collect();
        assert_eq!(names[0], "namespace/kubectl-kruntimes");
        assert!(names.contains(&"deployment.apps/kubectl-kruntimes-scheduler".to_string()));
        assert!(names.contains(
            &"clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-scheduler".to_string()
        ));
    }

    fn deployment(status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "d", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_rollout_is_judged_as_kubectl_rollout_status_judges_it() {
        let cases = [
            (json!({"observedGeneration": 1}), "Progressing"),
            (
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1}),
                "1 of 2 replicas updated",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2}),
                "1 old replicas",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}),
                "1 of 2 updated replicas available",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
                "Done",
            ),
            (
                json!({"observedGeneration": 2, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "too slow"}]}),
                "Failed",
            ),
        ];
        for (status, want) in cases {
            let got = format!("{:?}", rollout(&deployment(status.clone())));
            assert!(got.contains(want), "{status}: {got}");
        }
    }

    #[test]
    fn the_gateway_is_available_once_the_api_server_says_so() {
        let service = |status: serde_json::Value| {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "v1alpha1.subresources.kruntimes.io"},
                "spec": {"groupPriorityMinimum": 1000, "versionPriority": 15},
                "status": status,
            }))
            .unwrap()
        };
        assert!(gateway_available(&service(serde_json::json!({}))).is_err());
        let failing = service(
            serde_json::json!({"conditions": [{"type": "Available", "status": "False",
            "reason": "FailedDiscoveryCheck", "message": "failing or missing response"}]}),
        );
        assert_eq!(
            gateway_available(&failing),
            Err("failing or missing response".to_string())
        );
        let up =
            service(serde_json::json!({"conditions": [{"type": "Available", "status": "True"}]}));
        assert_eq!(gateway_available(&up), Ok(()));
    }
}
