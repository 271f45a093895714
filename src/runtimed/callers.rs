//! Who may call runtimed's API (`POST /invoke/<run>`, `GET /logs/<run>`,
//! `GET /artifacts/<run>/<uid>/<name>`), served over TLS on its API port: the gateway
//! (`crate::manager::gateway`), and nobody else. As the kubelet never sees a user's credential, runtimed
//! never does: the API server authenticates the user, the gateway authorises them on the Run's
//! subresource, then calls runtimed with **its own** token, one it asked the API server for
//! with the audience of this Pod alone (`kruntimes-runtimed:<pod uid>`,
//! [`crate::api::runtimed_audience`]).
//!
//! runtimed checks a call's bearer token with a `TokenReview` of that audience (its role
//! grants `create tokenreviews`): the API server must vouch for it, for this audience, and
//! name one of the gateway's accounts (`--gateway-user`). A token of another audience (the
//! API server's own, a user's, one for another Pod), a stranger's account or no token: 401
//! or 403, and nothing is served. The verdicts are kept for [`TTL`] per token digest, the
//! tokens the API server does not accept apart (up to [`MAX_UNAUTHENTICATED`]), so a flood of
//! made-up tokens never pushes out the gateway's verdict; at most [`REVIEWS_AT_ONCE`] reviews
//! are in flight. [`decide`] is the one place a decision is made; [`guard`] the axum
//! middleware.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};

use crate::telemetry::http::secure::bearer;

/// How long a verdict is reused.
pub const TTL: Duration = Duration::from_secs(10);
/// The most verdicts on tokens the API server accepted kept.
pub const MAX_CACHED: usize = 1024;
/// The most tokens the API server did not accept kept (the negative cache).
pub const MAX_UNAUTHENTICATED: usize = 256;
/// Reviews in flight at once; more callers wait for one to end.
pub const REVIEWS_AT_ONCE: usize = 16;

/// What a call asks of a Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// `POST /invoke/<run>`.
    Invoke,
    /// `GET /logs/<run>`.
    Log,
    /// `GET /artifacts/<run>/<uid>/<name>` (whose UID the handler checks).
    Artifacts,
}

impl Access {
    /// The access a request path asks for, and the Run it names (`None` for paths that are
    /// not runtimed's API: 404 once the caller is authenticated). The Run's name is the
    /// segment as the handler sees it, percent-decoded; a segment that is no Kubernetes object
    /// name once decoded names no Run (`Some(Err(..))`): it is refused before anything is
    /// served.
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
    match crate::api::is_object_name(&decoded) {
        true => Ok(decoded.into_owned()),
        false => Err(segment.to_string()),
    }
}

/// The API server's answer on one token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// 401: the API server does not accept the token for this Pod's audience.
    Unauthenticated,
    /// 403: a valid token of an account that is not the gateway's.
    Denied {
        user: String,
    },
}

/// The verdict on a TokenReview's answer: authenticated, for `audience`, as one of `gateways`.
/// Pure.
pub fn decide(reviewed: &TokenReviewStatus, audience: &str, gateways: &[String]) -> Verdict {
    let user = reviewed
        .user
        .as_ref()
        .and_then(|u| u.username.clone())
        .unwrap_or_default();
    // The API server answers with the audiences the token is valid for among those asked; an
    // answer without ours (an API server that ignores audiences) is not a yes.
    let for_us = reviewed.audiences.iter().flatten().any(|a| a == audience);
    if reviewed.authenticated != Some(true) || user.is_empty() || !for_us {
        return Verdict::Unauthenticated;
    }
    match gateways.contains(&user) {
        true => Verdict::Allowed,
        false => Verdict::Denied { user },
    }
}

type Key = [u8; 32];

/// The verdicts kept, in two bounded maps: on tokens the API server accepted, and on those it
/// did not (which anyone can make up by the thousand). A full map drops what is stale, else
/// all of itself, never the other map. Pure: the time comes in.
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
            Verdict::Unauthenticated => (&mut self.unauthenticated, MAX_UNAUTHENTICATED),
            Verdict::Allowed | Verdict::Denied { .. } => (&mut self.answered, MAX_CACHED),
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

/// The checks of one runtimed: the audience of its Pod, the gateway's accounts, the verdicts.
#[derive(Clone)]
pub struct Gate {
    /// runtimed's own client: the TokenReview is asked with its credentials.
    client: kube::Client,
    audience: String,
    gateways: Arc<Vec<String>>,
    cache: Arc<Mutex<Verdicts>>,
    reviews: Arc<tokio::sync::Semaphore>,
}

impl Gate {
    /// Checks for the runtimed of the Pod whose UID is `pod_uid`, letting `gateways` in.
    pub fn new(client: kube::Client, pod_uid: &str, gateways: Vec<String>) -> Self {
        Gate {
            client,
            audience: crate::api::runtimed_audience(pod_uid),
            gateways: Arc::new(gateways),
            cache: Default::default(),
            reviews: Arc::new(tokio::sync::Semaphore::new(REVIEWS_AT_ONCE)),
        }
    }

    /// The verdict on `token` (a cached one while it is fresh). `Err`: the review could not be
    /// asked.
    pub async fn verdict(&self, token: &str) -> Result<Verdict, kube::Error> {
        let key: Key = Sha256::digest(token.as_bytes()).into();
        let cached = self
            .cache
            .lock()
            .expect("verdicts")
            .get(&key, Instant::now());
        if let Some(verdict) = cached {
            return Ok(verdict);
        }
        let reviewed = {
            let _slot = self.reviews.acquire().await.expect("never closed");
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_string(),
                    audiences: Some(vec![self.audience.clone()]),
                },
                ..Default::default()
            };
            Api::<TokenReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await?
                .status
                .unwrap_or_default()
        };
        let verdict = decide(&reviewed, &self.audience, &self.gateways);
        self.cache
            .lock()
            .expect("verdicts")
            .put(key, verdict.clone(), Instant::now());
        Ok(verdict)
    }
}

/// The middleware over runtimed's API: the call goes on only when the API server says its
/// token is the gateway's, for this Pod.
pub async fn guard(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let refused = |code, body: String| (code, body).into_response();
    let Some(token) = bearer(request.headers()).map(str::to_string) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "runtimed answers only the kruntimes gateway: use kubectl kruntimes logs, invoke or artifacts (or the API group subresources.kruntimes.io)\n".into(),
        );
    };
    match gate.verdict(&token).await {
        Ok(Verdict::Allowed) => {}
        Ok(Verdict::Unauthenticated) => {
            return refused(
                StatusCode::UNAUTHORIZED,
                format!(
                    "the API server does not vouch for this token with audience {}: runtimed answers only the kruntimes gateway\n",
                    gate.audience
                ),
            );
        }
        Ok(Verdict::Denied { user }) => {
            return refused(
                StatusCode::FORBIDDEN,
                format!(
                    "{user} is not the kruntimes gateway (--gateway-user): runtimed answers only it\n"
                ),
            );
        }
        Err(e) => {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("runtimed cannot ask the API server who the caller is: {e}\n"),
            );
        }
    }
    if let Some((_, Some(Err(segment)))) = Access::of_path(request.uri().path()) {
        return refused(
            StatusCode::NOT_FOUND,
            format!(
                "{segment:?} is not a Run name (a lowercase DNS-1123 subdomain); runtimed serves no such path\n"
            ),
        );
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;

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
        // Served as the name the handler sees, decoded.
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
    }

    fn reviewed(user: Option<&str>, audiences: &[&str]) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(user.is_some()),
            user: user.map(|u| UserInfo {
                username: Some(u.into()),
                ..Default::default()
            }),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_gateways_token_for_this_pods_audience_is_let_in() {
        let gateway = crate::api::DEFAULT_GATEWAY_USER;
        let gateways = vec![gateway.to_string()];
        let ours = crate::api::runtimed_audience("uid-1");
        assert_eq!(
            decide(&reviewed(Some(gateway), &[&ours]), &ours, &gateways),
            Verdict::Allowed
        );
        // Another account with a token for this Pod (a user who asked TokenRequest for their
        // own account): valid, and refused.
        assert_eq!(
            decide(&reviewed(Some("alice"), &[&ours]), &ours, &gateways),
            Verdict::Denied {
                user: "alice".into()
            }
        );
        // The gateway's token for another Pod, or for the API server: not ours.
        let other = crate::api::runtimed_audience("uid-2");
        assert_eq!(
            decide(&reviewed(Some(gateway), &[&other]), &ours, &gateways),
            Verdict::Unauthenticated
        );
        assert_eq!(
            decide(&reviewed(Some(gateway), &[]), &ours, &gateways),
            Verdict::Unauthenticated
        );
        assert_eq!(
            decide(&reviewed(None, &[&ours]), &ours, &gateways),
            Verdict::Unauthenticated
        );
    }

    #[test]
    fn made_up_tokens_never_push_out_the_gateways_verdict_and_both_maps_are_bounded() {
        let now = Instant::now();
        let key = |n: usize| -> Key {
            let mut k = [0u8; 32];
            k[..8].copy_from_slice(&(n as u64).to_le_bytes());
            k
        };
        let mut verdicts = Verdicts::default();
        verdicts.put(key(0), Verdict::Allowed, now);
        for n in 1..=10 * MAX_UNAUTHENTICATED {
            verdicts.put(key(n), Verdict::Unauthenticated, now);
        }
        assert_eq!(verdicts.get(&key(0), now), Some(Verdict::Allowed));
        assert!(verdicts.unauthenticated.len() <= MAX_UNAUTHENTICATED);
        assert_eq!(verdicts.get(&key(0), now + TTL), None);
        for n in 20_000..20_000 + 2 * MAX_CACHED {
            verdicts.put(key(n), Verdict::Allowed, now);
        }
        assert!(verdicts.answered.len() <= MAX_CACHED);
    }
}
