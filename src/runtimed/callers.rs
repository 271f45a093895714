//! Who may call runtimed's API on its probe port: `POST /invoke/<run>`, `GET /logs/<run>` and
//! `GET /artifacts/<uid>/<name>`. The Pod's address is reachable from other Pods, not only
//! through the API server's Pod proxy, so runtimed authenticates and authorises every call
//! itself, as the kubelet does for its own API, with the API server as the judge:
//!
//! - the caller's bearer token comes in `Authorization` (a direct call) or in
//!   `X-Kruntimes-Authorization` (through the Pod proxy, which removes `Authorization` once it
//!   has authenticated the request); `X-Kruntimes-Impersonate-User`/`-Group` carry kubectl's
//!   `--as`/`--as-group`;
//! - runtimed asks the API server, with that token, a `SelfSubjectAccessReview` of a verb on a
//!   subresource of the Run: `create runs/invoke`, `get runs/log`, `get runs/artifacts` (RBAC
//!   grants them like any other: `kruntimes.io`, resource `runs/invoke`, …). The API server
//!   authenticates the token (401 here if it does not), applies the impersonation (only if the
//!   token may impersonate) and answers for the Run's namespace and name. A
//!   SelfSubjectAccessReview needs no right of runtimed's own: every authenticated user may
//!   ask it about themselves;
//! - verdicts are kept for [`TTL`] per token, impersonation, access and Run (at most
//!   [`MAX_CACHED`]), so a burst of invocations costs one review. Tokens are kept only as a
//!   digest.
//!
//! No token: 401. Refused: 403, with what to grant. The review cannot be asked: 503.
//! [`guard`] is the axum middleware; [`Gate::verdict`] the one place a decision is made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};

use crate::api::{
    CALLER_IMPERSONATE_GROUP_HEADER as IMPERSONATE_GROUP_HEADER,
    CALLER_IMPERSONATE_USER_HEADER as IMPERSONATE_USER_HEADER, CALLER_TOKEN_HEADER as TOKEN_HEADER,
};

/// How long a verdict is reused.
pub const TTL: Duration = Duration::from_secs(10);
/// The most verdicts kept.
pub const MAX_CACHED: usize = 1024;

/// What a call asks of a Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// `POST /invoke/<run>`: `create runs/invoke`.
    Invoke,
    /// `GET /logs/<run>`: `get runs/log`.
    Log,
    /// `GET /artifacts/<uid>/<name>`: `get runs/artifacts` (in the namespace: the path names
    /// the Run by UID).
    Artifacts,
}

impl Access {
    pub fn verb(self) -> &'static str {
        match self {
            Access::Invoke => "create",
            Access::Log | Access::Artifacts => "get",
        }
    }

    pub fn subresource(self) -> &'static str {
        match self {
            Access::Invoke => "invoke",
            Access::Log => "log",
            Access::Artifacts => "artifacts",
        }
    }

    /// The access a request path asks for, and the Run it names (`None` for paths that are
    /// not runtimed's API). The Run's name is the segment as the handler sees it, percent-
    /// decoded: `/invoke/%65cho` is authorized as `echo`, the Run it invokes. A segment that
    /// is no Kubernetes object name once decoded names no Run (`Some(Err(..))`): it is
    /// refused before anything is asked or served.
    pub fn of_path(path: &str) -> Option<(Access, Option<Result<String, String>>)> {
        let mut parts = path.trim_start_matches('/').split('/');
        let (first, second) = (parts.next()?, parts.next());
        let name = || second.map(run_name);
        match first {
            "invoke" => Some((Access::Invoke, name())),
            "logs" => Some((Access::Log, name())),
            "artifacts" => Some((Access::Artifacts, None)),
            _ => None,
        }
    }
}

/// The Run name a path segment holds, percent-decoded, if it is a DNS-1123 subdomain (what
/// Kubernetes allows as an object name); else the segment as the error.
fn run_name(segment: &str) -> Result<String, String> {
    let decoded = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| segment.to_string())?;
    let ok = !decoded.is_empty()
        && decoded.len() <= 253
        && decoded.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    match ok {
        true => Ok(decoded.into_owned()),
        false => Err(segment.to_string()),
    }
}

/// Who calls: a bearer token and whom it acts as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    pub token: String,
    pub impersonate_user: Option<String>,
    pub impersonate_groups: Vec<String>,
}

impl Caller {
    /// The caller of a request (`None`: no bearer token).
    pub fn of(headers: &HeaderMap) -> Option<Caller> {
        let bearer = |name: &str| {
            headers
                .get(name)?
                .to_str()
                .ok()?
                .strip_prefix("Bearer ")
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        let token = bearer(TOKEN_HEADER).or_else(|| bearer("authorization"))?;
        let text = |v: &axum::http::HeaderValue| v.to_str().ok().map(str::to_string);
        Some(Caller {
            token,
            impersonate_user: headers.get(IMPERSONATE_USER_HEADER).and_then(text),
            impersonate_groups: headers
                .get_all(IMPERSONATE_GROUP_HEADER)
                .iter()
                .filter_map(text)
                .collect(),
        })
    }

    /// A digest of everything that identifies the caller (the cache's key: no token is kept).
    fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.token.as_bytes());
        h.update([0]);
        h.update(self.impersonate_user.as_deref().unwrap_or("").as_bytes());
        for g in &self.impersonate_groups {
            h.update([0]);
            h.update(g.as_bytes());
        }
        h.finalize().into()
    }
}

/// The API server's answer for one caller, access and Run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// 401: the API server does not accept the token.
    Unauthenticated(String),
    /// 403: the reason RBAC (or the impersonation) gave.
    Denied(String),
}

type Key = ([u8; 32], Access, Option<String>);

/// The checks of one runtimed: its API server and namespace, and the verdicts it keeps.
#[derive(Clone)]
pub struct Gate {
    /// runtimed's own client configuration, without its credentials.
    config: kube::Config,
    namespace: String,
    cache: Arc<Mutex<HashMap<Key, (Instant, Verdict)>>>,
}

impl Gate {
    /// Checks against the API server of `config` for the Runs of `namespace`.
    pub fn new(mut config: kube::Config, namespace: &str) -> Self {
        config.auth_info = Default::default();
        Gate {
            config,
            namespace: namespace.to_string(),
            cache: Default::default(),
        }
    }

    /// The verdict on `caller` asking `access` of `run` (a cached one while it is fresh).
    /// `Err`: the review could not be asked.
    pub async fn verdict(
        &self,
        caller: &Caller,
        access: Access,
        run: Option<&str>,
    ) -> Result<Verdict, String> {
        let key = (caller.digest(), access, run.map(str::to_string));
        if let Some((at, verdict)) = self.cache.lock().expect("verdicts").get(&key)
            && at.elapsed() < TTL
        {
            return Ok(verdict.clone());
        }
        let verdict = self.review(caller, access, run).await?;
        let mut cache = self.cache.lock().expect("verdicts");
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (at, _)| at.elapsed() < TTL);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now(), verdict.clone()));
        Ok(verdict)
    }

    /// Asks the API server, as `caller`, whether it may do `access` to `run`.
    async fn review(
        &self,
        caller: &Caller,
        access: Access,
        run: Option<&str>,
    ) -> Result<Verdict, String> {
        let mut config = self.config.clone();
        config.auth_info.token = Some(caller.token.clone().into());
        config.auth_info.impersonate = caller.impersonate_user.clone();
        config.auth_info.impersonate_groups =
            (!caller.impersonate_groups.is_empty()).then(|| caller.impersonate_groups.clone());
        let client = kube::Client::try_from(config)
            .map_err(|e| format!("cannot build a client for the review: {e}"))?;
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(self.namespace.clone()),
                    verb: Some(access.verb().into()),
                    group: Some("kruntimes.io".into()),
                    resource: Some("runs".into()),
                    subresource: Some(access.subresource().into()),
                    name: run.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(client)
            .create(&PostParams::default(), &review)
            .await;
        match answer {
            Ok(r) => {
                let status = r.status.unwrap_or_default();
                Ok(match status.allowed {
                    true => Verdict::Allowed,
                    false => Verdict::Denied(status.reason.unwrap_or_default()),
                })
            }
            Err(kube::Error::Api(s)) if s.code == 401 => Ok(Verdict::Unauthenticated(s.message)),
            // The impersonation was refused.
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(Verdict::Denied(s.message)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The answer to a refused or unchecked call, in one sentence with what to do.
    fn refusal(&self, caller: Option<&Verdict>, access: Access, run: Option<&str>) -> Response {
        let what = format!(
            "{} runs/{} of {}",
            access.verb(),
            access.subresource(),
            match run {
                Some(run) => format!("Run {}/{run}", self.namespace),
                None => format!("the Runs of namespace {}", self.namespace),
            }
        );
        let (code, body) = match caller {
            None => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "runtimed needs the caller's bearer token to {what} (header Authorization, or {TOKEN_HEADER} through the API server's Pod proxy; kubectl kruntimes sends the kubeconfig's token, or --token)\n"
                ),
            ),
            Some(Verdict::Unauthenticated(why)) => (
                StatusCode::UNAUTHORIZED,
                format!("the API server does not accept the caller's token: {why}\n"),
            ),
            Some(Verdict::Denied(why)) => (
                StatusCode::FORBIDDEN,
                format!(
                    "the caller may not {what}{}: grant verb {} on resource runs/{} (API group kruntimes.io) with a Role\n",
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!(" ({why})")
                    },
                    access.verb(),
                    access.subresource()
                ),
            ),
            Some(Verdict::Allowed) => unreachable!("an allowed call is not refused"),
        };
        (code, body).into_response()
    }
}

/// The middleware over runtimed's API routes: the call goes on only when the API server says
/// its caller may.
pub async fn guard(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let Some((access, run)) = Access::of_path(request.uri().path()) else {
        return next.run(request).await;
    };
    let run = match run.transpose() {
        Ok(run) => run,
        Err(segment) => {
            return (
                StatusCode::NOT_FOUND,
                format!(
                    "{segment:?} is not a Run name (a lowercase DNS-1123 subdomain); runtimed serves no such path\n"
                ),
            )
                .into_response();
        }
    };
    let Some(caller) = Caller::of(request.headers()) else {
        return gate.refusal(None, access, run.as_deref());
    };
    match gate.verdict(&caller, access, run.as_deref()).await {
        Ok(Verdict::Allowed) => next.run(request).await,
        Ok(refused) => gate.refusal(Some(&refused), access, run.as_deref()),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("runtimed cannot ask the API server whether the caller may: {e}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn paths_name_the_access_and_the_run() {
        assert_eq!(
            Access::of_path("/invoke/fn"),
            Some((Access::Invoke, Some(Ok("fn".into()))))
        );
        assert_eq!(
            Access::of_path("/logs/train"),
            Some((Access::Log, Some(Ok("train".into()))))
        );
        // Authorized as the name the handler serves, decoded.
        assert_eq!(
            Access::of_path("/invoke/%65cho"),
            Some((Access::Invoke, Some(Ok("echo".into()))))
        );
        for bad in ["%2e%2e", "..", "A", "a%2Fb", "-a", "a_b", "%ff"] {
            assert_eq!(
                Access::of_path(&format!("/logs/{bad}")),
                Some((Access::Log, Some(Err(bad.to_string())))),
                "{bad}"
            );
        }
        assert_eq!(
            Access::of_path("/artifacts/uid-1/out.txt"),
            Some((Access::Artifacts, None))
        );
        assert_eq!(Access::of_path("/readyz"), None);
        assert_eq!(Access::of_path("/healthz"), None);
        assert_eq!(
            (Access::Invoke.verb(), Access::Invoke.subresource()),
            ("create", "invoke")
        );
        assert_eq!(
            (Access::Log.verb(), Access::Log.subresource()),
            ("get", "log")
        );
    }

    #[test]
    fn the_caller_comes_from_either_header_with_its_impersonation() {
        let mut h = HeaderMap::new();
        assert_eq!(Caller::of(&h), None);
        h.insert("authorization", HeaderValue::from_static("Basic abc"));
        assert_eq!(Caller::of(&h), None, "only a bearer token");
        h.insert("authorization", HeaderValue::from_static("Bearer direct"));
        assert_eq!(Caller::of(&h).unwrap().token, "direct");
        h.insert(TOKEN_HEADER, HeaderValue::from_static("Bearer proxied"));
        h.insert(IMPERSONATE_USER_HEADER, HeaderValue::from_static("alice"));
        h.append(IMPERSONATE_GROUP_HEADER, HeaderValue::from_static("a"));
        h.append(IMPERSONATE_GROUP_HEADER, HeaderValue::from_static("b"));
        let caller = Caller::of(&h).unwrap();
        assert_eq!(caller.token, "proxied");
        assert_eq!(caller.impersonate_user.as_deref(), Some("alice"));
        assert_eq!(caller.impersonate_groups, ["a", "b"]);
        let mut other = caller.clone();
        other.impersonate_groups.pop();
        assert_ne!(caller.digest(), other.digest());
    }
}
