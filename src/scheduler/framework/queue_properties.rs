//! Property tests of queue order and nominations: under any interleaving of arrivals,
//! releases and queue-worker orders, nothing overcommits, a Pod holds at most one nomination,
//! the oldest Run that fits goes first, and a large Run behind a stream of small ones is
//! placed within a bounded number of steps.

use proptest::prelude::*;

use super::*;
use crate::api::Run;
use crate::testing::*;

const PODS: [&str; 2] = ["p1", "p2"];
const THRESHOLD: i64 = 5;
const EPOCH: i64 = 1_700_000_000;

fn registry() -> Registry {
    crate::scheduler::plugins::registry()
}

/// One simulated Runtime: two Pods of `runs: capacity`, Runs that arrive, are cycled by the
/// queue workers in an arbitrary order, are observed bound, and finish.
struct Sim {
    cache: SchedulerCache,
    registry: Registry,
    capacity: u64,
    now: i64,
    runs: Vec<SimRun>,
}

#[derive(Clone)]
struct SimRun {
    builder: RunBuilder,
    size: u64,
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
        }
    }

    fn at(&self) -> jiff::Timestamp {
        at(self.now)
    }

    fn arrive(&mut self, size: u64) -> usize {
        let i = self.runs.len();
        let builder = run(&format!("r{i:04}"))
            .requests(&[("runs", size)])
            .created(EPOCH + self.now);
        self.cache.apply(&builder.build(), self.at());
        self.runs.push(SimRun {
            builder,
            size,
            on: None,
            done: false,
        });
        i
    }

    fn pending(&self) -> Vec<usize> {
        (0..self.runs.len())
            .filter(|&i| self.runs[i].on.is_none() && !self.runs[i].done)
            .collect()
    }

    /// One queue-worker cycle for Run `i`; a reservation is observed bound at once.
    fn cycle(&mut self, i: usize) -> Result<(), TestCaseError> {
        let r = self.runs[i].builder.build();
        let outcome = self.cache.schedule(&self.registry, &r, self.at());
        match outcome {
            ScheduleOutcome::Reserved { pod, .. } => {
                // Order: no earlier Pending Run fits right now (it would have been yielded to).
                self.check_no_earlier_fits(i)?;
                self.cache
                    .apply(&self.runs[i].builder.clone().on(&pod).build(), self.at());
                self.runs[i].on = Some((pod, self.now));
            }
            ScheduleOutcome::ReservedEarlier { run, pod, .. } => {
                let j = self.index_of(&run);
                prop_assert!(j < i, "r{} placed the later Run {}", i, run);
                prop_assert!(self.runs[j].on.is_none() && !self.runs[j].done);
                self.check_no_earlier_fits(j)?;
                self.cache
                    .apply(&self.runs[j].builder.clone().on(&pod).build(), self.at());
                self.runs[j].on = Some((pod, self.now));
            }
            ScheduleOutcome::Yield { to } => {
                let j = self.index_of(&to);
                prop_assert!(j < i, "{} yielded to a later Run {}", i, to);
                prop_assert!(self.runs[j].on.is_none() && !self.runs[j].done);
            }
            ScheduleOutcome::Unschedulable(_) => {}
            other => prop_assert!(false, "unexpected outcome {:?}", other),
        }
        self.check()
    }

    fn index_of(&self, name: &str) -> usize {
        name[1..].parse().unwrap()
    }

    fn check_no_earlier_fits(&self, i: usize) -> Result<(), TestCaseError> {
        for j in self.pending().into_iter().filter(|&j| j < i) {
            let decision = self
                .cache
                .plan(&self.registry, &self.runs[j].builder.build(), self.at())
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

    fn finish(&mut self, i: usize) {
        let r = &mut self.runs[i];
        let pod = r.on.take().unwrap().0;
        r.done = true;
        let done = r.builder.clone().on(&pod).succeeded().build();
        self.cache.apply(&done, at(self.now));
    }

    /// No overcommit, at most one nomination per Pod, nominations only for Pending Runs.
    fn check(&self) -> Result<(), TestCaseError> {
        for p in PODS {
            let used: u64 = self
                .runs
                .iter()
                .filter(|r| r.on.as_ref().is_some_and(|(on, _)| on == p))
                .map(|r| r.size)
                .sum();
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

    /// Cycles every Pending Run in the order `perm` draws; a Run whose cycle placed an
    /// earlier one is cycled again at once, as the controller requeues it.
    fn cycle_all(&mut self, perm: &mut Lcg) -> Result<(), TestCaseError> {
        let mut pending = self.pending();
        perm.shuffle(&mut pending);
        for i in pending {
            while self.runs[i].on.is_none() && !self.runs[i].done {
                let placed = self.runs.iter().filter(|r| r.on.is_some()).count();
                self.cycle(i)?;
                if self.runs.iter().filter(|r| r.on.is_some()).count() == placed {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// A tiny deterministic generator, so a failing case replays exactly.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A stream of small Runs that keeps both Pods busy (arrival pattern, lifetimes and
    /// worker orders arbitrary) with one Run as large as a whole Pod in the middle: nothing
    /// overcommits, nothing is placed while an earlier Run fits, and the large Run is placed
    /// within the threshold plus the time for the Runs ahead of it and then one Pod to drain
    /// (every small Run lives at most `max_life` steps), however the small Runs keep arriving.
    /// Without nominations it would wait forever (LeastLoaded keeps both Pods in use).
    #[test]
    fn the_oldest_starved_run_is_placed_within_a_bounded_wait(
        capacity in 2u64..5,
        arrivals in proptest::collection::vec(1usize..4, 80),
        lives in proptest::collection::vec(2i64..6, 300),
        big_at in 0usize..10,
        seed in any::<u64>(),
    ) {
        let mut sim = Sim::new(capacity);
        let mut perm = Lcg(seed);
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
            sim.cycle_all(&mut perm)?;
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

    /// Runs that all fit one at a time on a single slot start in creation order, whatever
    /// order the workers cycle them in.
    #[test]
    fn single_slot_runs_start_in_creation_order(
        n in 2usize..12,
        seed in any::<u64>(),
    ) {
        let mut sim = Sim::new(1);
        let mut perm = Lcg(seed);
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
            sim.cycle_all(&mut perm)?;
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
fn a_run_that_does_not_fit_does_not_block_the_ones_behind_it() {
    let mut sim = Sim::new(2);
    let big = sim.arrive(3);
    let small = sim.arrive(1);
    sim.cycle(small).unwrap();
    assert!(sim.runs[small].on.is_some(), "best-effort FIFO");
    sim.cycle(big).unwrap();
    assert!(sim.runs[big].on.is_none());
}

#[test]
fn a_later_runs_cycle_places_the_earlier_one_that_fits() {
    let mut sim = Sim::new(1);
    let first = sim.arrive(1);
    let second = sim.arrive(1);
    let r = sim.runs[second].builder.build();
    match sim.cache.schedule(&sim.registry, &r, sim.at()) {
        ScheduleOutcome::ReservedEarlier { run, pod, .. } => {
            assert_eq!(run, format!("r{first:04}"));
            let key = sim.runs[first].builder.key();
            assert_eq!(sim.cache.assumed().get(&key).map(|a| &a.pod), Some(&pod));
        }
        other => panic!("{other:?}"),
    }
    let key = sim.runs[second].builder.key();
    assert!(
        sim.cache.assumed().get(&key).is_none(),
        "the later Run is not placed by that cycle"
    );
}

#[test]
fn a_starved_run_is_nominated_and_later_runs_leave_its_room() {
    let mut sim = Sim::new(2);
    // Both Pods half full.
    for _ in 0..2 {
        let i = sim.arrive(1);
        sim.cycle(i).unwrap();
    }
    assert!(sim.runs.iter().all(|r| r.on.is_some()));
    let big = sim.arrive(2);
    sim.cycle(big).unwrap();
    assert!(sim.runs[big].on.is_none());
    // Past the threshold, a later small Run is placed: the big one gets a nomination.
    sim.now = THRESHOLD + 1;
    let later = sim.arrive(1);
    sim.cycle(later).unwrap();
    let key = sim.runs[big].builder.key();
    let nominated = sim
        .cache
        .nominated_pod(&key.namespace, &key.uid)
        .map(str::to_string)
        .expect("nominated");
    // The later Run went to the other Pod: the nominated one has room held for the big Run.
    let (later_pod, _) = sim.runs[later]
        .on
        .clone()
        .expect("the later Run was placed");
    assert_ne!(later_pod, nominated);
    let changes = sim.cache.take_nomination_changes();
    assert_eq!(
        changes,
        [(ScopeRef::new(NS, RUNTIME), format!("r{big:04}"))]
    );
    // The nominated Pod drains: the first Run there finishes and the big Run fits.
    let on_nominated = (0..2)
        .find(|&i| {
            sim.runs[i]
                .on
                .as_ref()
                .is_some_and(|(p, _)| *p == nominated)
        })
        .unwrap();
    sim.finish(on_nominated);
    // A later small Run's cycle places the big Run on the drained Pod, not itself.
    let another = sim.arrive(1);
    sim.cycle(another).unwrap();
    assert_eq!(
        sim.runs[big].on.as_ref().map(|(p, _)| p.clone()),
        Some(nominated)
    );
    assert!(
        sim.cache.nominations().is_empty(),
        "placed: the nomination is gone"
    );
}

#[test]
fn a_release_wakes_only_the_runs_its_room_can_help_in_order() {
    let mut sim = Sim::new(2);
    for _ in 0..4 {
        let i = sim.arrive(1);
        sim.cycle(i).unwrap();
    }
    let big = sim.arrive(2);
    let small: Vec<usize> = (0..3).map(|_| sim.arrive(1)).collect();
    sim.cycle_all(&mut Lcg(1)).unwrap();
    let p1 = sim.runs[0].on.clone().unwrap().0;
    sim.finish(0);
    let wakeup = Wakeup {
        namespace: NS.into(),
        runtime: RUNTIME.into(),
        source: WakeSource::CapacityReleased,
        pod: Some(p1),
    };
    // One slot free: the big Run does not fit it, the oldest small one does, and nothing
    // after it (the slot is taken in the walk).
    assert_eq!(
        sim.cache.woken_by(&wakeup, sim.at()),
        [format!("r{:04}", small[0])]
    );
    let _ = big;
}

#[test]
fn a_new_leader_adopts_the_nomination_recorded_in_status() {
    // Both Pods half full: the large Run fits on neither.
    let world = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 2)]),
        ])
        .runs([run("x").on("p1"), run("y").on("p2")]);
    let mut cache = world.cache();
    let mut big: Run = run("big").requests(&[("runs", 2)]).created(EPOCH).build();
    big.status
        .get_or_insert_with(Default::default)
        .nominated_pod_name = Some("p2".into());
    cache.apply(&big, NOW);
    assert_eq!(
        cache.nominated_pod(NS, &RunKey::of(&big).uid),
        Some("p2"),
        "adopted from status"
    );
    // Later Runs see p2 as full: the first goes to p1, the second waits and is told why.
    let later = run("later").created(EPOCH + 1).build();
    cache.apply(&later, NOW);
    match cache.schedule(&registry(), &later, NOW) {
        ScheduleOutcome::Reserved { pod, .. } => assert_eq!(pod, "p1"),
        other => panic!("{other:?}"),
    }
    let last = run("last").created(EPOCH + 2).build();
    cache.apply(&last, NOW);
    match cache.schedule(&registry(), &last, NOW) {
        ScheduleOutcome::Unschedulable(u) => assert_eq!(
            u.message(),
            "0/2 Runtime Pods are available: 1 Insufficient runs, 1 reserved for an earlier Run."
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_nominated_run_goes_to_its_nominated_pod_when_it_fits_there() {
    // Two empty Pods score alike; without the nomination p1 (the first name) would win.
    let mut cache = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 2)]),
        ])
        .cache();
    let mut big: Run = run("big").requests(&[("runs", 2)]).created(EPOCH).build();
    big.status
        .get_or_insert_with(Default::default)
        .nominated_pod_name = Some("p2".into());
    cache.apply(&big, NOW);
    match cache.schedule(&registry(), &big, NOW) {
        ScheduleOutcome::Reserved { pod, .. } => assert_eq!(pod, "p2"),
        other => panic!("{other:?}"),
    }
    assert!(cache.nominations().is_empty());
}

#[test]
fn after_a_placement_the_sweeper_places_what_a_second_release_freed() {
    // Both Pods full; then one slot frees on each. Each release's wakeup names only the
    // oldest Pending Run (its room fits one), so the second Run is woken by neither.
    let mut sim = Sim::new(1);
    let busy: Vec<usize> = (0..2).map(|_| sim.arrive(1)).collect();
    sim.cycle_all(&mut Lcg(7)).unwrap();
    let (first, second) = (sim.arrive(1), sim.arrive(1));
    sim.cycle_all(&mut Lcg(7)).unwrap();
    let mut woken = Vec::new();
    for &b in &busy {
        let pod = sim.runs[b].on.clone().unwrap().0;
        sim.finish(b);
        let wakeup = Wakeup {
            namespace: NS.into(),
            runtime: RUNTIME.into(),
            source: WakeSource::CapacityReleased,
            pod: Some(pod),
        };
        woken.extend(sim.cache.woken_by(&wakeup, sim.at()));
    }
    assert_eq!(woken, [format!("r{first:04}"), format!("r{first:04}")]);
    sim.cycle(first).unwrap();
    // The placement's sweep: the latest Pending Run, whose cycle finds the room.
    let sweeper = sim
        .cache
        .sweeper(NS, RUNTIME)
        .expect("a Pending Run is left");
    assert_eq!(sweeper, format!("r{second:04}"));
    sim.cycle(second).unwrap();
    assert!(sim.runs[second].on.is_some());
    assert_eq!(sim.cache.sweeper(NS, RUNTIME), None);
}

#[test]
fn a_release_wakes_past_a_run_that_affinity_may_refuse() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("x").on("p1").succeeded()])
        .cache();
    let picky = run("picky")
        .requires(&[("cohort", "a")])
        .created(EPOCH)
        .build();
    let plain = run("plain").created(EPOCH + 1).build();
    cache.apply(&picky, NOW);
    cache.apply(&plain, NOW);
    let wakeup = Wakeup {
        namespace: NS.into(),
        runtime: RUNTIME.into(),
        source: WakeSource::CapacityReleased,
        pod: Some("p1".into()),
    };
    assert_eq!(cache.woken_by(&wakeup, NOW), ["picky", "plain"]);
}

#[test]
fn a_bind_looks_again_only_at_runs_waiting_for_affinity_targets() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 4)])])
        .cache();
    let picky = run("picky").requires(&[("cohort", "a")]).created(EPOCH);
    let plain = run("plain").created(EPOCH + 1);
    cache.apply(&picky.build(), NOW);
    cache.apply(&plain.build(), NOW);
    // A Run of the cohort is observed bound: new targets, no new room.
    let changes = cache.apply(
        &run("seed").labels(&[("cohort", "a")]).on("p1").build(),
        NOW,
    );
    assert_eq!(changes.retargets, [ScopeRef::new(NS, RUNTIME)]);
    assert!(changes.rechecks.is_empty() && changes.wakeups.is_empty());
    assert_eq!(cache.retargeted(NS, RUNTIME), ["picky"]);
}

#[test]
fn a_run_being_deleted_is_not_placed_ahead_of_later_ones() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .cache();
    let first = run("first").created(EPOCH);
    let later = run("later").created(EPOCH + 1);
    cache.apply(&first.build(), NOW);
    cache.apply(&later.build(), NOW);
    // The earlier Run is being deleted (its finalizers hold it): it waits for nothing.
    cache.apply(&first.deleting().build(), NOW);
    match cache.schedule(&registry(), &later.build(), NOW) {
        ScheduleOutcome::Reserved { pod, .. } => assert_eq!(pod, "p1"),
        other => panic!("{other:?}"),
    }
}
