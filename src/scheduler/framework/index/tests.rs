use super::*;
use crate::scheduler::framework::types::Observed;
use crate::testing::*;

fn idx(pods: &[PodBuilder], runs: &[RunBuilder]) -> Index {
    let mut index = Index::new();
    for p in pods {
        index.apply_pod(&p.build());
        if let Some(l) = p.build_lease() {
            index.apply_lease(&l, NOW);
        }
    }
    for r in runs {
        index.apply_run(&r.build());
    }
    index
}

#[test]
fn only_pods_with_the_runtime_label_are_runtime_pods() {
    let mut index = Index::new();
    let mut plain = pod("web").build();
    plain.metadata.labels = None;
    assert!(index.apply_pod(&plain).is_empty());
    assert!(index.pod(NS, "web").is_none());
    index.apply_pod(&pod("p1").build());
    assert_eq!(index.runtime_pods(NS, RUNTIME), ["p1"]);
    // Losing the label makes it a non-Runtime Pod again.
    let mut unlabelled = pod("p1").build();
    unlabelled.metadata.labels = None;
    let wake = index.apply_pod(&unlabelled);
    assert_eq!(wake.len(), 1);
    assert!(index.runtime_pods(NS, RUNTIME).is_empty());
}

/// A Runtime Pod as the API server serves it: defaulted spec, token projection, owner,
/// container statuses and every condition.
fn served_pod(ready: &str, deleting: bool, scale_down: bool) -> Pod {
    let mut annotations = serde_json::json!({"kruntimes.io/capacity.runs": "4", "kruntimes.io/capacity.example.com_gpu": "2"});
    if scale_down {
        annotations[crate::api::ANNOTATION_SCALE_DOWN] = "true".into();
    }
    let mut pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "python-abcde", "generateName": "python-", "namespace": "ns", "uid": "u1",
            "resourceVersion": "42",
            "labels": {"kruntimes.io/runtime": "python", "kruntimes.io/runtime-pod": "python-abcde"},
            "annotations": annotations,
            "finalizers": ["kruntimes.io/drain"],
            "ownerReferences": [{"apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime", "name": "python", "uid": "rt", "controller": true}]
        },
        "spec": {
            "serviceAccountName": "python", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "containers": [{
                "name": "runtimed", "image": "kruntimes/runtimed:v1", "args": ["runtimed"],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]
            }],
            "volumes": [{"name": "kube-api-access-x", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
            ]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "podIP": "10.0.0.7", "hostIP": "10.0.0.1",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "ContainersReady", "status": ready},
                {"type": "Ready", "status": ready}
            ],
            "containerStatuses": [{"name": "runtimed", "image": "kruntimes/runtimed:v1", "imageID": "sha256:1", "ready": true, "restartCount": 0, "started": true, "state": {"running": {"startedAt": "2026-12-07T00:00:00Z"}}}]
        }
    }))
    .expect("a served Pod");
    if deleting {
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(NOW));
    }
    pod
}

#[test]
fn a_served_pod_is_kept_as_its_name_and_record_and_a_relist_of_them_resets_the_pods() {
    for (ready, deleting, scale_down) in [
        ("True", false, false),
        ("False", false, false),
        ("True", true, false),
        ("True", false, true),
    ] {
        let served = served_pod(ready, deleting, scale_down);
        let observed = ObservedPod::of(&served);
        assert_eq!(
            (observed.namespace.as_str(), observed.name.as_str()),
            ("ns", "python-abcde")
        );
        let record = observed.record.clone().expect("a Runtime Pod");
        assert_eq!(record.ready, ready == "True");
        assert_eq!(record.deleting, deleting || scale_down);
        assert_eq!(
            record.capacity.as_ref().map(|c| c.get("example.com/gpu")),
            Ok(2)
        );

        let mut index = Index::new();
        index.reset_observed_pods(std::slice::from_ref(&observed));
        assert_eq!(index.pod("ns", "python-abcde"), Some(&record));
        let mut applied = Index::new();
        applied.apply_pod(&served);
        assert_eq!(applied.pod("ns", "python-abcde"), Some(&record), "as a Pod");
        // Relisted without it: gone.
        index.reset_observed_pods(&[]);
        assert_eq!(index.pod("ns", "python-abcde"), None);
    }
    // Not a Runtime Pod (any more): no record, and applying it removes the one there was.
    let mut unlabelled = served_pod("True", false, false);
    unlabelled.metadata.labels = None;
    let observed = ObservedPod::of(&unlabelled);
    assert_eq!(observed.record, None);
    let mut index = Index::new();
    index.apply_pod(&served_pod("True", false, false));
    index.apply_observed_pod(&observed);
    assert_eq!(index.pod("ns", "python-abcde"), None);
}

#[test]
fn a_watched_lease_is_kept_as_what_its_record_reads_and_a_relist_of_them_resets_the_leases() {
    let served = lease("p1", "uid-p1", 10, 40);
    let observed = ObservedLease::of(&served);
    assert_eq!(
        (observed.namespace.as_str(), observed.name.as_str()),
        (NS, "p1")
    );
    assert_eq!(observed.holder.as_deref(), Some("uid-p1"));
    assert_eq!(observed.renew_time, Some(at(10)));
    assert_eq!(observed.duration_seconds, Some(40));

    let mut as_lease = idx(&[pod("p1").no_lease()], &[]);
    let mut as_kept = as_lease.clone();
    as_lease.reset_leases(std::slice::from_ref(&served), at(20));
    as_kept.reset_observed_leases(std::slice::from_ref(&observed), at(20));
    let record = as_kept.lease(NS, "p1").cloned().expect("kept");
    assert_eq!(
        as_lease.lease(NS, "p1"),
        Some(&record),
        "the same record either way"
    );
    assert_eq!(record.expires_at, Some(at(50)));
    // Relisted without it: gone.
    as_kept.reset_observed_leases(&[], at(30));
    assert_eq!(as_kept.lease(NS, "p1"), None);
}

#[test]
fn a_malformed_capacity_annotation_is_recorded_not_fatal() {
    let index = idx(&[pod("p1").capacity_strs(&[("runs", "two")])], &[]);
    let record = index.pod(NS, "p1").unwrap();
    let err = record.capacity.as_ref().unwrap_err();
    assert!(
        err.contains("annotation kruntimes.io/capacity.runs"),
        "{err}"
    );
}

#[test]
fn active_runs_adjust_usage_incrementally_and_release_it_when_they_leave() {
    let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[]);
    let a = run("a").requests(&[("example.com/gpu", 1)]).on("p1");
    let b = run("b").on("p1");
    index.apply_run(&a.build());
    index.apply_run(&b.build());
    let used = |resource| index.used(NS, "p1", resource).unwrap();
    assert_eq!(used("runs"), 2);
    assert_eq!(used("example.com/gpu"), 1);

    let change = index.apply_run(&a.clone().succeeded().build());
    assert_eq!(
        change.released,
        [PodRef {
            namespace: NS.into(),
            runtime: RUNTIME.into(),
            pod: "p1".into()
        }]
    );
    assert_eq!(change.wakeups().len(), 1);
    assert_eq!(change.wakeups()[0].source.as_str(), "capacity_released");
    let used = |resource| index.used(NS, "p1", resource).unwrap();
    assert_eq!(used("runs"), 1);
    assert_eq!(used("example.com/gpu"), 0);

    let change = index.delete_run(NS, &b.build().uid().unwrap());
    assert_eq!(change.released.len(), 1);
    assert_eq!(index.used(NS, "p1", "runs").unwrap(), 0);
}

#[test]
fn repeated_status_updates_of_an_active_run_change_nothing() {
    let mut index = idx(&[pod("p1")], &[]);
    let a = run("a").labels(&[("cohort", "x")]).on("p1");
    let first = index.apply_run(&a.build());
    assert!(first.targets_changed.is_some());
    assert_eq!(index.apply_run(&a.build()), RunChange::default());
    assert_eq!(
        index.apply_run(&a.clone().running().build()),
        RunChange::default()
    );
    assert_eq!(index.used(NS, "p1", "runs").unwrap(), 1);
}

#[test]
fn an_active_run_with_an_unparseable_request_exhausts_that_resource() {
    let mut index = idx(
        &[pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 8)])],
        &[],
    );
    let bad = run("bad")
        .request_strs(&[("example.com/gpu", "1.5")])
        .on("p1");
    index.apply_run(&bad.build());
    let used = |resource| index.used(NS, "p1", resource).unwrap();
    assert_eq!(used("example.com/gpu"), u64::MAX);
    assert_eq!(used("runs"), 1, "runs still defaults to 1");
    index.apply_run(&bad.succeeded().build());
    assert_eq!(index.used(NS, "p1", "example.com/gpu").unwrap(), 0);
}

#[test]
fn a_run_recreated_under_the_same_name_is_a_different_run() {
    let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[run("a").on("p1")]);
    index.apply_run(&run("a").uid("uid-a-2").build());
    assert_eq!(
        index.used(NS, "p1", "runs").unwrap(),
        1,
        "the old Run still holds p1"
    );
    let new = RunKey::new(NS, "uid-a-2");
    assert_eq!(index.observed(&new), Observed::Pending);
    index.delete_run(NS, "uid-a");
    assert_eq!(index.used(NS, "p1", "runs").unwrap(), 0);
    assert_eq!(
        index.observed(&new),
        Observed::Pending,
        "the new Run is still Pending"
    );
}

#[test]
fn a_run_is_observed_pending_until_it_is_placed_or_deleted() {
    let mut index = idx(
        &[],
        &[run("a"), run("b").ns("elsewhere"), run("d").on("p1")],
    );
    let (a, b) = (run("a").key(), run("b").ns("elsewhere").key());
    assert_eq!(index.observed(&a), Observed::Pending);
    assert_eq!(index.observed(&b), Observed::Pending);
    assert_eq!(index.observed(&run("d").key()), Observed::Active("p1"));
    index.apply_run(&run("a").on("p1").build());
    assert_eq!(index.observed(&a), Observed::Active("p1"));
    index.delete_run("elsewhere", &b.uid);
    assert_eq!(index.observed(&b), Observed::Absent);
}

#[test]
fn pod_events_wake_only_on_scheduling_relevant_changes() {
    let mut index = Index::new();
    let p = pod("p1").capacity(&[("runs", 2)]);
    assert_eq!(index.apply_pod(&p.build()).len(), 1, "a new Pod wakes");
    assert!(
        index.apply_pod(&p.build()).is_empty(),
        "an identical Pod does not"
    );
    let wake = index.apply_pod(&p.clone().not_ready().build());
    assert_eq!(wake[0].source, WakeSource::RuntimePod);
    assert_eq!(
        index
            .apply_pod(&p.clone().capacity(&[("runs", 3)]).build())
            .len(),
        1
    );
    assert_eq!(index.delete_pod(NS, "p1").len(), 1);
    assert!(index.delete_pod(NS, "p1").is_empty());
}

#[test]
fn lease_renewals_wake_only_when_the_heartbeat_may_have_come_back() {
    let mut index = Index::new();
    let p = pod("p1");
    index.apply_pod(&p.build());
    let uid = p.build().uid().unwrap();
    assert_eq!(
        index.apply_lease(&lease("p1", &uid, 0, 40), at(0)).len(),
        1,
        "first lease"
    );
    assert!(
        index
            .apply_lease(&lease("p1", &uid, 10, 40), at(10))
            .is_empty(),
        "renewal in term"
    );
    assert_eq!(
        index.apply_lease(&lease("p1", &uid, 60, 40), at(60)).len(),
        1,
        "renewal after lapse"
    );
    assert_eq!(
        index
            .apply_lease(&lease("p1", "other", 61, 40), at(61))
            .len(),
        1,
        "new holder"
    );
    assert_eq!(index.delete_lease(NS, "p1", at(62)).len(), 1);
}

#[test]
fn usage_survives_its_pod_being_deleted_and_recreated() {
    let mut index = idx(&[pod("p1")], &[run("a").on("p1")]);
    index.delete_pod(NS, "p1");
    assert_eq!(index.used(NS, "p1", "runs").unwrap(), 1);
    index.apply_pod(&pod("p1").uid("new").build());
    assert_eq!(index.used(NS, "p1", "runs").unwrap(), 1);
    let labels = &index.namespace(NS).unwrap().scopes[RUNTIME].labels;
    assert!(labels.is_empty(), "run a has no labels");
}

#[test]
fn the_label_index_follows_runs_and_pods_between_runtimes() {
    let mut index = idx(
        &[pod("p1"), pod("p2")],
        &[run("a").labels(&[("cohort", "x")]).on("p1")],
    );
    let count = |index: &Index, runtime: &str| {
        index
            .namespace(NS)
            .and_then(|ns| ns.scopes.get(runtime))
            .and_then(|s| s.labels.get("cohort"))
            .and_then(|v| v.get("x"))
            .map(|slots| slots.values().sum::<u32>())
            .unwrap_or(0)
    };
    assert_eq!(count(&index, RUNTIME), 1);
    // The Pod moves to another runtime: its Runs' labels move with it.
    index.apply_pod(&pod("p1").runtime("other").build());
    assert_eq!(count(&index, RUNTIME), 0);
    assert_eq!(count(&index, "other"), 1);
    // Labels change while active.
    let change = index.apply_run(&run("a").labels(&[("cohort", "y")]).on("p1").build());
    assert!(change.targets_changed.is_some());
    assert!(change.released.is_empty());
    assert_eq!(count(&index, "other"), 0);
    index.apply_run(&run("a").succeeded().build());
    let scope = &index.namespace(NS).unwrap().scopes["other"];
    assert!(scope.labels.is_empty());
}

#[test]
fn reset_runs_deletes_runs_missing_from_the_relist() {
    let mut index = idx(&[pod("p1")], &[run("a").on("p1"), run("b")]);
    let changes = index.reset_runs(&[run("c").build()]);
    assert_eq!(changes.iter().map(|c| c.released.len()).sum::<usize>(), 1);
    assert_eq!(index.observed(&run("c").key()), Observed::Pending);
    assert_eq!(index.observed(&run("b").key()), Observed::Absent);
    assert_eq!(index.used(NS, "p1", "runs").unwrap(), 0);
}

#[test]
fn workspaces_count_their_users_and_report_only_what_a_cycle_reads() {
    let mut index = idx(&[pod("p1"), pod("p2")], &[]);
    let w = workspace("ws");
    assert_eq!(
        index.apply_workspace(&w.build()),
        [WorkspaceRef::new(NS, "ws")]
    );
    // A Pending Run naming it is a user; once active, it counts on its Pod.
    index.apply_run(&run("a").workspace("ws").build());
    let entry = index.workspace(NS, "ws").unwrap();
    assert_eq!((entry.pending.len(), entry.active.len()), (1, 0));
    index.apply_run(&run("a").workspace("ws").on("p2").build());
    index.apply_run(&run("b").workspace("ws").on("p2").build());
    let entry = index.workspace(NS, "ws").unwrap();
    assert!(entry.pending.is_empty());
    assert_eq!(entry.active.get("p2"), Some(&2));
    // lastUsedTime is the lifecycle's: no requeue. A binding is what cycles read.
    assert!(
        index
            .apply_workspace(&w.clone().last_used(at(10)).build())
            .is_empty()
    );
    assert_eq!(
        index.apply_workspace(&w.clone().bound("p2").build()),
        [WorkspaceRef::new(NS, "ws")]
    );
    let mut ended = run("a").workspace("ws").on("p2").succeeded().build();
    ended.status.as_mut().unwrap().completion_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(20)));
    index.apply_run(&ended);
    index.delete_run(NS, "uid-b");
    let entry = index.workspace(NS, "ws").unwrap();
    assert!(!entry.in_use());
    // When its last use ended is kept: the TTL counts from it, whichever leader saw it.
    assert_eq!(entry.last_finished, Some(at(20)));
    // A Run may name a workspace before it exists; the entry goes with its last user.
    assert_eq!(
        index.delete_workspace(NS, "ws"),
        [WorkspaceRef::new(NS, "ws")]
    );
    assert!(index.workspace(NS, "ws").is_none());
    index.apply_run(&run("c").workspace("later").build());
    assert!(index.workspace(NS, "later").unwrap().record.is_none());
    index.delete_run(NS, "uid-c");
    assert!(index.workspace(NS, "later").is_none());
}

mod liveness;

#[test]
fn a_workspace_is_held_by_its_bound_pod_else_by_an_active_users_pod() {
    let mut index = idx(&[pod("p1"), pod("p2")], &[]);
    let holder = |index: &Index| {
        index
            .workspace(NS, "ws")
            .and_then(|e| e.holder().map(String::from))
    };
    index.apply_workspace(&workspace("ws").build());
    assert_eq!(holder(&index), None, "unbound and unused");
    index.apply_run(&run("a").workspace("ws").on("p1").build());
    assert_eq!(
        holder(&index).as_deref(),
        Some("p1"),
        "bound by its Run, status not written"
    );
    index.apply_workspace(&workspace("ws").bound("p2").build());
    assert_eq!(
        holder(&index).as_deref(),
        Some("p2"),
        "status.boundPod while Bound wins"
    );
}
