//! runtimed's claims: the write that takes a planned Run (phase Running, Admitted=True, with
//! the resourceVersion the decision was made on), the read-back of a claim whose outcome is
//! unknown, and when a claim that did not land may be tried again ([`NotLanded`]; the Run's
//! record keeps it, [`plan::State::ClaimFailed`]); and the claims held back ([`Held`]): a
//! task started on its local reservation whose claim waits `--claim-delay`, so that a task
//! that ends within it is written once, claim and end together, as the kubelet's status
//! manager writes a container that starts and ends between two syncs.
//!
//! Each write runs in a task of its own and reports back on the agent's one event channel
//! ([`ClaimEvent::Written`], [`ClaimEvent::Resolved`]). This module must not decide
//! which Run to claim ([`super::plan`] does), never starts a task (the agent does, once a claim
//! is known to have landed or, for a held claim, once its room is reserved), and never
//! guesses an outcome it has not read. A held claim's own write, when its window passes
//! first, is [`super::status_writer`]'s, as every write after a task has started.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use backon::Retryable as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;
use kube::api::Api;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::Identity;
use super::metrics::{self, RuntimedMetrics};
use super::plan::{self, Claim};
use super::report::Report;
use super::status_writer::{Started, api_backoff};
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

/// A claim that did not land: the same resourceVersion is tried again at `retry_at`, a newer
/// one at once. A first claim's reservation is to be released, so others may fit now; a
/// `retry` (the next attempt of a Run between attempts) keeps its room.
pub(super) struct NotLanded {
    pub(super) uid: String,
    pub(super) version: String,
    pub(super) retry_at: Instant,
    pub(super) retry: bool,
}

/// What a returned claim write means for the agent.
pub(super) enum Claimed {
    /// It landed: start its task.
    Landed(Box<Landed>),
    /// It did not land.
    NotLanded(NotLanded),
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
    /// Claims whose write outcome is unknown (a transport error or timeout), by UID. The
    /// reservation stays held and the Run's record stays [`plan::State::Claiming`] until a
    /// fresh read says whether the claim landed: never guessed, so a Run this agent did claim
    /// is never later failed as RuntimedRestarted.
    uncertain: HashMap<String, Claim>,
    /// The claims held back, by UID: their tasks run, their Runs are still Scheduled.
    held: HashMap<String, Held>,
}

/// A claim held back: what it writes (the task's start), and when it goes out alone if the
/// task's end has not taken it in by then.
#[derive(Debug, Clone)]
struct Held {
    started: Started,
    due: Instant,
    /// Its own write is out: it is not sent again.
    writing: bool,
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
            uncertain: HashMap::new(),
            held: HashMap::new(),
        }
    }

    /// Holds back the claim of `uid`, whose task started as `started` says: it is written
    /// alone from `due` on ([`Self::take_due`]), unless the task's end takes it in first
    /// ([`Self::settle`]).
    pub(super) fn hold(&mut self, uid: String, started: Started, due: Instant) {
        let held = Held {
            started,
            due,
            writing: false,
        };
        self.held.insert(uid, held);
    }

    /// When the earliest held claim not yet written is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.held
            .values()
            .filter(|h| !h.writing)
            .map(|h| h.due)
            .min()
    }

    /// The held claims due at `now` and not yet written, by UID, each marked as being written.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<(String, Started)> {
        let mut due: Vec<(String, Started)> = self
            .held
            .iter_mut()
            .filter(|(_, h)| !h.writing && h.due <= now)
            .map(|(uid, h)| {
                h.writing = true;
                (uid.clone(), h.started.clone())
            })
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0));
        due
    }

    /// Every held claim is due now (runtimed drains: a task it leaves on the runtime server
    /// keeps its Run Running for the next runtimed).
    pub(super) fn all_due(&mut self, now: Instant) {
        for held in self.held.values_mut() {
            held.due = held.due.min(now);
        }
    }

    /// Whether `uid`'s held claim is being written on its own: a write that ends its attempt
    /// waits for it, so that it goes over the claimed version instead of meeting a conflict.
    pub(super) fn writing(&self, uid: &str) -> bool {
        self.held.get(uid).is_some_and(|h| h.writing)
    }

    /// Ends the holding of `uid`'s claim (its own write returned, or the attempt's last write
    /// takes it in): what it would have written, when it was held. A write that ends the
    /// attempt of a held claim writes the claim with it ([`crate::api::status::claim_started`]).
    pub(super) fn settle(&mut self, uid: &str) -> Option<Started> {
        self.held.remove(uid).map(|h| h.started)
    }

    /// Sends the claim write of a planned claim (which already holds its reservation): it goes
    /// out as a slot frees up, concurrently with the others and with the agent's loop.
    pub(super) fn send(&mut self, claim: Claim) {
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

    /// A claim write has returned: counts it, and says when one that did not land may be
    /// tried again.
    pub(super) fn written(&mut self, written: ClaimWritten) -> Claimed {
        let ClaimWritten { claim, result, at } = written;
        let name = claim.run.name_any();
        let uid = claim.run.uid().unwrap_or_default();
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
        Claimed::NotLanded(not_landed(&claim, retry_in))
    }

    /// A claim of unknown outcome has been read back: the claim and the Run as read when it
    /// landed, or when it may be tried again; `None` when `uid` was not uncertain.
    pub(super) fn resolved(
        &mut self,
        uid: &str,
        landed: Option<Run>,
    ) -> Option<Result<(Claim, Run), NotLanded>> {
        let claim = self.uncertain.remove(uid)?;
        Some(match landed {
            Some(written) => Ok((claim, written)),
            None => {
                tracing::info!(run = %claim.run.name_any(), "the claim of Run {} did not land; retrying it", claim.run.name_any());
                self.count_retry();
                Err(not_landed(&claim, CLAIM_RETRY_ERROR))
            }
        })
    }

    fn count_retry(&self) {
        self.metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_CLAIM])
            .inc();
    }
}

/// A claim that did not land: the same version is tried again after `retry_in`. The retry of
/// a Run between two attempts keeps its reservation: its room was never given up, and the
/// plan releases it once the Run leaves this Pod.
fn not_landed(claim: &Claim, retry_in: Duration) -> NotLanded {
    NotLanded {
        uid: claim.run.uid().unwrap_or_default(),
        version: claim.run.resource_version().unwrap_or_default(),
        retry_at: Instant::now() + retry_in,
        retry: claim.retry.is_some(),
    }
}

/// The claim: phase Running, `startTime`, Admitted=True, written with the resourceVersion the
/// decision was made on, so any change since then is a 409, never a blind overwrite. Written
/// once: a claim that does not land is planned again from what the watch shows.
///
/// The retry of a Run between two attempts is the same write with [`status::set_retrying`].
async fn write_claim(api: &Api<Run>, pod: &str, claim: &Claim) -> kube::Result<Run> {
    let mut claimed = (*claim.run).clone();
    let generation = claimed.metadata.generation;
    let status = claimed.status.get_or_insert_with(Default::default);
    let before = status.conditions.clone();
    let now = Time(jiff::Timestamp::now());
    match claim.retry {
        Some(attempt) => {
            status::set_retrying(status, attempt, pod, &now);
        }
        None => status::set_admitted(status, pod, &claim.request, &now),
    }
    status::observe_generation(&before, status, generation);
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
