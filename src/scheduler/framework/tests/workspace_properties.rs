//! Property test of bound workspace placement: under any interleaving of cycles, binds,
//! failed binds, ends and leader failovers, the Runs that share a PersistentWorkspace never
//! hold two Pods, and the persisted binding (written before a Run's Bind, as the controller
//! does) always names their Pod; capacity is never overcommitted.

use std::collections::BTreeSet;

use proptest::prelude::*;

use crate::scheduler::framework::*;
use crate::testing::*;

const POD_NAMES: [&str; 3] = ["p1", "p2", "p3"];
const RUNS: usize = 6;
const WS: &str = "ws";

#[derive(Debug, Clone)]
enum Event {
    /// One pop of the queue.
    Cycle,
    /// The controller writes the binding (for a workspace Run) and then the Bind lands.
    Bind(usize),
    /// The binding is written but the Bind fails: the reservation is released.
    BindFails(usize),
    /// The Run ends.
    Ends(usize),
    /// A new leader: its cache is rebuilt from what the API holds. Binds in flight land when
    /// the flag says so, else they are lost (their binding written or not, by the second).
    Failover(bool, bool),
}

fn event() -> impl Strategy<Value = Event> {
    let i = 0..RUNS;
    prop_oneof![
        4 => Just(Event::Cycle),
        3 => i.clone().prop_map(Event::Bind),
        1 => i.clone().prop_map(Event::BindFails),
        2 => i.prop_map(Event::Ends),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(a, b)| Event::Failover(a, b)),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Pending,
    Assumed(usize),
    Active(usize),
    Done,
}

/// What the API server holds, and the leader's cache over it.
struct Model {
    pods: Vec<PodBuilder>,
    runs: Vec<RunBuilder>,
    at: Vec<At>,
    /// The workspace's persisted `status.boundPod`.
    bound: Option<usize>,
    cache: SchedulerCache,
}

impl Model {
    fn workspace(&self) -> WorkspaceBuilder {
        match self.bound {
            Some(p) => workspace(WS).bound(POD_NAMES[p]),
            None => workspace(WS),
        }
    }

    /// The API's view of Run `i`.
    fn observed(&self, i: usize) -> RunBuilder {
        let r = self.runs[i].clone();
        match self.at[i] {
            At::Pending | At::Assumed(_) => r,
            At::Active(p) => r.on(POD_NAMES[p]),
            At::Done => r.succeeded(),
        }
    }

    fn rebuild(&mut self) {
        let runs: Vec<RunBuilder> = (0..RUNS).map(|i| self.observed(i)).collect();
        self.cache = World::new()
            .pods(self.pods.clone())
            .runs(runs)
            .workspaces([self.workspace()])
            .cache();
    }

    fn persist(&mut self, p: usize) -> Result<(), TestCaseError> {
        match self.bound {
            None => {
                self.bound = Some(p);
                self.cache.apply(&self.workspace().build(), NOW);
            }
            Some(b) => prop_assert_eq!(b, p, "a Bind against another Pod's binding"),
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn runs_sharing_a_workspace_never_hold_two_pods(
        capacities in proptest::collection::vec(1u64..3, 3),
        uses_workspace in proptest::collection::vec(proptest::bool::weighted(0.7), RUNS),
        events in proptest::collection::vec(event(), 0..60),
    ) {
        let pods: Vec<PodBuilder> = POD_NAMES
            .iter()
            .zip(&capacities)
            .map(|(n, runs)| pod(n).capacity(&[("runs", *runs)]))
            .collect();
        let runs: Vec<RunBuilder> = uses_workspace
            .iter()
            .enumerate()
            .map(|(i, ws)| {
                let r = run(&format!("r{i}"));
                if *ws { r.workspace(WS) } else { r }
            })
            .collect();
        let mut m = Model {
            pods,
            runs,
            at: vec![At::Pending; RUNS],
            bound: None,
            cache: SchedulerCache::new(),
        };
        m.rebuild();
        let registry = crate::scheduler::plugins::registry();

        for event in events {
            match event {
                Event::Cycle => {
                    if let Some(s) = m.cache.schedule_next(&registry, NOW) {
                        let i: usize = s.run.metadata.name.as_deref().unwrap()[1..].parse().unwrap();
                        prop_assert_eq!(m.at[i], At::Pending);
                        match &s.outcome {
                            ScheduleOutcome::Reserved { pod, .. } => {
                                let p = POD_NAMES.iter().position(|n| n == pod).unwrap();
                                m.at[i] = At::Assumed(p);
                            }
                            ScheduleOutcome::Unschedulable(_) => {}
                            other => prop_assert!(false, "{other:?}"),
                        }
                    }
                }
                Event::Bind(i) => {
                    if let At::Assumed(p) = m.at[i] {
                        if uses_workspace[i] {
                            m.persist(p)?;
                        }
                        m.at[i] = At::Active(p);
                        m.cache.apply(&m.observed(i).build(), NOW);
                    }
                }
                Event::BindFails(i) => {
                    if let At::Assumed(p) = m.at[i] {
                        if uses_workspace[i] {
                            m.persist(p)?;
                        }
                        m.at[i] = At::Pending;
                        m.cache.release(NS, &m.runs[i].key().uid, NOW);
                    }
                }
                Event::Ends(i) => {
                    if let At::Active(_) = m.at[i] {
                        m.at[i] = At::Done;
                        m.cache.apply(&m.observed(i).build(), NOW);
                    }
                }
                Event::Failover(land, persisted) => {
                    for (i, uses) in uses_workspace.iter().enumerate() {
                        if let At::Assumed(p) = m.at[i] {
                            if *uses && (land || persisted) {
                                m.persist(p)?;
                            }
                            m.at[i] = if land { At::Active(p) } else { At::Pending };
                        }
                    }
                    m.rebuild();
                }
            }

            // One Pod at most for the workspace, and the persisted binding names it.
            let mut held: BTreeSet<usize> = (0..RUNS)
                .filter(|&i| uses_workspace[i])
                .filter_map(|i| match m.at[i] {
                    At::Assumed(p) | At::Active(p) => Some(p),
                    _ => None,
                })
                .collect();
            held.extend(m.bound);
            prop_assert!(held.len() <= 1, "the workspace's Runs hold {:?}", held);
            // Capacity holds on every Pod.
            for (p, cap) in capacities.iter().enumerate() {
                let used = m.at.iter().filter(|a| matches!(a, At::Assumed(q) | At::Active(q) if *q == p)).count() as u64;
                prop_assert!(used <= *cap, "{} overcommitted: {} > {}", POD_NAMES[p], used, cap);
            }
        }
    }
}
