//! runtimed's claims: the write that takes a planned Run (phase Running, Admitted=True, with
//! the resourceVersion the decision was made on), the read-back of a claim whose outcome is
//! unknown, and the bookkeeping of claims in flight, uncertain, or failed and waiting to be
//! tried again.
//!
//! Each write runs in a task of its own and reports back on the agent's one event channel
//! ([`ClaimEvent::Written`], [`ClaimEvent::Resolved`]). This module must not decide
//! which Run to claim ([`super::plan`] does), never starts a task (the agent does once a claim
//! is known to have landed), and never guesses an outcome it has not read.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use backon::Retryable as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;
use kube::api::Api;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::Identity;
use super::admission::AdmissionCache;
use super::metrics::{self, RuntimedMetrics};
use super::plan::{self, Claim};
use super::report::Report;
use super::status_writer::api_backoff;
use crate::api::status;
use crate::api::{Run, RunPhase, post_params};

/// Claim writes in flight at once.
const CLAIM_CONCURRENCY: usize = 16;
/// After a 409 or 404 on a claim the watch brings the newer version (or the deletion) at once;
/// this is only the fallback before the same observed version is tried again.
const CLAIM_RETRY_STALE: Duration = Duration::from_secs(5);
/// After any other failed claim (API error, transport), the same version is retried after this.
const CLAIM_RETRY_ERROR: Duration = Duration::from_secs(1);

/// A claim write that has returned.
pub(super) struct ClaimWritten {
    claim: Claim,
    result: kube::Result<Run>,
    /// When it returned: the start of the dispatch latency.
    at: Instant,
}

/// A claim that landed: `written` is the Run as claimed, `at` when that was known.
pub(super) struct Landed {
    pub(super) claim: Claim,
    pub(super) written: Run,
    pub(super) at: Instant,
}

/// What a returned claim write means for the agent.
pub(super) enum Claimed {
    /// It landed: start its task.
    Landed(Box<Landed>),
    /// It did not land: its reservation is released, so others may fit now.
    Released,
    /// Its outcome is unknown: the reservation stays held until a read says.
    Uncertain,
}

/// What the claims report back to the agent.
pub(super) enum ClaimEvent {
    /// A claim write returned.
    Written(Box<ClaimWritten>),
    /// A claim of unknown outcome was read back, by UID: the Run as read when it landed.
    Resolved(String, Option<Box<Run>>),
}

pub(super) struct Claims {
    api: Api<Run>,
    me: Identity,
    metrics: RuntimedMetrics,
    /// Where claim writes and read-backs report.
    events: Report<ClaimEvent>,
    /// Bounds the claim writes in flight at once.
    slots: Arc<Semaphore>,
    /// Claims whose write is in flight, by UID: each holds its reservation and counts as this
    /// agent's own (the watch may show it Running before the write returns).
    claiming: HashSet<String>,
    /// Claims whose write outcome is unknown (a transport error or timeout), by UID. The
    /// reservation stays held and the Run counts as this agent's own until a fresh read says
    /// whether the claim landed: never guessed, so a Run this agent did claim is never later
    /// failed as RuntimedRestarted.
    uncertain: HashMap<String, Claim>,
    /// Runs whose claim write failed, by UID: the resourceVersion that failed and when to try
    /// that same version again. A newer version from the watch is tried at once; without this,
    /// a stale store would be claimed again and again in a tight loop.
    failed: HashMap<String, (String, Instant)>,
}

impl Claims {
    pub(super) fn new(
        api: Api<Run>,
        me: Identity,
        metrics: RuntimedMetrics,
        events: Report<ClaimEvent>,
    ) -> Self {
        Claims {
            api,
            me,
            metrics,
            events,
            slots: Arc::new(Semaphore::new(CLAIM_CONCURRENCY)),
            claiming: HashSet::new(),
            uncertain: HashMap::new(),
            failed: HashMap::new(),
        }
    }

    /// When a Run whose claim failed may be tried again, if any.
    pub(super) fn next_retry(&self) -> Option<Instant> {
        self.failed.values().map(|(_, at)| *at).min()
    }

    /// See [`claimable`].
    pub(super) fn claimable(&mut self, state: Vec<Arc<Run>>, now: Instant) -> Vec<Arc<Run>> {
        claimable(&mut self.failed, state, now)
    }

    /// The UIDs whose claim is in flight or uncertain: this agent's own already.
    pub(super) fn owned(&self) -> impl Iterator<Item = &String> {
        self.uncertain.keys().chain(&self.claiming)
    }

    /// Whether a claim of `uid` failed and waits to be tried again (the watch hides the Run
    /// from the plan meanwhile, see [`Self::claimable`]).
    pub(super) fn waits_to_retry(&self, uid: &str) -> bool {
        self.failed.contains_key(uid)
    }

    pub(super) fn is_claiming(&self, uid: &str) -> bool {
        self.claiming.contains(uid)
    }

    /// No claim in flight and none uncertain.
    pub(super) fn settled(&self) -> bool {
        self.uncertain.is_empty() && self.claiming.is_empty()
    }

    /// Sends the claim write of a planned claim (which already holds its reservation): it goes
    /// out as a slot frees up, concurrently with the others and with the agent's loop.
    pub(super) fn send(&mut self, claim: Claim) {
        self.claiming.insert(claim.run.uid().unwrap_or_default());
        let (api, pod, slots, done) = (
            self.api.clone(),
            self.me.pod_name.clone(),
            self.slots.clone(),
            self.events.clone(),
        );
        tokio::spawn(async move {
            // Never closed: the permit always comes.
            let _slot = slots.acquire_owned().await;
            let result = write_claim(&api, &pod, &claim).await;
            let at = Instant::now();
            done.send(ClaimEvent::Written(Box::new(ClaimWritten {
                claim,
                result,
                at,
            })));
        });
    }

    /// A claim write has returned: counts it, and for one that did not land releases its
    /// reservation in `cache` and notes when the same version may be tried again.
    pub(super) fn written(&mut self, written: ClaimWritten, cache: &mut AdmissionCache) -> Claimed {
        let ClaimWritten { claim, result, at } = written;
        let name = claim.run.name_any();
        let uid = claim.run.uid().unwrap_or_default();
        self.claiming.remove(&uid);
        // (admission result, when the same version may be tried again, whether it will be:
        // a deleted Run is not)
        let (admission, retry_in, retried) = match result {
            Ok(written) => return Claimed::Landed(Box::new(Landed { claim, written, at })),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tracing::info!(run = %name, "Run {name} changed since it was observed; releasing and re-reading it from the watch");
                (metrics::CONFLICT, CLAIM_RETRY_STALE, true)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tracing::info!(run = %name, "Run {name} was deleted before it could be claimed");
                (metrics::CONFLICT, CLAIM_RETRY_STALE, false)
            }
            Err(kube::Error::Api(s)) => {
                tracing::warn!(run = %name, "cannot claim Run {name}: {}; releasing it and retrying in {CLAIM_RETRY_ERROR:?}", s.message);
                (metrics::ERROR, CLAIM_RETRY_ERROR, true)
            }
            Err(e) => {
                self.metrics
                    .admissions
                    .with_label_values(&[metrics::ERROR])
                    .inc();
                // The write may have landed: find out by reading, holding the reservation.
                tracing::warn!(run = %name, "the claim of Run {name} has an unknown outcome ({e}); reading it back");
                let (api, me, done) = (self.api.clone(), self.me.clone(), self.events.clone());
                let key = uid.clone();
                let retry = claim.retry;
                tokio::spawn(async move {
                    let landed = read_back_claim(&api, &me, &name, &uid, retry).await;
                    done.send(ClaimEvent::Resolved(uid, landed.map(Box::new)));
                });
                self.uncertain.insert(key, claim);
                return Claimed::Uncertain;
            }
        };
        self.metrics
            .admissions
            .with_label_values(&[admission])
            .inc();
        if retried {
            self.count_retry();
        }
        self.not_landed(&claim, retry_in, cache);
        Claimed::Released
    }

    /// A claim of unknown outcome has been read back: the claim and the Run as read when it
    /// landed; otherwise its reservation is released in `cache` and it is tried again later.
    pub(super) fn resolved(
        &mut self,
        uid: &str,
        landed: Option<Run>,
        cache: &mut AdmissionCache,
    ) -> Option<(Claim, Run)> {
        let claim = self.uncertain.remove(uid)?;
        match landed {
            Some(written) => Some((claim, written)),
            None => {
                tracing::info!(run = %claim.run.name_any(), "the claim of Run {} did not land; retrying it", claim.run.name_any());
                self.count_retry();
                self.not_landed(&claim, CLAIM_RETRY_ERROR, cache);
                None
            }
        }
    }

    fn count_retry(&self) {
        self.metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_CLAIM])
            .inc();
    }

    /// Releases a claim that did not land; the same version is tried again after `retry_in`.
    /// The retry of a Run between two attempts keeps its reservation: its room was never
    /// given up, and the agent releases it once the Run leaves this Pod.
    fn not_landed(&mut self, claim: &Claim, retry_in: Duration, cache: &mut AdmissionCache) {
        let uid = claim.run.uid().unwrap_or_default();
        if claim.retry.is_none() {
            cache.release(&uid);
        }
        let rv = claim.run.resource_version().unwrap_or_default();
        self.failed.insert(uid, (rv, Instant::now() + retry_in));
    }
}

/// The claim: phase Running, `startTime`, Admitted=True, written with the resourceVersion the
/// decision was made on, so any change since then is a 409, never a blind overwrite. Written
/// once: a claim that does not land is planned again from what the watch shows.
///
/// The retry of a Run between two attempts is the same write with [`status::set_retrying`].
async fn write_claim(api: &Api<Run>, pod: &str, claim: &Claim) -> kube::Result<Run> {
    let mut claimed = (*claim.run).clone();
    let status = claimed.status.get_or_insert_with(Default::default);
    let now = Time(jiff::Timestamp::now());
    match claim.retry {
        Some(attempt) => {
            status::set_retrying(status, attempt, pod, &now);
        }
        None => status::set_admitted(status, pod, &claim.request, &now),
    }
    api.replace_status(&claim.run.name_any(), &post_params(), &claimed)
        .await
}

/// Reads back a Run whose claim had an unknown outcome, retrying reads with [`api_backoff`]
/// until the API server answers: the Run as read when it is Running on this Pod (the claim
/// landed), `None` when it is not (still Scheduled, changed by someone else, or gone). The
/// retry of attempt `retry` landed when that attempt runs (no longer between attempts).
async fn read_back_claim(
    api: &Api<Run>,
    me: &Identity,
    name: &str,
    uid: &str,
    retry: Option<i32>,
) -> Option<Run> {
    let read = move || async move { api.get_opt(name).await };
    let run = read
        .retry(api_backoff())
        .notify(|e, delay| {
            tracing::warn!(run = %name, "cannot read Run {name} back: {e}; retrying in {delay:?}");
        })
        .await
        // The attempts never run out: an error never comes back.
        .ok()??;
    let started = match retry {
        None => true,
        Some(attempt) => {
            run.attempt() == attempt && run.status.as_ref().and_then(status::in_backoff).is_none()
        }
    };
    let ours = run.uid().as_deref() == Some(uid)
        && run.phase() == RunPhase::Running
        && started
        && plan::assigned_to(&run, me);
    ours.then_some(run)
}

/// The observed Runs minus those whose claim failed at this very resourceVersion and whose
/// retry time has not come; forgets failures the watch has moved past.
fn claimable(
    failed: &mut HashMap<String, (String, Instant)>,
    state: Vec<Arc<Run>>,
    now: Instant,
) -> Vec<Arc<Run>> {
    let current: HashMap<String, String> = state
        .iter()
        .filter_map(|r| Some((r.uid()?, r.resource_version()?)))
        .collect();
    failed.retain(|uid, (rv, at)| *at > now && current.get(uid) == Some(rv));
    state
        .into_iter()
        .filter(|r| r.uid().is_none_or(|uid| !failed.contains_key(&uid)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;

    /// Run `uid` (named after its UID) at resourceVersion `rv`.
    fn run_at(uid: &str, rv: &str) -> Arc<Run> {
        Arc::new(run(uid).uid(uid).resource_version(rv).build())
    }

    #[test]
    fn a_failed_claim_is_not_retried_at_the_same_version_until_its_retry_time() {
        let now = Instant::now();
        let mut failed = HashMap::from([(
            "a".to_string(),
            ("1".to_string(), now + Duration::from_secs(5)),
        )]);
        let names = |v: Vec<Arc<Run>>| v.iter().map(|r| r.name_any()).collect::<Vec<_>>();
        // Same version, before the retry time: skipped; others are still claimable.
        assert_eq!(
            names(claimable(
                &mut failed,
                vec![run_at("a", "1"), run_at("b", "1")],
                now
            )),
            ["b"]
        );
        // The watch brought a newer version: claimable at once, the failure is forgotten.
        assert_eq!(
            names(claimable(&mut failed, vec![run_at("a", "2")], now)),
            ["a"]
        );
        assert!(failed.is_empty());
        // Same version again, but after the retry time: claimable.
        failed.insert("a".into(), ("1".into(), now + Duration::from_secs(1)));
        assert_eq!(
            names(claimable(
                &mut failed,
                vec![run_at("a", "1")],
                now + Duration::from_secs(2)
            )),
            ["a"]
        );
    }
}
