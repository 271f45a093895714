//! What a Runtime Pod may do, proven on the real control plane with real tokens: the admission
//! policy `kubectl-kruntimes-runtimed` (deploy/runtimed-policy.yaml, applied by `install`) beside the
//! shipped runtimed RBAC, and the user ClusterRoles aggregated into view/edit/admin.
//!
//! Runtime Pods here are Pod objects running as `kubectl-kruntimes-runtimed`; their tokens come from the
//! TokenRequest API with the Pod as bound object, exactly what the kubelet mounts, so the API
//! server itself puts the Pod claims in the user info. Every refusal is checked for the
//! policy's own message and for nothing having changed (the object is read again).

mod support;

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt as _};
use serde_json::json;

use kruntimes::api::status::{self, CONDITION_ADMITTED, Outcome, reasons};
use kruntimes::api::{FIELD_MANAGER, Run, RunPhase, RunStatus, Runtime};
use kruntimes::process::Signal;
use kruntimes::runtimed::Identity;
use kruntimes::runtimed::heartbeat::{self, desired_lease};
use kruntimes::testing::{RunBuilder, pod, run, runtime};
use support::world::{
    self, Create, RuntimedProcess, SchedulerProcess, TestNs, create_in, eventually,
};
use support::{roles, tokens};

const RUNTIMED: &str = "kubectl-kruntimes-runtimed";
/// How the API server words a refusal by this policy.
const POLICY_DENIED: &str = "ValidatingAdmissionPolicy 'kubectl-kruntimes-runtimed' with binding 'kubectl-kruntimes-runtimed' denied request: ";
const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Fixture: a namespace with the shipped runtimed RBAC, two Runtime Pods A and B running as
// kubectl-kruntimes-runtimed, a client with A's Pod-bound token and one with an unbound token of the
// same service account.

struct Fixture {
    ns: TestNs,
    /// The admin client of `ns`.
    admin: Client,
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
        let ns = TestNs::new(prefix).await;
        let admin = ns.client.clone();
        support::kubectl_apply("deploy/runtimed-rbac.yaml", Some(&ns.name));
        let pod_a = runtime_pod(&ns, "pod-a").await;
        let pod_b = runtime_pod(&ns, "pod-b").await;
        let dir = tempfile::tempdir().unwrap();
        let token_a = tokens::pod_bound_token(&admin, &ns.name, RUNTIMED, &pod_a).await;
        let token_unbound = tokens::unbound_token(&admin, &ns.name, RUNTIMED).await;
        let kubeconfig = |file, token| tokens::token_kubeconfig(dir.path(), file, token, &ns.name);
        let as_a = support::client_for(&kubeconfig("a", &token_a)).await;
        let unbound = support::client_for(&kubeconfig("unbound", &token_unbound)).await;
        await_enforced(&ns.name, &[&as_a, &unbound]).await;
        Fixture {
            ns,
            admin,
            pod_a,
            pod_b,
            as_a,
            unbound,
            _dir: dir,
        }
    }

    fn runs(&self, client: &Client) -> Api<Run> {
        Api::namespaced(client.clone(), &self.ns.name)
    }

    fn leases(&self, client: &Client) -> Api<Lease> {
        Api::namespaced(client.clone(), &self.ns.name)
    }

    fn identity(&self, pod: &Pod) -> Identity {
        Identity {
            pod_name: pod.name_any(),
            namespace: self.ns.name.clone(),
            pod_uid: pod.uid().unwrap(),
        }
    }

    /// A Run of this fixture (labelled `team=a`), Pending and unbound.
    fn run(&self, name: &str) -> RunBuilder {
        run(name).labels(&[("team", "a")])
    }

    /// [`Self::run`] as the scheduler binds it: Scheduled on `pod`, with the Pod's real UID.
    fn on(&self, name: &str, pod: &Pod) -> RunBuilder {
        self.run(name)
            .on(&pod.name_any())
            .pod_uid(&pod.uid().unwrap())
    }

    /// Creates the Run (and writes its status, if it has one, as the scheduler would).
    /// Returns it as stored.
    async fn create(&self, run: RunBuilder) -> Run {
        run.create(&self.ns).await;
        self.get(run.name()).await
    }

    async fn get(&self, name: &str) -> Run {
        self.ns.get_run(name).await
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

/// A Runtime Pod object running as kubectl-kruntimes-runtimed with a capacity of 4 runs, as created
/// (there is no kubelet: it never runs, has no status and no heartbeat).
async fn runtime_pod(ns: &TestNs, name: &str) -> Pod {
    let mut pod = pod(name).capacity(&[("runs", 4)]).build();
    pod.spec.as_mut().unwrap().service_account_name = Some(RUNTIMED.into());
    pod.status = None;
    create_in(ns, pod).await
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

/// `object` as the body of a create in `ns` by a client other than the admin: in `ns`, its UID
/// left to the API server, as [`create_in`] sends it for the admin.
fn body<K: Resource>(mut object: K, ns: &TestNs) -> K {
    let meta = object.meta_mut();
    meta.namespace = Some(ns.name.clone());
    meta.uid = None;
    object
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

/// Waits until the policy is enforced for each of `clients` (tokens of kubectl-kruntimes-runtimed in
/// `ns`): the policy and its binding become active a moment after they are created, RBAC and
/// new tokens a moment after theirs. Probes with a server-side dry run, which persists nothing.
async fn await_enforced(ns: &str, clients: &[&Client]) {
    let probe: Lease =
        serde_json::from_value(json!({"metadata": {"name": "policy-probe"}})).unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let leases: Vec<Api<Lease>> = clients
        .iter()
        .map(|client| Api::namespaced((*client).clone(), ns))
        .collect();
    let what = "the policy kubectl-kruntimes-runtimed to be enforced for every token";
    eventually(WAIT, what, async || {
        for (i, leases) in leases.iter().enumerate() {
            match leases.create(&dry_run, &probe).await {
                Err(kube::Error::Api(s)) if s.message.contains(POLICY_DENIED) => {}
                other => return Err(format!("token {i}: {other:?}")),
            }
        }
        Ok(())
    })
    .await
}

/// Waits until `probe` stops failing with 401/403 (RBAC and tokens are cached briefly).
async fn await_allowed<T: Debug>(what: &str, mut probe: impl AsyncFnMut() -> kube::Result<T>) {
    let allowed = format!("{what} to be allowed");
    eventually(WAIT, &allowed, async || {
        let probed = probe().await;
        match probed {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if (s.code == 401 || s.code == 403) => Err(s.message),
            Err(e) => panic!("{what}: {e}"),
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// runtimed's own writes are allowed.

#[tokio::test]
async fn every_write_runtimed_makes_is_allowed_with_its_pod_token() {
    let f = Fixture::new("policy-allowed").await;
    let a = f.identity(&f.pod_a);

    // Claim, then end: Scheduled -> Running -> Succeeded.
    let run = f.create(f.on("ok", &f.pod_a)).await;
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
    let run = f.create(f.on("no-task", &f.pod_a)).await;
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
    let run = f.create(f.on("left-over", &f.pod_a).running()).await;
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

/// An Event as runtimed's recorder writes it: about Run `run`, reported by
/// `controller`/`instance`.
fn event(ns: &TestNs, name: &str, run: &Run, controller: &str, instance: &str) -> Event {
    let mut regarding = run.object_ref(&());
    regarding.resource_version = None;
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns.name},
        "eventTime": MicroTime(jiff::Timestamp::now()),
        "reason": "Started",
        "action": "Start",
        "note": "started the task",
        "type": "Normal",
        "reportingController": controller,
        "reportingInstance": instance,
        "regarding": regarding,
    }))
    .unwrap()
}

#[tokio::test]
async fn a_pod_token_writes_only_events_it_reports_itself_on_runs() {
    let f = Fixture::new("policy-events").await;
    let mine = f.create(f.on("mine", &f.pod_a)).await;
    let events: Api<Event> = Api::namespaced(f.as_a.clone(), &f.ns.name);
    let ok = event(&f.ns, "mine.1", &mine, "kruntimes-runtimed", "pod-a");
    events.create(&PostParams::default(), &ok).await.unwrap();
    // A repeat is folded into a series with a patch, as kube-runtime's recorder does.
    let series =
        json!({"series": {"count": 2, "lastObservedTime": MicroTime(jiff::Timestamp::now())}});
    events
        .patch("mine.1", &PatchParams::default(), &Patch::Merge(&series))
        .await
        .unwrap();

    let ns = &f.ns;
    let only = format!(
        "runtimed of Pod {ns}/pod-a may write only Events about Runs of namespace {ns} that it reports itself (reportingController kruntimes-runtimed, reportingInstance pod-a); "
    );
    let as_b = event(ns, "mine.2", &mine, "kruntimes-runtimed", "pod-b");
    assert_refused(
        events.create(&PostParams::default(), &as_b).await,
        &format!("{only}CREATE of event mine.2 is refused"),
    );
    let as_scheduler = event(ns, "mine.3", &mine, "kruntimes-scheduler", "pod-a");
    assert_refused(
        events.create(&PostParams::default(), &as_scheduler).await,
        &format!("{only}CREATE of event mine.3 is refused"),
    );
    let mut about_pod = event(ns, "mine.4", &mine, "kruntimes-runtimed", "pod-a");
    about_pod.regarding = Some(f.pod_b.object_ref(&()));
    assert_refused(
        events.create(&PostParams::default(), &about_pod).await,
        &format!("{only}CREATE of event mine.4 is refused"),
    );
    // Nor may it take over an Event someone else reported.
    let theirs = event(ns, "theirs", &mine, "kruntimes-scheduler", "sched-0");
    Api::<Event>::namespaced(f.admin.clone(), &ns.name)
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    // (An Event is immutable but for its series: the policy judges the Event it replaces.)
    assert_refused(
        events
            .patch("theirs", &PatchParams::default(), &Patch::Merge(&series))
            .await,
        &format!("{only}UPDATE of event theirs is refused"),
    );
    // RBAC grants no delete: runtimed cannot remove the story.
    assert_forbidden_by_rbac(
        events.delete("mine.1", &DeleteParams::default()).await,
        "cannot delete resource \"events\"",
    );
    let kept: Vec<String> = Api::<Event>::namespaced(f.admin.clone(), &ns.name)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| e.name_any())
        .collect();
    assert_eq!(kept, ["mine.1", "theirs"]);
}

// ---------------------------------------------------------------------------------------------
// Pod A's token cannot act beyond Pod A.

#[tokio::test]
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
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubectl-kruntimes-edit"},
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

#[tokio::test]
async fn a_pod_token_cannot_write_in_another_namespace_even_with_rights_there() {
    let f = Fixture::new("policy-home").await;
    let a = f.identity(&f.pod_a);
    let elsewhere = TestNs::new("policy-elsewhere").await;
    // runtimed's Role in the other namespace, bound to this namespace's service account.
    support::kubectl_apply("deploy/runtimed-rbac.yaml", Some(&elsewhere.name));
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "visitor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNTIMED},
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

#[tokio::test]
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
#[tokio::test]
async fn the_go_projects_runtimed_service_account_is_not_matched() {
    let f = Fixture::new("policy-go-runtimed").await;
    let a = f.identity(&f.pod_a);
    let go_runtimed = "kruntimes-runtimed";
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": go_runtimed}})).unwrap();
    create_in(&f.ns, account).await;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "go-runtimed"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNTIMED},
        "subjects": [{"kind": "ServiceAccount", "name": go_runtimed, "namespace": f.ns.name}]
    }))
    .unwrap();
    create_in(&f.ns, binding).await;
    let token = tokens::unbound_token(&f.admin, &f.ns.name, go_runtimed).await;
    let kubeconfig = tokens::token_kubeconfig(f._dir.path(), "go-runtimed", &token, &f.ns.name);
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

// ---------------------------------------------------------------------------------------------
// runtimed's whole life, with the scheduler, under the policy.

/// The scheduler's service account and RBAC (deploy/scheduler.yaml) and a kubeconfig with its
/// token; applied once per test binary.
fn scheduler_kubeconfig(dir: &Path) -> PathBuf {
    static APPLIED: OnceLock<()> = OnceLock::new();
    APPLIED.get_or_init(|| support::kubectl_apply("deploy/scheduler.yaml", None));
    let out = support::kubectl()
        .args([
            "create",
            "token",
            "kubectl-kruntimes-scheduler",
            "-n",
            "kubectl-kruntimes",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl create token kubectl-kruntimes-scheduler: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap();
    tokens::token_kubeconfig(dir, "scheduler", token.trim(), "kubectl-kruntimes")
}

/// Kills runtimed outright, with no chance to clean up (as a crash would).
fn sigkill(runtimed: &RuntimedProcess) {
    runtimed.signal(Signal::Kill);
}

#[tokio::test]
async fn runtimed_lives_its_whole_life_under_the_policy_with_the_scheduler() {
    let ns = TestNs::new("policy-life").await;
    let dir = tempfile::tempdir().unwrap();
    support::kubectl_apply("deploy/runtimed-rbac.yaml", Some(&ns.name));
    let scheduler = scheduler_kubeconfig(dir.path());
    let mut python = runtime("python").capacity(&[("runs", 4)]).build();
    let template = python.spec.template.spec.as_mut().expect("a Pod template");
    template.service_account_name = Some(RUNTIMED.into());
    create_in(&ns, python).await;
    // The scheduler runs with its own service account: the policy does not apply to it.
    let _scheduler = SchedulerProcess::start_as(&scheduler, &ns.name, 2, None, "policy").await;
    let pod = ns.runtime_pods("python", 1).await.remove(0);
    let (pod_name, pod_uid) = (pod.name_any(), pod.uid().unwrap());
    ns.set_ready(&pod_name, true).await;
    let token = tokens::pod_bound_token(&ns.client, &ns.name, RUNTIMED, &pod).await;
    let kubeconfig = tokens::token_kubeconfig(dir.path(), "runtimed", &token, &ns.name);
    let as_pod = support::client_for(&kubeconfig).await;
    await_enforced(&ns.name, &[&as_pod]).await;

    // `-v`: info, so that every refusal runtimed meets is in its log.
    let args = ["-v", "--heartbeat-interval", "1s", "--shutdown-grace", "1s"];
    let mut runtimed = RuntimedProcess::start_as(&kubeconfig, &pod, &args);

    // Heartbeat: the Lease named after the Pod, held by its UID, renewed.
    let leases = ns.api::<Lease>();
    let mut renewals = Vec::new();
    eventually(WAIT, "a renewed heartbeat", async || {
        let lease = leases.get_opt(&pod_name).await.unwrap();
        if let Some(spec) = lease.and_then(|l| l.spec) {
            assert_eq!(spec.holder_identity.as_deref(), Some(pod_uid.as_str()));
            if renewals.last() != Some(&spec.renew_time) {
                renewals.push(spec.renew_time);
            }
        }
        if renewals.len() >= 2 {
            Ok(())
        } else {
            let log = runtimed.log_tail();
            Err(format!(
                "renewals {renewals:?}\n--- runtimed log ---\n{log}"
            ))
        }
    })
    .await;

    // Claim, run and report: success, an exit code, and a task that cannot start (ended while
    // still Scheduled).
    run("ok").create(&ns).await;
    run("exit-3")
        .task(&["sh", "-c", "exit 3"])
        .create(&ns)
        .await;
    // A function Run: no task for runtimed to start without a runtime server.
    run("no-task").function("main.handler").create(&ns).await;
    let ended = |runs: &[Run], name: &str| {
        runs.iter()
            .find(|r| r.name_any() == name && r.phase().is_terminal())
            .map(|r| r.status.clone().unwrap())
    };
    let (ok, exit3, no_task) = ns
        .wait_runs(WAIT, "three Runs ended", |runs| {
            Some((
                ended(runs, "ok")?,
                ended(runs, "exit-3")?,
                ended(runs, "no-task")?,
            ))
        })
        .await;
    assert_eq!(
        (ok.phase, ok.exit_code, ok.assigned_pod.as_deref()),
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
    run("long").task(&["sleep", "30"]).create(&ns).await;
    ns.wait_runs(WAIT, "long Running", |runs| {
        (world::phase_of(runs, "long") == Some(RunPhase::Running)).then_some(())
    })
    .await;
    sigkill(&runtimed);
    runtimed.wait(WAIT).await;
    let first_log = runtimed.log();
    let mut runtimed = RuntimedProcess::start_as(&kubeconfig, &pod, &args);
    let long = ns
        .wait_runs(WAIT, "long failed by the next runtimed", |runs| {
            ended(runs, "long")
        })
        .await;
    assert_eq!(
        (long.phase, long.reason.as_deref()),
        (Some(RunPhase::Failed), Some(reasons::RUNTIMED_RESTARTED))
    );

    // SIGTERM: a Run killed at shutdown is failed and the Lease is deleted.
    run("last").task(&["sleep", "30"]).create(&ns).await;
    ns.wait_runs(WAIT, "last Running", |runs| {
        (world::phase_of(runs, "last") == Some(RunPhase::Running)).then_some(())
    })
    .await;
    runtimed.sigterm();
    let status = runtimed.wait(WAIT).await;
    assert!(
        status.success(),
        "runtimed after SIGTERM: {status}\n{}",
        runtimed.log()
    );
    let last = ns.get_run("last").await.status.unwrap();
    assert_eq!(
        (last.phase, last.reason.as_deref()),
        (
            Some(RunPhase::Failed),
            Some(reasons::RUNTIME_POD_TERMINATED)
        )
    );
    assert!(
        leases.get_opt(&pod_name).await.unwrap().is_none(),
        "the heartbeat Lease was not deleted:\n{}",
        runtimed.log()
    );

    // Its Events tell each Run's story, reported as its own Pod.
    let story = |name: &str| {
        let events = ns.api::<Event>();
        let name = name.to_string();
        let pod_name = pod_name.clone();
        async move {
            let mut events: Vec<Event> = events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                        && e.reporting_controller.as_deref() == Some("kruntimes-runtimed")
                })
                .collect();
            events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
            for e in &events {
                assert_eq!(e.reporting_instance.as_deref(), Some(pod_name.as_str()));
            }
            events
                .into_iter()
                .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
                .collect::<Vec<_>>()
        }
    };
    let ok_story = story("ok").await;
    let reasons_of = |s: &[(String, String)]| s.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>();
    assert_eq!(
        reasons_of(&ok_story),
        ["Admitted", "Started", "Completed"],
        "{ok_story:?}"
    );
    assert_eq!(
        ok_story[2].1,
        "the process exited with code 0 (exit code 0)"
    );
    let exit3_story = story("exit-3").await;
    assert_eq!(
        reasons_of(&exit3_story),
        ["Admitted", "Started", "Failed"],
        "{exit3_story:?}"
    );
    assert_eq!(
        exit3_story[2].1,
        "the process exited with code 3 (exit code 3)"
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
    let ns = TestNs::new("policy-people").await;
    // What kube-controller-manager would do (there is none here): fill view/edit/admin.
    roles::aggregate_cluster_roles(&ns.client).await;
    let dir = tempfile::tempdir().unwrap();
    for (user, role) in [("alice", "edit"), ("bob", "view")] {
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{user}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }))
        .unwrap();
        create_in(&ns, binding).await;
    }
    let alice_kubeconfig = tokens::user_kubeconfig(dir.path(), "alice", &ns.name);
    let bob_kubeconfig = tokens::user_kubeconfig(dir.path(), "bob", &ns.name);
    let alice = support::client_for(&alice_kubeconfig).await;
    let bob = support::client_for(&bob_kubeconfig).await;
    for (who, client) in [("alice", &alice), ("bob", &bob)] {
        let runs: Api<Run> = Api::namespaced(client.clone(), &ns.name);
        await_allowed(&format!("{who} listing Runs"), async || {
            runs.list(&Default::default()).await
        })
        .await;
    }

    // alice (edit) creates a Runtime and a Run and reads them back.
    let python = runtime("python").replicas(0).capacity(&[("runs", 4)]);
    Api::<Runtime>::namespaced(alice.clone(), &ns.name)
        .create(&PostParams::default(), &body(python.build(), &ns))
        .await
        .unwrap();
    let train = Api::<Run>::namespaced(alice.clone(), &ns.name)
        .create(&PostParams::default(), &body(run("train").build(), &ns))
        .await
        .unwrap();
    Api::<Runtime>::namespaced(alice.clone(), &ns.name)
        .get("python")
        .await
        .unwrap();
    // A Runtime Pod with a heartbeat, as the scheduler and runtimed would make them.
    pod("python-0").capacity(&[("runs", 4)]).create(&ns).await;

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
    let other = body(run("other").build(), &ns);
    assert_forbidden_by_rbac(
        Api::<Run>::namespaced(bob.clone(), &ns.name)
            .create(&PostParams::default(), &other)
            .await,
        "User \"bob\" cannot create resource \"runs\"",
    );
    // Neither writes runs/status: no placing or finishing a Run by hand.
    let before = ns.get_run("train").await;
    for (who, client) in [("alice", &alice), ("bob", &bob)] {
        let mut placed = train.clone();
        placed.metadata.resource_version = before.resource_version();
        placed.status = Some(RunStatus {
            phase: Some(RunPhase::Succeeded),
            ..Default::default()
        });
        assert_forbidden_by_rbac(
            Api::<Run>::namespaced(client.clone(), &ns.name)
                .replace_status("train", &PostParams::default(), &placed)
                .await,
            &format!("User \"{who}\" cannot update resource \"runs/status\""),
        );
        assert_forbidden_by_rbac(
            Api::<Run>::namespaced(client.clone(), &ns.name)
                .patch_status(
                    "train",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
                )
                .await,
            &format!("User \"{who}\" cannot patch resource \"runs/status\""),
        );
    }
    let after = ns.get_run("train").await;
    assert_eq!(after.resource_version(), before.resource_version());
}
