//! Builds the pool view ([`Status`]) from listed objects by replaying the scheduler's own
//! cycle for every Pending Run.
//!
//! It must not re-implement a scheduling rule: one cache from the replay's objects
//! ([`crate::cmd::replay::Objects::cache`], as `explain` builds it), [`evaluate`] with the scheduler's [`Registry`] for each Pending Run
//! (once per distinct request shape and place among the nominations in a Runtime), the
//! Pending message from [`crate::scheduler::framework::Unschedulable::message`] and Pod availability from
//! [`runtime_pod_availability::unavailable`]; who leads the scheduler from
//! [`crate::cmd::replay::leader::judge`]; each active WorkflowRun's view from
//! [`workflow_run::report`], with the verdicts replayed here for its Pending step Runs. It is
//! pure: no client, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::ResourceExt;

pub use super::model::*;
use crate::api::{LABEL_RUNTIME, LABEL_WORKFLOW_RUN_UID, Run, RunPhase, WorkspacePhase};
use crate::cmd::replay::workflow_run::{self, is_step_run_of};
use crate::scheduler::framework::{
    CycleError, Decision, Registry, RunKey, SchedulerCache, Snapshot, evaluate,
};
use crate::scheduler::plugins::runtime_pod_availability;

/// The reason of a Pending Run the scheduler would place right now (it has not yet).
pub const FITS_NOW: &str = "fits now";
/// The reason of a Pending Run of a Runtime without any Runtime Pod.
pub const NO_PODS: &str = "no Runtime Pods";
/// The reason of a Pending Run whose Runtime does not exist.
pub const RUNTIME_NOT_FOUND: &str = "Runtime not found";

/// Replays the scheduler for every Pending Run of `pool` and summarizes each Runtime. The only
/// error is a Score plugin failure, which the scheduler would retry.
pub fn build(pool: &Pool, registry: &Registry) -> Result<Status, CycleError> {
    let cache = pool.objects.cache();
    // Every (namespace, runtime) a Runtime, a Runtime Pod or a Run names.
    let mut keys: BTreeSet<(String, String)> = BTreeSet::new();
    for r in &pool.objects.runtimes {
        keys.insert((r.namespace().unwrap_or_default(), r.name_any()));
    }
    for p in &pool.objects.pods {
        if let Some(rt) = p.labels().get(LABEL_RUNTIME) {
            keys.insert((p.namespace().unwrap_or_default(), rt.clone()));
        }
    }
    let mut runs_by_scope: HashMap<(String, String), Vec<&Run>> = HashMap::new();
    for run in &pool.objects.runs {
        let key = (
            run.namespace().unwrap_or_default(),
            run.spec.runtime.clone(),
        );
        keys.insert(key.clone());
        runs_by_scope.entry(key).or_default().push(run);
    }
    if let Some(only) = &pool.runtime {
        keys.retain(|(_, rt)| rt == only);
    }
    // The active WorkflowRuns' UIDs: the verdicts of their Pending step Runs are kept for the
    // workflow view.
    let active: BTreeSet<String> = match pool.runtime {
        Some(_) => BTreeSet::new(),
        None => pool
            .objects
            .workflow_runs
            .iter()
            .filter(|w| !w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
            .filter_map(|w| w.uid())
            .collect(),
    };
    let mut verdicts = Verdicts {
        workflow_runs: &active,
        kept: BTreeMap::new(),
    };
    let mut runtimes = Vec::with_capacity(keys.len());
    for (namespace, name) in keys {
        let runs = runs_by_scope
            .remove(&(namespace.clone(), name.clone()))
            .unwrap_or_default();
        runtimes.push(runtime_status(
            pool,
            &cache,
            registry,
            &namespace,
            &name,
            &runs,
            &mut verdicts,
        )?);
    }
    let workflow_runs = workflow_views(pool, &active, verdicts.kept);
    Ok(Status {
        schema_version: SCHEMA_VERSION,
        now: pool.objects.now,
        namespace: pool.namespace.clone(),
        scheduler: crate::cmd::replay::leader::judge(
            &pool.objects.scheduler_lease,
            pool.namespace.as_deref(),
            pool.objects.now,
        ),
        runtimes,
        workflow_runs,
    })
}

/// The Pending verdicts kept for the workflow view: those of the step Runs of the active
/// WorkflowRuns (by UID), by (namespace, Run name).
struct Verdicts<'a> {
    workflow_runs: &'a BTreeSet<String>,
    kept: BTreeMap<(String, String), String>,
}

impl Verdicts<'_> {
    fn keep(&mut self, run: &Run, message: &str) {
        let Some(uid) = run.labels().get(LABEL_WORKFLOW_RUN_UID) else {
            return;
        };
        if self.workflow_runs.contains(uid) {
            let key = (run.namespace().unwrap_or_default(), run.name_any());
            self.kept.insert(key, message.to_string());
        }
    }
}

/// The view of each active WorkflowRun (UIDs `active`), from its step Runs and the verdicts
/// replayed for the Pending ones.
fn workflow_views(
    pool: &Pool,
    active: &BTreeSet<String>,
    mut verdicts: BTreeMap<(String, String), String>,
) -> Vec<WorkflowRunReport> {
    // The step Runs of each active WorkflowRun, in one pass over the Runs.
    let mut step_runs: HashMap<(String, String), BTreeMap<String, Run>> = HashMap::new();
    for run in &pool.objects.runs {
        let Some(uid) = run.labels().get(LABEL_WORKFLOW_RUN_UID) else {
            continue;
        };
        if active.contains(uid) && is_step_run_of(run, uid) {
            step_runs
                .entry((run.namespace().unwrap_or_default(), uid.clone()))
                .or_default()
                .insert(run.name_any(), run.clone());
        }
    }
    let mut views: Vec<WorkflowRunReport> = pool
        .objects
        .workflow_runs
        .iter()
        .filter(|w| w.uid().is_some_and(|uid| active.contains(&uid)))
        .map(|w| {
            let (uid, ns) = (
                w.uid().unwrap_or_default(),
                w.namespace().unwrap_or_default(),
            );
            let runs = step_runs.remove(&(ns.clone(), uid)).unwrap_or_default();
            let said: BTreeMap<String, String> = runs
                .keys()
                .filter_map(|name| {
                    let verdict = verdicts.remove(&(ns.clone(), name.clone()))?;
                    Some((name.clone(), verdict))
                })
                .collect();
            workflow_run::report(w, &runs, &said)
        })
        .collect();
    views.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    views
}

fn runtime_status(
    pool: &Pool,
    cache: &SchedulerCache,
    registry: &Registry,
    namespace: &str,
    name: &str,
    runs: &[&Run],
    workflow_verdicts: &mut Verdicts<'_>,
) -> Result<RuntimeStatus, CycleError> {
    let runtime = pool
        .objects
        .runtimes
        .iter()
        .find(|r| r.namespace().as_deref() == Some(namespace) && r.name_any() == name);
    let snapshot = cache.snapshot(namespace, name, pool.objects.now);

    let mut pods = PodCounts::default();
    let mut unavailable: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut resources: BTreeMap<String, (Option<u64>, u64)> = BTreeMap::new();
    for view in snapshot.pods() {
        pods.total += 1;
        pods.ready += usize::from(view.ready());
        match runtime_pod_availability::unavailable(&view, pool.objects.now) {
            None => pods.available += 1,
            Some(reason) => *unavailable.entry(reason).or_default() += 1,
        }
        if view.deleting() {
            continue;
        }
        let Ok(capacity) = view.capacity() else {
            continue;
        };
        for (resource, amount) in capacity.iter() {
            let used = view.used(resource);
            let entry = resources
                .entry(resource.to_string())
                .or_insert((Some(0), 0));
            entry.0 = match (entry.0, used) {
                (_, u64::MAX) | (None, _) => None,
                (Some(total), used) => Some(total.saturating_add(used)),
            };
            entry.1 = entry.1.saturating_add(amount);
        }
    }
    pods.unavailable = sorted_counts(unavailable.into_iter().map(|(r, c)| (r.to_string(), c)));

    let mut phases = PhaseCounts::default();
    for run in runs {
        match run.phase() {
            RunPhase::Pending => phases.pending += 1,
            RunPhase::Scheduled => phases.scheduled += 1,
            RunPhase::Running => phases.running += 1,
            RunPhase::Ready => phases.ready += 1,
            RunPhase::Succeeded => phases.succeeded += 1,
            RunPhase::Failed => phases.failed += 1,
            RunPhase::Timeout => phases.timeout += 1,
            RunPhase::Cancelled => phases.cancelled += 1,
        }
    }

    // One cycle per distinct verdict key: Runs alike in everything the cycle reads of them
    // get the same verdict, so 10,000 identical Pending Runs cost one evaluation, or one per
    // stretch of the queue between nominated Runs.
    let nominated = nominated_pods(cache, namespace, name);
    let mut verdicts: HashMap<VerdictKey<'_>, (Vec<String>, String)> = HashMap::new();
    let mut by_reason: HashMap<String, usize> = HashMap::new();
    let mut by_message: HashMap<String, usize> = HashMap::new();
    let mut by_priority: BTreeMap<i32, usize> = BTreeMap::new();
    let mut pending = PendingDemand::default();
    for run in runs.iter().filter(|r| r.waits_for_placement()) {
        let key = VerdictKey::of(&snapshot, &nominated, run);
        let priority = key.priority;
        let (reasons, message) = match verdicts.get(&key) {
            Some(v) => v.clone(),
            None => {
                let eval = evaluate(&snapshot, registry, &cache.queued(run))?;
                let verdict = match eval.decision() {
                    Decision::Schedule { .. } => (
                        vec![FITS_NOW.to_string()],
                        "Fits: not yet placed.".to_string(),
                    ),
                    Decision::Unschedulable(u) => {
                        // A Run waiting for its PriorityClass was not evaluated: no
                        // histogram, but not for want of Pods.
                        let reasons = if u.missing_class.is_some() {
                            vec![u.reason().to_string()]
                        } else if u.missing_runtime.is_some() {
                            vec![RUNTIME_NOT_FOUND.to_string()]
                        } else if u.histogram.is_empty() {
                            vec![NO_PODS.to_string()]
                        } else {
                            u.histogram.iter().map(|c| c.text()).collect()
                        };
                        (reasons, u.message())
                    }
                    Decision::Invalid { reason, message } => {
                        (vec![reason.to_string()], format!("{reason}: {message}"))
                    }
                };
                verdicts.insert(key, verdict.clone());
                verdict
            }
        };
        pending.runs += 1;
        workflow_verdicts.keep(run, &message);
        for reason in reasons {
            *by_reason.entry(reason).or_default() += 1;
        }
        *by_message.entry(message).or_default() += 1;
        if let Some(priority) = priority {
            *by_priority.entry(priority).or_default() += 1;
        }
        if let Some(created) = run.metadata.creation_timestamp.as_ref().map(|t| t.0)
            && pending.oldest_created.is_none_or(|o| created < o)
        {
            pending.oldest_created = Some(created);
        }
    }
    pending.oldest_wait_seconds = pending
        .oldest_created
        .map(|t| pool.objects.now.duration_since(t).as_secs().max(0));
    pending.by_reason = sorted_counts(by_reason);
    pending.by_message = sorted_counts(by_message)
        .into_iter()
        .map(|c| MessageCount {
            message: c.reason,
            runs: c.count,
        })
        .collect();
    let standings = cache.standings(&crate::scheduler::framework::ScopeRef::new(namespace, name));
    if standings.len() > 1 {
        pending.by_group = standings
            .into_iter()
            .map(|s| GroupShare {
                group: s.group.as_str().to_string(),
                share: s.share,
                weight: s.weight,
                runs: s.pending,
            })
            .collect();
    }
    pending.by_priority = by_priority
        .into_iter()
        .rev()
        .map(|(priority, runs)| PriorityCount { priority, runs })
        .collect();

    Ok(RuntimeStatus {
        namespace: namespace.to_string(),
        name: name.to_string(),
        found: runtime.is_some(),
        replicas: runtime.map(|r| r.spec.replicas),
        pods,
        resources: resources
            .into_iter()
            .map(|(name, (used, capacity))| ResourceStatus {
                name,
                used,
                capacity,
            })
            .collect(),
        runs: phases,
        pending,
        workspaces: workspace_counts(pool, namespace, name),
        replica_failure: runtime.and_then(crate::api::replica_failure),
        updated: runtime
            .and_then(|r| r.status.as_ref())
            .and_then(|s| s.updated_replicas.filter(|u| *u < s.replicas)),
    })
}

/// Everything a cycle reads of a Pending Run: Runs of equal keys get the same verdict, so one
/// evaluation serves them all. (The cycle also leaves the Run's own usage and assumption out,
/// but a Run waiting for placement has neither, and a listed cache holds no assumptions.)
#[derive(Debug, PartialEq, Eq, Hash)]
struct VerdictKey<'a> {
    /// What PreFilter reads of the object: requests, affinity, labels, workspace, class and
    /// `spec.cancelRequested`.
    shape: String,
    /// The nominated Pods whose held room counts against the Run, as the snapshot sees them
    /// for it: only nominations of Runs earlier in the queue hold room, so Runs of one shape
    /// either side of a nominated Run see different Pods.
    held: Vec<&'a str>,
    /// The resolved priority: a recorded `status.priority` stands even when the class is gone,
    /// and only a Run without one waits for a missing class. `None` for that wait.
    priority: Option<i32>,
}

impl<'a> VerdictKey<'a> {
    /// `nominated` is [`nominated_pods`] of the snapshot's scope.
    fn of(snapshot: &Snapshot<'_>, nominated: &[&'a str], run: &Run) -> Self {
        let shape = serde_json::to_string(&(
            &run.spec.resources,
            &run.spec.affinity,
            run.labels(),
            &run.spec.workspace,
            &run.spec.priority_class_name,
            run.spec.cancel_requested,
        ))
        .unwrap_or_default();
        // Ask the snapshot rather than compare queue orders here: whose nomination counts
        // against whom is its rule, and this is what Filter and Score are then given.
        let key = RunKey::of(run);
        let held = nominated
            .iter()
            .copied()
            .filter(|pod| {
                snapshot
                    .pod_seen_by(pod, &key)
                    .is_some_and(|view| view.nomination().is_some())
            })
            .collect();
        VerdictKey {
            shape,
            held,
            priority: snapshot.priority_of(run).ok(),
        }
    }
}

/// The Pods nominated in (namespace, runtime), in name order so keys compare equal: at most
/// one nomination per Pod, and few of them, so a Run's key costs a lookup per nomination.
fn nominated_pods<'a>(
    cache: &'a SchedulerCache,
    namespace: &'a str,
    runtime: &'a str,
) -> Vec<&'a str> {
    let mut pods: Vec<&str> = cache
        .nominations()
        .in_scope(namespace, runtime)
        .map(|(_, n)| n.pod.as_str())
        .collect();
    pods.sort_unstable();
    pods
}

/// The Runtime's PersistentWorkspaces by phase.
fn workspace_counts(pool: &Pool, namespace: &str, runtime: &str) -> WorkspaceCounts {
    let mut counts = WorkspaceCounts::default();
    for w in pool
        .objects
        .workspaces
        .iter()
        .filter(|w| w.namespace().as_deref() == Some(namespace) && w.spec.runtime == runtime)
    {
        *match w.phase() {
            WorkspacePhase::Pending => &mut counts.pending,
            WorkspacePhase::Bound => &mut counts.bound,
            WorkspacePhase::Lost => &mut counts.lost,
            WorkspacePhase::Released => &mut counts.released,
        } += 1;
    }
    counts
}

/// By count (descending), then text.
fn sorted_counts(counts: impl IntoIterator<Item = (String, usize)>) -> Vec<ReasonCount> {
    let mut v: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, count)| ReasonCount { reason, count })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    v
}

#[cfg(test)]
mod tests;
