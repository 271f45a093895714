//! RuntimePodAvailability: the Runtime Pod can take the Run right now.
//!
//! Owns the availability and capacity predicate: the Pod is not being deleted, its `Ready`
//! condition is True, its runtimed heartbeat Lease is held by the Pod's UID and not expired
//! (`renewTime + leaseDurationSeconds > now`), its capacity annotations are readable, and the
//! complete request fits: `used + assumed + request <= capacity` for every requested
//! resource. A requested resource the Pod does not advertise never fits and is reported like
//! any shortage, as `Insufficient <resource>` (Kubernetes' wording for an extended resource a
//! node lacks); explain tells the two apart from the capacity it shows. Checks run in the
//! order above and the first failure is the reason. Room a Pod holds for a Run earlier in the
//! queue that it is nominated for counts as used; a request that fits only without it is
//! rejected as `reserved for an earlier Run`. It must not score or mutate anything.

use crate::api::resources::Shortfall;
use crate::scheduler::framework::{
    Adjust, ClusterEvent, FilterPlugin, Heartbeat, PodView, QueueingHint, Rejection, RunCycleState,
    Snapshot,
};

/// Registry key and `plugin` metric label.
pub const NAME: &str = "RuntimePodAvailability";

/// The Pod has a deletion timestamp.
pub const DELETING: &str = "Runtime Pod terminating";
/// The Pod's `Ready` condition is not True.
pub const NOT_READY: &str = "Runtime Pod not ready";
/// No heartbeat Lease, or one without holder or renew time.
pub const HEARTBEAT_MISSING: &str = "runtimed heartbeat missing";
/// The Lease is held by an identity other than the Pod's UID (e.g. a previous Pod of the
/// same name).
pub const HEARTBEAT_NOT_HELD: &str = "runtimed heartbeat not held by the Pod";
/// The Lease expired: `renewTime + leaseDurationSeconds <= now`.
pub const HEARTBEAT_STALE: &str = "runtimed heartbeat stale";
/// A `kruntimes.io/capacity.*` annotation could not be read.
pub const INVALID_CAPACITY: &str = "invalid capacity annotation";
/// A requested resource is not advertised or has no room; the message names the resource.
pub const INSUFFICIENT_RESOURCE: &str = "Insufficient resource";
/// The request would fit but for the room the Pod holds for a Run earlier in the queue that
/// it is nominated for (a starved Run it is being drained for).
pub const RESERVED_FOR_EARLIER_RUN: &str = "reserved for an earlier Run";

/// Every reason this plugin can give.
pub const REASONS: &[&str] = &[
    DELETING,
    NOT_READY,
    HEARTBEAT_MISSING,
    HEARTBEAT_NOT_HELD,
    HEARTBEAT_STALE,
    INVALID_CAPACITY,
    INSUFFICIENT_RESOURCE,
    RESERVED_FOR_EARLIER_RUN,
];

/// See the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimePodAvailability;

const _: &dyn FilterPlugin = &RuntimePodAvailability;

impl FilterPlugin for RuntimePodAvailability {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Room freed on a Pod helps only the Runs it fits; any change of a Runtime Pod may make
    /// it available or larger for every Run.
    fn queueing_hint(&self, event: ClusterEvent) -> Option<QueueingHint> {
        match event {
            ClusterEvent::CapacityReleased => Some(QueueingHint::QueueIfRoom),
            ClusterEvent::RuntimePodChanged => Some(QueueingHint::Queue),
            ClusterEvent::RuntimeChanged
            | ClusterEvent::TargetsChanged
            | ClusterEvent::WorkspaceChanged => None,
        }
    }

    fn filter(
        &self,
        snapshot: &Snapshot<'_>,
        state: &RunCycleState,
        pod: &PodView<'_>,
    ) -> Result<(), Rejection> {
        if let Some(reason) = unavailable(pod, snapshot.now()) {
            return Err(Rejection::new(NAME, reason));
        }
        match shortfalls(state, pod).next() {
            Some(_) if fits_but_for_nomination(state, pod) => {
                Err(Rejection::new(NAME, RESERVED_FOR_EARLIER_RUN))
            }
            Some(shortfall) => Err(Rejection::insufficient(
                NAME,
                INSUFFICIENT_RESOURCE,
                shortfall,
            )),
            None => Ok(()),
        }
    }
}

/// Why `pod` can take no Run at `now` whatever the request (terminating, not ready,
/// heartbeat missing, not held or stale, unreadable capacity), in the filter's order; `None`
/// when it is available. The filter's first checks, and what `status` and the
/// `kruntimes_scheduler_runtime_pods` gauge call an available Pod.
pub fn unavailable(pod: &PodView<'_>, now: jiff::Timestamp) -> Option<&'static str> {
    if pod.deleting() {
        return Some(DELETING);
    }
    if !pod.ready() {
        return Some(NOT_READY);
    }
    match pod.heartbeat() {
        Heartbeat::Missing => return Some(HEARTBEAT_MISSING),
        Heartbeat::NotHeld => return Some(HEARTBEAT_NOT_HELD),
        hb if !hb.is_fresh_at(now) => return Some(HEARTBEAT_STALE),
        Heartbeat::Expires(_) => {}
    }
    if !pod.capacity_ok() {
        return Some(INVALID_CAPACITY);
    }
    None
}

/// Whether the complete request would fit on `pod` if it did not hold room for an earlier
/// nominated Run.
fn fits_but_for_nomination(state: &RunCycleState, pod: &PodView<'_>) -> bool {
    let but_for_nomination = Adjust {
        without_nomination: true,
        ..Adjust::default()
    };
    pod.nomination().is_some() && pod.fits_with(state.request_list(), but_for_nomination)
}

/// The requested resources that do not fit on `pod` (actual plus assumed usage), in the
/// request's order, each with the numbers that decided it. The filter rejects with the first;
/// `explain` shows them all. A Shortfall is only built for a resource that does not fit.
pub fn shortfalls<'a>(
    state: &'a RunCycleState,
    pod: &'a PodView<'_>,
) -> impl Iterator<Item = Shortfall> + 'a {
    pod.shortfalls(state.request_list())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn verdict(world: World, r: RunBuilder) -> Result<(), String> {
        let mut verdicts = filter_verdicts(&RuntimePodAvailability, &world, &r);
        assert_eq!(verdicts.len(), 1, "one Pod per case");
        verdicts.remove(0).1
    }

    #[test]
    fn runtime_pod_availability_follows_the_spec_rules() {
        let ok = Ok(());
        let no = |m: &str| Err(m.to_string());
        type Case = (&'static str, World, RunBuilder, Result<(), String>);
        let table: Vec<Case> = vec![
            (
                "an omitted request is {runs: 1} and fits the default runs capacity of 2",
                World::new().pods([pod("p1")]).runs([run("x").on("p1")]),
                run("a"),
                ok.clone(),
            ),
            (
                "the default request counts against runs",
                World::new()
                    .pods([pod("p1")])
                    .runs([run("x").on("p1"), run("y").on("p1")]),
                run("a"),
                no("Insufficient runs"),
            ),
            (
                "a zero request is ignored even when the Pod lacks the resource",
                World::new().pods([pod("p1").capacity(&[("runs", 1)])]),
                run("a").requests(&[("example.com/gpu", 0)]),
                ok.clone(),
            ),
            (
                "a requested resource the Pod does not advertise is infeasible",
                World::new().pods([pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 1)])]),
                run("a").requests(&[("example.com/tpu", 1)]),
                no("Insufficient example.com/tpu"),
            ),
            (
                "an advertised capacity of zero has no room",
                World::new().pods([pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 0)])]),
                run("a").requests(&[("example.com/gpu", 1)]),
                no("Insufficient example.com/gpu"),
            ),
            (
                "runs: 0 closes the Pod to every Run",
                World::new().pods([pod("p1").capacity(&[("runs", 0), ("example.com/gpu", 1)])]),
                run("a").requests(&[("example.com/gpu", 1)]),
                no("Insufficient runs"),
            ),
            (
                "runs: 0 closes the Pod even to a Run that asks for runs: 0",
                World::new().pods([pod("p1").capacity(&[("runs", 0), ("example.com/gpu", 1)])]),
                run("a").requests(&[("example.com/gpu", 1), ("runs", 0)]),
                no("Insufficient runs"),
            ),
            (
                "a Run that asks for runs: 0 takes no slot on an open Pod",
                World::new()
                    .pods([pod("p1").capacity(&[("runs", 1), ("example.com/gpu", 2)])])
                    .runs([run("x").on("p1")]),
                run("a").requests(&[("example.com/gpu", 1), ("runs", 0)]),
                ok.clone(),
            ),
            (
                "every requested resource must fit: all fit",
                World::new()
                    .pods([pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 2)])])
                    .runs([run("x").requests(&[("example.com/gpu", 1)]).on("p1")]),
                run("a").requests(&[("example.com/gpu", 1), ("runs", 2)]),
                ok.clone(),
            ),
            (
                "every requested resource must fit: one is short",
                World::new()
                    .pods([pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 2)])])
                    .runs([run("x").requests(&[("example.com/gpu", 1)]).on("p1")]),
                run("a").requests(&[("example.com/gpu", 2)]),
                no("Insufficient example.com/gpu"),
            ),
            (
                "assumed usage counts like actual usage",
                World::new()
                    .pods([pod("p1").capacity(&[("runs", 2)])])
                    .runs([run("x").on("p1")])
                    .assume(run("y"), "p1"),
                run("a"),
                no("Insufficient runs"),
            ),
            (
                "an active Run with an unreadable request leaves none of that resource",
                World::new()
                    .pods([pod("p1").capacity(&[("runs", 8), ("example.com/gpu", 8)])])
                    .runs([run("x")
                        .request_strs(&[("example.com/gpu", "1.5")])
                        .on("p1")]),
                run("a").requests(&[("example.com/gpu", 1)]),
                no("Insufficient example.com/gpu"),
            ),
            (
                "a stale heartbeat makes the Pod unavailable",
                World::new().pods([pod("p1").stale()]),
                run("a"),
                no(HEARTBEAT_STALE),
            ),
            (
                "a missing Lease makes the Pod unavailable",
                World::new().pods([pod("p1").no_lease()]),
                run("a"),
                no(HEARTBEAT_MISSING),
            ),
            (
                "a Lease held by another identity makes the Pod unavailable",
                World::new().pods([pod("p1").foreign_lease()]),
                run("a"),
                no(HEARTBEAT_NOT_HELD),
            ),
            (
                "a Pod being deleted is unavailable, whatever else is wrong",
                World::new().pods([pod("p1").deleting().not_ready().stale()]),
                run("a"),
                no(DELETING),
            ),
            (
                "a NotReady Pod is unavailable",
                World::new().pods([pod("p1").not_ready()]),
                run("a"),
                no(NOT_READY),
            ),
            (
                "a malformed capacity annotation rejects the Pod with a bounded reason",
                World::new().pods([pod("p1").capacity_strs(&[("runs", "lots")])]),
                run("a"),
                no(INVALID_CAPACITY),
            ),
        ];
        for (case, world, r, want) in table {
            assert_eq!(verdict(world, r), want, "{case}");
        }
    }

    #[test]
    fn a_heartbeat_is_fresh_until_the_exact_expiry_instant() {
        // Renewed at NOW-40s with a 40 s duration: expired exactly at NOW.
        let at_expiry = World::new().pods([pod("p1").lease_renewed_ago(40)]);
        assert_eq!(
            verdict(at_expiry, run("a")),
            Err(HEARTBEAT_STALE.to_string())
        );
        let just_before = World::new().pods([pod("p1").lease_renewed_ago(39)]);
        assert_eq!(verdict(just_before, run("a")), Ok(()));
    }
}
