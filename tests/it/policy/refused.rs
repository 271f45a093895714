//! What a Pod's token is refused: other Pods' Runs, transitions runtimed never makes, Leases
//! and Events that are not its own, other namespaces, spec and labels, and every write with a
//! token not bound to a Pod. Each refusal is the policy's own message and changes nothing.

use super::*;

#[testkit::test]
async fn a_pod_token_cannot_write_other_pods_runs_nor_make_transitions_runtimed_never_makes() {
    let f = Fixture::new("policy-runs").await;
    let ns = &f.ns;
    let (a, b) = (f.identity(&f.pod_a), f.identity(&f.pod_b));

    // The status of a Run assigned to Pod B: neither claimed nor ended.
    let of_b = f.create(f.on("of-b", &f.pod_b)).await;
    let says = format!(
        "runtimed of Pod {ns}/pod-a may update only Runs assigned to its Pod: Run {ns}/of-b has status.assignedPod/assignedPodUID pod-b (UID {}), not pod-a (UID {})",
        b.pod_uid, a.pod_uid
    );
    assert_refused(f.write_status(&f.as_a, &of_b, claim).await, &says);
    assert_refused(
        f.write_status(
            &f.as_a,
            &of_b,
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0)),
        )
        .await,
        &says,
    );
    f.assert_run_unchanged(&of_b).await;

    // A Pending Run: not assigned to anyone, so not Pod A's to start.
    let pending = f.create(f.run("pending")).await;
    let set_running_on_a = |s: &mut RunStatus| {
        s.assigned_pod = Some(a.pod_name.clone());
        s.assigned_pod_uid = Some(a.pod_uid.clone());
        claim(s);
    };
    assert_refused(
        f.write_status(&f.as_a, &pending, set_running_on_a).await,
        &format!(
            "may update only Runs assigned to its Pod: Run {ns}/pending has status.assignedPod/assignedPodUID <none> (UID <none>)"
        ),
    );
    f.assert_run_unchanged(&pending).await;
    // Even a Pending Run that still names Pod A (a placement taken back) is not A's to start.
    let taken_back = f.create(f.on("taken-back", &f.pod_a).pending()).await;
    assert_refused(
        f.write_status(&f.as_a, &taken_back, claim).await,
        &format!("may not change Run {ns}/taken-back from phase Pending to Running this way"),
    );
    f.assert_run_unchanged(&taken_back).await;

    // Pod A's own Run cannot be moved to Pod B, nor given up.
    let mine = f.create(f.on("mine", &f.pod_a)).await;
    let to_b = |s: &mut RunStatus| {
        s.assigned_pod = Some(b.pod_name.clone());
        s.assigned_pod_uid = Some(b.pod_uid.clone());
    };
    assert_refused(
        f.write_status(&f.as_a, &mine, to_b).await,
        &format!(
            "may not assign Run {ns}/mine to another Pod: the update sets status.assignedPod/assignedPodUID to pod-b (UID {})",
            b.pod_uid
        ),
    );
    let unassign = |s: &mut RunStatus| {
        s.phase = Some(RunPhase::Pending);
        s.assigned_pod = None;
        s.assigned_pod_uid = None;
    };
    assert_refused(
        f.write_status(&f.as_a, &mine, unassign).await,
        "may not assign Run",
    );
    f.assert_run_unchanged(&mine).await;

    // A claim changes nothing but phase, startTime and Admitted (here it also sets exitCode).
    assert_refused(
        f.write_status(&f.as_a, &mine, |s| {
            claim(s);
            s.exit_code = Some(0);
        })
        .await,
        &format!("may not change Run {ns}/mine from phase Scheduled to Running this way"),
    );
    f.assert_run_unchanged(&mine).await;

    // Nor does a claim taken in by the end: it may not skip an attempt.
    assert_refused(
        f.write_status(&f.as_a, &mine, |s| {
            claim(s);
            s.attempt = Some(2);
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0))(s)
        })
        .await,
        &format!("may not change Run {ns}/mine from phase Scheduled to Succeeded this way"),
    );
    f.assert_run_unchanged(&mine).await;
    // The claim's fields come with an end only from Scheduled: a Running Run's end keeps its
    // startTime.
    let started = f.create(f.on("started", &f.pod_a).running()).await;
    assert_refused(
        f.write_status(&f.as_a, &started, |s| {
            s.start_time = Some(now());
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0))(s)
        })
        .await,
        &format!("may not change Run {ns}/started from phase Running to Succeeded this way"),
    );
    f.assert_run_unchanged(&started).await;

    // Claimed (allowed), a Running Run never goes back to Scheduled or Pending.
    let running = f.write_status(&f.as_a, &mine, claim).await.unwrap();
    for (phase, name) in [
        (RunPhase::Pending, "Pending"),
        (RunPhase::Scheduled, "Scheduled"),
    ] {
        assert_refused(
            f.write_status(&f.as_a, &running, |s| s.phase = Some(phase))
                .await,
            &format!("may not change Run {ns}/mine from phase Running to {name} this way"),
        );
    }
    // Nor ends without the terminal fields (here: no completionTime, no Completed condition).
    assert_refused(
        f.write_status(&f.as_a, &running, |s| {
            s.phase = Some(RunPhase::Succeeded);
            s.reason = Some(reasons::SUCCEEDED.into());
        })
        .await,
        "from phase Running to Succeeded this way",
    );
    f.assert_run_unchanged(&running).await;

    // Once ended, nobody's outcome is overwritten (the scheduler's RuntimePodLost neither).
    let ended = f
        .write_status(
            &f.as_a,
            &running,
            end(Outcome::Failed, reasons::EXIT_CODE, Some(3)),
        )
        .await
        .unwrap();
    assert_refused(
        f.write_status(&f.as_a, &ended, |s| {
            s.phase = Some(RunPhase::Succeeded);
            s.reason = Some(reasons::SUCCEEDED.into());
            s.exit_code = Some(0);
        })
        .await,
        "from phase Failed to Succeeded this way",
    );
    f.assert_run_unchanged(&ended).await;
}

#[testkit::test]
async fn a_pod_token_cannot_create_renew_or_delete_another_pods_lease_or_hold_its_own_for_another()
{
    let f = Fixture::new("policy-leases").await;
    let ns = &f.ns;
    let (a, b) = (f.identity(&f.pod_a), f.identity(&f.pod_b));
    let not_own = format!(
        "runtimed of Pod {ns}/pod-a may write only its own heartbeat Lease {ns}/pod-a, not Lease {ns}/pod-b"
    );

    // Create Pod B's Lease (as if B's heartbeat were held): refused, nothing created.
    assert_refused(f.apply_lease(&f.as_a, &b, &b.pod_uid).await, &not_own);
    assert_refused(f.apply_lease(&f.as_a, &b, &a.pod_uid).await, &not_own);
    assert!(f.leases(&f.admin).get_opt("pod-b").await.unwrap().is_none());

    // Pod B's real heartbeat: A can neither renew nor delete it.
    let b_lease = f.apply_lease(&f.admin, &b, &b.pod_uid).await.unwrap();
    assert_refused(f.apply_lease(&f.as_a, &b, &b.pod_uid).await, &not_own);
    assert_refused(
        f.leases(&f.as_a)
            .delete("pod-b", &DeleteParams::default())
            .await,
        &not_own,
    );
    f.assert_lease_unchanged(&b_lease).await;

    // Its own Lease must be held by its own UID: not created for another holder …
    let wrong_holder = format!(
        "runtimed of Pod {ns}/pod-a must hold its heartbeat Lease with its Pod UID {}: spec.holderIdentity is {}",
        a.pod_uid, b.pod_uid
    );
    assert_refused(f.apply_lease(&f.as_a, &a, &b.pod_uid).await, &wrong_holder);
    assert!(f.leases(&f.admin).get_opt("pod-a").await.unwrap().is_none());
    // … nor renewed for another holder once it exists.
    let a_lease = f.apply_lease(&f.as_a, &a, &a.pod_uid).await.unwrap();
    assert_refused(f.apply_lease(&f.as_a, &a, &b.pod_uid).await, &wrong_holder);
    f.assert_lease_unchanged(&a_lease).await;
}

#[testkit::test]
async fn a_pod_token_cannot_change_a_runs_spec_or_labels_even_with_edit_rights() {
    let f = Fixture::new("policy-spec").await;
    let ns = &f.ns;
    let mine = f.create(f.on("mine", &f.pod_a).running()).await;
    // A spec field the API leaves mutable (changing an execution input, e.g. spec.runtime, is
    // refused by the CRD's own CEL rules before the policy is asked).
    let relabel =
        json!({"metadata": {"labels": {"team": "b"}}, "spec": {"ttlSecondsAfterFinished": 60}});
    let runs = f.runs(&f.as_a);

    // With the shipped RBAC the authorizer refuses first: runtimed has no write on runs.
    assert_forbidden_by_rbac(
        runs.patch("mine", &PatchParams::default(), &Patch::Merge(&relabel))
            .await,
        "cannot patch resource \"runs\"",
    );

    // Through the status subresource the API server keeps only status: spec and labels sent
    // along are dropped, so nothing outside status can change (the write itself is a no-op).
    let mut sneaky = mine.clone();
    sneaky.spec.runtime = "other".into();
    sneaky.labels_mut().insert("team".into(), "b".into());
    runs.replace_status("mine", &write_params(), &sneaky)
        .await
        .unwrap();
    assert_run_content(&f.get("mine").await, &mine);
    let mine = f.get("mine").await;

    // Grant the service account edit rights on Runs by mistake: the policy still refuses.
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "runtimed-edit-by-mistake"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubectl-kruntimes-submit"},
        "subjects": [{"kind": "ServiceAccount", "name": RUNTIMED, "namespace": ns.name}]
    }))
    .unwrap();
    create_in(ns, binding).await;
    let refused = eventually(WAIT, "the RoleBinding to take effect", async || {
        let relabeled = runs
            .patch("mine", &PatchParams::default(), &Patch::Merge(&relabel))
            .await;
        match relabeled {
            Err(kube::Error::Api(s)) if s.message.contains("cannot patch resource") => {
                Err(s.message)
            }
            other => Ok(other),
        }
    })
    .await;
    let only = format!(
        "runtimed of Pod {ns}/pod-a may write only the status of Runs assigned to its Pod, its own heartbeat Lease and the Events it reports on Runs; "
    );
    assert_refused(refused, &format!("{only}UPDATE of runs mine is refused"));
    let mut respec = mine.clone();
    respec.spec.ttl_seconds_after_finished = Some(60);
    assert_refused(
        runs.replace("mine", &PostParams::default(), &respec).await,
        &format!("{only}UPDATE of runs mine is refused"),
    );
    assert_refused(
        runs.delete("mine", &DeleteParams::default()).await,
        &format!("{only}DELETE of runs mine is refused"),
    );
    let new_run = body(run("new").build(), ns);
    assert_refused(
        runs.create(&PostParams::default(), &new_run).await,
        &format!("{only}CREATE of runs new is refused"),
    );
    f.assert_run_unchanged(&mine).await;
    assert!(f.runs(&f.admin).get_opt("new").await.unwrap().is_none());
}

#[testkit::test]
async fn a_pod_token_cannot_write_in_another_namespace_even_with_rights_there() {
    let f = Fixture::new("policy-home").await;
    let a = f.identity(&f.pod_a);
    let elsewhere = TestNs::new("policy-elsewhere").await;
    // runtimed's rights in the other namespace, bound to this namespace's service account.
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "visitor"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": kruntimes::runtime::identity::CLUSTER_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": RUNTIMED, "namespace": f.ns.name}]
    }))
    .unwrap();
    create_in(&elsewhere, binding).await;
    let there = Identity {
        namespace: elsewhere.name.clone(),
        ..a.clone()
    };
    let leases: Api<Lease> = Api::namespaced(f.as_a.clone(), &elsewhere.name);
    let refused = eventually(WAIT, "the RoleBinding to take effect", async || {
        match f.apply_lease_in(&leases, &there, &a.pod_uid).await {
            Err(kube::Error::Api(s)) if s.message.contains("cannot patch resource") => {
                Err(s.message)
            }
            other => Ok(other),
        }
    })
    .await;
    assert_refused(
        refused,
        &format!(
            "runtimed of Pod {}/pod-a may write only in namespace {}, not in namespace {elsewhere}",
            f.ns, f.ns
        ),
    );
    assert!(
        elsewhere
            .api::<Lease>()
            .get_opt("pod-a")
            .await
            .unwrap()
            .is_none()
    );
}

#[testkit::test]
async fn a_token_of_the_runtimed_service_account_not_bound_to_a_pod_can_write_nothing() {
    let f = Fixture::new("policy-unbound").await;
    let a = f.identity(&f.pod_a);
    let not_bound = "a kubectl-kruntimes-runtimed service account may write only with a token bound to its Runtime Pod";

    let scheduled = f.create(f.on("scheduled", &f.pod_a)).await;
    let running = f.create(f.on("running", &f.pod_a).running()).await;
    assert_refused(
        f.write_status(&f.unbound, &scheduled, claim).await,
        not_bound,
    );
    assert_refused(
        f.write_status(
            &f.unbound,
            &running,
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0)),
        )
        .await,
        not_bound,
    );
    assert_refused(
        f.write_status(&f.unbound, &running, |_| {}).await,
        not_bound,
    );
    f.assert_run_unchanged(&scheduled).await;
    f.assert_run_unchanged(&running).await;

    // Not even a heartbeat for Pod A with A's UID.
    assert_refused(f.apply_lease(&f.unbound, &a, &a.pod_uid).await, not_bound);
    assert!(f.leases(&f.admin).get_opt("pod-a").await.unwrap().is_none());
    let lease = f.apply_lease(&f.admin, &a, &a.pod_uid).await.unwrap();
    assert_refused(f.apply_lease(&f.unbound, &a, &a.pod_uid).await, not_bound);
    assert_refused(
        f.leases(&f.unbound)
            .delete("pod-a", &DeleteParams::default())
            .await,
        not_bound,
    );
    f.assert_lease_unchanged(&lease).await;
}

/// The Go project kruntimes names its runtimed service account `kruntimes-runtimed`
/// (github.com/kruntimes/kruntimes at cad3923, internal/controller/runtime_controller.go). The
/// policy matches only ours: that account, with the same Role and a token bound to no Pod,
/// writes the heartbeat that the same kind of token of ours may not.
#[testkit::test]
async fn the_go_projects_runtimed_service_account_is_not_matched() {
    let f = Fixture::new("policy-go-runtimed").await;
    let a = f.identity(&f.pod_a);
    let go_runtimed = "kruntimes-runtimed";
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": go_runtimed}})).unwrap();
    create_in(&f.ns, account).await;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "go-runtimed"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": kruntimes::runtime::identity::CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": go_runtimed, "namespace": f.ns.name}]
    }))
    .unwrap();
    create_in(&f.ns, binding).await;
    let token = tokens::unbound_token(&f.admin, &f.ns.name, go_runtimed).await;
    let kubeconfig = tokens::token_kubeconfig(f.dir.path(), "go-runtimed", &token, &f.ns.name);
    let theirs = support::client_for(&kubeconfig).await;

    assert_refused(
        f.apply_lease(&f.unbound, &a, &a.pod_uid).await,
        "a kubectl-kruntimes-runtimed service account may write only with a token bound",
    );
    let lease = eventually(WAIT, "the RoleBinding to take effect", async || {
        f.apply_lease(&theirs, &a, &a.pod_uid).await
    })
    .await;
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some(a.pod_uid.as_str())
    );
}

/// The scheduler reads the installed policy as the shipped one: what the API server stores
/// (with its defaults filled in) has the shipped rules, so the Runtime controller creates
/// Runtime Pods, whether `install` applied it or `kubectl apply -k deploy/crds/` (kustomize
/// re-folds its multi-line expressions); an edit that drops a rule is told apart (unit tests of
/// `judge`).
#[testkit::test]
async fn the_installed_policy_reads_as_the_shipped_one() {
    use kruntimes::policy::runtimed::{Presence, presence};
    let f = Fixture::new("policy-presence").await;
    assert_eq!(presence(&f.admin).await, Presence::Installed);
    // What `kubectl apply -k deploy/crds/` would store (a server-side dry run: the policy the
    // other tests of this suite rely on is left as it is).
    let out = support::ok(
        &support::kubectl()
            .args(["apply", "--dry-run=server", "-o", "json", "-k"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crds"))
            .output()
            .unwrap(),
        "kubectl apply --dry-run=server -k deploy/crds/",
    );
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let find = |kind: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == "kubectl-kruntimes-runtimed")
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in the dry run"))
    };
    let policy = serde_json::from_value(find("ValidatingAdmissionPolicy")).unwrap();
    let binding = serde_json::from_value(find("ValidatingAdmissionPolicyBinding")).unwrap();
    assert_eq!(
        kruntimes::policy::runtimed::judge(Some(&policy), Some(&binding)),
        Presence::Installed
    );
}
