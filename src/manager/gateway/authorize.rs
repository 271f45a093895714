//! The gateway's own authorisation: a SubjectAccessReview of the user the API server named, on
//! the Run's subresource, and the decisions it keeps for a short while, as every aggregated
//! API server built on k8s.io/apiserver keeps its delegated ones (`--authorization-webhook-
//! cache-authorized-ttl` and `-unauthorized-ttl`, both 10 s by default).
//!
//! [`Decisions`] is pure (what is kept, for how long, and how many); [`authorize`] asks the
//! API server. It must not decide who the user is: that is [`super::frontproxy`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::frontproxy::User;
use super::route::Call;
use super::upstream::{self, Refusal};
use crate::api::SUBRESOURCES_GROUP;

/// How long a decision is kept, allowed or not (k8s.io/apiserver's defaults).
pub const TTL: Duration = Duration::from_secs(10);

/// At most this many decisions are kept; past it, the expired go, and then all of them.
pub const MAX_KEPT: usize = 4096;

/// Decisions by the review's spec, each with when it lapses. Pure.
#[derive(Debug, Default)]
pub struct Decisions {
    kept: HashMap<String, (bool, Instant)>,
}

impl Decisions {
    /// The decision on `key` at `now`, if one is kept.
    pub fn get(&self, key: &str, now: Instant) -> Option<bool> {
        self.kept
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(allowed, _)| *allowed)
    }

    /// Keeps `allowed` for `key` from `now`, within [`MAX_KEPT`].
    pub fn keep(&mut self, key: String, allowed: bool, now: Instant) {
        if self.kept.len() >= MAX_KEPT {
            self.kept.retain(|_, (_, until)| now < *until);
            if self.kept.len() >= MAX_KEPT {
                self.kept.clear();
            }
        }
        self.kept.insert(key, (allowed, now + TTL));
    }
}

/// The review the gateway asks for `user` on `call`.
pub fn review(user: &User, call: &Call) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(call.namespace.clone()),
                verb: Some(call.what.verb().into()),
                group: Some(SUBRESOURCES_GROUP.into()),
                resource: Some("runs".into()),
                subresource: Some(call.what.subresource().into()),
                name: Some(call.run.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Whether `user` may make `call`: a kept decision, else a SubjectAccessReview (then kept).
pub async fn authorize(
    client: &kube::Client,
    decisions: &Arc<Mutex<Decisions>>,
    user: &User,
    call: &Call,
) -> Result<(), Refusal> {
    let review = review(user, call);
    // The whole spec is the key: user, uid, groups, extra and the attributes.
    let key = serde_json::to_string(&review.spec).unwrap_or_default();
    let kept = decisions
        .lock()
        .expect("decisions")
        .get(&key, Instant::now());
    let allowed = match kept {
        Some(allowed) => allowed,
        None => {
            let answer = Api::<SubjectAccessReview>::all(client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(upstream::api_unavailable)?
                .status
                .unwrap_or_default();
            let allowed = answer.allowed && answer.denied != Some(true);
            decisions
                .lock()
                .expect("decisions")
                .keep(key, allowed, Instant::now());
            allowed
        }
    };
    match allowed {
        true => Ok(()),
        false => Err(Refusal::new(
            403,
            "Forbidden",
            format!(
                "the gateway's SubjectAccessReview: User {:?} cannot {} resource \"runs/{}\" of Run {:?} in API group {SUBRESOURCES_GROUP:?} in the namespace {:?}",
                user.name,
                call.what.verb(),
                call.what.subresource(),
                call.run,
                call.namespace
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_kept_for_its_ttl_and_not_after() {
        let now = Instant::now();
        let mut d = Decisions::default();
        assert_eq!(d.get("alice", now), None);
        d.keep("alice".into(), true, now);
        d.keep("bob".into(), false, now);
        assert_eq!(
            d.get("alice", now + TTL - Duration::from_millis(1)),
            Some(true)
        );
        assert_eq!(d.get("bob", now), Some(false), "a denial is kept too");
        assert_eq!(
            d.get("alice", now + TTL),
            None,
            "asked again once it lapses"
        );
    }

    #[test]
    fn the_kept_decisions_stay_bounded() {
        let now = Instant::now();
        let mut d = Decisions::default();
        for i in 0..MAX_KEPT {
            d.keep(format!("old-{i}"), true, now);
        }
        // The old ones lapsed: they make room.
        let later = now + TTL;
        d.keep("new".into(), true, later);
        assert_eq!(d.kept.len(), 1);
        // None lapsed: all go, rather than grow.
        for i in 1..MAX_KEPT {
            d.keep(format!("live-{i}"), true, later);
        }
        d.keep("one more".into(), true, later);
        assert_eq!(d.kept.len(), 1);
        assert_eq!(d.get("one more", later), Some(true));
    }

    #[test]
    fn the_review_names_the_user_and_the_runs_subresource() {
        let user = User {
            name: "alice".into(),
            uid: Some("u1".into()),
            groups: vec!["dev".into()],
            extra: Default::default(),
        };
        let call = match super::super::route::parse(
            &http::Method::POST,
            "/apis/subresources.kruntimes.io/v1alpha1/namespaces/ns/runs/fn/invoke",
        ) {
            super::super::route::Route::Call(call) => call,
            other => panic!("{other:?}"),
        };
        let spec = review(&user, &call).spec;
        assert_eq!(spec.user.as_deref(), Some("alice"));
        let attrs = spec.resource_attributes.unwrap();
        assert_eq!(attrs.verb.as_deref(), Some("create"));
        assert_eq!(attrs.subresource.as_deref(), Some("invoke"));
        assert_eq!(attrs.name.as_deref(), Some("fn"));
        assert_eq!(attrs.group.as_deref(), Some(SUBRESOURCES_GROUP));
    }
}
