//! What a Runtime Pod may do, proven on the real control plane with real tokens: the admission
//! policy `kubectl-kruntimes-runtimed` (deploy/crds/runtimed-policy.yaml, applied by `install`) beside the
//! shipped runtimed RBAC. runtimed's whole life under it is `tests/it/runtimed_policy.rs`; the
//! people's ClusterRoles are `tests/it/rbac.rs`.
//!
//! Runtime Pods here are Pod objects running as `kubectl-kruntimes-runtimed`; their tokens come from the
//! TokenRequest API with the Pod as bound object, exactly what the kubelet mounts, so the API
//! server itself puts the Pod claims in the user info. Every refusal is checked for the
//! policy's own message and for nothing having changed (the object is read again).

use testkit as support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt as _};
use serde_json::json;

use kruntimes::api::status::{self, Outcome, reasons};
use kruntimes::api::{Run, RunPhase, RunStatus};
use kruntimes::runtimed::Identity;
use kruntimes::testing::run;
use support::tokens;
use support::world::{TestNs, create_in, eventually};

use support::policy::*;

// ---------------------------------------------------------------------------------------------
// runtimed's own writes are allowed.

#[testkit::test]
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
    // The end carries the execution's outputs ($KRUNTIME_OUTPUTS).
    let done = f
        .write_status(&f.as_a, &same, |status| {
            status.outputs.insert("answer".into(), "42".into());
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0))(status)
        })
        .await
        .unwrap();
    assert_eq!(done.phase(), RunPhase::Succeeded);
    assert_eq!(
        done.status
            .as_ref()
            .unwrap()
            .outputs
            .get("answer")
            .map(String::as_str),
        Some("42")
    );

    // A short task's one write (runtimed's --claim-delay): Scheduled -> Succeeded with the
    // claim's startTime, attempt and Admitted=True in the same write.
    let run = f.create(f.on("short", &f.pod_a)).await;
    let done = f
        .write_status(&f.as_a, &run, |status| {
            claim(status);
            status.attempt = Some(1);
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0))(status)
        })
        .await
        .unwrap();
    assert_eq!(done.phase(), RunPhase::Succeeded);
    assert!(done.status.as_ref().unwrap().start_time.is_some());

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

    // Cancelled before it started, cancelled while it ran, past its spec.timeout.
    for (name, running, outcome, reason, phase) in [
        (
            "cancel-scheduled",
            false,
            Outcome::Cancelled,
            reasons::CANCELLED,
            RunPhase::Cancelled,
        ),
        (
            "cancel-running",
            true,
            Outcome::Cancelled,
            reasons::CANCELLED,
            RunPhase::Cancelled,
        ),
        (
            "time-out",
            true,
            Outcome::Timeout,
            reasons::TIMEOUT,
            RunPhase::Timeout,
        ),
    ] {
        let builder = f.on(name, &f.pod_a).cancel_requested();
        let run = f
            .create(if running { builder.running() } else { builder })
            .await;
        let ended = f
            .write_status(&f.as_a, &run, end(outcome, reason, None))
            .await
            .unwrap();
        assert_eq!(ended.phase(), phase, "{name}");
    }

    // A function Run: Running -> Ready once registered, then released (idle timeout).
    let run = f
        .create(
            f.on("function", &f.pod_a)
                .function("main.handler")
                .running(),
        )
        .await;
    let ready = f
        .write_status(&f.as_a, &run, |status| {
            assert!(status::set_function_ready(status, "registered"));
        })
        .await
        .unwrap();
    assert_eq!(ready.phase(), RunPhase::Ready);
    let released = f
        .write_status(
            &f.as_a,
            &ready,
            end(Outcome::Timeout, reasons::IDLE_TIMEOUT, None),
        )
        .await
        .unwrap();
    assert_eq!(released.phase(), RunPhase::Timeout);

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

#[testkit::test]
async fn a_pod_token_sends_a_run_back_to_pending_only_when_the_scheduler_preempts_it() {
    let f = Fixture::new("policy-preempt").await;
    let run = f.create(f.on("victim", &f.pod_a)).await;
    // runtimed's real claim records the first attempt.
    let running = f
        .write_status(&f.as_a, &run, |s| {
            claim(s);
            s.attempt = Some(1);
        })
        .await
        .unwrap();
    let requeue = |s: &mut RunStatus| {
        assert!(status::set_requeued(s, "stopped for a preemption", &now()));
    };
    // Not asked by the scheduler: a Running Run may not be unassigned.
    assert_refused(
        f.write_status(&f.as_a, &running, requeue).await,
        "may not assign Run",
    );
    // The scheduler asks (DisruptionTarget=True/PreemptionByScheduler): runtimed's answer, back
    // to Pending for attempt 2, is allowed.
    let asked = f
        .write_status(&f.admin, &running, |s| {
            assert!(status::request_disruption(s, "preempted", &now()));
        })
        .await
        .unwrap();
    let requeued = f.write_status(&f.as_a, &asked, requeue).await.unwrap();
    assert_eq!(requeued.phase(), RunPhase::Pending);
    let status = requeued.status.unwrap();
    assert_eq!(status.attempt, Some(2));
    assert_eq!(status.reason.as_deref(), Some(reasons::PREEMPTED));
    assert!(status.assigned_pod.is_none());
}

/// `spec.retryPolicy` on the Pod: the real claim (Running=True/Claimed), a failed attempt
/// (Running=False, attempt + 1), its retry (Running=True/Retrying, a new startTime) and the end
/// are allowed; skipping an attempt, rewriting one, or recording a failure for a Run already
/// between attempts is refused.
#[testkit::test]
async fn a_pod_token_retries_a_failed_attempt_on_its_pod_and_cannot_rewrite_attempts() {
    let f = Fixture::new("policy-retry").await;
    let pod = f.pod_a.name_any();
    let run = f.create(f.on("flaky", &f.pod_a)).await;
    let reserved = kruntimes::api::Resources::from_iter([("runs", 1)]);
    let running = f
        .write_status(&f.as_a, &run, |s| {
            status::set_admitted(s, &pod, &reserved, &now())
        })
        .await
        .unwrap();
    let fail = |failed: i32, next: i32| {
        move |s: &mut RunStatus| {
            assert!(status::set_attempt_failed(
                s,
                failed,
                next,
                reasons::EXIT_CODE,
                "the process exited with code 1",
                Some(1),
                &now()
            ));
        }
    };
    // Skipping an attempt is refused.
    let skip = |s: &mut RunStatus| {
        fail(1, 2)(s);
        s.attempt = Some(3);
    };
    assert_refused(
        f.write_status(&f.as_a, &running, skip).await,
        "may not change Run",
    );
    f.assert_run_unchanged(&running).await;
    let failed = f.write_status(&f.as_a, &running, fail(1, 2)).await.unwrap();
    assert_eq!(failed.phase(), RunPhase::Running);
    assert_eq!(failed.attempt(), 2);
    // A second failure while between attempts (nothing ran) is refused.
    let again = |s: &mut RunStatus| {
        s.attempt = Some(3);
        s.reason = Some(reasons::EXIT_CODE.into());
    };
    assert_refused(
        f.write_status(&f.as_a, &failed, again).await,
        "may not change Run",
    );
    // A retry that changes the attempt is refused; the retry itself is allowed.
    let renumbered = |s: &mut RunStatus| {
        assert!(status::set_retrying(s, 2, "pod", &now()));
        s.attempt = Some(1);
    };
    assert_refused(
        f.write_status(&f.as_a, &failed, renumbered).await,
        "may not change Run",
    );
    let pod_name = pod.clone();
    let retried = f
        .write_status(&f.as_a, &failed, move |s| {
            assert!(status::set_retrying(s, 2, &pod_name, &now()));
        })
        .await
        .unwrap();
    assert_eq!(retried.attempt(), 2);
    let done = f
        .write_status(
            &f.as_a,
            &retried,
            end(Outcome::Succeeded, reasons::SUCCEEDED, Some(0)),
        )
        .await
        .unwrap();
    assert_eq!(done.phase(), RunPhase::Succeeded);
}

#[testkit::test]
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

// Pod A's token cannot act beyond Pod A.
mod refused;
