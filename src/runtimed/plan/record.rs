//! The agent's one record of each Run it holds or acts on ([`LocalRun`]: name, UID, attempt,
//! reservation and one [`State`]), kept with the [`AdmissionCache`] its reservations live in
//! ([`Records`]).
//!
//! Pure: no client, no I/O, and no clock of its own (the instants it compares come in). The
//! agent moves a record as its parts report (a claim written, a child started or ended, a
//! write landed); [`super::plan`] reads the records and moves them as it decides. Every
//! reservation belongs to exactly one record, and only [`Records`] changes the cache, so the
//! two never disagree. This module must not perform anything, and must not decide: it says
//! where each Run stands, not what to do about it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::ResourceExt as _;
use tokio::time::Instant;

use super::super::admission::{self, AdmissionCache};
use crate::api::status;
use crate::api::{Resources, Run};

/// Where a Run stands on this agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Scheduled here and told it does not fit now, for `why` (told once per reason).
    Waiting { why: String },
    /// Its claim write is out, or its outcome is being read back. Holds its reservation.
    Claiming,
    /// Its claim did not land at resourceVersion `version`: that version is tried again from
    /// `retry_at`, a newer one at once. A first claim's reservation was released; the retry
    /// of a Run between attempts still holds its room.
    ClaimFailed { version: String, retry_at: Instant },
    /// Its execution was found on the runtime server when this agent started (an earlier
    /// runtimed's): the plan attaches it, or the record goes.
    Found,
    /// Its task runs here (a process, or an execution or function on the runtime server).
    Running,
    /// Its task succeeded; its artifacts are being stored before its terminal write.
    Collecting,
    /// A write that ends its attempt here is out, or has landed and the watch does not show it
    /// yet: a last write (terminal, or the requeue after a preemption) when `next_attempt` is
    /// `None`, else a failed attempt followed by `next_attempt` here.
    Writing { next_attempt: Option<i32> },
    /// Between two attempts on this Pod (a failed attempt's backoff): it holds its room.
    BetweenAttempts,
}

/// One Run this agent holds or acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRun {
    pub name: String,
    pub uid: String,
    /// The attempt this agent last acted on.
    pub attempt: i32,
    pub state: State,
    /// It was told `Waiting`: its admission gets an `Admitted` Event of its own.
    pub waited: bool,
}

impl LocalRun {
    /// A part of this agent acts on it: a claim, a task or a collection. The plan kills,
    /// stops and cancels these, and never claims them.
    pub fn is_owned(&self) -> bool {
        matches!(
            self.state,
            State::Claiming | State::Running | State::Collecting
        )
    }
}

/// Every [`LocalRun`] by UID, and the admission cache of their reservations.
#[derive(Debug, Default)]
pub struct Records {
    runs: HashMap<String, LocalRun>,
    cache: AdmissionCache,
}

impl Records {
    pub fn new() -> Self {
        Self::default()
    }

    /// The capacity and reservations (read-only: every change goes through a record).
    pub fn cache(&self) -> &AdmissionCache {
        &self.cache
    }

    /// Replaces the Pod's capacity; returns whether it changed.
    pub fn set_capacity(&mut self, capacity: Option<Resources>) -> bool {
        self.cache.set_capacity(capacity)
    }

    pub fn get(&self, uid: &str) -> Option<&LocalRun> {
        self.runs.get(uid)
    }

    pub fn state(&self, uid: &str) -> Option<&State> {
        self.runs.get(uid).map(|r| &r.state)
    }

    /// What `uid` holds, if anything.
    pub fn reservation(&self, uid: &str) -> Option<&Resources> {
        self.cache.held(uid)
    }

    pub fn iter(&self) -> impl Iterator<Item = &LocalRun> {
        self.runs.values()
    }

    /// Whether any claim is out or uncertain.
    pub fn claiming(&self) -> bool {
        self.runs.values().any(|r| r.state == State::Claiming)
    }

    /// Whether any success's artifacts are being stored.
    pub fn collecting(&self) -> bool {
        self.runs.values().any(|r| r.state == State::Collecting)
    }

    /// Moves `run`'s record to `state`, creating it when there is none.
    pub fn set(&mut self, run: &Run, state: State) {
        let uid = run.uid().unwrap_or_default();
        let record = self.runs.entry(uid.clone()).or_insert_with(|| LocalRun {
            name: run.name_any(),
            uid,
            attempt: run.attempt(),
            state: state.clone(),
            waited: false,
        });
        record.attempt = run.attempt();
        record.state = state;
    }

    /// Moves the record of `uid`, if there is one, to `state`.
    pub fn set_state(&mut self, uid: &str, state: State) {
        if let Some(record) = self.runs.get_mut(uid) {
            record.state = state;
        }
    }

    /// Marks the Runs of `state` whose UID is `attachable` (their execution found on the
    /// runtime server when this agent started) and of which there is no record yet as
    /// [`State::Found`]: the plan attaches them.
    pub fn found(&mut self, state: &[Arc<Run>], attachable: &HashSet<String>) {
        for run in state {
            let Some(uid) = run.uid() else { continue };
            if attachable.contains(&uid) && !self.runs.contains_key(&uid) {
                self.set(run, State::Found);
            }
        }
    }

    /// Checks `run`'s complete `request` against the capacity and reserves all of it for a
    /// claim (state [`State::Claiming`]), or nothing and says why.
    pub fn reserve(&mut self, run: &Run, request: &Resources) -> admission::Result<()> {
        let uid = run.uid().unwrap_or_default();
        self.cache.try_reserve(&uid, request)?;
        self.set(run, State::Claiming);
        Ok(())
    }

    /// Holds `request` for `run` whatever the capacity says now (a Run that already runs, or
    /// one between two attempts: its room was never given up), in `state`.
    pub fn hold(&mut self, run: &Run, request: &Resources, state: State) {
        self.cache.hold(&run.uid().unwrap_or_default(), request);
        self.set(run, state);
    }

    /// Frees what `uid` holds; its record stays (a write may still be out).
    pub fn release(&mut self, uid: &str) {
        self.cache.release(uid);
    }

    /// Forgets `uid`: its reservation is freed and its record goes.
    pub fn remove(&mut self, uid: &str) {
        self.cache.release(uid);
        self.runs.remove(uid);
    }

    /// Notes that `run` waits for `why`; returns whether that is news to tell (it did not
    /// wait before, or waited for another reason).
    pub fn wait(&mut self, run: &Run, why: &str) -> bool {
        let news = !matches!(self.state(&run.uid().unwrap_or_default()),
            Some(State::Waiting { why: was }) if was == why);
        self.set(
            run,
            State::Waiting {
                why: why.to_string(),
            },
        );
        if news && let Some(record) = self.runs.get_mut(&run.uid().unwrap_or_default()) {
            record.waited = true;
        }
        news
    }

    /// A claim of `uid` did not land at `version`: it is tried again at `retry_at` (a newer
    /// version at once). A first claim frees its reservation; a retry keeps its room.
    pub fn claim_failed(&mut self, uid: &str, version: String, retry_at: Instant, retry: bool) {
        if !retry {
            self.cache.release(uid);
        }
        self.set_state(uid, State::ClaimFailed { version, retry_at });
    }

    /// When a failed claim may be tried again at the same version, if any.
    pub fn next_claim_retry(&self) -> Option<Instant> {
        self.runs
            .values()
            .filter_map(|r| match r.state {
                State::ClaimFailed { retry_at, .. } => Some(retry_at),
                _ => None,
            })
            .min()
    }

    /// The observed Runs minus those whose claim failed at this very resourceVersion and whose
    /// retry time has not come. A failed claim the watch has moved past (a newer version, the
    /// Run gone, the time come) is over: a retry's record is between attempts again, a first
    /// claim's goes.
    pub fn claimable(&mut self, state: Vec<Arc<Run>>, now: Instant) -> Vec<Arc<Run>> {
        let current: HashMap<String, String> = state
            .iter()
            .filter_map(|r| Some((r.uid()?, r.resource_version()?)))
            .collect();
        let mut hidden = HashSet::new();
        let mut over = Vec::new();
        for record in self.runs.values() {
            if let State::ClaimFailed { version, retry_at } = &record.state {
                if *retry_at > now && current.get(&record.uid) == Some(version) {
                    hidden.insert(record.uid.clone());
                } else {
                    over.push(record.uid.clone());
                }
            }
        }
        for uid in over {
            if self.cache.held(&uid).is_some() {
                self.set_state(&uid, State::BetweenAttempts);
            } else {
                self.runs.remove(&uid);
            }
        }
        state
            .into_iter()
            .filter(|r| r.uid().is_none_or(|uid| !hidden.contains(&uid)))
            .collect()
    }

    /// Brings the records up to what the watch shows (`state`: every Run this agent sees),
    /// before a plan:
    /// - a last write's record goes once its reservation is freed (the write landed) and the
    ///   watch shows the Run ended, back in Pending, or gone;
    /// - a failed attempt's write is over once the watch shows the Run between attempts at
    ///   the next one (the plan holds it from then on), or ended or gone (nothing to hold);
    /// - a Run that nothing of this agent acts on any more (waiting, found, between attempts,
    ///   or written) and that the watch no longer shows is forgotten, its room freed: it was
    ///   deleted.
    pub fn observe(&mut self, state: &[Arc<Run>]) {
        if self.runs.is_empty() {
            return;
        }
        let seen: HashMap<String, &Arc<Run>> =
            state.iter().filter_map(|r| Some((r.uid()?, r))).collect();
        let mut gone = Vec::new();
        for record in self.runs.values_mut() {
            let run = seen.get(&record.uid);
            match &record.state {
                State::Writing {
                    next_attempt: Some(next),
                } => {
                    let between = run.is_some_and(|r| {
                        r.attempt() == *next
                            && r.status.as_ref().and_then(status::in_backoff).is_some()
                    });
                    if between {
                        record.state = State::BetweenAttempts;
                    } else if run.is_none_or(|r| !r.phase().is_active()) {
                        // Ended by someone else, or gone: there is no next attempt to hold
                        // room for.
                        gone.push(record.uid.clone());
                    }
                }
                State::Writing { next_attempt: None }
                    if self.cache.held(&record.uid).is_none()
                        && run.is_none_or(|r| !r.phase().is_active()) =>
                {
                    gone.push(record.uid.clone());
                }
                State::Waiting { .. } | State::Found | State::BetweenAttempts if run.is_none() => {
                    gone.push(record.uid.clone());
                }
                _ => {}
            }
        }
        for uid in gone {
            self.remove(&uid);
        }
    }

    /// A failed attempt's write returned without landing (the Run changed under it, or left
    /// this Pod): planned again from the watch, its room held until the plan lets it go.
    pub fn attempt_given_up(&mut self, uid: &str) {
        if matches!(
            self.state(uid),
            Some(State::Writing {
                next_attempt: Some(_)
            })
        ) {
            self.set_state(uid, State::BetweenAttempts);
        }
    }

    /// Every reservation belongs to a record (checked in tests and debug builds).
    pub fn check(&self) -> Result<(), String> {
        let orphans = self.cache.unaccounted(|uid| self.runs.contains_key(uid));
        if orphans.is_empty() {
            Ok(())
        } else {
            Err(format!("reservations without a record: {orphans:?}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::resources::RUNS;
    use crate::testing::run;

    fn records(capacity: u64) -> Records {
        let mut r = Records::new();
        r.set_capacity(Some(Resources::from_iter([(RUNS, capacity)])));
        r
    }

    fn one() -> Resources {
        Resources::from_iter([(RUNS, 1)])
    }

    fn arc(run: Run) -> Arc<Run> {
        Arc::new(run)
    }

    #[test]
    fn a_reservation_is_a_records_and_goes_with_it() {
        let mut r = records(1);
        let a = run("a").build();
        r.reserve(&a, &one()).unwrap();
        assert_eq!(r.state("uid-a"), Some(&State::Claiming));
        assert!(r.reserve(&run("b").build(), &one()).is_err(), "full");
        assert!(r.state("uid-b").is_none(), "a refused Run gets no record");
        r.remove("uid-a");
        assert!(r.cache().is_empty() && r.get("uid-a").is_none());
        r.check().unwrap();
    }

    #[test]
    fn a_failed_first_claim_frees_its_room_and_is_hidden_until_its_version_changes_or_time_comes() {
        let now = Instant::now();
        let mut r = records(1);
        let a = run("a").resource_version("1").build();
        r.reserve(&a, &one()).unwrap();
        r.claim_failed("uid-a", "1".into(), now + Duration::from_secs(5), false);
        assert!(r.cache().is_empty(), "a first claim gives its room back");
        let names = |v: Vec<Arc<Run>>| v.iter().map(|r| r.name_any()).collect::<Vec<_>>();
        let b = arc(run("b").build());
        assert_eq!(
            names(r.claimable(vec![arc(a.clone()), b.clone()], now)),
            ["b"]
        );
        assert_eq!(r.next_claim_retry(), Some(now + Duration::from_secs(5)));
        // A newer version: claimable at once, the failure is over.
        let a2 = arc(run("a").resource_version("2").build());
        assert_eq!(names(r.claimable(vec![a2], now)), ["a"]);
        assert!(r.get("uid-a").is_none());
        r.check().unwrap();
    }

    #[test]
    fn a_failed_retry_claim_keeps_its_room_and_is_between_attempts_again_once_over() {
        let now = Instant::now();
        let mut r = records(1);
        let a = run("a").resource_version("1").build();
        r.hold(&a, &one(), State::Claiming);
        r.claim_failed("uid-a", "1".into(), now + Duration::from_secs(1), true);
        assert_eq!(r.cache().len(), 1);
        let later = now + Duration::from_secs(2);
        assert_eq!(r.claimable(vec![arc(a)], later).len(), 1);
        assert_eq!(r.state("uid-a"), Some(&State::BetweenAttempts));
        assert_eq!(r.cache().len(), 1, "still held");
    }

    #[test]
    fn a_last_write_is_forgotten_once_it_landed_and_the_watch_shows_the_run_ended() {
        let mut r = records(1);
        let running = run("a").running().build();
        r.hold(&running, &one(), State::Writing { next_attempt: None });
        let ended = arc(run("a").succeeded().build());
        r.observe(std::slice::from_ref(&ended));
        assert!(
            r.get("uid-a").is_some(),
            "its write has not returned: the room stays held"
        );
        r.release("uid-a");
        r.observe(std::slice::from_ref(&arc(running)));
        assert!(r.get("uid-a").is_some(), "the watch still shows it running");
        r.observe(&[ended]);
        assert!(r.get("uid-a").is_none());
    }

    #[test]
    fn a_run_nothing_acts_on_is_forgotten_with_its_room_once_the_watch_no_longer_shows_it() {
        let mut r = records(2);
        let between = run("between").build();
        let running = run("running").build();
        r.hold(&between, &one(), State::BetweenAttempts);
        r.hold(&running, &one(), State::Running);
        r.observe(&[]);
        assert!(r.get("uid-between").is_none());
        assert_eq!(
            r.state("uid-running"),
            Some(&State::Running),
            "a task that runs is its child's to end"
        );
        assert_eq!(r.cache().len(), 1);
        r.check().unwrap();
    }

    #[test]
    fn waiting_is_news_once_per_reason() {
        let mut r = records(1);
        let a = run("a").build();
        assert!(r.wait(&a, "full"));
        assert!(!r.wait(&a, "full"));
        assert!(r.wait(&a, "fuller"));
        assert!(r.get("uid-a").unwrap().waited);
    }
}
