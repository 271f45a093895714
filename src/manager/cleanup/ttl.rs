//! `spec.ttlSecondsAfterFinished`: which terminal Runs are due for deletion, and when the next
//! one is, as Kubernetes' TTL-after-finished controller decides it for Jobs. Pure: the leader's
//! loop ([`super::Cleanup`]) deletes what this returns, guarded by each Run's UID.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt as _;

use crate::api::Run;

/// A terminal Run whose TTL has run out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// When `run` is to be deleted: its `completionTime` plus `ttlSecondsAfterFinished`, for a
/// terminal Run that has both and is not being deleted already.
pub fn due(run: &Run) -> Option<Timestamp> {
    let ttl = run.spec.ttl_seconds_after_finished?;
    if !run.phase().is_terminal() || run.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let completed = run.status.as_ref()?.completion_time.as_ref()?.0;
    completed
        .checked_add(jiff::SignedDuration::from_secs(i64::from(ttl.max(0))))
        .ok()
}

/// The Runs of `runs` due at `now`, and how long until the next one is due (`None`: none
/// has a TTL pending).
pub fn expired<'a>(
    runs: impl IntoIterator<Item = &'a Run>,
    now: Timestamp,
) -> (Vec<Expired>, Option<Duration>) {
    let mut out = Vec::new();
    let mut next: Option<Duration> = None;
    for run in runs {
        let Some(at) = due(run) else { continue };
        if at <= now {
            out.push(Expired {
                namespace: run.namespace().unwrap_or_default(),
                name: run.name_any(),
                uid: run.uid().unwrap_or_default(),
            });
        } else {
            let wait = Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO);
            next = Some(next.map_or(wait, |n| n.min(wait)));
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    (out, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NOW, run};

    #[test]
    fn only_terminal_runs_past_their_ttl_are_due_and_the_next_one_is_timed() {
        let done = |name: &str, ttl: i32, completed_ago: i64| {
            let mut r = run(name).succeeded().build();
            r.spec.ttl_seconds_after_finished = Some(ttl);
            let at = NOW
                .checked_sub(jiff::SignedDuration::from_secs(completed_ago))
                .unwrap();
            r.status.as_mut().unwrap().completion_time =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
            r
        };
        let mut running = run("running").running().build();
        running.spec.ttl_seconds_after_finished = Some(0);
        let mut deleting = done("deleting", 0, 10);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(NOW));
        let runs = vec![
            done("old", 5, 10),
            done("zero", 0, 0),
            done("later", 60, 10),
            done("soon", 20, 10),
            run("no-ttl").succeeded().build(),
            running,
            deleting,
        ];
        let (due, next) = expired(&runs, NOW);
        let names: Vec<&str> = due.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["old", "zero"]);
        assert_eq!(due[0].uid, "uid-old");
        assert_eq!(next, Some(Duration::from_secs(10)));
    }
}
