//! Real credentials for tests: service-account tokens from the TokenRequest API — bound to a
//! Pod, as the kubelet mounts them, or not bound — and people by impersonation, each as a
//! kubeconfig file (for the built binary) or a client.
//!
//! Nothing here is faked: the API server signs the tokens and puts the Pod claims
//! (`authentication.kubernetes.io/pod-name`, `pod-uid`) into the user info itself.

use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt as _};

/// Tokens last longer than any test.
const EXPIRATION_SECONDS: i64 = 3600;

/// A service account `name` in `ns` with runtimed's rights there: a RoleBinding to the shipped
/// ClusterRole `kubectl-kruntimes-runtimed`, as the README asks of a Runtime whose template
/// names its own account (the Runtime controller makes the same for every other Runtime).
pub async fn runtimed_account(client: &Client, ns: &str, name: &str) {
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("create service account {ns}/{name}: {e}"));
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": kruntimes::runtime::identity::CLUSTER_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("bind {ns}/{name} to runtimed's ClusterRole: {e}"));
}

/// The service account a Runtime Pod runs as (the one its Runtime's controller made, unless
/// the template names one).
pub fn account_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| panic!("Pod {} names no service account", pod.name_any()))
}

/// A token of service account `sa` in `ns` bound to `pod` (name and UID), as the kubelet
/// projects it into the Pod. The Pod must run as `sa`.
pub async fn pod_bound_token(client: &Client, ns: &str, sa: &str, pod: &Pod) -> String {
    let bound = BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name_any()),
        uid: pod.uid(),
    };
    request_token(client, ns, sa, Some(bound)).await
}

/// A token of service account `sa` in `ns` bound to nothing (`kubectl create token SA`).
pub async fn unbound_token(client: &Client, ns: &str, sa: &str) -> String {
    request_token(client, ns, sa, None).await
}

/// The gateway's account, as deploy/scheduler.yaml names it: what runtimed's API takes by
/// default.
pub const GATEWAY: (&str, &str) = ("kubectl-kruntimes", "kubectl-kruntimes-scheduler");

/// A token of `ns`/`sa` for `audience` (the API server's, when `None`).
pub async fn audience_token(client: &Client, ns: &str, sa: &str, audience: &str) -> String {
    request_token_for(client, ns, sa, None, Some(audience)).await
}

/// Whose `token` is for `audience`, by the API server's TokenReview (`None`: not one it takes).
pub async fn reviewed_user(client: &Client, token: &str, audience: &str) -> Option<String> {
    use k8s_openapi::api::authentication::v1::TokenReview;
    let review: TokenReview = serde_json::from_value(
        serde_json::json!({"spec": {"token": token, "audiences": [audience]}}),
    )
    .unwrap();
    kube::Api::<TokenReview>::all(client.clone())
        .create(&Default::default(), &review)
        .await
        .unwrap()
        .status
        .filter(|s| s.authenticated == Some(true))
        .and_then(|s| s.user)
        .and_then(|u| u.username)
}

/// A token of the gateway's account for the runtimed of the Pod whose UID is `pod_uid`, as
/// the gateway gets it; the account is made when missing.
pub async fn gateway_token(pod_uid: &str) -> String {
    let client = super::client().await;
    let (ns, sa) = GATEWAY;
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": sa}})).unwrap();
    let exists = |r: Result<_, kube::Error>, what: &str| match r {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create {what}: {e}"),
    };
    let created = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await;
    exists(created.map(|_| ()), ns);
    let created = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await;
    exists(created.map(|_| ()), sa);
    let audience = kruntimes::api::runtimed_audience(pod_uid);
    audience_token(&client, ns, sa, &audience).await
}

async fn request_token(
    client: &Client,
    ns: &str,
    sa: &str,
    bound: Option<BoundObjectReference>,
) -> String {
    request_token_for(client, ns, sa, bound, None).await
}

async fn request_token_for(
    client: &Client,
    ns: &str,
    sa: &str,
    bound: Option<BoundObjectReference>,
    audience: Option<&str>,
) -> String {
    let what = match &bound {
        Some(b) => format!("a token of {ns}/{sa} bound to Pod {:?}", b.name),
        None => format!("a token of {ns}/{sa}"),
    };
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: audience.map(|a| vec![a.to_string()]),
            bound_object_ref: bound,
            expiration_seconds: Some(EXPIRATION_SECONDS),
        }),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("request {what}: {e}"))
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("the TokenRequest for {what} returned no token"))
}

/// A kubeconfig in `dir` that authenticates with `token` (default namespace `ns`).
pub fn token_kubeconfig(dir: &Path, file: &str, token: &str, ns: &str) -> PathBuf {
    let path = dir.join(file);
    super::Kubeconfig::of_control_plane(token)
        .namespace(ns)
        .write(&path)
        .unwrap();
    path
}

/// A kubeconfig in `dir` for the person `user` (namespace `ns`): the admin credentials with
/// `as: user`, so every request is authorized as `user` (plus `system:authenticated`).
pub fn user_kubeconfig(dir: &Path, user: &str, ns: &str) -> PathBuf {
    let path = dir.join(format!("user-{user}"));
    super::Kubeconfig::of_control_plane(super::ADMIN_TOKEN)
        .namespace(ns)
        .impersonate(user)
        .write(&path)
        .unwrap();
    path
}

/// The scheduler's service account and RBAC (deploy/scheduler.yaml, applied once per test
/// binary) and a kubeconfig with a token of that account (bound to nothing).
pub async fn scheduler_kubeconfig(dir: &Path) -> PathBuf {
    static APPLIED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    APPLIED.get_or_init(|| super::kubectl_apply("deploy/scheduler.yaml", None));
    let (ns, sa) = ("kubectl-kruntimes", "kubectl-kruntimes-scheduler");
    let token = unbound_token(&super::client().await, ns, sa).await;
    token_kubeconfig(dir, sa, &token, ns)
}
