//! Function Runs on the runtime server (their room held while Ready, released by cancel,
//! deletion, idle or spec.timeout), and who may call runtimed's API (`/invoke`, `/logs`):
//! only callers the API server allows.

use super::*;

/// Function Runs on the runtime server: registered, then Ready, which holds the whole request
/// (a second function Run of the whole Pod waits Pending with the usual reason) until it is
/// released by cancel, deletion, its idle timeout or its spec.timeout, each waking the waiting
/// one; a registration the server refuses fails the Run. Invocations reach the handler
/// through runtimed's `/invoke/<run>`; `invoke` refuses a Run that is not Ready.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_runs_hold_their_room_while_ready_until_cancel_delete_idle_or_timeout() {
    let mut pool = Scenario::start("contract-functions").await;
    let ns = &pool.ns.clone();
    let watch = pool.overcommit_watch().await;
    let whole = |name: &str, handler: &str| {
        run(name)
            .runtime("pool")
            .requests(&[("runs", 2)])
            .function(handler)
    };
    let within = Duration::from_secs(60);

    whole("echo", "echo").create(ns).await;
    ns.wait_phase("echo", RunPhase::Ready, within).await;
    whole("upper", "upper").create(ns).await;
    let waiting = ns
        .wait_runs(within, "the second function Run to wait", |runs| {
            let r = runs.iter().find(|r| r.name_any() == "upper")?;
            let message = r.status.as_ref()?.message.clone()?;
            (r.phase() == RunPhase::Pending && message.contains("Insufficient runs"))
                .then_some(message)
        })
        .await;
    assert_eq!(
        waiting,
        "0/1 Runtime Pods are available: 1 Insufficient runs."
    );

    // Invocations, and invoke's refusal of a Run that is not Ready.
    let (code, body) = pool.api.post("/invoke/echo", b"hello").await;
    assert_eq!((code, body.as_str()), (200, "hello"));
    let (code, body) = pool.api.post("/invoke/upper", b"x").await;
    assert_eq!(code, 404, "{body}");
    let out = support::kruntimes()
        .args(["invoke", "run/upper", "-n", &ns.name, "--data", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: run/upper is Pending, not Ready: a function Run can be invoked once its runtimed has registered it (see kubectl kruntimes explain run/upper)\n"
    );

    // Cancel releases it: the waiting one becomes Ready.
    ns.cancel("echo").await;
    let cancelled = ns.wait_phase("echo", RunPhase::Cancelled, within).await;
    assert_eq!(
        cancelled.status.unwrap().reason.as_deref(),
        Some(reasons::CANCELLED)
    );
    ns.wait_phase("upper", RunPhase::Ready, within).await;
    let (code, body) = pool.api.post("/invoke/upper", b"shout").await;
    assert_eq!((code, body.as_str()), (200, "SHOUT"));

    // runtimed crashes and starts again: the Ready Run is registered again (same attempt, so
    // the server resumes it), stays Ready and is invoked through the new runtimed.
    pool.crash_and_restart();
    let api = pool.api.clone();
    let answer = eventually(
        Duration::from_secs(30),
        "the restarted runtimed to serve the Ready Run",
        async || match api.post("/invoke/upper", b"again").await {
            (200, body) => Ok(body),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert_eq!(answer, "AGAIN");
    let still = ns.api::<Run>().get("upper").await.unwrap();
    assert_eq!(still.phase(), RunPhase::Ready, "{:?}", still.status);

    // Deletion releases it: the next one (idle for 2 s) becomes Ready, then ends
    // Timeout/IdleTimeout.
    whole("idle", "echo").idle_timeout(2).create(ns).await;
    // The leader gives the Ready function Run its cleanup finalizer, so its deletion waits for
    // runtimed to unregister it (and its room is held until then).
    let finalizer = kruntimes::api::FINALIZER_FUNCTION_CLEANUP;
    ns.wait_runs(within, "the function-cleanup finalizer", |runs| {
        let r = runs.iter().find(|r| r.name_any() == "upper")?;
        r.finalizers().iter().any(|f| f == finalizer).then_some(())
    })
    .await;
    ns.api::<Run>()
        .delete("upper", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    if let Some(deleting) = ns.api::<Run>().get_opt("upper").await.unwrap() {
        assert!(deleting.metadata.deletion_timestamp.is_some());
    }
    ns.wait_runs(within, "the deleted function Run to be gone", |runs| {
        (!runs.iter().any(|r| r.name_any() == "upper")).then_some(())
    })
    .await;
    ns.wait_phase("idle", RunPhase::Ready, within).await;
    // Each next one waits for the room and is woken by the release of the one before.
    whole("bounded", "echo").timeout("3s").create(ns).await;
    let idle = ns.wait_phase("idle", RunPhase::Timeout, within).await;
    assert_eq!(
        idle.status.unwrap().reason.as_deref(),
        Some(reasons::IDLE_TIMEOUT)
    );
    // spec.timeout from startTime: Timeout, reason Timeout.
    ns.wait_phase("bounded", RunPhase::Ready, within).await;
    whole("refused", "fail-register").create(ns).await;
    let bounded = ns.wait_phase("bounded", RunPhase::Timeout, within).await;
    assert_eq!(
        bounded.status.unwrap().reason.as_deref(),
        Some(reasons::TIMEOUT)
    );
    // A registration the server refuses fails the Run.
    let refused = ns.wait_phase("refused", RunPhase::Failed, within).await;
    let status = refused.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some(reasons::START_FAILED));
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("could not register the function"),
        "{status:?}"
    );
    // Under a retry policy a refused registration costs an attempt: registered again as
    // attempt 2, refused again, the attempts run out.
    whole("refused-twice", "fail-register")
        .retry_policy(2, "1s")
        .create(ns)
        .await;
    let twice = ns
        .wait_phase("refused-twice", RunPhase::Failed, within)
        .await;
    assert_eq!(twice.attempt(), 2, "{:?}", twice.status);
    assert_eq!(
        twice.status.unwrap().reason.as_deref(),
        Some(reasons::START_FAILED)
    );

    // Nothing leaked: a task Run of the whole Pod runs.
    run("whole-pod")
        .runtime("pool")
        .requests(&[("runs", 2)])
        .task(&["sh", "-c", "exit 0"])
        .create(ns)
        .await;
    ns.wait_phase("whole-pod", RunPhase::Succeeded, within)
        .await;
    let recorded = watch.finish_recorded().await;
    assert_eq!(held_by_status(ns), [("runs".to_string(), Some(0))]);
    // The deleted Ready Run was kept until runtimed had unregistered it and ended it.
    let ended_deleting = recorded.iter().any(|e| {
        e.run.name_any() == "upper"
            && e.run.metadata.deletion_timestamp.is_some()
            && e.run.phase() == RunPhase::Cancelled
    });
    assert!(
        ended_deleting,
        "the deleted Ready Run was not ended Cancelled before it went away"
    );
    eprintln!(
        "contract-functions: {} Run events checked for overcommit",
        recorded.len()
    );
}
