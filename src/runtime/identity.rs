//! Who runtimed is in a Runtime's Pods: per Runtime, a ServiceAccount
//! `kubectl-kruntimes-runtimed-<runtime>` and a RoleBinding of the same name that binds it, in
//! the Runtime's namespace, to the ClusterRole `kubectl-kruntimes-runtimed` (shipped in
//! `deploy/crds/runtimed-role.yaml` and applied by `install`). Both are owned by the Runtime, so the
//! garbage collector removes them with it. A template that names its own `serviceAccountName`
//! keeps it, and gets neither.
//!
//! Why a RoleBinding to one ClusterRole rather than a Role per Runtime: RBAC cannot name the
//! Pods or Leases of a Runtime that does not exist yet, so every Runtime's Role would hold the
//! same rules; and to write a Role the scheduler would have to hold each right it grants (or
//! `escalate`), lease writes included. With the ClusterRole it needs only `bind` on that one
//! name. What narrows the rights to one Pod's own Runs and Lease is the admission policy
//! (`deploy/crds/runtimed-policy.yaml`), which matches these accounts by their name's prefix.
//!
//! Pure: builds the objects; the Runtime controller applies them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::{LABEL_RUNTIME, Runtime};

/// The ClusterRole that holds what runtimed does.
pub const CLUSTER_ROLE: &str = "kubectl-kruntimes-runtimed";
/// `deploy/crds/runtimed-role.yaml`, as shipped: that ClusterRole, applied by `install` (and
/// kept with the CRDs, out of what uninstalling the scheduler deletes: the Runtime Pods that
/// run meanwhile are bound to it).
pub const CLUSTER_ROLE_MANIFEST: &str = include_str!("../../deploy/crds/runtimed-role.yaml");

/// The ClusterRole of [`CLUSTER_ROLE_MANIFEST`].
pub fn cluster_role() -> Result<k8s_openapi::api::rbac::v1::ClusterRole, String> {
    let doc = crate::util::yaml::documents(CLUSTER_ROLE_MANIFEST)
        .map_err(|e| format!("the embedded deploy/crds/runtimed-role.yaml is not YAML: {e}"))?
        .into_iter()
        .find(|d| d.is_object())
        .ok_or("the embedded deploy/crds/runtimed-role.yaml holds no object")?;
    serde_json::from_value(doc).map_err(|e| {
        format!("the embedded deploy/crds/runtimed-role.yaml is not a ClusterRole: {e}")
    })
}
/// The other objects of [`CLUSTER_ROLE_MANIFEST`]: the ClusterRole that lets runtimed ask a
/// TokenReview (its API answers only the gateway, whose token it reviews) and its binding to
/// every ServiceAccount, which the per-Runtime RoleBindings cannot grant (cluster-scoped).
pub fn token_review() -> Result<
    (
        k8s_openapi::api::rbac::v1::ClusterRole,
        k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    ),
    String,
> {
    let docs = crate::util::yaml::documents(CLUSTER_ROLE_MANIFEST)
        .map_err(|e| format!("the embedded deploy/crds/runtimed-role.yaml is not YAML: {e}"))?;
    let of_kind = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == TOKEN_REVIEW)
            .cloned()
            .ok_or(format!(
                "the embedded deploy/crds/runtimed-role.yaml has no {kind} {TOKEN_REVIEW}"
            ))
    };
    let role = serde_json::from_value(of_kind("ClusterRole")?).map_err(|e| e.to_string())?;
    let binding =
        serde_json::from_value(of_kind("ClusterRoleBinding")?).map_err(|e| e.to_string())?;
    Ok((role, binding))
}

/// The name of the ClusterRole and ClusterRoleBinding of [`token_review`].
pub const TOKEN_REVIEW: &str = "kubectl-kruntimes-runtimed-tokenreview";

/// The service accounts the admission policy restricts: this name, or this name followed by
/// `-<runtime>` (the accounts this module makes).
pub const SERVICE_ACCOUNT: &str = "kubectl-kruntimes-runtimed";

/// The ServiceAccount (and RoleBinding) of `runtime`'s Pods.
pub fn name(runtime: &str) -> String {
    format!("{SERVICE_ACCOUNT}-{runtime}")
}

/// The account a Runtime Pod runs as: the template's own, else the Runtime's
/// ([`name`]; `None` means the template names one and nothing is made for it).
pub fn made_for(runtime: &Runtime) -> Option<String> {
    let named = runtime
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    (!named).then(|| name(&runtime.name_any()))
}

/// Sets the Pod's `serviceAccountName` to the Runtime's account, unless the template names one.
pub fn with_service_account(mut spec: PodSpec, runtime: &Runtime) -> PodSpec {
    if let Some(account) = made_for(runtime) {
        spec.service_account_name = Some(account);
    }
    spec
}

/// The metadata of an object `name` that the Runtime controller makes for `runtime`: in its
/// namespace, labelled with it and as ours, owned by it (the garbage collector removes it with
/// the Runtime).
pub fn owned_by(runtime: &Runtime, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: runtime.namespace(),
        labels: Some(BTreeMap::from([
            (LABEL_RUNTIME.to_string(), runtime.name_any()),
            (
                "app.kubernetes.io/managed-by".to_string(),
                "kubectl-kruntimes".to_string(),
            ),
        ])),
        owner_references: runtime.controller_owner_ref(&()).map(|r| vec![r]),
        ..Default::default()
    }
}

/// The ServiceAccount and RoleBinding to apply for `runtime` (`None` when its template names
/// its own account).
pub fn objects(runtime: &Runtime) -> Option<(ServiceAccount, RoleBinding)> {
    let account = made_for(runtime)?;
    let metadata = owned_by(runtime, &account);
    let service_account = ServiceAccount {
        metadata: metadata.clone(),
        ..Default::default()
    };
    let binding = RoleBinding {
        metadata,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: CLUSTER_ROLE.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account,
            namespace: runtime.namespace(),
            api_group: None,
        }]),
    };
    Some((service_account, binding))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::runtime;

    #[test]
    fn a_runtime_gets_its_own_account_bound_to_runtimeds_cluster_role() {
        let mut rt = runtime("python").build();
        rt.metadata.namespace = Some("team-a".into());
        rt.metadata.uid = Some("u1".into());
        let (sa, binding) = objects(&rt).expect("made");
        assert_eq!(sa.name_any(), "kubectl-kruntimes-runtimed-python");
        assert_eq!(sa.namespace().as_deref(), Some("team-a"));
        assert_eq!(sa.owner_references()[0].uid, "u1");
        assert_eq!(sa.owner_references()[0].controller, Some(true));
        assert_eq!(binding.name_any(), sa.name_any());
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(binding.role_ref.name, CLUSTER_ROLE);
        let subject = &binding.subjects.as_ref().unwrap()[0];
        assert_eq!(
            (subject.kind.as_str(), subject.name.as_str()),
            ("ServiceAccount", "kubectl-kruntimes-runtimed-python")
        );
        assert_eq!(subject.namespace.as_deref(), Some("team-a"));
        let spec = with_service_account(PodSpec::default(), &rt);
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some("kubectl-kruntimes-runtimed-python")
        );
    }

    #[test]
    fn the_shipped_cluster_role_is_named_as_the_bindings_say() {
        let role = cluster_role().unwrap();
        assert_eq!(role.name_any(), CLUSTER_ROLE);
        assert!(!role.rules.unwrap_or_default().is_empty());
    }

    #[test]
    fn a_template_that_names_an_account_keeps_it_and_gets_nothing_made() {
        let mut rt = runtime("python").build();
        rt.spec.template.spec.as_mut().unwrap().service_account_name = Some("mine".into());
        assert!(objects(&rt).is_none());
        let spec = with_service_account(rt.spec.template.spec.clone().unwrap(), &rt);
        assert_eq!(spec.service_account_name.as_deref(), Some("mine"));
    }
}
