//! The gateway: `subresources.kruntimes.io/v1alpha1`, an aggregated API served behind an
//! `APIService` by every scheduler replica (`scheduler run --gateway-bind-address`), through
//! which `kubectl kruntimes logs`, `invoke` and `artifacts` (and `kubectl get --raw`) reach a
//! Run's runtimed, as KubeVirt's `virt-api` serves `subresources.kubevirt.io`. The API server
//! authenticates and authorises the user; the gateway believes who it names only on the API
//! server's front-proxy connection ([`frontproxy`]), asks a SubjectAccessReview on the Run's
//! subresource itself (verb `get` on `runs/log` and `runs/artifacts`, `create` on
//! `runs/invoke`; [`authorize`], each decision kept 10 s as aggregated servers keep theirs),
//! and calls the Run's runtimed with its own token ([`upstream`]). No caller's
//! credential ever reaches a Runtime Pod.
//!
//! Owns the listener, the refresh of its TLS settings and the handler; the path is
//! [`route`]'s, the certificate [`serving`]'s. Not leader-gated: it reads and never writes a
//! Run.

pub mod authorize;
pub mod frontproxy;
pub mod route;
pub mod serving;
pub mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse as _, Response};
use http::{HeaderValue, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use tracing::{info, warn};

use crate::api::{LABEL_RUNTIME, Run, SUBRESOURCES_GROUP};
use crate::telemetry::http::secure::PeerCertificate;
use frontproxy::RequestHeader;
use route::{Call, Route, What};
use upstream::Refusal;

/// A JSON body (axum's `Json` needs a feature this crate does not take).
fn json_body(value: serde_json::Value) -> Response {
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// How often every replica re-reads the front-proxy settings and its serving certificate.
pub const REFRESH: Duration = Duration::from_secs(300);

/// What `scheduler run` says of the gateway.
#[derive(Debug, Clone)]
pub struct Options {
    pub bind: SocketAddr,
    /// `--gateway-cert-dir`: a mounted pair instead of the self-kept one.
    pub cert_dir: Option<PathBuf>,
    /// The namespace of the system (its Secret and Service).
    pub namespace: String,
    /// `--gateway-service-account NAMESPACE/NAME`; default: the account the scheduler runs as.
    pub service_account: Option<String>,
}

/// The ServiceAccount (namespace, name) whose tokens the gateway presents: the one given, else
/// the one the client authenticates as (a SelfSubjectReview).
async fn account(client: &kube::Client, given: Option<&str>) -> anyhow::Result<(String, String)> {
    let parse = |s: &str| {
        let (ns, name) = s.split_once('/')?;
        (crate::api::is_object_name(ns) && crate::api::is_object_name(name))
            .then(|| (ns.to_string(), name.to_string()))
    };
    if let Some(given) = given {
        return parse(given).ok_or_else(|| {
            anyhow!("--gateway-service-account {given:?}: give NAMESPACE/NAME of a ServiceAccount")
        });
    }
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let review: SelfSubjectReview = client
        .request(
            kube::core::Request::new("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .create(
                    &PostParams::default(),
                    serde_json::to_vec(&SelfSubjectReview::default())?,
                )
                .map_err(|e| anyhow!("{e}"))?,
        )
        .await
        .context("asking the API server who the scheduler runs as (SelfSubjectReview)")?;
    let user = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default();
    user.strip_prefix("system:serviceaccount:")
        .and_then(|rest| parse(&rest.replacen(':', "/", 1)))
        .ok_or_else(|| {
            anyhow!(
                "the gateway presents a ServiceAccount's tokens to runtimed, but the scheduler runs as {user:?}: pass --gateway-service-account NAMESPACE/NAME"
            )
        })
}

/// The account's user name, as runtimed's `--gateway-user` takes it.
pub fn user_of(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The front-proxy settings the API server publishes.
async fn request_header(client: &kube::Client) -> anyhow::Result<RequestHeader> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), frontproxy::CONFIG_MAP_NAMESPACE);
    let where_ = format!(
        "ConfigMap {}/{}",
        frontproxy::CONFIG_MAP_NAMESPACE,
        frontproxy::CONFIG_MAP
    );
    let map = maps.get(frontproxy::CONFIG_MAP).await.with_context(|| {
        format!(
            "reading {where_} (the gateway's role binds extension-apiserver-authentication-reader)"
        )
    })?;
    RequestHeader::from_config_map(&map.data.unwrap_or_default())
        .map_err(|e| anyhow!("{where_}: {e}"))
}

/// The TLS settings from the front-proxy settings and the serving pair.
async fn tls(
    client: &kube::Client,
    opts: &Options,
) -> anyhow::Result<(Arc<rustls::ServerConfig>, RequestHeader)> {
    let header = request_header(client).await?;
    let serving = match &opts.cert_dir {
        Some(dir) => serving::from_dir(dir)?,
        None => serving::self_kept(client, &opts.namespace).await?,
    };
    let verifier = header
        .client_verifier()
        .map_err(|e| anyhow!("the request-header CA: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(serving.chain, serving.key)
        .context("the gateway's certificate and key do not match")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(config), header))
}

/// What the handler shares.
#[derive(Clone)]
struct Gateway {
    client: kube::Client,
    header: Arc<RwLock<RequestHeader>>,
    decisions: Arc<Mutex<authorize::Decisions>>,
    tokens: upstream::Tokens,
    http: reqwest::Client,
}

/// Starts the gateway: resolves its account, reads its TLS settings (failing now if it
/// cannot), serves until `stopped` and refreshes the settings every [`REFRESH`]. Returns the
/// user runtimed must let in (`--gateway-user`).
pub async fn start(
    client: kube::Client,
    opts: Options,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<String> {
    let (sa_ns, sa_name) = account(&client, opts.service_account.as_deref()).await?;
    let (config, header) = tls(&client, &opts).await?;
    let config = Arc::new(RwLock::new(config));
    let header = Arc::new(RwLock::new(header));
    {
        let (client, opts, config, header) =
            (client.clone(), opts.clone(), config.clone(), header.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                match tls(&client, &opts).await {
                    Ok((c, h)) => {
                        *config.write().expect("tls") = c;
                        *header.write().expect("header") = h;
                    }
                    Err(e) => warn!("the gateway keeps its TLS settings: {e:#}"),
                }
            }
        });
    }
    let gateway = Gateway {
        client: client.clone(),
        header,
        decisions: Arc::default(),
        tokens: upstream::Tokens::new(client.clone(), &sa_ns, &sa_name),
        http: upstream::http_client()?,
    };
    let app = Router::new().fallback(handle).with_state(gateway);
    let current = move || config.read().expect("tls").clone();
    crate::telemetry::http::secure::serve_tls(
        opts.bind,
        app,
        current,
        crate::telemetry::http::Bounds::default(),
        stopped,
    )
    .await?;
    let user = user_of(&sa_ns, &sa_name);
    info!(addr = %opts.bind, %user, "the gateway serves {SUBRESOURCES_GROUP}");
    Ok(user)
}

/// A Kubernetes `Status` of failure: what the API server passes on to the caller.
fn status(refusal: &Refusal) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": refusal.message,
        "reason": refusal.reason,
        "code": refusal.code,
    });
    let code = StatusCode::from_u16(refusal.code).unwrap_or(StatusCode::BAD_GATEWAY);
    (code, json_body(body)).into_response()
}

async fn handle(State(gw): State<Gateway>, request: Request) -> Response {
    let call = match route::parse(request.method(), request.uri().path()) {
        Route::Group => return json_body(route::group_document()).into_response(),
        Route::Resources => return json_body(route::resources_document()).into_response(),
        Route::NotFound(why) => return status(&Refusal::new(404, "NotFound", why)),
        Route::MethodNotAllowed(takes) => {
            return status(&Refusal::new(
                405,
                "MethodNotAllowed",
                format!("this path takes {takes}"),
            ));
        }
        Route::Call(call) => call,
    };
    let peer = request
        .extensions()
        .get::<PeerCertificate>()
        .and_then(|p| p.0.clone());
    let user = gw
        .header
        .read()
        .expect("header")
        .user(peer.as_ref(), request.headers());
    let user = match user {
        Ok(user) => user,
        Err(why) => return status(&Refusal::new(401, "Unauthorized", why)),
    };
    // The review and the Run's read at once; the refusal goes first, whatever the read found.
    let (allowed, run) = tokio::join!(
        authorize::authorize(&gw.client, &gw.decisions, &user, &call),
        read_run(&gw.client, &call)
    );
    let served = match (allowed, run) {
        (Err(refusal), _) | (Ok(()), Err(refusal)) => Err(refusal),
        (Ok(()), Ok(run)) => serve(&gw, &call, run, request).await,
    };
    served.unwrap_or_else(|refusal| status(&refusal))
}

/// The Run the call names.
async fn read_run(client: &kube::Client, call: &Call) -> Result<Run, Refusal> {
    let runs: Api<Run> = Api::namespaced(client.clone(), &call.namespace);
    match upstream::read(&runs, &call.run).await {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(Refusal::new(
            404,
            "NotFound",
            format!("runs.kruntimes.io {:?} not found", call.run),
        )),
        Err(e) => Err(upstream::api_unavailable(e)),
    }
}

/// The call, once authorised: to the Run's runtimed, or (the artifact list) from the Run.
async fn serve(gw: &Gateway, call: &Call, run: Run, request: Request) -> Result<Response, Refusal> {
    let pods: Api<Pod> = Api::namespaced(gw.client.clone(), &call.namespace);
    let run_path =
        percent_encoding::utf8_percent_encode(&call.run, percent_encoding::NON_ALPHANUMERIC);
    let assigned = run.status.as_ref().and_then(|s| s.assigned_pod.clone());
    // The Runtime and the bound Pod at once: neither read needs the other.
    let bound = async {
        match (&call.what, &assigned) {
            (What::Log | What::Invoke, Some(name)) => upstream::read(&pods, name)
                .await
                .map_err(upstream::api_unavailable),
            _ => Ok(None),
        }
    };
    let (runtime_uid, bound) = tokio::join!(upstream::runtime_uid(&gw.client, &run), bound);
    let runtime_uid = runtime_uid?;
    match &call.what {
        What::ArtifactList => {
            let refs = run
                .status
                .as_ref()
                .map(|s| serde_json::to_value(&s.artifact_refs).unwrap_or_default())
                .unwrap_or_else(|| serde_json::json!([]));
            Ok(json_body(refs).into_response())
        }
        What::Log | What::Invoke => {
            let pod = bound?;
            let pod = upstream::bound_pod(&run, pod.as_ref(), &runtime_uid)?;
            let base = upstream::address(pod)?;
            let token = gw
                .tokens
                .for_pod(pod.metadata.uid.as_deref().unwrap_or_default())
                .await?;
            let upstream = match &call.what {
                What::Log => {
                    let query = log_query(request.uri().query());
                    gw.http.get(format!("{base}/logs/{run_path}{query}"))
                }
                _ => {
                    let content_type = request
                        .headers()
                        .get(http::header::CONTENT_TYPE)
                        .cloned()
                        .unwrap_or(HeaderValue::from_static(
                            crate::api::DEFAULT_INVOKE_CONTENT_TYPE,
                        ));
                    let body = axum::body::to_bytes(
                        request.into_body(),
                        crate::runtimed::invoke::MAX_INPUT,
                    )
                    .await
                    .map_err(|_| {
                        Refusal::new(
                            413,
                            "RequestEntityTooLarge",
                            "an invocation's input is at most 1 MiB",
                        )
                    })?;
                    gw.http
                        .post(format!("{base}/invoke/{run_path}"))
                        .header(http::header::CONTENT_TYPE, content_type)
                        .body(body)
                }
            };
            relay(upstream.bearer_auth(token), &pod.name_any()).await
        }
        What::Artifact(name) => {
            let listed = pods
                .list(
                    &ListParams::default().labels(&format!("{LABEL_RUNTIME}={}", run.spec.runtime)),
                )
                .await
                .map_err(upstream::api_unavailable)?;
            let candidates = upstream::artifact_pods(&run, &listed.items, &runtime_uid);
            if candidates.is_empty() {
                return Err(Refusal::new(
                    503,
                    "ServiceUnavailable",
                    format!(
                        "no Ready Pod the Runtime controller made for Runtime {} serves its artifact store now; scale it up, or read the store's volume (see status.artifactRefs)",
                        run.spec.runtime
                    ),
                ));
            }
            let uid = run.metadata.uid.clone().unwrap_or_default();
            let artifact =
                percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
            let mut last = None;
            for pod in candidates {
                let attempt = async {
                    let base = upstream::address(pod)?;
                    let token = gw
                        .tokens
                        .for_pod(pod.metadata.uid.as_deref().unwrap_or_default())
                        .await?;
                    let url = format!("{base}/artifacts/{run_path}/{uid}/{artifact}");
                    relay(gw.http.get(url).bearer_auth(token), &pod.name_any()).await
                };
                match attempt.await {
                    Ok(response) if response.status().is_success() => return Ok(response),
                    Ok(response) => last = Some(Ok(response)),
                    Err(refusal) => last = Some(Err(refusal)),
                }
            }
            last.expect("one candidate at least")
        }
    }
}

/// The query runtimed's `/logs/<run>` takes, from the caller's: `follow` and `tailLines`, and
/// nothing else.
fn log_query(query: Option<&str>) -> String {
    let kept: Vec<&str> = query
        .unwrap_or_default()
        .split('&')
        .filter(|kv| {
            let key = kv.split('=').next().unwrap_or_default();
            matches!(key, "follow" | "tailLines")
        })
        .collect();
    match kept.is_empty() {
        true => String::new(),
        false => format!("?{}", kept.join("&")),
    }
}

/// Sends `request` and streams runtimed's answer back; a refusal of runtimed's becomes a
/// `Status` with its code and words.
async fn relay(request: reqwest::RequestBuilder, pod: &str) -> Result<Response, Refusal> {
    let answer = request.send().await.map_err(|e| {
        Refusal::new(
            503,
            "ServiceUnavailable",
            format!("the gateway cannot reach the runtimed of Pod {pod}: {e}"),
        )
    })?;
    let code = answer.status().as_u16();
    if !answer.status().is_success() {
        let text = answer.text().await.unwrap_or_default();
        // runtimed refusing the gateway is the gateway's trouble, not the caller's: a 502.
        let (code, reason) = match code {
            401 | 403 => (502, "InternalError"),
            404 => (404, "NotFound"),
            other => (other, "InternalError"),
        };
        return Err(Refusal::new(
            code,
            reason,
            format!("the runtimed of Pod {pod}: {}", text.trim()),
        ));
    }
    let mut response = Response::builder().status(code);
    if let Some(ct) = answer.headers().get(http::header::CONTENT_TYPE) {
        response = response.header(http::header::CONTENT_TYPE, ct);
    }
    Ok(response
        .body(Body::from_stream(answer.bytes_stream()))
        .expect("a status and a content type make a response"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_follow_and_tail_lines_reach_runtimed() {
        assert_eq!(log_query(None), "");
        assert_eq!(
            log_query(Some("follow=true&tailLines=3")),
            "?follow=true&tailLines=3"
        );
        assert_eq!(log_query(Some("x=1&follow=true&../=2")), "?follow=true");
    }
}
