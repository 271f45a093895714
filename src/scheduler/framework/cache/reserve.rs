//! Reserve and release: the scheduler's assumptions, and what a failed Bind or status write
//! does to the Run's place in the queue.
//!
//! Reserve re-verifies the complete request on top of actual usage, every assumption and the
//! room held for an earlier nominated Run, on the Pod as the Run's cycle sees it and with the
//! Filter's own rule ([`crate::scheduler::framework::PodView::shortfalls`]). It must not talk
//! to the API server.

use jiff::{SignedDuration, Timestamp};
use thiserror::Error;

use super::SchedulerCache;
use crate::scheduler::framework::assumed::Assumption;
use crate::scheduler::framework::index::{ScopeRef, WakeSource, Wakeup};
use crate::scheduler::framework::types::{Held, RunKey};

/// Why Reserve refused the chosen Pod. Every variant is a `stage="reserve"` conflict.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReserveError {
    #[error("runtime pod {pod} has no room left for {resource} after existing assumptions")]
    Conflict { pod: String, resource: String },
    #[error("runtime pod {pod} is no longer known or has no readable capacity")]
    PodGone { pod: String },
    #[error("the run already holds an assumption on runtime pod {pod}")]
    AlreadyAssumed { pod: String },
    #[error("persistentworkspace {workspace} is bound to runtime pod {bound}, not {pod}")]
    WorkspaceBound {
        pod: String,
        workspace: String,
        bound: String,
    },
}

impl SchedulerCache {
    /// Reserve: verifies that the Pod still has room for the complete request on top of the
    /// actual usage, every existing assumption and the room held for an earlier nominated Run,
    /// then records the assumption (the Run leaves the queue while its Bind is in flight).
    pub fn reserve(
        &mut self,
        key: &RunKey,
        mut assumption: Assumption,
        now: Timestamp,
    ) -> Result<(), ReserveError> {
        if let Some(a) = self.assumed.get(key) {
            return Err(ReserveError::AlreadyAssumed { pod: a.pod.clone() });
        }
        let pod = assumption.pod.clone();
        let shortfall = {
            let snapshot = self.snapshot(&key.namespace, &assumption.facts.scope.runtime, now);
            let view = snapshot
                .pod_seen_by(&pod, key)
                .filter(|v| v.capacity().is_ok())
                .ok_or_else(|| ReserveError::PodGone { pod: pod.clone() })?;
            // Never against a binding another cycle holds: the workspace is unbound or here.
            if let Some(workspace) = &assumption.facts.workspace
                && let Some(bound) = snapshot.workspace(workspace).bound_pod
                && bound != pod
            {
                return Err(ReserveError::WorkspaceBound {
                    pod,
                    workspace: workspace.clone(),
                    bound: bound.to_string(),
                });
            }
            // The request as the Filter reads it: the same view, the same fit rule; what it
            // holds is that request by id.
            let requested = snapshot.requested(assumption.request());
            assumption.held = Held::of(&requested);
            view.shortfalls(&requested).next()
        };
        if let Some(shortfall) = shortfall {
            return Err(ReserveError::Conflict {
                pod,
                resource: shortfall.resource.to_string(),
            });
        }
        let scope = ScopeRef::new(&key.namespace, &assumption.facts.scope.runtime);
        self.assumed.assume(key, assumption);
        self.file(key, now);
        // Placed: whatever was held for it is its own now (Bind clears the status field).
        // Room held for it on another Pod is free again, and nothing else will say so (the
        // watch finds no nomination left to drop once the Bind lands): the Runs that room
        // kept waiting look again.
        if let Some(held) = self.nominations.drop_run(key)
            && held.pod != pod
        {
            let held_scope = ScopeRef::new(&key.namespace, &held.facts.scope.runtime);
            self.held_room_freed(&held_scope, &held.pod, now);
        }
        // A new assumed target can satisfy required affinity.
        self.retarget(&scope, now);
        Ok(())
    }

    /// Forgets the Run's assumption after a failed Bind: the Run is queued again and the
    /// room freed on the Pod wakes the Runs it can help. Returns whether there was one.
    pub fn release(&mut self, namespace: &str, uid: &str, now: Timestamp) -> bool {
        let key = RunKey::new(namespace, uid);
        let Some(assumption) = self.assumed.forget(&key) else {
            return false;
        };
        self.file(&key, now);
        let pod = self.pod_ref(namespace, &assumption.pod, &assumption.facts.scope.runtime);
        let wakeup = Wakeup {
            namespace: pod.namespace,
            runtime: pod.runtime,
            source: WakeSource::CapacityReleased,
            pod: Some(pod.pod),
        };
        self.advance(&vec![wakeup].into(), now);
        true
    }

    /// Backs the Run off after a failed Bind or status write, when it is queued (it waits for
    /// placement and holds no assumption): with the per-Run capped backoff, or for a write
    /// that met a newer version of the Run (`conflict`), briefly and without counting a
    /// failure. Returns the delay.
    pub fn retry(
        &mut self,
        namespace: &str,
        uid: &str,
        conflict: bool,
        now: Timestamp,
    ) -> Option<SignedDuration> {
        let key = RunKey::new(namespace, uid);
        if !self.queue.contains(&key) {
            return None;
        }
        // Not active any more: a walk's marks stay with active Runs only.
        self.counted.remove(&key);
        if conflict {
            self.queue.conflicted(&key, now);
            return Some(crate::scheduler::framework::queue::CONFLICT_RETRY);
        }
        Some(self.queue.backoff(&key, now))
    }

    /// A Pending status write (the message of a cycle that found no Pod) met a newer version
    /// of the Run. The cycle's decision stands and the Run stays where the cycle filed it, as
    /// kube-scheduler leaves a Pod whose condition update failed where it queued it: backing
    /// it off would let a later Run take the room the next event frees, out of queue order.
    /// It looks again once that version is observed (at once when it already is, `observed`),
    /// so what the write had to say is not lost.
    pub fn write_conflicted(&mut self, namespace: &str, uid: &str, observed: bool, now: Timestamp) {
        let key = RunKey::new(namespace, uid);
        if !self.queue.contains(&key) {
            return;
        }
        if observed {
            self.queue.activate(&key, now);
        } else {
            self.rewrite.insert(key);
        }
    }

    /// The Run's Bind was written: its failures are forgotten (the watch confirms the rest).
    pub fn bound(&mut self, namespace: &str, uid: &str) {
        self.queue.forget_failures(&RunKey::new(namespace, uid));
    }
}
