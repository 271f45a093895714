//! Leader election of `scheduler run` on the real control plane: a standby takes over when
//! the leader is killed (read from the Lease's own times) without overcommit, and a leader
//! that loses its Lease while alive stops at once.

use super::*;

/// The `--leader-election-lease-duration` the tests' schedulers run with.
const LEASE_SECONDS: i32 = 4;
/// What a standby takes, once the leader's Lease has lapsed, to take it: kube-lease-manager
/// wakes at the lapse, clears the lapsed Lease and waits a random 0.1-1 s (so that standbys
/// do not collide) before it writes its own, a few API calls in all.
const STANDBY_RETRY: jiff::SignedDuration = jiff::SignedDuration::from_secs(2);

/// Who holds the leader-election Lease `lease`.
fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

#[testkit::test]
async fn failover_the_standby_takes_over_and_nothing_is_overcommitted() {
    let ns = TestNs::new("failover").await;
    let mut capacity = HashMap::new();
    for i in 0..10 {
        let name = format!("py-{i}");
        pod(&name).capacity(&[("runs", 10)]).create(&ns).await;
        capacity.insert(name, Resources::from_iter([("runs", 10)]));
    }
    let watch = OvercommitWatch::start(&ns, capacity).await;
    let mut first = SchedulerProcess::start(&ns.name, 4, Some(&ns.name), "first").await;
    ns.wait_leader("first", Duration::from_secs(20)).await;
    // Every change of the leader-election Lease from here on, in the API server's order.
    let leases = ns.api::<Lease>();
    let held = leases.get(LEADER_LEASE).await.unwrap();
    assert_eq!(holder(&held), Some("first"));
    let since = held.resource_version().unwrap();
    let by_name = WatchParams::default().fields(&format!("metadata.name={LEADER_LEASE}"));
    let mut changes = leases.watch(&by_name, &since).await.unwrap().boxed();
    let _second = SchedulerProcess::start(&ns.name, 4, Some(&ns.name), "second").await;

    for i in 0..60 {
        run(&format!("r-{i:03}")).create(&ns).await;
    }
    let killed_at = Instant::now();
    first.kill();
    // The takeover happens while the next 60 are created, not after them.
    let create_more = async {
        for i in 60..120 {
            run(&format!("r-{i:03}")).create(&ns).await;
        }
    };
    // The Lease as "first" last renewed it, then as "second" took it.
    let takeover = async {
        let mut last = held;
        loop {
            let lease = match changes.next().await {
                Some(Ok(WatchEvent::Added(l) | WatchEvent::Modified(l))) => l,
                Some(Ok(WatchEvent::Bookmark(_) | WatchEvent::Deleted(_))) => continue,
                other => panic!("watching the leader-election Lease: {other:?}"),
            };
            match holder(&lease) {
                Some("first") => last = lease,
                Some("second") => return (last, lease, killed_at.elapsed()),
                _ => {}
            }
        }
    };
    let takeover = async {
        tokio::time::timeout(Duration::from_secs(30), takeover)
            .await
            .expect("the standby did not take the Lease over")
    };
    let ((), (renewed, acquired, seen_after)) = tokio::join!(create_more, takeover);
    // Read from the Lease itself: when "second" acquired it, against when "first"'s last
    // renewal lapsed (its renewTime + leaseDurationSeconds).
    let (renewed, acquired) = (renewed.spec.unwrap(), acquired.spec.unwrap());
    let duration = renewed
        .lease_duration_seconds
        .expect("leaseDurationSeconds");
    assert_eq!(
        duration, LEASE_SECONDS,
        "the tests' --leader-election-lease-duration"
    );
    let lapsed = renewed
        .renew_time
        .expect("the old holder's renewTime")
        .0
        .checked_add(jiff::SignedDuration::from_secs(duration.into()))
        .unwrap();
    let after_lapse = acquired
        .acquire_time
        .expect("the new holder's acquireTime")
        .0
        .duration_since(lapsed);
    // Never before the old holder's Lease lapsed: two leaders at once…
    assert!(
        !after_lapse.is_negative(),
        "the standby took the Lease {after_lapse:#} before it lapsed"
    );
    // …and within one retry of the standby once it had.
    assert!(
        after_lapse <= STANDBY_RETRY,
        "the standby took the Lease {after_lapse:#} after it lapsed, more than one retry ({STANDBY_RETRY:#})"
    );
    let runs = ns
        .wait_runs(
            Duration::from_secs(60),
            "100 scheduled, 20 pending",
            |runs| {
                let scheduled = world::count(runs, RunPhase::Scheduled);
                (scheduled == 100 && world::waiting(runs) == 20).then(|| runs.to_vec())
            },
        )
        .await;
    watch.finish().await;
    eprintln!(
        "failover: the standby took the Lease {:.2}s after the leader's last renewal lapsed ({duration}s Lease); the test saw it {:.1}s after the kill",
        after_lapse.as_secs_f64(),
        seen_after.as_secs_f64()
    );
    assert_eq!(runs.len(), 120);
}

#[testkit::test]
async fn a_leader_that_loses_its_lease_while_alive_stops_at_once() {
    let ns = TestNs::new("leaselost").await;
    pod("py-a").capacity(&[("runs", 4)]).create(&ns).await;
    let mut leader = SchedulerProcess::start(&ns.name, 1, Some(&ns.name), "leader").await;
    ns.wait_leader("leader", Duration::from_secs(20)).await;
    run("before").create(&ns).await;
    ns.wait_runs(WAIT, "before scheduled", |runs| {
        (world::phase_of(runs, "before") == Some(RunPhase::Scheduled)).then_some(())
    })
    .await;

    // Another replica takes the Lease over while the leader is alive and connected.
    let takeover = json!({"spec": {
        "holderIdentity": "intruder",
        "leaseDurationSeconds": 300,
        "renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
    }});
    let _: Lease = ns.merge("kruntimes-scheduler", takeover).await;
    let what = "the deposed leader to exit";
    let status = eventually(Duration::from_secs(10), what, async || {
        leader.child.try_wait().unwrap().ok_or("still running")
    })
    .await;
    assert!(
        !status.success(),
        "a deposed leader must exit non-zero, got {status}"
    );
}
