//! Priority and preemption on the real control plane with real runtimed processes: an urgent
//! Run is the next one placed however many wait; a missing PriorityClass is waited for; a
//! Scheduled lower-priority Run races runtimed's claim against its preemption without ever
//! failing or overcommitting; a Running Run of a preemptible class is stopped, sent back to
//! Pending for attempt 2 and runs again, while one of a plain class is never preempted. The
//! shipped namespace restriction of classes (deploy/priority-policy.yaml) refuses what it should.

use testkit as support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use kruntimes::api::status::{CONDITION_DISRUPTION_TARGET, CONDITION_RUNNING, reasons};
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{PriorityClassBuilder, RunBuilder, priority_class, run};
use kruntimes::util::process::Signal;
use support::pool::{HEARTBEAT, Pool};
use support::world::{Create, RunEvents, SchedulerProcess, TestNs, eventually};

/// runtimed's grace for a preempted Run (`--shutdown-grace`) in these tests.
const GRACE: Duration = Duration::from_secs(3);

/// How long after the scheduler's stop request runtimed's answer may be stamped, beyond
/// [`GRACE`]: one `--heartbeat-interval` of these tests ([`HEARTBEAT`]) for runtimed's watch
/// to deliver the request and its answer's write to land (runtimed acts on the watch event
/// itself, it polls nothing; a runtimed that renews its heartbeat every interval gets a write
/// through within one), and 1 s because both conditions' times are stored in whole seconds.
fn answer_margin() -> jiff::SignedDuration {
    let [flag, interval, ..] = HEARTBEAT;
    assert_eq!(flag, "--heartbeat-interval");
    let interval = kruntimes::util::duration::parse_duration(interval).unwrap();
    jiff::SignedDuration::try_from(interval).unwrap() + jiff::SignedDuration::from_secs(1)
}

/// A Runtime of one Pod with `runs: 1` and its runtimed ([`Pool`]), the scheduler, and the
/// PriorityClasses of the test (cluster-scoped, so named after the namespace and deleted at
/// the end).
struct Scenario {
    pool: Pool,
    classes: Vec<String>,
    scheduler: SchedulerProcess,
}

impl std::ops::Deref for Scenario {
    type Target = Pool;

    fn deref(&self) -> &Pool {
        &self.pool
    }
}

impl Scenario {
    async fn start(prefix: &str, classes: &[PriorityClassBuilder]) -> Self {
        Self::start_with_claim_delay(prefix, classes, None).await
    }

    /// With `claim_delay`, the scheduler and runtimed both run with that `--claim-delay`
    /// (the default otherwise).
    async fn start_with_claim_delay(
        prefix: &str,
        classes: &[PriorityClassBuilder],
        claim_delay: Option<&str>,
    ) -> Self {
        let ns = TestNs::new(prefix).await;
        let delay = claim_delay.map(|d| format!("--claim-delay={d}"));
        let extra: Vec<&str> = delay.iter().map(String::as_str).collect();
        let kubeconfig = support::control_plane().kubeconfig.clone();
        let scheduler =
            SchedulerProcess::start_with(&kubeconfig, &ns.name, 4, None, prefix, &extra).await;
        let names = ns.priority_classes(classes).await;
        let grace = format!("{}s", GRACE.as_secs());
        let mut args = HEARTBEAT.to_vec();
        args.extend(["--shutdown-grace", &grace]);
        args.extend(extra.iter().copied());
        let pool = Pool::start(&ns, "pool", 1, &[("runs", 1)], &args).await;
        // runtimed is up (its heartbeat written) once a first Run ran.
        pool.run("warm-up").create(&ns).await;
        ns.wait_runs(
            Duration::from_secs(60),
            "the warm-up Run to succeed",
            |runs| {
                find(runs, "warm-up")
                    .filter(|r| r.phase() == RunPhase::Succeeded)
                    .map(|_| ())
            },
        )
        .await;
        Scenario {
            pool,
            classes: names,
            scheduler,
        }
    }

    fn class(&self, name: &str) -> String {
        self.ns.class(name)
    }

    fn run_of_class(&self, name: &str, class: Option<&str>, seconds: f64) -> RunBuilder {
        let r = self
            .run(name)
            .task(&["sh", "-c", &format!("sleep {seconds}")]);
        match class {
            Some(c) => r.priority_class(&self.class(c)),
            None => r,
        }
    }

    /// A Run that runs until the test opens its gate ([`Pool::open`] with its name, or
    /// `all`), so it is still running when the test acts on it however slowly the test gets
    /// there. `first_attempt_only`: an attempt after the first (a preempted Run running
    /// again) ends at once.
    fn held_of_class(
        &self,
        name: &str,
        class: Option<&str>,
        first_attempt_only: bool,
    ) -> RunBuilder {
        let script = match first_attempt_only {
            true => self.gates.hold_first_attempt(name),
            false => self.gates.hold(name),
        };
        let r = self.run(name).task(&["sh", "-c", &script]);
        match class {
            Some(c) => r.priority_class(&self.class(c)),
            None => r,
        }
    }

    async fn finish(self) {
        self.open("all");
        self.ns.delete_priority_classes(&self.classes).await;
    }
}

fn find<'a>(runs: &'a [Run], name: &str) -> Option<&'a Run> {
    runs.iter().find(|r| r.name_any() == name)
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_urgent_run_is_the_next_placed_ahead_of_twenty_waiting_ones_twenty_times_out_of_twenty()
{
    let pool = Scenario::start("prio-next", &[priority_class("urgent", 1000)]).await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;
    let events = RunEvents::start(ns).await;
    // Each round uses up one waiting Run: 20 always wait behind the urgent one. A batch Run
    // is held until the test has created the urgent one, so the Pod is busy when it arrives.
    const ROUNDS: usize = 20;
    for i in 0..ROUNDS + 21 {
        pool.held_of_class(&format!("batch-{i:02}"), None, false)
            .create(ns)
            .await;
    }
    let mut urgent_created = Vec::new();
    for round in 0..ROUNDS {
        // A fresh Run has just started: the urgent one arrives while the Pod is busy, with
        // more than 20 priority-0 Runs created before it waiting.
        let running = ns
            .wait_runs(Duration::from_secs(60), "a Run running", |runs| {
                runs.iter()
                    .find(|r| r.phase() == RunPhase::Running && !r.name_any().starts_with("urgent"))
                    .filter(|_| {
                        runs.iter()
                            .filter(|r| r.phase() == RunPhase::Pending)
                            .count()
                            >= 20
                    })
                    .map(|r| r.name_any())
            })
            .await;
        let name = format!("urgent-{round:02}");
        pool.run_of_class(&name, Some("urgent"), 0.3)
            .create(ns)
            .await;
        // The urgent Run is stored; now the busy one may end.
        pool.open(&running);
        urgent_created.push((name.clone(), running));
        ns.wait_runs(
            Duration::from_secs(60),
            "the urgent Run to succeed",
            |runs| {
                find(runs, &name)
                    .is_some_and(|r| r.phase() == RunPhase::Succeeded)
                    .then_some(())
            },
        )
        .await;
    }
    pool.open("all");
    events.catch_up().await;
    let history = events.events();
    // The order Runs were bound in, by first Scheduled event.
    let mut bound: Vec<String> = Vec::new();
    for e in history.iter().filter(|e| !e.deleted) {
        let name = e.run.name_any();
        if e.run.active_pod().is_some() && !bound.contains(&name) {
            bound.push(name);
        }
    }
    for (urgent, busy) in &urgent_created {
        let at = bound
            .iter()
            .position(|n| n == busy)
            .expect("the busy Run was bound");
        assert_eq!(
            bound.get(at + 1),
            Some(urgent),
            "{urgent} arrived while {busy} ran and was not the next Run placed: {:?}",
            &bound[at..(at + 3).min(bound.len())]
        );
    }
    let urgent = ns.get_run("urgent-00").await;
    assert_eq!(urgent.status.as_ref().and_then(|s| s.priority), Some(1000));
    let checked = watch.finish().await;
    eprintln!(
        "{ROUNDS}/{ROUNDS} urgent Runs were the next placed; {checked} Run events checked for overcommit"
    );
    pool.finish().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_a_missing_priority_class_waits_for_it_and_runs_once_it_exists() {
    let pool = Scenario::start("prio-missing", &[]).await;
    let ns = &pool.ns;
    pool.run_of_class("late", Some("later"), 0.1)
        .create(ns)
        .await;
    let message = ns
        .wait_runs(
            Duration::from_secs(30),
            "the Run to say its class is missing",
            |runs| {
                let status = find(runs, "late")?.status.clone()?;
                (status.reason.as_deref() == Some(reasons::PRIORITY_CLASS_NOT_FOUND))
                    .then_some(status.message.unwrap_or_default())
            },
        )
        .await;
    assert!(message.contains(&pool.class("later")), "{message}");
    assert_eq!(ns.get_run("late").await.phase(), RunPhase::Pending);
    let api: Api<PriorityClass> = Api::all(ns.client.clone());
    let mut class = priority_class("later", 7).build();
    class.metadata.name = Some(pool.class("later"));
    class.metadata.uid = None;
    api.create(&PostParams::default(), &class).await.unwrap();
    let done = ns
        .wait_runs(Duration::from_secs(30), "the Run to succeed", |runs| {
            find(runs, "late")
                .filter(|r| r.phase() == RunPhase::Succeeded)
                .cloned()
        })
        .await;
    assert_eq!(done.status.and_then(|s| s.priority), Some(7));
    let _ = api
        .delete(&pool.class("later"), &DeleteParams::default())
        .await;
    pool.finish().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_racing_runtimed_claim_never_fails_the_lower_run_nor_overcommits() {
    // Both claim before they start (`--claim-delay=0s`): the race of a level-1 preemption
    // with a claim. With the default delay a Run this freshly bound is nobody's level-1
    // victim until its claim window has passed (the scheduler's unit tests).
    let pool = Scenario::start_with_claim_delay(
        "prio-race",
        &[priority_class("urgent", 1000)],
        Some("0s"),
    )
    .await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;
    const ROUNDS: usize = 100;
    let (mut preempted, mut claimed_first) = (0, 0);
    for round in 0..ROUNDS {
        let (low, urgent) = (format!("low-{round:03}"), format!("urgent-{round:03}"));
        // runtimed frozen: the low Run is bound but not claimed.
        pool.agent().signal(Signal::Stop);
        pool.run_of_class(&low, None, 0.0).create(ns).await;
        ns.wait_runs(Duration::from_secs(30), "the low Run Scheduled", |runs| {
            find(runs, &low)
                .filter(|r| r.phase() == RunPhase::Scheduled)
                .map(|_| ())
        })
        .await;
        pool.run_of_class(&urgent, Some("urgent"), 0.0)
            .create(ns)
            .await;
        // Thawed at a random moment of the scheduler's preemption.
        let pause = Duration::from_millis(u64::from(spread_ms(round)));
        tokio::time::sleep(pause).await;
        pool.agent().signal(Signal::Cont);
        let runs = ns
            .wait_runs(Duration::from_secs(60), "both Runs to succeed", |runs| {
                [&low, &urgent]
                    .iter()
                    .all(|n| find(runs, n).is_some_and(|r| r.phase().is_terminal()))
                    .then(|| runs.to_vec())
            })
            .await;
        for name in [&low, &urgent] {
            let r = find(&runs, name).unwrap();
            assert_eq!(
                r.phase(),
                RunPhase::Succeeded,
                "{name} ended {:?}: {:?}",
                r.phase(),
                r.status.as_ref().and_then(|s| s.message.clone())
            );
        }
    }
    let history = watch.finish_recorded().await;
    let checked = history.len();
    // Preempted: a version of the low Run said so (before it was placed again).
    for round in 0..ROUNDS {
        let low = format!("low-{round:03}");
        let was_preempted = history.iter().any(|e| {
            e.run.name_any() == low
                && e.run.status.as_ref().and_then(|s| s.reason.as_deref())
                    == Some(reasons::PREEMPTED)
        });
        if was_preempted {
            preempted += 1;
        } else {
            claimed_first += 1;
        }
    }
    // Every preemption whose write landed is counted, and only those: a level-1 victim per
    // round the urgent Run went first, none of level 2 (nothing Running was preempted).
    let metrics = pool.scheduler.metrics().await;
    let preemptions = |level: &str, result: &str| {
        let series = format!(
            "kruntimes_scheduler_preemptions_total{{level=\"{level}\",result=\"{result}\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .unwrap_or_else(|| panic!("no {series}in the scheduler's metrics:\n{metrics}"))
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    eprintln!(
        "{ROUNDS} races: the urgent Run went first {preempted} times (preempted), runtimed's claim won {claimed_first} times; {checked} Run events checked for overcommit"
    );
    assert!(
        preempted > 0,
        "the urgent Run never preempted the Scheduled one"
    );
    assert_eq!(
        preemptions("scheduled", "succeeded"),
        preempted as u64,
        "level-1 preemptions counted against the rounds the watch saw preempted"
    );
    assert_eq!(preemptions("running", "succeeded"), 0);
    pool.finish().await;
}

/// A deterministic spread of 0..=50 ms over the rounds (each value about twice).
fn spread_ms(round: usize) -> u8 {
    ((round * 37 + 11) % 51) as u8
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_of_a_preemptible_class_is_stopped_requeued_and_runs_again_a_plain_one_never()
{
    let pool = Scenario::start(
        "prio-running",
        &[
            priority_class("urgent", 1000),
            priority_class("batch", 0).preemptible(),
            priority_class("plain", 0),
        ],
    )
    .await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;
    let events = RunEvents::start(ns).await;

    // A plain class is never preempted: the urgent Run waits, nominated, until it ends.
    pool.held_of_class("plain", Some("plain"), false)
        .create(ns)
        .await;
    ns.wait_runs(Duration::from_secs(30), "plain Running", |runs| {
        find(runs, "plain")
            .filter(|r| r.phase() == RunPhase::Running)
            .map(|_| ())
    })
    .await;
    pool.run_of_class("urgent-1", Some("urgent"), 0.2)
        .create(ns)
        .await;
    let nominated = ns
        .wait_runs(Duration::from_secs(30), "urgent-1 nominated", |runs| {
            find(runs, "urgent-1")?
                .status
                .as_ref()?
                .nominated_pod_name
                .clone()
        })
        .await;
    assert_eq!(nominated, pool.pod());
    pool.open("plain");
    ns.wait_runs(Duration::from_secs(30), "urgent-1 Succeeded", |runs| {
        find(runs, "urgent-1")
            .filter(|r| r.phase() == RunPhase::Succeeded)
            .map(|_| ())
    })
    .await;
    let plain = ns.get_run("plain").await;
    assert_eq!(plain.phase(), RunPhase::Succeeded);
    assert_eq!(plain.status.as_ref().and_then(|s| s.attempt), Some(1));

    // A preemptible class: stopped within its grace, back to Pending with attempt 2.
    // Its first attempt runs until stopped; the second ends at once.
    pool.held_of_class("batch", Some("batch"), true)
        .create(ns)
        .await;
    ns.wait_runs(Duration::from_secs(30), "batch Running", |runs| {
        find(runs, "batch")
            .filter(|r| r.phase() == RunPhase::Running)
            .map(|_| ())
    })
    .await;
    pool.gates.reached_first_attempt("batch").await;
    let asked = Instant::now();
    pool.run_of_class("urgent-2", Some("urgent"), 0.2)
        .create(ns)
        .await;
    ns.wait_runs(Duration::from_secs(30), "batch back to Pending", |runs| {
        find(runs, "batch")
            .filter(|r| r.status.as_ref().and_then(|s| s.attempt) == Some(2))
            .map(|_| ())
    })
    .await;
    let seen_after = asked.elapsed();
    // runtimed's own write, before the scheduler's Pending message replaces its reason.
    events.catch_up().await;
    let history = events.events();
    let requeued = history
        .iter()
        .find(|e| {
            e.run.name_any() == "batch"
                && e.run.phase() == RunPhase::Pending
                && e.run.status.as_ref().and_then(|s| s.attempt) == Some(2)
        })
        .expect("the requeued version of batch");
    let status = requeued.run.status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some(reasons::PREEMPTED));
    assert_eq!(status.attempt, Some(2));
    assert!(status.assigned_pod.is_none());
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_DISRUPTION_TARGET),
        "the stop request is answered"
    );
    // Stopped at the scheduler's request and within its grace, read from the Run's own
    // conditions: when the scheduler asked (DisruptionTarget=True, which the answer removes,
    // so from the version before it) and when runtimed answered (Running=False/Preempted).
    let request = history
        .iter()
        .filter(|e| e.run.name_any() == "batch" && !e.deleted)
        .find_map(|e| {
            e.run
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_DISRUPTION_TARGET && c.status == "True")
                .cloned()
        })
        .expect("a version of batch with the scheduler's stop request (DisruptionTarget=True)");
    assert_eq!(request.reason, reasons::PREEMPTION_BY_SCHEDULER);
    let answer = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_RUNNING)
        .filter(|c| c.status == "False" && c.reason == reasons::PREEMPTED)
        .unwrap_or_else(|| panic!("runtimed's answer has no Running=False/Preempted: {status:?}"));
    let answered_in = answer
        .last_transition_time
        .0
        .duration_since(request.last_transition_time.0);
    let bound = jiff::SignedDuration::try_from(GRACE).unwrap() + answer_margin();
    eprintln!(
        "preempted: runtimed answered the stop request {answered_in:#} after it was written (grace {GRACE:?}, bound {bound:#}); the test saw the Run back to Pending {seen_after:?} after it created the urgent one"
    );
    assert!(
        !answered_in.is_negative(),
        "runtimed's answer ({}) is stamped before the scheduler's request ({})",
        answer.last_transition_time.0,
        request.last_transition_time.0
    );
    assert!(
        answered_in <= bound,
        "runtimed answered the stop request {answered_in:#} after it, more than the grace {GRACE:?} + {:#}",
        answer_margin()
    );
    let done = ns
        .wait_runs(Duration::from_secs(60), "both Succeeded", |runs| {
            let (b, u) = (find(runs, "batch")?, find(runs, "urgent-2")?);
            (b.phase() == RunPhase::Succeeded && u.phase() == RunPhase::Succeeded)
                .then(|| (b.clone(), u.clone()))
        })
        .await;
    assert_eq!(
        done.0.status.as_ref().and_then(|s| s.attempt),
        Some(2),
        "ran again"
    );
    assert_eq!(done.1.phase(), RunPhase::Succeeded);
    // In watch order (startTime has whole seconds only): the urgent Run was admitted before
    // the batch Run's second attempt was, on the Pod's one slot. Admitted: Running, or, for a
    // task whose claim runtimed held and wrote with its end (`--claim-delay`), ended.
    events.catch_up().await;
    let history = events.events();
    let first_running = |name: &str, attempt: i32| {
        history.iter().position(|e| {
            e.run.name_any() == name
                && (e.run.phase() == RunPhase::Running || e.run.phase().is_terminal())
                && e.run.status.as_ref().and_then(|s| s.attempt) == Some(attempt)
        })
    };
    let (urgent_ran, batch_again) = (first_running("urgent-2", 1), first_running("batch", 2));
    assert!(
        urgent_ran.is_some() && batch_again.is_some() && urgent_ran < batch_again,
        "the urgent Run did not run before the batch Run's second attempt: {urgent_ran:?}, {batch_again:?}"
    );
    // The plain Run was never asked to stop.
    assert!(
        !events.events().iter().any(|e| e.run.name_any() == "plain"
            && e.run.status.as_ref().is_some_and(|s| s
                .conditions
                .iter()
                .any(|c| c.type_ == CONDITION_DISRUPTION_TARGET))),
        "a Run of a class without kruntimes.io/preemptible was asked to stop"
    );
    watch.finish().await;
    pool.finish().await;
}

/// Creates `run` in `ns` as the test's admin would, returning the API server's answer.
async fn try_create(ns: &TestNs, run: RunBuilder, dry_run: bool) -> Result<Run, kube::Error> {
    let mut object = run.build();
    object.metadata.namespace = Some(ns.name.clone());
    object.metadata.uid = None;
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    ns.api::<Run>().create(&params, &object).await
}

/// The shipped restriction of PriorityClasses to namespaces (deploy/priority-policy.yaml, its
/// ValidatingAdmissionPolicy with a ConfigMap parameter) on the real API server: a listed class
/// is refused outside its namespaces with a message naming class and namespace, and nothing is
/// created; unlisted classes and Runs without a class pass; `*` opens a class to everyone.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restricted_priority_class_is_usable_only_in_the_namespaces_the_admin_lists() {
    let allowed = TestNs::new("prio-allowed").await;
    let other = TestNs::new("prio-other").await;
    support::kubectl_apply("deploy/priority-policy.yaml", None);
    let params: Api<ConfigMap> = Api::namespaced(allowed.client.clone(), "kubectl-kruntimes");
    let class = format!("{}-urgent", allowed.name);
    let set = async |value: &str| {
        params
            .patch(
                "kubectl-kruntimes-priority-classes",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {class.as_str(): value}})),
            )
            .await
            .expect("patch the policy's ConfigMap");
    };
    set(&format!("{}, somewhere-else", allowed.name)).await;
    let urgent = |name: &str| run(name).runtime("pool").priority_class(&class);

    // The policy and its parameter reach the API server's admission asynchronously: probe with
    // dry runs, which admission judges alike and which create nothing.
    let refused = eventually(
        Duration::from_secs(30),
        "the policy to refuse the class outside its namespaces",
        async || match try_create(&other, urgent("probe"), true).await {
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(e.message),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert!(
        refused.contains(&format!(
            "spec.priorityClassName: PriorityClass {class} may not be used by Runs in namespace {}",
            other.name
        )) && refused.contains(&format!("kept to: {}, somewhere-else", allowed.name)),
        "the refusal names the field, class and namespace: {refused}"
    );
    // A real create is refused too, and nothing is created.
    let err = try_create(&other, urgent("refused"), false)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 403),
        "{err}"
    );
    let left = other.api::<Run>().get_opt("refused").await.unwrap();
    assert!(left.is_none(), "a refused Run was created: {left:?}");

    // The listed namespace may; other classes and Runs without one are not restricted.
    try_create(&allowed, urgent("ok"), false)
        .await
        .expect("the listed namespace may use the class");
    let plain = format!("{}-batch", allowed.name);
    try_create(&other, run("unlisted").priority_class(&plain), false)
        .await
        .expect("an unlisted class is not restricted");
    try_create(&other, run("no-class"), false)
        .await
        .expect("a Run without a class is not restricted");

    // "*" opens the class to every namespace.
    set("*").await;
    eventually(
        Duration::from_secs(30),
        "the class to be open to every namespace",
        async || try_create(&other, urgent("probe"), true).await.map(|_| ()),
    )
    .await;
    // The ConfigMap is shared by the suite's tests: leave it restricting nothing.
    params
        .patch(
            "kubectl-kruntimes-priority-classes",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {class.as_str(): null}})),
        )
        .await
        .expect("unrestrict the class");
}
