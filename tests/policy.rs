//! What a Runtime Pod may do, proven on the real control plane with real tokens: the admission
//! policy `kruntimes-runtimed` (deploy/runtimed-policy.yaml, applied by `install`) beside the
//! shipped runtimed RBAC, and the user ClusterRoles aggregated into view/edit/admin.
//!
//! Runtime Pods here are Pod objects running as `kruntimes-runtimed`; their tokens come from the
//! TokenRequest API with the Pod as bound object, exactly what the kubelet mounts, so the API
//! server itself puts the Pod claims in the user info. Every refusal is checked for the
//! policy's own message and for nothing having changed (the object is read again).

mod support;

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;

use kruntimes::api::status::{self, CONDITION_ADMITTED, Outcome, reasons};
use kruntimes::api::{FIELD_MANAGER, Run, RunPhase, RunStatus, Runtime};
use kruntimes::runtimed::Identity;
use kruntimes::runtimed::heartbeat::{self, desired_lease};
use support::world::{self, SchedulerProcess, wait_runs};
use support::{roles, tokens};

const RUNTIMED: &str = "kruntimes-runtimed";
/// How the API server words a refusal by this policy.
const POLICY_DENIED: &str = "ValidatingAdmissionPolicy 'kruntimes-runtimed' with binding 'kruntimes-runtimed' denied request: ";
const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Fixture: a namespace with the shipped runtimed RBAC, two Runtime Pods A and B running as
// kruntimes-runtimed, a client with A's Pod-bound token and one with an unbound token of the
// same service account.

struct Fixture {
    admin: Client,
    ns: String,
    pod_a: Pod,
    pod_b: Pod,
    /// A token bound to Pod A, as A's kubelet would mount it.
    as_a: Client,
    /// A token of the same service account bound to nothing.
    unbound: Client,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn new(prefix: &str) -> Fixture {
        support::install_crds();
        let admin = support::client().await;
        let ns = support::namespace(&admin, prefix).await;
        apply("deploy/runtimed-rbac.yaml", Some(&ns));
        let pod_a = runtime_pod(&admin, &ns, "pod-a").await;
        let pod_b = runtime_pod(&admin, &ns, "pod-b").await;
        let dir = tempfile::tempdir().unwrap();
        let token_a = tokens::pod_bound_token(&admin, &ns, RUNTIMED, &pod_a).await;
        let token_unbound = tokens::unbound_token(&admin, &ns, RUNTIMED).await;
        let as_a =
            support::client_for(&tokens::token_kubeconfig(dir.path(), "a", &token_a, &ns)).await;
        let unbound = support::client_for(&tokens::token_kubeconfig(
            dir.path(),
            "unbound",
            &token_unbound,
            &ns,
        ))
        .await;
        await_enforced(&ns, &[&as_a, &unbound]).await;
        Fixture {
            admin,
            ns,
            pod_a,
            pod_b,
            as_a,
            unbound,
            _dir: dir,
        }
    }

    fn runs(&self, client: &Client) -> Api<Run> {
        Api::namespaced(client.clone(), &self.ns)
    }

    fn leases(&self, client: &Client) -> Api<Lease> {
        Api::namespaced(client.clone(), &self.ns)
    }

    fn identity(&self, pod: &Pod) -> Identity {
        Identity {
            pod_name: pod.name_any(),
            namespace: self.ns.clone(),
            pod_uid: pod.uid().unwrap(),
        }
    }

    /// Creates a Run and, as the scheduler would, gives it `phase` on `pod` (no status when
    /// `phase` is None). Returns it as stored.
    async fn run(&self, name: &str, phase: Option<&str>, pod: Option<&Pod>) -> Run {
        world::run(name, "python")
            .labels(&[("team", "a")])
            .create(&self.admin, &self.ns)
            .await;
        if let Some(phase) = phase {
            let mut status = json!({"phase": phase});
            if let Some(pod) = pod {
                status["podName"] = json!(pod.name_any());
                status["podUID"] = json!(pod.uid().unwrap());
            }
            self.runs(&self.admin)
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
                .unwrap_or_else(|e| panic!("bind Run {name}: {e}"));
        }
        self.get(name).await
    }

    async fn get(&self, name: &str) -> Run {
        self.runs(&self.admin).get(name).await.unwrap()
    }

    /// Asserts that the Run was not written since `before` (same resourceVersion).
    async fn assert_run_unchanged(&self, before: &Run) {
        let now = self.get(&before.name_any()).await;
        assert_eq!(
            now.resource_version(),
            before.resource_version(),
            "Run {} was written",
            before.name_any()
        );
        assert_run_content(&now, before);
    }

    /// The status write runtimed makes: a replace carrying the observed resourceVersion.
    async fn write_status(
        &self,
        client: &Client,
        run: &Run,
        change: impl FnOnce(&mut RunStatus),
    ) -> kube::Result<Run> {
        let mut updated = run.clone();
        change(updated.status.get_or_insert_with(Default::default));
        self.runs(client)
            .replace_status(&run.name_any(), &write_params(), &updated)
            .await
    }

    /// The heartbeat write runtimed makes for `me`, held by `holder`.
    async fn apply_lease(
        &self,
        client: &Client,
        me: &Identity,
        holder: &str,
    ) -> kube::Result<Lease> {
        self.apply_lease_in(&self.leases(client), me, holder).await
    }

    async fn apply_lease_in(
        &self,
        leases: &Api<Lease>,
        me: &Identity,
        holder: &str,
    ) -> kube::Result<Lease> {
        let now = MicroTime(jiff::Timestamp::now());
        let config = heartbeat::Config {
            interval: Duration::from_secs(10),
            duration: Duration::from_secs(40),
        };
        let mut lease = desired_lease(me, &config, &now, &now);
        lease.spec.as_mut().unwrap().holder_identity = Some(holder.to_string());
        leases
            .patch(
                &me.pod_name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&lease),
            )
            .await
    }

    async fn assert_lease_unchanged(&self, before: &Lease) {
        let now = self
            .leases(&self.admin)
            .get(&before.name_any())
            .await
            .unwrap();
        assert_eq!(now.resource_version(), before.resource_version());
        assert_eq!(now.spec, before.spec);
    }
}

/// A Runtime Pod object running as kruntimes-runtimed (there is no kubelet: it never runs).
async fn runtime_pod(client: &Client, ns: &str, name: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"kruntimes.io/runtime": "python", "kruntimes.io/runtime-pod": name},
            "annotations": {"kruntimes.io/capacity.runs": "4"},
        },
        "spec": {
            "serviceAccountName": RUNTIMED,
            "containers": [{"name": "runtimed", "image": "kruntimes.invalid/runtimed"}]
        }
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create Pod {ns}/{name}: {e}"))
}

/// Asserts that spec, labels and status of `now` are those of `before`.
fn assert_run_content(now: &Run, before: &Run) {
    let content = |r: &Run| serde_json::to_value((&r.spec, r.labels(), &r.status)).unwrap();
    assert_eq!(
        content(now),
        content(before),
        "Run {} changed",
        before.name_any()
    );
}

fn write_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// runtimed's claim: Running, startTime, Admitted=True.
fn claim(status: &mut RunStatus) {
    let now = now();
    status.phase = Some(RunPhase::Running);
    status.start_time = Some(now.clone());
    status::set_condition(
        &mut status.conditions,
        CONDITION_ADMITTED,
        true,
        reasons::ADMITTED,
        "runtimed reserved runs=1",
        &now,
    );
}

/// runtimed's terminal write, through the one terminal helper.
fn end(outcome: Outcome, reason: &str, exit_code: Option<i32>) -> impl FnOnce(&mut RunStatus) {
    move |status| {
        assert!(status::set_terminal(
            status,
            outcome,
            reason,
            "the test ended it",
            exit_code,
            &now()
        ));
    }
}

/// Asserts that `result` is this policy's refusal (403) and that its message says `says`.
fn assert_refused<T: Debug>(result: kube::Result<T>, says: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert!(
                s.message.contains(POLICY_DENIED),
                "refused, but not by the policy: {}",
                s.message
            );
            assert!(
                s.message.contains(says),
                "the policy's message does not say {says:?}: {}",
                s.message
            );
            assert_eq!(s.code, 403, "{}", s.message);
        }
        other => panic!("expected the policy to refuse (it should say {says:?}), got {other:?}"),
    }
}

/// Asserts that RBAC (not the policy) refuses `result` with "cannot VERB resource ...".
fn assert_forbidden_by_rbac<T: Debug>(result: kube::Result<T>, says: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{}", s.message);
            assert!(
                s.message.contains(says),
                "expected {says:?} in: {}",
                s.message
            );
        }
        other => panic!("expected RBAC to refuse ({says:?}), got {other:?}"),
    }
}

/// `kubectl apply -f` of a manifest of this repository, in `ns` when given.
fn apply(manifest: &str, ns: Option<&str>) {
    let path = format!("{}/{manifest}", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = support::kubectl();
    cmd.args(["apply", "-f", &path]);
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "kubectl apply {manifest}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until the policy is enforced for each of `clients` (tokens of kruntimes-runtimed in
/// `ns`): the policy and its binding become active a moment after they are created, RBAC and
/// new tokens a moment after theirs. Probes with a server-side dry run, which persists nothing.
async fn await_enforced(ns: &str, clients: &[&Client]) {
    let deadline = Instant::now() + WAIT;
    for client in clients {
        let probe: Lease =
            serde_json::from_value(json!({"metadata": {"name": "policy-probe"}})).unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let leases: Api<Lease> = Api::namespaced((*client).clone(), ns);
        loop {
            let last = match leases.create(&dry_run, &probe).await {
                Err(kube::Error::Api(s)) if s.message.contains(POLICY_DENIED) => break,
                other => format!("{other:?}"),
            };
            assert!(
                Instant::now() < deadline,
                "the policy kruntimes-runtimed is not enforced after {WAIT:?}: {last}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Waits until `probe` stops failing with 401/403 (RBAC and tokens are cached briefly).
async fn await_allowed<T: Debug, F: Future<Output = kube::Result<T>>>(
    what: &str,
    mut probe: impl FnMut() -> F,
) {
    let deadline = Instant::now() + WAIT;
    loop {
        match probe().await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if (s.code == 401 || s.code == 403) => {
                assert!(
                    Instant::now() < deadline,
                    "{what} is still refused after {WAIT:?}: {}",
                    s.message
                );
            }
            Err(e) => panic!("{what}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// runtimed's own writes are allowed.

#[tokio::test]
async fn every_write_runtimed_makes_is_allowed_with_its_pod_token() {
    let f = Fixture::new("policy-allowed").await;
    let a = f.identity(&f.pod_a);

    // Claim, then end: Scheduled -> Running -> Succeeded.
    let run = f.run("ok", Some("Scheduled"), Some(&f.pod_a)).await;
    let claimed = f.write_status(&f.as_a, &run, claim).await.unwrap();
    assert_eq!(claimed.phase(), RunPhase::Running);
    // A retry whose first attempt landed: the same claim again, and a write that changes nothing.
    let again = f.write_status(&f.as_a, &claimed, claim).await.unwrap();
    let same = f.write_status(&f.as_a, &again, |_| {}).await.unwrap();
    let done = f
        .write_status(
            &f.as_a,
            &same,
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0)),
        )
        .await
        .unwrap();
    assert_eq!(done.phase(), RunPhase::Succeeded);

    // A Scheduled Run that cannot start ends without running (invalid task or request).
    let run = f.run("no-task", Some("Scheduled"), Some(&f.pod_a)).await;
    let failed = f
        .write_status(
            &f.as_a,
            &run,
            end(Outcome::Failed, reasons::START_FAILED, None),
        )
        .await
        .unwrap();
    assert_eq!(failed.phase(), RunPhase::Failed);

    // A Run left Running by an earlier runtimed (or killed at shutdown) is failed.
    let run = f.run("left-over", Some("Running"), Some(&f.pod_a)).await;
    let failed = f
        .write_status(
            &f.as_a,
            &run,
            end(Outcome::Failed, reasons::RUNTIMED_RESTARTED, None),
        )
        .await
        .unwrap();
    assert_eq!(
        failed.status.unwrap().reason.as_deref(),
        Some(reasons::RUNTIMED_RESTARTED)
    );

    // The heartbeat: created, renewed, deleted.
    f.apply_lease(&f.as_a, &a, &a.pod_uid).await.unwrap();
    let renewed = f.apply_lease(&f.as_a, &a, &a.pod_uid).await.unwrap();
    assert_eq!(
        renewed.spec.unwrap().holder_identity.as_deref(),
        Some(a.pod_uid.as_str())
    );
    f.leases(&f.as_a)
        .delete(&a.pod_name, &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        f.leases(&f.admin)
            .get_opt(&a.pod_name)
            .await
            .unwrap()
            .is_none()
    );
}

// ---------------------------------------------------------------------------------------------
// Pod A's token cannot act beyond Pod A.

#[tokio::test]
async fn a_pod_token_cannot_write_other_pods_runs_nor_make_transitions_runtimed_never_makes() {
    let f = Fixture::new("policy-runs").await;
    let ns = &f.ns;
    let (a, b) = (f.identity(&f.pod_a), f.identity(&f.pod_b));

    // The status of a Run assigned to Pod B: neither claimed nor ended.
    let of_b = f.run("of-b", Some("Scheduled"), Some(&f.pod_b)).await;
    let says = format!(
        "runtimed of Pod {ns}/pod-a may update only Runs assigned to its Pod: Run {ns}/of-b has status.podName/podUID pod-b (UID {}), not pod-a (UID {})",
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
    let pending = f.run("pending", None, None).await;
    let set_running_on_a = |s: &mut RunStatus| {
        s.pod_name = Some(a.pod_name.clone());
        s.pod_uid = Some(a.pod_uid.clone());
        claim(s);
    };
    assert_refused(
        f.write_status(&f.as_a, &pending, set_running_on_a).await,
        &format!(
            "may update only Runs assigned to its Pod: Run {ns}/pending has status.podName/podUID <none> (UID <none>)"
        ),
    );
    f.assert_run_unchanged(&pending).await;
    // Even a Pending Run that still names Pod A (a placement taken back) is not A's to start.
    let taken_back = f.run("taken-back", Some("Pending"), Some(&f.pod_a)).await;
    assert_refused(
        f.write_status(&f.as_a, &taken_back, claim).await,
        &format!("may not change Run {ns}/taken-back from phase Pending to Running this way"),
    );
    f.assert_run_unchanged(&taken_back).await;

    // Pod A's own Run cannot be moved to Pod B, nor given up.
    let mine = f.run("mine", Some("Scheduled"), Some(&f.pod_a)).await;
    let to_b = |s: &mut RunStatus| {
        s.pod_name = Some(b.pod_name.clone());
        s.pod_uid = Some(b.pod_uid.clone());
    };
    assert_refused(
        f.write_status(&f.as_a, &mine, to_b).await,
        &format!(
            "may not assign Run {ns}/mine to another Pod: the update sets status.podName/podUID to pod-b (UID {})",
            b.pod_uid
        ),
    );
    let unassign = |s: &mut RunStatus| {
        s.phase = Some(RunPhase::Pending);
        s.pod_name = None;
        s.pod_uid = None;
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

#[tokio::test]
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

#[tokio::test]
async fn a_pod_token_cannot_change_a_runs_spec_or_labels_even_with_edit_rights() {
    let f = Fixture::new("policy-spec").await;
    let ns = &f.ns;
    let mine = f.run("mine", Some("Running"), Some(&f.pod_a)).await;
    let relabel = json!({"metadata": {"labels": {"team": "b"}}, "spec": {"runtime": "other"}});
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
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kruntimes-edit"},
        "subjects": [{"kind": "ServiceAccount", "name": RUNTIMED, "namespace": ns}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(f.admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let refused = loop {
        match runs
            .patch("mine", &PatchParams::default(), &Patch::Merge(&relabel))
            .await
        {
            Err(kube::Error::Api(s)) if s.message.contains("cannot patch resource") => {
                assert!(
                    Instant::now() < deadline,
                    "the RoleBinding never took effect"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break other,
        }
    };
    let only = format!(
        "runtimed of Pod {ns}/pod-a may write only the status of Runs assigned to its Pod and its own heartbeat Lease; "
    );
    assert_refused(refused, &format!("{only}UPDATE of runs mine is refused"));
    let mut respec = mine.clone();
    respec.spec.runtime = "other".into();
    assert_refused(
        runs.replace("mine", &PostParams::default(), &respec).await,
        &format!("{only}UPDATE of runs mine is refused"),
    );
    assert_refused(
        runs.delete("mine", &DeleteParams::default()).await,
        &format!("{only}DELETE of runs mine is refused"),
    );
    let new_run = world::run("new", "python").build();
    assert_refused(
        runs.create(&PostParams::default(), &new_run).await,
        &format!("{only}CREATE of runs new is refused"),
    );
    f.assert_run_unchanged(&mine).await;
    assert!(f.runs(&f.admin).get_opt("new").await.unwrap().is_none());
}

#[tokio::test]
async fn a_pod_token_cannot_write_in_another_namespace_even_with_rights_there() {
    let f = Fixture::new("policy-home").await;
    let a = f.identity(&f.pod_a);
    let elsewhere = support::namespace(&f.admin, "policy-elsewhere").await;
    // runtimed's Role in the other namespace, bound to this namespace's service account.
    apply("deploy/runtimed-rbac.yaml", Some(&elsewhere));
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "visitor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNTIMED},
        "subjects": [{"kind": "ServiceAccount", "name": RUNTIMED, "namespace": f.ns}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(f.admin.clone(), &elsewhere)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let there = Identity {
        namespace: elsewhere.clone(),
        ..a.clone()
    };
    let leases: Api<Lease> = Api::namespaced(f.as_a.clone(), &elsewhere);
    let deadline = Instant::now() + WAIT;
    let refused = loop {
        let result = f.apply_lease_in(&leases, &there, &a.pod_uid).await;
        match &result {
            Err(kube::Error::Api(s)) if s.message.contains("cannot patch resource") => {
                assert!(
                    Instant::now() < deadline,
                    "the RoleBinding never took effect"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => break result,
        }
    };
    assert_refused(
        refused,
        &format!(
            "runtimed of Pod {}/pod-a may write only in namespace {}, not in namespace {elsewhere}",
            f.ns, f.ns
        ),
    );
    assert!(
        Api::<Lease>::namespaced(f.admin.clone(), &elsewhere)
            .get_opt("pod-a")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_token_of_the_runtimed_service_account_not_bound_to_a_pod_can_write_nothing() {
    let f = Fixture::new("policy-unbound").await;
    let a = f.identity(&f.pod_a);
    let not_bound =
        "a kruntimes-runtimed service account may write only with a token bound to its Runtime Pod";

    let scheduled = f.run("scheduled", Some("Scheduled"), Some(&f.pod_a)).await;
    let running = f.run("running", Some("Running"), Some(&f.pod_a)).await;
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

// ---------------------------------------------------------------------------------------------
// runtimed's whole life, with the scheduler, under the policy.

/// The scheduler's service account and RBAC (deploy/scheduler.yaml) and a kubeconfig with its
/// token; applied once per test binary.
fn scheduler_kubeconfig(dir: &Path) -> PathBuf {
    static APPLIED: OnceLock<()> = OnceLock::new();
    APPLIED.get_or_init(|| apply("deploy/scheduler.yaml", None));
    let out = support::kubectl()
        .args([
            "create",
            "token",
            "kruntimes-scheduler",
            "-n",
            "kruntimes-system",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl create token kruntimes-scheduler: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap();
    tokens::token_kubeconfig(dir, "scheduler", token.trim(), "kruntimes-system")
}

/// `runtimed` as the built binary with a kubeconfig; its log goes to a file.
struct Runtimed {
    child: Child,
    log: PathBuf,
}

impl Runtimed {
    fn start(kubeconfig: &Path, ns: &str, pod: &Pod, log: PathBuf) -> Runtimed {
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(support::binary())
            .args([
                "runtimed",
                "--heartbeat-interval",
                "1s",
                "--shutdown-grace",
                "1s",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .env("POD_NAME", pod.name_any())
            .env("POD_NAMESPACE", ns)
            .env("POD_UID", pod.uid().unwrap())
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start kubectl-kruntimes runtimed");
        Runtimed { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    async fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "runtimed did not exit:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runtimed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Lease `name` in `ns` as read by the admin, when it exists.
async fn lease(client: &Client, ns: &str, name: &str) -> Option<Lease> {
    Api::<Lease>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn runtimed_lives_its_whole_life_under_the_policy_with_the_scheduler() {
    support::install_crds();
    let admin = support::client().await;
    let ns = support::namespace(&admin, "policy-life").await;
    let dir = tempfile::tempdir().unwrap();
    apply("deploy/runtimed-rbac.yaml", Some(&ns));
    let scheduler = scheduler_kubeconfig(dir.path());
    let runtime: Runtime = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime",
        "metadata": {"name": "python"},
        "spec": {"replicas": 1, "capacity": {"resources": {"runs": "4"}},
                 "template": {"spec": {"serviceAccountName": RUNTIMED,
                                       "containers": [{"name": "runtimed", "image": "kruntimes.invalid/runtimed"}]}}}
    }))
    .unwrap();
    Api::<Runtime>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &runtime)
        .await
        .unwrap();
    // The scheduler runs with its own service account: the policy does not apply to it.
    let _scheduler = SchedulerProcess::start_as(&scheduler, &ns, 2, None, "policy").await;
    let pod = world::runtime_pods(&admin, &ns, "python", 1)
        .await
        .remove(0);
    let (pod_name, pod_uid) = (pod.name_any(), pod.uid().unwrap());
    world::set_ready(&admin, &ns, &pod_name, true).await;
    let token = tokens::pod_bound_token(&admin, &ns, RUNTIMED, &pod).await;
    let kubeconfig = tokens::token_kubeconfig(dir.path(), "runtimed", &token, &ns);
    let as_pod = support::client_for(&kubeconfig).await;
    await_enforced(&ns, &[&as_pod]).await;

    let mut runtimed = Runtimed::start(&kubeconfig, &ns, &pod, dir.path().join("runtimed-1.log"));

    // Heartbeat: the Lease named after the Pod, held by its UID, renewed.
    let deadline = Instant::now() + WAIT;
    let mut renewals = Vec::new();
    while renewals.len() < 2 {
        if let Some(spec) = lease(&admin, &ns, &pod_name).await.and_then(|l| l.spec) {
            assert_eq!(spec.holder_identity.as_deref(), Some(pod_uid.as_str()));
            if renewals.last() != Some(&spec.renew_time) {
                renewals.push(spec.renew_time);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no renewed heartbeat:\n{}",
            runtimed.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Claim, run and report: success, an exit code, and a task that cannot start (ended while
    // still Scheduled).
    world::run("ok", "python").create(&admin, &ns).await;
    let mut exit3 = world::run("exit-3", "python").build();
    exit3
        .spec
        .mode
        .as_mut()
        .unwrap()
        .task
        .as_mut()
        .unwrap()
        .args = vec!["sh".into(), "-c".into(), "exit 3".into()];
    Api::<Run>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &exit3)
        .await
        .unwrap();
    let mut no_task = world::run("no-task", "python").build();
    no_task.spec.mode = None;
    Api::<Run>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &no_task)
        .await
        .unwrap();
    let ended = |runs: &[Run], name: &str| {
        runs.iter()
            .find(|r| r.name_any() == name && r.phase().is_terminal())
            .map(|r| r.status.clone().unwrap())
    };
    let (ok, exit3, no_task) = wait_runs(&admin, &ns, WAIT, "three Runs ended", |runs| {
        Some((
            ended(runs, "ok")?,
            ended(runs, "exit-3")?,
            ended(runs, "no-task")?,
        ))
    })
    .await;
    assert_eq!(
        (ok.phase, ok.exit_code, ok.pod_name.as_deref()),
        (Some(RunPhase::Succeeded), Some(0), Some(pod_name.as_str()))
    );
    assert_eq!(
        (exit3.phase, exit3.reason.as_deref(), exit3.exit_code),
        (Some(RunPhase::Failed), Some(reasons::EXIT_CODE), Some(3))
    );
    assert_eq!(
        (no_task.phase, no_task.reason.as_deref()),
        (Some(RunPhase::Failed), Some(reasons::START_FAILED))
    );
    assert!(
        no_task.start_time.is_none(),
        "no-task was never claimed: {no_task:?}"
    );

    // Restart: a Run left Running by the killed agent is failed by the next one.
    let mut long = world::run("long", "python").build();
    long.spec.mode.as_mut().unwrap().task.as_mut().unwrap().args =
        vec!["sleep".into(), "30".into()];
    Api::<Run>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &long)
        .await
        .unwrap();
    wait_runs(&admin, &ns, WAIT, "long Running", |runs| {
        (world::phase_of(runs, "long") == Some(RunPhase::Running)).then_some(())
    })
    .await;
    runtimed.signal(libc::SIGKILL);
    runtimed.wait().await;
    let first_log = runtimed.log();
    let mut runtimed = Runtimed::start(&kubeconfig, &ns, &pod, dir.path().join("runtimed-2.log"));
    let long = wait_runs(
        &admin,
        &ns,
        WAIT,
        "long failed by the next runtimed",
        |runs| ended(runs, "long"),
    )
    .await;
    assert_eq!(
        (long.phase, long.reason.as_deref()),
        (Some(RunPhase::Failed), Some(reasons::RUNTIMED_RESTARTED))
    );

    // SIGTERM: a Run killed at shutdown is failed and the Lease is deleted.
    let mut last = world::run("last", "python").build();
    last.spec.mode.as_mut().unwrap().task.as_mut().unwrap().args =
        vec!["sleep".into(), "30".into()];
    Api::<Run>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &last)
        .await
        .unwrap();
    wait_runs(&admin, &ns, WAIT, "last Running", |runs| {
        (world::phase_of(runs, "last") == Some(RunPhase::Running)).then_some(())
    })
    .await;
    runtimed.signal(libc::SIGTERM);
    let status = runtimed.wait().await;
    assert!(
        status.success(),
        "runtimed after SIGTERM: {status}\n{}",
        runtimed.log()
    );
    let last = world::get_run(&admin, &ns, "last").await.status.unwrap();
    assert_eq!(
        (last.phase, last.reason.as_deref()),
        (
            Some(RunPhase::Failed),
            Some(reasons::RUNTIME_POD_TERMINATED)
        )
    );
    assert!(
        lease(&admin, &ns, &pod_name).await.is_none(),
        "the heartbeat Lease was not deleted:\n{}",
        runtimed.log()
    );

    // Not one of runtimed's requests was refused along the way.
    for log in [first_log, runtimed.log()] {
        assert!(
            !log.contains("denied request") && !log.contains("forbidden"),
            "runtimed was refused something:\n{log}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// People: the user ClusterRoles, aggregated into the built-in view and edit.

#[tokio::test]
async fn people_who_can_edit_create_runs_viewers_explain_and_nobody_writes_status() {
    support::install_crds();
    let admin = support::client().await;
    // What kube-controller-manager would do (there is none here): fill view/edit/admin.
    roles::aggregate_cluster_roles(&admin).await;
    let ns = support::namespace(&admin, "policy-people").await;
    let dir = tempfile::tempdir().unwrap();
    for (user, role) in [("alice", "edit"), ("bob", "view")] {
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{user}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }))
        .unwrap();
        Api::<RoleBinding>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }
    let alice_kubeconfig = tokens::user_kubeconfig(dir.path(), "alice", &ns);
    let bob_kubeconfig = tokens::user_kubeconfig(dir.path(), "bob", &ns);
    let alice = support::client_for(&alice_kubeconfig).await;
    let bob = support::client_for(&bob_kubeconfig).await;
    for (who, client) in [("alice", &alice), ("bob", &bob)] {
        let runs: Api<Run> = Api::namespaced(client.clone(), &ns);
        await_allowed(&format!("{who} listing Runs"), || {
            let runs = runs.clone();
            async move { runs.list(&Default::default()).await }
        })
        .await;
    }

    // alice (edit) creates a Runtime and a Run and reads them back.
    let runtime: Runtime = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime",
        "metadata": {"name": "python"},
        "spec": {"replicas": 0, "capacity": {"resources": {"runs": "4"}},
                 "template": {"spec": {"containers": [{"name": "runtimed", "image": "kruntimes.invalid/runtimed"}]}}}
    }))
    .unwrap();
    Api::<Runtime>::namespaced(alice.clone(), &ns)
        .create(&PostParams::default(), &runtime)
        .await
        .unwrap();
    let train = world::run("train", "python").create(&alice, &ns).await;
    Api::<Runtime>::namespaced(alice.clone(), &ns)
        .get("python")
        .await
        .unwrap();
    // A Runtime Pod with a heartbeat, as the scheduler and runtimed would make them.
    world::ready_pod(&admin, &ns, "python", "python-0", &[("runs", 4)]).await;

    // Both can explain it.
    for (who, kubeconfig) in [("alice", &alice_kubeconfig), ("bob", &bob_kubeconfig)] {
        let out = Command::new(support::binary())
            .args(["explain", "run/train"])
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{who}: explain failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.starts_with("Fits: would be placed on python-0"),
            "{who}: {stdout}"
        );
    }

    // bob (view) cannot create a Run.
    let other = world::run("other", "python").build();
    assert_forbidden_by_rbac(
        Api::<Run>::namespaced(bob.clone(), &ns)
            .create(&PostParams::default(), &other)
            .await,
        "User \"bob\" cannot create resource \"runs\"",
    );
    // Neither writes runs/status: no placing or finishing a Run by hand.
    let before = world::get_run(&admin, &ns, "train").await;
    for (who, client) in [("alice", &alice), ("bob", &bob)] {
        let mut placed = train.clone();
        placed.metadata.resource_version = before.resource_version();
        placed.status = Some(RunStatus {
            phase: Some(RunPhase::Succeeded),
            ..Default::default()
        });
        assert_forbidden_by_rbac(
            Api::<Run>::namespaced(client.clone(), &ns)
                .replace_status("train", &PostParams::default(), &placed)
                .await,
            &format!("User \"{who}\" cannot update resource \"runs/status\""),
        );
        assert_forbidden_by_rbac(
            Api::<Run>::namespaced(client.clone(), &ns)
                .patch_status(
                    "train",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
                )
                .await,
            &format!("User \"{who}\" cannot patch resource \"runs/status\""),
        );
    }
    let after = world::get_run(&admin, &ns, "train").await;
    assert_eq!(after.resource_version(), before.resource_version());
}
