//! Who may call runtimed's API on its probe port: `POST /invoke/<run>`, `GET /logs/<run>` and
//! `GET /artifacts/<run>/<uid>/<name>`. The Pod's address is reachable from other Pods, not only
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
//! - verdicts are kept for [`TTL`] per token, impersonation, access and Run, so a burst of
//!   invocations costs one review: the API server's answers (allowed or refused) up to
//!   [`MAX_CACHED`], the tokens it does not accept apart, up to [`MAX_UNAUTHENTICATED`], so a
//!   flood of made-up tokens never pushes out a real caller's verdict. Tokens are kept only as
//!   a digest. Every review goes through one client (one connection pool to the API server)
//!   with the caller's token set on that request alone, at most [`REVIEWS_AT_ONCE`] at once.
//!
//! No token: 401. Refused: 403, with what to grant. The review cannot be asked: 503. A path
//! that is not runtimed's API nor a probe is 404, once the caller is authenticated (401
//! before: an unknown path tells a stranger nothing). [`guard`] is the axum middleware;
//! [`Gate::verdict`] the one place a decision is made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use sha2::{Digest as _, Sha256};

use crate::api::{
    CALLER_IMPERSONATE_GROUP_HEADER as IMPERSONATE_GROUP_HEADER,
    CALLER_IMPERSONATE_USER_HEADER as IMPERSONATE_USER_HEADER, CALLER_TOKEN_HEADER as TOKEN_HEADER,
};

/// How long a verdict is reused.
pub const TTL: Duration = Duration::from_secs(10);
/// The most verdicts of authenticated callers kept.
pub const MAX_CACHED: usize = 1024;
/// The most tokens the API server did not accept kept (the negative cache).
pub const MAX_UNAUTHENTICATED: usize = 256;
/// Reviews in flight at once; more callers wait for one to end.
pub const REVIEWS_AT_ONCE: usize = 16;

/// What a call asks of a Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// `POST /invoke/<run>`: `create runs/invoke`.
    Invoke,
    /// `GET /logs/<run>`: `get runs/log`.
    Log,
    /// `GET /artifacts/<run>/<uid>/<name>`: `get runs/artifacts` of the Run (whose UID the
    /// handler checks).
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
    /// not runtimed's API: 404 once the caller is authenticated). The Run's name is the segment as the handler sees it, percent-
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
            "artifacts" => Some((Access::Artifacts, name())),
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
    let ok = crate::api::is_object_name(&decoded);
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

/// The verdicts kept, in two bounded maps: the API server's answers on authenticated callers,
/// and the tokens it did not accept (which anyone can make up by the thousand). A full map
/// drops what is stale, else all of itself, never the other map. Pure: the time comes in.
#[derive(Default)]
struct Verdicts {
    answered: HashMap<Key, (Instant, Verdict)>,
    unauthenticated: HashMap<Key, (Instant, Verdict)>,
}

impl Verdicts {
    fn get(&self, key: &Key, now: Instant) -> Option<Verdict> {
        [&self.answered, &self.unauthenticated]
            .into_iter()
            .find_map(|map| map.get(key))
            .filter(|(at, _)| now.duration_since(*at) < TTL)
            .map(|(_, verdict)| verdict.clone())
    }

    fn put(&mut self, key: Key, verdict: Verdict, now: Instant) {
        let (map, bound) = match verdict {
            Verdict::Unauthenticated(_) => (&mut self.unauthenticated, MAX_UNAUTHENTICATED),
            Verdict::Allowed | Verdict::Denied(_) => (&mut self.answered, MAX_CACHED),
        };
        if map.len() >= bound {
            map.retain(|_, (at, _)| now.duration_since(*at) < TTL);
            if map.len() >= bound {
                map.clear();
            }
        }
        map.insert(key, (now, verdict));
    }
}

/// The checks of one runtimed: its API server and namespace, and the verdicts it keeps.
#[derive(Clone)]
pub struct Gate {
    /// A client of runtimed's API server without any credential of its own: each review
    /// carries its caller's.
    client: kube::Client,
    namespace: String,
    cache: Arc<Mutex<Verdicts>>,
    reviews: Arc<tokio::sync::Semaphore>,
}

impl Gate {
    /// Checks against the API server of `config` for the Runs of `namespace`.
    pub fn new(mut config: kube::Config, namespace: &str) -> Result<Self, String> {
        config.auth_info = Default::default();
        let client = kube::Client::try_from(config)
            .map_err(|e| format!("cannot build the client of the callers' reviews: {e}"))?;
        Ok(Gate {
            client,
            namespace: namespace.to_string(),
            cache: Default::default(),
            reviews: Arc::new(tokio::sync::Semaphore::new(REVIEWS_AT_ONCE)),
        })
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
        if let Some(verdict) = self
            .cache
            .lock()
            .expect("verdicts")
            .get(&key, Instant::now())
        {
            return Ok(verdict);
        }
        let verdict = {
            let _slot = self.reviews.acquire().await.expect("never closed");
            self.review(caller, access, run).await?
        };
        self.cache
            .lock()
            .expect("verdicts")
            .put(key, verdict.clone(), Instant::now());
        Ok(verdict)
    }

    /// Asks the API server, as `caller`, whether it may do `access` to `run`: a
    /// SelfSubjectAccessReview with the caller's token and impersonation on the request.
    async fn review(
        &self,
        caller: &Caller,
        access: Access,
        run: Option<&str>,
    ) -> Result<Verdict, String> {
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
        let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
        let mut request =
            kube::core::Request::new("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
                .create(&PostParams::default(), body)
                .map_err(|e| e.to_string())?;
        let headers = request.headers_mut();
        let value = |v: &str| HeaderValue::from_str(v).map_err(|_| v.to_string());
        let Ok(bearer) = value(&format!("Bearer {}", caller.token)) else {
            return Ok(Verdict::Unauthenticated(
                "the bearer token is not a header value".into(),
            ));
        };
        headers.insert(AUTHORIZATION, bearer);
        let impersonation = || -> Result<Vec<(&str, HeaderValue)>, String> {
            let user = caller
                .impersonate_user
                .iter()
                .map(|u| ("impersonate-user", u));
            let groups = caller
                .impersonate_groups
                .iter()
                .map(|g| ("impersonate-group", g));
            user.chain(groups)
                .map(|(h, v)| Ok((h, value(v)?)))
                .collect()
        };
        match impersonation() {
            Ok(pairs) => pairs.into_iter().for_each(|(name, v)| {
                headers.append(name, v);
            }),
            Err(bad) => return Ok(Verdict::Denied(format!("{bad:?} cannot be impersonated"))),
        }
        let answer = self
            .client
            .request::<SelfSubjectAccessReview>(request)
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
        // Not runtimed's API (the probes are served beside this guard, not behind it): a
        // 404, for an authenticated caller only.
        let Some(caller) = Caller::of(request.headers()) else {
            return (
                StatusCode::UNAUTHORIZED,
                "runtimed needs the caller's bearer token\n",
            )
                .into_response();
        };
        return match gate.verdict(&caller, Access::Log, None).await {
            Ok(Verdict::Unauthenticated(why)) => (
                StatusCode::UNAUTHORIZED,
                format!("the API server does not accept the caller's token: {why}\n"),
            )
                .into_response(),
            Ok(_) => next.run(request).await,
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("runtimed cannot ask the API server who the caller is: {e}\n"),
            )
                .into_response(),
        };
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
            Access::of_path("/artifacts/train/uid-1/out.txt"),
            Some((Access::Artifacts, Some(Ok("train".into()))))
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
    fn made_up_tokens_never_push_out_a_real_callers_verdict_and_both_maps_are_bounded() {
        let now = Instant::now();
        let key = |n: usize| -> Key { ([n as u8; 32], Access::Log, Some(format!("run-{n}"))) };
        let mut verdicts = Verdicts::default();
        verdicts.put(key(0), Verdict::Allowed, now);
        for n in 1..=10 * MAX_UNAUTHENTICATED {
            let bogus = ([0xff; 32], Access::Invoke, Some(format!("r{n}")));
            verdicts.put(bogus, Verdict::Unauthenticated("no".into()), now);
        }
        assert_eq!(verdicts.get(&key(0), now), Some(Verdict::Allowed));
        assert!(verdicts.unauthenticated.len() <= MAX_UNAUTHENTICATED);
        // A refusal is kept, and nothing is once it is stale.
        verdicts.put(key(1), Verdict::Denied("rbac".into()), now);
        assert_eq!(
            verdicts.get(&key(1), now),
            Some(Verdict::Denied("rbac".into()))
        );
        assert_eq!(verdicts.get(&key(0), now + TTL), None);
        for n in 2..=2 * MAX_CACHED {
            verdicts.put(key(n), Verdict::Allowed, now);
        }
        assert!(verdicts.answered.len() <= MAX_CACHED);
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
