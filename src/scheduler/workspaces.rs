//! The PersistentWorkspace lifecycle, decided: when the leader persists a binding, marks a
//! workspace Lost, records its last use, and releases (and deletes) it after
//! `ttlSecondsAfterUnused`.
//!
//! Pure: [`plan`] takes what the scheduler cache knows of one workspace and returns the one
//! step to write, [`apply`] turns a step into the status to write. The scheduler writes a
//! binding before a Run's Bind; the manager's workspace lifecycle controller
//! ([`crate::manager::workspaces`]) carries the other steps out. It must not decide placement (WorkspacePlacement and
//! Reserve do) or talk to the API server.
//!
//! Rules, for a workspace that is not being deleted:
//! - Pending, with an active Run on Pod P (the watch shows the bound Run): **Bind** to P:
//!   `phase: Bound`, `boundPod`, `path`, `lastUsedTime`; **Lose** instead when P is gone.
//!   A binding only in the assumed cache is not persisted: the Run's Bind may still fail.
//! - Bound, its Pod gone or being deleted: **Lose** (the data is on that Pod's disk, so the
//!   workspace is never bound again, as upstream's design requires).
//! - Bound or Pending, unused (no active, assumed or Pending Run uses it): when a Run that
//!   used it ended after its `lastUsedTime`, **Touch** (`lastUsedTime` = that Run's
//!   `completionTime`: the unused TTL counts from the end of the last use, whichever leader
//!   saw it end); else once `lastUsedTime` (or creation) + TTL has passed, **Release**, and
//!   delete it under `cleanupPolicy: DeleteAfterTTL`.
//! - Lost and Released are final (a Released one under `DeleteAfterTTL` is deleted until it
//!   is gone).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::status::set_condition;
use crate::api::{PersistentWorkspace, PersistentWorkspaceStatus, WorkspacePhase};
use crate::scheduler::framework::{SchedulerCache, WorkspaceRecord};

/// One workspace with a step due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub namespace: String,
    pub name: String,
    /// The UID the step was planned for: a workspace recreated under the name is not it.
    pub uid: String,
    /// The version it was planned on: the write is guarded by it.
    pub resource_version: Option<String>,
    pub step: Step,
}

/// One lifecycle pass over every workspace the cache knows: the steps due at `now`, and when
/// the next TTL release falls due. Stateless: a step not written is due again next pass.
pub fn due(cache: &SchedulerCache, now: Timestamp) -> (Vec<Due>, Option<Timestamp>) {
    let mut steps = Vec::new();
    let mut next: Option<Timestamp> = None;
    for (namespace, name, entry) in cache.index().workspaces() {
        let Some(record) = &entry.record else {
            continue;
        };
        let view = cache
            .snapshot(namespace, &record.runtime, now)
            .workspace(name);
        let key = (namespace.to_string(), name.to_string());
        let active_on = entry.active.keys().next().map(String::as_str);
        let pod = match entry.holder().and_then(|p| cache.index().pod(namespace, p)) {
            None => PodPresence::Gone,
            Some(p) if p.deleting => PodPresence::Terminating,
            Some(_) => PodPresence::Present,
        };
        let seen = Observed {
            record,
            active_on,
            in_use: view.in_use,
            last_finished: entry.last_finished,
            pod,
        };
        match plan(&seen, now) {
            Some(step) => steps.push(Due {
                namespace: key.0,
                name: key.1,
                uid: record.uid.clone(),
                resource_version: record.resource_version.clone(),
                step,
            }),
            None => {
                if let Some(at) = release_due(&seen) {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
        }
    }
    (steps, next)
}

/// The condition the leader keeps on a workspace.
pub const CONDITION_BOUND: &str = "Bound";

/// Bounded reasons of the `Bound` condition.
pub mod reasons {
    pub const BOUND: &str = "Bound";
    pub const POD_LOST: &str = "RuntimePodLost";
    pub const RELEASED: &str = "Released";
}

/// What the cache knows of the workspace's Pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPresence {
    Present,
    /// Being deleted (or chosen for scale-down).
    Terminating,
    /// No Runtime Pod of that name.
    Gone,
}

/// What the workspace lifecycle controller knows of one workspace at one pass.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub record: &'a WorkspaceRecord,
    /// The Pod of an active Run that uses it, if any.
    pub active_on: Option<&'a str>,
    /// An active, assumed or Pending Run uses it.
    pub in_use: bool,
    /// When the last Run that used it ended.
    pub last_finished: Option<Timestamp>,
    /// How the Pod it is (or is about to be) bound to stands.
    pub pod: PodPresence,
}

/// The one write a pass makes for a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Bind {
        pod: String,
    },
    Lose {
        pod: String,
        why: PodPresence,
    },
    /// `lastUsedTime` = `at`, the end of its last use.
    Touch {
        at: Timestamp,
    },
    Release {
        delete: bool,
    },
}

/// The step for `seen` at `now`; `None` when its status is as it should be.
pub fn plan(seen: &Observed<'_>, now: Timestamp) -> Option<Step> {
    let record = seen.record;
    if record.deleting {
        return None;
    }
    let lose = |pod: &str| Step::Lose {
        pod: pod.to_string(),
        why: seen.pod,
    };
    match record.phase {
        // Written Released but not deleted yet (the delete failed): delete it again.
        WorkspacePhase::Released if record.delete_after_ttl && record.ttl.is_some() => {
            Some(Step::Release { delete: true })
        }
        WorkspacePhase::Lost | WorkspacePhase::Released => None,
        WorkspacePhase::Bound => match record.bound_pod.as_deref() {
            Some(pod) if seen.pod != PodPresence::Present => Some(lose(pod)),
            _ => unused_step(seen, now),
        },
        WorkspacePhase::Pending => match seen.active_on {
            Some(pod) if seen.pod == PodPresence::Gone => Some(lose(pod)),
            Some(pod) => Some(Step::Bind {
                pod: pod.to_string(),
            }),
            None => unused_step(seen, now),
        },
    }
}

fn unused_step(seen: &Observed<'_>, now: Timestamp) -> Option<Step> {
    if seen.in_use {
        return None;
    }
    let record = seen.record;
    if let Some(at) = seen.last_finished
        && record.last_used.is_none_or(|used| used < at)
    {
        return Some(Step::Touch { at });
    }
    let ttl = record.ttl?;
    let expired = record
        .last_used
        .and_then(|at| at.checked_add(ttl).ok())
        .is_none_or(|deadline| deadline <= now);
    expired.then_some(Step::Release {
        delete: record.delete_after_ttl,
    })
}

/// When the workspace of `seen` is next due for a TTL release, if it is unused with a TTL.
pub fn release_due(seen: &Observed<'_>) -> Option<Timestamp> {
    let record = seen.record;
    if seen.in_use
        || matches!(
            record.phase,
            WorkspacePhase::Lost | WorkspacePhase::Released
        )
        || record.deleting
    {
        return None;
    }
    let ttl: SignedDuration = record.ttl?;
    record.last_used.and_then(|at| at.checked_add(ttl).ok())
}

/// The status `workspace` should have after `step`, written in full (conditions included)
/// so a merge patch carries it; `None` when it already has it.
pub fn apply(
    workspace: &PersistentWorkspace,
    step: &Step,
    now: Timestamp,
) -> Option<PersistentWorkspaceStatus> {
    let old = workspace.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let at = Time(now);
    let name = workspace.metadata.name.as_deref().unwrap_or_default();
    status.runtime = Some(workspace.spec.runtime.clone());
    match step {
        Step::Bind { pod } => {
            status.phase = Some(WorkspacePhase::Bound.as_str().to_string());
            status.bound_pod = Some(pod.clone());
            status.path = Some(PersistentWorkspace::path_for(name));
            status.last_used_time = Some(at.clone());
            set_condition(
                &mut status.conditions,
                CONDITION_BOUND,
                true,
                reasons::BOUND,
                &format!("bound to Runtime Pod {pod}: Runs that use it are placed there"),
                &at,
            );
        }
        Step::Lose { pod, why } => {
            status.phase = Some(WorkspacePhase::Lost.as_str().to_string());
            status.bound_pod = Some(pod.clone());
            let what = match why {
                PodPresence::Terminating => "is being deleted",
                PodPresence::Gone | PodPresence::Present => "is gone",
            };
            set_condition(
                &mut status.conditions,
                CONDITION_BOUND,
                false,
                reasons::POD_LOST,
                &format!(
                    "Runtime Pod {pod} {what}, and the workspace's data with it; Runs that name this workspace fail: create a new workspace"
                ),
                &at,
            );
        }
        Step::Touch { at } => status.last_used_time = Some(Time(*at)),
        Step::Release { .. } => {
            status.phase = Some(WorkspacePhase::Released.as_str().to_string());
            let ttl = workspace.spec.ttl_seconds_after_unused.unwrap_or(0);
            set_condition(
                &mut status.conditions,
                CONDITION_BOUND,
                false,
                reasons::RELEASED,
                &format!("released after {ttl}s unused (ttlSecondsAfterUnused)"),
                &at,
            );
        }
    }
    (status != old).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NOW, workspace};

    fn record(w: crate::testing::WorkspaceBuilder) -> WorkspaceRecord {
        WorkspaceRecord::of(&w.build())
    }

    fn seen<'a>(record: &'a WorkspaceRecord) -> Observed<'a> {
        Observed {
            record,
            active_on: None,
            in_use: false,
            last_finished: None,
            pod: PodPresence::Present,
        }
    }

    fn ago(seconds: i64) -> Timestamp {
        NOW - SignedDuration::from_secs(seconds)
    }

    #[test]
    fn the_lifecycle_follows_the_documented_rules() {
        let pending = record(workspace("ws"));
        let bound = record(workspace("ws").bound("p1").last_used(ago(10)));
        let ttl_left = record(workspace("ws").bound("p1").ttl(60).last_used(ago(10)));
        let ttl_over = record(workspace("ws").bound("p1").ttl(60).last_used(ago(60)));
        let retained = record(
            workspace("ws")
                .ttl(5)
                .cleanup_policy("Retain")
                .last_used(ago(60)),
        );
        let lost = record(workspace("ws").bound("p1").lost());
        let table: Vec<(&str, Observed<'_>, Option<Step>)> = vec![
            (
                "an unused Pending workspace without TTL stays",
                seen(&pending),
                None,
            ),
            (
                "an active Run binds a Pending workspace to its Pod",
                Observed {
                    active_on: Some("p2"),
                    in_use: true,
                    ..seen(&pending)
                },
                Some(Step::Bind { pod: "p2".into() }),
            ),
            (
                "an active Run on a Pod that is gone loses it",
                Observed {
                    active_on: Some("p2"),
                    in_use: true,
                    pod: PodPresence::Gone,
                    ..seen(&pending)
                },
                Some(Step::Lose {
                    pod: "p2".into(),
                    why: PodPresence::Gone,
                }),
            ),
            (
                "a Bound workspace in use stays",
                Observed {
                    active_on: Some("p1"),
                    in_use: true,
                    ..seen(&bound)
                },
                None,
            ),
            (
                "its Pod being deleted loses it, in use or not",
                Observed {
                    pod: PodPresence::Terminating,
                    in_use: true,
                    ..seen(&bound)
                },
                Some(Step::Lose {
                    pod: "p1".into(),
                    why: PodPresence::Terminating,
                }),
            ),
            (
                "the end of its last use is recorded",
                Observed {
                    last_finished: Some(ago(5)),
                    ..seen(&ttl_over)
                },
                Some(Step::Touch { at: ago(5) }),
            ),
            (
                "a use that ended before lastUsedTime changes nothing",
                Observed {
                    last_finished: Some(ago(70)),
                    ..seen(&ttl_over)
                },
                Some(Step::Release { delete: true }),
            ),
            ("unused within its TTL it stays", seen(&ttl_left), None),
            (
                "unused past its TTL it is released and deleted",
                seen(&ttl_over),
                Some(Step::Release { delete: true }),
            ),
            (
                "a Pending Run waiting for it keeps it",
                Observed {
                    in_use: true,
                    ..seen(&ttl_over)
                },
                None,
            ),
            (
                "Retain releases without deleting",
                seen(&retained),
                Some(Step::Release { delete: false }),
            ),
            (
                "Lost is final",
                Observed {
                    pod: PodPresence::Gone,
                    ..seen(&lost)
                },
                None,
            ),
        ];
        for (case, observed, want) in table {
            assert_eq!(plan(&observed, NOW), want, "{case}");
        }
    }

    #[test]
    fn applying_a_step_writes_the_upstream_status_fields_once() {
        let w = workspace("ws").build();
        let bind = Step::Bind { pod: "p1".into() };
        let status = apply(&w, &bind, NOW).unwrap();
        assert_eq!(status.phase.as_deref(), Some("Bound"));
        assert_eq!(status.bound_pod.as_deref(), Some("p1"));
        assert_eq!(status.path.as_deref(), Some("/workspace/persistent/ws"));
        assert_eq!(status.runtime.as_deref(), Some("python"));
        assert_eq!(status.last_used_time, Some(Time(NOW)));
        assert_eq!(status.conditions[0].reason, reasons::BOUND);
        let mut bound = w.clone();
        bound.status = Some(status);
        assert_eq!(apply(&bound, &bind, NOW), None, "already written");

        let lost = apply(
            &bound,
            &Step::Lose {
                pod: "p1".into(),
                why: PodPresence::Gone,
            },
            NOW,
        )
        .unwrap();
        assert_eq!(lost.phase.as_deref(), Some("Lost"));
        assert_eq!(lost.conditions.len(), 1);
        assert_eq!(lost.conditions[0].status, "False");
        assert!(
            lost.conditions[0]
                .message
                .starts_with("Runtime Pod p1 is gone"),
            "{}",
            lost.conditions[0].message
        );
    }
}
