//! Property tests that drive [`plan`] and [`derive`] through whole WorkflowRuns of random job
//! graphs and step outcomes, with the controller's effects simulated: every job runs only
//! after all its needs succeeded, a failed need skips its dependents (and they never get a
//! Run), no step gets two Runs, steps run in order, the WorkflowRun is accepted once and ends in
//! the phase its jobs give. The mutant tests show the check rejects planners that break each
//! rule.

use super::*;

/// A random WorkflowRun: jobs `j0…` (a job needs only earlier ones, so no cycle), each with
/// one to three steps, and whether each step's Run succeeds.
#[derive(Clone, Debug)]
struct World {
    jobs: BTreeMap<String, JobSpec>,
    succeeds: BTreeMap<(String, usize), bool>,
    /// Which running Run ends next, as indexes into those running.
    order: Vec<usize>,
}

fn world() -> impl Strategy<Value = World> {
    let job = (
        any::<u8>(),
        1..4usize,
        proptest::collection::vec(prop::bool::weighted(0.8), 3),
    );
    (
        proptest::collection::vec(job, 1..6),
        proptest::collection::vec(0..8usize, 1..12),
    )
        .prop_map(|(jobs, order)| {
            let mut specs = BTreeMap::new();
            let mut succeeds = BTreeMap::new();
            for (i, (needs, steps, outcomes)) in jobs.into_iter().enumerate() {
                let name = format!("j{i}");
                let needs: Vec<String> = (0..i)
                    .filter(|n| needs & (1 << (n % 8)) != 0)
                    .map(|n| format!("j{n}"))
                    .collect();
                let steps: Vec<StepSpec> =
                    (0..steps).map(|s| step(&format!("s{s}"), "true")).collect();
                for (s, ok) in outcomes.into_iter().enumerate().take(steps.len()) {
                    succeeds.insert((name.clone(), s), ok);
                }
                let spec = JobSpec {
                    runs_on: "bash".into(),
                    needs,
                    steps,
                    ..JobSpec::default()
                };
                specs.insert(name, spec);
            }
            World {
                jobs: specs,
                succeeds,
                order,
            }
        })
}

/// What happened in one simulated WorkflowRun.
#[derive(Debug, Default)]
struct Trace {
    /// Each Run created: its step, and the status the planner saw when it asked for it.
    starts: Vec<(StepKey, WorkflowRunStatus)>,
    accepts: usize,
    last: WorkflowRunStatus,
}

type Planner = fn(&WorkflowRunSpec, &WorkflowRunStatus, Option<&Snapshot>, &Children) -> Plan;
type StepRunner = fn(
    &WorkflowRun,
    &WorkflowRunStatus,
    &Snapshot,
    &Children,
    &str,
    usize,
    Option<usize>,
) -> Result<StepRun, String>;

/// The pure core under test: what to do next, and what a step's Run is.
#[derive(Clone, Copy)]
struct Core {
    plan: Planner,
    step_run: StepRunner,
}

const REAL: Core = Core {
    plan: plan::plan,
    step_run: plan::step_run,
};

/// Runs the WorkflowRun of `world` to its end as the controller would: derive, plan, and carry
/// the plan out (accept, create Runs); when it waits, one running Run ends (chosen by the
/// world's order) as the world says.
fn simulate(world: &World, core: Core) -> Trace {
    let wfr = workflow_run(world.jobs.clone());
    let snapshot = Snapshot {
        spec: wfr.spec.clone(),
        ..Snapshot::default()
    };
    let mut trace = Trace::default();
    let mut status = WorkflowRunStatus::default();
    let mut runs: BTreeMap<StepKey, Run> = BTreeMap::new();
    let mut created: BTreeSet<StepKey> = BTreeSet::new();
    let mut ends = world.order.iter().cycle();
    for _ in 0..200 {
        let snapshot_now = status.jobs.is_some().then_some(&snapshot);
        let children = Children::new(runs.values(), vec![]);
        derive(&wfr.spec, &mut status, snapshot_now, &children);
        if status.phase.is_terminal() {
            break;
        }
        match (core.plan)(&wfr.spec, &status, snapshot_now, &children) {
            Plan::Accept => {
                trace.accepts += 1;
                accept(&mut status, &snapshot, "wfr-snapshot", Some(1), &now());
            }
            Plan::Start(targets) => {
                let mut made = Vec::new();
                for target in targets {
                    let Target::Step { job, step, .. } = target else {
                        continue;
                    };
                    let name = match (core.step_run)(
                        &wfr, &status, &snapshot, &children, &job, step, None,
                    ) {
                        Ok(StepRun::Create(run)) => {
                            let key = (
                                job.clone(),
                                world.jobs[&job].steps[step].name.clone(),
                                String::new(),
                            );
                            trace.starts.push((key.clone(), status.clone()));
                            let name = run.metadata.name.clone().unwrap();
                            // A create that finds the Run there takes it, as the API does.
                            if created.insert(key.clone()) {
                                made.push((key, *run));
                            }
                            name
                        }
                        Ok(StepRun::Exists(name)) => name,
                        Err(why) => panic!("a step of true cannot fail to resolve: {why}"),
                    };
                    plan::started_step(&mut status, &job, step, None, &name);
                }
                runs.extend(made);
            }
            Plan::Wait | Plan::CancelChildren => {
                let running: Vec<StepKey> = runs
                    .iter()
                    .filter(|(_, r)| r.status.is_none())
                    .map(|(k, _)| k.clone())
                    .collect();
                if running.is_empty() {
                    break;
                }
                let key = &running[ends.next().unwrap() % running.len()];
                let index: usize = key.1[1..].parse().unwrap();
                let ok = world.succeeds[&(key.0.clone(), index)];
                let phase = if ok {
                    RunPhase::Succeeded
                } else {
                    RunPhase::Failed
                };
                let run = ended(&runs[key], phase, &[]);
                runs.insert(key.clone(), run);
            }
        }
    }
    trace.last = status;
    trace
}

/// The rules, checked against what `world` says and what the trace shows.
fn check(world: &World, trace: &Trace) -> Result<(), TestCaseError> {
    prop_assert_eq!(trace.accepts, 1, "accepted once");
    let mut seen = BTreeSet::new();
    for ((job, step, _), status) in &trace.starts {
        prop_assert!(
            seen.insert((job.clone(), step.clone())),
            "{job}/{step} got a second Run"
        );
        let jobs = status.jobs.as_ref().unwrap();
        for need in &world.jobs[job].needs {
            prop_assert_eq!(
                jobs[need].phase,
                JobPhase::Succeeded,
                "{}/{} started while its need {} was {:?}",
                job,
                step,
                need,
                jobs[need].phase
            );
        }
        let index: usize = step[1..].parse().unwrap();
        if index > 0 {
            let before = &jobs[job].steps[index - 1];
            prop_assert_eq!(
                before.phase,
                StepPhase::Succeeded,
                "{}/{} started before its previous step",
                job,
                step
            );
        }
    }
    let last = &trace.last;
    prop_assert!(
        last.phase.is_terminal(),
        "the WorkflowRun never ended: {:?}",
        last
    );
    let jobs = last.jobs.as_ref().unwrap();
    let mut expected = BTreeMap::new();
    for (name, spec) in &world.jobs {
        let blocked = spec
            .needs
            .iter()
            .any(|n| matches!(expected.get(n), Some(JobPhase::Failed | JobPhase::Skipped)));
        let phase = if blocked {
            JobPhase::Skipped
        } else if (0..spec.steps.len()).all(|s| world.succeeds[&(name.clone(), s)]) {
            JobPhase::Succeeded
        } else {
            JobPhase::Failed
        };
        expected.insert(name.clone(), phase);
        prop_assert_eq!(jobs[name].phase, phase, "job {}", name);
        if phase == JobPhase::Skipped {
            prop_assert!(
                !trace.starts.iter().any(|((j, _, _), _)| j == name),
                "skipped job {name} got a Run"
            );
        }
    }
    let failed = expected.values().any(|p| *p == JobPhase::Failed);
    let want = if failed {
        WorkflowPhase::Failed
    } else {
        WorkflowPhase::Succeeded
    };
    prop_assert_eq!(last.phase, want);
    Ok(())
}

proptest! {
    #[test]
    fn every_workflow_run_follows_its_needs_and_ends_as_its_jobs_say(world in world()) {
        check(&world, &simulate(&world, REAL))?;
    }
}

/// `check` over the property's own cases with a mutated `core` in place of the real one: the
/// failure it finds, or a panic when the mutant survives.
fn mutant_fails(core: Core) -> String {
    let mut runner = TestRunner::deterministic();
    match runner.run(&world(), |world| check(&world, &simulate(&world, core))) {
        Err(TestError::Fail(reason, _)) => reason.to_string(),
        other => panic!("the mutant survived: {other:?}"),
    }
}

/// Starts every job's first unstarted step at once, needs or not.
fn ignores_needs(
    spec: &WorkflowRunSpec,
    status: &WorkflowRunStatus,
    snapshot: Option<&Snapshot>,
    children: &Children,
) -> Plan {
    let (Some(jobs), Some(_)) = (status.jobs.as_ref(), snapshot) else {
        return plan::plan(spec, status, snapshot, children);
    };
    let targets: Vec<Target> = jobs
        .iter()
        .filter(|(_, j)| matches!(j.phase, JobPhase::Pending | JobPhase::Waiting))
        .map(|(name, _)| Target::Step {
            job: name.clone(),
            step: 0,
            action_step: None,
        })
        .collect();
    if targets.is_empty() {
        plan::plan(spec, status, snapshot, children)
    } else {
        Plan::Start(targets)
    }
}

/// Starts a running job's current step again, as a planner that forgot its Run would.
fn starts_twice(
    spec: &WorkflowRunSpec,
    status: &WorkflowRunStatus,
    snapshot: Option<&Snapshot>,
    children: &Children,
) -> Plan {
    let again = status.jobs.iter().flatten().find_map(|(name, j)| {
        let step = j.steps.iter().position(|s| s.phase == StepPhase::Running)?;
        Some(Target::Step {
            job: name.clone(),
            step,
            action_step: None,
        })
    });
    match (again, plan::plan(spec, status, snapshot, children)) {
        (Some(target), Plan::Start(mut targets)) => {
            targets.push(target);
            Plan::Start(targets)
        }
        (Some(target), Plan::Wait) => Plan::Start(vec![target]),
        (_, plan) => plan,
    }
}

/// Runs the jobs behind a failure too: starts a Skipped job as if it were ready.
fn runs_skipped(
    spec: &WorkflowRunSpec,
    status: &WorkflowRunStatus,
    snapshot: Option<&Snapshot>,
    children: &Children,
) -> Plan {
    let mut unskipped = status.clone();
    for job in unskipped.jobs.iter_mut().flat_map(|j| j.values_mut()) {
        if job.phase == JobPhase::Skipped {
            job.phase = JobPhase::Pending;
            job.pre.clear();
        }
    }
    plan::plan(spec, &unskipped, snapshot, children)
}

#[test]
fn the_property_fails_for_a_planner_that_ignores_needs() {
    let reason = mutant_fails(Core {
        plan: ignores_needs,
        ..REAL
    });
    assert!(reason.contains("while its need"), "{reason}");
}

#[test]
fn the_property_fails_for_a_planner_that_starts_a_step_twice() {
    // Both guards broken: the planner asks again, and the step's Run is made without looking
    // for the one it has (either alone is caught by the other).
    fn forgets_its_runs(
        wfr: &WorkflowRun,
        status: &WorkflowRunStatus,
        snapshot: &Snapshot,
        _: &Children,
        job: &str,
        step: usize,
        action_step: Option<usize>,
    ) -> Result<StepRun, String> {
        plan::step_run(
            wfr,
            status,
            snapshot,
            &Children::default(),
            job,
            step,
            action_step,
        )
    }
    let reason = mutant_fails(Core {
        plan: starts_twice,
        step_run: forgets_its_runs,
    });
    assert!(reason.contains("got a second Run"), "{reason}");
}

#[test]
fn the_property_fails_for_a_planner_that_runs_skipped_jobs() {
    let reason = mutant_fails(Core {
        plan: runs_skipped,
        ..REAL
    });
    assert!(
        reason.contains("while its need") || reason.contains("got a Run"),
        "{reason}"
    );
}

#[test]
fn the_property_fails_for_a_planner_that_accepts_twice() {
    fn accepts_again(
        spec: &WorkflowRunSpec,
        status: &WorkflowRunStatus,
        snapshot: Option<&Snapshot>,
        children: &Children,
    ) -> Plan {
        match plan::plan(spec, status, snapshot, children) {
            Plan::Wait if status.phase == WorkflowPhase::Running => Plan::Accept,
            plan => plan,
        }
    }
    let reason = mutant_fails(Core {
        plan: accepts_again,
        ..REAL
    });
    assert!(reason.contains("accepted once"), "{reason}");
}
