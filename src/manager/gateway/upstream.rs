//! The gateway's side of a call to runtimed: which Pod serves the Run (the one it is bound
//! to, by UID, made by the Runtime controller; for an artifact, any Ready Pod of the Runtime
//! the controller made), a token of the gateway's own ServiceAccount for that Pod's audience
//! alone (TokenRequest, kept until half its life is gone), and the request over TLS to the
//! Pod's address on runtimed's API port. Nothing of the caller's crosses: not their token,
//! not their headers; only the method, the query the subresource takes and the body.
//!
//! runtimed's certificate is made by runtimed at start and not verified here (as the API
//! server does not verify kubelets' unless given `--kubelet-certificate-authority`): the
//! connection is private, and what crosses it is a token that opens that one Pod's runtimed
//! for minutes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};

use crate::api::{RUNTIMED_API_PORT_NAME, Run, Runtime, made_for_runtime, runtimed_audience};

/// runtimed's API port when its container names none.
pub const DEFAULT_API_PORT: u16 = 9443;
/// How long a token the gateway asks for lives (the API server's shortest).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(600);
/// The most Pods' tokens kept.
pub const MAX_TOKENS: usize = 4096;

/// Why a call cannot go on: the HTTP status and the message, for the Status the caller gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            code,
            reason,
            message: message.into(),
        }
    }
}

/// The Pod of `run` the gateway may call, or why none: bound to it by name (and UID where
/// the Run records one), made by the Runtime controller for the Run's Runtime. Pure.
pub fn bound_pod<'a>(
    run: &Run,
    pod: Option<&'a Pod>,
    runtime_uid: &str,
) -> Result<&'a Pod, Refusal> {
    let name = run.name_any();
    let status = run.status.as_ref();
    let Some(assigned) = status.and_then(|s| s.assigned_pod.as_deref()) else {
        return Err(Refusal::new(
            409,
            "Conflict",
            format!(
                "run/{name} has not been bound to a Runtime Pod yet (see kubectl kruntimes explain run/{name})"
            ),
        ));
    };
    let Some(pod) = pod.filter(|p| p.name_any() == assigned) else {
        return Err(Refusal::new(
            410,
            "Gone",
            format!(
                "Pod {assigned} of run/{name} no longer exists, and what its runtimed kept with it"
            ),
        ));
    };
    if let Some(uid) = status.and_then(|s| s.assigned_pod_uid.as_deref())
        && pod.metadata.uid.as_deref() != Some(uid)
    {
        return Err(Refusal::new(
            410,
            "Gone",
            format!(
                "Pod {assigned} is not the Pod run/{name} was bound to (its UID differs from status.assignedPodUID)"
            ),
        ));
    }
    if !made_for_runtime(pod, runtime_uid) {
        return Err(Refusal::new(
            403,
            "Forbidden",
            format!(
                "Pod {assigned}, which run/{name} names, was not made by the Runtime controller for Runtime {}: the gateway calls no such Pod",
                run.spec.runtime
            ),
        ));
    }
    Ok(pod)
}

/// The port of runtimed's API in `pod`: its container port named `kruntimes-api`, else the
/// default.
pub fn api_port(pod: &Pod) -> u16 {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(RUNTIMED_API_PORT_NAME))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .unwrap_or(DEFAULT_API_PORT)
}

/// Where runtimed's API listens in `pod`: its IP and the port named `kruntimes-api`.
pub fn address(pod: &Pod) -> Result<String, Refusal> {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| {
            Refusal::new(
                503,
                "ServiceUnavailable",
                format!("Pod {} has no IP yet", pod.name_any()),
            )
        })?;
    let port = api_port(pod);
    let host = match ip.contains(':') {
        true => format!("[{ip}]"),
        false => ip,
    };
    Ok(format!("https://{host}:{port}"))
}

/// The gateway's account and its tokens by Pod UID.
#[derive(Clone)]
pub struct Tokens {
    client: kube::Client,
    namespace: String,
    account: String,
    kept: Arc<Mutex<HashMap<String, (Instant, String)>>>,
}

impl Tokens {
    pub fn new(client: kube::Client, namespace: &str, account: &str) -> Self {
        Tokens {
            client,
            namespace: namespace.into(),
            account: account.into(),
            kept: Arc::default(),
        }
    }

    /// A token of the gateway's account for the runtimed of the Pod whose UID is `pod_uid`.
    pub async fn for_pod(&self, pod_uid: &str) -> Result<String, Refusal> {
        let now = Instant::now();
        let fresh = TOKEN_LIFETIME / 2;
        if let Some((at, token)) = self.kept.lock().expect("tokens").get(pod_uid)
            && now.duration_since(*at) < fresh
        {
            return Ok(token.clone());
        }
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &self.namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![runtimed_audience(pod_uid)]),
                expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
                bound_object_ref: None,
            }),
            ..Default::default()
        };
        let made = accounts
            .create_token_request(&self.account, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                Refusal::new(
                    503,
                    "ServiceUnavailable",
                    format!(
                        "the gateway cannot get a token of ServiceAccount {}/{} for runtimed: {e}",
                        self.namespace, self.account
                    ),
                )
            })?;
        let token = made.status.and_then(|s| s.token).unwrap_or_default();
        let mut kept = self.kept.lock().expect("tokens");
        if kept.len() >= MAX_TOKENS {
            kept.retain(|_, (at, _)| now.duration_since(*at) < fresh);
            if kept.len() >= MAX_TOKENS {
                kept.clear();
            }
        }
        kept.insert(pod_uid.to_string(), (now, token.clone()));
        Ok(token)
    }
}

/// The Pods of the Run's Runtime the gateway may ask for an artifact: Ready, not going,
/// made by the controller for the Runtime; the Run's own first.
pub fn artifact_pods<'a>(run: &Run, pods: &'a [Pod], runtime_uid: &str) -> Vec<&'a Pod> {
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let own = run.status.as_ref().and_then(|s| s.assigned_pod.clone());
    let mut found: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            ready(p) && p.metadata.deletion_timestamp.is_none() && made_for_runtime(p, runtime_uid)
        })
        .collect();
    found.sort_by_key(|p| Some(p.name_any()) != own);
    found
}

/// The UID of `run`'s Runtime.
pub async fn runtime_uid(client: &kube::Client, run: &Run) -> Result<String, Refusal> {
    let ns = run.namespace().unwrap_or_default();
    let runtimes: Api<Runtime> = Api::namespaced(client.clone(), &ns);
    match read(&runtimes, &run.spec.runtime).await {
        Ok(Some(rt)) => Ok(rt.metadata.uid.unwrap_or_default()),
        Ok(None) => Err(Refusal::new(
            404,
            "NotFound",
            format!(
                "Runtime {} of run/{} not found in namespace {ns}",
                run.spec.runtime,
                run.name_any()
            ),
        )),
        Err(e) => Err(api_unavailable(e)),
    }
}

/// Object `name`, or `None` if there is none, read from the API server's watch cache
/// (`resourceVersion=0`), as an informer lists: no quorum read of etcd on every call. It is as
/// fresh as what the caller's own watch of the same API server saw. A miss is read again from
/// etcd: an object created a moment ago may not be in the cache yet, and "not found" must
/// be true.
pub async fn read<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_with(name, &kube::api::GetParams::any()).await {
        Ok(object) => Ok(Some(object)),
        Err(kube::Error::Api(s)) if s.code == 404 => api.get_opt(name).await,
        Err(e) => Err(e),
    }
}

/// The API server's error, as the gateway passes it on.
pub fn api_unavailable(e: kube::Error) -> Refusal {
    match e {
        kube::Error::Api(s) => Refusal::new(
            s.code,
            "InternalError",
            format!("the gateway's read failed: {}", s.message),
        ),
        other => Refusal::new(
            503,
            "ServiceUnavailable",
            format!("the gateway cannot reach the API server: {other}"),
        ),
    }
}

/// The HTTP client to runtimeds: TLS without verification of runtimed's self-made
/// certificate (see the module doc), no redirects, no proxy from the environment.
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .build()?)
}

/// Accepts runtimed's self-made certificate; still checks the handshake's signatures, so the
/// connection is keyed to the key that certificate names. (Tests use it for servers with a
/// self-signed certificate too, as a Prometheus scrape with `insecureSkipVerify`.)
#[derive(Debug)]
pub struct AnyServer(pub Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pod, run};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn made(name: &str, uid: &str, runtime_uid: &str) -> Pod {
        let mut p = pod(name).build();
        p.metadata.uid = Some(uid.into());
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "kruntimes.io/v1alpha1".into(),
            kind: "Runtime".into(),
            name: "python".into(),
            uid: runtime_uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        p
    }

    #[test]
    fn only_the_bound_pod_the_controller_made_is_called() {
        let mut r = run("r").on("p1").build();
        let good = made("p1", "pod-uid", "rt-uid");
        assert!(bound_pod(&r, Some(&good), "rt-uid").is_ok());
        // Labelled alike, made by someone else.
        let rogue = pod("p1").build();
        assert_eq!(bound_pod(&r, Some(&rogue), "rt-uid").unwrap_err().code, 403);
        // Another Runtime of that name (by UID).
        assert_eq!(
            bound_pod(&r, Some(&good), "rt-other").unwrap_err().code,
            403
        );
        // The Run was bound to another Pod of that name.
        r.status.as_mut().unwrap().assigned_pod_uid = Some("older".into());
        assert_eq!(bound_pod(&r, Some(&good), "rt-uid").unwrap_err().code, 410);
        assert_eq!(
            bound_pod(&run("q").build(), None, "rt-uid")
                .unwrap_err()
                .code,
            409
        );
    }

    #[test]
    fn the_api_address_is_the_pods_ip_and_its_named_port() {
        let mut p = made("p1", "u", "rt");
        assert_eq!(address(&p).unwrap_err().code, 503);
        p.status.get_or_insert_with(Default::default).pod_ip = Some("10.0.0.7".into());
        assert_eq!(address(&p).unwrap(), "https://10.0.0.7:9443");
        let spec = p.spec.get_or_insert_with(Default::default);
        spec.containers[0].ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
            name: Some(RUNTIMED_API_PORT_NAME.into()),
            container_port: 19443,
            ..Default::default()
        }]);
        p.status.as_mut().unwrap().pod_ip = Some("fd00::7".into());
        assert_eq!(address(&p).unwrap(), "https://[fd00::7]:19443");
    }
}
