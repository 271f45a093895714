//! Fair sharing among submitters on the real control plane, with two real identities (people
//! impersonated through the admin's credentials, as `kubectl --as` does): the submitter
//! admission policy that `install` applies records who created each Run and keeps it as
//! written; and a flood of 1,000 Runs from one user does not hold another user's 10 Runs
//! behind it on a Runtime of 4 Pods × `runs: 4`: those start in the first slots freed after
//! they arrive. No overcommit at any Run event.

use testkit as support;

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kruntimes::api::{ANNOTATION_SUBMITTED_BY, Resources, Run, RunPhase};
use kruntimes::testing::run;
use support::policy::{await_allowed, body};
use support::pool::{HEARTBEAT, Pool};
use support::world::{OvercommitWatch, SchedulerProcess, TestNs, create_in, eventually, sample};
use support::{roles, tokens};

/// Clients of `users`, each allowed to edit in `ns` (the built-in `edit`, which the user
/// ClusterRoles aggregate into).
async fn people(ns: &TestNs, users: &[&str], dir: &std::path::Path) -> Vec<kube::Client> {
    roles::aggregate_cluster_roles(&ns.client).await;
    let mut clients = Vec::new();
    for user in users {
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{user}-edit")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }))
        .unwrap();
        create_in(ns, binding).await;
        let client = support::client_for(&tokens::user_kubeconfig(dir, user, &ns.name)).await;
        let runs: Api<Run> = Api::namespaced(client.clone(), &ns.name);
        await_allowed(&format!("{user} listing Runs"), async || {
            runs.list(&Default::default()).await
        })
        .await;
        clients.push(client);
    }
    clients
}

fn submitter(run: &Run) -> Option<&str> {
    run.annotations()
        .get(ANNOTATION_SUBMITTED_BY)
        .map(String::as_str)
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_submitter_is_recorded_at_creation_and_cannot_be_forged_or_dropped() {
    let ns = TestNs::new("fair-stamp").await;
    let dir = tempfile::tempdir().unwrap();
    let alice = people(&ns, &["alice"], dir.path()).await.remove(0);
    let runs: Api<Run> = Api::namespaced(alice, &ns.name);
    let mut forged = body(run("forged").build(), &ns);
    forged.metadata.annotations =
        Some([(ANNOTATION_SUBMITTED_BY.to_string(), "bob".into())].into());
    let created = runs.create(&PostParams::default(), &forged).await.unwrap();
    assert_eq!(
        submitter(&created),
        Some("alice"),
        "over what the request set"
    );
    let patched = runs
        .patch(
            "forged",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {ANNOTATION_SUBMITTED_BY: "bob", "note": "x"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        submitter(&patched),
        Some("alice"),
        "an update cannot change it"
    );
    assert_eq!(
        patched.annotations().get("note").map(String::as_str),
        Some("x")
    );
    let dropped = runs
        .patch(
            "forged",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_SUBMITTED_BY: null}}})),
        )
        .await
        .unwrap();
    assert_eq!(submitter(&dropped), Some("alice"), "nor remove it");
}

/// A Run or WorkflowRun that WorkflowRun `owner` controls, naming `submitter`.
fn owned_by<K: serde::de::DeserializeOwned>(
    kind: &str,
    name: &str,
    owner: &kruntimes::api::WorkflowRun,
    submitter: &str,
) -> K {
    let spec = match kind {
        "Run" => json!({"runtime": "python", "source": {"inline": "true"}, "mode": {"task": {}}}),
        _ => json!({"jobs": {"j": {"runs-on": "python", "steps": [{"name": "s", "run": "true"}]}}}),
    };
    serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": kind,
        "metadata": {
            "name": name,
            "annotations": {ANNOTATION_SUBMITTED_BY: submitter},
            "ownerReferences": [{
                "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun",
                "name": owner.name_any(), "uid": owner.uid().unwrap(), "controller": true,
            }],
        },
        "spec": spec,
    }))
    .unwrap()
}

/// A WorkflowRun records who triggered it like a Run, and its Runs and nested WorkflowRuns are
/// that person's (fair sharing's group), not the scheduler's that creates them: only the
/// scheduler's own account, creating what a WorkflowRun controls, may name another submitter.
/// A person naming one is overwritten, and so is an account of the same name in another
/// namespace (anyone with a namespace can make one).
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_runs_children_are_its_submitters_and_only_the_scheduler_may_say_so() {
    use kruntimes::api::WorkflowRun;
    let ns = TestNs::new("fair-delegate").await;
    let dir = tempfile::tempdir().unwrap();
    let alice = people(&ns, &["alice"], dir.path()).await.remove(0);
    let workflow_run: WorkflowRun = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun",
        "metadata": {"name": "wf", "annotations": {ANNOTATION_SUBMITTED_BY: "bob"}},
        "spec": {"jobs": {"j": {"runs-on": "python", "steps": [{"name": "s", "run": "true"}]}}},
    }))
    .unwrap();
    let post = PostParams::default();
    let wf = Api::<WorkflowRun>::namespaced(alice.clone(), &ns.name)
        .create(&post, &workflow_run)
        .await
        .unwrap();
    let stamped = |annotations: &std::collections::BTreeMap<String, String>| {
        annotations.get(ANNOTATION_SUBMITTED_BY).cloned()
    };
    assert_eq!(
        stamped(wf.annotations()).as_deref(),
        Some("alice"),
        "a WorkflowRun's submitter, over what the request set"
    );

    // The scheduler's own account keeps the WorkflowRun's submitter on what it controls.
    let scheduler = support::client_for(&tokens::scheduler_kubeconfig(dir.path()).await).await;
    let as_scheduler = Api::<Run>::namespaced(scheduler.clone(), &ns.name);
    let child = as_scheduler
        .create(&post, &owned_by("Run", "child", &wf, "alice"))
        .await
        .unwrap();
    assert_eq!(stamped(child.annotations()).as_deref(), Some("alice"));
    let nested = Api::<WorkflowRun>::namespaced(scheduler.clone(), &ns.name)
        .create(&post, &owned_by("WorkflowRun", "nested", &wf, "alice"))
        .await
        .unwrap();
    assert_eq!(stamped(nested.annotations()).as_deref(), Some("alice"));
    // ...and only there: a Run of its own is its own.
    let mut own = body(run("own").build(), &ns);
    own.metadata.annotations = Some([(ANNOTATION_SUBMITTED_BY.to_string(), "alice".into())].into());
    let own = as_scheduler.create(&post, &own).await.unwrap();
    assert_eq!(
        stamped(own.annotations()).as_deref(),
        Some("system:serviceaccount:kubectl-kruntimes:kubectl-kruntimes-scheduler")
    );

    // A person cannot delegate.
    let by_alice = Api::<Run>::namespaced(alice, &ns.name)
        .create(&post, &owned_by("Run", "forged", &wf, "bob"))
        .await
        .unwrap();
    assert_eq!(stamped(by_alice.annotations()).as_deref(), Some("alice"));

    // Nor can an account of the scheduler's name in another namespace.
    let impostor = "kubectl-kruntimes-scheduler";
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": impostor}})).unwrap();
    create_in(&ns, account).await;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "impostor-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": impostor, "namespace": ns.name}]
    }))
    .unwrap();
    create_in(&ns, binding).await;
    let token = tokens::unbound_token(&ns.client, &ns.name, impostor).await;
    let impostor_client = support::client_for(&tokens::token_kubeconfig(
        dir.path(),
        impostor,
        &token,
        &ns.name,
    ))
    .await;
    let impostor_runs = Api::<Run>::namespaced(impostor_client, &ns.name);
    await_allowed("the impostor listing Runs", async || {
        impostor_runs.list(&Default::default()).await
    })
    .await;
    let by_impostor = impostor_runs
        .create(&post, &owned_by("Run", "impostor", &wf, "alice"))
        .await
        .unwrap();
    assert_eq!(
        stamped(by_impostor.annotations()),
        Some(format!("system:serviceaccount:{}:{impostor}", ns.name))
    );
}

/// How long each Run of the flood runs: long enough that a backlog builds while it is created.
const FLOOD_SECONDS: &str = "2";

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_one_user_does_not_hold_another_users_runs_behind_it() {
    let ns = TestNs::new("fair-flood").await;
    let dir = tempfile::tempdir().unwrap();
    let clients = people(&ns, &["alice", "bob"], dir.path()).await;
    let (alice, bob) = (
        Api::<Run>::namespaced(clients[0].clone(), &ns.name),
        Api::<Run>::namespaced(clients[1].clone(), &ns.name),
    );
    let scheduler = SchedulerProcess::start(&ns.name, 2, None, "fair-flood").await;
    let watch =
        OvercommitWatch::start_for_runtime(&ns, "pool", Resources::from_iter([("runs", 4)])).await;
    let pool = Pool::start(&ns, "pool", 4, &[("runs", 4)], &HEARTBEAT).await;
    // The flood's first Runs hold their slots until the gauges have been read, so that every
    // group still waits when they are; after, the flood flows as if there were no gate.
    let flood = format!("{}; sleep {FLOOD_SECONDS}", pool.gates.hold("flood"));

    let create = |api: Api<Run>, name: String, script: String| {
        let ns = ns.clone();
        async move {
            let object = body(run(&name).runtime("pool").inline(&script).build(), &ns);
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        }
    };
    let alices = (0..1000).map(|i| create(alice.clone(), format!("a-{i:04}"), flood.clone()));
    futures::stream::iter(alices)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    // The scheduler's gauges (refreshed every second), each group's: its Pending Runs and its
    // dominant share of the Runtime's 16 slots.
    let gauges = async |want: &[(&str, f64, f64)]| {
        let series = |name: &str, group: &str| {
            format!(
                "{name}{{group=\"{group}\",namespace=\"{}\",runtime=\"pool\"}}",
                ns.name
            )
        };
        let what = format!("the fair-share gauges to read {want:?} (group, Pending, share)");
        eventually(Duration::from_secs(60), &what, async || {
            let metrics = scheduler.metrics().await;
            let read: Vec<(&str, Option<f64>, Option<f64>)> = want
                .iter()
                .map(|(group, _, _)| {
                    let pending = series("kruntimes_scheduler_fair_share_pending_runs", group);
                    let share = series("kruntimes_scheduler_fair_share", group);
                    (*group, sample(&metrics, &pending), sample(&metrics, &share))
                })
                .collect();
            let expected: Vec<(&str, Option<f64>, Option<f64>)> = want
                .iter()
                .map(|(group, pending, share)| (*group, Some(*pending), Some(*share)))
                .collect();
            match read == expected {
                true => Ok(()),
                false => Err(format!("{read:?}")),
            }
        })
        .await;
    };
    // The flood fills all 16 slots and holds them: the rest of it waits.
    gauges(&[("alice", 984.0, 1.0)]).await;
    futures::stream::iter((0..10).map(|i| {
        create(
            bob.clone(),
            format!("b-{i:02}"),
            format!("sleep {FLOOD_SECONDS}"),
        )
    }))
    .buffer_unordered(10)
    .collect::<Vec<()>>()
    .await;
    // Both groups wait, and each has its gauges.
    gauges(&[("alice", 984.0, 1.0), ("bob", 10.0, 0.0)]).await;
    pool.open("flood");
    ns.wait_runs(
        Duration::from_secs(120),
        "bob's 10 Runs to succeed",
        |runs| {
            let done = runs
                .iter()
                .filter(|r| r.name_any().starts_with("b-") && r.phase() == RunPhase::Succeeded)
                .count();
            (done == 10).then_some(())
        },
    )
    .await;
    let status = support::kruntimes()
        .args(["status", "-n", &ns.name])
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&status.stdout));
    let events = watch.finish_recorded().await;

    // In the order the API server recorded them: when each Run was first seen assigned to a
    // Pod, and when bob's first Run was created.
    let mut assigned: HashMap<String, usize> = HashMap::new();
    let mut bob_created = None;
    for (i, e) in events.iter().enumerate() {
        let name = e.run.name_any();
        if name.starts_with("b-") && bob_created.is_none() {
            bob_created = Some(i);
        }
        let on_pod = e
            .run
            .status
            .as_ref()
            .is_some_and(|s| s.assigned_pod.is_some());
        if on_pod {
            assigned.entry(name).or_insert(i);
        }
    }
    let bob_created = bob_created.expect("bob's Runs were seen");
    assert_eq!(
        submitter(&events[bob_created].run),
        Some("bob"),
        "bob's Runs carry his name"
    );
    let bob_last = (0..10)
        .map(|i| assigned[&format!("b-{i:02}")])
        .max()
        .unwrap();
    let alice_between = assigned
        .iter()
        .filter(|(name, at)| name.starts_with("a-") && (bob_created..bob_last).contains(*at))
        .count();
    let alice_waiting = 1000
        - assigned
            .iter()
            .filter(|(name, at)| name.starts_with("a-") && **at < bob_created)
            .count();
    eprintln!(
        "alice: {alice_waiting} Runs not yet placed when bob's arrived; {alice_between} of them placed before bob's last"
    );
    assert!(
        alice_waiting > 500,
        "the flood had a backlog when bob's Runs arrived ({alice_waiting} waiting)"
    );
    // Binds already reserved when bob's Runs arrived may land first: at most one Runtime's
    // worth of slots.
    assert!(
        alice_between <= 16,
        "{alice_between} of alice's Runs were placed between the creation of bob's first Run and the placement of his last"
    );
}
