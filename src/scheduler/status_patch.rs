//! The scheduler's Run status writes as JSON merge patches of the status subresource, guarded
//! by the resourceVersion the scheduler observed: only the fields that change are sent (not
//! the whole object with its spec and managedFields), the API server still refuses the write
//! with 409 Conflict when the Run changed since, and the answer is checked for errors but not
//! decoded (the watch brings the new version to the index anyway).
//!
//! A conflict only says the Run moved, not how: when a fresh read shows it moved in nothing a
//! plan reads (another client wrote its other annotations, or the scheduler's own waiting
//! message landed after the version the cycle read), [`rebase`] writes the same status over
//! the fresh version, as the API server's own `GuaranteedUpdate` retries a Pod's Binding on
//! the current object. Without it a Run that other clients keep writing could never be
//! bound, and a Run whose message is still on its way would lose its place in the queue:
//! the watch always brings its version too late.
//!
//! [`merge_patch`], [`status_patch`] and [`rebase`] are pure; [`send`] is the one call to the
//! API server.

use kube::api::Patch;
use kube::{Client, Resource, ResourceExt as _};
use serde_json::{Map, Value};

use crate::api::{Run, RunStatus, patch_params, status};

/// The RFC 7386 merge patch that turns `old` into `new`: changed or added members as in
/// `new`, removed members as `null`, nested objects recursively, anything else (arrays
/// included) whole. `None` when nothing differs.
pub fn merge_patch(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                let change = match old.get(key) {
                    Some(before) => merge_patch(before, value),
                    // `null` in a merge patch deletes: an added null is no change.
                    None if value.is_null() => None,
                    None => Some(value.clone()),
                };
                if let Some(change) = change {
                    patch.insert(key.clone(), change);
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        // An object replaced by a non-object (or the reverse) cannot be merged into: a
        // scalar or array member replaces it whole, as does a new object over a scalar.
        (old, new) if old == new => None,
        (_, Value::Object(new)) => Some(Value::Object(strip_nulls(new))),
        (_, new) => Some(new.clone()),
    }
}

/// A new object sent whole through a merge patch: its `null` members mean nothing.
fn strip_nulls(object: &Map<String, Value>) -> Map<String, Value> {
    object
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::Object(o) => (k.clone(), Value::Object(strip_nulls(o))),
            v => (k.clone(), v.clone()),
        })
        .collect()
}

/// The patch that writes `status` over what `run` (as observed) says, guarded by the
/// observed resourceVersion, each condition it sets or changes stamped with the observed
/// generation ([`status::observe_generation`]). `None` when the status would not change.
pub fn status_patch(run: &Run, status: &RunStatus) -> Option<Value> {
    let observed = run.status.clone().unwrap_or_default();
    let mut status = status.clone();
    status::observe_generation(&observed.conditions, &mut status, run.metadata.generation);
    let old = serde_json::to_value(observed).ok()?;
    let new = serde_json::to_value(&status).ok()?;
    let status = merge_patch(&old, &new)?;
    let mut patch = Map::new();
    if let Some(rv) = &run.metadata.resource_version {
        patch.insert(
            "metadata".into(),
            serde_json::json!({ "resourceVersion": rv }),
        );
    }
    patch.insert("status".into(), status);
    Some(Value::Object(patch))
}

/// The patch that writes `status` over `fresh` (a read after a conflict), guarded by its
/// resourceVersion, when `fresh` is the Run `observed` was in everything a plan reads: the
/// same object (UID), spec (generation), labels and `kruntimes.io/` annotations, not being
/// deleted, and the same status but for what the scheduler's own writes to a waiting Run
/// say ([`waits_alike`]). `None` when it moved in any of them: the plan is stale, the
/// reservation goes and the Run is cycled again (the spec's rule for a conflict).
pub fn rebase(observed: &Run, fresh: &Run, status: &RunStatus) -> Option<Value> {
    let same = plans_alike(observed, fresh)
        && waits_alike(observed.status.as_ref(), fresh.status.as_ref());
    fresh.metadata.resource_version.as_ref().filter(|_| same)?;
    // A recorded priority is never taken back.
    let recorded = fresh.status.as_ref().and_then(|s| s.priority);
    let status = RunStatus {
        priority: status.priority.or(recorded),
        ..status.clone()
    };
    status_patch(fresh, &status)
}

/// Whether status `b` is `a` but for what the scheduler's own writes to a waiting Run say:
/// the `Scheduled` condition, reason and message, the nominated Pod and the recorded
/// priority, none of which a plan reads from the status (the cache holds the nomination and
/// the priority). Its own earlier message the watch has not brought yet must not make a
/// Bind lose its place in the queue.
pub fn waits_alike(a: Option<&RunStatus>, b: Option<&RunStatus>) -> bool {
    let waiting = |s: Option<&RunStatus>| {
        let mut s = s.cloned().unwrap_or_default();
        s.phase.get_or_insert(crate::api::RunPhase::Pending);
        s.reason = None;
        s.message = None;
        s.nominated_pod_name = None;
        s.priority = None;
        s.conditions
            .retain(|c| c.type_ != status::CONDITION_SCHEDULED);
        s
    };
    waiting(a) == waiting(b)
}

/// Whether a cycle would read `b` as it read `a` in everything but the status: the same
/// object (UID), spec (generation), labels and `kruntimes.io/` annotations, and `b` not being
/// deleted. Other clients' annotations and the metadata the API server keeps may differ.
pub fn plans_alike(a: &Run, b: &Run) -> bool {
    let ours = |run: &Run| {
        run.annotations()
            .iter()
            .filter(|(k, _)| k.starts_with("kruntimes.io/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (a_meta, b_meta) = (&a.metadata, &b.metadata);
    a_meta.uid == b_meta.uid
        && a_meta.generation == b_meta.generation
        && b_meta.deletion_timestamp.is_none()
        && a.labels() == b.labels()
        && ours(a) == ours(b)
}

/// Sends `patch` to the status subresource of Run `namespace/name` as the kruntimes field
/// manager. The answer's body is checked for an error status only.
pub async fn send(
    client: &Client,
    namespace: &str,
    name: &str,
    patch: &Value,
) -> Result<(), kube::Error> {
    let request = kube::core::Request::new(Run::url_path(&(), Some(namespace)))
        .patch_subresource("status", name, &patch_params(), &Patch::Merge(patch))
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status;
    use crate::testing::run;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    #[test]
    fn merge_patch_sends_changes_nulls_removals_and_replaces_arrays_whole() {
        let old = json!({"phase": "Pending", "message": "m", "conditions": [{"type": "A"}],
                         "nested": {"keep": 1, "drop": 2}});
        let new = json!({"phase": "Scheduled", "assignedPod": "p", "conditions": [{"type": "A"}, {"type": "B"}],
                         "nested": {"keep": 1}});
        assert_eq!(
            merge_patch(&old, &new),
            Some(
                json!({"phase": "Scheduled", "assignedPod": "p", "message": null,
                        "conditions": [{"type": "A"}, {"type": "B"}], "nested": {"drop": null}})
            )
        );
        assert_eq!(merge_patch(&old, &old), None);
        assert_eq!(
            merge_patch(&json!(1), &json!({"a": null, "b": 2})),
            Some(json!({"b": 2}))
        );
    }

    #[test]
    fn a_bind_patch_carries_the_observed_version_and_applies_to_the_bound_status() {
        // A Run the scheduler said was Pending (a message, a nomination) before it fitted.
        let mut observed = run("a").resource_version("42").build();
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let pending = observed.status.get_or_insert_with(Default::default);
        status::set_pending(pending, "0/1 Runtime Pods are available.", Some("p0"), &now);
        let mut bound = observed.status.clone().unwrap_or_default();
        status::set_bound(&mut bound, "p1", "uid-p1", &now);
        let patch = status_patch(&observed, &bound).expect("binding changes the status");
        assert_eq!(patch["metadata"], json!({"resourceVersion": "42"}));
        // Cleared fields are sent as null (a missing member would keep the old value).
        assert_eq!(patch["status"].get("message"), Some(&Value::Null));
        assert_eq!(patch["status"].get("nominatedPodName"), Some(&Value::Null));
        // What the API server does with it: the observed status merged with the patch is
        // exactly the bound status.
        let mut merged = serde_json::to_value(observed.status.clone().unwrap_or_default()).unwrap();
        apply(&mut merged, &patch["status"]);
        assert_eq!(merged, serde_json::to_value(&bound).unwrap());
        let unchanged = observed.status.clone().unwrap_or_default();
        assert_eq!(status_patch(&observed, &unchanged), None);
    }

    #[test]
    fn a_conflicted_patch_is_rebased_only_on_a_run_that_moved_in_nothing_a_plan_reads() {
        let observed = run("a")
            .uid("u1")
            .resource_version("42")
            .labels(&[("team", "a")])
            .build();
        let mut bound = RunStatus::default();
        status::set_bound(
            &mut bound,
            "p1",
            "uid-p1",
            &Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let patch = status_patch(&observed, &bound).unwrap();
        let fresh = |change: &dyn Fn(&mut Run)| {
            let mut run = observed.clone();
            run.metadata.resource_version = Some("57".into());
            change(&mut run);
            rebase(&observed, &run, &bound)
        };
        // Another client wrote an annotation of its own: the same patch, at the new version.
        let rebased = fresh(&|r| {
            r.annotations_mut()
                .insert("example.com/note".into(), "x".into());
        })
        .expect("only another client's annotation moved");
        assert_eq!(rebased["metadata"], json!({"resourceVersion": "57"}));
        assert_eq!(rebased["status"], patch["status"]);
        // The scheduler's own waiting message landed: the bound status is written over it,
        // the message and nomination it carried cleared.
        let waiting = fresh(&|r| {
            let now = Time(jiff::Timestamp::UNIX_EPOCH);
            let status = r.status.get_or_insert_with(Default::default);
            status::set_pending(status, "0/1 Runtime Pods are available.", Some("p9"), &now);
            status.priority = Some(0);
        })
        .expect("only the scheduler's waiting message moved");
        assert_eq!(waiting["metadata"], json!({"resourceVersion": "57"}));
        assert_eq!(waiting["status"]["phase"], "Scheduled");
        assert_eq!(waiting["status"]["assignedPod"], "p1");
        let cleared = |field: &str| waiting["status"].get(field) == Some(&Value::Null);
        assert!(cleared("message") && cleared("nominatedPodName"));
        assert_eq!(
            waiting["status"].get("priority"),
            None,
            "the recorded priority kept"
        );
        // Anything a plan reads moved: no rebase.
        type Change<'a> = &'a dyn Fn(&mut Run);
        let moved: [(&str, Change); 7] = [
            ("the spec", &|r| r.metadata.generation = Some(2)),
            ("the status beyond the waiting message", &|r| {
                r.status.get_or_insert_with(Default::default).attempt = Some(2)
            }),
            ("the phase", &|r| {
                r.status.get_or_insert_with(Default::default).phase =
                    Some(crate::api::RunPhase::Failed)
            }),
            ("a label", &|r| {
                r.labels_mut().insert("team".into(), "b".into());
            }),
            ("a kruntimes.io/ annotation", &|r| {
                r.annotations_mut()
                    .insert("kruntimes.io/preemptible".into(), "true".into());
            }),
            ("deletion", &|r| {
                r.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH))
            }),
            ("the object (a new Run of the name)", &|r| {
                r.metadata.uid = Some("u2".into())
            }),
        ];
        for (what, change) in moved {
            assert_eq!(fresh(change), None, "{what} moved");
        }
    }

    /// RFC 7386's MergePatch, for checking patches against.
    fn apply(target: &mut Value, patch: &Value) {
        let Value::Object(patch) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        let target = target.as_object_mut().unwrap();
        for (k, v) in patch {
            if v.is_null() {
                target.remove(k);
            } else {
                apply(target.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}
