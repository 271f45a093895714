//! `/metrics` served as controller-runtime's secure metrics serve it: over TLS, and only to a
//! caller the API server vouches for. Each request's bearer token is authenticated with a
//! `TokenReview` and the user it names is authorised with a `SubjectAccessReview` of `get` on
//! the non-resource URL of the request (`/metrics`), the same check the API server makes for
//! its own `/metrics`; RBAC grants it with `nonResourceURLs: ["/metrics"]` (the shipped
//! ClusterRole `kubectl-kruntimes-metrics-reader`). No token: 401. Refused: 403. The reviews
//! cannot be asked: 503.
//!
//! Verdicts are kept for [`TTL`] per token digest and path (at most [`MAX_CACHED`]), so a
//! scrape every few seconds costs two reviews every [`TTL`], not two per scrape. The serving
//! certificate is a PEM pair from a directory (`tls.crt`, `tls.key`: a Secret mounted there,
//! from cert-manager say) or, without one, a self-signed certificate made at start, as
//! controller-runtime does; scrapers then skip verification (`insecureSkipVerify`), and the
//! token is what protects the metrics.
//!
//! Owns the TLS listener and the gate; [`decide`] is the pure part.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header::AUTHORIZATION};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest as _, Sha256};
use tracing::{error, info};

/// How long a verdict is reused.
pub const TTL: Duration = Duration::from_secs(10);
/// The most verdicts kept; when full, the expired ones go, and if none has, all of them.
pub const MAX_CACHED: usize = 1024;

/// What the API server said of one caller on one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// The token is not one the API server accepts.
    Unauthenticated,
    /// `user` may not `get` the path.
    Forbidden {
        user: String,
    },
}

/// The verdict from the two reviews' answers. Pure.
pub fn decide(token: &TokenReviewStatus, access: Option<&SubjectAccessReviewStatus>) -> Verdict {
    let user = token
        .user
        .as_ref()
        .and_then(|u| u.username.clone())
        .unwrap_or_default();
    if token.authenticated != Some(true) || user.is_empty() {
        return Verdict::Unauthenticated;
    }
    match access {
        Some(status) if status.allowed && status.denied != Some(true) => Verdict::Allowed,
        _ => Verdict::Forbidden { user },
    }
}

/// The bearer token of a request, if it carries one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Verdicts by the digest of token and path, with when they were given.
type Verdicts = HashMap<[u8; 32], (Instant, Verdict)>;

/// Asks the API server about callers and remembers its answers for [`TTL`].
#[derive(Clone)]
pub struct Gate {
    client: kube::Client,
    cache: Arc<Mutex<Verdicts>>,
}

impl Gate {
    pub fn new(client: kube::Client) -> Self {
        Gate {
            client,
            cache: Arc::default(),
        }
    }

    /// The verdict on `token` for `get path`, from the cache or from the API server.
    pub async fn verdict(&self, token: &str, path: &str) -> Result<Verdict, kube::Error> {
        let key: [u8; 32] = Sha256::new()
            .chain_update(token)
            .chain_update([0])
            .chain_update(path)
            .finalize()
            .into();
        let now = Instant::now();
        if let Some((at, verdict)) = self.cache.lock().unwrap().get(&key)
            && now.duration_since(*at) < TTL
        {
            return Ok(verdict.clone());
        }
        let verdict = self.review(token, path).await?;
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (at, _)| now.duration_since(*at) < TTL);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (now, verdict.clone()));
        Ok(verdict)
    }

    async fn review(&self, token: &str, path: &str) -> Result<Verdict, kube::Error> {
        let params = PostParams::default();
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&params, &review)
            .await?
            .status
            .unwrap_or_default();
        let Some(user) = reviewed
            .user
            .clone()
            .filter(|_| reviewed.authenticated == Some(true))
        else {
            return Ok(decide(&reviewed, None));
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&params, &access)
            .await?
            .status;
        Ok(decide(&reviewed, answered.as_ref()))
    }
}

/// The axum middleware: lets a request through only on [`Verdict::Allowed`].
pub async fn guard(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let Some(token) = bearer(request.headers()).map(str::to_string) else {
        return (
            StatusCode::UNAUTHORIZED,
            "Unauthorized: send a bearer token (a ServiceAccount's, bound to kubectl-kruntimes-metrics-reader)\n",
        )
            .into_response();
    };
    let path = request.uri().path().to_string();
    // Only what is served is reviewed: a made-up path costs the API server nothing.
    if path != "/metrics" {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    match gate.verdict(&token, &path).await {
        Ok(Verdict::Allowed) => next.run(request).await,
        Ok(Verdict::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            "Unauthorized: the API server does not accept this token\n",
        )
            .into_response(),
        Ok(Verdict::Forbidden { user }) => (
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: {user} may not get {path}; grant it with the ClusterRole kubectl-kruntimes-metrics-reader\n"
            ),
        )
            .into_response(),
        Err(e) => {
            error!("cannot review a caller of {path}: {e}");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "cannot ask the API server about this caller; try again\n",
            )
                .into_response()
        }
    }
}

/// `app` behind [`guard`].
pub fn guarded(app: Router, gate: Gate) -> Router {
    app.layer(axum::middleware::from_fn_with_state(gate, guard))
}

/// The TLS configuration: `tls.crt` and `tls.key` of `cert_dir`, or a self-signed certificate
/// for `names` made now.
pub fn server_config(
    cert_dir: Option<&Path>,
    names: &[String],
) -> anyhow::Result<rustls::ServerConfig> {
    let (chain, key) = match cert_dir {
        Some(dir) => {
            let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&crt)
                .and_then(|certs| certs.collect())
                .map_err(|e| anyhow!("cannot read the certificate {}: {e}", crt.display()))?;
            if chain.is_empty() {
                return Err(anyhow!("{} holds no PEM certificate", crt.display()));
            }
            let key = PrivateKeyDer::from_pem_file(&key)
                .map_err(|e| anyhow!("cannot read the private key {}: {e}", key.display()))?;
            (chain, key)
        }
        None => {
            let certified = rcgen::generate_simple_self_signed(names.to_vec())
                .context("cannot make a self-signed certificate")?;
            let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der())
                .map_err(|e| anyhow!("the generated key: {e}"))?;
            (vec![certified.cert.der().clone()], key)
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the serving certificate and key do not match")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The client certificate a connection's peer presented and the TLS layer verified (`None`:
/// it presented none), in every request's extensions.
#[derive(Debug, Clone)]
pub struct PeerCertificate(pub Option<CertificateDer<'static>>);

/// Binds `addr` (failing now if it cannot) and serves `app` over TLS in the background until
/// `stopped`, within `bounds` (at most so many connections at once; a connection that has not
/// sent a request's headers in time is closed). Each connection takes the settings `tls`
/// gives then (so they can be renewed while serving) and its requests carry the
/// [`PeerCertificate`]. A handshake that fails or stalls past 10 s closes only its connection.
pub async fn serve_tls(
    addr: SocketAddr,
    app: Router,
    tls: impl Fn() -> Arc<rustls::ServerConfig> + Send + Sync + 'static,
    bounds: super::Bounds,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let slots = Arc::new(tokio::sync::Semaphore::new(bounds.connections));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    info!(%addr, "serving over TLS");
    tokio::spawn(async move {
        let accept = async {
            loop {
                // Never closed: a permit always comes, once a connection ends.
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let stream = match listener.accept().await {
                    Ok((stream, _)) => {
                        // As Go sets on every connection: a response written in parts (headers,
                        // then body) must not wait out the peer's delayed ACK (Nagle's algorithm,
                        // 40 ms a call through the aggregation layer).
                        let _ = stream.set_nodelay(true);
                        stream
                    }
                    Err(e) => {
                        error!("https server on {addr}: cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, app) = (tokio_rustls::TlsAcceptor::from(tls()), app.clone());
                tokio::spawn(async move {
                    let handshake =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
                    let Ok(Ok(tls)) = handshake.await else {
                        return;
                    };
                    let peer = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|c| c.clone().into_owned());
                    let app = app.layer(axum::Extension(PeerCertificate(peer)));
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(bounds.header_read)
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                    drop(permit);
                });
            }
        };
        tokio::select! {
            () = accept => {}
            () = stopped => {}
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;

    fn reviewed(user: Option<&str>) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(user.is_some()),
            user: user.map(|u| UserInfo {
                username: Some(u.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn access(allowed: bool, denied: Option<bool>) -> SubjectAccessReviewStatus {
        SubjectAccessReviewStatus {
            allowed,
            denied,
            ..Default::default()
        }
    }

    #[test]
    fn only_an_authenticated_user_the_api_server_allows_gets_through() {
        assert_eq!(
            decide(&reviewed(Some("prom")), Some(&access(true, None))),
            Verdict::Allowed
        );
        assert_eq!(
            decide(&reviewed(Some("prom")), Some(&access(false, None))),
            Verdict::Forbidden {
                user: "prom".into()
            }
        );
        // An explicit deny wins over an allow (as the API server's union authorizer reads it).
        assert_eq!(
            decide(&reviewed(Some("prom")), Some(&access(true, Some(true)))),
            Verdict::Forbidden {
                user: "prom".into()
            }
        );
        assert_eq!(
            decide(&reviewed(Some("prom")), None),
            Verdict::Forbidden {
                user: "prom".into()
            }
        );
        assert_eq!(
            decide(&reviewed(None), Some(&access(true, None))),
            Verdict::Unauthenticated
        );
        let mut nameless = reviewed(Some(""));
        nameless.authenticated = Some(true);
        assert_eq!(
            decide(&nameless, Some(&access(true, None))),
            Verdict::Unauthenticated
        );
    }

    #[test]
    fn the_bearer_token_is_read_from_authorization_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&headers), None);
        headers.insert(AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer(&headers), None);
        headers.insert(AUTHORIZATION, "bearer t0k3n".parse().unwrap());
        assert_eq!(bearer(&headers), Some("t0k3n"));
    }

    #[test]
    fn without_a_certificate_directory_a_self_signed_one_is_made() {
        server_config(None, &["localhost".into()]).unwrap();
        let missing = server_config(Some(Path::new("/nonexistent")), &[])
            .unwrap_err()
            .to_string();
        assert!(
            missing.starts_with("cannot read the certificate /nonexistent/tls.crt"),
            "{missing}"
        );
    }
}
