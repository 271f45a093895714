//! Property tests of queue order and nominations: under any pattern of arrivals, lifetimes,
//! priorities, preemptions and releases, nothing overcommits, a Pod holds at most one
//! nomination, nothing is placed while a Run earlier in (priority, creation, UID) order fits
//! (checked on the state the cycle decided on, before its Reserve), room nominated for an
//! earlier Run is never given to a later one, and a large Run behind a stream of small ones
//! is placed within a bounded number of steps.
//!
//! The checks' own power is tested here too; example cases of the same order and nominations
//! are in `queue_properties/examples.rs`.

use proptest::prelude::*;

use crate::api::Run;
use crate::scheduler::framework::*;
use crate::testing::*;

use super::Lcg;

const PODS: [&str; 2] = ["p1", "p2"];
const THRESHOLD: i64 = 5;
const EPOCH: i64 = 1_700_000_000;

fn registry() -> Registry {
    crate::scheduler::plugins::registry()
}

/// One simulated Runtime: two Pods of `runs: capacity`, Runs that arrive, are cycled as the
/// scheduling loop pops them, are observed bound, and finish.
struct Sim {
    cache: SchedulerCache,
    registry: Registry,
    capacity: u64,
    now: i64,
    runs: Vec<SimRun>,
    /// Draws which Binds are observed late (written in the background while the loop goes
    /// on); `None`: every Bind is observed at once.
    lag: Option<Lcg>,
    /// Reserved Runs whose Bind is not observed yet, with their Pod.
    in_flight: Vec<(usize, String)>,
}

#[derive(Clone)]
struct SimRun {
    builder: RunBuilder,
    size: u64,
    /// Its `status.priority` (recorded at arrival, as after the scheduler's first write).
    priority: i32,
    /// Bound on this Pod (observed), with the step it started.
    on: Option<(String, i64)>,
    done: bool,
}

impl Sim {
    fn new(capacity: u64) -> Self {
        let pods = PODS.iter().map(|p| {
            pod(p)
                .capacity(&[("runs", capacity)])
                .lease_renewed_ago(-100_000)
        });
        Sim {
            cache: World::new()
                .pods(pods)
                .cache()
                .with_starvation_threshold(jiff::SignedDuration::from_secs(THRESHOLD)),
            registry: registry(),
            capacity,
            now: 0,
            runs: Vec::new(),
            lag: None,
            in_flight: Vec::new(),
        }
    }

    /// runtimed renews every Pod's heartbeat now (a Lease is fresh for its duration from
    /// when the scheduler observed it).
    fn renew_heartbeats(&mut self) {
        for p in PODS {
            let builder = pod(p).capacity(&[("runs", self.capacity)]);
            let uid = builder.build().metadata.uid.expect("a Pod UID");
            let lease = builder
                .lease_at(&uid, self.at(), LEASE_SECONDS)
                .expect("a heartbeat");
            self.cache.apply(&lease, self.at());
        }
    }

    fn with_lag(mut self, seed: u64) -> Self {
        self.lag = Some(Lcg(seed));
        self
    }

    /// Observes the Bind of Run `i` on `pod`.
    fn observe(&mut self, i: usize, pod: String) {
        self.cache
            .apply(&self.runs[i].builder.clone().on(&pod).build(), self.at());
        self.runs[i].on = Some((pod, self.now));
    }

    /// Observes the Binds in flight the generator picks (all of them when `all`).
    fn observe_in_flight(&mut self, all: bool) {
        let in_flight = std::mem::take(&mut self.in_flight);
        for (i, pod) in in_flight {
            let late = !all && self.lag.as_mut().is_some_and(|l| l.next() % 2 == 0);
            if late {
                self.in_flight.push((i, pod));
            } else {
                self.observe(i, pod);
            }
        }
    }

    fn at(&self) -> jiff::Timestamp {
        at(self.now)
    }

    fn arrive(&mut self, size: u64) -> usize {
        self.arrive_at(size, 0)
    }

    /// A Run of `size` whose priority is `priority` (0: as a Run with no class, unrecorded).
    fn arrive_at(&mut self, size: u64, priority: i32) -> usize {
        let i = self.runs.len();
        let builder = run(&format!("r{i:04}"))
            .requests(&[("runs", size)])
            .created(EPOCH + self.now);
        let builder = match priority {
            0 => builder,
            p => builder.priority(p),
        };
        self.cache.apply(&builder.build(), self.at());
        self.runs.push(SimRun {
            builder,
            size,
            priority,
            on: None,
            done: false,
        });
        i
    }

    /// Whether Run `j` comes before Run `i` in queue order: higher priority, then earlier
    /// creation, then UID (the index, as names and UIDs follow it).
    fn before(&self, j: usize, i: usize) -> bool {
        (std::cmp::Reverse(self.runs[j].priority), j)
            < (std::cmp::Reverse(self.runs[i].priority), i)
    }

    /// Carries out a level-1 preemption as the controller does: each victim whose Bind the
    /// watch has shown on that Pod goes back to Pending (keeping its creation time, so its
    /// place in the order); when one has not been seen there yet, the controller writes
    /// nothing for it and the preemptor backs off to plan again.
    fn preempt(&mut self, preemptor: &RunKey, preemption: &Preemption) {
        let mut replan = false;
        for victim in &preemption.victims {
            let v = self.index_of(&victim.name);
            let seen_there = self.runs[v]
                .on
                .as_ref()
                .is_some_and(|(p, _)| *p == preemption.pod);
            if victim.admitted || !seen_there {
                replan = true;
                continue;
            }
            self.runs[v].on = None;
            let pending = self.runs[v].builder.build();
            self.cache.apply(&pending, self.at());
        }
        if replan {
            self.cache
                .retry(&preemptor.namespace, &preemptor.uid, true, self.at());
        }
    }

    fn pending(&self) -> Vec<usize> {
        (0..self.runs.len())
            .filter(|&i| self.runs[i].on.is_none() && !self.runs[i].done)
            .filter(|&i| self.in_flight.iter().all(|(j, _)| *j != i))
            .collect()
    }

    /// One pop of the scheduling loop, if a Run is due; a reservation is observed bound at
    /// once. Checks order on the state the cycle decided on, before its Reserve.
    fn step(&mut self) -> Result<Option<Scheduled>, TestCaseError> {
        self.observe_in_flight(false);
        let before = self.cache.clone();
        let Some(scheduled) = self.cache.schedule_next(&self.registry, self.at()) else {
            return Ok(None);
        };
        let i = self.index_of(scheduled.run.metadata.name.as_deref().unwrap());
        prop_assert!(
            self.pending().contains(&i),
            "r{} was cycled while not waiting",
            i
        );
        match &scheduled.outcome {
            ScheduleOutcome::Reserved { pod, .. } => {
                self.check_no_earlier_fits(&before, i)?;
                let pod = pod.clone();
                self.in_flight.push((i, pod));
                self.check_nominated_room_kept(&before, i)?;
                self.observe_in_flight(false);
            }
            ScheduleOutcome::Unschedulable(_) => {
                if let Some(preemption) = &scheduled.preemption {
                    let key = self.runs[i].builder.key();
                    self.preempt(&key, preemption);
                }
            }
            other => prop_assert!(false, "unexpected outcome {:?}", other),
        }
        self.check()?;
        Ok(Some(scheduled))
    }

    /// Pops until nothing is due and every Bind is observed.
    fn cycle_all(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..10_000 {
            if self.step()?.is_none() {
                if self.in_flight.is_empty() {
                    return Ok(());
                }
                self.observe_in_flight(true);
            }
        }
        prop_assert!(false, "the queue never ran dry: a wakeup loop");
        Ok(())
    }

    fn index_of(&self, name: &str) -> usize {
        name[1..].parse().unwrap()
    }

    fn finish(&mut self, i: usize) {
        let r = &mut self.runs[i];
        let pod = r.on.take().unwrap().0;
        r.done = true;
        let done = r.builder.clone().on(&pod).succeeded().build();
        self.cache.apply(&done, at(self.now));
    }

    /// What Pod `p` holds: Runs observed bound there and Binds in flight to it.
    fn used(&self, p: &str) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.on.as_ref().is_some_and(|(on, _)| on == p))
            .map(|r| r.size)
            .sum::<u64>()
            + self
                .in_flight
                .iter()
                .filter(|(_, on)| on == p)
                .map(|(i, _)| self.runs[*i].size)
                .sum::<u64>()
    }

    /// Run `i` was just reserved (in flight): if its Pod was nominated, on the state its cycle
    /// decided on, for a Run earlier in the order, that Run's room is still free beside it.
    fn check_nominated_room_kept(
        &self,
        before: &SchedulerCache,
        i: usize,
    ) -> Result<(), TestCaseError> {
        let (_, pod) = self.in_flight.last().expect("just reserved");
        for (key, nomination) in before.nominations().in_scope(NS, RUNTIME) {
            let n = self
                .runs
                .iter()
                .position(|r| r.builder.key() == *key)
                .expect("a nominated Run of the simulation");
            if nomination.pod == *pod && self.before(n, i) {
                let used = self.used(pod);
                prop_assert!(
                    used + self.runs[n].size <= self.capacity,
                    "r{} (priority {}) took room on {} nominated for the earlier r{} (priority {}): {} used, {} needed",
                    i,
                    self.runs[i].priority,
                    pod,
                    n,
                    self.runs[n].priority,
                    used,
                    self.runs[n].size
                );
            }
        }
        Ok(())
    }

    /// Run `i` was placed on the state `before` (its cycle's, before Reserve): no Run earlier
    /// in the order that waits in the queue (not backing off) may fit there.
    fn check_no_earlier_fits(
        &self,
        before: &SchedulerCache,
        i: usize,
    ) -> Result<(), TestCaseError> {
        let earlier = (0..self.runs.len()).filter(|&j| j != i && self.before(j, i));
        check_no_earlier_fits(before, &self.registry, &self.runs, earlier, i, self.at())
    }

    /// No overcommit, at most one nomination per Pod, nominations only for Pending Runs, and
    /// the queue's indexes in step with its entries.
    fn check(&self) -> Result<(), TestCaseError> {
        self.cache
            .queue()
            .invariants()
            .map_err(TestCaseError::fail)?;
        for p in PODS {
            let used = self.used(p);
            prop_assert!(used <= self.capacity, "{} overcommitted: {}", p, used);
        }
        let nominated: Vec<&str> = self
            .cache
            .nominations()
            .in_scope(NS, RUNTIME)
            .map(|(_, n)| n.pod.as_str())
            .collect();
        let mut distinct = nominated.clone();
        distinct.sort();
        distinct.dedup();
        prop_assert_eq!(
            distinct.len(),
            nominated.len(),
            "two nominations on one Pod"
        );
        for (key, _) in self.cache.nominations().in_scope(NS, RUNTIME) {
            let r = self.runs.iter().find(|r| r.builder.key() == *key).unwrap();
            prop_assert!(r.on.is_none() && !r.done, "a placed Run keeps a nomination");
        }
        Ok(())
    }
}

/// Run `i` was placed on the state `before` (its cycle's, before Reserve): none of the
/// `earlier` Runs that waits in the queue (not backing off) may fit there.
fn check_no_earlier_fits(
    before: &SchedulerCache,
    registry: &Registry,
    runs: &[SimRun],
    earlier: impl IntoIterator<Item = usize>,
    i: usize,
    now: jiff::Timestamp,
) -> Result<(), TestCaseError> {
    for j in earlier {
        let earlier = &runs[j];
        let key = earlier.builder.key();
        if earlier.on.is_some()
            || earlier.done
            || matches!(
                before.queue().state(&key),
                None | Some(QueueState::Backoff(_))
            )
        {
            continue;
        }
        let decision = before
            .plan(registry, &earlier.builder.build(), now)
            .unwrap();
        prop_assert!(
            !matches!(decision, Decision::Schedule { .. }),
            "r{} was placed while the earlier r{} fits",
            i,
            j
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A stream of small Runs that keeps both Pods busy (arrival pattern, lifetimes and which
    /// Binds are observed late arbitrary) with one Run as large as a whole Pod in the middle:
    /// nothing overcommits, nothing is placed while an earlier Run fits, and the large Run is
    /// placed within the threshold plus the time for the Runs ahead of it and then one Pod to
    /// drain (every small Run lives at most `max_life` steps), however the small Runs keep
    /// arriving. Without nominations it would wait forever (LeastLoaded keeps both Pods in
    /// use).
    #[test]
    fn the_oldest_starved_run_is_placed_within_a_bounded_wait(
        capacity in 2u64..5,
        arrivals in proptest::collection::vec(1usize..4, 80),
        lives in proptest::collection::vec(2i64..6, 300),
        big_at in 0usize..10,
        seed in any::<u64>(),
    ) {
        let mut sim = Sim::new(capacity).with_lag(seed);
        let max_life = 5;
        let mut ahead = 0;
        let mut big = None;
        let mut life = lives.iter().cycle();
        let mut lifetime = std::collections::HashMap::new();
        for (step, n) in arrivals.iter().enumerate() {
            sim.now = step as i64;
            // Finish the Runs whose life is over, oldest first.
            for i in 0..sim.runs.len() {
                if let Some((_, started)) = sim.runs[i].on
                    && sim.now - started >= lifetime[&i]
                {
                    sim.finish(i);
                }
            }
            if step == big_at {
                ahead = sim.pending().len() as i64;
                big = Some(sim.arrive(capacity));
                lifetime.insert(big.unwrap(), 1);
            }
            for _ in 0..*n {
                let i = sim.arrive(1);
                lifetime.insert(i, *life.next().unwrap());
            }
            sim.cycle_all()?;
            let big = big.unwrap_or(usize::MAX);
            if big != usize::MAX && sim.runs[big].on.is_none() && !sim.runs[big].done {
                let waited = sim.now - big_at as i64;
                // Nominated once the threshold has passed; the Runs ahead of it go first, one
                // Pod at a time in the worst case; then its Pod drains within max_life steps
                // (no later Run may start there), plus one step to place it.
                let bound = THRESHOLD + max_life * (ahead + 2) + 2;
                prop_assert!(
                    waited <= bound,
                    "the large Run has waited {} steps (bound {}: threshold {}, {} ahead, longest life {})",
                    waited, bound, THRESHOLD, ahead, max_life
                );
            }
        }
    }

    /// Runs of mixed priorities and sizes keep both Pods busy (arrivals, lifetimes and which
    /// Binds are observed late arbitrary); a Run that does not fit preempts Scheduled Runs of
    /// lower priority as its cycle decides. At every cycle: nothing overcommits, nothing is
    /// placed while a Run earlier in (priority, creation, UID) order fits, and a Run placed on
    /// a Pod nominated for an earlier Run leaves that Run its room. Once arrivals stop, every
    /// Run is placed and finishes: a preempted Run is never stranded.
    #[test]
    fn priority_orders_placement_and_nominated_room_goes_to_no_later_run(
        capacity in 2u64..5,
        arrivals in proptest::collection::vec(
            proptest::collection::vec((1u64..5, 0usize..3), 0..3),
            1..30,
        ),
        lives in proptest::collection::vec(1i64..5, 100),
        seed in any::<u64>(),
    ) {
        const PRIORITIES: [i32; 3] = [0, 100, 1000];
        // Steps after the last arrival by which every Run must have finished.
        const AFTER: usize = 200;
        let mut sim = Sim::new(capacity).with_lag(seed);
        let mut life = lives.iter().cycle();
        let mut lifetime = std::collections::HashMap::new();
        let steps = arrivals.len() + AFTER;
        for step in 0..steps {
            sim.now = step as i64;
            sim.renew_heartbeats();
            for i in 0..sim.runs.len() {
                if let Some((_, started)) = sim.runs[i].on
                    && sim.now - started >= lifetime[&i]
                {
                    sim.finish(i);
                }
            }
            for &(size, p) in arrivals.get(step).into_iter().flatten() {
                let i = sim.arrive_at(size.min(capacity), PRIORITIES[p]);
                lifetime.insert(i, *life.next().unwrap());
            }
            sim.cycle_all()?;
            if step >= arrivals.len() && sim.runs.iter().all(|r| r.done) {
                return Ok(());
            }
        }
        let stranded: Vec<String> = sim
            .runs
            .iter()
            .filter(|r| !r.done)
            .map(|r| format!("{} (priority {}, on {:?})", r.builder.name(), r.priority, r.on))
            .collect();
        prop_assert!(false, "{} steps after the last arrival, not finished: {:?}", AFTER, stranded);
    }

    /// Runs that all fit one at a time on a single slot start in creation order, whichever
    /// Binds are observed late.
    #[test]
    fn single_slot_runs_start_in_creation_order(
        n in 2usize..12,
        seed in any::<u64>(),
    ) {
        let mut sim = Sim::new(1).with_lag(seed);
        for _ in 0..n {
            sim.arrive(1);
        }
        let mut started = Vec::new();
        for step in 0..(4 * n as i64) {
            sim.now = step;
            for i in 0..sim.runs.len() {
                if sim.runs[i].on.is_some() {
                    sim.finish(i);
                }
            }
            sim.cycle_all()?;
            for i in 0..sim.runs.len() {
                if sim.runs[i].on.as_ref().is_some_and(|(_, s)| *s == step) {
                    started.push(i);
                }
            }
        }
        prop_assert_eq!(started.len(), n);
        let mut sorted = started.clone();
        sorted.sort();
        prop_assert_eq!(started, sorted, "Runs started out of creation order");
    }
}

#[test]
fn the_order_check_catches_a_run_placed_while_an_earlier_one_fits() {
    // The property's own power: a later Run reserved while the earlier one fits must fail it.
    let mut sim = Sim::new(1);
    let (first, second) = (sim.arrive(1), sim.arrive(1));
    let before = sim.cache.clone();
    assert!(
        sim.check_no_earlier_fits(&before, second).is_err(),
        "placing r{second:04} ahead of r{first:04} passes the check"
    );
    assert!(sim.check_no_earlier_fits(&before, first).is_ok());
}

#[test]
fn the_nominated_room_check_catches_a_later_run_taking_it() {
    // The property's own power. Both Pods half full with Scheduled priority-0 Runs; an urgent
    // Run as large as a Pod preempts one of them and is nominated there.
    let mut sim = Sim::new(2);
    let low: Vec<usize> = (0..2).map(|_| sim.arrive(1)).collect();
    sim.cycle_all().unwrap();
    let urgent = sim.arrive_at(2, 1000);
    let told = sim.step().unwrap().expect("the urgent Run's cycle");
    let preemption = told.preemption.expect("a preemption");
    let victim = sim.index_of(&preemption.victims[0].name);
    assert!(low.contains(&victim) && sim.runs[victim].on.is_none());
    let before = sim.cache.clone();
    assert_eq!(
        before.nominated_pod(NS, &sim.runs[urgent].builder.key().uid),
        Some(preemption.pod.as_str())
    );
    // The victim placed back into the room held for the urgent Run must fail the check; a
    // Run of higher priority than the urgent one may take it.
    sim.in_flight.push((victim, preemption.pod.clone()));
    assert!(sim.check_nominated_room_kept(&before, victim).is_err());
    sim.in_flight.pop();
    let higher = sim.arrive_at(1, 2000);
    sim.in_flight.push((higher, preemption.pod.clone()));
    assert!(sim.check_nominated_room_kept(&before, higher).is_ok());
}

mod examples;
